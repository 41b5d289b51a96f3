//! The worker's side of a share: [`Visit`], core's visit
//! (`linkfs_core::visit`: the whole receiving lifecycle) bound to IndexedDB
//! ([`Store`]) and to the worker.
//!
//! The worker calls an input (a frame, the page's data link opening, failing
//! or closing, a timer) and then [`Visit::poll`], and does what it returns:
//! frames to send, a data link to open or close, events for the page, and
//! when to call `tick`. Storage reads and writes and background work (the
//! stepped restore, snapshots) are carried out here, as core's visit asks;
//! when one finishes, the `notify` function the visit was opened with is
//! called so the worker polls again. Nothing is decided here: the words for
//! the page's connection state are the only thing added.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function, Uint8Array};
use linkfs_core::{
    EndReason, FailureKind, LoadRequest, Millis, Output, ReadEvent, ReadHandle, Search, SortKey,
    Storage, StoreJob, VisitConfig, VisitEvent, VisitStatus,
};
use linkfs_core::{ShareLink, StorageError, StoredState};
use linkfs_proto::{EntryId, Generation};
use tsify::{Ts, Tsify as _};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;

use crate::store::{JsFrame, Store};
use crate::turn::next_turn;
use crate::types::{
    ConnectionState, EntryPath, EntryRow, LinkRights, ListPage, Progress, SearchBatch, SearchHit,
    Stats, VisitOutput, VisitOutputs,
};

type CoreVisit = linkfs_core::Visit<JsFrame>;

/// Refused index operations logged to the console (the rest are counted).
const REFUSALS_LOGGED: u64 = 3;

#[wasm_bindgen(typescript_custom_section)]
const SORT_KEY_TS: &str = r#"
/** How a listing is ordered (folders always first): `linkfs_core::SortKey`. */
export type SortKey = 'name' | 'size' | 'mtime' | 'kind';
"#;

fn now() -> Millis {
    Millis(now_ms().max(0.0) as u64)
}

struct Inner {
    visit: CoreVisit,
    /// Outputs taken while opening, before the worker's first poll.
    early: std::collections::VecDeque<Output<JsFrame>>,
    store: Option<Store>,
    notify: Function,
    /// Parts of the snapshot being built, copied out of wasm memory as made.
    snapshot_parts: Array,
    refusals_logged: u64,
    /// The one search in progress, with its handle.
    search: Option<(u32, Search)>,
    next_search: u32,
    /// ms: IndexedDB opened, stored parts and frames read (figures only).
    open_db_ms: f64,
    load_ms: f64,
    /// A later turn is already scheduled for `work`.
    work_scheduled: bool,
    /// Reads asked for so far, and answers handed to the visit so far: reads
    /// may be out two at a time, and are handed over in the order asked.
    loads_asked: u64,
    loads_given: u64,
    /// Answers that came before an earlier read's, by their read's number.
    loads_early: std::collections::BTreeMap<u64, (LoadRequest, Loaded)>,
}

type Loaded = Result<(Option<StoredState>, Vec<JsFrame>, Vec<JsFrame>), JsValue>;

/// A share's visit in this worker. See the module docs.
#[wasm_bindgen]
pub struct Visit {
    inner: Rc<RefCell<Inner>>,
}

#[wasm_bindgen]
impl Visit {
    /// Opens the stored index of the share whose link fragment is `key`
    /// (`room.secret`; see `ShareLink::store_name`) and restores its first
    /// folders; resolves once queries can be answered from them. `notify`
    /// is called whenever background work produced output. `unsealer`, if
    /// given, checks and decompresses the snapshot's later parts on another
    /// worker (`Store::with_unsealer`), and then two reads are out at once.
    pub async fn open(
        key: String,
        #[wasm_bindgen(unchecked_param_type = "() => void")] notify: Function,
        #[wasm_bindgen(
            unchecked_param_type = "((blob: Blob, lens: number[], first: number, from: number, to: number) => Promise<unknown[]>) | undefined"
        )]
        unsealer: Option<Function>,
    ) -> Visit {
        crate::install_panic_hook();
        let t0 = now_ms();
        let has_unsealer = unsealer.is_some();
        let opened = match ShareLink::parse_fragment(&key) {
            Ok(link) => Store::open(&link.store_name())
                .await
                .map(|s| s.with_unsealer(unsealer)),
            Err(e) => Err(JsValue::from_str(&e.to_string())),
        };
        let (store, storage) = match opened {
            Ok(s) => (Some(s), Storage::Kept),
            Err(e) => (
                None,
                Storage::Unavailable(
                    e.as_string()
                        .unwrap_or_else(|| "IndexedDB is not available".into()),
                ),
            ),
        };
        // With the unseal worker, a chunk is unsealed there while the one
        // before is restored here: two reads out keep it busy.
        let reads_ahead = if has_unsealer { 2 } else { 1 };
        let config = VisitConfig {
            storage,
            restore_reads_ahead: reads_ahead,
            ..VisitConfig::default()
        };
        let seed = (js_sys::Math::random() * 2f64.powi(52)) as u64;
        let visit = Visit {
            inner: Rc::new(RefCell::new(Inner {
                visit: CoreVisit::new(now(), config, seed),
                early: std::collections::VecDeque::new(),
                store,
                notify,
                snapshot_parts: Array::new(),
                refusals_logged: 0,
                search: None,
                next_search: 1,
                open_db_ms: now_ms() - t0,
                load_ms: 0.0,
                work_scheduled: false,
                loads_asked: 0,
                loads_given: 0,
                loads_early: std::collections::BTreeMap::new(),
            })),
        };
        // The first read of the store is awaited here: the first folders are
        // restored before anything is shown. What comes before it waits for
        // the worker's first poll.
        let first = loop {
            let mut i = visit.inner.borrow_mut();
            match i.visit.poll_output() {
                Output::Load(req @ LoadRequest::First { .. }) => {
                    break Some((req, i.store.clone()));
                }
                Output::Timeout(_) => break None,
                other => i.early.push_back(other),
            }
        };
        if let Some((req, Some(store))) = first {
            let t = now_ms();
            let loaded = load(&store, req).await;
            let mut i = visit.inner.borrow_mut();
            i.load_ms += now_ms() - t;
            let mut clock = now;
            match loaded {
                Ok((state, parts, frames)) => i.visit.loaded(&mut clock, state, parts, frames),
                Err(_) => i.visit.load_failed(&mut clock),
            }
        }
        visit
    }

    /// Everything the visit wants done now, in order, and when to call
    /// `tick` next. Storage IO and background work are started here.
    pub fn poll(&self) -> Result<Ts<VisitOutputs>, JsError> {
        let mut outputs = Vec::new();
        let wake_in_ms = loop {
            let out = {
                let mut i = self.inner.borrow_mut();
                match i.early.pop_front() {
                    Some(o) => o,
                    None => i.visit.poll_output(),
                }
            };
            match out {
                // Bulk (an upload's chunks) is told apart by the page's data
                // link itself, by frame type (`lane_may_carry_up`): it puts
                // them on its lanes once one joined.
                Output::Transmit(frame) | Output::TransmitBulk(frame) => {
                    outputs.push(VisitOutput::Send { frame })
                }
                Output::Connect => outputs.push(VisitOutput::Connect),
                Output::CloseLink => outputs.push(VisitOutput::CloseLink),
                Output::Event(e) => {
                    let mut i = self.inner.borrow_mut();
                    if let Some(o) = output_of(e, &mut i) {
                        outputs.push(o);
                    }
                }
                Output::Load(req) => self.load_later(req),
                Output::Store(job) => self.store_later(job),
                Output::SnapshotPart(part) => {
                    let buffer = Uint8Array::from(&part[..]).buffer();
                    self.inner.borrow().snapshot_parts.push(&buffer);
                }
                Output::Work => self.work_later(),
                Output::UploadRead {
                    upload,
                    offset,
                    len,
                } => outputs.push(VisitOutput::UploadRead {
                    upload: upload.0,
                    offset: offset as f64,
                    len: len as u32,
                }),
                Output::Timeout(at) => break at.map(|t| t.0.saturating_sub(now().0) as f64),
            }
        };
        Ok(VisitOutputs {
            outputs,
            wake_in_ms,
        }
        .into_ts()?)
    }

    /// Runs the visit's timers; call when `poll` said.
    pub fn tick(&self) {
        self.inner.borrow_mut().visit.handle_timeout(now());
    }

    /// The page's data link made progress in its handshake (its words).
    #[wasm_bindgen(js_name = linkProgress)]
    pub fn link_progress(&self, words: &str) {
        self.inner.borrow_mut().visit.link_progress(words);
    }

    /// The page painted its first screen from a folder it kept, without
    /// asking the index: the restore goes on now (the worker polls after).
    pub fn shown(&self) {
        self.inner.borrow_mut().visit.shown(now());
    }

    /// The data link the visit asked for is open.
    #[wasm_bindgen(js_name = linkOpened)]
    pub fn link_opened(&self) {
        self.inner.borrow_mut().visit.link_opened(now());
    }

    /// The data link the visit asked for could not be made: the page's
    /// `LinkState` for it ('sharer-gone', 'invalid-link', 'link-ended' or
    /// 'error') and its words.
    #[wasm_bindgen(js_name = linkFailed)]
    pub fn link_failed(
        &self,
        #[wasm_bindgen(unchecked_param_type = "LinkState")] state: &str,
        words: String,
    ) {
        let kind = match state {
            "sharer-gone" => FailureKind::SharerGone,
            "invalid-link" => FailureKind::InvalidLink,
            "link-ended" => FailureKind::LinkEnded,
            _ => FailureKind::Unreachable,
        };
        self.inner
            .borrow_mut()
            .visit
            .link_failed(now(), kind, words);
    }

    /// The link's password (when the visit asked, or before): kept for the
    /// visit's later links too.
    #[wasm_bindgen(js_name = givePassword)]
    pub fn give_password(&self, password: &str) {
        self.inner.borrow_mut().visit.give_password(password);
    }

    /// The open data link closed.
    #[wasm_bindgen(js_name = linkClosed)]
    pub fn link_closed(&self) {
        self.inner.borrow_mut().visit.link_closed(now());
    }

    /// One frame from the sharer (the page's `ArrayBuffer`, as a `Uint8Array`
    /// over all of it). A batch to store is stored from this very buffer.
    #[wasm_bindgen(js_name = handleFrame)]
    pub fn handle_frame(&self, frame: Uint8Array) {
        let bytes = frame.to_vec();
        let given = JsFrame(frame.buffer().into());
        self.inner
            .borrow_mut()
            .visit
            .handle_frame(now(), &bytes, &given);
    }

    /// Ends the visit from this side (a goodbye goes out first).
    pub fn close(&self) {
        self.inner.borrow_mut().visit.close(now());
    }

    pub fn progress(&self) -> Result<Ts<Progress>, JsError> {
        Ok(Progress::from(self.inner.borrow().visit.progress()).into_ts()?)
    }

    /// Figures for tests and benchmarks.
    pub fn stats(&self) -> Result<Ts<Stats>, JsError> {
        let i = self.inner.borrow();
        let memory = wasm_bindgen::memory()
            .dyn_into::<js_sys::WebAssembly::Memory>()
            .ok()
            .and_then(|m| m.buffer().dyn_into::<js_sys::ArrayBuffer>().ok())
            .map_or(0, |b| b.byte_length());
        let index = i.visit.index();
        let snapshots = i.visit.snapshot_figures();
        Ok(Stats {
            index_wire_bytes: i.visit.index_wire_bytes() as f64,
            entries: index.len() as f64,
            index_heap_bytes: index.heap_bytes() as f64,
            refused_ops: i.visit.refused_ops() as f64,
            wasm_memory_bytes: f64::from(memory),
            open_db_ms: i.open_db_ms,
            load_ms: i.load_ms,
            rebuild_ms: i.visit.restore_ms().unwrap_or(0) as f64,
            rebuild_busy_ms: i.visit.restore_busy_ms() as f64,
            opened_from_snapshot: i.visit.opened_from_snapshot(),
            snapshots: f64::from(snapshots.count),
            snapshot_bytes: snapshots.bytes as f64,
            snapshot_ms: snapshots.ms as f64,
        }
        .into_ts()?)
    }

    /// A window of a directory's children, in the order asked for. The first
    /// listing tells the visit the first screen is there.
    pub fn list(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EntryId")] dir: u32,
        #[wasm_bindgen(unchecked_param_type = "SortKey")] sort: &str,
        descending: bool,
        start: u32,
        count: u32,
    ) -> Result<Ts<ListPage>, JsError> {
        let key: SortKey = sort.parse().map_err(|e| JsError::new(&format!("{e}")))?;
        let mut i = self.inner.borrow_mut();
        i.visit.listed(now());
        let index = i.visit.index_mut();
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
        let notify = i.notify.clone();
        drop(i);
        // The restore may go on sooner now: the worker polls again.
        spawn_local(async move {
            let _ = notify.call0(&JsValue::NULL);
        });
        Ok(ListPage {
            dir,
            total: total as f64,
            start,
            rows,
        }
        .into_ts()?)
    }

    pub fn entry(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EntryId")] id: u32,
    ) -> Result<Option<Ts<EntryRow>>, JsError> {
        let i = self.inner.borrow();
        let row = i.visit.index().get(EntryId(id)).map(|e| EntryRow::of(&e));
        Ok(row.map(|r| r.into_ts()).transpose()?)
    }

    /// The rows from the root down to `id`.
    pub fn path(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EntryId")] id: u32,
    ) -> Result<Ts<EntryPath>, JsError> {
        let i = self.inner.borrow();
        let index = i.visit.index();
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
        let index = i.visit.index_mut();
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
    /// (replaced or stopped) handle answers `done` with nothing. While the
    /// stored index is still being restored a step scans nothing (and is
    /// not done): a search of part of it would miss names.
    #[wasm_bindgen(js_name = searchStep)]
    pub fn search_step(&self, handle: u32, max_slots: u32) -> Result<Ts<SearchBatch>, JsError> {
        let mut guard = self.inner.borrow_mut();
        let i = &mut *guard;
        let nothing = |done| SearchBatch {
            rows: Vec::new(),
            scanned: 0.0,
            total: 0.0,
            done,
            truncated: false,
        };
        let Some((h, search)) = i.search.as_mut().filter(|(h, _)| *h == handle) else {
            return Ok(nothing(true).into_ts()?);
        };
        let h = *h;
        let Some(index) = i.visit.searchable_index() else {
            return Ok(nothing(false).into_ts()?);
        };
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
        if step.done && i.search.as_ref().is_some_and(|(x, _)| *x == h) {
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
    pub fn index_in(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EntryId")] dir: u32,
        #[wasm_bindgen(unchecked_param_type = "EntryId")] id: u32,
        #[wasm_bindgen(unchecked_param_type = "SortKey")] sort: &str,
        descending: bool,
    ) -> Result<Option<u32>, JsError> {
        let key: SortKey = sort.parse().map_err(|e| JsError::new(&format!("{e}")))?;
        let mut i = self.inner.borrow_mut();
        let index = i.visit.index_mut();
        let n = index.child_count(EntryId(dir));
        let ids = index.list(EntryId(dir), key, descending, 0, n);
        Ok(ids.iter().position(|x| x.0 == id).map(|p| p as u32))
    }

    /// The version of file `id` the index holds now (its generation), to pin
    /// a transfer to with [`start_read`](Self::start_read)'s `version`.
    pub fn version(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EntryId")] id: u32,
    ) -> Option<u32> {
        let i = self.inner.borrow();
        i.visit.index().get(EntryId(id)).map(|e| e.generation.0)
    }

    /// Starts reading `len` bytes at `offset` of a file (JavaScript numbers:
    /// exact up to 2^53, far beyond any file); events name the returned
    /// handle. A range outside the file is refused with the file's size in
    /// the message. While the stored index is restored, the read waits.
    /// With `version` (from [`version`](Self::version)), a file the index now
    /// holds at another version is refused, so the ranges of one transfer
    /// never mix two versions of a file.
    #[wasm_bindgen(js_name = startRead, unchecked_return_type = "ReadHandle")]
    pub fn start_read(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EntryId")] id: u32,
        offset: f64,
        len: f64,
        version: Option<u32>,
    ) -> Result<u32, JsError> {
        let whole = |x: f64| x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x <= 2f64.powi(53);
        if !whole(offset) || !whole(len) {
            return Err(JsError::new(&format!(
                "a read range must be whole bytes, not {offset} + {len}"
            )));
        }
        self.inner
            .borrow_mut()
            .visit
            .start_read(
                EntryId(id),
                version.map(Generation),
                offset as u64,
                len as u64,
            )
            .map(|h| h.0)
            .map_err(|e| JsError::new(&e.to_string()))
    }

    #[wasm_bindgen(js_name = cancelRead)]
    pub fn cancel_read(&self, #[wasm_bindgen(unchecked_param_type = "ReadHandle")] handle: u32) {
        self.inner
            .borrow_mut()
            .visit
            .cancel_read(ReadHandle(handle));
    }

    /// What the link lets this visitor do, once the sharer said (`undefined` before).
    pub fn rights(&self) -> Result<Option<Ts<LinkRights>>, JsError> {
        let Some(r) = self.inner.borrow().visit.rights() else {
            return Ok(None);
        };
        Ok(Some(
            LinkRights {
                list: r.list,
                upload: r.upload,
                max_file: r.max_file as f64,
                bytes_left: r.bytes_left as f64,
                files_left: r.files_left as f64,
            }
            .into_ts()?,
        ))
    }

    /// Adds a file to the share at `path` (relative to the link's folder),
    /// of `size` bytes whose BLAKE3 hash is `hash` (a [`FileHasher`]'s):
    /// its bytes are asked for with `upload-read` outputs. Returns its id.
    pub fn upload(&self, path: &str, size: f64, hash: &[u8]) -> Result<u32, JsError> {
        if !(size.is_finite() && size >= 0.0 && size.fract() == 0.0 && size <= 2f64.powi(53)) {
            return Err(JsError::new(&format!(
                "a file's size must be whole bytes, not {size}"
            )));
        }
        let hash: [u8; 32] = hash
            .try_into()
            .map_err(|_| JsError::new("a file's hash is 32 bytes"))?;
        let id = self
            .inner
            .borrow_mut()
            .visit
            .upload(path.as_bytes().to_vec(), size as u64, hash);
        Ok(id.0)
    }

    /// Bytes an `upload-read` asked for.
    #[wasm_bindgen(js_name = uploadBytes)]
    pub fn upload_bytes(&self, upload: u32, offset: f64, data: &[u8]) {
        self.inner.borrow_mut().visit.upload_bytes(
            linkfs_proto::UploadId(upload),
            offset as u64,
            data,
        );
    }

    /// The file of `upload` could not be read (`words` say why): it ends.
    #[wasm_bindgen(js_name = uploadUnreadable)]
    pub fn upload_unreadable(&self, upload: u32, words: &str) {
        self.inner
            .borrow_mut()
            .visit
            .upload_unreadable(linkfs_proto::UploadId(upload), words.to_owned());
    }

    #[wasm_bindgen(js_name = cancelUpload)]
    pub fn cancel_upload(&self, upload: u32) {
        self.inner
            .borrow_mut()
            .visit
            .cancel_upload(linkfs_proto::UploadId(upload));
    }
}

/// The BLAKE3 hash of a file, fed in pieces (the hash the sharer checks an
/// upload against).
#[wasm_bindgen]
#[derive(Default)]
pub struct FileHasher(blake3::Hasher);

#[wasm_bindgen]
impl FileHasher {
    #[wasm_bindgen(constructor)]
    pub fn new() -> FileHasher {
        FileHasher::default()
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The hash of everything fed (32 bytes).
    pub fn finish(&self) -> Vec<u8> {
        self.0.finalize().as_bytes().to_vec()
    }
}

impl Visit {
    fn notify(inner: &Rc<RefCell<Inner>>) {
        let notify = inner.borrow().notify.clone();
        let _ = notify.call0(&JsValue::NULL);
    }

    /// Reads what the visit asked for from IndexedDB, then hands it over.
    fn load_later(&self, req: LoadRequest) {
        let inner = self.inner.clone();
        let Some(store) = inner.borrow().store.clone() else {
            return;
        };
        let ticket = {
            let mut i = inner.borrow_mut();
            i.loads_asked += 1;
            i.loads_asked - 1
        };
        spawn_local(async move {
            let t = now_ms();
            let loaded = load(&store, req).await;
            {
                let mut i = inner.borrow_mut();
                i.load_ms += now_ms() - t;
                i.loads_early.insert(ticket, (req, loaded));
                while let Some((req, loaded)) = {
                    let next = i.loads_given;
                    i.loads_early.remove(&next)
                } {
                    i.loads_given += 1;
                    let mut clock = now;
                    match (loaded, req) {
                        (Ok((state, parts, frames)), LoadRequest::First { .. }) => {
                            i.visit.loaded(&mut clock, state, parts, frames)
                        }
                        (
                            Ok((_, parts, frames)),
                            LoadRequest::Parts { .. } | LoadRequest::Rest { .. },
                        ) => i.visit.loaded_rest(parts, frames),
                        (Err(_), _) => i.visit.load_failed(&mut clock),
                    }
                }
            }
            Self::notify(&inner);
        });
    }

    /// Writes what the visit asked for, then says how it went.
    fn store_later(&self, job: StoreJob<JsFrame>) {
        let inner = self.inner.clone();
        let store = inner.borrow().store.clone();
        let parts = match &job {
            StoreJob::Snapshot(_) => {
                std::mem::replace(&mut inner.borrow_mut().snapshot_parts, Array::new())
            }
            StoreJob::Batches(_) => Array::new(),
        };
        spawn_local(async move {
            let failed = |e: JsValue| {
                StorageError::new(
                    e.as_string()
                        .unwrap_or_else(|| "IndexedDB failed to save the index".into()),
                )
            };
            let result = match (&store, &job) {
                (Some(s), StoreJob::Batches(w)) => s.write(w).await.map_err(failed),
                (Some(s), StoreJob::Snapshot(state)) => {
                    s.write_snapshot(&parts, state).await.map_err(failed)
                }
                (None, _) => Ok(()),
            };
            if let Err(m) = &result {
                let what = match job {
                    StoreJob::Batches(_) => "the index stays in memory only",
                    StoreJob::Snapshot(_) => "the saved folder list is kept as it was",
                };
                web_sys::console::warn_1(&format!("linkfs: {m} ({what})").into());
            }
            inner.borrow_mut().visit.stored(now(), result);
            Self::notify(&inner);
        });
    }

    /// Runs a step of the visit's background work in a later turn (after
    /// whatever else the worker has queued), then has the worker poll again.
    fn work_later(&self) {
        let inner = self.inner.clone();
        {
            let mut i = inner.borrow_mut();
            if i.work_scheduled {
                return;
            }
            i.work_scheduled = true;
        }
        spawn_local(async move {
            next_turn().await;
            {
                let mut i = inner.borrow_mut();
                i.work_scheduled = false;
                let mut clock = now;
                i.visit.work(&mut clock);
            }
            Self::notify(&inner);
        });
    }
}

/// Reads what `req` asks for: the stored state (first reads only), parts,
/// frames.
async fn load(store: &Store, req: LoadRequest) -> Loaded {
    let frames_of = |a: Array| a.iter().map(JsFrame).collect::<Vec<_>>();
    match req {
        LoadRequest::First { parts, frames } => {
            let first = store.load_first(parts, frames).await?;
            Ok((first.state, frames_of(first.parts), frames_of(first.frames)))
        }
        LoadRequest::Parts { from_part, count } => {
            let parts = store.load_parts(from_part, count).await?;
            Ok((None, frames_of(parts), Vec::new()))
        }
        LoadRequest::Rest {
            from_part,
            from_seq,
        } => {
            let (parts, frames) = store
                .load_rest(from_part.unwrap_or(u32::MAX), from_seq)
                .await?;
            Ok((None, frames_of(parts), frames_of(frames)))
        }
    }
}

/// What the worker hears of an event; refusals are logged (the first few)
/// and counted in the stats instead.
fn output_of(event: VisitEvent, i: &mut Inner) -> Option<VisitOutput> {
    Some(match event {
        VisitEvent::Status(status) => {
            let (state, message) = words_of(&status);
            VisitOutput::Status { state, message }
        }
        VisitEvent::Reset => VisitOutput::Reset,
        VisitEvent::Read(ReadEvent::Data {
            handle,
            offset,
            data,
        }) => VisitOutput::Data {
            handle: handle.0,
            offset: offset as f64,
            bytes: data,
        },
        VisitEvent::Read(ReadEvent::Done { handle }) => VisitOutput::Done { handle: handle.0 },
        VisitEvent::Read(ReadEvent::Failed { handle, error }) => VisitOutput::Failed {
            handle: handle.0,
            message: error.to_string(),
        },
        VisitEvent::Changed(changes) => VisitOutput::Changed {
            dirs: changes.folders().iter().map(|d| d.0).collect(),
            all: changes.overflowed,
        },
        VisitEvent::Restored => VisitOutput::Restored,
        VisitEvent::Refused(e) => {
            if i.refusals_logged < REFUSALS_LOGGED {
                i.refusals_logged += 1;
                web_sys::console::warn_1(
                    &format!("linkfs: skipped an entry from the sharer: {e}").into(),
                );
            }
            return None;
        }
        VisitEvent::StorageFailed(_) => return None,
        VisitEvent::Upload(e) => match e {
            linkfs_core::UploadEvent::Ready {
                upload,
                offset,
                path,
                changes,
            } => VisitOutput::UploadReady {
                upload: upload.0,
                offset: offset as f64,
                path,
                changes,
            },
            linkfs_core::UploadEvent::Progress { upload, written } => VisitOutput::UploadProgress {
                upload: upload.0,
                written: written as f64,
            },
            linkfs_core::UploadEvent::Done {
                upload,
                path,
                renamed,
            } => VisitOutput::UploadDone {
                upload: upload.0,
                path,
                renamed,
            },
            linkfs_core::UploadEvent::Refused {
                upload, message, ..
            } => VisitOutput::UploadRefused {
                upload: upload.0,
                message,
            },
            linkfs_core::UploadEvent::Interrupted { upload, message } => {
                VisitOutput::UploadInterrupted {
                    upload: upload.0,
                    message,
                }
            }
        },
        VisitEvent::PasswordNeeded => VisitOutput::Status {
            state: ConnectionState::Password,
            message: "This link asks for a password.".into(),
        },
        _ => return None,
    })
}

/// The page's connection state for the visit's status, in words a user
/// understands, with what to do where there is something.
fn words_of(status: &VisitStatus) -> (ConnectionState, String) {
    const BROWSE: &str =
        "You can still browse what was received; reopen the link when they share again.";
    match status {
        VisitStatus::Connecting { step } if step.is_empty() => {
            (ConnectionState::Connecting, "Opening the share…".into())
        }
        VisitStatus::Connecting { step } => (ConnectionState::Connecting, step.clone()),
        VisitStatus::Connected => (ConnectionState::Connected, "Connected to the sharer".into()),
        VisitStatus::AtPrompt => (
            ConnectionState::Password,
            "This link asks for a password.".into(),
        ),
        VisitStatus::Reconnecting { .. } => (
            ConnectionState::Reconnecting,
            "Lost the connection to the sharer; reconnecting… Downloads continue once it is back."
                .into(),
        ),
        VisitStatus::Ended { reason, browsable } => {
            let words = sentence(&reason.to_string());
            match (reason.kind(), browsable) {
                (FailureKind::InvalidLink, _) => (ConnectionState::InvalidLink, words),
                (FailureKind::LinkEnded, _) => (ConnectionState::LinkEnded, words),
                (FailureKind::PasswordRefused, _) => (ConnectionState::PasswordWrong, words),
                (FailureKind::SharerGone | FailureKind::Unreachable, true) => {
                    (ConnectionState::SharerGone, format!("{words} {BROWSE}"))
                }
                (FailureKind::SharerGone, false) => (ConnectionState::SharerGone, words),
                (FailureKind::Unreachable, false)
                    if matches!(reason, EndReason::NotReached { .. }) =>
                {
                    (
                        ConnectionState::Error,
                        format!("{words} Reload to try again."),
                    )
                }
                _ => (ConnectionState::Error, words),
            }
        }
    }
}

/// "the relay says: x" -> "The relay says: x."
fn sentence(text: &str) -> String {
    let text = text.trim();
    let mut s: String = text.chars().take(1).flat_map(char::to_uppercase).collect();
    s.push_str(text.get(1..).unwrap_or(""));
    if !s.ends_with(['.', '!', '?']) {
        s.push('.');
    }
    s
}

fn now_ms() -> f64 {
    js_sys::global()
        .dyn_into::<web_sys::WorkerGlobalScope>()
        .ok()
        .and_then(|w| w.performance())
        .map_or_else(js_sys::Date::now, |p| p.now())
}
