//! A simulated path for two SCTP associations, in virtual time.
//!
//! Every data channel runs over webrtc-rs's sans-IO SCTP (`rtc-sctp`). Its loss
//! recovery decides what a lossy or long path costs, and a real path cannot make
//! the same loss twice, so its rules are tested here: two real associations (the
//! crate's public API, unchanged) exchange real packets through a line that is
//! all arithmetic.
//!
//! | part | model |
//! |---|---|
//! | clock | virtual: jumps to the next delivery or timer when nothing is ready |
//! | each direction | a drop-tail queue of `queue_bytes`, drained at `rate` bytes/s, then `one_way` delay |
//! | other flows | `swing`: a delay other flows' queue adds, rising and falling smoothly between 0 and `swing` every second (order kept) |
//! | random loss | per packet and direction, from a seeded splitmix64 (same seed, same losses) |
//! | exact losses | [`Fault`]s: the first n sends of a DATA chunk, a run of data packets, an outage |
//! | application | the sender keeps `send_buffer` bytes queued; the receiver reads at once and checks every byte |
//!
//! DATA chunks are named by their offset from the first TSN sent, so a test
//! can say "lose the 10th chunk and its first retransmission" without knowing
//! the random initial TSN.
//!
//! Bounds: a run stops at `Transfer::deadline` of virtual time, and the line
//! holds at most `queue_bytes` per direction.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtc_sctp::{
    Association, AssociationHandle, ClientConfig, DatagramEvent, Endpoint, EndpointConfig, Event,
    Payload, PayloadProtocolIdentifier, ServerConfig, TransportConfig,
};
use rtc_shared::TransportProtocol;

/// One direction of the line.
#[derive(Clone, Copy, Debug)]
pub struct Path {
    pub one_way: Duration,
    /// Bottleneck rate, bytes per second.
    pub rate: u64,
    /// Drop-tail queue ahead of the bottleneck, bytes.
    pub queue_bytes: u64,
    /// Probability of losing each packet.
    pub loss: f64,
    /// Delay added by other flows' queue, swinging from 0 to this and back
    /// each [`SWING_PERIOD`] (a read's lanes on the same line); zero: none.
    /// At most 0.3 s, so the added delay never falls faster than time passes
    /// and packets keep their order.
    pub swing: Duration,
}

/// How long one swing of [`Path::swing`] takes.
pub const SWING_PERIOD: Duration = Duration::from_secs(1);

impl Path {
    /// The same path, with other flows swinging its delay by up to `swing`
    /// (at most 0.3 s).
    pub fn with_swing(mut self, swing: Duration) -> Path {
        self.swing = swing.min(Duration::from_millis(300));
        self
    }

    /// The delay other flows add at `since` from the line's start.
    fn swing_at(&self, since: Duration) -> Duration {
        if self.swing.is_zero() {
            return Duration::ZERO;
        }
        let phase = since.as_secs_f64() / SWING_PERIOD.as_secs_f64() * std::f64::consts::TAU;
        self.swing.mul_f64((1.0 - phase.cos()) / 2.0)
    }
}

impl Path {
    /// A path of `rtt` round trip (half each way), `mbit` Mbit/s, one
    /// bandwidth-delay product of queue (at least 64 KiB), and `loss`.
    pub fn symmetric(rtt: Duration, mbit: u64, loss: f64) -> Path {
        let rate = mbit * 1_000_000 / 8;
        let bdp = (rate as f64 * rtt.as_secs_f64()) as u64;
        Path {
            one_way: rtt / 2,
            rate,
            queue_bytes: bdp.max(64 * 1024),
            loss,
            swing: Duration::ZERO,
        }
    }
}

/// An exact loss, on the sender-to-receiver direction unless it says otherwise.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Lose the first `sends` transmissions of the DATA chunk `offset` TSNs
    /// after the first one sent (1 = only the original, 2 = also its first
    /// retransmission).
    DataChunk { offset: u32, sends: u32 },
    /// Lose every packet that carries a first transmission of a chunk whose
    /// offset is in `from..from + count` (a burst).
    DataRun { from: u32, count: u32 },
    /// Lose everything, both directions, during this window of virtual time
    /// (from the start of the transfer).
    Outage { from: Duration, len: Duration },
}

/// What the sender sends.
#[derive(Clone, Debug)]
pub struct Transfer {
    pub bytes: u64,
    /// Bytes per message (linkfs's frames are up to 64 KiB).
    pub message: usize,
    /// Bytes the application keeps queued in the association.
    pub send_buffer: usize,
    /// Receive window each side advertises.
    pub receive_window: u32,
    /// Stop (and report unfinished) after this much virtual time.
    pub deadline: Duration,
}

impl Transfer {
    pub fn bulk(bytes: u64) -> Transfer {
        Transfer {
            bytes,
            message: 16 * 1024,
            send_buffer: 4 << 20,
            receive_window: 4 << 20,
            deadline: Duration::from_secs(600),
        }
    }
}

/// What happened, in figures.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Every byte arrived, in order and unchanged.
    pub complete: bool,
    pub delivered: u64,
    /// From the first write to the last byte read.
    pub seconds: f64,
    /// From the first write until the sender's queue was empty (all acknowledged).
    pub acked_seconds: f64,
    pub t3_timeouts: u64,
    pub fast_retransmits: u64,
    /// Distinct DATA chunks (TSNs) the sender sent.
    pub chunks: u32,
    pub dropped_forward: u64,
    pub dropped_back: u64,
}

impl Outcome {
    pub fn megabytes_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.delivered as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "complete": self.complete,
            "delivered": self.delivered,
            "seconds": round3(self.seconds),
            "acked_seconds": round3(self.acked_seconds),
            "mb_per_s": round3(self.megabytes_per_second()),
            "t3_timeouts": self.t3_timeouts,
            "fast_retransmits": self.fast_retransmits,
            "chunks": self.chunks,
            "dropped_forward": self.dropped_forward,
            "dropped_back": self.dropped_back,
        })
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The line: both directions, its faults and its random source.
#[derive(Clone, Debug)]
pub struct Line {
    pub forward: Path,
    pub back: Path,
    pub faults: Vec<Fault>,
    pub seed: u64,
}

impl Line {
    pub fn new(path: Path) -> Line {
        Line {
            forward: path,
            back: path,
            faults: Vec::new(),
            seed: 1,
        }
    }

    pub fn with_fault(mut self, fault: Fault) -> Line {
        self.faults.push(fault);
        self
    }

    pub fn with_seed(mut self, seed: u64) -> Line {
        self.seed = seed;
        self
    }

    /// Connects two associations over the line, sends `transfer`, and reports.
    pub fn run(&self, transfer: &Transfer) -> Outcome {
        Run::new(self, transfer).go()
    }
}

/// splitmix64: small, seeded, and the same on every machine.
struct Random(u64);

impl Random {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction's queue and the packets in flight on it.
struct Direction {
    path: Path,
    /// The line's start (for [`Path::swing`]).
    start: Instant,
    /// When the bottleneck finishes sending what it holds.
    busy_until: Instant,
    dropped: u64,
}

impl Direction {
    /// When a packet of `len` bytes offered at `now` arrives, or None when
    /// the queue is full.
    fn admit(&mut self, now: Instant, len: usize) -> Option<Instant> {
        let start = self.busy_until.max(now);
        let queued = start.saturating_duration_since(now).as_secs_f64() * self.path.rate as f64;
        if queued + len as f64 > self.path.queue_bytes as f64 {
            self.dropped += 1;
            return None;
        }
        let serialise = Duration::from_secs_f64(len as f64 / self.path.rate as f64);
        self.busy_until = start + serialise;
        let swing = self.path.swing_at(self.busy_until - self.start);
        Some(self.busy_until + self.path.one_way + swing)
    }
}

/// The TSNs of the DATA chunks in one SCTP packet (common header 12 bytes;
/// each chunk: type, flags, length, and for DATA (type 0) the TSN next).
pub fn data_tsns(packet: &[u8]) -> Vec<u32> {
    let mut tsns = Vec::new();
    let mut at = 12;
    while at + 4 <= packet.len() {
        let kind = packet[at];
        let len = u16::from_be_bytes([packet[at + 2], packet[at + 3]]) as usize;
        if len < 4 {
            break;
        }
        if kind == 0 && at + 8 <= packet.len() {
            tsns.push(u32::from_be_bytes([
                packet[at + 4],
                packet[at + 5],
                packet[at + 6],
                packet[at + 7],
            ]));
        }
        at += (len + 3) & !3;
    }
    tsns
}

struct Node {
    endpoint: Endpoint,
    peer: SocketAddr,
    handle: Option<AssociationHandle>,
    association: Option<Association>,
    connected: bool,
}

impl Node {
    fn new(endpoint: Endpoint, peer: SocketAddr) -> Node {
        Node {
            endpoint,
            peer,
            handle: None,
            association: None,
            connected: false,
        }
    }

    fn timeout(&self) -> Option<Instant> {
        self.association.as_ref().and_then(|a| a.poll_timeout())
    }

    /// Takes in what arrived, fires due timers, and returns what it sends.
    fn drive(&mut self, now: Instant, inbound: Vec<Bytes>) -> Vec<Bytes> {
        for data in inbound {
            if let Some((handle, event)) = self.endpoint.handle(now, self.peer, None, data) {
                match event {
                    DatagramEvent::NewAssociation(association) => {
                        self.handle = Some(handle);
                        self.association = Some(association);
                    }
                    DatagramEvent::AssociationEvent(event) => {
                        if let Some(association) = self.association.as_mut() {
                            association.handle_event(event);
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        let Some(association) = self.association.as_mut() else {
            return out;
        };
        if association.poll_timeout().is_some_and(|t| t <= now) {
            association.handle_timeout(now);
        }
        while let Some(event) = association.poll() {
            if matches!(event, Event::Connected) {
                self.connected = true;
            }
        }
        while let Some(event) = association.poll_endpoint_event() {
            if let Some(handle) = self.handle {
                self.endpoint.handle_event(handle, event);
            }
        }
        while let Some(transmit) = association.poll_transmit(now) {
            if let Payload::RawEncode(contents) = transmit.message {
                out.extend(contents);
            }
        }
        out
    }
}

/// The byte at `offset` of the transfer: a pattern no shift or swap preserves.
fn pattern(offset: u64) -> u8 {
    (offset ^ (offset >> 8) ^ (offset >> 16).wrapping_mul(31)) as u8
}

struct Run<'a> {
    line: &'a Line,
    transfer: &'a Transfer,
    sender: Node,
    receiver: Node,
    forward: Direction,
    back: Direction,
    /// (arrival, sequence, toward receiver?, packet)
    in_flight: BinaryHeap<Reverse<(Instant, u64, bool, Bytes)>>,
    sequence: u64,
    random: Random,
    first_tsn: Option<u32>,
    sends: HashMap<u32, u32>,
    start: Instant,
    now: Instant,
}

impl<'a> Run<'a> {
    fn new(line: &'a Line, transfer: &'a Transfer) -> Run<'a> {
        let sender_addr: SocketAddr = "10.0.0.1:5000".parse().expect("literal address");
        let receiver_addr: SocketAddr = "10.0.0.2:5000".parse().expect("literal address");
        let endpoint_config = Arc::new(EndpointConfig::default());
        let transport =
            TransportConfig::default().with_max_receive_buffer_size(transfer.receive_window);
        let sender = Node::new(
            Endpoint::new(
                sender_addr,
                TransportProtocol::UDP,
                endpoint_config.clone(),
                None,
            ),
            receiver_addr,
        );
        let receiver = Node::new(
            Endpoint::new(
                receiver_addr,
                TransportProtocol::UDP,
                endpoint_config,
                Some(Arc::new(ServerConfig::new(transport))),
            ),
            sender_addr,
        );
        let now = Instant::now();
        Run {
            line,
            transfer,
            sender,
            receiver,
            forward: Direction {
                path: line.forward,
                start: now,
                busy_until: now,
                dropped: 0,
            },
            back: Direction {
                path: line.back,
                start: now,
                busy_until: now,
                dropped: 0,
            },
            in_flight: BinaryHeap::new(),
            sequence: 0,
            random: Random(line.seed),
            first_tsn: None,
            sends: HashMap::new(),
            start: now,
            now,
        }
    }

    /// Whether the line loses this packet on its way (before the queue).
    fn lost(&mut self, toward_receiver: bool, packet: &[u8]) -> bool {
        let since = self.now.saturating_duration_since(self.start);
        let mut lost = false;
        for fault in &self.line.faults {
            if let Fault::Outage { from, len } = *fault
                && since >= from
                && since < from + len
            {
                lost = true;
            }
        }
        let path = if toward_receiver {
            self.line.forward
        } else {
            self.line.back
        };
        // Draw for every packet, so one fault does not shift the others' luck.
        if self.random.next_f64() < path.loss {
            lost = true;
        }
        if !toward_receiver {
            return lost;
        }
        for tsn in data_tsns(packet) {
            let first = *self.first_tsn.get_or_insert(tsn);
            let offset = tsn.wrapping_sub(first);
            let sends = self.sends.entry(offset).or_insert(0);
            *sends += 1;
            for fault in &self.line.faults {
                match *fault {
                    Fault::DataChunk {
                        offset: o,
                        sends: n,
                    } if o == offset && *sends <= n => lost = true,
                    Fault::DataRun { from, count }
                        if offset >= from && offset < from + count && *sends == 1 =>
                    {
                        lost = true
                    }
                    _ => {}
                }
            }
        }
        lost
    }

    fn put_on_line(&mut self, toward_receiver: bool, packets: Vec<Bytes>) {
        for packet in packets {
            if self.lost(toward_receiver, &packet) {
                if toward_receiver {
                    self.forward.dropped += 1;
                } else {
                    self.back.dropped += 1;
                }
                continue;
            }
            let direction = if toward_receiver {
                &mut self.forward
            } else {
                &mut self.back
            };
            if let Some(arrival) = direction.admit(self.now, packet.len()) {
                self.sequence += 1;
                self.in_flight
                    .push(Reverse((arrival, self.sequence, toward_receiver, packet)));
            }
        }
    }

    /// Moves the clock to the next thing that happens; false when nothing will.
    fn advance(&mut self) -> bool {
        let next = [
            self.in_flight.peek().map(|Reverse((t, ..))| *t),
            self.sender.timeout(),
            self.receiver.timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => {
                self.now = self.now.max(t);
                true
            }
            None => false,
        }
    }

    /// Exchanges packets until nothing is due now.
    fn step(&mut self) {
        let mut to_sender = Vec::new();
        let mut to_receiver = Vec::new();
        while let Some(Reverse((t, ..))) = self.in_flight.peek() {
            if *t > self.now {
                break;
            }
            let Some(Reverse((_, _, toward_receiver, packet))) = self.in_flight.pop() else {
                break;
            };
            if toward_receiver {
                to_receiver.push(packet);
            } else {
                to_sender.push(packet);
            }
        }
        let out = self.sender.drive(self.now, to_sender);
        self.put_on_line(true, out);
        let out = self.receiver.drive(self.now, to_receiver);
        self.put_on_line(false, out);
    }

    fn go(mut self) -> Outcome {
        let deadline = self.start + self.transfer.deadline;
        match self.sender.endpoint.connect(
            self.now,
            ClientConfig::new(self.transport()),
            self.sender.peer,
        ) {
            Ok((handle, association)) => {
                self.sender.handle = Some(handle);
                self.sender.association = Some(association);
            }
            Err(_) => return Outcome::default(),
        }
        // Handshake (its packets cross the same line and faults).
        while !(self.sender.connected && self.receiver.connected) {
            self.step();
            if self.sender.connected && self.receiver.connected {
                break;
            }
            if !self.advance() || self.now > deadline {
                return Outcome::default();
            }
        }
        self.start = self.now;
        let deadline = self.start + self.transfer.deadline;
        let Some(association) = self.sender.association.as_mut() else {
            return Outcome::default();
        };
        if association
            .open_stream(0, PayloadProtocolIdentifier::Binary)
            .is_err()
        {
            return Outcome::default();
        }

        let mut outcome = Outcome::default();
        let mut written = 0u64;
        let mut read = 0u64;
        let mut accepted = false;
        let mut intact = true;
        let mut buffer = vec![0u8; self.transfer.message.max(1)];
        let mut acked_at = None;
        loop {
            // The application: keep the sender's queue full, read everything.
            if let Some(association) = self.sender.association.as_mut()
                && let Ok(mut stream) = association.stream(0)
            {
                while written < self.transfer.bytes
                    && stream.buffered_amount().unwrap_or(usize::MAX) < self.transfer.send_buffer
                {
                    let len = (self.transfer.bytes - written).min(self.transfer.message as u64);
                    let message: Vec<u8> = (written..written + len).map(pattern).collect();
                    if stream
                        .write_sctp(
                            self.now,
                            &Bytes::from(message),
                            PayloadProtocolIdentifier::Binary,
                        )
                        .is_err()
                    {
                        break;
                    }
                    written += len;
                }
                if written == self.transfer.bytes
                    && acked_at.is_none()
                    && stream.buffered_amount().unwrap_or(1) == 0
                {
                    acked_at = Some(self.now);
                }
            }
            self.step();
            if let Some(association) = self.receiver.association.as_mut() {
                if !accepted {
                    accepted = association.accept_stream().is_some();
                }
                if accepted && let Ok(mut stream) = association.stream(0) {
                    while let Ok(Some(chunks)) = stream.read_sctp() {
                        let Ok(n) = chunks.read(&mut buffer) else {
                            intact = false;
                            break;
                        };
                        for (i, byte) in buffer[..n].iter().enumerate() {
                            if *byte != pattern(read + i as u64) {
                                intact = false;
                            }
                        }
                        read += n as u64;
                    }
                }
            }
            if read == self.transfer.bytes && outcome.seconds == 0.0 {
                outcome.seconds = self.now.duration_since(self.start).as_secs_f64();
            }
            if read == self.transfer.bytes && acked_at.is_some() {
                break;
            }
            // Work left at this instant (a packet due now) is done before time moves.
            if self
                .in_flight
                .peek()
                .is_some_and(|Reverse((t, ..))| *t <= self.now)
            {
                continue;
            }
            if !self.advance() || self.now > deadline {
                break;
            }
        }
        outcome.delivered = read;
        outcome.complete = intact && read == self.transfer.bytes;
        if outcome.seconds == 0.0 {
            outcome.seconds = self.now.duration_since(self.start).as_secs_f64();
        }
        outcome.acked_seconds = acked_at
            .unwrap_or(self.now)
            .duration_since(self.start)
            .as_secs_f64();
        if let Some(association) = self.sender.association.as_ref() {
            let mut stats = association.stats();
            outcome.t3_timeouts = stats.get_num_t3timeouts();
            outcome.fast_retransmits = stats.get_num_fast_retrans();
        }
        outcome.chunks = self.sends.len() as u32;
        outcome.dropped_forward = self.forward.dropped;
        outcome.dropped_back = self.back.dropped;
        outcome
    }

    fn transport(&self) -> TransportConfig {
        TransportConfig::default().with_max_receive_buffer_size(self.transfer.receive_window)
    }
}
