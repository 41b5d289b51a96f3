//! Serving one receiver over an open data link: the thin async shell around
//! [`SenderSession`] (STYLE #4: one `select!` loop, a cancellation token).
//!
//! File reads run on tokio's blocking pool, at most `max_pending_io` at a time
//! (the session hands out no more), through the session's [`OpenFiles`].
//! A frame waits for room in the link's send buffer (`reserve`) inside the
//! same `select!` as incoming frames, so a slow receiver never stops this loop
//! from reading its acknowledgements and requests.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use linkfs_core::{
    IoFailure, Millis, ReadIo, SenderConfig, SenderSession, SenderStats, ShareIndex,
};
use linkfs_proto::ReadErrorCode;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::disk::{OpenFiles, ShareRoot};
use crate::transport::DataLink;

/// What a session ended with.
#[derive(Debug, Clone)]
pub struct ServeOutcome {
    /// Why it ended, in words.
    pub reason: String,
    pub stats: SenderStats,
}

/// What every session shares.
#[derive(Clone, Debug)]
pub struct ServeContext {
    pub index: Arc<RwLock<ShareIndex>>,
    /// Bumped whenever the index grows or the walk finishes.
    pub index_changed: watch::Receiver<u64>,
    pub root: Arc<ShareRoot>,
    pub config: SenderConfig,
    pub cancel: CancellationToken,
}

/// How long a goodbye may take to leave before the link is closed anyway.
const GOODBYE_FLUSH: Duration = Duration::from_secs(2);

fn read_index(index: &RwLock<ShareIndex>) -> std::sync::RwLockReadGuard<'_, ShareIndex> {
    // A panic while holding the lock would poison it; the index itself is still
    // consistent (pushes are single calls), so keep serving.
    index
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves one receiver until it leaves, the link drops or `cancel` fires.
pub async fn serve(link: DataLink, mut ctx: ServeContext) -> ServeOutcome {
    let start = Instant::now();
    let now = move || Millis(start.elapsed().as_millis() as u64);
    let mut session = SenderSession::new(ctx.config.clone());
    let (tx, mut rx) = link.split();
    let (io_tx, mut io_rx) =
        mpsc::channel::<(ReadIo, Result<Vec<u8>, IoFailure>)>(ctx.config.max_pending_io + 1);
    let files = Arc::new(Mutex::new(OpenFiles::default()));
    let mut pending: Option<Bytes> = None;
    let mut closing_since: Option<Instant> = None;
    let mut watching = true;
    let reason = loop {
        if pending.is_none() {
            pending = session
                .poll_transmit(now(), &read_index(&ctx.index))
                .map(Bytes::from);
        }
        while let Some(io) = session.poll_io() {
            let (root, files, io_tx) = (ctx.root.clone(), files.clone(), io_tx.clone());
            tokio::task::spawn_blocking(move || {
                let result = match files.lock() {
                    Ok(mut f) => f.read(&root, &io),
                    Err(_) => Err(IoFailure {
                        code: ReadErrorCode::Io,
                        message: "the sharer's file reader failed".into(),
                    }),
                };
                let _ = io_tx.blocking_send((io, result));
            });
        }
        if session.is_finished() && pending.is_none() {
            break session
                .end_reason()
                .map_or_else(|| "the session ended".to_owned(), ToString::to_string);
        }
        if closing_since.is_some_and(|t| t.elapsed() > GOODBYE_FLUSH) {
            break "the sharer stopped sharing".to_owned();
        }
        let deadline = session
            .poll_timeout()
            .map(|m| start + Duration::from_millis(m.0));
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled(), if closing_since.is_none() => {
                session.close("the sharer stopped sharing");
                closing_since = Some(Instant::now());
            }
            permit = tx.reserve(), if pending.is_some() => match permit {
                Ok(p) => {
                    if let Some(frame) = pending.take()
                        && let Err(e) = p.send(frame)
                    {
                        break format!("the link closed: {e}");
                    }
                }
                Err(e) => break format!("the link closed: {e}"),
            },
            frame = rx.recv() => match frame {
                Some(f) => {
                    if let Err(e) = session.handle_frame(now(), &f, &read_index(&ctx.index)) {
                        tracing::warn!(error = %e, "a receiver broke the protocol; its session ends");
                    }
                }
                None => break rx
                    .close_reason()
                    .map_or_else(|| "the receiver went away".to_owned(), |r| r.to_string()),
            },
            Some((io, result)) = io_rx.recv() => session.handle_io(&io, result),
            changed = ctx.index_changed.changed(), if watching => {
                if changed.is_err() {
                    watching = false;
                }
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or(start)), if deadline.is_some() => {
                session.handle_timeout(now());
            }
        }
    };
    tx.close().await;
    ServeOutcome {
        reason,
        stats: session.stats(),
    }
}
