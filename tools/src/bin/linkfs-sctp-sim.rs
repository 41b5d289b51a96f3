//! `linkfs-sctp-sim`: one SCTP transfer on a simulated path, in virtual time,
//! printed as JSON. Two real associations (webrtc-rs's `rtc-sctp`, as this
//! workspace patches it) exchange real packets; the path is arithmetic, so the
//! same seed loses the same packets every run.
//!
//! `linkfs-sctp-sim --rtt-ms 100 --mbit 100 --loss 0.005 --megabytes 20 --seeds 5`

use std::time::Duration;

use clap::Parser;
use linkfs_tools::sctp_line::{Line, Path, Transfer};

#[derive(Parser)]
#[command(about = "One SCTP transfer on a simulated lossy path (virtual time), as JSON")]
struct Args {
    /// Round-trip time of the path, milliseconds.
    #[arg(long, default_value_t = 100)]
    rtt_ms: u64,
    /// Bottleneck rate, Mbit/s.
    #[arg(long, default_value_t = 100)]
    mbit: u64,
    /// Probability of losing each packet, each direction (0.005 = 0.5 %).
    #[arg(long, default_value_t = 0.005)]
    loss: f64,
    /// Bytes to send, in MB.
    #[arg(long, default_value_t = 20)]
    megabytes: u64,
    /// The bottleneck's drop-tail queue, KiB (default: one bandwidth-delay
    /// product, at least 64 KiB).
    #[arg(long)]
    queue_kib: Option<u64>,
    /// Runs with seeds 1..=N (different losses), each reported, and the median.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
}

fn main() {
    let args = Args::parse();
    let mut path = Path::symmetric(
        Duration::from_millis(args.rtt_ms),
        args.mbit,
        args.loss.clamp(0.0, 1.0),
    );
    if let Some(kib) = args.queue_kib {
        path.queue_bytes = kib.max(2) << 10;
    }
    let transfer = Transfer::bulk(args.megabytes * 1_000_000);
    let mut runs = Vec::new();
    let mut rates = Vec::new();
    for seed in 1..=args.seeds.max(1) {
        let outcome = Line::new(path).with_seed(seed).run(&transfer);
        rates.push(outcome.megabytes_per_second());
        let mut json = outcome.to_json();
        json["seed"] = seed.into();
        runs.push(json);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let line_rate = args.mbit as f64 / 8.0;
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "path": {"rtt_ms": args.rtt_ms, "mbit": args.mbit, "loss": args.loss},
            "megabytes": args.megabytes,
            "median_mb_per_s": median,
            "median_of_line_rate": (median / line_rate * 1000.0).round() / 1000.0,
            "runs": runs,
        }))
        .unwrap_or_default()
    );
}
