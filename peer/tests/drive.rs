//! The sharer's session and the native receiver, both in the one drive loop,
//! talking over an in-memory link that loses, duplicates, delays and reorders
//! frames (core's simulated link): no WebRTC, no FUSE, no relay. Real files on
//! disk are shared and read back.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use linkfs_core::sim::LinkModel;
use linkfs_core::{EndReason, FailureKind, ReceiverConfig, SenderConfig, SessionError, ShareIndex};
use linkfs_peer::drive::memory::MemoryLink;
use linkfs_peer::sharer::{ServeContext, ServeEnd, ShareRoot, WalkProgress, serve, spawn_feed};
use linkfs_peer::visit::{Client, ReadError, native_receiver_config};
use linkfs_peer::walk::{WalkOptions, Walker};
use linkfs_proto::{EntryId, EntryKind, Epoch};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let base = std::env::temp_dir().join(format!(
            "linkfs-drive-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        std::fs::create_dir_all(&base).unwrap();
        TempDir(base)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic, incompressible-looking bytes.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A small tree: folders, empty and multi-megabyte files, a symlink.
fn make_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for d in 0..4 {
        let dir = root.join(format!("folder {d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..25 {
            let len = match (d, f) {
                (0, 0) => 0,
                (1, 1) => 3 * 1024 * 1024 + 17,
                _ => (d * 7919 + f * 104_729) % 90_000,
            };
            let data = bytes((d * 100 + f) as u64, len);
            let rel = format!("folder {d}/file {f}.bin");
            std::fs::write(root.join(&rel), &data).unwrap();
            files.push((rel, data));
        }
    }
    std::os::unix::fs::symlink("folder 0/file 1.bin", root.join("link")).unwrap();
    files
}

struct Shared {
    ctx: ServeContext,
    entries: u64,
    _progress: watch::Receiver<WalkProgress>,
}

/// Walks `root` into a share index, the way `linkfs share` does.
async fn index_of(root: &Path, config: SenderConfig) -> Shared {
    let index = Arc::new(RwLock::new(ShareIndex::new(Epoch(7))));
    let (changed_tx, changed_rx) = watch::channel(0u64);
    let (progress_tx, mut progress) = watch::channel(WalkProgress::default());
    let walk = Walker::new(root, WalkOptions::default()).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _feed = spawn_feed(walk, index.clone(), changed_tx, progress_tx, done).unwrap();
    let summary = loop {
        if let Some(s) = progress.borrow_and_update().summary.clone() {
            break s;
        }
        progress.changed().await.unwrap();
    };
    Shared {
        ctx: ServeContext {
            index,
            index_changed: changed_rx,
            root: Arc::new(ShareRoot::open(root).unwrap()),
            config,
            cancel: CancellationToken::new(),
            drop_links: None,
        },
        entries: summary.entries,
        _progress: progress,
    }
}

fn quick_sender() -> SenderConfig {
    SenderConfig {
        retransmit_ms: 150,
        ..SenderConfig::default()
    }
}

fn quick_receiver() -> ReceiverConfig {
    ReceiverConfig {
        retry_ms: 400,
        max_retries: 50,
        ..native_receiver_config()
    }
}

const LOSSY: LinkModel = LinkModel {
    latency_ms: 2,
    jitter_ms: 4,
    loss: 0.05,
    duplicate: 0.02,
    bytes_per_ms: 0,
};

async fn read_whole(client: &Client, entry: EntryId, size: u64) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::with_capacity(size as usize);
    while (out.len() as u64) < size {
        let len = (size - out.len() as u64).min(1 << 20);
        out.extend(client.read(entry, out.len() as u64, len).await?);
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_arrives_whole_over_a_lossy_link_in_memory() {
    let dir = TempDir::new("lossy");
    let files = make_tree(&dir.0);
    let shared = index_of(&dir.0, quick_sender()).await;
    let (sharer_end, receiver_end) = MemoryLink::pair(LOSSY, 11);
    let served = tokio::spawn(serve(sharer_end, shared.ctx.clone()));
    let client = Client::start(receiver_end, quick_receiver());

    tokio::time::timeout(Duration::from_secs(60), client.wait_complete())
        .await
        .expect("the index arrives within 60 s")
        .expect("the index arrives");
    assert_eq!(client.status().received, shared.entries);

    for (rel, want) in &files {
        let (id, size) = client.with_index(|ix| {
            let id = ix.lookup(rel.as_bytes()).expect(rel);
            let e = ix.get(id).expect(rel);
            assert_eq!(e.kind, EntryKind::File);
            (id, e.size)
        });
        assert_eq!(size, want.len() as u64, "{rel}");
        let got = tokio::time::timeout(Duration::from_secs(60), read_whole(&client, id, size))
            .await
            .expect("the read finishes")
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(got == *want, "{rel}: bytes differ");
    }

    client.shutdown().await;
    let outcome = served.await.unwrap();
    assert!(
        matches!(&outcome.end, ServeEnd::Session(SessionError::Goodbye(_))),
        "the receiver's goodbye ends the session: {:?}",
        outcome.end
    );
    assert!(outcome.stats.chunks_sent > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_sharer_ends_the_receiver_with_its_goodbye() {
    let dir = TempDir::new("stop");
    make_tree(&dir.0);
    let shared = index_of(&dir.0, quick_sender()).await;
    let (sharer_end, receiver_end) = MemoryLink::pair(LinkModel::PERFECT, 3);
    let served = tokio::spawn(serve(sharer_end, shared.ctx.clone()));
    let client = Client::start(receiver_end, quick_receiver());
    client.wait_complete().await.unwrap();

    shared.ctx.cancel.cancel();
    let end = tokio::time::timeout(Duration::from_secs(10), client.ended())
        .await
        .expect("the receiver hears the goodbye");
    assert!(matches!(end, EndReason::SharerGoodbye(_)), "{end:?}");
    assert_eq!(end.kind(), FailureKind::SharerGone);
    assert_eq!(end.to_string(), "the sharer stopped sharing");
    assert_eq!(served.await.unwrap().end, ServeEnd::Stopped);
    // Reads after the end fail with the reason, typed.
    let read = client.read(EntryId(1), 0, 0).await;
    assert!(
        matches!(&read, Err(ReadError::Ended(EndReason::SharerGoodbye(_)))),
        "{read:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_that_drops_ends_with_connection_lost() {
    let dir = TempDir::new("drop");
    make_tree(&dir.0);
    let shared = index_of(&dir.0, quick_sender()).await;
    let (sharer_end, receiver_end) = MemoryLink::pair(LinkModel::PERFECT, 5);
    let served = tokio::spawn(serve(sharer_end, shared.ctx.clone()));
    let client = Client::start(receiver_end, quick_receiver());
    client.wait_complete().await.unwrap();

    // The sharer's side vanishes without a goodbye (its task and link are gone).
    served.abort();
    let end = tokio::time::timeout(Duration::from_secs(10), client.ended())
        .await
        .expect("the receiver notices");
    assert_eq!(end, EndReason::ConnectionLost);
    assert_eq!(end.kind(), FailureKind::Unreachable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receiver_reconnects_after_cuts_and_resumes_its_index_and_reads() {
    let dir = TempDir::new("reconnect");
    let files = make_tree(&dir.0);
    let shared = index_of(&dir.0, quick_sender()).await;
    let cuts: Arc<std::sync::Mutex<Vec<linkfs_peer::drive::memory::Cut>>> = Arc::default();
    let links = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (a, b, cut) = MemoryLink::pair_with_cut(LinkModel::PERFECT, 1);
    cuts.lock().unwrap().push(cut);
    tokio::spawn(serve(a, shared.ctx.clone()));
    let reconnect: linkfs_peer::visit::Connector<MemoryLink> = {
        let (ctx, cuts, links) = (shared.ctx.clone(), cuts.clone(), links.clone());
        Box::new(move || {
            let (ctx, cuts, links) = (ctx.clone(), cuts.clone(), links.clone());
            Box::pin(async move {
                let n = links.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (a, b, cut) = MemoryLink::pair_with_cut(LinkModel::PERFECT, 10 + u64::from(n));
                cuts.lock().unwrap().push(cut);
                tokio::spawn(serve(a, ctx));
                Ok(b)
            })
        })
    };
    let client = Client::start_with(b, quick_receiver(), Some(reconnect));
    client.wait_complete().await.unwrap();

    // A big read, cut twice while it runs: it continues, and its bytes are the file's.
    let (rel, want) = files
        .iter()
        .find(|(_, d)| d.len() > 1 << 20)
        .unwrap()
        .clone();
    let id = client.with_index(|ix| ix.lookup(rel.as_bytes())).unwrap();
    let reading = client.start_read(id, 0, want.len() as u64);
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if let Some(c) = cuts.lock().unwrap().last() {
            c.cut();
        }
    }
    let got = tokio::time::timeout(Duration::from_secs(30), reading)
        .await
        .expect("the read finishes after the reconnects")
        .expect("the read succeeds");
    assert!(got == want, "the bytes are the file's");
    let status = client.status();
    assert!(status.reconnects >= 1, "{status:?}");
    assert!(!status.reconnecting);
    assert!(status.ended.is_none());
    assert_eq!(client.status().received, shared.entries);
    client.shutdown().await;
}
