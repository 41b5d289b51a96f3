//! The folder listings the kernel keeps for the mount, and keeping them true
//! to the index.
//!
//! A folder opened with `FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE` has its listing
//! kept by the kernel: listing it again asks the mount nothing until the
//! mount lets it go (`inval_inode`). Where the kernel opens folders without
//! asking (no opendir, see the mount's docs), every folder is opened so: a
//! listing from its start (offset 0) counts as its opening here, and a folder
//! of more than [`super::KEPT_LISTING_MAX`] names is let go once no listing call
//! came for it for [`TOO_BIG_QUIET`] ([`KeptListings::too_big`]): served from
//! the kernel, a listing brings no attributes, so `ls -l` a second time would
//! look each name up on its own. Two rules keep what the kernel shows true:
//!
//! - **After the index is complete**, every change is recorded, and
//!   [`follow_changes`] lets go of the folders each change touched.
//! - **Before it is complete**, a folder may change without a recorded change
//!   (the sharer's walk and watch send it as part of the index). A folder
//!   opened then is kept too, and each listing call for it is fingerprinted
//!   (its names and ids, [`fingerprint`]). When the index becomes complete, [`stale_early`] compares each with the folder as it is
//!   then: a folder that changed meanwhile, or was listed twice differently,
//!   is let go; the rest stay kept. `find` over a mount while the sharer
//!   still walks opens nearly every folder before the index is complete, and
//!   without this the second `find` listed every folder again (10M entries:
//!   2.6x the disk's `find` against 1.2x).
//!
//! ```text
//!  opendir (or, without opendir, a listing call at offset 0),
//!    index not complete         --> early(ino) = unlisted   (kept by the kernel)
//!  a listing call               --> early(ino) = listed(f), or changed if f differs
//!                                   from the calls before (or it holds too many names)
//!  index complete               --> for each early: unlisted, changed, or f != now
//!                                   -> let go; the rest stay; early emptied
//!  a recorded change            --> its folders let go (now and ATTR_TTL later)
//!  changes lost, session ended  --> every kept folder let go
//!  a listing call, folder too big --> too_big(ino) = now; let go when quiet
//! ```
//!
//! Bounds: one entry per folder of the index in each of the three sets.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::hash::Hasher;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fuser::INodeNo;
use linkfs_core::Index;
use linkfs_proto::EntryId;

use super::{ATTR_TTL, ino_of};
use crate::visit::{Client, IndexChanges, Status};

/// A folder too big to keep is let go once no listing call came for it for
/// this long: by then the kernel has taken the listing's end (and marked it
/// kept), and a listing still read keeps coming to the mount.
pub const TOO_BIG_QUIET: Duration = Duration::from_millis(50);

/// What a mount follows of its client's changes: taken before the mount is
/// up, so that no change falls between the two unseen.
pub struct ChangeFollower {
    client: Client,
    changes: tokio::sync::mpsc::Receiver<IndexChanges>,
    status: tokio::sync::watch::Receiver<Status>,
    /// Change batches the client had applied before.
    base: u64,
}

impl ChangeFollower {
    pub fn new(client: &Client) -> Self {
        let mut status = client.watch();
        // Counted before following: a batch applied in between looks lost, and
        // costs one needless letting go.
        let base = status.borrow_and_update().changes;
        ChangeFollower {
            client: client.clone(),
            changes: client.changes(),
            status,
            base,
        }
    }
}

/// Keeps the kernel's caches true to the index: for every change the index
/// records (after it was complete), the names that changed in their folders
/// (old and new place) and the inode itself are invalidated, so `ls`, `stat`
/// and `cat` see a change at once instead of after [`ATTR_TTL`]. The folders
/// are invalidated once more [`ATTR_TTL`] later: a listing the mount built just
/// before the change can reach the kernel, and be kept, after the first. When
/// changes were lost (`overflowed`, the sharer started over, or batches the
/// follower never got: counted against [`Status::changes`]), every
/// listing the kernel keeps is let go, and the attribute TTL of 1 s bounds
/// how long it may show old attributes. When the index becomes complete, the
/// folders opened before whose listings may be stale are let go
/// ([`stale_early`]). Runs until the client's session ends; then no folder
/// is opened with its listing kept any more (where the kernel opens folders
/// without opendir it still keeps them: `linkfs mount` unmounts then).
pub async fn follow_changes(
    follower: ChangeFollower,
    notifier: fuser::Notifier,
    kept: Arc<KeptListings>,
) {
    let ChangeFollower {
        client,
        mut changes,
        mut status,
        base,
    } = follower;
    let mut got = 0u64;
    let mut was_complete = status.borrow().complete;
    // When the folders too big to keep are next looked at, while any wait.
    let mut too_big_due: Option<tokio::time::Instant> = None;
    // Folders to invalidate again, and when (in the order they were changed).
    let mut again: std::collections::VecDeque<(tokio::time::Instant, Vec<u64>)> =
        std::collections::VecDeque::new();
    loop {
        let due = again.front().map(|(at, _)| *at);
        let batch = tokio::select! {
            batch = changes.recv() => match batch {
                Some(b) => {
                    got += 1;
                    b
                }
                None => break,
            },
            changed = status.changed() => {
                if changed.is_err() {
                    break;
                }
                let (complete, applied) = {
                    let now = status.borrow_and_update();
                    (now.complete, now.changes.saturating_sub(base))
                };
                if complete && !was_complete {
                    let (notifier, kept, client) = (notifier.clone(), kept.clone(), client.clone());
                    let _ = tokio::task::spawn_blocking(move || {
                        let stale = kept.take_stale_early(|f| client.with_index(|ix| f(ix)));
                        tracing::debug!(folders = stale.len(), "index complete: listings kept before it that may have changed let go");
                        for ino in stale {
                            let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
                        }
                    })
                    .await;
                }
                was_complete = complete;
                let queued = changes.len() as u64;
                if applied <= got + queued {
                    continue;
                }
                got = applied - queued;
                IndexChanges { changes: Vec::new(), overflowed: true }
            }
            () = kept.too_big_listed.notified(), if too_big_due.is_none() => {
                too_big_due = Some(tokio::time::Instant::now() + TOO_BIG_QUIET);
                continue;
            }
            () = tokio::time::sleep_until(too_big_due.unwrap_or_else(tokio::time::Instant::now)), if too_big_due.is_some() => {
                let (quiet, waiting) = kept.take_quiet_too_big(Instant::now());
                too_big_due = waiting.then(|| tokio::time::Instant::now() + TOO_BIG_QUIET);
                let_go(&notifier, quiet).await;
                continue;
            }
            () = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => {
                if let Some((_, folders)) = again.pop_front() {
                    let_go(&notifier, folders).await;
                }
                continue;
            }
        };
        let folders: Vec<u64> = batch
            .changes
            .iter()
            .flat_map(|c| c.before.iter().chain(c.after.iter()))
            .map(|(parent, _)| ino_of(parent.0).0)
            .collect();
        if !folders.is_empty() {
            again.push_back((tokio::time::Instant::now() + ATTR_TTL, folders));
        }
        let (notifier, kept) = (notifier.clone(), kept.clone());
        // The kernel may call back into the filesystem while it invalidates:
        // never from the runtime's threads.
        let _ = tokio::task::spawn_blocking(move || invalidate(&notifier, &batch, &kept)).await;
    }
    // Nobody follows the changes any more: nothing may stay kept.
    kept.stopped.store(true, Ordering::Release);
    let_go(&notifier, kept.take()).await;
}

/// Lets the kernel's kept listings of `folders` go, off the runtime's threads:
/// the kernel may call back into the filesystem while it invalidates.
async fn let_go(notifier: &fuser::Notifier, folders: Vec<u64>) {
    if folders.is_empty() {
        return;
    }
    let notifier = notifier.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for ino in folders {
            let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
        }
    })
    .await;
}

fn invalidate(notifier: &fuser::Notifier, batch: &IndexChanges, kept: &KeptListings) {
    if batch.overflowed {
        let folders = kept.take();
        tracing::debug!(
            folders = folders.len(),
            "more changes than recorded: every kept listing let go; attributes expire within a second"
        );
        for ino in folders {
            let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
        }
    }
    for c in &batch.changes {
        for (parent, name) in c.before.iter().chain(c.after.iter()) {
            // "Not cached" is the usual answer: nothing to do then.
            let _ = notifier.inval_entry(ino_of(parent.0), OsStr::from_bytes(name));
            let _ = notifier.inval_inode(ino_of(parent.0), 0, 0);
        }
        let _ = notifier.inval_inode(ino_of(c.id.0), 0, 0);
    }
}

/// A listing of a folder opened before the index was complete, as far as the
/// kernel took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Early {
    /// Opened; no listing call at its start yet.
    Unlisted,
    /// Every listing of it started so far had this fingerprint.
    Listed(u64),
    /// Listed with two different fingerprints: let go once complete.
    Changed,
}

/// The folders (inode numbers) whose listings the kernel may keep: each one
/// opened with its listing kept since they were last all let go. Bounded by
/// the index's folders.
#[derive(Debug, Default)]
pub struct KeptListings {
    folders: Mutex<HashSet<u64>>,
    /// Those of them opened before the index was complete (see the module
    /// docs), until it is.
    early: Mutex<HashMap<u64, Early>>,
    /// Nothing follows the changes any more: no listing may be kept.
    stopped: AtomicBool,
    /// Folders too big to keep, listed (with the kernel keeping listings
    /// without opendir), and when they were last.
    too_big: Mutex<HashMap<u64, Instant>>,
    /// Wakes [`follow_changes`] for them.
    too_big_listed: tokio::sync::Notify,
}

impl KeptListings {
    /// A folder opened with its listing kept; `complete`: the index was
    /// complete when it was opened.
    pub(super) fn kept(&self, ino: u64, complete: bool) {
        if let Ok(mut s) = self.folders.lock() {
            s.insert(ino);
        }
        if !complete && let Ok(mut e) = self.early.lock() {
            e.entry(ino).or_insert(Early::Unlisted);
        }
    }

    /// A listing call for a folder too big to keep, which the kernel keeps
    /// anyway (no opendir): let go once no call came for [`TOO_BIG_QUIET`].
    pub(super) fn too_big(&self, ino: u64) {
        if let Ok(mut t) = self.too_big.lock() {
            t.insert(ino, Instant::now());
        }
        self.too_big_listed.notify_one();
    }

    /// The folders too big to keep that no listing call came for since
    /// [`TOO_BIG_QUIET`] before `now`, forgotten here (the caller lets them
    /// go), and whether others still wait.
    fn take_quiet_too_big(&self, now: Instant) -> (Vec<u64>, bool) {
        let Ok(mut t) = self.too_big.lock() else {
            return (Vec::new(), false);
        };
        let quiet: Vec<u64> = t
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) >= TOO_BIG_QUIET)
            .map(|(ino, _)| *ino)
            .collect();
        for ino in &quiet {
            t.remove(ino);
        }
        (quiet, !t.is_empty())
    }

    /// Whether a folder opened now may have its listing kept.
    pub(super) fn keeping(&self) -> bool {
        !self.stopped.load(Ordering::Acquire)
    }

    /// A listing call for folder `ino`, answered from `ix` as it is now: if
    /// the folder was opened before the index was complete, the listing's
    /// fingerprint is noted, and one that differs from the calls before marks
    /// it changed (the kernel may hold a mix).
    pub(super) fn listing(&self, ino: u64, ix: &Index) {
        let Ok(mut early) = self.early.lock() else {
            return;
        };
        let Some(state) = early.get_mut(&ino) else {
            return;
        };
        let now = id_of(ino)
            .filter(|&dir| ix.child_count(dir) <= super::KEPT_LISTING_MAX)
            .map(|dir| fingerprint(ix, dir));
        *state = match (*state, now) {
            (Early::Unlisted, Some(f)) => Early::Listed(f),
            (Early::Listed(was), Some(f)) if was == f => Early::Listed(f),
            _ => Early::Changed,
        };
    }

    /// Every folder kept so far, forgotten here (the caller lets them go).
    fn take(&self) -> Vec<u64> {
        if let Ok(mut e) = self.early.lock() {
            e.clear();
        }
        let mut all: Vec<u64> = self
            .folders
            .lock()
            .map(|mut s| s.drain().collect())
            .unwrap_or_default();
        if let Ok(mut t) = self.too_big.lock() {
            all.extend(t.drain().map(|(ino, _)| ino));
        }
        all
    }

    /// Once the index is complete: the folders opened before whose listing
    /// may differ from the index now, forgotten here (the caller lets them
    /// go; see [`stale_early`]). The rest stay kept.
    fn take_stale_early(&self, with_index: impl Fn(&mut dyn FnMut(&Index))) -> Vec<u64> {
        let early: Vec<(u64, Early)> = self
            .early
            .lock()
            .map(|mut e| e.drain().collect())
            .unwrap_or_default();
        let mut stale = Vec::new();
        // A folder at a time: the index is not held for all of them at once.
        for chunk in early.chunks(256) {
            with_index(&mut |ix| stale.extend(stale_early(ix, chunk)));
        }
        if let Ok(mut s) = self.folders.lock() {
            for ino in &stale {
                s.remove(ino);
            }
        }
        stale
    }
}

/// Of `early` (folders opened before the index was complete, and what the
/// kernel took of each), those whose kept listing may not be the folder in
/// `ix` now: listed differently twice, never listed (what the kernel holds
/// is unknown), gone, or with other names or ids now. `ix` is complete.
fn stale_early(ix: &Index, early: &[(u64, Early)]) -> Vec<u64> {
    early
        .iter()
        .filter(|(ino, state)| match (*state, id_of(*ino)) {
            (Early::Listed(f), Some(dir)) => {
                ix.get(dir)
                    .is_none_or(|e| e.kind != linkfs_proto::EntryKind::Dir)
                    || ix.child_count(dir) > super::KEPT_LISTING_MAX
                    || fingerprint(ix, dir) != f
            }
            _ => true,
        })
        .map(|(ino, _)| *ino)
        .collect()
}

/// The names and ids of folder `dir`'s listing, in order, hashed: what the
/// kernel keeps of a listing (attributes are not kept with it). Read as a
/// listing call reads them (names and kinds only): every listing call of a
/// folder opened before the index is complete makes one.
fn fingerprint(ix: &Index, dir: EntryId) -> u64 {
    let mut h = DefaultHasher::new();
    ix.children_named(dir, 0, |_, child, kind, name| {
        h.write_u32(child);
        h.write_u8(kind as u8);
        h.write_usize(name.len());
        h.write(name);
        true
    });
    h.finish()
}

fn id_of(ino: u64) -> Option<EntryId> {
    super::id_of(INodeNo(ino))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkfs_proto::{EntryKind, EntryView, Generation, OpView};

    fn put(ix: &mut Index, id: u32, parent: u32, kind: EntryKind, name: &str) {
        ix.apply(OpView::Upsert(EntryView {
            id: EntryId(id),
            parent: EntryId(parent),
            kind,
            name: name.as_bytes(),
            size: 1,
            mtime: 0,
            mode: 0o644,
            generation: Generation(id),
            target: b"",
        }))
        .unwrap();
    }

    /// The root, and folders a (1), b (2), c (3), d (4), each with two files.
    fn tree() -> Index {
        let mut ix = Index::new();
        put(&mut ix, 0, 0, EntryKind::Dir, "");
        for (dir, name) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
            put(&mut ix, dir, 0, EntryKind::Dir, name);
            put(&mut ix, 10 * dir, dir, EntryKind::File, "one");
            put(&mut ix, 10 * dir + 1, dir, EntryKind::File, "two");
        }
        ix
    }

    fn ino(id: u32) -> u64 {
        ino_of(id).0
    }

    fn stale(kept: &KeptListings, ix: &Index) -> Vec<u64> {
        let mut stale = kept.take_stale_early(|f| f(ix));
        stale.sort_unstable();
        stale
    }

    #[test]
    fn a_listing_kept_before_the_index_was_complete_is_let_go_then_only_if_its_folder_changed() {
        let mut ix = tree();
        let kept = KeptListings::default();
        for dir in 1..=4 {
            kept.kept(ino(dir), false);
        }
        // a, b and d listed by the kernel; c opened but never listed.
        for dir in [1, 2, 4] {
            kept.listing(ino(dir), &ix);
        }
        // Before the index is complete: a name added in b, one renamed in d.
        put(&mut ix, 22, 2, EntryKind::File, "three");
        put(&mut ix, 40, 4, EntryKind::File, "uno");
        assert_eq!(
            stale(&kept, &ix),
            vec![ino(2), ino(3), ino(4)],
            "b and d changed after they were listed, and what the kernel holds of c is unknown"
        );
        // a stays kept: the next letting go of everything includes it, and
        // nothing is left to check.
        assert_eq!(kept.take(), vec![ino(1)]);
        assert!(stale(&kept, &ix).is_empty());
    }

    #[test]
    fn a_folder_listed_twice_differently_before_the_index_was_complete_is_let_go_even_if_it_changed_back()
     {
        let mut ix = tree();
        let kept = KeptListings::default();
        kept.kept(ino(1), false);
        kept.listing(ino(1), &ix);
        put(&mut ix, 10, 1, EntryKind::File, "renamed");
        // The kernel lets its copy go and lists it again (memory pressure).
        kept.listing(ino(1), &ix);
        put(&mut ix, 10, 1, EntryKind::File, "one");
        assert_eq!(stale(&kept, &ix), vec![ino(1)]);
    }

    #[test]
    fn a_listing_kept_once_the_index_was_complete_is_left_to_the_recorded_changes() {
        let mut ix = tree();
        let kept = KeptListings::default();
        kept.kept(ino(1), true);
        kept.listing(ino(1), &ix);
        put(&mut ix, 12, 1, EntryKind::File, "three");
        assert!(stale(&kept, &ix).is_empty());
        assert_eq!(kept.take(), vec![ino(1)]);
    }

    #[test]
    fn a_kept_folder_that_grew_past_the_kept_bound_before_the_index_was_complete_is_let_go() {
        let mut ix = tree();
        let kept = KeptListings::default();
        kept.kept(ino(1), false);
        kept.listing(ino(1), &ix);
        // Opened while partly listed: the rest of its names came after.
        for n in 0..super::super::KEPT_LISTING_MAX as u32 {
            put(&mut ix, 1000 + n, 1, EntryKind::File, &format!("f{n}"));
        }
        assert_eq!(stale(&kept, &ix), vec![ino(1)]);
    }
}
