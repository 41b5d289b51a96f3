//! A receiver's lanes, their whole lifecycle: the machine the native receiver
//! (`peer/src/lanes.rs`) and the page (`core-wasm/src/data_link.rs`) both
//! drive, so that neither decides anything about lanes. The shells only
//! open and close connections when told, and report what happened to them.
//!
//! ```text
//! in (shell -> LaneSet)                       out (LaneSet -> shell)
//!   on_session_frame(now, head, len)             -> Deliver | Drop (the frame)
//!   on_lane_frame(now, lane, head, len)          -> Deliver | Drop
//!   round_trip(now, rtt)  answer to MeasureRoundTrip
//!   lane_opened(now, lane) its link opened and took the join frame
//!   lane_closed(now, lane) it failed to open, or ended after it opened
//!   handle_timeout(now)   at poll_timeout()
//!                                             poll_output():
//!                                               MeasureRoundTrip   ask the session link's
//!                                                                  round trip (at its first
//!                                                                  frame, when the gate asks
//!                                                                  for lanes, and again
//!                                                                  after REMEASURE_AFTER
//!                                                                  if it was unknown)
//!                                               Connect {lane, join} connect one more link
//!                                                                  to the sharer; its first
//!                                                                  frame is `join`
//!                                               EndLink            a lane ended and the
//!                                                                  session link said nothing
//!                                                                  within LANE_END_GRACE:
//!                                                                  end the whole link
//! ```
//!
//! States of one lane:
//!
//! ```text
//!  (gate says Open n, path long) -> queued -- fewer than 8 connecting --> Connecting
//!  Connecting -- lane_opened --> Open -- lane_closed --> gone, grace armed
//!  Connecting -- lane_closed --> gone (the next queued one connects)
//!  grace over, nothing else ended the link --> EndLink (once; nothing connects after)
//! ```
//!
//! Rules, each decided here once: when lanes open and how many
//! ([`LaneGate`], told when a step's lanes have all joined or failed, so it
//! measures them once they run rather than a fixed time after asking); only where the path's round trip is at least
//! [`LANE_MIN_RTT`]. The path's round trip is the lowest the session link
//! measured: asked of the shell at the link's first frame, before bulk
//! fills any queue, then when the gate first asks for lanes and each time
//! it grows (an unknown answer, with none known before it, is asked again
//! after [`REMEASURE_AFTER`], at most [`MAX_REMEASURES`] times in a row).
//! The lowest, because a measure taken under load counts the queues: on one
//! host, a browser busy receiving reported 20-87 ms to ICE for a path of
//! well under one, and lanes opened where they only cost it CPU. At most [`LANES_CONNECTING_AT_ONCE`] connecting; only
//! read chunks count on a lane ([`lane_may_carry`]); a lane that ended after
//! it opened lost chunks, so the link ends after [`LANE_END_GRACE`] (the
//! sharer's goodbye on the session link, if it comes first, ends it with
//! better words; the shell then simply drops this set).
//!
//! Bounds: lanes in all at most what the gate allows ([`MAX_LANES`]); one
//! round-trip question outstanding, [`MAX_REMEASURES`] in a row unanswered; the output queue holds at most one
//! measurement, [`LANES_CONNECTING_AT_ONCE`] connects and one end.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use linkfs_proto::{LaneJoin, LaneToken};

use super::{GateSays, LANE_END_GRACE, LANE_MIN_RTT, LANES_CONNECTING_AT_ONCE, LaneGate};
#[cfg(doc)]
use super::{MAX_LANES, lane_may_carry};
use crate::Millis;

/// An unknown round trip (a browser's stats can lack it for a moment) is
/// asked again this long after.
pub const REMEASURE_AFTER: Duration = Duration::from_millis(250);
/// Unknown answers in a row before the lanes asked for are given up.
pub const MAX_REMEASURES: u8 = 8;

/// A lane, as this set names it to its shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LaneNo(pub u32);

/// What the shell does with one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameIs {
    /// Give it to the session.
    Deliver,
    /// Not for the session (a lane offer, or anything but a chunk on a lane).
    Drop,
}

/// What the shell is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneDo {
    /// Measure the session link's round trip; answer with [`LaneSet::round_trip`].
    MeasureRoundTrip,
    /// Connect one more link to the same sharer as lane `lane`; once it opens,
    /// send `join` as its first frame and call [`LaneSet::lane_opened`]; if it
    /// fails, [`LaneSet::lane_closed`].
    Connect { lane: LaneNo, join: Vec<u8> },
    /// End the whole link (its lanes too): a lane's chunks were lost.
    EndLink,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Connecting,
    Open,
}

/// One session link's lanes (module docs).
#[derive(Debug)]
pub struct LaneSet {
    gate: LaneGate,
    /// Lanes the gate asked for whose path is not measured yet.
    unmeasured: u8,
    /// The lowest round trip the session link measured.
    lowest_rtt: Option<Duration>,
    /// The first measure (at the link's first frame) is still to ask for (never
    /// for a shell that wants no lanes).
    first_measure_due: bool,
    measuring: bool,
    /// An unknown round trip is asked again at this time.
    remeasure_at: Option<Millis>,
    /// Unknown answers in a row.
    unknown: u8,
    /// Lanes to connect, and the token they join with.
    queued: u8,
    token: Option<LaneToken>,
    lanes: BTreeMap<LaneNo, Lane>,
    next: u32,
    /// When an open lane ended (the link ends at this + grace).
    lane_ended_at: Option<Millis>,
    ended: bool,
    out: VecDeque<LaneDo>,
}

impl LaneSet {
    /// Lanes for a session link whose shell opens at most `wanted` (0: none).
    pub fn new(wanted: u8) -> Self {
        LaneSet {
            gate: LaneGate::new(wanted),
            unmeasured: 0,
            lowest_rtt: None,
            first_measure_due: wanted > 0,
            measuring: false,
            remeasure_at: None,
            unknown: 0,
            queued: 0,
            token: None,
            lanes: BTreeMap::new(),
            next: 0,
            lane_ended_at: None,
            ended: false,
            out: VecDeque::new(),
        }
    }

    /// The same set, for a shell that puts its upload chunks on lanes
    /// ([`LaneGate::with_uploads`]).
    pub fn with_uploads(mut self) -> Self {
        self.gate = self.gate.with_uploads();
        self
    }

    /// The same, for a browser's uploads ([`LaneGate::with_browser_uploads`]).
    pub fn with_browser_uploads(mut self) -> Self {
        self.gate = self.gate.with_browser_uploads();
        self
    }

    /// A frame of `len` bytes on the session's own link at `now`, from its
    /// first bytes (at least [`super::FRAME_HEAD_BYTES`] of them, or all).
    pub fn on_session_frame(&mut self, now: Millis, head: &[u8], len: usize) -> FrameIs {
        if self.first_measure_due {
            self.first_measure_due = false;
            self.ask_round_trip();
        }
        let says = self.gate.on_frame_head(now, head, len);
        self.follow(says)
    }

    /// A frame of `len` bytes that came on lane `lane` at `now`.
    pub fn on_lane_frame(&mut self, now: Millis, lane: LaneNo, head: &[u8], len: usize) -> FrameIs {
        if self.lanes.get(&lane) != Some(&Lane::Open) || !super::lane_may_carry(head) {
            return FrameIs::Drop;
        }
        let says = self.gate.on_lane_chunk(now, len);
        self.follow(says)
    }

    fn follow(&mut self, says: GateSays) -> FrameIs {
        match says {
            GateSays::Skip => return FrameIs::Drop,
            GateSays::Pass => {}
            GateSays::Open { offer, count } => {
                self.token = Some(offer.token);
                self.unmeasured = self.unmeasured.saturating_add(count);
                if self.remeasure_at.is_none() {
                    self.ask_round_trip();
                }
            }
        }
        FrameIs::Deliver
    }

    /// Asks the shell for the session link's round trip, unless a question is out.
    fn ask_round_trip(&mut self) {
        if !self.measuring && !self.ended {
            self.measuring = true;
            self.out.push_back(LaneDo::MeasureRoundTrip);
        }
    }

    /// The session link's round trip at `now`, as its connection measured it
    /// (`None`: unknown for now, asked again after [`REMEASURE_AFTER`]).
    pub fn round_trip(&mut self, now: Millis, rtt: Option<Duration>) {
        self.measuring = false;
        if let Some(rtt) = rtt {
            self.lowest_rtt = Some(self.lowest_rtt.map_or(rtt, |lowest| lowest.min(rtt)));
        }
        if self.unmeasured == 0 {
            // The first measure, with no lanes asked for yet: kept, nothing to decide.
            return;
        }
        let Some(path_rtt) = self.lowest_rtt else {
            self.unknown = self.unknown.saturating_add(1);
            if self.unknown <= MAX_REMEASURES && !self.ended {
                self.remeasure_at = Some(Millis(now.0 + REMEASURE_AFTER.as_millis() as u64));
            } else {
                self.unmeasured = 0;
                self.settled(now);
            }
            return;
        };
        self.unknown = 0;
        let asked = std::mem::take(&mut self.unmeasured);
        if path_rtt >= LANE_MIN_RTT {
            self.queued = self.queued.saturating_add(asked);
            self.connect_more();
        }
        self.settled(now);
    }

    /// Lane `lane`'s link opened and its join frame went, at `now`.
    pub fn lane_opened(&mut self, now: Millis, lane: LaneNo) {
        if let Some(state) = self.lanes.get_mut(&lane) {
            *state = Lane::Open;
        }
        self.connect_more();
        self.settled(now);
    }

    /// Lane `lane` failed to open, or ended after it opened, at `now`.
    pub fn lane_closed(&mut self, now: Millis, lane: LaneNo) {
        if self.lanes.remove(&lane) == Some(Lane::Open) && self.lane_ended_at.is_none() {
            self.lane_ended_at = Some(now);
        }
        self.connect_more();
        self.settled(now);
    }

    /// Tells the gate when nothing it asked for is still to measure, queued
    /// or connecting (the gate takes the first such news of each step).
    fn settled(&mut self, now: Millis) {
        if self.unmeasured == 0 && self.queued == 0 && self.connecting() == 0 {
            self.gate.lanes_joined(now, self.lowest_rtt);
        }
    }

    /// When [`LaneSet::handle_timeout`] is due.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let grace = self.grace_over_at();
        match (grace, self.remeasure_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When the grace after a lane ended is over.
    fn grace_over_at(&self) -> Option<Millis> {
        match self.lane_ended_at {
            Some(at) if !self.ended => Some(Millis(at.0 + LANE_END_GRACE.as_millis() as u64)),
            _ => None,
        }
    }

    pub fn handle_timeout(&mut self, now: Millis) {
        if self.remeasure_at.is_some_and(|due| now >= due) {
            self.remeasure_at = None;
            self.ask_round_trip();
        }
        if self.grace_over_at().is_some_and(|due| now >= due) {
            self.ended = true;
            self.queued = 0;
            self.remeasure_at = None;
            self.out.push_back(LaneDo::EndLink);
        }
    }

    pub fn poll_output(&mut self) -> Option<LaneDo> {
        self.out.pop_front()
    }

    /// Lanes open now.
    pub fn open(&self) -> usize {
        self.lanes.values().filter(|l| **l == Lane::Open).count()
    }

    /// Lanes connecting now.
    pub fn connecting(&self) -> usize {
        self.lanes.len() - self.open()
    }

    fn connect_more(&mut self) {
        let Some(token) = self.token else { return };
        while !self.ended && self.queued > 0 && self.connecting() < LANES_CONNECTING_AT_ONCE {
            self.queued -= 1;
            let lane = LaneNo(self.next);
            self.next += 1;
            self.lanes.insert(lane, Lane::Connecting);
            self.out.push_back(LaneDo::Connect {
                lane,
                join: LaneJoin { token }.encode(),
            });
        }
    }
}
