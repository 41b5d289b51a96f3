//! [`Visitors`]: the owner of every admitted visitor's task, keyed by its
//! [`PeerId`], with cleanup however a task ends (a panic included).
//!
//! A visitor's task is the IO of one visitor; the share machine decides:
//!
//! ```text
//!  answer its offer, trade candidates    --> Answer, LocalCandidate     (news to the share loop)
//!  the data link opens                   --> Opened(address)
//!  its first frame: a lane's?  yes       --> Lane, then hold the lane
//!                              no        --> FirstFrame(frame)
//!  before its session, each frame        --> Frame(frame)
//!    <-- Transmit(frame), Close, Start(first)   (what the share said, through `instruct`)
//!  its session, until it ends or is ended (its farewell set, then its cancel)
//! ```
//!
//! Candidates from the visitor reach its task through a bounded queue of
//! [`CANDIDATE_QUEUE`], the share's word through one of [`INSTRUCTIONS`].
//! When the task ends, [`Visitors::next_left`] says which visitor left and
//! why, so its slot is freed even if the task panicked: the task id maps
//! back to the peer.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;

use bytes::Bytes;
use linkfs_core::IceCandidate;
use linkfs_proto::SenderToReceiver;
use linkfs_proto::signal::PeerId;
use tokio::sync::mpsc;
use tokio::task::{Id, JoinSet};

use super::serve::{
    ServeContext, ServeEnd, ServeOutcome, lane_join, say_goodbye, serve_lane, serve_session,
};
use crate::drive::{FrameLink, FrameReceiver, FrameSender};
use crate::lanes::LaneBoard;
use crate::transport::{
    DataLinkSender, Handshake, HandshakeEvent, TransportConfig, TransportError,
};

/// Remote candidates queued for one visitor's handshake.
pub const CANDIDATE_QUEUE: usize = linkfs_core::signaling::CANDIDATES_PER_VISITOR;

/// The share's word queued for one visitor before its session (the share
/// says at most: the prompt, a goodbye, close or start).
pub const INSTRUCTIONS: usize = 4;

/// What a visitor's task tells the share loop.
#[derive(Debug)]
pub enum VisitorNews {
    Answer(PeerId, String),
    LocalCandidate(PeerId, IceCandidate),
    /// Its data link opened, from this address (as ICE proved it), if known.
    Opened(PeerId, Option<IpAddr>),
    /// Its link is a lane of another visitor's: it holds no visitor slot.
    Lane(PeerId),
    /// Its first frame (not a lane's).
    FirstFrame(PeerId, Vec<u8>),
    /// A frame before its session.
    Frame(PeerId, Vec<u8>),
}

/// What the share says to a visitor's task before its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    /// Send this frame.
    Transmit(Vec<u8>),
    /// Close the data link (after what was sent).
    Close,
    /// Serve its session, `first` being a frame it sent already.
    Start(Option<Vec<u8>>),
}

/// How a visitor's task ended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VisitorEnd {
    #[error("could not connect: {0}")]
    Failed(TransportError),
    #[error("{}", .0.end)]
    Served(ServeOutcome),
    #[error("sharing stopped before it connected")]
    Cancelled,
    /// It was a lane of another visitor's link (`crate::lanes`), not a visitor.
    #[error("a lane of another visitor's link closed")]
    Lane,
    /// A bug: the task panicked. Its slot is freed all the same.
    #[error("its task failed: {0}")]
    Panicked(String),
}

impl VisitorEnd {
    /// It ended before any session: `end`.
    fn before(end: ServeEnd) -> VisitorEnd {
        VisitorEnd::Served(ServeOutcome {
            end,
            stats: Default::default(),
        })
    }
}

/// A visitor that left.
#[derive(Debug)]
pub struct VisitorLeft {
    pub peer: PeerId,
    pub end: VisitorEnd,
}

/// How the share loop reaches a visitor's task.
#[derive(Debug)]
pub struct Reach {
    pub candidates: mpsc::Sender<IceCandidate>,
    pub said: mpsc::Sender<Instruction>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Visitors {
    tasks: JoinSet<VisitorEnd>,
    peers: HashMap<Id, PeerId>,
    reach: HashMap<PeerId, Reach>,
}

impl Visitors {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tasks running.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Starts `peer`'s task: answer `offer`, connect, then as the share says.
    pub fn admit(
        &mut self,
        peer: PeerId,
        offer: String,
        transport: TransportConfig,
        ctx: ServeContext,
        lanes: LaneBoard<DataLinkSender>,
        news: mpsc::Sender<VisitorNews>,
    ) {
        let (candidates, cand_rx) = mpsc::channel(CANDIDATE_QUEUE);
        let (said, said_rx) = mpsc::channel(INSTRUCTIONS);
        let task = async move {
            let cancel = ctx.cancel.clone();
            let link = tokio::select! {
                link = connect_visitor(peer, offer, transport, cand_rx, &news) => link,
                () = cancel.cancelled() => return VisitorEnd::Cancelled,
            };
            let link = match link {
                Ok(link) => link,
                Err(e) => return VisitorEnd::Failed(e),
            };
            let source = link.remote_address().await;
            if let Some(watch) = ctx.watch.clone() {
                // ICE says its pair when it knows: asked beside serving.
                let probe = link.path_probe();
                tokio::spawn(async move {
                    for _ in 0..20 {
                        if let Some(r) = probe.route().await {
                            watch.set_route(if r.relayed() { "turn" } else { "direct" });
                            return;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                    }
                });
            }
            let _ = news.send(VisitorNews::Opened(peer, source)).await;
            visit(peer, link, ctx, &lanes, said_rx, &news).await
        };
        self.spawn(peer, Reach { candidates, said }, task);
    }

    /// Starts any task as `peer`'s (what [`Visitors::admit`] uses; tests give
    /// their own).
    pub fn spawn(
        &mut self,
        peer: PeerId,
        reach: Reach,
        task: impl Future<Output = VisitorEnd> + Send + 'static,
    ) {
        let handle = self.tasks.spawn(task);
        self.peers.insert(handle.id(), peer);
        self.reach.insert(peer, reach);
    }

    /// Hands a candidate to `peer`'s handshake. A full queue means the visitor
    /// floods candidates: the extra ones are dropped.
    pub fn add_candidate(&self, peer: PeerId, candidate: IceCandidate) {
        if let Some(reach) = self.reach.get(&peer) {
            let _ = reach.candidates.try_send(candidate);
        }
    }

    /// Tells `peer`'s task what the share said (dropped if it is gone or,
    /// past its session's start, no longer listening).
    pub fn instruct(&self, peer: PeerId, said: Instruction) {
        if let Some(reach) = self.reach.get(&peer) {
            let _ = reach.said.try_send(said);
        }
    }

    /// The next visitor whose task ended, however it ended; `None` when no
    /// task runs. Cancel-safe.
    pub async fn next_left(&mut self) -> Option<VisitorLeft> {
        let (id, end) = match self.tasks.join_next_with_id().await? {
            Ok((id, end)) => (id, end),
            Err(e) => {
                let id = e.id();
                let end = if e.is_panic() {
                    let payload = e.into_panic();
                    let what = payload
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    VisitorEnd::Panicked(what)
                } else {
                    VisitorEnd::Cancelled
                };
                (id, end)
            }
        };
        // Every task was spawned through `spawn`, which recorded its id.
        let peer = self.peers.remove(&id).unwrap_or(PeerId::HOST);
        self.reach.remove(&peer);
        Some(VisitorLeft { peer, end })
    }

    /// Waits for every task to end (they were asked to stop), then aborts
    /// whatever is left after `within`.
    pub async fn wind_down(&mut self, within: std::time::Duration) {
        let _ =
            tokio::time::timeout(within, async { while self.next_left().await.is_some() {} }).await;
        self.tasks.abort_all();
    }
}

/// What a visitor whose link closed before its session, with no goodbye
/// from the share, is recorded as (the share closes an unanswered password
/// prompt so).
const NO_ANSWER: &str = "it gave no password in time";

/// A visitor's open data link: a lane, or the share's word until its
/// session, then the session.
async fn visit<L: FrameLink>(
    peer: PeerId,
    link: L,
    ctx: ServeContext,
    lanes: &LaneBoard<L::Sender>,
    mut said: mpsc::Receiver<Instruction>,
    news: &mpsc::Sender<VisitorNews>,
) -> VisitorEnd {
    let cancel = ctx.cancel.clone();
    let (mut tx, mut rx) = link.split();
    let first = tokio::select! {
        first = rx.recv() => first,
        () = cancel.cancelled() => return leave(tx, &ctx).await,
    };
    let Some(first) = first else {
        return VisitorEnd::before(ServeEnd::LinkClosed(rx.closed_reason()));
    };
    if let Some(join) = lane_join(&first) {
        let _ = news.send(VisitorNews::Lane(peer)).await;
        let why = serve_lane(tx, rx, &join, Some(lanes), cancel).await;
        tracing::debug!(peer = peer.0, ?why, "a lane ended");
        return VisitorEnd::Lane;
    }
    if news
        .send(VisitorNews::FirstFrame(peer, first.to_vec()))
        .await
        .is_err()
    {
        return leave(tx, &ctx).await;
    }
    let mut told = None;
    let first = loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return leave(tx, &ctx).await,
            word = said.recv() => match word {
                Some(Instruction::Transmit(frame)) => {
                    if let Ok(SenderToReceiver::Goodbye(g)) = SenderToReceiver::decode(&frame) {
                        told = Some(g.message);
                    }
                    let sent = match tx.ready().await {
                        Ok(()) => tx.send(Bytes::from(frame)),
                        Err(e) => Err(e),
                    };
                    if let Err(closed) = sent {
                        return VisitorEnd::before(ServeEnd::LinkClosed(closed));
                    }
                }
                Some(Instruction::Close) => {
                    tx.close().await;
                    return VisitorEnd::before(ServeEnd::SentOff(
                        told.unwrap_or_else(|| NO_ANSWER.to_owned()),
                    ));
                }
                Some(Instruction::Start(first)) => break first,
                None => return leave(tx, &ctx).await,
            },
            frame = rx.recv() => match frame {
                Some(frame) => {
                    if news.send(VisitorNews::Frame(peer, frame.to_vec())).await.is_err() {
                        return leave(tx, &ctx).await;
                    }
                }
                None => return VisitorEnd::before(ServeEnd::LinkClosed(rx.closed_reason())),
            },
        }
    };
    VisitorEnd::Served(serve_session(tx, rx, first.map(Bytes::from), &ctx, Some(lanes)).await)
}

/// The visitor is ended before its session: told why, if the share said
/// (its farewell), else its link just closes (the sharer is stopping).
async fn leave<S: FrameSender>(tx: S, ctx: &ServeContext) -> VisitorEnd {
    match ctx.farewell.get() {
        Some((code, words)) => {
            say_goodbye(tx, *code, words).await;
            VisitorEnd::before(ServeEnd::SentOff(words.clone()))
        }
        None => {
            tx.close().await;
            VisitorEnd::before(ServeEnd::Stopped)
        }
    }
}

/// Answers `offer` and runs the handshake until the data link opens. The
/// answer and local candidates go out as [`VisitorNews`]; remote candidates
/// come in through `remote`.
async fn connect_visitor(
    peer: PeerId,
    offer: String,
    config: TransportConfig,
    mut remote: mpsc::Receiver<IceCandidate>,
    news: &mpsc::Sender<VisitorNews>,
) -> Result<crate::transport::DataLink, TransportError> {
    let (mut handshake, answer) = Handshake::answer(&config, &offer).await?;
    let _ = news.send(VisitorNews::Answer(peer, answer)).await;
    let mut remote_open = true;
    loop {
        tokio::select! {
            event = handshake.next_event() => match event? {
                HandshakeEvent::LocalCandidate(c) => {
                    let _ = news.send(VisitorNews::LocalCandidate(peer, c)).await;
                }
                HandshakeEvent::Open(link) => return Ok(link),
            },
            c = remote.recv(), if remote_open => match c {
                Some(c) => {
                    // One unusable candidate concerns only itself; others may work.
                    if let Err(e) = handshake.add_remote_candidate(c).await {
                        tracing::info!(peer = peer.0, error = %e, "skipping a visitor's ICE candidate");
                    }
                }
                None => remote_open = false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a visitor task that panicked was recorded as peer 0, so the
    /// real visitor kept counting against `--max-visitors` forever.
    #[tokio::test]
    async fn a_visitor_task_that_panics_is_reported_under_its_own_peer() {
        let mut v = Visitors::new();
        let reach = || Reach {
            candidates: mpsc::channel(1).0,
            said: mpsc::channel(1).0,
        };
        v.spawn(PeerId(7), reach(), async { panic!("boom") });
        v.spawn(PeerId(8), reach(), std::future::pending());
        let left = v.next_left().await.expect("one task ended");
        assert_eq!(left.peer, PeerId(7));
        assert!(
            matches!(&left.end, VisitorEnd::Panicked(m) if m == "boom"),
            "{:?}",
            left.end
        );
        assert_eq!(v.len(), 1, "the other visitor is still there");
        assert!(v.reach.contains_key(&PeerId(8)));
        assert!(!v.reach.contains_key(&PeerId(7)));
    }
}
