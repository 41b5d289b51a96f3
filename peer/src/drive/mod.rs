//! The drive loop: one loop that runs any core session over any data link.
//!
//! ```text
//!  inputs (each a method)                 after each: poll_output(now, room) until Wait
//!  FrameReceiver --> handle_frame          Transmit(frame) --> FrameSender (asked only
//!  next_input    --> handle_input          TransmitBulk(frame)  while the link has room;
//!                                                               bulk: a lane's if any)
//!    (file IO done, a read asked for,     End(outcome)    --> the loop returns it
//!     the index grew)                     Wait(at)        --> sleep until `at` or the
//!  the timer     --> handle_timeout                            next input
//!  cancel        --> stop (goodbye, then at most GOODBYE_FLUSH to send it)
//!  the link ends --> link_closed
//! ```
//!
//! The contract is the one every core machine has (`core::visit::Visit`,
//! `core::share::Share`, `core::lanes::LaneSet`): inputs as methods, one poll
//! for everything the machine has to say, one item a call, until it says it
//! waits. Whatever else a session asks for (disk reads, upload writes, events
//! for the user) its shell starts inside `poll_output` before it answers; the
//! loop only moves frames and time. `room` is false while one frame already
//! waits here for room in the link: a session then says anything but a frame.
//!
//! The sharer's side ([`crate::sharer`]: a `SenderSession` per visitor) and the
//! native receiver's ([`crate::visit`]: a core `Visit`) are both a
//! [`DrivenSession`]; the data link is anything that is a [`FrameLink`]: the
//! WebRTC [`DataLink`](crate::transport::DataLink), or [`memory::MemoryLink`],
//! which carries frames over core's lossy simulated link so both sides can be
//! tested in memory, without WebRTC or FUSE.
//!
//! Time is milliseconds since the loop started, handed to the session; the
//! session never reads a clock. One frame at most waits here for room in the
//! link (`pending`): that and the session's own bounds are all the loop holds.

pub mod memory;

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use linkfs_core::Millis;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a stopping session may take to send its goodbye before the link
/// is closed anyway.
pub const GOODBYE_FLUSH: Duration = Duration::from_secs(2);

/// Why a link ended: a WebRTC [`DataLink`](crate::transport::DataLink) (or a
/// handshake that never opened), or a [`memory::MemoryLink`].
///
/// The first reason observed wins: a link closed here that then sees its connection
/// close still reports [`LinkClosed::ClosedHere`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkClosed {
    /// This side called `close()`.
    #[error("the link was closed on this side")]
    ClosedHere,
    /// The other side closed the data channel.
    #[error("the other side closed the link")]
    PeerClosed,
    /// The peer connection was closed (by either side, or because its driver stopped).
    #[error("the connection was closed")]
    ConnectionClosed,
    /// ICE stopped hearing from the other side: it went away, or the network path broke.
    #[error("the other side stopped answering (it quit, or the network path was lost)")]
    ConnectionLost,
    /// ICE or DTLS gave up: no working network path, or the security handshake failed.
    #[error("the connection failed (no working network path between the two sides)")]
    ConnectionFailed,
    /// The other side sent a message larger than the frame limit.
    #[error("the other side sent a {len}-byte message, over the {max}-byte frame limit")]
    OversizedFrame { len: usize, max: usize },
    /// Handing a frame to the data channel failed.
    #[error("sending failed: {0}")]
    SendFailed(String),
    /// The sharer dropped the link on purpose (`SIGUSR1`: to see, or test,
    /// that visitors reconnect).
    #[error("dropped on request (the visitor reconnects)")]
    DroppedOnRequest,
}

/// The sending half of a frame link.
pub trait FrameSender: Send + 'static {
    /// Waits until one frame can be queued. Cancel-safe.
    fn ready(&mut self) -> impl Future<Output = Result<(), LinkClosed>> + Send;
    /// [`ready`](Self::ready) for the next frame; `bulk`: it is a long
    /// read's chunk ([`Drive::TransmitBulk`]), which a link of several
    /// connections puts on one of its lanes. Cancel-safe.
    fn ready_for(&mut self, bulk: bool) -> impl Future<Output = Result<(), LinkClosed>> + Send {
        let _ = bulk;
        self.ready()
    }
    /// Queues one frame; call after `ready` resolved.
    fn send(&mut self, frame: Bytes) -> Result<(), LinkClosed>;
    /// Sends what is queued (bounded in time), then closes the link.
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// The receiving half of a frame link.
pub trait FrameReceiver: Send + 'static {
    /// The next frame, or `None` once the link ended. Cancel-safe.
    fn recv(&mut self) -> impl Future<Output = Option<Bytes>> + Send;
    /// Why the link ended, once it has.
    fn closed_reason(&self) -> LinkClosed;
}

/// A link that carries frames both ways: send with backpressure, receive, close.
pub trait FrameLink: Send + 'static {
    type Sender: FrameSender;
    type Receiver: FrameReceiver;
    fn split(self) -> (Self::Sender, Self::Receiver);
}

/// What a driven session says to the loop ([`DrivenSession::poll_output`]).
#[derive(Debug)]
pub enum Drive<O> {
    /// Send this frame (only said when the loop has room for it).
    Transmit(Vec<u8>),
    /// Send this chunk of a long read: on a lane where the link has lanes,
    /// off the session's own connection (`core::SenderOutput::TransmitBulk`).
    TransmitBulk(Vec<u8>),
    /// The session is over.
    End(O),
    /// Nothing now: wait for a frame, an input, or this time.
    Wait(Option<Millis>),
}

/// A core session as the drive loop sees it. See the module docs.
pub trait DrivenSession: Send {
    /// Something from outside the link: file IO done, a read asked for, ...
    type Input: Send;
    /// What the session ended with.
    type Outcome: Send;

    fn handle_frame(&mut self, now: Millis, frame: &[u8]);
    fn handle_timeout(&mut self, now: Millis);
    /// The next input; a session without any never resolves. Cancel-safe.
    fn next_input(&mut self) -> impl Future<Output = Self::Input> + Send;
    fn handle_input(&mut self, now: Millis, input: Self::Input);
    /// What the session has to say now, one item a call (module docs). A
    /// frame only when `room`.
    fn poll_output(&mut self, now: Millis, room: bool) -> Drive<Self::Outcome>;
    /// The link ended under the session.
    fn link_closed(&mut self, reason: LinkClosed);
    /// Asked to stop: say goodbye.
    fn stop(&mut self);
    /// The goodbye did not leave within [`GOODBYE_FLUSH`]: the outcome anyway.
    fn gave_up(&mut self) -> Self::Outcome;
}

/// A session's time: milliseconds since it started, across all the links it
/// is driven over.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock that reads 0 now.
    pub fn start() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    pub fn now(&self) -> Millis {
        Millis(self.start.elapsed().as_millis() as u64)
    }

    /// The instant a `Millis` of this clock stands for.
    pub fn instant(&self, at: Millis) -> Instant {
        self.start + Duration::from_millis(at.0)
    }
}

/// Runs `session` over `link` until it ends; `cancel` asks it to stop. The
/// session is lent, so its shell can look at what is left afterwards; its
/// time is `clock`'s (a session driven over several links keeps one clock).
pub async fn drive<S, L>(
    session: &mut S,
    link: L,
    cancel: CancellationToken,
    clock: Clock,
) -> S::Outcome
where
    S: DrivenSession,
    L: FrameLink,
{
    let start = clock.start;
    let now = move || clock.now();
    let (mut tx, mut rx) = link.split();
    // The frame waiting for room, and whether it is bulk.
    let mut pending: Option<(Bytes, bool)> = None;
    let mut link_open = true;
    let mut stopping_since: Option<Instant> = None;
    // The session ended with a frame still waiting for room: since when.
    let mut ending_since: Option<Instant> = None;
    let outcome = loop {
        let room = pending.is_none() && link_open;
        let wait = match session.poll_output(now(), room) {
            Drive::Transmit(frame) if room => {
                pending = Some((Bytes::from(frame), false));
                continue;
            }
            Drive::TransmitBulk(frame) if room => {
                pending = Some((Bytes::from(frame), true));
                continue;
            }
            // Never said without room (each session checks); were it said,
            // the frame would be lost, and the receiver would ask again.
            Drive::Transmit(_) | Drive::TransmitBulk(_) => {
                tracing::error!("a session gave a frame with no room for it; dropped");
                continue;
            }
            Drive::End(outcome) if pending.is_none() || !link_open => break outcome,
            // Its last frames go first, for at most GOODBYE_FLUSH (a link
            // that takes nothing does not hold an ended session).
            Drive::End(outcome) => {
                let since = *ending_since.get_or_insert_with(Instant::now);
                if since.elapsed() > GOODBYE_FLUSH {
                    break outcome;
                }
                Some(since + GOODBYE_FLUSH)
            }
            Drive::Wait(at) => at.map(|m| start + Duration::from_millis(m.0)),
        };
        if stopping_since.is_some_and(|t| t.elapsed() > GOODBYE_FLUSH) {
            break session.gave_up();
        }
        let deadline = wait;
        // Each branch's future is dropped before its handler runs, so handlers
        // may use the session that `next_input` borrowed.
        tokio::select! {
            biased;
            () = cancel.cancelled(), if stopping_since.is_none() => {
                session.stop();
                stopping_since = Some(Instant::now());
            }
            ready = tx.ready_for(pending.as_ref().is_some_and(|(_, bulk)| *bulk)), if pending.is_some() && link_open => {
                let sent = ready.and_then(|()| match pending.take() {
                    Some((frame, _)) => tx.send(frame),
                    None => Ok(()),
                });
                if let Err(reason) = sent {
                    link_open = false;
                    session.link_closed(reason);
                }
            }
            frame = rx.recv(), if link_open => match frame {
                Some(f) => session.handle_frame(now(), &f),
                None => {
                    link_open = false;
                    session.link_closed(rx.closed_reason());
                }
            },
            input = session.next_input() => session.handle_input(now(), input),
            () = tokio::time::sleep_until(deadline.unwrap_or(start)), if deadline.is_some() => {
                session.handle_timeout(now());
            }
            // A stopping session whose link is full: wake up to give up in time.
            () = tokio::time::sleep(GOODBYE_FLUSH), if stopping_since.is_some() => {}
        }
    };
    tx.close().await;
    outcome
}
