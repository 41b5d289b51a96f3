//! The bounded queue of messages waiting to be written to one connection.
//!
//! Other sessions push into a connection's [`PeerLink`] without waiting; the
//! connection's own session drains its [`Outbox`] into the socket. The queue holds at
//! most `max_queued_messages` messages *and* `max_queued_bytes` bytes (defaults 256
//! and 128 KiB). A push that would pass either bound does not wait and does not
//! grow anything: it disconnects the slow receiver (its `kick` token is cancelled)
//! and reports [`Overflow`]. A peer that cannot keep up with signaling has a broken
//! connection anyway; it can reconnect.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Limits;
use crate::wire::SignalText;

/// Identifies one WebSocket connection for the relay's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ConnId(pub u64);

/// How the relay ends a connection: a WebSocket close frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closing {
    pub code: u16,
    pub reason: &'static str,
}

/// One item for the writer.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// A JSON text frame.
    Text(SignalText),
    /// Write this close frame, then end the connection.
    Close(Closing),
}

/// The queue was full; the receiver is being disconnected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overflow;

/// The sending side of a connection's queue, held by the room registry.
#[derive(Debug, Clone)]
pub(crate) struct PeerLink {
    pub conn: ConnId,
    tx: mpsc::Sender<Outbound>,
    queued_bytes: Arc<AtomicUsize>,
    max_bytes: usize,
    kick: CancellationToken,
}

/// The receiving side, owned by the connection's session.
#[derive(Debug)]
pub(crate) struct Outbox {
    rx: mpsc::Receiver<Outbound>,
    queued_bytes: Arc<AtomicUsize>,
    /// Cancelled when the connection must end now: relay shutdown (a child of the
    /// relay's token) or overflow.
    pub kick: CancellationToken,
}

/// A new empty queue for connection `conn`; `kick` ends the connection.
pub(crate) fn outbox(conn: ConnId, limits: &Limits, kick: CancellationToken) -> (PeerLink, Outbox) {
    let (tx, rx) = mpsc::channel(limits.max_queued_messages);
    let queued_bytes = Arc::new(AtomicUsize::new(0));
    let link = PeerLink {
        conn,
        tx,
        queued_bytes: queued_bytes.clone(),
        max_bytes: limits.max_queued_bytes,
        kick: kick.clone(),
    };
    (
        link,
        Outbox {
            rx,
            queued_bytes,
            kick,
        },
    )
}

impl PeerLink {
    /// Queues a text frame, or disconnects the receiver if its queue is full.
    pub fn push(&self, text: SignalText) -> Result<(), Overflow> {
        let len = text.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::AcqRel);
        if before + len > self.max_bytes {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            return Err(self.overflow());
        }
        if self.tx.try_send(Outbound::Text(text)).is_err() {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            return Err(self.overflow());
        }
        Ok(())
    }

    /// Queues `last` and then a close frame: the receiver gets both, in order, after
    /// everything already queued. If they do not fit, it is disconnected at once.
    pub fn push_then_close(&self, last: SignalText, closing: Closing) {
        if self.push(last).is_ok() && self.tx.try_send(Outbound::Close(closing)).is_err() {
            self.kick.cancel();
        }
    }

    fn overflow(&self) -> Overflow {
        self.kick.cancel();
        Overflow
    }
}

impl Outbox {
    /// The next queued item; `None` once every [`PeerLink`] is gone.
    pub async fn next(&mut self) -> Option<Outbound> {
        let item = self.rx.recv().await?;
        if let Outbound::Text(text) = &item {
            self.queued_bytes.fetch_sub(text.len(), Ordering::AcqRel);
        }
        Some(item)
    }

    /// The next item if one is queued now (tests).
    #[cfg(test)]
    pub fn try_next(&mut self) -> Option<Outbound> {
        let item = self.rx.try_recv().ok()?;
        if let Outbound::Text(text) = &item {
            self.queued_bytes.fetch_sub(text.len(), Ordering::AcqRel);
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(messages: usize, bytes: usize) -> Limits {
        Limits {
            max_queued_messages: messages,
            max_queued_bytes: bytes,
            ..Limits::default()
        }
    }

    #[tokio::test]
    async fn a_full_queue_disconnects_the_receiver_instead_of_growing() {
        let (link, mut outbox) = outbox(ConnId(1), &limits(3, 1 << 20), CancellationToken::new());
        for i in 0..3 {
            link.push(format!("m{i}").into()).expect("fits");
        }
        assert_eq!(link.push("m3".into()), Err(Overflow));
        assert!(outbox.kick.is_cancelled());
        // What was queued is still there, in order.
        for i in 0..3 {
            match outbox.next().await {
                Some(Outbound::Text(t)) => assert_eq!(t.as_str(), format!("m{i}")),
                other => panic!("expected m{i}, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn the_byte_bound_applies_and_frees_as_the_writer_drains() {
        let (link, mut outbox) = outbox(ConnId(1), &limits(100, 10), CancellationToken::new());
        link.push("12345".into()).expect("5 of 10 bytes");
        link.push("12345".into()).expect("10 of 10 bytes");
        assert!(outbox.next().await.is_some());
        link.push("abcde".into()).expect("room again after a drain");
        assert!(!outbox.kick.is_cancelled());
        assert_eq!(link.push("x".into()), Err(Overflow));
        assert!(outbox.kick.is_cancelled());
    }

    #[tokio::test]
    async fn last_words_come_before_the_close() {
        let (link, mut outbox) = outbox(ConnId(1), &limits(10, 100), CancellationToken::new());
        let closing = Closing {
            code: 1000,
            reason: "bye",
        };
        link.push_then_close("left".into(), closing);
        assert!(matches!(outbox.next().await, Some(Outbound::Text(t)) if t.as_str() == "left"));
        assert!(matches!(outbox.next().await, Some(Outbound::Close(c)) if c == closing));
    }
}
