//! The worker's side of a share: the receiver, its index and their storage.
//!
//! The page forwards every frame from the data channel (`handleFrame`) and
//! sends whatever `takeOutgoing` returns. Batches are applied at once (the tree
//! grows on screen while it fills) and written to IndexedDB in grouped
//! transactions; a batch is acknowledged to the sharer only after it is
//! committed, so the sharer's window bounds what is not yet stored. When the
//! browser's storage fails (full, disabled), the session says so once and goes
//! on in memory: nothing received is lost from the page.
//!
//! Whenever work finishes in the background (a storage commit), the session
//! calls the `notify` function it was opened with, so the worker drains
//! `takeOutgoing` and `takeEvents` again.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Function, Object, Reflect, Uint8Array};
use linkfs_core::{
    BatchBytes, EndReason, EntryRef, Index, Millis, Receiver, ReceiverConfig, ReceiverEvent,
    SortKey,
};
use linkfs_proto::{BatchReader, EntryId, EntryKind, Epoch, Seq};
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;

use crate::store::{Store, StoreOp, StoredState};

fn now() -> Millis {
    let perf = Reflect::get(&js_sys::global(), &"performance".into()).ok();
    let t = perf
        .and_then(|p| {
            let f: Function = Reflect::get(&p, &"now".into()).ok()?.dyn_into().ok()?;
            f.call0(&p).ok()?.as_f64()
        })
        .unwrap_or_else(js_sys::Date::now);
    Millis(t.max(0.0) as u64)
}

use wasm_bindgen::JsCast;

/// One entry as the UI sees it.
#[derive(Debug, Serialize)]
struct Row {
    id: u32,
    parent: u32,
    name: String,
    kind: &'static str,
    size: f64,
    mtime: f64,
    mode: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    children: Option<u32>,
}

impl Row {
    fn of(e: &EntryRef<'_>) -> Row {
        Row {
            id: e.id.0,
            parent: e.parent.0,
            name: String::from_utf8_lossy(e.name).into_owned(),
            kind: e.kind.as_str(),
            size: e.size as f64,
            mtime: e.mtime as f64,
            mode: e.mode,
            target: (e.kind == EntryKind::Symlink)
                .then(|| String::from_utf8_lossy(e.target).into_owned()),
            children: (e.kind == EntryKind::Dir).then_some(e.children),
        }
    }
}

fn to_js<T: Serialize>(v: &T) -> JsValue {
    // Plain structs of numbers and strings always serialize.
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .unwrap_or(JsValue::NULL)
}

fn set(o: &Object, k: &str, v: JsValue) {
    let _ = Reflect::set(o, &k.into(), &v);
}

struct Inner {
    store: Option<Store>,
    receiver: Receiver,
    channel_open: bool,
    queue: Vec<StoreOp>,
    queue_end: Option<(Seq, u64)>,
    persisting: bool,
    stored: StoredState,
    persisted_entries: u64,
    from_cache: u64,
    cache_complete: bool,
    storage_problem: Option<String>,
    refused_ops: u64,
    js_events: Vec<JsValue>,
    notify: Function,
    /// The frame being handled (what `BatchBytes::Given` refers to).
    given: Option<JsValue>,
}

/// A share's index in this worker. See the module docs.
#[wasm_bindgen]
pub struct Session {
    inner: Rc<RefCell<Inner>>,
}

/// Rebuilds the index from stored batches (JS `ArrayBuffer`s, copied in one at
/// a time); returns it with the resume point, or an empty index when the store
/// is not a clean prefix of one log.
fn rebuild(state: Option<StoredState>, frames: &Array) -> (Index, Option<(Epoch, Seq)>, bool) {
    let Some(state) = state else {
        return (Index::new(), None, false);
    };
    let mut index = Index::new();
    let mut end = Seq(0);
    let mut buf = Vec::new();
    for f in frames.iter() {
        let Ok(ab) = f.dyn_into::<js_sys::ArrayBuffer>() else {
            return (Index::new(), None, false);
        };
        let view = Uint8Array::new(&ab);
        buf.resize(view.length() as usize, 0);
        view.copy_to(&mut buf);
        let Ok(header) = BatchReader::new(&buf).map(|r| r.header()) else {
            return (Index::new(), None, false);
        };
        if header.first != end || index.apply_batch(&buf).is_err() {
            return (Index::new(), None, false);
        }
        end = header.end();
    }
    if end.0 != state.next {
        return (Index::new(), None, false);
    }
    (index, Some((Epoch(state.epoch), end)), state.complete)
}

#[wasm_bindgen]
impl Session {
    /// Opens the stored index of `room` (if any) and prepares a receiver that
    /// resumes from it. `notify` is called when background work produced output.
    pub async fn open(room: String, notify: Function) -> Result<Session, JsError> {
        crate::install_panic_hook();
        let (store, storage_problem) = match Store::open(&room).await {
            Ok(s) => (Some(s), None),
            Err(e) => (
                None,
                Some(
                    e.as_string()
                        .unwrap_or_else(|| "IndexedDB is not available".into()),
                ),
            ),
        };
        let (index, resume, cache_complete) = match &store {
            Some(s) => match s.load().await {
                Ok((state, frames)) => rebuild(state, &frames),
                Err(_) => (Index::new(), None, false),
            },
            None => (Index::new(), None, false),
        };
        if resume.is_none()
            && let Some(s) = &store
        {
            // Whatever is there is not usable: start clean.
            let _ = s.clear().await;
        }
        let from_cache = index.len() as u64;
        let config = ReceiverConfig {
            ack_after_persist: store.is_some(),
            ..ReceiverConfig::default()
        };
        let stored = StoredState {
            epoch: resume.map_or(0, |(e, _)| e.0),
            next: resume.map_or(0, |(_, s)| s.0),
            complete: cache_complete,
        };
        let receiver = Receiver::new(config, index, resume);
        Ok(Session {
            inner: Rc::new(RefCell::new(Inner {
                store,
                receiver,
                channel_open: false,
                queue: Vec::new(),
                queue_end: None,
                persisting: false,
                stored,
                persisted_entries: from_cache,
                from_cache,
                cache_complete,
                storage_problem,
                refused_ops: 0,
                js_events: Vec::new(),
                notify,
                given: None,
            })),
        })
    }

    /// The data channel opened: frames may flow.
    #[wasm_bindgen(js_name = channelOpened)]
    pub fn channel_opened(&self) {
        self.inner.borrow_mut().channel_open = true;
    }

    /// The data channel closed.
    #[wasm_bindgen(js_name = channelClosed)]
    pub fn channel_closed(&self) {
        let mut i = self.inner.borrow_mut();
        i.channel_open = false;
        i.receiver.connection_lost();
        drop(i);
        self.pump();
    }

    /// One frame from the sharer (the page's `ArrayBuffer`, as a `Uint8Array`
    /// over all of it). A batch to store is stored from this very buffer.
    #[wasm_bindgen(js_name = handleFrame)]
    pub fn handle_frame(&self, frame: Uint8Array) {
        let bytes = frame.to_vec();
        {
            let mut i = self.inner.borrow_mut();
            i.receiver.handle_frame(now(), &bytes);
            i.given = Some(frame.buffer().into());
        }
        self.pump();
        self.inner.borrow_mut().given = None;
    }

    /// Runs timers; call at `nextTimeout()`.
    pub fn tick(&self) {
        self.inner.borrow_mut().receiver.handle_timeout(now());
        self.pump();
    }

    /// Milliseconds until `tick` should run, if a timer is pending.
    #[wasm_bindgen(js_name = nextTimeout)]
    pub fn next_timeout(&self) -> Option<f64> {
        let t = self.inner.borrow().receiver.poll_timeout()?;
        Some(t.0.saturating_sub(now().0) as f64)
    }

    /// Frames to send to the sharer now.
    #[wasm_bindgen(js_name = takeOutgoing)]
    pub fn take_outgoing(&self) -> Array {
        let out = Array::new();
        let mut i = self.inner.borrow_mut();
        if !i.channel_open {
            return out;
        }
        let t = now();
        while let Some(f) = i.receiver.poll_transmit(t) {
            out.push(&Uint8Array::from(&f[..]));
        }
        out
    }

    /// Events for the worker: `{type: 'data', handle, offset, bytes}`,
    /// `{type: 'done', handle}`, `{type: 'failed', handle, message}`,
    /// `{type: 'ended', message}`, `{type: 'reset'}`.
    #[wasm_bindgen(js_name = takeEvents)]
    pub fn take_events(&self) -> Array {
        let mut i = self.inner.borrow_mut();
        i.js_events.drain(..).collect()
    }

    fn pump(&self) {
        let mut start_persist = false;
        {
            let mut guard = self.inner.borrow_mut();
            let i = &mut *guard;
            while let Some(ev) = i.receiver.poll_event() {
                match ev {
                    ReceiverEvent::Started { epoch, fresh } => {
                        if fresh {
                            i.queue.push(StoreOp::Clear);
                            i.from_cache = 0;
                            i.persisted_entries = 0;
                            i.cache_complete = false;
                            let o = Object::new();
                            set(&o, "type", "reset".into());
                            i.js_events.push(o.into());
                        }
                        i.stored.epoch = epoch.0;
                    }
                    ReceiverEvent::Applied {
                        header,
                        persist,
                        refused,
                    } => {
                        i.refused_ops += refused.len() as u64;
                        for r in refused.iter().take(3) {
                            web_sys_warn(&format!("linkfs: skipped an entry from the sharer: {r}"));
                        }
                        let frame = match persist {
                            Some(BatchBytes::Given) => i.given.clone(),
                            Some(BatchBytes::Held(f)) => {
                                Some(Uint8Array::from(&f[..]).buffer().into())
                            }
                            None => None,
                        };
                        if let Some(frame) = frame {
                            i.queue.push(StoreOp::Batch {
                                first: header.first.0,
                                frame,
                            });
                            i.queue_end = Some((header.end(), i.receiver.index().len() as u64));
                            if header.snapshot_complete {
                                i.stored.complete = true;
                            }
                        }
                    }
                    ReceiverEvent::ReadData {
                        handle,
                        offset,
                        data,
                    } => {
                        let o = Object::new();
                        set(&o, "type", "data".into());
                        set(&o, "handle", handle.0.into());
                        set(&o, "offset", (offset as f64).into());
                        set(&o, "bytes", Uint8Array::from(&data[..]).into());
                        i.js_events.push(o.into());
                    }
                    ReceiverEvent::ReadDone { handle } => {
                        let o = Object::new();
                        set(&o, "type", "done".into());
                        set(&o, "handle", handle.0.into());
                        i.js_events.push(o.into());
                    }
                    ReceiverEvent::ReadFailed { handle, error } => {
                        let o = Object::new();
                        set(&o, "type", "failed".into());
                        set(&o, "handle", handle.0.into());
                        set(&o, "message", error.to_string().into());
                        i.js_events.push(o.into());
                    }
                    ReceiverEvent::Ended { reason } => {
                        let o = Object::new();
                        set(&o, "type", "ended".into());
                        let gone = matches!(
                            reason,
                            EndReason::SharerGoodbye(_) | EndReason::ConnectionLost
                        );
                        set(&o, "gone", gone.into());
                        set(&o, "message", reason.to_string().into());
                        i.js_events.push(o.into());
                    }
                }
            }
            if !i.persisting && !i.queue.is_empty() {
                i.persisting = true;
                start_persist = true;
            }
        }
        if start_persist {
            self.persist();
        }
    }

    fn persist(&self) {
        let inner = self.inner.clone();
        let (store, ops, end, state) = {
            let mut i = inner.borrow_mut();
            let ops = std::mem::take(&mut i.queue);
            let end = i.queue_end.take();
            if let Some((seq, _)) = end {
                i.stored.next = seq.0;
            }
            (i.store.clone(), ops, end, i.stored.clone())
        };
        spawn_local(async move {
            let result = match &store {
                Some(s) => s.write(&ops, &state).await,
                None => Ok(()),
            };
            let notify = {
                let mut i = inner.borrow_mut();
                if let Err(e) = result
                    && i.storage_problem.is_none()
                {
                    let m = e.as_string().unwrap_or_else(|| "IndexedDB failed".into());
                    web_sys_warn(&format!("linkfs: {m}; the index stays in memory only"));
                    i.storage_problem = Some(m);
                }
                if let Some((seq, entries)) = end {
                    // Acknowledge even when storage failed: the page still has the entries.
                    i.receiver.persisted(seq);
                    if i.storage_problem.is_none() {
                        i.persisted_entries = entries;
                    }
                }
                i.persisting = false;
                i.notify.clone()
            };
            let again = !inner.borrow().queue.is_empty();
            if again {
                Session {
                    inner: inner.clone(),
                }
                .pump_persist();
            }
            let _ = notify.call0(&JsValue::NULL);
        });
    }

    fn pump_persist(&self) {
        let start = {
            let mut i = self.inner.borrow_mut();
            let start = !i.persisting && !i.queue.is_empty();
            if start {
                i.persisting = true;
            }
            start
        };
        if start {
            self.persist();
        }
    }

    /// `{received, announced, complete, persisted, fromCache, storageProblem?}`
    pub fn progress(&self) -> JsValue {
        let i = self.inner.borrow();
        let p = i.receiver.progress();
        let o = Object::new();
        set(&o, "received", (p.received as f64).into());
        set(&o, "announced", (p.announced as f64).into());
        set(
            &o,
            "complete",
            (p.complete || (i.cache_complete && !i.channel_open && !i.receiver.is_open())).into(),
        );
        set(&o, "persisted", (i.persisted_entries as f64).into());
        set(&o, "fromCache", (i.from_cache as f64).into());
        if let Some(m) = &i.storage_problem {
            set(&o, "storageProblem", m.clone().into());
        }
        o.into()
    }

    /// Figures for tests and benchmarks.
    pub fn stats(&self) -> JsValue {
        let i = self.inner.borrow();
        let o = Object::new();
        set(
            &o,
            "indexWireBytes",
            (i.receiver.index_wire_bytes() as f64).into(),
        );
        set(&o, "entries", (i.receiver.index().len() as f64).into());
        set(
            &o,
            "indexHeapBytes",
            (i.receiver.index().heap_bytes() as f64).into(),
        );
        set(&o, "refusedOps", (i.refused_ops as f64).into());
        let mem = wasm_bindgen::memory()
            .dyn_into::<js_sys::WebAssembly::Memory>()
            .map(|m| {
                m.buffer()
                    .dyn_into::<js_sys::ArrayBuffer>()
                    .map(|b| b.byte_length())
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        set(&o, "wasmMemoryBytes", (mem as f64).into());
        o.into()
    }

    /// A window of a directory's children: `{dir, total, start, rows}`.
    pub fn list(&self, dir: u32, sort: &str, descending: bool, start: u32, count: u32) -> JsValue {
        let key = match sort {
            "size" => SortKey::Size,
            "mtime" => SortKey::Mtime,
            "kind" => SortKey::Kind,
            _ => SortKey::Name,
        };
        let mut i = self.inner.borrow_mut();
        let index = i.receiver.index_mut();
        let total = index.child_count(EntryId(dir));
        let ids = index.list(
            EntryId(dir),
            key,
            descending,
            start as usize,
            count.min(5000) as usize,
        );
        let rows: Vec<Row> = ids
            .iter()
            .filter_map(|id| index.get(*id))
            .map(|e| Row::of(&e))
            .collect();
        let o = Object::new();
        set(&o, "dir", dir.into());
        set(&o, "total", (total as f64).into());
        set(&o, "start", start.into());
        set(&o, "rows", to_js(&rows));
        o.into()
    }

    pub fn entry(&self, id: u32) -> JsValue {
        let i = self.inner.borrow();
        i.receiver
            .index()
            .get(EntryId(id))
            .map_or(JsValue::NULL, |e| to_js(&Row::of(&e)))
    }

    /// The rows from the root down to `id`.
    pub fn path(&self, id: u32) -> JsValue {
        let i = self.inner.borrow();
        let index = i.receiver.index();
        let rows: Vec<Row> = index
            .ancestry(EntryId(id))
            .iter()
            .filter_map(|a| index.get(*a))
            .map(|e| Row::of(&e))
            .collect();
        to_js(&rows)
    }

    /// Looks up a `/`-separated path from the root.
    pub fn lookup(&self, path: &str) -> JsValue {
        let mut i = self.inner.borrow_mut();
        let index = i.receiver.index_mut();
        match index.lookup(path.as_bytes()) {
            Some(id) => index.get(id).map_or(JsValue::NULL, |e| to_js(&Row::of(&e))),
            None => JsValue::NULL,
        }
    }

    /// Starts reading a whole file; events name the returned handle.
    #[wasm_bindgen(js_name = startRead)]
    pub fn start_read(&self, id: u32) -> Result<u32, JsError> {
        let mut i = self.inner.borrow_mut();
        let size = i
            .receiver
            .index()
            .get(EntryId(id))
            .map(|e| e.size)
            .ok_or_else(|| JsError::new(&format!("entry {id} is not in the index")))?;
        let h = i
            .receiver
            .start_read(EntryId(id), 0, size)
            .map_err(|e| JsError::new(&e.to_string()))?;
        drop(i);
        self.pump();
        Ok(h.0)
    }

    #[wasm_bindgen(js_name = cancelRead)]
    pub fn cancel_read(&self, handle: u32) {
        self.inner
            .borrow_mut()
            .receiver
            .cancel_read(linkfs_core::ReadHandle(handle));
    }
}

fn web_sys_warn(message: &str) {
    let console = Reflect::get(&js_sys::global(), &"console".into()).ok();
    if let Some(c) = console
        && let Ok(f) = Reflect::get(&c, &"warn".into()).and_then(|f| f.dyn_into::<Function>())
    {
        let _ = f.call1(&c, &message.into());
    }
}
