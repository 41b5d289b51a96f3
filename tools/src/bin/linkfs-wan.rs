//! A wide-area line between two network namespaces, for measuring linkfs (and
//! TCP, ssh, TURN, Chromium) at a distance on a kernel without netem.
//!
//! ```text
//! ip netns add near; ip netns add far
//! linkfs-wan --a near --b far --delay-ms 10 --rate-mbit 200 --loss 0.1
//! #   near: 10.88.0.1/30 on wan-a<pid>   far: 10.88.0.2/30 on wan-b<pid>
//! ip netns exec far ping 10.88.0.1      # about 20 ms
//! ```
//!
//! Two TUN devices (one per namespace, `IFF_TUN | IFF_NO_PI`: whole IP
//! packets, any protocol) are made here and moved into the namespaces; the
//! open descriptors keep working there. Every packet read from one is written
//! to the other after:
//!
//! - **random loss** (`--loss`, percent, each direction on its own);
//! - **a bottleneck** (`--rate-mbit`, each direction) with a **drop-tail
//!   queue** (`--queue-kib`; default one bandwidth-delay product of the round
//!   trip, the usual router sizing): a packet leaves the bottleneck when the
//!   packets before it have, at the line rate; one that finds the queue full
//!   is dropped, as a router's would be;
//! - **a delay** each way (`--delay-ms`) plus **jitter** (`--jitter-ms`: a
//!   uniform extra delay, packets kept in order, as a real path keeps them).
//!
//! Packets leave at their own due time to within tens of microseconds (one
//! thread per direction sleeping on the kernel's high-resolution timers, timer
//! slack 1 ns): a line that woke on a 1 ms tick would release each
//! millisecond's packets as one burst, which real paths do not do.
//!
//! Bounds: at most [`MAX_IN_FLIGHT`] packets per direction are on the line
//! (beyond that they are dropped, and counted). Prints one line when the line
//! is up; on SIGINT or SIGTERM prints one JSON object with what it carried and
//! dropped, and exits (the devices go away with it).

use std::io::{Read, Write};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;

#[derive(Parser)]
#[command(about = "A delaying, rate-limited, lossy line between two network namespaces")]
struct Args {
    /// The first namespace (`ip netns add NAME`).
    #[arg(long)]
    a: String,
    /// The second namespace.
    #[arg(long)]
    b: String,
    /// The first namespace's address on the line (a /30 with the second's).
    #[arg(long, default_value = "10.88.0.1")]
    a_addr: String,
    /// The second namespace's address on the line.
    #[arg(long, default_value = "10.88.0.2")]
    b_addr: String,
    /// Delay added to each direction, ms (the round trip grows by twice this).
    #[arg(long, default_value_t = 10.0)]
    delay_ms: f64,
    /// Extra delay, uniform in 0..jitter, ms (order is kept).
    #[arg(long, default_value_t = 0.0)]
    jitter_ms: f64,
    /// The bottleneck's rate in each direction, Mbit/s (0: no bottleneck).
    #[arg(long, default_value_t = 0.0)]
    rate_mbit: f64,
    /// The bottleneck's queue, KiB (default: one bandwidth-delay product of
    /// the round trip, at least 64 KiB).
    #[arg(long)]
    queue_kib: Option<u64>,
    /// Packets lost at random in each direction, percent.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Seed of the loss and jitter.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Packets on the line in one direction, at most.
const MAX_IN_FLIGHT: usize = 1 << 16;
/// The largest packet a TUN device hands over with the default MTU, and then some.
const MAX_PACKET: usize = 65_536;

/// How one direction treats packets.
#[derive(Clone, Copy)]
struct Shape {
    delay: Duration,
    jitter: Duration,
    /// Nanoseconds a byte holds the bottleneck (0: none).
    ns_per_byte: f64,
    queue_bytes: u64,
    loss: f64,
}

/// What one direction did, for the closing report.
#[derive(Default)]
struct Counts {
    packets: AtomicU64,
    bytes: AtomicU64,
    lost: AtomicU64,
    queue_drops: AtomicU64,
    overflow_drops: AtomicU64,
}

impl Counts {
    fn json(&self) -> serde_json::Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        serde_json::json!({
            "packets": get(&self.packets),
            "bytes": get(&self.bytes),
            "lost_at_random": get(&self.lost),
            "dropped_queue_full": get(&self.queue_drops),
            "dropped_line_full": get(&self.overflow_drops),
        })
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !(0.0..100.0).contains(&args.loss) {
        bail!("--loss is a percentage below 100, not {}", args.loss);
    }
    if args.delay_ms < 0.0 || args.jitter_ms < 0.0 || args.rate_mbit < 0.0 {
        bail!("--delay-ms, --jitter-ms and --rate-mbit cannot be negative");
    }
    let ms = |x: f64| Duration::from_secs_f64(x / 1000.0);
    let bdp = (args.rate_mbit * 1e6 / 8.0 * 2.0 * args.delay_ms / 1000.0) as u64;
    let queue_bytes = args.queue_kib.map_or(bdp.max(64 << 10), |k| k << 10);
    let shape = Shape {
        delay: ms(args.delay_ms),
        jitter: ms(args.jitter_ms),
        ns_per_byte: if args.rate_mbit > 0.0 {
            8_000.0 / args.rate_mbit
        } else {
            0.0
        },
        queue_bytes,
        loss: args.loss / 100.0,
    };

    // Block the stop signals before any thread starts, so they all inherit the
    // mask and the main thread alone takes them (sigwait).
    let mut stop = nix::sys::signal::SigSet::empty();
    stop.add(nix::sys::signal::Signal::SIGINT);
    stop.add(nix::sys::signal::Signal::SIGTERM);
    stop.thread_block().context("cannot block SIGINT/SIGTERM")?;

    let pid = std::process::id();
    let (name_a, name_b) = (format!("wan-a{pid}"), format!("wan-b{pid}"));
    let (from_a, to_a) = open_tun(&name_a)?;
    let (from_b, to_b) = open_tun(&name_b)?;
    place(&name_a, &args.a, &args.a_addr)?;
    place(&name_b, &args.b, &args.b_addr)?;

    let a_to_b = Arc::new(Counts::default());
    let b_to_a = Arc::new(Counts::default());
    spawn_direction("a->b", from_a, to_b, shape, args.seed, a_to_b.clone())?;
    spawn_direction(
        "b->a",
        from_b,
        to_a,
        shape,
        args.seed.wrapping_add(1),
        b_to_a.clone(),
    )?;
    println!(
        "linkfs-wan: {} {} <-> {} {}: {} ms each way (+ up to {} ms jitter), {} Mbit/s each way, queue {} KiB, loss {}%",
        args.a,
        args.a_addr,
        args.b,
        args.b_addr,
        args.delay_ms,
        args.jitter_ms,
        if args.rate_mbit > 0.0 {
            args.rate_mbit.to_string()
        } else {
            "unlimited".into()
        },
        queue_bytes >> 10,
        args.loss
    );
    let _ = std::io::stdout().flush();
    let _ = stop.wait();
    println!(
        "{}",
        serde_json::json!({ "a_to_b": a_to_b.json(), "b_to_a": b_to_a.json() })
    );
    Ok(())
}

/// Opens a TUN device named `name` (whole IP packets, no extra header): its
/// reading and writing ends.
fn open_tun(name: &str) -> anyhow::Result<(tun::Reader, tun::Writer)> {
    let mut config = tun::Configuration::default();
    config.tun_name(name).layer(tun::Layer::L3);
    let device = tun::create(&config).with_context(|| {
        format!("cannot make TUN device {name} (is /dev/net/tun there? run as root)")
    })?;
    Ok(device.split())
}

/// Moves device `dev` into namespace `ns` and gives it `addr`/30.
fn place(dev: &str, ns: &str, addr: &str) -> anyhow::Result<()> {
    ip(&["link", "set", dev, "netns", ns]).with_context(|| {
        format!("cannot move {dev} into namespace {ns} (does it exist? `ip netns add {ns}`)")
    })?;
    ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", dev])?;
    ip(&["-n", ns, "link", "set", dev, "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    Ok(())
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run `ip` (apt-get install iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// One direction: a reader that shapes (loss, bottleneck, delay) and a
/// writer that sends each packet at its due time.
fn spawn_direction(
    name: &str,
    mut from: tun::Reader,
    mut to: tun::Writer,
    shape: Shape,
    seed: u64,
    counts: Arc<Counts>,
) -> anyhow::Result<()> {
    let (tx, rx): (SyncSender<OnTheLine>, Receiver<OnTheLine>) = sync_channel(MAX_IN_FLIGHT);
    let reader_counts = counts.clone();
    std::thread::Builder::new()
        .name(format!("wan {name} in"))
        .spawn(move || {
            let mut line = Line::new(shape, seed);
            let mut buf = vec![0u8; MAX_PACKET];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return,
                };
                match line.admit(Instant::now(), n) {
                    Verdict::Lost => {
                        reader_counts.lost.fetch_add(1, Ordering::Relaxed);
                    }
                    Verdict::QueueFull => {
                        reader_counts.queue_drops.fetch_add(1, Ordering::Relaxed);
                    }
                    Verdict::Due(at) => match tx.try_send((at, buf[..n].to_vec())) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) => {
                            reader_counts.overflow_drops.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(TrySendError::Disconnected(_)) => return,
                    },
                }
            }
        })?;
    std::thread::Builder::new()
        .name(format!("wan {name} out"))
        .spawn(move || {
            let _ = nix::sys::prctl::set_timerslack(1);
            for (due, packet) in rx {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if to.write_all(&packet).is_ok() {
                    counts.packets.fetch_add(1, Ordering::Relaxed);
                    counts
                        .bytes
                        .fetch_add(packet.len() as u64, Ordering::Relaxed);
                }
            }
        })?;
    Ok(())
}

/// A packet on the line, and when it comes out of the far end.
type OnTheLine = (Instant, Vec<u8>);

/// What becomes of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Lost,
    QueueFull,
    /// It comes out of the far end at this time.
    Due(Instant),
}

/// The shaping of one direction, given arrival times (no IO: tested below).
struct Line {
    shape: Shape,
    rng: u64,
    /// When the bottleneck is free again (the last admitted packet has left it).
    free_at: Option<Instant>,
    /// The last packet's due time (later ones never come out before it).
    last_due: Option<Instant>,
}

impl Line {
    fn new(shape: Shape, seed: u64) -> Line {
        Line {
            shape,
            rng: seed | 1,
            free_at: None,
            last_due: None,
        }
    }

    /// A uniform number in [0, 1) (xorshift64*).
    fn random(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn admit(&mut self, now: Instant, len: usize) -> Verdict {
        if self.shape.loss > 0.0 && self.random() < self.shape.loss {
            return Verdict::Lost;
        }
        let mut leaves = now;
        if self.shape.ns_per_byte > 0.0 {
            let free_at = self.free_at.unwrap_or(now).max(now);
            // What waits ahead of this packet at the bottleneck, in bytes.
            let backlog = (free_at - now).as_nanos() as f64 / self.shape.ns_per_byte;
            if backlog as u64 + len as u64 > self.shape.queue_bytes {
                return Verdict::QueueFull;
            }
            leaves = free_at + Duration::from_nanos((len as f64 * self.shape.ns_per_byte) as u64);
            self.free_at = Some(leaves);
        }
        let jitter = if self.shape.jitter.is_zero() {
            Duration::ZERO
        } else {
            self.shape.jitter.mul_f64(self.random())
        };
        let due = (leaves + self.shape.delay + jitter).max(self.last_due.unwrap_or(now));
        self.last_due = Some(due);
        Verdict::Due(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(delay_ms: u64, rate_mbit: f64, queue_bytes: u64, loss: f64) -> Shape {
        Shape {
            delay: Duration::from_millis(delay_ms),
            jitter: Duration::ZERO,
            ns_per_byte: if rate_mbit > 0.0 {
                8_000.0 / rate_mbit
            } else {
                0.0
            },
            queue_bytes,
            loss,
        }
    }

    #[test]
    fn a_packet_comes_out_after_the_delay_and_its_time_on_the_bottleneck() {
        let t0 = Instant::now();
        let mut line = Line::new(shape(10, 80.0, 1 << 20, 0.0), 1);
        // 1,000 bytes at 80 Mbit/s hold the bottleneck 100 us.
        let Verdict::Due(at) = line.admit(t0, 1000) else {
            panic!("admitted")
        };
        assert_eq!(at - t0, Duration::from_micros(10_100));
        // The next one waits for it.
        let Verdict::Due(at) = line.admit(t0, 1000) else {
            panic!("admitted")
        };
        assert_eq!(at - t0, Duration::from_micros(10_200));
    }

    #[test]
    fn a_full_queue_drops_what_comes_next_and_drains_at_the_line_rate() {
        let t0 = Instant::now();
        // 10 packets of 1,000 bytes fit the 10,000-byte queue; the 11th does not.
        let mut line = Line::new(shape(0, 8.0, 10_000, 0.0), 1);
        for _ in 0..10 {
            assert!(matches!(line.admit(t0, 1000), Verdict::Due(_)));
        }
        assert_eq!(line.admit(t0, 1000), Verdict::QueueFull);
        // At 8 Mbit/s a byte takes 1 us: after 2 ms, 2,000 bytes have left.
        let later = t0 + Duration::from_millis(2);
        assert!(matches!(line.admit(later, 1000), Verdict::Due(_)));
        assert!(matches!(line.admit(later, 1000), Verdict::Due(_)));
        assert_eq!(line.admit(later, 1000), Verdict::QueueFull);
    }

    #[test]
    fn random_loss_takes_about_the_share_asked_for() {
        let t0 = Instant::now();
        let mut line = Line::new(shape(0, 0.0, 0, 0.01), 7);
        let lost = (0..100_000)
            .filter(|_| line.admit(t0, 100) == Verdict::Lost)
            .count();
        assert!((800..1200).contains(&lost), "{lost} of 100,000 lost at 1%");
    }

    #[test]
    fn jitter_never_reorders() {
        let t0 = Instant::now();
        let mut s = shape(5, 0.0, 0, 0.0);
        s.jitter = Duration::from_millis(5);
        let mut line = Line::new(s, 3);
        let mut last = t0;
        for i in 0..1000 {
            let Verdict::Due(at) = line.admit(t0 + Duration::from_micros(i), 100) else {
                panic!("admitted")
            };
            assert!(at >= last);
            last = at;
        }
    }
}
