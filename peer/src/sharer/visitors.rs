//! [`Visitors`]: the owner of every admitted visitor's task, keyed by its
//! [`PeerId`], with cleanup however a task ends (a panic included).
//!
//! A visitor's task answers its offer, trades candidates until the data link
//! opens, then serves it ([`super::serve`]). It reports what the host's
//! signaling needs ([`VisitorNews`]: the answer, local candidates, "connected")
//! through a channel; candidates from the visitor reach it through a bounded
//! queue of [`CANDIDATE_QUEUE`]. When the task ends, [`Visitors::next_left`]
//! says which visitor left and why, so its slot is freed even if the task
//! panicked: the task id maps back to the peer.

use std::collections::HashMap;
use std::future::Future;

use linkfs_core::IceCandidate;
use linkfs_proto::signal::PeerId;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{Id, JoinSet};

use super::serve::{LinkIs, ServeContext, ServeOutcome, Served, serve_link};
use crate::lanes::LaneBoard;
use crate::transport::{
    DataLinkSender, Handshake, HandshakeEvent, TransportConfig, TransportError,
};

/// Remote candidates queued for one visitor's handshake.
pub const CANDIDATE_QUEUE: usize = linkfs_core::signaling::CANDIDATES_PER_VISITOR;

/// What a visitor's task tells the share loop.
#[derive(Debug)]
pub enum VisitorNews {
    Answer(PeerId, String),
    LocalCandidate(PeerId, IceCandidate),
    /// Its session starts (past any password prompt): may it? `Err`: the
    /// words it is turned away with (the share is full).
    Connected(PeerId, oneshot::Sender<Result<(), String>>),
    /// Its link is a lane of another visitor's: it holds no visitor slot.
    Lane(PeerId),
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

/// A visitor that left.
#[derive(Debug)]
pub struct VisitorLeft {
    pub peer: PeerId,
    pub end: VisitorEnd,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Visitors {
    tasks: JoinSet<VisitorEnd>,
    peers: HashMap<Id, PeerId>,
    candidates: HashMap<PeerId, mpsc::Sender<IceCandidate>>,
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

    /// Starts `peer`'s task: answer `offer`, connect, serve.
    pub fn admit(
        &mut self,
        peer: PeerId,
        offer: String,
        transport: TransportConfig,
        ctx: ServeContext,
        lanes: LaneBoard<DataLinkSender>,
        news: mpsc::Sender<VisitorNews>,
    ) {
        let (cand_tx, cand_rx) = mpsc::channel(CANDIDATE_QUEUE);
        self.spawn(peer, cand_tx, async move {
            let mut ctx = ctx;
            let cancel = ctx.cancel.clone();
            let link = tokio::select! {
                link = connect_visitor(peer, offer, transport, cand_rx, &news) => link,
                () = cancel.cancelled() => return VisitorEnd::Cancelled,
            };
            match link {
                Ok(link) => {
                    // Whom its link's password guesses are counted against.
                    ctx.source = link.remote_address().await;
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
                    let announce = |is: LinkIs| async move {
                        const STOPPING: &str = "the sharer is stopping";
                        match is {
                            LinkIs::Session => {
                                let (said, heard) = oneshot::channel();
                                if news.send(VisitorNews::Connected(peer, said)).await.is_err() {
                                    return Err(STOPPING.to_owned());
                                }
                                heard.await.unwrap_or_else(|_| Err(STOPPING.to_owned()))
                            }
                            LinkIs::Lane => {
                                let _ = news.send(VisitorNews::Lane(peer)).await;
                                Ok(())
                            }
                        }
                    };
                    match serve_link(link, ctx, Some(&lanes), announce).await {
                        Served::Session(outcome) => VisitorEnd::Served(outcome),
                        Served::Lane(reason) => {
                            tracing::debug!(peer = peer.0, ?reason, "a lane ended");
                            VisitorEnd::Lane
                        }
                    }
                }
                Err(e) => VisitorEnd::Failed(e),
            }
        });
    }

    /// Starts any task as `peer`'s (what [`Visitors::admit`] uses; tests give
    /// their own).
    pub fn spawn(
        &mut self,
        peer: PeerId,
        candidates: mpsc::Sender<IceCandidate>,
        task: impl Future<Output = VisitorEnd> + Send + 'static,
    ) {
        let handle = self.tasks.spawn(task);
        self.peers.insert(handle.id(), peer);
        self.candidates.insert(peer, candidates);
    }

    /// Hands a candidate to `peer`'s handshake. A full queue means the visitor
    /// floods candidates: the extra ones are dropped.
    pub fn add_candidate(&self, peer: PeerId, candidate: IceCandidate) {
        if let Some(queue) = self.candidates.get(&peer) {
            let _ = queue.try_send(candidate);
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
        self.candidates.remove(&peer);
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
        let (tx, _rx) = mpsc::channel(1);
        v.spawn(PeerId(7), tx.clone(), async { panic!("boom") });
        v.spawn(PeerId(8), tx, std::future::pending());
        let left = v.next_left().await.expect("one task ended");
        assert_eq!(left.peer, PeerId(7));
        assert!(
            matches!(&left.end, VisitorEnd::Panicked(m) if m == "boom"),
            "{:?}",
            left.end
        );
        assert_eq!(v.len(), 1, "the other visitor is still there");
        assert!(v.candidates.contains_key(&PeerId(8)));
        assert!(!v.candidates.contains_key(&PeerId(7)));
    }
}
