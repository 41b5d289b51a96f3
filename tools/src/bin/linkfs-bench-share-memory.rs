//! `linkfs-bench-share-memory --tree DIR`: the sharer's peak memory walking a
//! tree, at the stop after it (which saves the index), and when it starts
//! again from that saved index, as one JSON line.
//!
//! ```text
//! target/release/linkfs-bench-share-memory --tree tests-e2e/.tmp/scale-10000000-empty
//! ```
//!
//! Each run is the real `linkfs share DIR`, stopped with SIGTERM once its
//! index is complete (its "indexed" or "checked the kept index" line). A run
//! happens in a child of this program (`--one`), so the peak of that child's
//! only child, from `getrusage(RUSAGE_CHILDREN)`, includes the stop.
//! No visitor connects: this is the index and the walk, not serving.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Parser;
use linkfs_tools::bench::{peak_rss, round, sibling};

#[derive(Debug, Parser)]
struct Args {
    /// The tree to share (made before, e.g. by `linkfs-gen-tree`).
    #[arg(long)]
    tree: PathBuf,
    /// One run only, with this state folder (used by the program itself).
    #[arg(long, hide = true)]
    one: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(state) = &args.one {
        return one_run(&args.tree, state);
    }
    let state =
        std::env::temp_dir().join(format!("linkfs-bench-share-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let walk = run_in_child(&args.tree, &state)?;
    let restart = run_in_child(&args.tree, &state)?;
    let _ = std::fs::remove_dir_all(&state);
    let entries = walk["entries"].as_f64().unwrap_or(0.0).max(1.0);
    let per = |v: &serde_json::Value, k: &str| round(v[k].as_f64().unwrap_or(0.0) / entries, 1);
    println!(
        "{}",
        serde_json::json!({
            "bench": "share-memory",
            "tree": args.tree,
            "entries": walk["entries"],
            "walk": walk,
            "restart": restart,
            "bytes_per_entry": {
                "walking": per(&walk, "running_peak_bytes"),
                "walk_and_stop": per(&walk, "peak_bytes"),
                "restart_and_stop": per(&restart, "peak_bytes"),
            },
            "budget_bytes_per_entry": 64,
        })
    );
    Ok(())
}

fn run_in_child(tree: &Path, state: &Path) -> Result<serde_json::Value> {
    let out = Command::new(std::env::current_exe()?)
        .arg("--tree")
        .arg(tree)
        .arg("--one")
        .arg(state)
        .stderr(Stdio::inherit())
        .output()
        .context("run one share")?;
    if !out.status.success() {
        bail!("a run failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).context("one run's JSON")
}

fn one_run(tree: &Path, state: &Path) -> Result<()> {
    let started = Instant::now();
    let mut share = Command::new(sibling("linkfs")?)
        .arg("share")
        .arg(tree)
        .arg("--no-qr")
        .env("LINKFS_STATE_DIR", state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("start linkfs share")?;
    let pid = share.id();
    let mut lines = BufReader::new(share.stderr.take().context("stderr")?).lines();
    let summary = loop {
        let Some(line) = lines.next() else {
            bail!("linkfs share ended before its index was complete");
        };
        let line = line?;
        if line.starts_with("indexed ") || line.starts_with("checked the kept index") {
            break line;
        }
    };
    let indexed_s = started.elapsed().as_secs_f64();
    let running = peak_rss(pid)?;
    let drain = std::thread::spawn(move || lines.count());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    let status = share.wait()?;
    if !status.success() {
        bail!("linkfs share exited with {status} on SIGTERM");
    }
    let stopped_s = started.elapsed().as_secs_f64();
    drain.join().ok();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    let entries: u64 = summary
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .context("an entry count in the summary line")?;
    eprintln!("bench-share-memory: {summary}");
    println!(
        "{}",
        serde_json::json!({
            "entries": entries,
            "summary": summary,
            "indexed_s": round(indexed_s, 2),
            "stopped_s": round(stopped_s, 2),
            "running_peak_bytes": running,
            "peak_bytes": usage.max_rss() as u64 * 1024,
        })
    );
    Ok(())
}
