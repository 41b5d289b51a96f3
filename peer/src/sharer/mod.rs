//! `linkfs share`: everything a sharer runs, wired together. The policy (links
//! and their rights, who is let in, passwords, expiry, revoke, kick, the relay
//! connection's retries) is one sans-IO machine, `linkfs_core::share::Share`;
//! this module is its shell: disk, walk, watch, sockets, the control socket.
//!
//! ```text
//!  relay (embedded, or --relay URL)         [relay.rs]
//!     ^  one WebSocket, reconnected when Share says  [host.rs: RelayLine]
//!     |
//!  share loop: feeds Share its inputs (relay text, visitors' signaling and first
//!     |        frames, password answers, control asks, the clock) and does what
//!     |        it says                                                [share_loop.rs]
//!     |-- Answer {peer} --> one task per visitor: handshake, then first frame
//!     |                     back to Share, then serve(link) when told  [visitors.rs, serve.rs]
//!     |-- CheckPassword --> Argon2 on the blocking pool                [password.rs]
//!     |-- StartSession  --> the visitor's view of the index, its seat  [views.rs]
//!     ^-- control socket: add, list, revoke, kick                      [control.rs, requests.rs]
//!  walk threads -> feed thread -> ShareIndex (RwLock) -> index_changed   [feed.rs]
//!  (or saved index -> check thread ---^)                                  [live_index.rs]
//!  notify -> watch thread (settle, reconcile) ----^                       [folder_watch.rs, reconcile.rs]
//!  state dir: kept link (room, secret, port), links, index saved at a clean stop [share_state.rs]
//! ```
//!
//! The link is reported ([`ShareEvent::Ready`]) as soon as the room is held at
//! the relay, before the walk has found anything: a visitor who opens it early
//! sees the tree fill in. Admission (at most [`ShareOptions::max_visitors`]),
//! refusals and sealing are the machine's; a visitor whose offer does
//! not open with the link's secret gets one sealed refusal it cannot read
//! either, which its page shows as "this link is not valid".

pub mod activity;
pub mod control;
mod disk;
mod event;
mod feed;
pub mod folder_watch;
mod host;
pub mod intake;
pub mod landing;
mod live_index;
pub mod password;
pub mod reconcile;
mod relay;
mod requests;
mod serve;
mod share_loop;
pub mod share_state;
mod shown_paths;
mod views;
mod visitors;

use std::path::PathBuf;
use std::time::Duration;

use linkfs_core::share::{Share, ShareConfig};
use linkfs_core::{SenderConfig, SettleConfig, ShareLink};
use linkfs_proto::Epoch;
use linkfs_proto::sharer_key::SharerKey;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use disk::{DiskEntry, OPEN_FILES, OpenFiles, ShareRoot};
pub use event::{ShareError, ShareEvent, StartLink};
pub use feed::{CheckSummary, WalkProgress, spawn_feed};
pub use linkfs_core::share::links;
pub use live_index::{IndexStart, LiveIndex};
pub use relay::{EmbeddedRelayConfig, RelayChoice, RelayInUse};
pub use requests::LinkRefused;
pub use serve::{
    ServeContext, ServeEnd, ServeOutcome, Served, ServedSession, serve, serve_link, serve_session,
};
pub use shown_paths::PathError;
pub use views::ViewError;
pub use visitors::{
    CANDIDATE_QUEUE, INSTRUCTIONS, Instruction, Reach, VisitorEnd, VisitorLeft, VisitorNews,
    Visitors,
};

use crate::random::random_bytes;
use crate::transport::TransportConfig;
use host::RelayLine;
use share_loop::{ShareClock, ShareLoop, register};
use share_state::{KeptLink, ShareState};
use views::{Scoping, Views};

#[derive(Debug, Clone)]
pub struct ShareOptions {
    pub root: PathBuf,
    pub relay: RelayChoice,
    pub transport: TransportConfig,
    pub sender: SenderConfig,
    /// Visitors connected (or connecting) at once; more are turned away.
    pub max_visitors: usize,
    /// Follow changes to the folder (on by default); off, the share is the
    /// folder as the walk found it.
    pub watch: bool,
    /// Where the link and index are kept between runs (see [`share_state`]);
    /// `None` keeps nothing: every run gets a new link.
    pub state_root: Option<PathBuf>,
    /// Forget the kept link (and index) and make a new one.
    pub new_link: bool,
    /// Print a link with these rights instead of the main link.
    pub start_link: Option<StartLink>,
    /// Write one JSON line per visitor's join, read, download and leave here.
    pub activity_log: Option<PathBuf>,
}

/// Shares `options.root` until `cancel` fires. The walk's progress goes to
/// `walk_progress`; everything else to `events`. Each bump of `drop_links`
/// drops every visitor's data link without a goodbye (they reconnect).
pub async fn share(
    options: ShareOptions,
    events: mpsc::Sender<ShareEvent>,
    walk_progress: watch::Sender<WalkProgress>,
    cancel: CancellationToken,
    drop_links: watch::Receiver<u64>,
) -> Result<(), ShareError> {
    let warn = |w: String| {
        let events = events.clone();
        async move {
            let _ = events.send(ShareEvent::Warning(w)).await;
        }
    };
    let state = match &options.state_root {
        Some(state_root) => match ShareState::open(state_root, &options.root) {
            Ok(state) => Some(state),
            Err(e) => {
                warn(e.to_string()).await;
                None
            }
        },
        None => None,
    };
    if options.new_link
        && let Some(state) = &state
        && let Err(e) = state.forget()
    {
        warn(format!("cannot forget the old link: {e}")).await;
    }
    let activity_log =
        match &options.activity_log {
            Some(file) => Some(activity::ActivityLog::open(file).map_err(|source| {
                ShareError::ActivityLog {
                    path: file.clone(),
                    source,
                }
            })?),
            None => None,
        };
    let kept = state.as_ref().and_then(ShareState::kept_link);
    let start = match state.as_ref().map(ShareState::take_index) {
        Some(Ok(Some(saved))) => IndexStart::Saved(Box::new(saved)),
        Some(Err(why)) => {
            warn(format!("{why}; walking the folder afresh")).await;
            IndexStart::Walk(Epoch(u64::from_le_bytes(random_bytes()?)))
        }
        _ => IndexStart::Walk(Epoch(u64::from_le_bytes(random_bytes()?))),
    };
    let live = LiveIndex::start(
        &options.root,
        start,
        options.watch,
        SettleConfig::default(),
        walk_progress,
        events.clone(),
    )?;
    let seed = random_bytes()?;
    let relay =
        RelayInUse::start(&options.relay, kept.as_ref().and_then(|k| k.embedded_port)).await?;
    let sharer = match &kept {
        Some(k) => SharerKey::from_seed(k.sharer_seed),
        None => SharerKey::from_seed(random_bytes()?),
    };
    let link = match kept
        .as_ref()
        .and_then(|k| ShareLink::parse_fragment(&k.key).ok())
    {
        Some(mut link) => {
            link.origin = relay.origin.clone();
            if let Some(port) = kept.as_ref().and_then(|k| k.embedded_port)
                && relay.embedded_port().is_some_and(|now| now != port)
            {
                warn(format!(
                    "the link changed: port {port}, which the kept link names, is in use by another program (stop it, or give the port with --bind 127.0.0.1:{port})"
                ))
                .await;
            }
            link
        }
        None => ShareLink::of_sharer(&relay.origin, &sharer, random_bytes()?),
    };
    if let Some(state) = &state {
        let keep = KeptLink {
            key: format!("{}.{}", link.room, link.secret.encode()),
            sharer_seed: sharer.seed(),
            embedded_port: relay.embedded_port(),
        };
        if kept.as_ref() != Some(&keep)
            && let Err(e) = state.keep_link(&keep)
        {
            warn(format!("{e}; the next run will print a new link")).await;
        }
    }
    // The sharer reaches its own embedded relay over loopback (a port
    // forward or a proxy named in the link is often not reachable from inside).
    let host_link = ShareLink {
        origin: relay.connect_origin.clone(),
        ..link.clone()
    };
    let mut line = match RelayLine::connect(&host_link, sharer.clone()).await {
        Ok(line) => line,
        Err(e) => {
            relay.shutdown().await;
            return Err(e);
        }
    };
    // The share's other links, kept from earlier runs.
    let (kept_links, links_trouble) = match &state {
        Some(state) => state.links(),
        None => Default::default(),
    };
    if let Some(why) = links_trouble {
        warn(why).await;
    }
    let clock = ShareClock::start();
    let config = ShareConfig {
        max_visitors: options.max_visitors,
        ..ShareConfig::default()
    };
    let mut share = Share::new(clock.now(), &link, sharer, kept_links, config, seed);
    let ice_servers = match register(&mut share, &mut line, &clock).await {
        Ok(servers) => servers,
        Err(e) => {
            line.close().await;
            relay.shutdown().await;
            return Err(e);
        }
    };

    let stop_visitors = CancellationToken::new();
    let base = ServeContext {
        index: live.index.clone(),
        index_changed: live.changed.clone(),
        root: live.root.clone(),
        config: options.sender.clone(),
        cancel: stop_visitors.clone(),
        drop_links: Some(drop_links),
        farewell: Default::default(),
        watch: None,
        intake: None,
    };
    let scoping = Scoping {
        root: std::fs::canonicalize(&options.root).unwrap_or_else(|_| options.root.clone()),
        watch: options.watch,
        settle: SettleConfig::default(),
        events: events.clone(),
        log: activity_log,
    };
    let mut views = Views::new(base, scoping);
    views.start_all(share.links());
    // The printed link: the main one, or one with the rights asked for.
    let printed = match &options.start_link {
        None => link.clone(),
        Some(start) => {
            match requests::start_link(&mut share, &mut views, state.as_ref(), start, clock.now())
                .await
            {
                Ok(l) => l,
                Err(why) => {
                    line.close().await;
                    relay.shutdown().await;
                    views.stop().await;
                    live.stop().await;
                    return Err(ShareError::StartLink(Box::new(why)));
                }
            }
        }
    };
    let other_links = relay
        .other_origins
        .iter()
        .map(|origin| {
            ShareLink {
                origin: origin.clone(),
                ..printed.clone()
            }
            .to_url()
        })
        .collect();
    // The control socket listens before the link is printed, so `linkfs link` and
    // `linkfs visitors` reach a share as soon as its link is out.
    let (control_tx, mut control_rx) = mpsc::channel::<control::ControlRequest>(8);
    let control_stop = CancellationToken::new();
    let _control = match &state {
        Some(state) => {
            let socket = state.dir().join(share_state::CONTROL_SOCKET);
            match control::listen(socket.clone(), control_tx, control_stop.clone()) {
                Ok(task) => Some(task),
                Err(e) => {
                    warn(format!(
                        "`linkfs link` and `linkfs visitors` will not reach this share: cannot listen on {}: {e}",
                        socket.display()
                    ))
                    .await;
                    None
                }
            }
        }
        None => None,
    };
    let _stop_control = control_stop.drop_guard();
    let _ = events
        .send(ShareEvent::Ready {
            link: printed.to_url(),
            other_links,
        })
        .await;

    let mut share_loop = ShareLoop::new(
        share,
        views,
        line,
        state,
        events.clone(),
        clock,
        options.transport.clone(),
        relay.loopback_only,
        ice_servers,
        stop_visitors,
    );
    share_loop.run(&cancel, &mut control_rx).await;

    // Stop: say goodbye to every visitor, give them a moment to hear it, close the relay.
    let state = share_loop.stop(Duration::from_secs(3)).await;
    relay.shutdown().await;
    let index = live.index.clone();
    live.stop().await;
    if let Some(state) = state {
        save_index(&state, &index, &events).await;
    }
    Ok(())
}

/// Saves the index for the next start, once nothing changes it any more and
/// no session sends from it (so no log position was sent beyond what is saved).
async fn save_index(
    state: &ShareState,
    index: &std::sync::RwLock<linkfs_core::ShareIndex>,
    events: &mpsc::Sender<ShareEvent>,
) {
    let saved = {
        let ix = index.read().unwrap_or_else(|p| p.into_inner());
        // An unfinished walk is not worth keeping: the next start walks anyway.
        if !ix.walk_done() {
            return;
        }
        // Written as it goes, under the read lock: nothing changes it now.
        state.save_index(&ix)
    };
    if let Err(e) = saved {
        let _ = events
            .send(ShareEvent::Warning(format!(
                "{e}; the next start walks the folder again"
            )))
            .await;
    }
}
