//! Settling changes before they are announced, sans-IO: a per-path debounce and
//! a periodic flush.
//!
//! ```text
//! watcher event (now, path) --> event()        a path is "settling" until no event
//! closed after writing      --> written()
//! renamed (from or to)       --> moved()      came for it for `debounce_ms`
//! the watcher lost events   --> overflow()
//! timer <---------------------- poll_timeout()
//! every `tick_ms` <------------ poll_ready(now) -> Ready::Paths | Ready::Rescan
//! ```
//!
//! A file being written produces a stream of events; announcing it on the first
//! one would send a half-written state and then many more. So a path is ready
//! once it has been quiet for `debounce_ms` (about 200 ms), and ready paths are
//! handed out together at most every `tick_ms` (about 100 ms): one burst of
//! changes becomes a few bounded batches, not a storm.
//!
//! A path that was closed after writing is handed out as `written`: its
//! contents count as changed whatever its size and times say (two writes in
//! one tick of a coarse file-system clock leave them alike).
//!
//! Bounds: at most `max_paths` paths settle at once. Beyond that (an unpacked
//! archive of a million files), or when the watcher says it lost events, the
//! settler stops tracking paths and asks for a rescan of everything once the
//! stream has been quiet for `debounce_ms`: nothing is lost, it is found by
//! comparing the folder with the index.
//!
//! A pending rescan waits for quiet at most `rescan_max_wait_ms` (10 s): it
//! waited for the whole share to be quiet, so after lost events one file
//! written without pause anywhere (a log, a download) kept the share from
//! following any change for as long as it was written. Not less: events lost
//! again during a rescan of a big share ask for another, and each compares
//! everything. A path alone still waits for its own quiet, however long: a
//! file being written is not shown half-done.

use std::collections::HashMap;

use crate::Millis;

/// What is ready to be looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// These paths (as the watcher named them, sorted) settled: look at each.
    /// `written` (sorted, a subset of `paths`) were closed after writing;
    /// `moved` (sorted, a subset) were renamed from or to.
    Paths {
        paths: Vec<Vec<u8>>,
        written: Vec<Vec<u8>>,
        moved: Vec<Vec<u8>>,
    },
    /// Too much changed, or events were lost: compare the whole folder.
    Rescan,
}

#[derive(Debug, Clone, Copy)]
pub struct SettleConfig {
    pub debounce_ms: u64,
    pub tick_ms: u64,
    pub max_paths: usize,
    /// The longest a pending rescan waits for quiet.
    pub rescan_max_wait_ms: u64,
}

impl Default for SettleConfig {
    fn default() -> Self {
        SettleConfig {
            debounce_ms: 200,
            tick_ms: 100,
            max_paths: 65_536,
            rescan_max_wait_ms: 10_000,
        }
    }
}

/// One path settling.
#[derive(Debug, Clone, Copy)]
struct Settling {
    latest: Millis,
    written: bool,
    moved: bool,
}

/// See the module docs.
#[derive(Debug)]
pub struct Settler {
    config: SettleConfig,
    /// Path -> its latest event's time, and whether it was closed after
    /// writing or renamed.
    settling: HashMap<Vec<u8>, Settling>,
    /// Events were lost or too many paths changed: rescan once quiet.
    rescan_since: Option<Millis>,
    /// The latest event of any path while a rescan is pending.
    last_event: Millis,
    next_tick: Option<Millis>,
}

impl Settler {
    pub fn new(config: SettleConfig) -> Self {
        Settler {
            config,
            settling: HashMap::new(),
            rescan_since: None,
            last_event: Millis(0),
            next_tick: None,
        }
    }

    /// Paths settling now.
    pub fn settling(&self) -> usize {
        self.settling.len()
    }

    /// Whether a rescan of everything is pending.
    pub fn rescan_pending(&self) -> bool {
        self.rescan_since.is_some()
    }

    fn arm_tick(&mut self, now: Millis) {
        if self.next_tick.is_none() {
            self.next_tick = Some(Millis(now.0 + self.config.tick_ms));
        }
    }

    /// Something happened at `path`.
    pub fn event(&mut self, now: Millis, path: &[u8]) {
        self.note(now, path, false);
    }

    /// The file at `path` was closed after writing: its contents changed.
    pub fn written(&mut self, now: Millis, path: &[u8]) {
        self.note(now, path, true);
    }

    /// Something was renamed from or to `path`: a folder there may be one
    /// that went away and came back, its sub-folders' watches dropped.
    pub fn moved(&mut self, now: Millis, path: &[u8]) {
        self.note(now, path, false);
        if let Some(p) = self.settling.get_mut(path) {
            p.moved = true;
        }
    }

    fn note(&mut self, now: Millis, path: &[u8], written: bool) {
        self.last_event = self.last_event.max(now);
        self.arm_tick(now);
        if self.rescan_since.is_some() {
            return;
        }
        if let Some(p) = self.settling.get_mut(path) {
            p.latest = now;
            p.written |= written;
            return;
        }
        if self.settling.len() >= self.config.max_paths {
            self.overflow(now);
            return;
        }
        self.settling.insert(
            path.to_vec(),
            Settling {
                latest: now,
                written,
                moved: false,
            },
        );
    }

    /// The watcher lost events (or too much changed): compare everything once
    /// the stream is quiet.
    pub fn overflow(&mut self, now: Millis) {
        self.last_event = self.last_event.max(now);
        self.rescan_since.get_or_insert(now);
        self.settling.clear();
        self.arm_tick(now);
    }

    /// When `poll_ready` should next be called.
    pub fn poll_timeout(&self) -> Option<Millis> {
        self.next_tick
    }

    /// What is ready at `now` (call at [`poll_timeout`](Self::poll_timeout)).
    pub fn poll_ready(&mut self, now: Millis) -> Option<Ready> {
        let tick = self.next_tick?;
        if now < tick {
            return None;
        }
        let debounce = self.config.debounce_ms;
        let quiet = |t: Millis| t.0.saturating_add(debounce) <= now.0;
        let ready = if let Some(since) = self.rescan_since {
            if quiet(self.last_event)
                || since.0.saturating_add(self.config.rescan_max_wait_ms) <= now.0
            {
                self.rescan_since = None;
                Some(Ready::Rescan)
            } else {
                None
            }
        } else {
            let mut paths: Vec<Vec<u8>> = Vec::new();
            let mut written: Vec<Vec<u8>> = Vec::new();
            let mut moved: Vec<Vec<u8>> = Vec::new();
            self.settling.retain(|p, s| {
                if quiet(s.latest) {
                    if s.written {
                        written.push(p.clone());
                    }
                    if s.moved {
                        moved.push(p.clone());
                    }
                    paths.push(p.clone());
                    false
                } else {
                    true
                }
            });
            paths.sort_unstable();
            written.sort_unstable();
            moved.sort_unstable();
            (!paths.is_empty()).then_some(Ready::Paths {
                paths,
                written,
                moved,
            })
        };
        self.next_tick = (!self.settling.is_empty() || self.rescan_since.is_some())
            .then_some(Millis(now.0 + self.config.tick_ms));
        ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settler() -> Settler {
        Settler::new(SettleConfig {
            debounce_ms: 200,
            tick_ms: 100,
            max_paths: 4,
            rescan_max_wait_ms: 10_000,
        })
    }

    fn paths(p: &[&[u8]]) -> Ready {
        Ready::Paths {
            paths: p.iter().map(|p| p.to_vec()).collect(),
            written: Vec::new(),
            moved: Vec::new(),
        }
    }

    #[test]
    fn a_path_closed_after_writing_is_handed_out_as_written() {
        let mut s = settler();
        s.event(Millis(0), b"a");
        s.written(Millis(10), b"a");
        s.event(Millis(20), b"a");
        s.event(Millis(20), b"b");
        let out = run(&mut s, 20, 2_000);
        assert_eq!(
            out,
            vec![(
                300,
                Ready::Paths {
                    paths: vec![b"a".to_vec(), b"b".to_vec()],
                    written: vec![b"a".to_vec()],
                    moved: Vec::new(),
                }
            )]
        );
    }

    /// Runs the settler's timer from `from` to `to`; returns what came out, with when.
    fn run(s: &mut Settler, from: u64, to: u64) -> Vec<(u64, Ready)> {
        let mut out = Vec::new();
        let mut now = from;
        while let Some(t) = s.poll_timeout() {
            now = now.max(t.0);
            if now > to {
                break;
            }
            if let Some(r) = s.poll_ready(Millis(now)) {
                out.push((now, r));
            }
        }
        out
    }

    #[test]
    fn a_path_is_ready_once_quiet_for_the_debounce() {
        let mut s = settler();
        // A file written for 500 ms: events every 50 ms.
        for t in (0..=500).step_by(50) {
            s.event(Millis(t), b"a.txt");
            assert!(s.poll_ready(Millis(t)).is_none() || t == 0);
        }
        let out = run(&mut s, 500, 2_000);
        assert_eq!(out.len(), 1, "{out:?}");
        let (at, ready) = &out[0];
        assert_eq!(*ready, paths(&[b"a.txt"]));
        assert!((700..=800).contains(at), "ready at {at} ms");
        assert_eq!(s.poll_timeout(), None, "nothing left: no timer");
    }

    #[test]
    fn ready_paths_come_out_together_on_a_tick() {
        let mut s = settler();
        s.event(Millis(10), b"a");
        s.event(Millis(20), b"a");
        s.event(Millis(30), b"b");
        let out = run(&mut s, 30, 1_000);
        // Ticks run from the first event: 110, 210, 310.
        assert_eq!(out, vec![(310, paths(&[b"a", b"b"]))]);
    }

    #[test]
    fn too_many_paths_become_one_rescan_after_the_burst() {
        let mut s = settler();
        for n in 0..10u64 {
            s.event(Millis(n * 10), format!("f{n}").as_bytes());
        }
        assert!(s.rescan_pending());
        assert_eq!(s.settling(), 0, "paths are no longer tracked");
        let out = run(&mut s, 100, 2_000);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].1, Ready::Rescan);
        assert!(
            out[0].0 >= 290,
            "only once the burst is quiet: {}",
            out[0].0
        );
        assert!(!s.rescan_pending());
    }

    #[test]
    fn lost_events_mean_a_rescan() {
        let mut s = settler();
        s.event(Millis(0), b"x");
        s.overflow(Millis(50));
        s.event(Millis(150), b"y");
        let out = run(&mut s, 150, 2_000);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1, Ready::Rescan);
        assert!(out[0].0 >= 350);
    }

    #[test]
    fn a_pending_rescan_runs_within_its_max_wait_while_a_file_keeps_changing() {
        let mut s = settler();
        s.overflow(Millis(0));
        let mut rescans = Vec::new();
        // A log written every 100 ms for 15 s.
        for t in (0..=15_000).step_by(100) {
            s.event(Millis(t), b"app.log");
            if let Some(Ready::Rescan) = s.poll_ready(Millis(t)) {
                rescans.push(t);
            }
        }
        assert_eq!(
            rescans,
            vec![10_000],
            "one rescan, 10 s after the lost events"
        );
        assert!(!s.rescan_pending());
    }

    #[test]
    fn a_path_that_never_goes_quiet_is_not_handed_out_half_written() {
        let mut s = settler();
        for t in (0..=5_000).step_by(100) {
            s.event(Millis(t), b"download.iso");
            assert_eq!(s.poll_ready(Millis(t)), None, "at {t} ms");
        }
        let out = run(&mut s, 5_000, 10_000);
        assert_eq!(out.len(), 1);
        assert!(out[0].0 >= 5_200, "once quiet: {}", out[0].0);
    }
}
