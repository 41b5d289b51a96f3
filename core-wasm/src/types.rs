//! The values that cross into JavaScript, typed: each derives its TypeScript
//! type (tsify) and crosses as `tsify::Ts<T>`, converted with
//! serde-wasm-bindgen inside the function (a conversion failure is an ordinary
//! error there, not a throw through the ABI), so the web code gets checked
//! types instead of objects assembled by hand. Numbers are `f64` (a JS
//! number); bytes arrive as `Uint8Array`.

use linkfs_core::{EntryRef, FailureKind, StoredProgress};
use linkfs_proto::EntryKind;
use serde::Serialize;
use tsify::Tsify;

/// What an entry is, as the UI names it.
#[derive(Debug, Clone, Copy, Serialize, Tsify)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

/// One entry as the UI sees it.
#[derive(Debug, Serialize, Tsify)]
pub struct EntryRow {
    pub id: u32,
    pub parent: u32,
    /// Invalid UTF-8 bytes show as U+FFFD.
    pub name: String,
    pub kind: Kind,
    pub size: f64,
    /// Whole seconds since the Unix epoch.
    pub mtime: f64,
    pub mode: u32,
    #[tsify(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[tsify(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<u32>,
}

impl EntryRow {
    pub fn of(e: &EntryRef<'_>) -> EntryRow {
        EntryRow {
            id: e.id.0,
            parent: e.parent.0,
            name: String::from_utf8_lossy(e.name).into_owned(),
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
    pub dir: u32,
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
    pub id: u32,
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

/// How far the index is (see `linkfs_core::persist`).
#[derive(Debug, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub received: f64,
    pub announced: f64,
    pub complete: bool,
    pub persisted: f64,
    pub from_cache: f64,
    /// The cached index is still being loaded (queries see the part loaded so far).
    pub loading_cache: bool,
    #[tsify(optional)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_problem: Option<String>,
}

impl From<StoredProgress> for Progress {
    fn from(p: StoredProgress) -> Progress {
        Progress {
            received: p.received as f64,
            announced: p.announced as f64,
            complete: p.complete,
            persisted: p.persisted as f64,
            from_cache: p.from_cache as f64,
            loading_cache: false,
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
    /// Whether the cached index was opened from a stored snapshot.
    pub opened_from_snapshot: bool,
    /// Snapshots of the index stored in this session; the last one's size and
    /// how long taking it (building its parts) held the worker, ms.
    pub snapshots: f64,
    pub snapshot_bytes: f64,
    pub snapshot_ms: f64,
}

/// Why a session ended, as the page's state names it.
#[derive(Debug, Clone, Copy, Serialize, Tsify)]
#[serde(rename_all = "kebab-case")]
pub enum EndKind {
    InvalidLink,
    SharerGone,
    Unreachable,
    Closed,
    Other,
}

impl From<FailureKind> for EndKind {
    fn from(k: FailureKind) -> EndKind {
        match k {
            FailureKind::InvalidLink => EndKind::InvalidLink,
            FailureKind::SharerGone => EndKind::SharerGone,
            FailureKind::Unreachable => EndKind::Unreachable,
            FailureKind::Closed => EndKind::Closed,
            _ => EndKind::Other,
        }
    }
}

/// What the receiver session reports to the worker.
#[derive(Debug, Serialize, Tsify)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SessionEvent {
    /// Verified bytes of a read, in order.
    Data {
        handle: u32,
        offset: f64,
        #[serde(with = "serde_bytes")]
        #[tsify(type = "Uint8Array")]
        bytes: Vec<u8>,
    },
    Done {
        handle: u32,
    },
    Failed {
        handle: u32,
        message: String,
    },
    /// The session ended; `gone` when the sharer left (or the link was lost)
    /// and what was received stays browsable.
    Ended {
        kind: EndKind,
        gone: bool,
        message: String,
    },
    /// The sharer started a fresh snapshot: whatever was shown is gone.
    Reset,
    /// The data link was lost; the session waits for a new one (the page
    /// reconnects; reads wait and continue).
    LinkLost,
    /// Entries changed in these folders (their listings are stale); `all`:
    /// more changed than was recorded, so any folder may have.
    Changed {
        dirs: Vec<u32>,
        all: bool,
    },
}

/// Events in the order they happened.
#[derive(Debug, Serialize, Tsify)]
#[serde(transparent)]
pub struct SessionEvents(pub Vec<SessionEvent>);
