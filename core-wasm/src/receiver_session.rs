//! The worker's side of a share: [`ReceiverSession`], core's
//! [`PersistentReceiver`] bound to IndexedDB ([`Store`]) and to the worker.
//!
//! The worker forwards every frame from the data link (`handleFrame`) and
//! sends whatever `takeOutgoing` returns. Every policy (when to write, what to
//! acknowledge, the rebuild, the "complete" rule, going on in memory when
//! storage fails) is `linkfs_core::persist`'s, tested natively; this module
//! carries out the writes it asks for and converts values for JavaScript.
//!
//! Whenever work finishes in the background (a storage commit), the session
//! calls the `notify` function it was opened with, so the worker drains
//! `takeOutgoing` and `takeEvents` again.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function, Uint8Array};
use linkfs_core::ShareLink;
use linkfs_core::{
    EndReason, Index, Millis, PersistentReceiver, ReadEvent, ReadHandle, Rebuilder, Rebuilt,
    ReceiverConfig, Search, SortKey, StoredEvent,
};
use linkfs_proto::EntryId;
use tsify::{Ts, Tsify as _};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;

use crate::store::{JsFrame, Store};
use crate::types::{
    EndKind, EntryPath, EntryRow, ListPage, Progress, SearchBatch, SearchHit, SessionEvent,
    SessionEvents, Stats,
};

/// Cached batch frames (about 2,000 entries each) `open` reads before the rest.
const FIRST_FRAMES: u32 = 8;
/// Snapshot parts (16,384 entry slots, about 0.65 MB each) `open` reads before
/// the rest: the head and the first folders' entries (the walk numbers the top
/// of the tree first), little enough to read and restore at once.
const FIRST_PARTS: u32 = 3;

/// How long `open` applies cached frames before returning, ms.
const FIRST_LOAD_STEP_MS: f64 = 15.0;

/// Refused index operations logged to the console (the rest are counted).
const REFUSALS_LOGGED: u64 = 3;

fn now() -> Millis {
    Millis(now_ms().max(0.0) as u64)
}

struct Inner {
    store: Option<Store>,
    receiver: PersistentReceiver<JsFrame>,
    writing: bool,
    events: Vec<SessionEvent>,
    refusals_logged: u64,
    /// Changes are being recorded (from the moment the index is complete).
    journaling: bool,
    notify: Function,
    /// The one search in progress, with its handle.
    search: Option<(u32, Search)>,
    next_search: u32,
    /// ms: IndexedDB opened, batches read, index rebuilt (figures only).
    open_timings: [f64; 3],
    /// The cached index still being applied, a few frames per `loadStep`.
    loading: Option<Loading>,
    storage_problem: Option<String>,
    opened_from_snapshot: bool,
    /// Snapshots stored in this session: how many, the last one's bytes and ms.
    snapshots: (u32, usize, f64),
}

/// A cached index being rebuilt in steps: the snapshot parts and frames read
/// from IndexedDB, and the next of each to apply.
struct Loading {
    rebuilder: Rebuilder,
    parts: Array,
    next_part: u32,
    frames: Array,
    next: u32,
    started: f64,
    /// The parts and frames after the first few are still being read (`loadRest`).
    rest_pending: bool,
}

impl Inner {
    /// The index queries see: the part of the cache loaded so far, then the session's.
    fn index(&self) -> &Index {
        match &self.loading {
            Some(l) => l.rebuilder.index(),
            None => self.receiver.index(),
        }
    }

    fn index_mut(&mut self) -> &mut Index {
        match &mut self.loading {
            Some(l) => l.rebuilder.index_mut(),
            None => self.receiver.index_mut(),
        }
    }

    /// Applies cached frames for up to `budget_ms`; true once all are applied
    /// and the session resumes from them (or, if they were not usable, starts clean).
    fn load_step(&mut self, budget_ms: f64) -> bool {
        let Some(l) = &mut self.loading else {
            return true;
        };
        let until = now().0 as f64 + budget_ms;
        // The snapshot's parts first; frames only once they are all in (the
        // rest may still be on its way from IndexedDB).
        while l.next_part < l.parts.length() && !l.rebuilder.failed() {
            let part = l.parts.get(l.next_part);
            l.next_part += 1;
            l.rebuilder.push_part(&copy_in(&part));
            if now().0 as f64 >= until {
                return false;
            }
        }
        while l.rebuilder.parts_left() == 0 && l.next < l.frames.length() && !l.rebuilder.failed() {
            let frame = l.frames.get(l.next);
            l.next += 1;
            l.rebuilder.push(&copy_in(&frame));
            if now().0 as f64 >= until {
                break;
            }
        }
        let more = l.next_part < l.parts.length() || l.next < l.frames.length();
        if (more || l.rest_pending) && !l.rebuilder.failed() {
            return false;
        }
        let l = self.loading.take().expect("loading");
        self.open_timings[2] = now().0 as f64 - l.started;
        let rebuilt = l.rebuilder.finish();
        if rebuilt.resume.is_none()
            && let Some(s) = &self.store
        {
            // Whatever is there is not usable: start clean.
            let s = s.clone();
            spawn_local(async move {
                let _ = s.clear().await;
            });
        }
        self.receiver = PersistentReceiver::new(
            rebuilt,
            ReceiverConfig::default(),
            self.storage_problem.clone(),
        );
        true
    }
}

/// A share's index in this worker. See the module docs.
#[wasm_bindgen]
pub struct ReceiverSession {
    inner: Rc<RefCell<Inner>>,
}

#[wasm_bindgen]
impl ReceiverSession {
    /// Opens the stored index of the share whose link fragment is `key`
    /// (`room.secret`; see `ShareLink::store_name`), if any, and prepares a
    /// receiver that resumes from it. `notify` is called when background work
    /// produced output.
    pub async fn open(key: String, notify: Function) -> ReceiverSession {
        crate::install_panic_hook();
        let t0 = now().0 as f64;
        let opened = match ShareLink::parse_fragment(&key) {
            Ok(link) => Store::open(&link.store_name()).await,
            Err(e) => Err(JsValue::from_str(&e.to_string())),
        };
        let (store, storage_problem) = match opened {
            Ok(s) => (Some(s), None),
            Err(e) => (
                None,
                Some(
                    e.as_string()
                        .unwrap_or_else(|| "IndexedDB is not available".into()),
                ),
            ),
        };
        let t1 = now().0 as f64;
        let first = match &store {
            Some(s) => s.load_first(FIRST_PARTS, FIRST_FRAMES).await.ok(),
            None => None,
        };
        let (state, parts, frames) = match first {
            // With a snapshot, its parts come first and every frame after them
            // (`loadRest` reads them all).
            Some(f) if f.state.is_some_and(|s| s.snapshot.is_some()) => {
                (f.state, f.parts, Array::new())
            }
            Some(f) => (f.state, Array::new(), f.frames),
            None => (None, Array::new(), Array::new()),
        };
        let t2 = now().0 as f64;
        let rest_pending =
            state.is_some_and(|s| s.snapshot.is_some()) || frames.length() == FIRST_FRAMES;
        // The session proper starts once the cache is applied (`loadStep`); until
        // then it holds an empty receiver that sees no frame.
        let receiver = PersistentReceiver::new(
            Rebuilt::default(),
            ReceiverConfig::default(),
            storage_problem.clone(),
        );
        let loading = Some(Loading {
            rebuilder: Rebuilder::new(state),
            parts,
            next_part: 0,
            frames,
            next: 0,
            started: t2,
            rest_pending,
        });
        let session = ReceiverSession {
            inner: Rc::new(RefCell::new(Inner {
                store,
                receiver,
                writing: false,
                events: Vec::new(),
                refusals_logged: 0,
                journaling: false,
                notify,
                search: None,
                next_search: 1,
                open_timings: [t1 - t0, t2 - t1, 0.0],
                opened_from_snapshot: state.is_some_and(|s| s.snapshot.is_some()),
                snapshots: (0, 0, 0.0),
                loading,
                storage_problem,
            })),
        };
        // The first screens: what a first step applies (the log starts with the
        // top folders).
        session.inner.borrow_mut().load_step(FIRST_LOAD_STEP_MS);
        session
    }

    /// Reads the rest of the cached index (after the first parts or frames
    /// `open` read); `loadStep` applies it.
    #[wasm_bindgen(js_name = loadRest)]
    pub async fn load_rest(&self) {
        let (store, from_part, from_seq) = {
            let i = self.inner.borrow();
            let Some(l) = &i.loading else { return };
            if !l.rest_pending {
                return;
            }
            let from = match l.rebuilder.snapshot() {
                // The parts not read yet, then every frame after the snapshot.
                Some(snap) => Some((l.parts.length(), snap.next)),
                // The frames after the last one read.
                None => {
                    let last = l.frames.get(l.frames.length().saturating_sub(1));
                    linkfs_proto::BatchReader::new(&copy_in(&last))
                        .ok()
                        .map(|r| (u32::MAX, r.header().end()))
                }
            };
            match from {
                Some((p, q)) => (i.store.clone(), p, q),
                None => (None, 0, linkfs_proto::Seq(0)),
            }
        };
        let t0 = now().0 as f64;
        let (parts, frames) = match store {
            Some(s) => s
                .load_rest(from_part, from_seq)
                .await
                .unwrap_or_else(|_| (Array::new(), Array::new())),
            None => (Array::new(), Array::new()),
        };
        let mut i = self.inner.borrow_mut();
        i.open_timings[1] += now().0 as f64 - t0;
        if let Some(l) = &mut i.loading {
            for p in parts.iter() {
                l.parts.push(&p);
            }
            for f in frames.iter() {
                l.frames.push(&f);
            }
            l.rest_pending = false;
        }
    }

    /// Applies more of the cached index, for about `budget_ms`; true once it is
    /// all applied. Until then the shell holds back frames and reads.
    #[wasm_bindgen(js_name = loadStep)]
    pub fn load_step(&self, budget_ms: f64) -> bool {
        self.inner.borrow_mut().load_step(budget_ms)
    }

    /// The data link opened: frames may flow.
    #[wasm_bindgen(js_name = channelOpened)]
    pub fn channel_opened(&self) {
        self.inner.borrow_mut().receiver.channel_opened();
    }

    /// The data link closed; the session waits for a new one (`linkLost`
    /// event), unless it had ended (the sharer said goodbye).
    #[wasm_bindgen(js_name = channelClosed)]
    pub fn channel_closed(&self) {
        self.inner.borrow_mut().receiver.channel_closed();
        self.after();
    }

    /// No new data link will come (the page gave up reconnecting): the
    /// session ends and reads fail.
    #[wasm_bindgen(js_name = giveUp)]
    pub fn give_up(&self) {
        self.inner.borrow_mut().receiver.give_up();
        self.after();
    }

    /// One frame from the sharer (the page's `ArrayBuffer`, as a `Uint8Array`
    /// over all of it). A batch to store is stored from this very buffer.
    #[wasm_bindgen(js_name = handleFrame)]
    pub fn handle_frame(&self, frame: Uint8Array) {
        let bytes = frame.to_vec();
        let given = JsFrame(frame.buffer().into());
        self.inner
            .borrow_mut()
            .receiver
            .handle_frame(now(), &bytes, &given);
        self.after();
    }

    /// Runs timers; call at `nextTimeout()`.
    pub fn tick(&self) {
        self.inner.borrow_mut().receiver.handle_timeout(now());
        self.after();
    }

    /// Milliseconds until `tick` should run, if a timer is pending.
    #[wasm_bindgen(js_name = nextTimeout)]
    pub fn next_timeout(&self) -> Option<f64> {
        let t = self.inner.borrow().receiver.poll_timeout()?;
        Some(t.0.saturating_sub(now().0) as f64)
    }

    /// Frames to send to the sharer now.
    #[wasm_bindgen(js_name = takeOutgoing, unchecked_return_type = "Uint8Array[]")]
    pub fn take_outgoing(&self) -> Array {
        let out = Array::new();
        let t = now();
        {
            let mut i = self.inner.borrow_mut();
            while let Some(f) = i.receiver.poll_transmit(t) {
                out.push(&Uint8Array::from(&f[..]));
            }
        }
        self.after();
        out
    }

    /// What happened since the last call, in order.
    #[wasm_bindgen(js_name = takeEvents)]
    pub fn take_events(&self) -> Result<Ts<SessionEvents>, JsError> {
        let events = SessionEvents(std::mem::take(&mut self.inner.borrow_mut().events));
        Ok(events.into_ts()?)
    }

    pub fn progress(&self) -> Result<Ts<Progress>, JsError> {
        let i = self.inner.borrow();
        let mut p = Progress::from(i.receiver.progress());
        if i.loading.is_some() {
            let n = i.index().len() as f64;
            p.received = n;
            p.persisted = n;
            p.from_cache = n;
            p.loading_cache = true;
        }
        Ok(p.into_ts()?)
    }

    /// Figures for tests and benchmarks.
    pub fn stats(&self) -> Result<Ts<Stats>, JsError> {
        let i = self.inner.borrow();
        let memory = wasm_bindgen::memory()
            .dyn_into::<js_sys::WebAssembly::Memory>()
            .ok()
            .and_then(|m| m.buffer().dyn_into::<js_sys::ArrayBuffer>().ok())
            .map_or(0, |b| b.byte_length());
        Ok(Stats {
            index_wire_bytes: i.receiver.index_wire_bytes() as f64,
            entries: i.index().len() as f64,
            index_heap_bytes: i.index().heap_bytes() as f64,
            refused_ops: i.receiver.refused_ops() as f64,
            wasm_memory_bytes: f64::from(memory),
            open_db_ms: i.open_timings[0],
            load_ms: i.open_timings[1],
            rebuild_ms: i.open_timings[2],
            opened_from_snapshot: i.opened_from_snapshot,
            snapshots: f64::from(i.snapshots.0),
            snapshot_bytes: i.snapshots.1 as f64,
            snapshot_ms: i.snapshots.2,
        }
        .into_ts()?)
    }

    /// A window of a directory's children, in the order asked for.
    pub fn list(
        &self,
        dir: u32,
        sort: &str,
        descending: bool,
        start: u32,
        count: u32,
    ) -> Result<Ts<ListPage>, JsError> {
        let key = match sort {
            "size" => SortKey::Size,
            "mtime" => SortKey::Mtime,
            "kind" => SortKey::Kind,
            _ => SortKey::Name,
        };
        let mut i = self.inner.borrow_mut();
        let index = i.index_mut();
        let total = index.child_count(EntryId(dir));
        let ids = index.list(
            EntryId(dir),
            key,
            descending,
            start as usize,
            count.min(5000) as usize,
        );
        let rows = ids
            .iter()
            .filter_map(|id| index.get(*id))
            .map(|e| EntryRow::of(&e))
            .collect();
        Ok(ListPage {
            dir,
            total: total as f64,
            start,
            rows,
        }
        .into_ts()?)
    }

    pub fn entry(&self, id: u32) -> Result<Option<Ts<EntryRow>>, JsError> {
        let i = self.inner.borrow();
        let row = i
            .receiver
            .index()
            .get(EntryId(id))
            .map(|e| EntryRow::of(&e));
        Ok(row.map(|r| r.into_ts()).transpose()?)
    }

    /// The rows from the root down to `id`.
    pub fn path(&self, id: u32) -> Result<Ts<EntryPath>, JsError> {
        let i = self.inner.borrow();
        let index = i.index();
        let rows = index
            .ancestry(EntryId(id))
            .iter()
            .filter_map(|a| index.get(*a))
            .map(|e| EntryRow::of(&e))
            .collect();
        Ok(EntryPath(rows).into_ts()?)
    }

    /// Looks up a `/`-separated path from the root.
    pub fn lookup(&self, path: &str) -> Result<Option<Ts<EntryRow>>, JsError> {
        let mut i = self.inner.borrow_mut();
        let index = i.index_mut();
        let row = index
            .lookup(path.as_bytes())
            .and_then(|id| index.get(id))
            .map(|e| EntryRow::of(&e));
        Ok(row.map(|r| r.into_ts()).transpose()?)
    }

    /// Starts a whole-share name search (see `linkfs_core::search` for the
    /// syntax), replacing any other; returns its handle for `searchStep`.
    #[wasm_bindgen(js_name = searchStart)]
    pub fn search_start(&self, query: &str) -> u32 {
        let mut i = self.inner.borrow_mut();
        let handle = i.next_search;
        i.next_search = i.next_search.wrapping_add(1).max(1);
        i.search = Some((handle, Search::new(query)));
        handle
    }

    /// Scans up to `max_slots` more entries of search `handle`; an unknown
    /// (replaced or stopped) handle answers `done` with nothing.
    #[wasm_bindgen(js_name = searchStep)]
    pub fn search_step(&self, handle: u32, max_slots: u32) -> Result<Ts<SearchBatch>, JsError> {
        let mut guard = self.inner.borrow_mut();
        let i = &mut *guard;
        // Field by field (not `i.index()`): the search is borrowed mutably beside it.
        let index = match &i.loading {
            Some(l) => l.rebuilder.index(),
            None => i.receiver.index(),
        };
        let Some((h, search)) = i.search.as_mut() else {
            return Ok(SearchBatch {
                rows: Vec::new(),
                scanned: 0.0,
                total: 0.0,
                done: true,
                truncated: false,
            }
            .into_ts()?);
        };
        if *h != handle {
            return Ok(SearchBatch {
                rows: Vec::new(),
                scanned: 0.0,
                total: 0.0,
                done: true,
                truncated: false,
            }
            .into_ts()?);
        }
        let step = search.step(index, max_slots);
        let rows = step
            .matches
            .iter()
            .filter_map(|id| {
                let e = index.get(*id)?;
                let path = index
                    .path_of(*id)
                    .map(|p| String::from_utf8_lossy(&p).into_owned())
                    .unwrap_or_default();
                Some(SearchHit::of(&e, path))
            })
            .collect();
        if step.done {
            i.search = None;
        }
        Ok(SearchBatch {
            rows,
            scanned: f64::from(step.scanned),
            total: f64::from(step.total),
            done: step.done,
            truncated: step.truncated,
        }
        .into_ts()?)
    }

    /// Where entry `id` is in its folder's listing in this order (for showing a
    /// search result in its folder), if it is there.
    #[wasm_bindgen(js_name = indexIn)]
    pub fn index_in(&self, dir: u32, id: u32, sort: &str, descending: bool) -> Option<u32> {
        let key = match sort {
            "size" => SortKey::Size,
            "mtime" => SortKey::Mtime,
            "kind" => SortKey::Kind,
            _ => SortKey::Name,
        };
        let mut i = self.inner.borrow_mut();
        let index = i.index_mut();
        let n = index.child_count(EntryId(dir));
        let ids = index.list(EntryId(dir), key, descending, 0, n);
        ids.iter().position(|x| x.0 == id).map(|p| p as u32)
    }

    /// Starts reading a whole file; events name the returned handle.
    #[wasm_bindgen(js_name = startRead)]
    pub fn start_read(&self, id: u32) -> Result<u32, JsError> {
        let started = {
            let mut i = self.inner.borrow_mut();
            let size = i
                .receiver
                .index()
                .get(EntryId(id))
                .map(|e| e.size)
                .ok_or_else(|| JsError::new(&format!("entry {id} is not in the index")))?;
            i.receiver.start_read(EntryId(id), 0, size)
        };
        self.after();
        started
            .map(|h| h.0)
            .map_err(|e| JsError::new(&e.to_string()))
    }

    /// Starts reading `len` bytes at `offset` of a file (JavaScript numbers:
    /// exact up to 2^53, far beyond any file); events name the returned handle.
    /// A range outside the file is refused with the file's size in the message.
    #[wasm_bindgen(js_name = startReadRange)]
    pub fn start_read_range(&self, id: u32, offset: f64, len: f64) -> Result<u32, JsError> {
        let whole = |x: f64| x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x <= 2f64.powi(53);
        if !whole(offset) || !whole(len) {
            return Err(JsError::new(&format!(
                "a read range must be whole bytes, not {offset} + {len}"
            )));
        }
        let started =
            self.inner
                .borrow_mut()
                .receiver
                .start_read(EntryId(id), offset as u64, len as u64);
        self.after();
        started
            .map(|h| h.0)
            .map_err(|e| JsError::new(&e.to_string()))
    }

    #[wasm_bindgen(js_name = cancelRead)]
    pub fn cancel_read(&self, handle: u32) {
        self.inner
            .borrow_mut()
            .receiver
            .cancel_read(ReadHandle(handle));
    }
}

/// Copies one stored `ArrayBuffer` into wasm memory for the rebuild.
fn copy_in(frame: &JsValue) -> Vec<u8> {
    match frame.dyn_ref::<js_sys::ArrayBuffer>() {
        Some(ab) => Uint8Array::new(ab).to_vec(),
        // Not something we stored: the rebuild refuses it.
        None => Vec::new(),
    }
}

/// The event for JavaScript; refusals are logged (the first few) and counted
/// in the stats instead.
fn event_of(event: StoredEvent, refusals_logged: &mut u64) -> Option<SessionEvent> {
    Some(match event {
        StoredEvent::Reset => SessionEvent::Reset,
        StoredEvent::LinkLost => SessionEvent::LinkLost,
        StoredEvent::Read(ReadEvent::Data {
            handle,
            offset,
            data,
        }) => SessionEvent::Data {
            handle: handle.0,
            offset: offset as f64,
            bytes: data,
        },
        StoredEvent::Read(ReadEvent::Done { handle }) => SessionEvent::Done { handle: handle.0 },
        StoredEvent::Read(ReadEvent::Failed { handle, error }) => SessionEvent::Failed {
            handle: handle.0,
            message: error.to_string(),
        },
        StoredEvent::Ended { reason } => SessionEvent::Ended {
            kind: EndKind::from(reason.kind()),
            gone: matches!(
                reason,
                EndReason::SharerGoodbye(_) | EndReason::ConnectionLost
            ),
            message: reason.to_string(),
        },
        StoredEvent::Refused(e) => {
            if *refusals_logged < REFUSALS_LOGGED {
                *refusals_logged += 1;
                web_sys::console::warn_1(
                    &format!("linkfs: skipped an entry from the sharer: {e}").into(),
                );
            }
            return None;
        }
        _ => return None,
    })
}

impl ReceiverSession {
    /// After every call: collect events, start the next storage write.
    fn after(&self) {
        let write = {
            let mut guard = self.inner.borrow_mut();
            let i = &mut *guard;
            while let Some(e) = i.receiver.poll_event() {
                if let Some(e) = event_of(e, &mut i.refusals_logged) {
                    i.events.push(e);
                }
            }
            // Once complete, say which folders changed, so shown listings refresh.
            if !i.journaling && i.receiver.progress().complete {
                i.journaling = true;
                i.receiver.index_mut().record_changes(true);
            }
            if i.journaling {
                let (changes, all) = i.receiver.index_mut().take_changes();
                if all || !changes.is_empty() {
                    let mut dirs: Vec<u32> = changes
                        .iter()
                        .flat_map(|c| {
                            let places = c.before.iter().chain(c.after.iter());
                            places.map(|(p, _)| p.0).chain(std::iter::once(c.id.0))
                        })
                        .collect();
                    dirs.sort_unstable();
                    dirs.dedup();
                    i.events.push(SessionEvent::Changed { dirs, all });
                }
            }
            if i.writing {
                None
            } else if let Some(w) = i.receiver.poll_write() {
                i.writing = true;
                Some((Job::Batches(w), i.store.clone()))
            } else if let Some(state) = i.receiver.poll_snapshot(now()) {
                // Its parts are built a few milliseconds at a time (reads go on
                // in between; index batches wait), then written.
                i.writing = true;
                Some((Job::Snapshot(state), i.store.clone()))
            } else {
                None
            }
        };
        let Some((job, store)) = write else {
            return;
        };
        let inner = self.inner.clone();
        spawn_local(async move {
            let failed = |e: JsValue| {
                e.as_string()
                    .unwrap_or_else(|| "IndexedDB failed to save the index".into())
            };
            let result = match (&store, &job) {
                (Some(s), Job::Batches(w)) => s.write(w).await.map_err(failed),
                (Some(s), Job::Snapshot(state)) => {
                    let parts = build_snapshot(&inner).await;
                    s.write_snapshot(&parts, state).await.map_err(failed)
                }
                (None, _) => Ok(()),
            };
            let notify = {
                let mut i = inner.borrow_mut();
                match job {
                    Job::Batches(_) => {
                        if let Err(m) = &result
                            && i.receiver.progress().storage_problem.is_none()
                        {
                            web_sys::console::warn_1(
                                &format!("linkfs: {m}; the index stays in memory only").into(),
                            );
                        }
                        i.receiver.write_done(result);
                    }
                    Job::Snapshot(..) => {
                        if let Err(m) = &result {
                            // Nothing is lost: the batches are still stored.
                            web_sys::console::warn_1(
                                &format!("linkfs: {m} (the saved folder list is kept as it was)")
                                    .into(),
                            );
                        }
                        i.receiver.snapshot_done(result);
                    }
                }
                i.writing = false;
                i.notify.clone()
            };
            ReceiverSession { inner }.after();
            let _ = notify.call0(&JsValue::NULL);
        });
    }
}

/// A write to IndexedDB: batches as core asked, or a snapshot of the index.
enum Job {
    Batches(linkfs_core::StoreWrite<JsFrame>),
    Snapshot(linkfs_core::StoredState),
}

/// How long one turn of building a snapshot may hold the worker, ms.
const SNAPSHOT_STEP_MS: f64 = 8.0;

/// Builds the parts of the snapshot core began, [`SNAPSHOT_STEP_MS`] at a
/// time, each copied out of wasm memory as it is made (so wasm memory never
/// holds more than one part).
async fn build_snapshot(inner: &Rc<RefCell<Inner>>) -> Array {
    let parts = Array::new();
    let (mut bytes, mut busy) = (0usize, 0.0);
    loop {
        let t0 = now_ms();
        let done = {
            let mut i = inner.borrow_mut();
            loop {
                match i.receiver.snapshot_part() {
                    Some(part) => {
                        bytes += part.len();
                        parts.push(&Uint8Array::from(&part[..]).buffer());
                        if now_ms() - t0 >= SNAPSHOT_STEP_MS {
                            break false;
                        }
                    }
                    None => break true,
                }
            }
        };
        busy += now_ms() - t0;
        if done {
            let mut i = inner.borrow_mut();
            i.snapshots = (i.snapshots.0 + 1, bytes, busy);
            return parts;
        }
        next_turn().await;
    }
}

/// Resolves in a later task, after whatever else the worker has queued.
async fn next_turn() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let scheduled = js_sys::global()
            .dyn_into::<web_sys::WorkerGlobalScope>()
            .ok()
            .and_then(|w| {
                w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, 0)
                    .ok()
            });
        if scheduled.is_none() {
            let _ = resolve.call0(&JsValue::NULL);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

fn now_ms() -> f64 {
    js_sys::global()
        .dyn_into::<web_sys::WorkerGlobalScope>()
        .ok()
        .and_then(|w| w.performance())
        .map_or_else(js_sys::Date::now, |p| p.now())
}
