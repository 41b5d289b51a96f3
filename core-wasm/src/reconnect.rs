//! [`ReconnectSchedule`]: core's backoff for the page, so the browser
//! reconnects on the same schedule as the native receiver.

use linkfs_core::{Backoff, BackoffConfig, Millis, Retry};
use wasm_bindgen::prelude::*;

/// When to try a new data link after one was lost.
#[wasm_bindgen]
pub struct ReconnectSchedule {
    backoff: Backoff,
}

#[wasm_bindgen]
impl ReconnectSchedule {
    /// `seed` spreads retries of many pages (any number, e.g. from Math.random).
    #[wasm_bindgen(constructor)]
    pub fn new(seed: f64) -> ReconnectSchedule {
        ReconnectSchedule {
            backoff: Backoff::new(BackoffConfig::default(), seed.to_bits()),
        }
    }

    /// The link was lost or an attempt failed at `now_ms`: milliseconds to wait
    /// before the next attempt, or `undefined` to give up.
    pub fn failed(&mut self, now_ms: f64) -> Option<f64> {
        let now = Millis(now_ms.max(0.0) as u64);
        match self.backoff.failed(now) {
            Retry::At(t) => Some(t.0.saturating_sub(now.0) as f64),
            Retry::GiveUp => None,
        }
    }

    /// A new link works.
    pub fn succeeded(&mut self) {
        self.backoff.succeeded();
    }
}
