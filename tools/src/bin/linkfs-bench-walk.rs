//! `linkfs-bench-walk DIR`: times the share walk against
//! `find DIR -printf '%p %s %T@ %m\n' > /dev/null` (the same `lstat` per entry)
//! in the same run, and prints one JSON line:
//! `{"entries":E,"seconds":S,"entries_per_second":R,"find_seconds":F,"ratio_to_find":S/F,...}`.
//!
//! Both run once untimed first so both see a warm cache; then each is timed
//! `--runs` times, alternating, and the fastest run of each counts (the
//! machine is shared, so the minimum is the least noisy figure). The walk's
//! time includes a consumer receiving every batch, as `linkfs share` does.
//!
//! `--cold` drops the page cache, dentries and inodes (`/proc/sys/vm/drop_caches`,
//! needs root) before every timed run instead, with no warm-up: a share of a
//! folder nobody has looked at lately, where the disk's reads of inodes set the
//! pace, not the CPU.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use linkfs_peer::walk::{WalkOptions, Walker};

/// Time the share walk against find(1) on the same folder.
#[derive(Debug, Parser)]
#[command(name = "linkfs-bench-walk")]
struct Args {
    /// The folder to walk.
    dir: PathBuf,
    /// Lister threads of the walk.
    #[arg(long, default_value_t = WalkOptions::default().workers)]
    workers: usize,
    /// Timed runs of each (the fastest counts).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Drop dentries and inodes before each timed run (root only), no warm-up.
    #[arg(long)]
    cold: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let options = WalkOptions {
        workers: args.workers,
        ..WalkOptions::default()
    };

    if !args.cold {
        time_find(&args.dir)?;
        time_walk(&args.dir, &options)?;
    }
    let mut find_best = f64::INFINITY;
    let mut walk_best = f64::INFINITY;
    let mut entries = 0;
    for _ in 0..args.runs.max(1) {
        if args.cold {
            drop_inodes()?;
        }
        find_best = find_best.min(time_find(&args.dir)?);
        if args.cold {
            drop_inodes()?;
        }
        let (seconds, found) = time_walk(&args.dir, &options)?;
        walk_best = walk_best.min(seconds);
        entries = found;
    }

    println!(
        "{{\"entries\":{entries},\"seconds\":{walk_best:.4},\"entries_per_second\":{:.0},\"find_seconds\":{find_best:.4},\"ratio_to_find\":{:.3},\"workers\":{},\"runs\":{},\"cache\":\"{}\"}}",
        entries as f64 / walk_best,
        walk_best / find_best,
        args.workers,
        args.runs.max(1),
        if args.cold { "cold" } else { "warm" },
    );
    Ok(())
}

/// Write back dirty pages, then drop the page cache, dentries and inodes (`3`:
/// the disk's inode tables are read again), and give the kernel a
/// moment to free them before anything is timed.
fn drop_inodes() -> Result<()> {
    Command::new("sync").status().context("cannot run sync")?;
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .context("--cold needs root: cannot write /proc/sys/vm/drop_caches")?;
    std::thread::sleep(std::time::Duration::from_secs(3));
    Ok(())
}

fn time_find(dir: &Path) -> Result<f64> {
    let started = Instant::now();
    let status = Command::new("find")
        .arg(dir)
        .args(["-printf", "%p %s %T@ %m\\n"])
        .stdout(Stdio::null())
        .status()
        .context("cannot run find")?;
    let seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("find {} failed: {status}", dir.display());
    }
    Ok(seconds)
}

fn time_walk(dir: &Path, options: &WalkOptions) -> Result<(f64, u64)> {
    let started = Instant::now();
    let walk = Walker::new(dir, options.clone())?;
    let mut entries = 0u64;
    while let Some(batch) = walk.recv() {
        entries += batch.entries.len() as u64;
    }
    let summary = walk.join();
    let seconds = started.elapsed().as_secs_f64();
    if summary.entries != entries {
        bail!(
            "the walk announced {} entries but delivered {entries}",
            summary.entries
        );
    }
    for problem in &summary.errors {
        eprintln!("linkfs-bench-walk: skipped {problem}");
    }
    Ok((seconds, entries))
}
