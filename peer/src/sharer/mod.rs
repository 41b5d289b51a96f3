//! `linkfs share`: everything a sharer runs, wired together.
//!
//! ```text
//!  relay (embedded, or --relay URL)
//!     ^  host WebSocket: sealed offers/answers/candidates
//!     |
//!  Sharer loop ---- per visitor: connect_visitor (answer, candidates) -> serve(link)
//!     |                                                               ^
//!  walk threads -> feed thread -> ShareIndex (RwLock) -> index_changed +
//! ```
//!
//! The link is reported ([`ShareEvent::Ready`]) as soon as the room is held at
//! the relay, before the walk has found anything: a visitor who opens it early
//! sees the tree fill in. Visitors are bounded ([`ShareOptions::max_visitors`]);
//! a visitor whose offer does not open with the link's secret gets a sealed
//! refusal it cannot read either, which its page shows as "this link is not valid".

mod disk;
mod feed;
mod guests;
mod serve;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use linkfs_core::{Direction, SenderConfig, SenderStats, ShareIndex, ShareLink, SignalKey};
use linkfs_proto::Epoch;
use linkfs_proto::signal::{
    ClientToRelay, PeerId, RelayErrorCode, RelayToClient, Role, SignalPayload,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use disk::{OPEN_FILES, ShareRoot};
pub use feed::WalkProgress;
pub use guests::CANDIDATE_QUEUE;
pub use serve::ServeOutcome;

use crate::signal_client::{SignalClient, SignalError};
use crate::transport::{IceCandidate, TransportConfig};
use crate::walk::{WalkError, WalkOptions, Walker};

/// Where the relay is.
#[derive(Debug, Clone)]
pub enum RelayChoice {
    /// Run the relay in this process, listening on `bind`.
    Embedded { bind: SocketAddr },
    /// Use a relay that runs elsewhere (`http(s)://host:port`).
    External { url: String },
}

#[derive(Debug, Clone)]
pub struct ShareOptions {
    pub root: PathBuf,
    pub relay: RelayChoice,
    pub transport: TransportConfig,
    pub sender: SenderConfig,
    /// Visitors connected (or connecting) at once; more are turned away.
    pub max_visitors: usize,
}

/// What the sharer reports to its user interface.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ShareEvent {
    /// The share can be opened at this link.
    Ready { link: String },
    /// A visitor's data channel opened.
    VisitorConnected { peer: u32, visitors: usize },
    /// A visitor left (or could not connect).
    VisitorLeft {
        peer: u32,
        visitors: usize,
        reason: String,
        stats: Option<SenderStats>,
    },
    /// Something worth telling the user that does not stop the share.
    Warning(String),
}

/// Why sharing could not start or had to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShareError {
    #[error(transparent)]
    Walk(#[from] WalkError),
    #[error("cannot open {path} for reading: {source}")]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot start the relay on {bind}: {source} (is the port in use? pick another with --bind)"
    )]
    RelayBind {
        bind: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the relay: {0}")]
    Relay(String),
    #[error(transparent)]
    Signal(#[from] SignalError),
    #[error("the relay refused the share: {0}")]
    Refused(String),
    #[error("the relay closed the connection before the share was registered")]
    RelayClosed,
    #[error("the system's random source failed: {0}")]
    Random(String),
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
}

fn random_bytes<const N: usize>() -> Result<[u8; N], ShareError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| ShareError::Random(e.to_string()))?;
    Ok(b)
}

/// A visitor being connected or served.
struct Visitor {
    candidates: mpsc::Sender<IceCandidate>,
    connected: bool,
}

enum VisitorDone {
    Failed(PeerId, String),
    Served(PeerId, ServeOutcome),
}

/// Shares `options.root` until `cancel` fires. Also returns the walk's progress
/// so the caller can show it; `events` receives everything else.
pub async fn share(
    options: ShareOptions,
    events: mpsc::Sender<ShareEvent>,
    walk_progress: watch::Sender<WalkProgress>,
    cancel: CancellationToken,
) -> Result<(), ShareError> {
    let root = Arc::new(
        ShareRoot::open(&options.root).map_err(|source| ShareError::Root {
            path: options.root.clone(),
            source,
        })?,
    );
    let walk = Walker::new(&options.root, WalkOptions::default())?;

    let (relay, origin) = match &options.relay {
        RelayChoice::Embedded { bind } => {
            let listener = tokio::net::TcpListener::bind(bind)
                .await
                .map_err(|source| ShareError::RelayBind {
                    bind: *bind,
                    source,
                })?;
            let relay = linkfs_relay::spawn(listener, linkfs_relay::RelayConfig::default())
                .await
                .map_err(|e| ShareError::Relay(e.to_string()))?;
            let origin = format!("http://{}", relay.local_addr());
            (Some(relay), origin)
        }
        RelayChoice::External { url } => (None, url.trim_end_matches('/').to_owned()),
    };
    let link = ShareLink::generate(&origin, random_bytes::<26>()?);
    let key = SignalKey::from_secret(&link.secret);
    let epoch = Epoch(u64::from_le_bytes(random_bytes::<8>()?));

    let mut signal = SignalClient::connect(&link.signal_url(Role::Host)).await?;
    let ice_servers = loop {
        match signal.recv().await? {
            Some(RelayToClient::Welcome { ice_servers, .. }) => break ice_servers,
            Some(RelayToClient::Error { message, .. }) => return Err(ShareError::Refused(message)),
            Some(_) => {}
            None => return Err(ShareError::RelayClosed),
        }
    };
    let mut transport = options.transport.clone();
    transport.ice_servers.extend(ice_servers);
    if let RelayChoice::Embedded { bind } = &options.relay
        && bind.ip().is_loopback()
        && transport.native_peer.is_some()
    {
        // Only this host can reach a loopback relay, so a native visitor is on this
        // host too: large SCTP packets are safe (measured 730-915 MB/s against
        // about 300). Browsers never ask for native tuning.
        transport.native_peer = Some(crate::transport::NativeTuning::SAME_HOST);
    }

    let index = Arc::new(RwLock::new(ShareIndex::new(epoch)));
    let (changed_tx, changed_rx) = watch::channel(0u64);
    let feed = feed::spawn_feed(walk, index.clone(), changed_tx.clone(), walk_progress)
        .map_err(ShareError::Thread)?;
    let _ = events
        .send(ShareEvent::Ready {
            link: link.to_url(),
        })
        .await;

    let sessions = CancellationToken::new();
    let ctx = serve::ServeContext {
        index,
        index_changed: changed_rx,
        root,
        config: options.sender.clone(),
        cancel: sessions.clone(),
    };
    let (out_tx, mut out_rx) = mpsc::channel::<guests::Outgoing>(256);
    let (opened_tx, mut opened_rx) = mpsc::channel::<PeerId>(64);
    let mut visitors: HashMap<PeerId, Visitor> = HashMap::new();
    let mut tasks: JoinSet<VisitorDone> = JoinSet::new();
    let mut relay_open = true;

    let result = loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break Ok(()),
            Some(peer) = opened_rx.recv() => {
                if let Some(v) = visitors.get_mut(&peer) {
                    v.connected = true;
                }
                let n = visitors.values().filter(|v| v.connected).count();
                let _ = events.send(ShareEvent::VisitorConnected { peer: peer.0, visitors: n }).await;
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                let (peer, reason, stats) = match done {
                    Ok(VisitorDone::Failed(peer, reason)) => (peer, reason, None),
                    Ok(VisitorDone::Served(peer, outcome)) => (peer, outcome.reason, Some(outcome.stats)),
                    Err(e) => (PeerId(0), format!("a visitor task failed: {e}"), None),
                };
                visitors.remove(&peer);
                let n = visitors.values().filter(|v| v.connected).count();
                let _ = events.send(ShareEvent::VisitorLeft { peer: peer.0, visitors: n, reason, stats }).await;
            }
            Some((peer, payload)) = out_rx.recv() => {
                if relay_open {
                    let data = key.seal_payload(&link.room, Direction::HostToGuest, random_bytes::<24>()?, &payload);
                    if let Err(e) = signal.send(&ClientToRelay::Msg { to: peer, data }).await {
                        relay_open = false;
                        let _ = events.send(ShareEvent::Warning(format!("lost the relay: {e}; connected visitors stay connected, new ones cannot join"))).await;
                    }
                }
            }
            msg = signal.recv(), if relay_open => match msg {
                Ok(Some(msg)) => {
                    let reply = on_relay_message(msg, &link, &key, &mut visitors, &mut tasks, &options, &transport, &ctx, &out_tx, &opened_tx, &events).await;
                    if let Some((peer, payload)) = reply {
                        let data = key.seal_payload(&link.room, Direction::HostToGuest, random_bytes::<24>()?, &payload);
                        let _ = signal.send(&ClientToRelay::Msg { to: peer, data }).await;
                    }
                }
                Ok(None) | Err(_) => {
                    relay_open = false;
                    let _ = events.send(ShareEvent::Warning("lost the connection to the relay; connected visitors stay connected, new ones cannot join until linkfs is restarted".into())).await;
                }
            },
        }
    };

    // Stop: say goodbye to every visitor, give them a moment to hear it, close the relay.
    sessions.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    if relay_open {
        signal.close().await;
    }
    if let Some(relay) = relay {
        relay.shutdown().await;
    }
    drop(changed_tx);
    // The feed thread ends with the walk; it is not waited for (a huge walk may still run).
    drop(feed);
    result
}

#[allow(clippy::too_many_arguments)]
async fn on_relay_message(
    msg: RelayToClient,
    link: &ShareLink,
    key: &SignalKey,
    visitors: &mut HashMap<PeerId, Visitor>,
    tasks: &mut JoinSet<VisitorDone>,
    options: &ShareOptions,
    transport: &TransportConfig,
    ctx: &serve::ServeContext,
    out: &mpsc::Sender<guests::Outgoing>,
    opened: &mpsc::Sender<PeerId>,
    events: &mpsc::Sender<ShareEvent>,
) -> Option<(PeerId, SignalPayload)> {
    match msg {
        RelayToClient::Msg { from, data } => {
            let payload = match key.open_payload(&link.room, Direction::GuestToHost, &data) {
                Ok(p) => p,
                Err(_) => {
                    tracing::info!(
                        peer = from.0,
                        "a visitor's message does not open with this link's secret"
                    );
                    // Sealed with the real key: a visitor with a wrong secret cannot read it
                    // either, and its page concludes that the link is not valid.
                    return Some((
                        from,
                        SignalPayload::Reject {
                            reason: "this link's secret does not match".into(),
                        },
                    ));
                }
            };
            match payload {
                SignalPayload::Offer { sdp } => {
                    if visitors.contains_key(&from) {
                        return None;
                    }
                    if visitors.len() >= options.max_visitors {
                        return Some((
                            from,
                            SignalPayload::Reject {
                                reason: format!(
                                    "The sharer already has {} visitors connected, the most it allows. Try again later.",
                                    options.max_visitors
                                ),
                            },
                        ));
                    }
                    let (cand_tx, cand_rx) = mpsc::channel(CANDIDATE_QUEUE);
                    visitors.insert(
                        from,
                        Visitor {
                            candidates: cand_tx,
                            connected: false,
                        },
                    );
                    let (transport, out, opened, ctx) =
                        (transport.clone(), out.clone(), opened.clone(), ctx.clone());
                    tasks.spawn(async move {
                        let link = tokio::select! {
                            link = guests::connect_visitor(from, sdp, transport, cand_rx, out) => link,
                            _ = ctx.cancel.cancelled() => return VisitorDone::Failed(from, "sharing stopped".into()),
                        };
                        match link {
                            Ok(link) => {
                                let _ = opened.send(from).await;
                                VisitorDone::Served(from, serve::serve(link, ctx).await)
                            }
                            Err(e) => VisitorDone::Failed(from, format!("could not connect: {e}")),
                        }
                    });
                }
                ref c @ SignalPayload::Candidate { .. } => {
                    if let (Some(v), Some(c)) = (visitors.get(&from), IceCandidate::from_payload(c))
                    {
                        // A full queue means the visitor floods candidates: drop the extra.
                        let _ = v.candidates.try_send(c);
                    }
                }
                _ => {}
            }
            None
        }
        // A visitor's page closes its relay socket as soon as its data channel is
        // open, so "left" says nothing about the visitor: its task ends when its
        // handshake fails (connect timeout) or its link closes.
        RelayToClient::Left { .. } => None,
        RelayToClient::Error { code, message } => {
            if code != RelayErrorCode::UnknownPeer {
                let _ = events
                    .send(ShareEvent::Warning(format!("the relay says: {message}")))
                    .await;
            }
            None
        }
        _ => None,
    }
}
