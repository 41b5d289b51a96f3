//! The values that cross into JavaScript, typed: each derives its TypeScript
//! type (tsify) and crosses as `tsify::Ts<T>`, converted with
//! serde-wasm-bindgen inside the function (a conversion failure is an ordinary
//! error there, not a throw through the ABI), so the web code gets checked
//! types instead of objects assembled by hand. Numbers are `f64` (a JS
//! number); bytes arrive as `Uint8Array`. Ids are branded numbers in
//! TypeScript (`EntryId`, `ReadHandle`), as `linkfs_proto::ids` makes them
//! newtypes in Rust: a read handle cannot be passed where an entry id goes.

use linkfs_core::{EntryRef, VisitProgress};
use linkfs_proto::EntryKind;
use serde::Serialize;
use tsify::Tsify;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const IDS_TS: &str = r#"
/** An entry's id in the share (`linkfs_proto::EntryId`); the root is 0. */
export type EntryId = number & { readonly __brand: 'EntryId' };
/** One read of the visit (`linkfs_core::ReadHandle`). */
export type ReadHandle = number & { readonly __brand: 'ReadHandle' };
"#;

/// What an entry is, as the UI names it.
#[derive(Debug, Clone, Copy, Serialize, Tsify)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// One entry of the share, as the index holds it.
#[derive(Debug, Serialize, Tsify)]
pub struct EntryRow {
    /// Stable id the sharer gave the entry; the root is 0.
    #[tsify(type = "EntryId")]
    pub id: u32,
    #[tsify(type = "EntryId")]
    pub parent: u32,
    /// Display name (invalid UTF-8 bytes in a name show as U+FFFD).
    pub name: String,
    pub kind: Kind,
    /// Bytes for files, 0 for directories, target length for symlinks.
    pub size: f64,
    /// Modification time, whole seconds since the Unix epoch.
    pub mtime: f64,
    /// Permission bits, e.g. 0o644.
    pub mode: u32,
    /// Symlink target, symlinks only.
    #[tsify(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Number of children, directories only.
    #[tsify(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<u32>,
}

impl EntryRow {
    pub fn of(e: &EntryRef<'_>) -> EntryRow {
        EntryRow {
            id: e.id.0,
            parent: e.parent.0,
            name: String::from_utf8_lossy(&e.name).into_owned(),
            kind: match e.kind {
                EntryKind::Dir => Kind::Dir,
                EntryKind::Symlink => Kind::Symlink,
                _ => Kind::File,
            },
            size: e.size as f64,
            mtime: e.mtime as f64,
            mode: e.mode,
            target: (e.kind == EntryKind::Symlink)
                .then(|| String::from_utf8_lossy(e.target).into_owned()),
            children: (e.kind == EntryKind::Dir).then_some(e.children),
        }
    }
}

/// The entries from the root down to one entry.
#[derive(Debug, Serialize, Tsify)]
#[serde(transparent)]
pub struct EntryPath(pub Vec<EntryRow>);

/// A window of one directory's children in the requested order.
#[derive(Debug, Serialize, Tsify)]
pub struct ListPage {
    #[tsify(type = "EntryId")]
    pub dir: u32,
    /// Children of `dir` in the index now.
    pub total: f64,
    pub start: u32,
    pub rows: Vec<EntryRow>,
}

/// Matches of a whole-share search found by one step, with their paths.
#[derive(Debug, Serialize, Tsify)]
pub struct SearchBatch {
    /// Each match as a row; `path` is its full path from the root.
    pub rows: Vec<SearchHit>,
    /// Entry slots scanned so far, of `total`.
    pub scanned: f64,
    pub total: f64,
    pub done: bool,
    /// More matched than are reported (`linkfs_core::MAX_RESULTS`).
    pub truncated: bool,
}

/// One match of a search: its row's fields and its path. (Not `#[serde(flatten)]`:
/// serde-wasm-bindgen turns a flattened struct into a JS `Map`, not an object.)
#[derive(Debug, Serialize, Tsify)]
pub struct SearchHit {
    #[tsify(type = "EntryId")]
    pub id: u32,
    #[tsify(type = "EntryId")]
    pub parent: u32,
    pub name: String,
    pub kind: Kind,
    pub size: f64,
    pub mtime: f64,
    pub mode: u32,
    /// `/`-separated, from the share root (invalid UTF-8 shows as U+FFFD).
    pub path: String,
}

impl SearchHit {
    pub fn of(e: &EntryRef<'_>, path: String) -> SearchHit {
        let row = EntryRow::of(e);
        SearchHit {
            id: row.id,
            parent: row.parent,
            name: row.name,
            kind: row.kind,
            size: row.size,
            mtime: row.mtime,
            mode: row.mode,
            path,
        }
    }
}

/// How far the index is (see `linkfs_core::visit::VisitProgress`).
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Entries in the local index now (from the cache and from the sharer).
    pub received: f64,
    /// Entries the sharer says it has found so far.
    pub announced: f64,
    /// The sharer finished walking and everything it found is in the local index.
    pub complete: bool,
    /// Entries committed to IndexedDB.
    pub persisted: f64,
    /// Entries shown from IndexedDB before the sharer answered (0 on a first visit).
    pub from_cache: f64,
    /// The index saved in IndexedDB is still being restored (folders are
    /// listed from the part restored so far).
    pub loading_cache: bool,
    /// Why the index is not being saved, if it is not.
    #[tsify(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_problem: Option<String>,
}

impl From<VisitProgress> for Progress {
    fn from(p: VisitProgress) -> Progress {
        Progress {
            received: p.received as f64,
            announced: p.announced as f64,
            complete: p.complete,
            persisted: p.persisted as f64,
            from_cache: p.from_cache as f64,
            loading_cache: p.restoring,
            storage_problem: p.storage_problem,
        }
    }
}

/// Figures for tests and benchmarks.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub index_wire_bytes: f64,
    pub entries: f64,
    pub index_heap_bytes: f64,
    pub refused_ops: f64,
    pub wasm_memory_bytes: f64,
    /// Opening the cached index, ms: IndexedDB opened, its batches read, the index rebuilt.
    pub open_db_ms: f64,
    pub load_ms: f64,
    pub rebuild_ms: f64,
    /// The part of `rebuild_ms` the restore's steps held the worker.
    pub rebuild_busy_ms: f64,
    /// Whether the cached index was opened from a stored snapshot.
    pub opened_from_snapshot: bool,
    /// Snapshots of the index stored in this session; the last one's size and
    /// how long taking it (building its parts) held the worker, ms.
    pub snapshots: f64,
    pub snapshot_bytes: f64,
    pub snapshot_ms: f64,
}

/// The connection as the page shows it.
#[derive(Debug, Clone, Copy, Serialize, Tsify)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionState {
    Connecting,
    Connected,
    /// The connection was lost; a new one is being made (downloads wait and continue).
    Reconnecting,
    SharerGone,
    InvalidLink,
    /// The sharer withdrew this link, or its time ran out.
    LinkEnded,
    /// The link asks for a password (give it with `givePassword`).
    Password,
    /// The password given was wrong (or too many were): the visit ended;
    /// opening the link again asks anew.
    PasswordWrong,
    Error,
}

/// What the visit wants the worker to do, in order (see `linkfs_core::visit::Output`).
#[derive(Debug, Serialize, Tsify)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum VisitOutput {
    /// Send this frame on the data link.
    Send {
        #[serde(with = "serde_bytes")]
        #[tsify(type = "Uint8Array")]
        frame: Vec<u8>,
    },
    /// Open a data link to the sharer (the page does; report how it went).
    Connect,
    /// Close the data link, or drop the attempt under way.
    CloseLink,
    /// The connection's state changed, with words for the user.
    Status {
        state: ConnectionState,
        message: String,
    },
    /// Verified bytes of a read, in order.
    Data {
        #[tsify(type = "ReadHandle")]
        handle: u32,
        offset: f64,
        #[serde(with = "serde_bytes")]
        #[tsify(type = "Uint8Array")]
        bytes: Vec<u8>,
    },
    Done {
        #[tsify(type = "ReadHandle")]
        handle: u32,
    },
    Failed {
        #[tsify(type = "ReadHandle")]
        handle: u32,
        message: String,
    },
    /// The sharer started a fresh snapshot: whatever was shown is gone.
    Reset,
    /// Entries changed in these folders (their listings are stale); `all`:
    /// more changed than was recorded, so any folder may have.
    Changed {
        #[tsify(type = "EntryId[]")]
        dirs: Vec<u32>,
        all: bool,
    },
    /// The saved index is restored whole (searches and ZIP plans see all of it).
    Restored,
    /// Read these bytes of the file added as `upload` and give them with
    /// `uploadBytes` (in the order asked, per upload).
    UploadRead { upload: u32, offset: f64, len: u32 },
    /// The sharer took the upload on; it goes on from `offset` (`changes`:
    /// how its names were made safe, one per line).
    UploadReady {
        upload: u32,
        offset: f64,
        path: String,
        changes: String,
    },
    /// The sharer has written `written` bytes of it.
    UploadProgress { upload: u32, written: f64 },
    /// It landed at `path` (`renamed`: the name asked for was taken).
    UploadDone {
        upload: u32,
        path: String,
        renamed: bool,
    },
    /// It was refused or failed (the words say why); nothing of it is in place.
    UploadRefused { upload: u32, message: String },
    /// The visit ended before it landed (the words say why); the sharer keeps
    /// what it has of it for a later visit.
    UploadInterrupted { upload: u32, message: String },
}

/// What the link lets its visitor do, once the sharer said.
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct LinkRights {
    /// The visitor sees the tree (false: a drop link).
    pub list: bool,
    /// The visitor may add files.
    pub upload: bool,
    /// Caps (0: none but the sharer's disk).
    pub max_file: f64,
    pub bytes_left: f64,
    pub files_left: f64,
}

/// Everything to do now, and in how many ms to call `tick` (none: no timer).
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct VisitOutputs {
    pub outputs: Vec<VisitOutput>,
    #[tsify(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_in_ms: Option<f64>,
}
