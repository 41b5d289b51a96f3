//! linkfs in the browser: a thin wasm-bindgen layer over `linkfs-core`.
//!
//! Two classes, for the two places the web app runs code:
//!
//! - [`connection::Connection`] on the page: signaling through the relay's
//!   WebSocket (payloads sealed with the link's secret) and the browser's own
//!   RTCPeerConnection/RTCDataChannel. Chromium cannot move a data channel to
//!   a worker, so the page only moves frames.
//! - [`session::Session`] in a worker: the receiver and its compact index,
//!   BLAKE3 checks of every read chunk, and IndexedDB persistence
//!   ([`store`]), so decoding, indexing and storage stay off the main thread.
//!
//! Errors cross into JavaScript as `JsError`s with messages meant for users.
//! The same module is loaded in both places; `web/src/share.ts` is the only
//! TypeScript that touches it.

use wasm_bindgen::prelude::*;

pub mod connection;
pub mod session;
pub mod store;

pub use connection::Connection;
pub use session::Session;

/// Panics (bugs) show up in the console with their message.
pub(crate) fn install_panic_hook() {
    console_error_panic_hook::set_once();
}

/// Decodes the protocol's test vectors in this build, for the browser test
/// (STYLE #2: the same vectors on both sides). Returns how many were checked.
#[wasm_bindgen(js_name = selfTest)]
pub fn self_test() -> Result<u32, JsError> {
    let n = linkfs_proto::vectors::check_all().map_err(|e| JsError::new(&e))?;
    Ok(n as u32)
}
