//! The whole receiving lifecycle, natively, in simulated time: a [`Visit`]
//! driven by a shell that carries only its IO (a modelled store, data links
//! that open, fail, hang or drop, a sharer that leaves and comes back). The
//! reconnect, grace and give-up cases here used to be reachable only from a
//! browser test.

mod sim;

use std::collections::HashMap;

use linkfs_core::visit::{FIRST_FRAMES, FIRST_PARTS, FIRST_SCREEN_WAIT_MS};
use linkfs_core::*;
use linkfs_proto::{EntryId, EntryKind};
use sim::*;

/// How a connect attempt goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The link opens after a few milliseconds.
    Open,
    /// The attempt fails after a few milliseconds, this way.
    Fail(FailureKind),
    /// Nothing ever comes back.
    Hang,
}

/// The modelled store: state, snapshot parts, batch frames by first sequence.
#[derive(Default, Clone)]
struct Store {
    state: Option<StoredState>,
    parts: Vec<Vec<u8>>,
    frames: Vec<(u64, Vec<u8>)>,
    writes: u32,
    snapshots: u32,
    /// Writes fail with these words.
    failing: Option<String>,
}

impl Store {
    fn load(&self, req: LoadRequest) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        match req {
            LoadRequest::First { parts, frames } => (
                self.parts.iter().take(parts as usize).cloned().collect(),
                self.frames
                    .iter()
                    .take(frames as usize)
                    .map(|(_, f)| f.clone())
                    .collect(),
            ),
            LoadRequest::Parts { from_part, count } => (
                self.parts
                    .iter()
                    .skip(from_part as usize)
                    .take(count as usize)
                    .cloned()
                    .collect(),
                Vec::new(),
            ),
            LoadRequest::Rest {
                from_part,
                from_seq,
            } => (
                from_part.map_or(Vec::new(), |p| {
                    self.parts[(p as usize).min(self.parts.len())..].to_vec()
                }),
                self.frames
                    .iter()
                    .filter(|(s, _)| *s >= from_seq.0)
                    .map(|(_, f)| f.clone())
                    .collect(),
            ),
        }
    }
}

const CONNECT_MS: u64 = 5;

/// A shell around a visit: it does what the outputs say and records what the
/// user would see.
struct Shell {
    visit: Visit<Vec<u8>>,
    now: u64,
    sharer: Sharer,
    model: LinkModel,
    sender: SenderConfig,
    net: Option<Net>,
    /// How the next attempts go (the last one repeats).
    answers: Vec<Answer>,
    /// An attempt under way: when it answers, and how.
    attempt: Option<(u64, Answer)>,
    store: Store,
    snapshot_parts: Vec<Vec<u8>>,
    work: bool,
    deadline: Option<u64>,
    statuses: Vec<(u64, VisitStatus)>,
    connects: Vec<u64>,
    close_links: u32,
    /// Frames sent on the link right before each CloseLink (the goodbye).
    sent_before_close: Vec<Vec<u8>>,
    last_sent: Vec<Vec<u8>>,
    reads: HashMap<ReadHandle, Vec<u8>>,
    done: Vec<ReadHandle>,
    failed: Vec<(ReadHandle, ReadFailure)>,
    changes: Vec<IndexChanges>,
    resets: u32,
    restored: u32,
    storage_failures: Vec<String>,
    /// What each step of work cost in simulated ms (per clock call).
    clock_step: u64,
    /// Reads of a snapshot's rest held here, unanswered, instead of answered
    /// at once (`answer_held_loads` answers them, oldest first).
    held_loads: Option<Vec<LoadRequest>>,
    /// Every read the visit asked storage for, in order.
    loads: Vec<LoadRequest>,
}

impl Shell {
    fn new(sharer: Sharer, storage: Storage, store: Store) -> Shell {
        Self::answering(sharer, storage, store, vec![Answer::Open])
    }

    /// A shell whose connect attempts go as `answers` say (the last repeats).
    fn answering(sharer: Sharer, storage: Storage, store: Store, answers: Vec<Answer>) -> Shell {
        let config = VisitConfig {
            storage,
            ..VisitConfig::default()
        };
        Self::configured(sharer, config, store, answers)
    }

    fn configured(
        sharer: Sharer,
        config: VisitConfig,
        store: Store,
        answers: Vec<Answer>,
    ) -> Shell {
        Self::build(sharer, config, store, answers, false)
    }

    fn build(
        sharer: Sharer,
        config: VisitConfig,
        store: Store,
        answers: Vec<Answer>,
        hold_loads: bool,
    ) -> Shell {
        let mut shell = Shell {
            visit: Visit::new(Millis(0), config, 7),
            now: 0,
            sharer,
            model: LinkModel::PERFECT,
            net: None,
            answers,
            sender: SenderConfig::default(),
            attempt: None,
            store,
            snapshot_parts: Vec::new(),
            work: false,
            deadline: None,
            statuses: Vec::new(),
            connects: Vec::new(),
            close_links: 0,
            sent_before_close: Vec::new(),
            last_sent: Vec::new(),
            reads: HashMap::new(),
            done: Vec::new(),
            failed: Vec::new(),
            changes: Vec::new(),
            resets: 0,
            restored: 0,
            storage_failures: Vec::new(),
            clock_step: 1,
            held_loads: hold_loads.then(Vec::new),
            loads: Vec::new(),
        };
        shell.outputs();
        shell
    }

    /// [`configured`](Self::configured), its reads of a snapshot's rest held
    /// unanswered from the start (see `answer_held_loads`).
    fn holding_loads(sharer: Sharer, config: VisitConfig, store: Store) -> Shell {
        Self::build(sharer, config, store, vec![Answer::Open], true)
    }

    fn status(&self) -> VisitStatus {
        self.visit.status().clone()
    }

    /// Answers the reads held back (`held_loads`), oldest first.
    fn answer_held_loads(&mut self) {
        let held = self.held_loads.replace(Vec::new()).unwrap_or_default();
        for req in held {
            let (parts, frames) = self.store.load(req);
            self.visit.loaded_rest(parts, frames);
        }
        self.outputs();
    }

    /// Does what the visit says until it says to wait.
    fn outputs(&mut self) {
        for _ in 0..1_000_000 {
            match self.visit.poll_output() {
                Output::Transmit(f) | Output::TransmitBulk(f) => {
                    self.last_sent.push(f.clone());
                    if self.last_sent.len() > 4 {
                        self.last_sent.remove(0);
                    }
                    if let Some(net) = &mut self.net {
                        net.to_sender.send(&mut net.rng, self.now, f);
                    }
                }
                Output::Connect => {
                    self.connects.push(self.now);
                    let answer = if self.answers.len() > 1 {
                        self.answers.remove(0)
                    } else {
                        self.answers[0]
                    };
                    self.attempt = Some((self.now + CONNECT_MS, answer));
                }
                Output::UploadRead { .. } => panic!("this harness adds no files"),
                Output::CloseLink => {
                    self.close_links += 1;
                    self.sent_before_close = std::mem::take(&mut self.last_sent);
                    self.net = None;
                    self.attempt = None;
                }
                Output::Load(req) => {
                    self.loads.push(req);
                    if let Some(held) = &mut self.held_loads
                        && !matches!(req, LoadRequest::First { .. })
                    {
                        held.push(req);
                        continue;
                    }
                    let (parts, frames) = self.store.load(req);
                    let mut t = self.now;
                    let step = self.clock_step;
                    let mut clock = move || {
                        t += step;
                        Millis(t)
                    };
                    match req {
                        LoadRequest::First { .. } => {
                            self.visit
                                .loaded(&mut clock, self.store.state, parts, frames)
                        }
                        LoadRequest::Parts { .. } | LoadRequest::Rest { .. } => {
                            self.visit.loaded_rest(parts, frames)
                        }
                    }
                }
                Output::Store(job) => {
                    let result = match &self.store.failing {
                        Some(words) => Err(StorageError::new(words.clone())),
                        None => {
                            match job {
                                StoreJob::Batches(w) => {
                                    for op in w.ops {
                                        match op {
                                            StoreOp::Clear => {
                                                self.store.frames.clear();
                                                self.store.parts.clear();
                                            }
                                            StoreOp::Batch { first, frame } => {
                                                self.store.frames.push((first.0, frame))
                                            }
                                        }
                                    }
                                    self.store.state = Some(w.state);
                                }
                                StoreJob::Snapshot(state) => {
                                    let next = state.snapshot.expect("a snapshot state").next;
                                    self.store.parts = std::mem::take(&mut self.snapshot_parts);
                                    self.store.frames.retain(|(s, _)| *s >= next.0);
                                    self.store.state = Some(state);
                                    self.store.snapshots += 1;
                                }
                            }
                            self.store.writes += 1;
                            Ok(())
                        }
                    };
                    self.visit.stored(Millis(self.now), result);
                }
                Output::SnapshotPart(p) => self.snapshot_parts.push(p),
                Output::Work => self.work = true,
                Output::Event(e) => self.event(e),
                Output::Timeout(t) => {
                    self.deadline = t.map(|m| m.0);
                    return;
                }
            }
        }
        panic!("the visit never said to wait");
    }

    fn event(&mut self, e: VisitEvent) {
        match e {
            VisitEvent::Status(s) => self.statuses.push((self.now, s)),
            VisitEvent::Read(ReadEvent::Data { handle, data, .. }) => self
                .reads
                .entry(handle)
                .or_default()
                .extend_from_slice(&data),
            VisitEvent::Read(ReadEvent::Done { handle }) => self.done.push(handle),
            VisitEvent::Read(ReadEvent::Failed { handle, error }) => {
                self.failed.push((handle, error))
            }
            VisitEvent::Changed(c) => self.changes.push(c),
            VisitEvent::Reset => self.resets += 1,
            VisitEvent::Restored => self.restored += 1,
            VisitEvent::StorageFailed(w) => self.storage_failures.push(w),
            VisitEvent::Refused(e) => panic!("an honest sharer's operation was refused: {e}"),
            other => panic!("an event this shell does not know: {other:?}"),
        }
    }

    /// Runs for `ms` of simulated time (or until nothing at all is left to do).
    fn run(&mut self, ms: u64) {
        let end = self.now + ms;
        while self.now <= end {
            let now = Millis(self.now);
            if self.work {
                self.work = false;
                let mut t = self.now;
                let step = self.clock_step;
                let mut clock = move || {
                    t += step;
                    Millis(t)
                };
                self.visit.work(&mut clock);
                self.outputs();
                continue;
            }
            if let Some((at, answer)) = self.attempt
                && at <= self.now
            {
                self.attempt = None;
                match answer {
                    Answer::Open => {
                        let mut net = Net::new(self.now ^ 0x5eed, self.model);
                        net.now = self.now;
                        self.net = Some(net);
                        self.sharer.session = SenderSession::new(self.sender.clone());
                        self.visit.link_opened(now);
                    }
                    Answer::Fail(kind) => {
                        self.visit
                            .link_failed(now, kind, format!("the attempt failed ({kind:?})"))
                    }
                    Answer::Hang => self.attempt = Some((u64::MAX, Answer::Hang)),
                }
                self.outputs();
            }
            if let Some(net) = &mut self.net {
                for f in net.to_sender.due(self.now) {
                    let _ = self
                        .sharer
                        .session
                        .handle_frame(now, &f, &self.sharer.index);
                }
                self.sharer.session.handle_timeout(now);
                serve_io(&mut self.sharer);
                while let Some(f) = self.sharer.session.poll_transmit(now, &self.sharer.index) {
                    net.to_receiver.send(&mut net.rng, self.now, f);
                    serve_io(&mut self.sharer);
                }
                let frames = net.to_receiver.due(self.now);
                for f in frames {
                    self.visit.handle_frame(now, &f, &f);
                    self.outputs();
                }
            }
            if self.deadline.is_some_and(|d| d <= self.now) {
                self.deadline = None;
                self.visit.handle_timeout(now);
                self.outputs();
            }
            if self.work {
                continue;
            }
            let busy = self.net.as_ref().is_some_and(|n| {
                n.to_sender.next_delivery().is_some() || n.to_receiver.next_delivery().is_some()
            });
            let next = [
                self.deadline,
                self.attempt.map(|(t, _)| t),
                self.net
                    .as_ref()
                    .and_then(|n| n.to_receiver.next_delivery()),
                self.net.as_ref().and_then(|n| n.to_sender.next_delivery()),
                self.net
                    .as_ref()
                    .and(self.sharer.session.poll_timeout())
                    .map(|m| m.0),
            ]
            .into_iter()
            .flatten()
            .filter(|t| *t > self.now)
            .min();
            self.now = match next {
                Some(t) => t.min(end + 1),
                None if busy => self.now + 1,
                None => end + 1,
            };
            if let Some(net) = &mut self.net {
                net.now = self.now;
            }
        }
    }

    /// Drops the link before anything came, so the next one uses `self.sender`.
    fn drop_link_and_reconnect_fresh(&mut self) {
        self.run(CONNECT_MS);
        self.drop_link();
    }

    /// Drops the data link as a network would (the sharer's session ends with it).
    fn drop_link(&mut self) {
        assert!(self.net.is_some(), "no link to drop");
        self.net = None;
        self.visit.link_closed(Millis(self.now));
        self.outputs();
    }

    fn read_whole(&mut self, entry: EntryId) -> ReadHandle {
        let size = self.sharer.files[&entry].len() as u64;
        let h = self
            .visit
            .start_read(entry, None, 0, size)
            .expect("the read starts");
        self.outputs();
        h
    }
}

fn serve_io(sharer: &mut Sharer) {
    while let Some(io) = sharer.session.poll_io() {
        let f = &sharer.files[&io.entry];
        let data = f[io.offset as usize..(io.offset + u64::from(io.len)) as usize].to_vec();
        sharer.session.handle_io(&io, Ok(data));
    }
}

fn sharer(dirs: u32, files_per_dir: u32, size: u64) -> Sharer {
    let (ix, files) = build_tree(dirs, files_per_dir, 0, |_| size);
    Sharer::new(ix, files, SenderConfig::default())
}

fn ended(shell: &Shell) -> Option<(EndReason, bool)> {
    match shell.status() {
        VisitStatus::Ended { reason, browsable } => Some((reason, browsable)),
        _ => None,
    }
}

fn first_file(shell: &Shell) -> EntryId {
    let mut ids: Vec<EntryId> = shell.sharer.files.keys().copied().collect();
    ids.sort();
    ids[0]
}

#[test]
fn a_first_visit_connects_fills_the_index_and_says_connected() {
    let mut shell = Shell::new(sharer(20, 100, 10), Storage::Memory, Store::default());
    assert_eq!(
        shell.connects,
        vec![0],
        "a visit without storage connects at once"
    );
    shell.run(5_000);
    assert_eq!(shell.status(), VisitStatus::Connected);
    assert!(shell.visit.progress().complete);
    assert_same_index(&shell.sharer.index, shell.visit.index());
    assert_eq!(shell.store.writes, 0, "nothing is stored without storage");
}

#[test]
fn a_lost_link_is_followed_by_a_new_one_and_a_read_continues_at_its_byte() {
    let mut shell = Shell::new(sharer(2, 3, 24 << 20), Storage::Memory, Store::default());
    shell.run(2_000);
    let file = first_file(&shell);
    let h = shell.read_whole(file);
    // Part of the file, then the link drops.
    for _ in 0..400 {
        shell.run(1);
        if shell.reads.get(&h).is_some_and(|b| b.len() > 4 << 20) {
            break;
        }
    }
    let before = shell.reads.get(&h).map_or(0, Vec::len);
    assert!(
        before > 0 && before < 24 << 20,
        "{before} bytes before the drop"
    );
    shell.drop_link();
    assert!(
        matches!(
            shell.status(),
            VisitStatus::Reconnecting { attempts: 0, .. }
        ),
        "{:?}",
        shell.status()
    );
    let lost_at = shell.now;
    shell.run(60_000);
    assert_eq!(shell.connects.len(), 2);
    let waited = shell.connects[1] - lost_at;
    assert!(
        (200..=400).contains(&waited),
        "reconnected after {waited} ms"
    );
    assert_eq!(shell.status(), VisitStatus::Connected);
    assert_eq!(shell.done, vec![h], "failed: {:?}", shell.failed);
    assert_eq!(
        shell.reads[&h], shell.sharer.files[&file],
        "the bytes equal the file's"
    );
}

#[test]
fn a_sharer_that_is_gone_is_waited_for_a_minute_then_the_visit_ends_with_the_sharer_gone() {
    let mut shell = Shell::new(sharer(3, 3, 1_000), Storage::Memory, Store::default());
    shell.run(2_000);
    let file = first_file(&shell);
    let size = shell.sharer.files[&file].len() as u64;
    shell.answers = vec![Answer::Fail(FailureKind::SharerGone)];
    shell.drop_link();
    // A read asked for while reconnecting waits.
    let h = shell
        .visit
        .start_read(file, None, 0, size)
        .expect("a read waits");
    shell.outputs();
    let lost_at = shell.now;
    shell.run(59_000);
    assert!(
        ended(&shell).is_none(),
        "ended within the grace: {:?}",
        shell.status()
    );
    assert!(shell.failed.is_empty());
    shell.run(30_000);
    let (reason, browsable) = ended(&shell).expect("the visit ended");
    assert_eq!(reason.kind(), FailureKind::SharerGone, "{reason}");
    assert!(browsable, "what was received stays browsable");
    let end_at = shell.statuses.last().expect("a status").0;
    assert!(
        (60_000..75_000).contains(&(end_at - lost_at)),
        "ended {} ms after the loss",
        end_at - lost_at
    );
    assert_eq!(shell.failed.len(), 1);
    assert_eq!(shell.failed[0].0, h);
    assert!(
        shell.failed[0].1.to_string().contains("stopped sharing"),
        "{}",
        shell.failed[0].1
    );
    // The index is still there to browse.
    assert_same_index(&shell.sharer.index, shell.visit.index());
    let attempts = shell.connects.len();
    shell.run(600_000);
    assert_eq!(shell.connects.len(), attempts, "no attempt after the end");
}

#[test]
fn a_sharer_restarting_within_the_grace_is_reconnected_and_the_visit_resumes() {
    let mut shell = Shell::new(sharer(3, 3, 1_000), Storage::Memory, Store::default());
    shell.run(2_000);
    shell.answers = vec![
        Answer::Fail(FailureKind::SharerGone),
        Answer::Fail(FailureKind::SharerGone),
        Answer::Fail(FailureKind::SharerGone),
        Answer::Fail(FailureKind::Unreachable),
        Answer::Open,
    ];
    shell.drop_link();
    shell.run(60_000);
    assert_eq!(shell.status(), VisitStatus::Connected);
    assert_eq!(shell.connects.len(), 6);
    let reconnecting: Vec<u32> = shell
        .statuses
        .iter()
        .filter_map(|(_, s)| match s {
            VisitStatus::Reconnecting { attempts, .. } => Some(*attempts),
            _ => None,
        })
        .collect();
    assert_eq!(
        reconnecting,
        vec![0, 1, 2, 3, 4],
        "the status counts the failed attempts"
    );
    // The backoff doubles: 250, 500, 1000, 2000, 4000 ms (with a little jitter).
    let gaps: Vec<u64> = shell.connects.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[2] > gaps[1] && gaps[3] > gaps[2], "gaps {gaps:?}");
    assert_same_index(&shell.sharer.index, shell.visit.index());
}

#[test]
fn five_minutes_of_failed_attempts_end_the_visit_unreachable_with_the_last_words() {
    let mut shell = Shell::new(sharer(3, 3, 1_000), Storage::Memory, Store::default());
    shell.run(2_000);
    shell.answers = vec![Answer::Fail(FailureKind::Unreachable)];
    shell.drop_link();
    let lost_at = shell.now;
    shell.run(290_000);
    assert!(ended(&shell).is_none());
    shell.run(30_000);
    let (reason, browsable) = ended(&shell).expect("given up");
    assert_eq!(reason.kind(), FailureKind::Unreachable);
    assert!(browsable);
    let words = reason.to_string();
    assert!(
        words.contains("could not reconnect to the sharer") && words.contains("Unreachable"),
        "{words}"
    );
    let end_at = shell.statuses.last().expect("a status").0;
    assert!(
        (300_000..312_000).contains(&(end_at - lost_at)),
        "{}",
        end_at - lost_at
    );
}

#[test]
fn a_link_found_not_valid_while_reconnecting_ends_the_visit_at_once() {
    let mut shell = Shell::new(sharer(3, 3, 1_000), Storage::Memory, Store::default());
    shell.run(2_000);
    shell.answers = vec![Answer::Fail(FailureKind::InvalidLink)];
    shell.drop_link();
    shell.run(2_000);
    let (reason, _) = ended(&shell).expect("ended");
    assert_eq!(reason.kind(), FailureKind::InvalidLink);
    assert_eq!(shell.connects.len(), 2, "one attempt, no more");
}

#[test]
fn the_first_attempt_failing_ends_the_visit_with_its_own_words_and_nothing_to_browse() {
    let mut shell = Shell::answering(
        sharer(3, 3, 1_000),
        Storage::Memory,
        Store::default(),
        vec![Answer::Fail(FailureKind::SharerGone)],
    );
    shell.run(600_000);
    let (reason, browsable) = ended(&shell).expect("ended");
    assert_eq!(reason.kind(), FailureKind::SharerGone);
    assert_eq!(reason.to_string(), "the attempt failed (SharerGone)");
    assert!(!browsable);
    assert_eq!(shell.connects.len(), 1, "the first failure is not retried");
}

#[test]
fn an_attempt_that_never_answers_is_dropped_after_30_s() {
    let mut shell = Shell::answering(
        sharer(3, 3, 1_000),
        Storage::Memory,
        Store::default(),
        vec![Answer::Hang],
    );
    shell.run(29_000);
    assert!(matches!(shell.status(), VisitStatus::Connecting { .. }));
    shell.run(2_000);
    let (reason, _) = ended(&shell).expect("ended");
    assert_eq!(reason.kind(), FailureKind::Unreachable);
    assert!(reason.to_string().contains("within 30 seconds"), "{reason}");
    assert_eq!(shell.close_links, 1, "the hanging attempt is dropped");
}

#[test]
fn the_sharers_goodbye_ends_the_visit_and_closes_the_link() {
    let mut shell = Shell::new(sharer(3, 3, 1_000), Storage::Memory, Store::default());
    shell.run(2_000);
    shell.sharer.session.close("the sharer stopped sharing");
    shell.run(1_000);
    let (reason, browsable) = ended(&shell).expect("ended");
    assert!(matches!(reason, EndReason::SharerGoodbye(_)), "{reason:?}");
    assert!(browsable);
    assert_eq!(shell.close_links, 1);
    assert_eq!(
        shell.connects.len(),
        1,
        "a goodbye is not followed by an attempt"
    );
}

#[test]
fn closing_sends_a_goodbye_then_closes_the_link() {
    let mut shell = Shell::new(sharer(3, 3, 1_000), Storage::Memory, Store::default());
    shell.run(2_000);
    shell.last_sent.clear();
    shell.visit.close(Millis(shell.now));
    shell.outputs();
    assert_eq!(shell.close_links, 1);
    let goodbye = shell
        .sent_before_close
        .last()
        .expect("a frame before the close");
    assert!(
        matches!(
            linkfs_proto::ReceiverToSender::decode(goodbye),
            Ok(linkfs_proto::ReceiverToSender::Goodbye(_))
        ),
        "the last frame before the close is a goodbye"
    );
    assert!(matches!(ended(&shell), Some((EndReason::ClosedHere, true))));
}

#[test]
fn without_reconnecting_a_lost_link_ends_the_visit() {
    let mut shell = Shell::new(sharer(3, 3, 1_000), Storage::Memory, Store::default());
    let config = VisitConfig {
        reconnect: false,
        ..VisitConfig::default()
    };
    shell.visit = Visit::new(Millis(0), config, 1);
    shell.connects.clear();
    shell.outputs();
    shell.run(2_000);
    shell.drop_link();
    let (reason, _) = ended(&shell).expect("ended");
    assert_eq!(reason, EndReason::ConnectionLost);
}

#[test]
fn changes_after_the_index_is_complete_name_the_folders_to_list_again() {
    let mut shell = Shell::new(sharer(4, 5, 100), Storage::Memory, Store::default());
    shell.run(2_000);
    assert!(shell.changes.is_empty(), "the first fill is not a change");
    let dir = |shell: &Shell, name: &str| shell.sharer.index.clone_lookup(name);
    let (d1, d2) = (dir(&shell, "dir 0001"), dir(&shell, "dir 0002"));
    let moved = EntryId(shell.sharer.index.children(d1).next().unwrap());
    let v = shell.sharer.index.view(moved).expect("a file");
    let (name, kind, size, mtime, mode) = (v.name.to_vec(), v.kind, v.size, v.mtime, v.mode);
    let e = NewEntry {
        id: moved,
        parent: d2,
        kind,
        name: &name,
        size,
        mtime,
        mtime_nsec: 0,
        mode,
        target: b"",
        dev: 1,
        ino: u64::from(moved.0),
        ctime_ns: 0,
    };
    shell.sharer.index.update(moved, &e).expect("a move");
    shell.run(2_000);
    let folders: Vec<EntryId> = shell
        .changes
        .iter()
        .flat_map(IndexChanges::folders)
        .collect();
    assert!(
        folders.contains(&d1) && folders.contains(&d2),
        "{folders:?}"
    );
    assert_same_index(&shell.sharer.index, shell.visit.index());
}

trait Lookup {
    fn clone_lookup(&self, name: &str) -> EntryId;
}

impl Lookup for ShareIndex {
    fn clone_lookup(&self, name: &str) -> EntryId {
        (0..self.next_id().0)
            .map(EntryId)
            .find(|id| self.view(*id).is_some_and(|v| v.name == name.as_bytes()))
            .expect("a folder of that name")
    }
}

/// A first visit with storage, then a reopened one: the stored index shows in
/// steps (the first folders before the rest), reads asked for meanwhile wait,
/// and the sharer sends nothing it had sent before.
#[test]
fn a_reopened_visit_restores_in_steps_and_resumes_where_it_was() {
    let mut first = Shell::new(sharer(100, 1_000, 10), Storage::Kept, Store::default());
    first.run(20_000);
    assert!(first.visit.progress().complete);
    let stored = first.store.clone();
    assert!(
        stored.frames.len() > 2 * linkfs_core::visit::FIRST_FRAMES as usize,
        "{} frames",
        stored.frames.len()
    );
    assert_eq!(stored.state.map(|s| s.complete), Some(true));
    let total = first.sharer.index.entries();
    assert_eq!(first.visit.progress().persisted, total);

    let sharer = first.sharer;
    let mut again = Shell::new(sharer, Storage::Kept, stored);
    // The first step applied only part of it; the visit connects meanwhile.
    let p = again.visit.progress();
    assert!(p.restoring, "{p:?}");
    assert!(
        p.received > 0 && p.received < total,
        "first step: {} of {total}",
        p.received
    );
    assert_eq!(
        again.connects.len(),
        1,
        "connecting starts after the first step"
    );
    // A folder of the first screen lists already.
    assert!(again.visit.index_mut().child_count(EntryId(0)) > 0);
    // A read asked for now waits for the restore.
    let file = first_file(&again);
    let h = again.read_whole(file);
    again.visit.listed(Millis(again.now));
    again.outputs();
    again.run(10_000);
    assert_eq!(again.restored, 1);
    let p = again.visit.progress();
    assert!(!p.restoring && p.complete, "{p:?}");
    assert_eq!(p.from_cache, total);
    assert_eq!(
        again.sharer.session.stats().ops_sent,
        0,
        "nothing was sent again"
    );
    assert_eq!(again.done, vec![h]);
    assert_eq!(again.reads[&h], again.sharer.files[&file]);
    assert_same_index(&again.sharer.index, again.visit.index());
}

#[test]
fn a_read_of_an_entry_not_in_the_restored_index_fails_with_the_reason() {
    let mut first = Shell::new(sharer(100, 1_000, 10), Storage::Kept, Store::default());
    first.run(20_000);
    let stored = first.store.clone();
    let mut again = Shell::new(first.sharer, Storage::Kept, stored);
    let h = again
        .visit
        .start_read(EntryId(9_999_999), None, 0, 1)
        .expect("while restoring, a read waits");
    again.visit.listed(Millis(0));
    again.run(5_000);
    assert_eq!(again.failed.len(), 1);
    assert_eq!(again.failed[0].0, h);
    assert!(
        again.failed[0].1.to_string().contains("not in the index"),
        "{}",
        again.failed[0].1
    );
}

#[test]
fn a_snapshot_is_built_in_steps_and_a_reopen_starts_from_it() {
    let mut first = Shell::new(sharer(40, 1_000, 1), Storage::Kept, Store::default());
    // Small batches: enough of them to make a snapshot worth it.
    first.sender = SenderConfig {
        batch_cap: 4 * 1024,
        window_bytes: 64 * 1024,
        ..SenderConfig::default()
    };
    first.drop_link_and_reconnect_fresh();
    first.run(20_000);
    assert!(first.visit.progress().complete);
    assert_eq!(
        first.store.snapshots, 1,
        "one snapshot once the batches paused"
    );
    assert!(first.store.parts.len() > 1);
    let stored = first.store.clone();
    let mut again = Shell::new(first.sharer, Storage::Kept, stored);
    again.visit.listed(Millis(0));
    again.run(10_000);
    assert!(again.visit.opened_from_snapshot());
    assert_eq!(again.sharer.session.stats().ops_sent, 0);
    assert_same_index(&again.sharer.index, again.visit.index());
}

/// A first visit of `dirs` x 1,000 files that ends with one snapshot stored.
fn snapshotted(dirs: u32) -> Shell {
    let mut first = Shell::new(sharer(dirs, 1_000, 1), Storage::Kept, Store::default());
    // Small batches: enough of them to make a snapshot worth it.
    first.sender = SenderConfig {
        batch_cap: 4 * 1024,
        window_bytes: 64 * 1024,
        ..SenderConfig::default()
    };
    first.drop_link_and_reconnect_fresh();
    first.run(60_000);
    assert!(first.visit.progress().complete);
    assert_eq!(
        first.store.snapshots, 1,
        "one snapshot once the batches paused"
    );
    first
}

#[test]
fn a_big_snapshot_is_read_in_chunks_ahead_of_applying_it() {
    let first = snapshotted(100);
    let stored = first.store.clone();
    let parts = stored.parts.len() as u32;
    assert!(parts >= FIRST_PARTS + 3, "{parts} parts");
    let config = VisitConfig {
        storage: Storage::Kept,
        restore_chunk_parts: 2,
        ..VisitConfig::default()
    };
    let mut again = Shell::configured(first.sharer, config, stored.clone(), vec![Answer::Open]);
    // Applying waits for the first screen; reading does not, a chunk ahead.
    assert!(again.visit.progress().restoring);
    let first_read = LoadRequest::First {
        parts: FIRST_PARTS,
        frames: FIRST_FRAMES,
    };
    let chunk = |from_part| LoadRequest::Parts {
        from_part,
        count: 2,
    };
    assert_eq!(again.loads, vec![first_read, chunk(FIRST_PARTS)]);
    again.visit.listed(Millis(again.now));
    again.outputs();
    again.run(10_000);
    assert!(again.visit.opened_from_snapshot());
    assert!(!again.visit.progress().restoring);
    // Every part read once, in order, a chunk at a time; the batches after
    // the snapshot with the last.
    let mut want = vec![first_read];
    let mut from = FIRST_PARTS;
    while parts - from > 2 {
        want.push(chunk(from));
        from += 2;
    }
    want.push(LoadRequest::Rest {
        from_part: Some(from),
        from_seq: stored
            .state
            .and_then(|s| s.snapshot)
            .map(|s| s.next)
            .unwrap(),
    });
    assert_eq!(again.loads, want);
    assert_eq!(
        again.sharer.session.stats().ops_sent,
        0,
        "nothing sent again"
    );
    assert_same_index(&again.sharer.index, again.visit.index());
}

/// Where the shell unseals parts on another thread, two reads are out at
/// once: the next chunk is asked for before the one before it is answered,
/// never more than two, and answers taken in order rebuild the same index.
#[test]
fn with_two_reads_ahead_the_next_chunk_is_asked_for_before_the_last_is_answered() {
    let first = snapshotted(100);
    let stored = first.store.clone();
    let parts = stored.parts.len() as u32;
    assert!(parts >= FIRST_PARTS + 5, "{parts} parts");
    let config = VisitConfig {
        storage: Storage::Kept,
        restore_chunk_parts: 2,
        restore_reads_ahead: 2,
        ..VisitConfig::default()
    };
    let mut again = Shell::holding_loads(first.sharer, config, stored);
    let chunk = |from_part| LoadRequest::Parts {
        from_part,
        count: 2,
    };
    // Once the first parts are applied, and without an answer, two chunks
    // are asked for, and no third.
    again.visit.shown(Millis(again.now));
    again.outputs();
    again.run(100);
    assert_eq!(
        again.held_loads.as_deref(),
        Some(&[chunk(FIRST_PARTS), chunk(FIRST_PARTS + 2)][..])
    );
    let mut rounds = 0;
    while again.visit.progress().restoring {
        let out = again.held_loads.as_ref().map_or(0, Vec::len);
        assert!(out <= 2, "{out} reads out at once");
        again.answer_held_loads();
        again.run(50);
        rounds += 1;
        assert!(rounds < 1_000, "the restore never ends");
    }
    assert!(again.visit.opened_from_snapshot());
    assert_eq!(
        again.sharer.session.stats().ops_sent,
        0,
        "nothing sent again"
    );
    assert_same_index(&again.sharer.index, again.visit.index());
}

/// A page that drew its first screen from a folder it kept (asking the index
/// nothing) says so, and the restore goes on then, not when the wait for a
/// first listing runs out.
#[test]
fn a_restore_waiting_for_the_first_screen_goes_on_once_the_page_says_it_is_shown() {
    let first = snapshotted(100);
    let total = first.sharer.index.entries();
    let stored = first.store.clone();
    let config = VisitConfig {
        storage: Storage::Kept,
        restore_chunk_parts: 2,
        ..VisitConfig::default()
    };
    let mut again = Shell::configured(first.sharer, config, stored, vec![Answer::Open]);
    let opened_at = again.now;
    again.run(FIRST_SCREEN_WAIT_MS / 2);
    let p = again.visit.progress();
    assert!(p.restoring, "{p:?}");
    // The first parts and the chunk after them were read; nothing more is
    // asked for until that chunk is applied.
    assert_eq!(again.loads.len(), 2, "{:?}", again.loads);
    again.visit.shown(Millis(again.now));
    again.outputs();
    again.run(FIRST_SCREEN_WAIT_MS / 4);
    assert!(again.now < opened_at + FIRST_SCREEN_WAIT_MS);
    let p = again.visit.progress();
    assert!(!p.restoring, "still restoring once shown: {p:?}");
    assert_eq!(p.from_cache, total);
    assert_same_index(&again.sharer.index, again.visit.index());
}

#[test]
fn a_damaged_part_in_a_later_chunk_makes_the_visit_fetch_the_index_again() {
    let first = snapshotted(100);
    let mut stored = first.store.clone();
    // The first part of the second chunk (the last read is the rest).
    let damaged = FIRST_PARTS as usize + 2;
    assert!(
        stored.parts.len() > damaged + 1,
        "{} parts",
        stored.parts.len()
    );
    stored.parts[damaged][40] ^= 0x55;
    let config = VisitConfig {
        storage: Storage::Kept,
        restore_chunk_parts: 2,
        ..VisitConfig::default()
    };
    let mut again = Shell::configured(first.sharer, config, stored, vec![Answer::Open]);
    again.visit.listed(Millis(again.now));
    again.outputs();
    again.run(30_000);
    assert!(!again.visit.progress().restoring);
    assert!(again.visit.progress().complete);
    assert!(
        again.sharer.session.stats().ops_sent > 0,
        "the index came from the sharer again"
    );
    assert_same_index(&again.sharer.index, again.visit.index());
}

#[test]
fn storage_failing_is_said_once_and_nothing_received_is_lost() {
    let store = Store {
        failing: Some("the disk is full".into()),
        ..Store::default()
    };
    let mut shell = Shell::new(sharer(20, 200, 1), Storage::Kept, store);
    shell.run(10_000);
    assert_eq!(shell.storage_failures, vec!["the disk is full".to_owned()]);
    let p = shell.visit.progress();
    assert!(p.complete);
    assert_eq!(p.storage_problem.as_deref(), Some("the disk is full"));
    assert_same_index(&shell.sharer.index, shell.visit.index());
}

#[test]
fn a_search_waits_until_the_stored_index_is_whole() {
    let mut first = Shell::new(sharer(100, 1_000, 1), Storage::Kept, Store::default());
    first.run(20_000);
    let stored = first.store.clone();
    let mut again = Shell::new(first.sharer, Storage::Kept, stored);
    assert!(again.visit.searchable_index().is_none(), "partly restored");
    again.visit.listed(Millis(0));
    again.run(5_000);
    let n = again
        .visit
        .searchable_index()
        .map(|ix| ix.len() as u64)
        .expect("whole");
    assert_eq!(n, again.sharer.index.entries());
}

#[test]
fn a_directory_entry_is_never_read() {
    let mut shell = Shell::new(sharer(2, 2, 10), Storage::Memory, Store::default());
    shell.run(2_000);
    let dir = shell.sharer.index.clone_lookup("dir 0000");
    assert_eq!(
        shell.sharer.index.view(dir).map(|v| v.kind),
        Some(EntryKind::Dir)
    );
    assert!(matches!(
        shell.visit.start_read(dir, None, 0, 0),
        Err(StartReadError::NotAFile(..))
    ));
}

#[test]
fn the_right_password_given_at_the_prompt_says_connected_again_once_the_session_opens() {
    // Regression: the data link was open all along, so the status never
    // changed after the prompt, and the page stayed on its password form
    // while the sharer served it.
    let mut visit: Visit<Vec<u8>> = Visit::new(Millis(0), VisitConfig::default(), 7);
    let mut events = Vec::new();
    let mut sent = Vec::new();
    let drain =
        |visit: &mut Visit<Vec<u8>>, events: &mut Vec<VisitEvent>, sent: &mut Vec<Vec<u8>>| {
            for _ in 0..10_000 {
                match visit.poll_output() {
                    Output::Event(e) => events.push(e),
                    Output::Transmit(f) | Output::TransmitBulk(f) => sent.push(f),
                    Output::Timeout(_) => return,
                    _ => {}
                }
            }
        };
    drain(&mut visit, &mut events, &mut sent);
    visit.link_opened(Millis(5));
    drain(&mut visit, &mut events, &mut sent);
    let asked = linkfs_proto::SenderToReceiver::PasswordNeeded.encode();
    visit.handle_frame(Millis(6), &asked, &asked);
    drain(&mut visit, &mut events, &mut sent);
    assert!(
        matches!(events.last(), Some(VisitEvent::PasswordNeeded)),
        "{events:?}"
    );
    assert_eq!(*visit.status(), VisitStatus::AtPrompt);
    // The sharer closes a prompt left unanswered; the link opened again is at the prompt still.
    visit.link_closed(Millis(8));
    drain(&mut visit, &mut events, &mut sent);
    visit.handle_timeout(Millis(60_000));
    drain(&mut visit, &mut events, &mut sent);
    visit.link_opened(Millis(60_005));
    drain(&mut visit, &mut events, &mut sent);
    assert_eq!(
        *visit.status(),
        VisitStatus::AtPrompt,
        "a reopened link said connected before the password"
    );
    visit.handle_frame(Millis(60_006), &asked, &asked);
    drain(&mut visit, &mut events, &mut sent);
    events.clear();
    visit.give_password("open sesame");
    drain(&mut visit, &mut events, &mut sent);
    assert!(
        sent.iter().any(|f| matches!(
            linkfs_proto::ReceiverToSender::decode(f),
            Ok(linkfs_proto::ReceiverToSender::Password(p)) if p == "open sesame"
        )),
        "the password was not sent"
    );
    let welcome = linkfs_proto::SenderToReceiver::Welcome(linkfs_proto::Welcome {
        version: linkfs_proto::PROTOCOL_VERSION,
        epoch: linkfs_proto::Epoch(9),
        start: linkfs_proto::Seq(0),
        max_read: 1 << 20,
        max_reads_in_flight: 8,
    })
    .encode();
    visit.handle_frame(Millis(60_007), &welcome, &welcome);
    drain(&mut visit, &mut events, &mut sent);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, VisitEvent::Status(VisitStatus::Connected))),
        "past the prompt the visit did not say it is connected: {events:?}"
    );
}
