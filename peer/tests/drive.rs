//! The sharer's session and the native receiver, both in the one drive loop,
//! talking over an in-memory link that loses, duplicates, delays and reorders
//! frames (core's simulated link): no WebRTC, no FUSE, no relay. Real files on
//! disk are shared and read back.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use linkfs_core::sim::LinkModel;
use linkfs_core::{EndReason, FailureKind, ReceiverConfig, SenderConfig, SessionError, ShareIndex};
use linkfs_peer::drive::memory::{MemoryLink, MemoryReceiver, MemorySender};
use linkfs_peer::drive::{FrameLink, FrameReceiver, FrameSender};
use linkfs_peer::lanes::{
    FIRST_LANES, LANE_AFTER_BYTES, LaneBoard, LaneMaker, LanedLink, MAX_LANES,
};
use linkfs_peer::sharer::{
    ServeContext, ServeEnd, Served, ShareRoot, WalkProgress, serve, serve_link, spawn_feed,
};
use linkfs_peer::visit::{Client, ReadError, native_receiver_config};
use linkfs_peer::walk::{WalkOptions, Walker};
use linkfs_proto::{
    EntryId, EntryKind, Epoch, FRAME_READ_CHUNK, FRAME_UPLOAD_CHUNK, LaneJoin, LaneToken,
};
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
            farewell: Default::default(),
            watch: None,
            intake: None,
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
    let reading = client.start_read(id, None, 0, want.len() as u64);
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

// ------------------------------------------------------------------ lanes

/// A memory link whose receiving half counts the read chunk bytes it
/// delivers, and whose sending half the upload chunk bytes it sends.
struct Counted {
    link: MemoryLink,
    chunk_bytes: Arc<AtomicU64>,
    up_bytes: Arc<AtomicU64>,
}

struct CountedSender {
    inner: MemorySender,
    up_bytes: Arc<AtomicU64>,
}

impl FrameSender for CountedSender {
    async fn ready(&mut self) -> Result<(), linkfs_peer::drive::LinkClosed> {
        self.inner.ready().await
    }

    fn send(&mut self, frame: Bytes) -> Result<(), linkfs_peer::drive::LinkClosed> {
        if frame.first() == Some(&FRAME_UPLOAD_CHUNK) {
            self.up_bytes
                .fetch_add(frame.len() as u64, Ordering::Relaxed);
        }
        self.inner.send(frame)
    }

    async fn close(self) {
        self.inner.close().await
    }
}

struct CountedReceiver {
    inner: MemoryReceiver,
    chunk_bytes: Arc<AtomicU64>,
}

impl FrameLink for Counted {
    type Sender = CountedSender;
    type Receiver = CountedReceiver;
    fn split(self) -> (CountedSender, CountedReceiver) {
        let (tx, rx) = self.link.split();
        (
            CountedSender {
                inner: tx,
                up_bytes: self.up_bytes,
            },
            CountedReceiver {
                inner: rx,
                chunk_bytes: self.chunk_bytes,
            },
        )
    }
}

impl FrameReceiver for CountedReceiver {
    async fn recv(&mut self) -> Option<Bytes> {
        let frame = self.inner.recv().await?;
        if frame.first() == Some(&FRAME_READ_CHUNK) {
            self.chunk_bytes
                .fetch_add(frame.len() as u64, Ordering::Relaxed);
        }
        Some(frame)
    }

    fn closed_reason(&self) -> linkfs_peer::drive::LinkClosed {
        self.inner.closed_reason()
    }
}

/// A path of 5 ms each way, 4 MB/s per connection (as if a loss rate held
/// each back), nothing lost.
const DISTANT: LinkModel = LinkModel {
    latency_ms: 5,
    jitter_ms: 0,
    loss: 0.0,
    duplicate: 0.0,
    bytes_per_ms: 4_000,
};

/// A sharer that takes lanes (or not), and a visitor whose links it serves.
struct LanedShare {
    shared: Shared,
    model: LinkModel,
    board: Option<LaneBoard<MemorySender>>,
    /// Chunk bytes that came on session links, and on lanes.
    primary_bytes: Arc<AtomicU64>,
    lane_bytes: Arc<AtomicU64>,
    /// Upload chunk bytes the visitor sent on session links, and on lanes.
    primary_up: Arc<AtomicU64>,
    lane_up: Arc<AtomicU64>,
    lanes_made: Arc<AtomicU32>,
    lane_cuts: Arc<std::sync::Mutex<Vec<linkfs_peer::drive::memory::Cut>>>,
}

impl LanedShare {
    async fn new(root: &Path, takes_lanes: bool) -> LanedShare {
        Self::over(root, takes_lanes, DISTANT).await
    }

    async fn over(root: &Path, takes_lanes: bool, model: LinkModel) -> LanedShare {
        LanedShare {
            shared: index_of(root, quick_sender()).await,
            model,
            board: takes_lanes.then(LaneBoard::new),
            primary_bytes: Arc::default(),
            lane_bytes: Arc::default(),
            primary_up: Arc::default(),
            lane_up: Arc::default(),
            lanes_made: Arc::default(),
            lane_cuts: Arc::default(),
        }
    }

    /// A sharer whose link takes files (landing in `root`), with lanes.
    async fn taking_uploads(root: &Path) -> LanedShare {
        let config = SenderConfig {
            rights: linkfs_proto::Rights {
                list: true,
                upload: true,
                ..linkfs_proto::Rights::default()
            },
            ..quick_sender()
        };
        let mut shared = index_of(root, config).await;
        shared.ctx.intake = Some(linkfs_peer::sharer::intake::UploadPlace {
            dock: linkfs_peer::sharer::landing::Dock::open(root).unwrap(),
            folder: String::new(),
            link: linkfs_core::LinkId(1),
            ledger: Arc::new(linkfs_peer::sharer::intake::UploadLedger::new(
                0, 0, 0, 0, 0,
            )),
            drop: false,
        });
        LanedShare {
            shared,
            model: DISTANT,
            board: Some(LaneBoard::new()),
            primary_bytes: Arc::default(),
            lane_bytes: Arc::default(),
            primary_up: Arc::default(),
            lane_up: Arc::default(),
            lanes_made: Arc::default(),
            lane_cuts: Arc::default(),
        }
    }

    /// A link from the visitor, served as the real sharer serves one.
    fn link(&self, seed: u64, counter: &Arc<AtomicU64>) -> Counted {
        let (a, b, cut) = MemoryLink::pair_with_cut(self.model, seed);
        let lane = Arc::ptr_eq(counter, &self.lane_bytes);
        if lane {
            self.lane_cuts.lock().unwrap().push(cut);
        }
        let (ctx, board) = (self.shared.ctx.clone(), self.board.clone());
        tokio::spawn(async move { serve_link(a, ctx, board.as_ref()).await });
        Counted {
            link: b,
            chunk_bytes: counter.clone(),
            up_bytes: if lane {
                &self.lane_up
            } else {
                &self.primary_up
            }
            .clone(),
        }
    }

    /// A visitor that opens up to `lanes` lanes on a path of `rtt`.
    async fn visit(self: &Arc<Self>, lanes: u8, rtt: Duration) -> Client {
        let links = Arc::new(AtomicU32::new(0));
        let share = self.clone();
        let open = linkfs_peer::lanes::LanesOpen::default();
        let maker = LaneMaker::<Counted> {
            connect: Arc::new(move || {
                let share = share.clone();
                Box::pin(async move {
                    let n = share.lanes_made.fetch_add(1, Ordering::Relaxed);
                    Ok(share.link(1000 + u64::from(n), &share.lane_bytes))
                })
            }),
            round_trip: Arc::new(move || Box::pin(async move { Some(rtt) })),
            lanes,
            open: open.clone(),
        };
        let share = self.clone();
        let connect: linkfs_peer::visit::Connector<LanedLink<Counted>> = Box::new(move || {
            let (share, maker, links) = (share.clone(), maker.clone(), links.clone());
            Box::pin(async move {
                let n = links.fetch_add(1, Ordering::Relaxed);
                let link = share.link(u64::from(n), &share.primary_bytes);
                Ok(LanedLink::new(link, Some(maker)))
            })
        });
        let client = Client::connect(connect, quick_receiver())
            .await
            .unwrap()
            .with_lanes_open(open);
        client.wait_complete().await.unwrap();
        client
    }
}

/// The 16 MiB file of a tree made for the lane tests.
fn big_file(root: &Path) -> Vec<u8> {
    let data = bytes(99, 16 << 20);
    std::fs::write(root.join("big.bin"), &data).unwrap();
    std::fs::write(root.join("small.txt"), b"small").unwrap();
    data
}

async fn read_file(client: &Client, rel: &str) -> Vec<u8> {
    let (id, size) = client.with_index(|ix| {
        let id = ix.lookup(rel.as_bytes()).expect(rel);
        (id, ix.get(id).expect(rel).size)
    });
    tokio::time::timeout(Duration::from_secs(60), read_whole(client, id, size))
        .await
        .expect("the read finishes within 60 s")
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_read_at_a_distance_spreads_over_lanes_and_arrives_byte_for_byte() {
    let dir = TempDir::new("lanes");
    let want = big_file(&dir.0);
    let share = Arc::new(LanedShare::new(&dir.0, true).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(10)).await;
    let got = read_file(&client, "big.bin").await;
    assert!(got == want, "the bytes are the file's");
    let (primary, lanes) = (
        share.primary_bytes.load(Ordering::Relaxed),
        share.lane_bytes.load(Ordering::Relaxed),
    );
    // The first step at least (each memory link moves its own 4 MB/s, so
    // later steps add up too, if the read lasts until they are judged).
    let made = share.lanes_made.load(Ordering::Relaxed);
    assert!(made >= u32::from(FIRST_LANES), "{made} lanes made");
    // What the mount fetches ahead by: every lane made is open.
    assert_eq!(client.lanes_open(), made as usize, "lanes open");
    // (A memory link takes frames as fast as they come, so the session's own
    // link has room more often than a real one's window: lanes take less here.)
    assert!(
        lanes >= 1 << 20,
        "lanes carried {lanes} of {} chunk bytes",
        primary + lanes
    );
    assert!(
        primary >= LANE_AFTER_BYTES,
        "the first bytes came before any lane"
    );
    assert_eq!(client.status().reconnects, 0);
    client.shutdown().await;
}

/// Regression: with lanes open the sharer still put a long read's chunks on
/// the session's own link whenever it had room, so on a lossy path a small
/// file's answer waited behind the repairs of bulk packets there (one ordered
/// stream): its first byte took 145 ms p50 where the path takes 45.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_a_lane_joined_bulk_stays_off_the_sessions_link_and_small_files_stay_on_it() {
    let dir = TempDir::new("lanes-apart");
    let want = big_file(&dir.0);
    let share = Arc::new(LanedShare::new(&dir.0, true).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(10)).await;
    assert!(read_file(&client, "big.bin").await == want);
    let counts = || {
        (
            share.primary_bytes.load(Ordering::Relaxed),
            share.lane_bytes.load(Ordering::Relaxed),
        )
    };
    let before = counts();
    assert!(read_file(&client, "big.bin").await == want);
    let after = counts();
    assert_eq!(
        after.0,
        before.0,
        "the second read's chunks came on the session's own link ({} bytes)",
        after.0 - before.0
    );
    assert!(
        after.1 - before.1 >= 16 << 20,
        "the lanes carried the second read: {} bytes",
        after.1 - before.1
    );
    assert_eq!(read_file(&client, "small.txt").await, b"small");
    let small = counts();
    assert!(
        small.0 > after.0,
        "the small file came on the session's link"
    );
    assert_eq!(small.1, after.1, "and not on a lane");
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_path_opens_no_lanes() {
    let dir = TempDir::new("lanes-short");
    let want = big_file(&dir.0);
    let share = Arc::new(LanedShare::new(&dir.0, true).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(1)).await;
    assert!(read_file(&client, "big.bin").await == want);
    assert_eq!(share.lanes_made.load(Ordering::Relaxed), 0);
    assert_eq!(share.lane_bytes.load(Ordering::Relaxed), 0);
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_one_connection_fills_opens_no_lanes() {
    let dir = TempDir::new("lanes-fast");
    let want = big_file(&dir.0);
    let fast = LinkModel {
        bytes_per_ms: 0,
        ..DISTANT
    };
    let share = Arc::new(LanedShare::over(&dir.0, true, fast).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(10)).await;
    assert!(read_file(&client, "big.bin").await == want);
    assert_eq!(
        share.lanes_made.load(Ordering::Relaxed),
        0,
        "one link moved it fast enough"
    );
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharer_that_offers_no_lanes_serves_a_visitor_that_would_open_them() {
    let dir = TempDir::new("lanes-none");
    let want = big_file(&dir.0);
    let share = Arc::new(LanedShare::new(&dir.0, false).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(10)).await;
    assert!(read_file(&client, "big.bin").await == want);
    assert_eq!(
        share.lanes_made.load(Ordering::Relaxed),
        0,
        "no offer, no lanes"
    );
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_that_breaks_takes_its_link_and_the_read_resumes_on_a_new_one() {
    let dir = TempDir::new("lanes-cut");
    let want = big_file(&dir.0);
    let share = Arc::new(LanedShare::new(&dir.0, true).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(10)).await;
    let id = client.with_index(|ix| ix.lookup(b"big.bin")).unwrap();
    let reading = {
        let client = client.clone();
        let len = want.len() as u64;
        tokio::spawn(async move { read_whole(&client, id, len).await })
    };
    // Once lanes carry chunks, one of them breaks.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while share.lane_bytes.load(Ordering::Relaxed) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no lane carried a chunk"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    share.lane_cuts.lock().unwrap()[0].cut();
    let got = tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .expect("the read finishes after the reconnect")
        .unwrap()
        .expect("the read succeeds");
    assert!(got == want, "the bytes are the file's");
    assert!(client.status().reconnects >= 1, "{:?}", client.status());
    assert!(client.status().ended.is_none());
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_that_names_no_session_is_closed() {
    let dir = TempDir::new("lanes-stranger");
    big_file(&dir.0);
    let shared = index_of(&dir.0, quick_sender()).await;
    let board = LaneBoard::<MemorySender>::new();
    let (a, b) = MemoryLink::pair(LinkModel::PERFECT, 1);
    let served = tokio::spawn(async move { serve_link(a, shared.ctx.clone(), Some(&board)).await });
    let (mut tx, mut rx) = b.split();
    tx.ready().await.unwrap();
    tx.send(Bytes::from(
        LaneJoin {
            token: LaneToken([5; 16]),
        }
        .encode(),
    ))
    .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("the stranger is turned away at once")
        .unwrap();
    assert!(matches!(outcome, Served::Lane(None)), "{outcome:?}");
    let frame = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the lane closes");
    assert!(
        frame.is_none(),
        "nothing is sent on a lane that named no session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_sharer_with_lanes_open_ends_its_visitor_with_its_goodbye() {
    let dir = TempDir::new("lanes-stop");
    let want = big_file(&dir.0);
    let share = Arc::new(LanedShare::new(&dir.0, true).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(10)).await;
    assert!(read_file(&client, "big.bin").await == want);
    assert!(
        share.lane_bytes.load(Ordering::Relaxed) > 0,
        "lanes were open"
    );

    share.shared.ctx.cancel.cancel();
    let end = tokio::time::timeout(Duration::from_secs(10), client.ended())
        .await
        .expect("the visitor hears the goodbye");
    assert!(matches!(end, EndReason::SharerGoodbye(_)), "{end:?}");
    assert_eq!(
        client.status().reconnects,
        0,
        "the lanes' ends are not a lost link"
    );
}

/// Issue 35: a visitor's upload on a slow, distant path opens lanes as a
/// slow read does, its chunks go up them (off the session's own link once
/// one joined), the sharer takes them in any order, and the file lands whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_at_a_distance_spreads_over_lanes_and_lands_byte_for_byte() {
    let dir = TempDir::new("lanes-up");
    std::fs::write(dir.0.join("small.txt"), b"small").unwrap();
    let src = TempDir::new("lanes-up-src");
    // Past the sharer's window (32 MiB), which the memory link's unbounded
    // flight lets the session's own link take before lanes are decided.
    let want = bytes(7, 48 << 20);
    std::fs::write(src.0.join("up.bin"), &want).unwrap();
    let share = Arc::new(LanedShare::taking_uploads(&dir.0).await);
    let client = share.visit(MAX_LANES, Duration::from_millis(10)).await;

    struct Quiet;
    impl linkfs_peer::visit::put::PutProgress for Quiet {
        fn advanced(&self, _: u64) {}
        fn say(&self, _: String) {}
    }
    let (files, skipped) = linkfs_peer::visit::put::gather(&[src.0.join("up.bin")], "");
    assert!(skipped.is_empty(), "{skipped:?}");
    let summary = tokio::time::timeout(
        Duration::from_secs(60),
        linkfs_peer::visit::put::put(&client, files, &Quiet),
    )
    .await
    .expect("the upload finishes within 60 s");
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    let landed = std::fs::read(dir.0.join("up.bin")).expect("the file landed");
    assert!(landed == want, "the landed bytes are the file's");

    let (primary, lanes) = (
        share.primary_up.load(Ordering::Relaxed),
        share.lane_up.load(Ordering::Relaxed),
    );
    assert!(
        share.lanes_made.load(Ordering::Relaxed) >= 1,
        "a slow upload opened lanes"
    );
    assert!(
        lanes >= 4 << 20,
        "lanes carried {lanes} of {} upload bytes",
        primary + lanes
    );
    assert_eq!(client.status().reconnects, 0);
    client.shutdown().await;
}
