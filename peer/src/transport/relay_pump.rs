//! Keeps TURN-relayed connections moving: a workaround for webrtc-rs 0.21.
//!
//! Its driver hands a packet bound for a TURN allocation to its TURN client
//! after it has drained that client's output for the loop iteration, so the
//! packet waits for the driver's next wake: the next datagram in, or a timer
//! (up to a second with linkfs's keepalive). An SCTP acknowledgement needs two
//! such wakes. Measured through a local coturn before this: handshakes of about
//! 2.5 s and bulk reads at 0.3 MB/s (direct: 180 MB/s).
//!
//! While a connection may use a relayed candidate (it has a TURN server; once
//! ICE has chosen, only if the chosen pair is relayed), this task wakes the
//! driver every [`PUMP_EVERY`] with a no-op on the data channel (setting its
//! buffered-amount threshold to what it is, which webrtc-rs follows with a
//! wake), so relayed packets leave within that. A connection whose chosen pair
//! is direct stops the pump the first time it looks.

use std::sync::{Arc, Weak};
use std::time::Duration;

use webrtc::data_channel::DataChannel;

use super::connection::{Connection, route_of};

/// How often the driver is woken while relayed: 1 ms (a wake costs a few
/// microseconds; a relayed packet waits at most this long).
pub const PUMP_EVERY: Duration = Duration::from_millis(1);
/// How often the pump checks that the chosen pair is still relayed.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Pumps `channel`'s connection while it is, or may become, relayed.
pub(crate) fn start(connection: &Arc<Connection>, channel: Arc<dyn DataChannel>) {
    let weak = Arc::downgrade(connection);
    tokio::spawn(pump(weak, channel));
}

async fn pump(connection: Weak<Connection>, channel: Arc<dyn DataChannel>) {
    let Ok(threshold) = channel.buffered_amount_low_threshold().await else {
        return;
    };
    let mut every = tokio::time::interval(PUMP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_check = tokio::time::Instant::now() + CHECK_EVERY;
    loop {
        every.tick().await;
        let Some(conn) = connection.upgrade() else {
            return;
        };
        if conn.ending.reason().is_some() {
            return;
        }
        if tokio::time::Instant::now() >= next_check {
            next_check += CHECK_EVERY;
            // Before ICE has chosen there is no route yet: keep pumping (the
            // handshake itself goes through the relay).
            if let Some(route) = route_of(conn.pc.as_ref()).await
                && !route.locally_relayed()
            {
                tracing::debug!(%route, "direct route: no relay pump needed");
                return;
            }
        }
        drop(conn);
        if channel
            .set_buffered_amount_low_threshold(threshold)
            .await
            .is_err()
        {
            return;
        }
    }
}
