//! [`MemoryLink`]: a [`FrameLink`] in memory, for tests of whatever runs over a
//! data link (the sharer's sessions, the native receiver) without WebRTC.
//!
//! Each direction is a mover task: frames queued by the sender (at most
//! [`SEND_QUEUE`], which is the backpressure) go through a core
//! [`SimLink`](linkfs_core::sim::SimLink) that may lose, duplicate, delay and
//! reorder them as its [`LinkModel`] says, and reach the other side's receive
//! queue (at most [`RECEIVE_QUEUE`]; the mover waits when it is full, as a
//! real channel's receive window pushes back). Dropping or closing one side
//! ends the other side's `recv` once what was delivered has been read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use linkfs_core::sim::{LinkModel, Rng, SimLink};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{FrameLink, FrameReceiver, FrameSender, LinkClosed};

/// Frames a sender may queue before `ready` waits.
pub const SEND_QUEUE: usize = 4;
/// Frames delivered and not yet read before the mover waits.
pub const RECEIVE_QUEUE: usize = 512;

/// One end of an in-memory link.
#[derive(Debug)]
pub struct MemoryLink {
    sender: MemorySender,
    receiver: MemoryReceiver,
}

/// The sending half of a [`MemoryLink`].
#[derive(Debug)]
pub struct MemorySender {
    queue: mpsc::Sender<Bytes>,
    permit: Option<mpsc::OwnedPermit<Bytes>>,
    closed: Arc<Mutex<Option<LinkClosed>>>,
}

/// The receiving half of a [`MemoryLink`].
#[derive(Debug)]
pub struct MemoryReceiver {
    delivered: mpsc::Receiver<Bytes>,
    closed: Arc<Mutex<Option<LinkClosed>>>,
}

/// Cuts a [`MemoryLink`] pair: both ends see the link end, as when a network
/// path breaks (what was in flight is lost).
#[derive(Debug, Clone)]
pub struct Cut(CancellationToken);

impl Cut {
    pub fn cut(&self) {
        self.0.cancel();
    }
}

impl MemoryLink {
    /// Two connected ends over links that behave as `model` says; `seed`
    /// makes the losses repeatable.
    pub fn pair(model: LinkModel, seed: u64) -> (MemoryLink, MemoryLink) {
        let (a, b, _) = Self::pair_with_cut(model, seed);
        (a, b)
    }

    /// [`MemoryLink::pair`], and a way to cut it.
    pub fn pair_with_cut(model: LinkModel, seed: u64) -> (MemoryLink, MemoryLink, Cut) {
        let cut = CancellationToken::new();
        let a_closed = Arc::new(Mutex::new(None));
        let b_closed = Arc::new(Mutex::new(None));
        let (a_to_b, a_rx) = one_way(model, seed, b_closed.clone(), cut.clone());
        let (b_to_a, b_rx) = one_way(model, seed.wrapping_add(1), a_closed.clone(), cut.clone());
        (
            MemoryLink {
                sender: MemorySender {
                    queue: a_to_b,
                    permit: None,
                    closed: a_closed.clone(),
                },
                receiver: MemoryReceiver {
                    delivered: b_rx,
                    closed: a_closed,
                },
            },
            MemoryLink {
                sender: MemorySender {
                    queue: b_to_a,
                    permit: None,
                    closed: b_closed.clone(),
                },
                receiver: MemoryReceiver {
                    delivered: a_rx,
                    closed: b_closed,
                },
            },
            Cut(cut),
        )
    }
}

/// Starts the mover for one direction. `far_closed` is where the far side
/// learns why its receive queue ended.
fn one_way(
    model: LinkModel,
    seed: u64,
    far_closed: Arc<Mutex<Option<LinkClosed>>>,
    cut: CancellationToken,
) -> (mpsc::Sender<Bytes>, mpsc::Receiver<Bytes>) {
    let (queue, mut queued) = mpsc::channel::<Bytes>(SEND_QUEUE);
    let (deliver, delivered) = mpsc::channel::<Bytes>(RECEIVE_QUEUE);
    tokio::spawn(async move {
        let start = Instant::now();
        let now = move || start.elapsed().as_millis() as u64;
        let mut rng = Rng::new(seed);
        let mut sim = SimLink::new(model);
        let mut open = true;
        loop {
            for f in sim.due(now()) {
                if deliver.send(Bytes::from(f)).await.is_err() {
                    return;
                }
            }
            if !open && sim.next_delivery().is_none() {
                break;
            }
            let next = sim
                .next_delivery()
                .map(|at| start + Duration::from_millis(at));
            tokio::select! {
                () = cut.cancelled() => {
                    if let Ok(mut c) = far_closed.lock() {
                        c.get_or_insert(LinkClosed::ConnectionLost);
                    }
                    return;
                }
                frame = queued.recv(), if open => match frame {
                    Some(f) => sim.send(&mut rng, now(), f.to_vec()),
                    None => open = false,
                },
                () = tokio::time::sleep_until(next.unwrap_or(start)), if next.is_some() => {}
            }
        }
        if let Ok(mut c) = far_closed.lock() {
            c.get_or_insert(LinkClosed::PeerClosed);
        }
    });
    (queue, delivered)
}

impl FrameLink for MemoryLink {
    type Sender = MemorySender;
    type Receiver = MemoryReceiver;
    fn split(self) -> (MemorySender, MemoryReceiver) {
        (self.sender, self.receiver)
    }
}

impl MemorySender {
    fn closed_reason(&self) -> LinkClosed {
        let reason = self.closed.lock().ok().and_then(|c| c.clone());
        reason.unwrap_or(LinkClosed::ConnectionClosed)
    }
}

impl FrameSender for MemorySender {
    async fn ready(&mut self) -> Result<(), LinkClosed> {
        if self.permit.is_none() {
            let permit = self
                .queue
                .clone()
                .reserve_owned()
                .await
                .map_err(|_| self.closed_reason())?;
            self.permit = Some(permit);
        }
        Ok(())
    }

    fn send(&mut self, frame: Bytes) -> Result<(), LinkClosed> {
        match self.permit.take() {
            Some(p) => {
                p.send(frame);
                Ok(())
            }
            None => self.queue.try_send(frame).map_err(|_| self.closed_reason()),
        }
    }

    async fn close(self) {
        if let Ok(mut c) = self.closed.lock() {
            c.get_or_insert(LinkClosed::ClosedHere);
        }
        // Dropping the queue lets the mover deliver what is in flight, then end.
    }
}

impl FrameReceiver for MemoryReceiver {
    async fn recv(&mut self) -> Option<Bytes> {
        self.delivered.recv().await
    }

    fn closed_reason(&self) -> LinkClosed {
        let reason = self.closed.lock().ok().and_then(|c| c.clone());
        reason.unwrap_or(LinkClosed::PeerClosed)
    }
}
