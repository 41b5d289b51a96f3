//! IndexedDB persistence of the index, in the worker.
//!
//! One database per share, named by `ShareLink::store_name` (the room and a
//! value derived from the secret, so another share that reuses a room id never
//! mixes with it), with three object stores:
//! - `batches`: the index batch frames exactly as they arrived, keyed by the
//!   `Seq` of their first operation (numeric keys sort in log order);
//! - `snapshot`: the parts of the last snapshot of the index (`Index::snapshot_parts`),
//!   in groups as the restore reads them (the first [`FIRST_PARTS`], then
//!   [`REST_CHUNK_PARTS`] at a time), each group one record `{blob, lens}`: a
//!   `Blob` of its parts back to back and their lengths, keyed by its first
//!   part's number (see [`parts_of`] for why). A page before 2026-11-29
//!   stored one part a record, a `Blob` or an `ArrayBuffer`; those read as
//!   before. The snapshot stands for every batch before the one it ends at,
//!   which are deleted in the same transaction that stores it;
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

use js_sys::{Array, Function, Promise, Reflect};
use linkfs_core::visit::{FIRST_PARTS, REST_CHUNK_PARTS};
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
    /// `ArrayBuffer`, a view of one (a part of a group) or an unsealed part
    /// (`{plain}`) is not something this store wrote: empty, and refused.
    fn bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        if let Some(view) = self.0.dyn_ref::<js_sys::Uint8Array>() {
            return std::borrow::Cow::Owned(view.to_vec());
        }
        if let Some(ab) = self.0.dyn_ref::<js_sys::ArrayBuffer>() {
            return std::borrow::Cow::Owned(js_sys::Uint8Array::new(ab).to_vec());
        }
        match plain_of(&self.0) {
            Some(view) => std::borrow::Cow::Owned(view.to_vec()),
            None => std::borrow::Cow::Borrowed(&[]),
        }
    }

    fn unsealed(&self) -> bool {
        plain_of(&self.0).is_some()
    }
}

/// The bytes of a part the unsealer gave back unsealed: `{plain: Uint8Array}`.
fn plain_of(value: &JsValue) -> Option<js_sys::Uint8Array> {
    if !value.is_object() {
        return None;
    }
    Reflect::get(value, &"plain".into())
        .ok()?
        .dyn_into::<js_sys::Uint8Array>()
        .ok()
}

/// A stored snapshot part checked against its checksum and decompressed (its
/// plain form, `linkfs_core::index::unsealed_part`): the unseal worker's work,
/// so the index worker only restores. The error says what is wrong with it.
#[wasm_bindgen(js_name = unsealPart)]
pub fn unseal_part(part: &[u8]) -> Result<Vec<u8>, JsError> {
    linkfs_core::index::unsealed_part(part).map_err(|e| JsError::new(&e.to_string()))
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

/// Parts a group record holds at most (the restore's chunk).
const GROUP_MAX: u32 = REST_CHUNK_PARTS;

/// The snapshot parts numbered `from..=to`, in order, from the records read
/// (`keys` and `values` of one key range that starts up to a group before
/// `from`): a group's `Blob` is read (all of them at once) and cut into its
/// parts as views; a part stored alone (an older page's) is one part.
///
/// Parts are grouped because most of a Blob read's cost is per Blob: 223 MB
/// of 450 KB parts, read back a chunk of 16 at a time in a page doing nothing
/// else, came at 385-441 MB/s as one Blob a part, 503-584 as 4 a Blob, and
/// 664-736 as 16 (Chromium 156, this project's test machine,
/// `tests-e2e/bench-idb-parts.ts`). As `ArrayBuffer` values they came at
/// 200 MB/s: Chromium unwraps a large value one at a time.
///
/// With an `unsealer` (the unseal worker's, `web/src/wasm/unsealer.ts`), a
/// group is handed to it whole, `(blob, lens, first, from, to)`, and its
/// answer (the parts asked for, each `{plain}` or, where it could not unseal
/// one, as stored) is taken as it is: that worker reads the Blob, checks and
/// decompresses while this one restores the chunk before.
async fn parts_of(
    keys: Array,
    values: Array,
    from: u32,
    to: u32,
    unsealer: Option<&Function>,
) -> Result<Array, JsValue> {
    let reads = Array::new();
    let mut layout: Vec<(u32, Layout)> = Vec::new();
    for (key, value) in keys.iter().zip(values.iter()) {
        let first = key.as_f64().unwrap_or(-1.0);
        if !(0.0..=f64::from(u32::MAX)).contains(&first) {
            continue;
        }
        let first = first as u32;
        let blob = Reflect::get(&value, &"blob".into()).ok();
        let lens = Reflect::get(&value, &"lens".into())
            .ok()
            .filter(Array::is_array)
            .map(|l| {
                Array::from(&l)
                    .iter()
                    .map(|n| n.as_f64().unwrap_or(0.0) as u32)
                    .collect::<Vec<u32>>()
            });
        // Only what holds a part asked for is read (a record's value is a
        // handle; its bytes come with `array_buffer`).
        match (
            blob.as_ref().and_then(|b| b.dyn_ref::<web_sys::Blob>()),
            lens,
        ) {
            (Some(blob), Some(lens)) => {
                let last = first.saturating_add((lens.len() as u32).saturating_sub(1));
                if lens.is_empty() || last < from || first > to {
                    continue;
                }
                let unsealed = unsealer.and_then(|f| {
                    let args = Array::of5(
                        blob,
                        &lens.iter().map(|l| JsValue::from(*l)).collect::<Array>(),
                        &first.into(),
                        &from.into(),
                        &to.into(),
                    );
                    f.apply(&JsValue::NULL, &args)
                        .ok()
                        .filter(|p| p.is_instance_of::<Promise>())
                });
                match unsealed {
                    Some(promise) => {
                        reads.push(&promise);
                        layout.push((first, Layout::Unsealed));
                    }
                    None => {
                        reads.push(&blob.array_buffer());
                        layout.push((first, Layout::Group(lens)));
                    }
                }
            }
            _ => {
                if !(from..=to).contains(&first) {
                    continue;
                }
                match value.dyn_ref::<web_sys::Blob>() {
                    Some(blob) => reads.push(&blob.array_buffer()),
                    None => reads.push(&Promise::resolve(&value)),
                };
                layout.push((first, Layout::Alone));
            }
        }
    }
    let read = Array::from(&JsFuture::from(Promise::all(&reads)).await?);
    let parts = Array::new();
    for ((first, lens), buffer) in layout.into_iter().zip(read.iter()) {
        let lens = match lens {
            Layout::Alone => {
                parts.push(&buffer);
                continue;
            }
            Layout::Unsealed => {
                for part in Array::from(&buffer).iter() {
                    parts.push(&part);
                }
                continue;
            }
            Layout::Group(lens) => lens,
        };
        let Some(buffer) = buffer.dyn_ref::<js_sys::ArrayBuffer>() else {
            continue;
        };
        let mut at = 0u32;
        for (i, len) in lens.into_iter().enumerate() {
            let n = first.saturating_add(i as u32);
            let end = at.saturating_add(len).min(buffer.byte_length());
            if (from..=to).contains(&n) {
                // A group cut short (a damaged record) gives a short part,
                // which its checksum refuses.
                parts.push(&js_sys::Uint8Array::new_with_byte_offset_and_length(
                    buffer,
                    at,
                    end - at,
                ));
            }
            at = end;
        }
    }
    Ok(parts)
}

/// How a record read in [`parts_of`] becomes parts.
enum Layout {
    /// One part alone (an older page's record).
    Alone,
    /// A group's Blob, cut here by its parts' lengths.
    Group(Vec<u32>),
    /// The unsealer's answer: the parts asked for, in order.
    Unsealed,
}

/// The groups a snapshot of `count` parts is stored in: `(first, parts)`.
fn groups(count: u32) -> impl Iterator<Item = (u32, u32)> {
    let mut first = 0;
    std::iter::from_fn(move || {
        if first >= count {
            return None;
        }
        let size = if first == 0 { FIRST_PARTS } else { GROUP_MAX };
        let group = (first, size.min(count - first));
        first += group.1;
        Some(group)
    })
}

/// Requests for the keys and values of the snapshot records that may hold
/// parts `from..=to` (`to` None: to the end): from a group before `from`.
fn parts_in(
    tx: &IdbTransaction,
    from: u32,
    to: Option<u32>,
) -> Result<(IdbRequest, IdbRequest), JsValue> {
    let lower = JsValue::from_f64(from.saturating_sub(GROUP_MAX - 1).into());
    let range = match to {
        Some(to) => web_sys::IdbKeyRange::bound(&lower, &JsValue::from_f64(to.into()))?,
        None => web_sys::IdbKeyRange::lower_bound(&lower)?,
    };
    let store = tx.object_store(SNAPSHOT)?;
    Ok((
        store.get_all_keys_with_key(&range)?,
        store.get_all_with_key(&range)?,
    ))
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

/// How long opening a share's database may take, ms, before the visit goes
/// on without it (in memory, said once), as when there is no IndexedDB. It
/// answers in milliseconds; it can hang: another tab holding an older
/// version open, or a browser whose storage is stuck. A page waiting on it
/// showed "Connecting…" for good.
pub const OPEN_WITHIN_MS: i32 = 10_000;

/// The words of an open that did not answer in time.
const NOT_OPENED: &str = "the browser's storage (IndexedDB) did not open the share's database within 10 s; going on without it";

/// An open per-share database.
#[derive(Debug, Clone)]
pub struct Store {
    db: IdbDatabase,
    /// Unseals the parts of a snapshot's rest elsewhere (see [`parts_of`]).
    unsealer: Option<Function>,
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
        // Success, an error, or no answer within OPEN_WITHIN_MS.
        let promise = Promise::new(&mut |resolve, reject| {
            req.set_onsuccess(Some(&resolve));
            req.set_onerror(Some(&reject));
            let late = reject.bind1(&JsValue::NULL, &JsValue::from_str(NOT_OPENED));
            crate::turn::after_ms(late.unchecked_ref(), OPEN_WITHIN_MS);
        });
        let answered = JsFuture::from(promise).await;
        req.set_onupgradeneeded(None);
        drop(upgrade);
        if let Err(e) = answered {
            if e.as_string().as_deref() == Some(NOT_OPENED) {
                // Should it open after all, it is closed at once.
                let late = req.clone();
                req.set_onsuccess(Some(
                    Closure::once_into_js(move |_: web_sys::Event| {
                        if let Ok(db) = late.result().and_then(|d| d.dyn_into::<IdbDatabase>()) {
                            db.close();
                        }
                    })
                    .unchecked_ref(),
                ));
                return Err(e);
            }
            return Err(idb_error("open the database", e));
        }
        let db: IdbDatabase = req.result()?.dyn_into()?;
        // A newer page of this share (another tab) asking for a newer
        // version is not kept waiting: this one lets go (and goes on with
        // what it has in memory; its writes then fail and are said once).
        let held = db.clone();
        db.set_onversionchange(Some(
            Closure::once_into_js(move |_: web_sys::Event| held.close()).unchecked_ref(),
        ));
        Ok(Store { db, unsealer: None })
    }

    /// Has the parts after the first unsealed by `unsealer` (see [`parts_of`]).
    pub fn with_unsealer(mut self, unsealer: Option<Function>) -> Store {
        self.unsealer = unsealer;
        self
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
        let (keys, values) = parts_in(&tx, 0, Some(parts.max(1) - 1))?;
        let frames = tx
            .object_store(BATCHES)?
            .get_all_with_key_and_limit(&JsValue::UNDEFINED, frames)?;
        let meta = request(&meta).await?;
        let keys = request(&keys).await?;
        let values = request(&values).await?;
        let frames = request(&frames).await?;
        let parts = if parts == 0 {
            Array::new()
        } else {
            parts_of(keys.into(), values.into(), 0, parts - 1, None).await?
        };
        Ok(First {
            state: parse_state(&meta),
            parts,
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
        let (keys, values) = parts_in(&tx, from_part, Some(last))?;
        let keys = request(&keys).await?;
        let values = request(&values).await?;
        parts_of(
            keys.into(),
            values.into(),
            from_part,
            last,
            self.unsealer.as_ref(),
        )
        .await
    }

    pub async fn load_rest(
        &self,
        from_part: u32,
        from_seq: Seq,
    ) -> Result<(Array, Array), JsValue> {
        let tx = self.all_stores(IdbTransactionMode::Readonly, "read the cached index")?;
        let (keys, values) = parts_in(&tx, from_part, None)?;
        let range = web_sys::IdbKeyRange::lower_bound(&JsValue::from_f64(from_seq.0 as f64))?;
        let frames = tx.object_store(BATCHES)?.get_all_with_key(&range)?;
        let keys = request(&keys).await?;
        let values = request(&values).await?;
        let frames = request(&frames).await?;
        let parts = parts_of(
            keys.into(),
            values.into(),
            from_part,
            u32::MAX,
            self.unsealer.as_ref(),
        )
        .await?;
        Ok((parts, Array::from(&frames)))
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
        for (first, count) in groups(parts.length()) {
            let group = parts.slice(first, first + count);
            let lens: Array = group
                .iter()
                .map(|p| {
                    let len = p
                        .dyn_ref::<js_sys::ArrayBuffer>()
                        .map_or(0, js_sys::ArrayBuffer::byte_length);
                    JsValue::from_f64(f64::from(len))
                })
                .collect();
            let record = js_sys::Object::new();
            let blob = web_sys::Blob::new_with_buffer_source_sequence(&group)?;
            Reflect::set(&record, &"blob".into(), &blob)?;
            Reflect::set(&record, &"lens".into(), &lens)?;
            store.put_with_key(&record, &JsValue::from_f64(first.into()))?;
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
