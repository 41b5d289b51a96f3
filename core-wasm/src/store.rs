//! IndexedDB persistence of the index, in the worker.
//!
//! One database per share, named by `ShareLink::store_name` (the room and a
//! value derived from the secret, so another share that reuses a room id never
//! mixes with it), with three object stores:
//! - `batches`: the index batch frames exactly as they arrived, keyed by the
//!   `Seq` of their first operation (numeric keys sort in log order);
//! - `snapshot`: the parts of the last snapshot of the index (`Index::snapshot_parts`),
//!   each a `Blob` (see [`buffers`] for why),
//!   keyed 0, 1, …; it stands for every batch before the one it ends at, which
//!   are deleted in the same transaction that stores it;
//! - `meta`: one record `state` = `{epoch: hex, next: number, complete: bool,
//!   snapshot_next?: number, snapshot_parts?: number}`.
//!
//! Version 1 of the database had no `snapshot` store; opening it adds one.
//!
//! What to read and write, and when, is `linkfs_core::visit`'s and `linkfs_core::persist`'s policy (one write at a
//! time, each a [`StoreWrite`] carried out here as one transaction); this
//! module only binds IndexedDB. Measured in Chromium on the project's test
//! machine: 100 packed buffers of 40 KB write in 52 ms and read back in 27 ms,
//! against 2.4-2.9 s for one record per entry; this is why whole frames are
//! stored, not entries.

use js_sys::{Array, Promise, Reflect};
use linkfs_core::{StoreOp, StoreWrite, StoredFrame, StoredSnapshot, StoredState};
use linkfs_proto::{Epoch, Seq};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    IdbDatabase, IdbFactory, IdbOpenDbRequest, IdbRequest, IdbTransaction, IdbTransactionMode,
};

const BATCHES: &str = "batches";
const SNAPSHOT: &str = "snapshot";
const META: &str = "meta";
const DB_VERSION: u32 = 2;
const STATE_KEY: &str = "state";

/// A batch frame as IndexedDB stores it: the JS `ArrayBuffer` that arrived,
/// never copied into wasm memory.
#[derive(Debug, Clone)]
pub struct JsFrame(pub JsValue);

impl StoredFrame for JsFrame {
    fn from_held(bytes: Vec<u8>) -> Self {
        JsFrame(js_sys::Uint8Array::from(&bytes[..]).buffer().into())
    }

    /// A copy into wasm memory (for the restore); what is not an
    /// `ArrayBuffer` (not something this store wrote) is empty, and refused.
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match self.0.dyn_ref::<js_sys::ArrayBuffer>() {
            Some(ab) => std::borrow::Cow::Owned(js_sys::Uint8Array::new(ab).to_vec()),
            None => std::borrow::Cow::Borrowed(&[]),
        }
    }
}

fn idb_error(what: &str, e: JsValue) -> JsValue {
    let detail = Reflect::get(&e, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_default();
    JsValue::from_str(&format!(
        "the browser's storage (IndexedDB) failed to {what}: {detail}"
    ))
}

fn factory() -> Result<IdbFactory, JsValue> {
    let global = js_sys::global();
    let f = Reflect::get(&global, &"indexedDB".into())?;
    if f.is_undefined() || f.is_null() {
        return Err(JsValue::from_str("this browser has no IndexedDB"));
    }
    Ok(f.unchecked_into())
}

/// Waits for an IDB request; resolves with its `result`.
async fn request(req: &IdbRequest) -> Result<JsValue, JsValue> {
    let promise = Promise::new(&mut |resolve, reject| {
        req.set_onsuccess(Some(&resolve));
        req.set_onerror(Some(&reject));
    });
    JsFuture::from(promise).await?;
    req.result()
}

/// Snapshot parts as read: each stored as a `Blob` (read here, all of them
/// at once) or, from an older page, an `ArrayBuffer` (as it is).
///
/// Parts are stored as Blobs because Chromium reads a Blob's bytes on its
/// own, in parallel, where a large `ArrayBuffer` value is unwrapped one at a
/// time: 225 MB of 450 KB parts read back at 200 MB/s as ArrayBuffers in
/// chunks of 16, and at 300-400 MB/s as Blobs (Chromium 156, this project's
/// test machine, a page doing nothing else).
async fn buffers(values: Array) -> Result<Array, JsValue> {
    let reads = Array::new();
    for v in values.iter() {
        match v.dyn_ref::<web_sys::Blob>() {
            Some(blob) => reads.push(&blob.array_buffer()),
            None => reads.push(&Promise::resolve(&v)),
        };
    }
    let read = JsFuture::from(Promise::all(&reads)).await?;
    Ok(Array::from(&read))
}

/// Waits for a transaction to commit.
async fn committed(tx: &IdbTransaction) -> Result<(), JsValue> {
    let promise = Promise::new(&mut |resolve, reject| {
        tx.set_oncomplete(Some(&resolve));
        tx.set_onerror(Some(&reject));
        tx.set_onabort(Some(&reject));
    });
    JsFuture::from(promise).await.map(|_| ())
}

/// An open per-share database.
#[derive(Debug, Clone)]
pub struct Store {
    db: IdbDatabase,
}

impl Store {
    /// Opens (creating) the database `name`.
    pub async fn open(name: &str) -> Result<Store, JsValue> {
        let req: IdbOpenDbRequest = factory()?
            .open_with_u32(name, DB_VERSION)
            .map_err(|e| idb_error("open the database", e))?;
        let upgrade = Closure::<dyn FnMut(web_sys::Event)>::new({
            let req = req.clone();
            move |_| {
                if let Ok(db) = req.result().and_then(|d| d.dyn_into::<IdbDatabase>()) {
                    let names = db.object_store_names();
                    if !names.contains(BATCHES) {
                        let _ = db.create_object_store(BATCHES);
                    }
                    if !names.contains(META) {
                        let _ = db.create_object_store(META);
                    }
                    if !names.contains(SNAPSHOT) {
                        let _ = db.create_object_store(SNAPSHOT);
                    }
                }
            }
        });
        req.set_onupgradeneeded(Some(upgrade.as_ref().unchecked_ref()));
        let db = request(&req)
            .await
            .map_err(|e| idb_error("open the database", e))?;
        req.set_onupgradeneeded(None);
        drop(upgrade);
        Ok(Store { db: db.dyn_into()? })
    }

    fn all_stores(&self, mode: IdbTransactionMode, what: &str) -> Result<IdbTransaction, JsValue> {
        self.db
            .transaction_with_str_sequence_and_mode(
                &Array::of3(&BATCHES.into(), &SNAPSHOT.into(), &META.into()),
                mode,
            )
            .map_err(|e| idb_error(what, e))
    }

    /// The stored state, the first `parts` snapshot parts and the first
    /// `frames` stored batches: what a reopened page restores before it lists
    /// anything (the snapshot and the log both start with the top folders).
    /// With a snapshot, the batches read here are the first ones after it.
    pub async fn load_first(&self, parts: u32, frames: u32) -> Result<First, JsValue> {
        let tx = self.all_stores(IdbTransactionMode::Readonly, "read the cached index")?;
        let meta = tx.object_store(META)?.get(&STATE_KEY.into())?;
        let parts = tx
            .object_store(SNAPSHOT)?
            .get_all_with_key_and_limit(&JsValue::UNDEFINED, parts)?;
        let frames = tx
            .object_store(BATCHES)?
            .get_all_with_key_and_limit(&JsValue::UNDEFINED, frames)?;
        let meta = request(&meta).await?;
        let parts = request(&parts).await?;
        let frames = request(&frames).await?;
        Ok(First {
            state: parse_state(&meta),
            parts: buffers(Array::from(&parts)).await?,
            frames: Array::from(&frames),
        })
    }

    /// The snapshot parts from number `from` on, and the stored batches whose
    /// key (first `Seq`) is `from_seq` or above, in order.
    /// Snapshot parts `from_part .. from_part + count` (fewer if the store
    /// holds fewer), in order.
    pub async fn load_parts(&self, from_part: u32, count: u32) -> Result<Array, JsValue> {
        let tx = self.all_stores(IdbTransactionMode::Readonly, "read the cached index")?;
        let last = from_part.saturating_add(count.max(1) - 1);
        let range = web_sys::IdbKeyRange::bound(
            &JsValue::from_f64(from_part.into()),
            &JsValue::from_f64(last.into()),
        )?;
        let parts = tx.object_store(SNAPSHOT)?.get_all_with_key(&range)?;
        buffers(Array::from(&request(&parts).await?)).await
    }

    pub async fn load_rest(
        &self,
        from_part: u32,
        from_seq: Seq,
    ) -> Result<(Array, Array), JsValue> {
        let tx = self.all_stores(IdbTransactionMode::Readonly, "read the cached index")?;
        let parts_range = web_sys::IdbKeyRange::lower_bound(&JsValue::from_f64(from_part.into()))?;
        let parts = tx.object_store(SNAPSHOT)?.get_all_with_key(&parts_range)?;
        let range = web_sys::IdbKeyRange::lower_bound(&JsValue::from_f64(from_seq.0 as f64))?;
        let frames = tx.object_store(BATCHES)?.get_all_with_key(&range)?;
        let parts = request(&parts).await?;
        let frames = request(&frames).await?;
        Ok((buffers(Array::from(&parts)).await?, Array::from(&frames)))
    }

    /// Stores a snapshot (`parts`, `ArrayBuffer`s in order) with `state`, and
    /// deletes the batches it stands for, in one transaction.
    pub async fn write_snapshot(&self, parts: &Array, state: &StoredState) -> Result<(), JsValue> {
        let Some(snapshot) = state.snapshot else {
            return Err(JsValue::from_str("a snapshot write needs a snapshot state"));
        };
        let tx = self.all_stores(IdbTransactionMode::Readwrite, "save the index")?;
        let store = tx.object_store(SNAPSHOT)?;
        store.clear()?;
        for (k, part) in parts.iter().enumerate() {
            let blob = web_sys::Blob::new_with_buffer_source_sequence(&Array::of1(&part))?;
            store.put_with_key(&blob, &JsValue::from_f64(k as f64))?;
        }
        let covered = web_sys::IdbKeyRange::upper_bound_with_open(
            &JsValue::from_f64(snapshot.next.0 as f64),
            true,
        )?;
        tx.object_store(BATCHES)?.delete(&covered)?;
        tx.object_store(META)?
            .put_with_key(&state_value(state), &STATE_KEY.into())?;
        committed(&tx)
            .await
            .map_err(|e| idb_error("save a snapshot of the index", e))
    }

    /// Writes the ops in order, then the state, in one transaction.
    pub async fn write(&self, write: &StoreWrite<JsFrame>) -> Result<(), JsValue> {
        let tx = self.all_stores(IdbTransactionMode::Readwrite, "save the index")?;
        let batches = tx.object_store(BATCHES)?;
        let meta = tx.object_store(META)?;
        for op in &write.ops {
            match op {
                StoreOp::Clear => {
                    batches.clear()?;
                    tx.object_store(SNAPSHOT)?.clear()?;
                    meta.clear()?;
                }
                StoreOp::Batch { first, frame } => {
                    batches.put_with_key(&frame.0, &JsValue::from_f64(first.0 as f64))?;
                }
            }
        }
        meta.put_with_key(&state_value(&write.state), &STATE_KEY.into())?;
        committed(&tx)
            .await
            .map_err(|e| idb_error("save the index", e))
    }

    /// Drops everything stored for this room.
    pub async fn clear(&self) -> Result<(), JsValue> {
        let tx = self.all_stores(IdbTransactionMode::Readwrite, "clear the cached index")?;
        tx.object_store(BATCHES)?.clear()?;
        tx.object_store(SNAPSHOT)?.clear()?;
        tx.object_store(META)?.clear()?;
        committed(&tx).await
    }
}

/// What [`Store::load_first`] read.
#[derive(Debug)]
pub struct First {
    pub state: Option<StoredState>,
    pub parts: Array,
    pub frames: Array,
}

/// The `meta` record as stored: `{epoch: hex string, next: number, complete}`.
#[derive(serde::Serialize, serde::Deserialize)]
struct MetaRecord {
    epoch: String,
    next: f64,
    #[serde(default)]
    complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot_next: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot_parts: Option<u32>,
}

fn state_value(s: &StoredState) -> JsValue {
    let record = MetaRecord {
        epoch: format!("{:016x}", s.epoch.0),
        next: s.next.0 as f64,
        complete: s.complete,
        snapshot_next: s.snapshot.map(|x| x.next.0 as f64),
        snapshot_parts: s.snapshot.map(|x| x.parts),
    };
    // A struct of a string, a number and a bool always converts.
    serde_wasm_bindgen::to_value(&record).unwrap_or(JsValue::NULL)
}

/// The stored state, or `None` if there is none or it is not one we wrote.
fn parse_state(v: &JsValue) -> Option<StoredState> {
    let record: MetaRecord = serde_wasm_bindgen::from_value(v.clone()).ok()?;
    let epoch = u64::from_str_radix(&record.epoch, 16).ok()?;
    let seq = |x: f64| (x >= 0.0 && x.fract() == 0.0 && x < 9.007e15).then_some(Seq(x as u64));
    let snapshot = match (record.snapshot_next, record.snapshot_parts) {
        (Some(next), Some(parts)) => Some(StoredSnapshot {
            next: seq(next)?,
            parts,
        }),
        (None, None) => None,
        _ => return None,
    };
    Some(StoredState {
        epoch: Epoch(epoch),
        next: seq(record.next)?,
        complete: record.complete,
        snapshot,
    })
}
