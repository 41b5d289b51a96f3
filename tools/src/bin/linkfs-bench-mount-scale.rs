//! `linkfs-bench-mount-scale --tree DIR`: the mount against the disk on a big
//! tree (a generated 10M-entry tree, or a million names in one folder), as one
//! JSON line.
//!
//! Run as root inside a private network namespace, on a tree made before:
//!
//! ```text
//! bash tests-e2e/run exec -- target/release/linkfs-bench-mount-scale --tree tests-e2e/.tmp/scale-10000000-empty
//! ```
//!
//! It shares `DIR` with the real `linkfs share`, mounts it with the real
//! `linkfs mount`, and measures with ordinary commands and system calls:
//! - when the mount was up (its top folder listed) and when its index was
//!   complete (the mount's own line);
//! - `find` over the disk (warm: after a `find -printf %s` read every inode) and over the mount
//!   (the first, from the moment it was mounted, so the index still arriving
//!   is in it; and a second); the entries each lists must be equal in number;
//! - `ls -f` of the biggest folder, disk (warm) and mount (after the mount's
//!   `find`; cold: the kernel's dentries and inodes dropped first and 3 s for it
//!   to free them, median of three; and once at once with the page cache dropped
//!   too, programs' pages included);
//! - looking a name up (`stat`) in the biggest folder and in folders of at most
//!   ten entries, the kernel's dentry cache dropped before each and the folder
//!   itself looked up again first, the two kinds of folder in turns (p50, p99);
//! - the first byte of files in each (where the tree's files have bytes);
//! - a live change: a file made on disk in each, until the mount shows it
//!   (p50, p99);
//! - the mount's and the sharer's peak memory, per entry;
//! - then a later visitor: a second mount of the same share once its walk is
//!   done (the first mount ended), ready and `find` over it at once;
//! - then a third, whose `find` starts once its index is complete;
//! - the virtual machine's idle polling, where there is one.
//!
//! The tree is only read; the live changes' files are removed at the end.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use linkfs_tools::bench::{
    drop_caches, mount_index_complete_s, ms, peak_rss, percentile, round, start_mount,
    start_share_niced, timed,
};

#[derive(Debug, Parser)]
struct Args {
    /// The tree to share (made before, e.g. by `linkfs-gen-tree`).
    #[arg(long)]
    tree: PathBuf,
    /// Where the mount point goes.
    #[arg(long, default_value = "tests-e2e/.tmp/bench-mount-scale")]
    work: PathBuf,
    /// Samples of each lookup, first byte and live change.
    #[arg(long, default_value_t = 100)]
    samples: usize,
    /// The sharer's nice value (its own session's, see `start_share_niced`):
    /// in real use it runs on another machine, and on one machine of 2 cores
    /// its walk otherwise takes the cores the mount and `find` wait for.
    /// `--sharer-nice 0` measures both at one priority.
    #[arg(long, default_value_t = 19)]
    sharer_nice: i32,
}

/// What one walk of the disk found.
struct Walked {
    entries: u64,
    /// Each folder's entries (relative path -> count).
    folders: HashMap<PathBuf, u64>,
}

/// `find DIR` (its output counted, not kept); the seconds it took and the entries below DIR.
fn find(dir: &Path) -> Result<(f64, u64)> {
    let t = Instant::now();
    let mut child = Command::new("find")
        .arg(dir)
        .arg("-mindepth")
        .arg("1")
        .stdout(Stdio::piped())
        .spawn()
        .context("start find")?;
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().context("find stdout")?);
    let mut lines = 0u64;
    let mut buf = Vec::new();
    while out.read_until(b'\n', &mut buf)? > 0 {
        lines += 1;
        buf.clear();
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("find {} failed: {status}", dir.display());
    }
    Ok((t.elapsed().as_secs_f64(), lines))
}

/// A virtual machine's idle polling (Linux's `haltpoll` driver): how long an
/// idle core polls before it halts. At 0 each halted core costs the host a
/// wake-up, and every FUSE round trip wakes one (`docs/benchmarks.md`). `null`
/// where the driver is not loaded (bare metal, other hypervisors' guests).
fn guest_halt_poll_ns() -> serde_json::Value {
    std::fs::read_to_string("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(serde_json::Value::Null, Into::into)
}

/// Every folder of `root` and how many entries it holds.
fn folders(root: &Path) -> Result<Walked> {
    let mut walked = Walked {
        entries: 0,
        folders: HashMap::new(),
    };
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let mut n = 0;
        for e in std::fs::read_dir(root.join(&rel))? {
            let e = e?;
            n += 1;
            if e.file_type()?.is_dir() {
                todo.push(rel.join(e.file_name()));
            }
        }
        walked.entries += n;
        walked.folders.insert(rel, n);
    }
    Ok(walked)
}

/// Up to `n` entries of folder `rel` (files first), spread over it.
fn entries_of(root: &Path, rel: &Path, n: usize) -> Result<Vec<PathBuf>> {
    let mut names: Vec<(bool, OsString)> = Vec::new();
    for e in std::fs::read_dir(root.join(rel))? {
        let e = e?;
        names.push((!e.file_type()?.is_file(), e.file_name()));
    }
    names.sort();
    let step = (names.len() / n.max(1)).max(1);
    Ok(names
        .into_iter()
        .step_by(step)
        .take(n)
        .map(|(_, name)| rel.join(name))
        .collect())
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn p50_p99(v: &[f64]) -> serde_json::Value {
    serde_json::json!({
        "p50": round(percentile(v, 0.5), 3),
        "p99": round(percentile(v, 0.99), 3),
        "samples": v.len(),
    })
}

/// `stat` of each path in the mount, the dentry cache dropped before each and
/// the path's folder looked up again (not timed), so each figure is one lookup
/// in that folder whatever its depth: ms.
/// One name looked up (`stat`) with the kernel's dentry cache dropped first
/// and its folder looked up again: ms.
fn lookup(mnt: &Path, p: &Path) -> Result<f64> {
    drop_caches("2");
    if let Some(folder) = p.parent() {
        std::fs::symlink_metadata(mnt.join(folder))
            .with_context(|| format!("stat {} in the mount", folder.display()))?;
    }
    let t = Instant::now();
    std::fs::symlink_metadata(mnt.join(p))
        .with_context(|| format!("stat {} in the mount", p.display()))?;
    Ok(ms(t.elapsed()))
}

/// Lookups in two folders taken in turns, so that what the machine does
/// meanwhile (freeing the tens of millions of dentries the first drops let
/// go, for seconds after a `find` at 10M) falls on both alike, not on the
/// folder measured first: ms each, sorted.
fn lookups_in_turns(mnt: &Path, a: &[PathBuf], b: &[PathBuf]) -> Result<(Vec<f64>, Vec<f64>)> {
    let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
    for i in 0..a.len().max(b.len()) {
        if let Some(p) = a.get(i) {
            out_a.push(lookup(mnt, p)?);
        }
        if let Some(p) = b.get(i) {
            out_b.push(lookup(mnt, p)?);
        }
    }
    Ok((sorted(out_a), sorted(out_b)))
}

/// open + one byte of each non-empty file, through the mount: ms.
fn first_bytes(tree: &Path, mnt: &Path, paths: &[PathBuf]) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::symlink_metadata(tree.join(p))?;
        if !meta.is_file() || meta.len() == 0 {
            continue;
        }
        let t = Instant::now();
        let mut f = std::fs::File::open(mnt.join(p))?;
        let mut b = [0u8; 1];
        f.read_exact(&mut b)?;
        out.push(ms(t.elapsed()));
    }
    Ok(sorted(out))
}

/// A file made on disk in folder `rel`, `n` times, each until the mount shows
/// it with its bytes: ms. The files are removed after.
fn live_changes(tree: &Path, mnt: &Path, rel: &Path, n: usize, tag: &str) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    let mut made = Vec::new();
    for i in 0..n {
        let name = format!("linkfs-bench-live {tag} {i}.txt");
        let body = format!("made by linkfs-bench-mount-scale, {tag} {i}\n");
        let disk = tree.join(rel).join(&name);
        let t = Instant::now();
        std::fs::write(&disk, &body)?;
        made.push(disk);
        let seen = mnt.join(rel).join(&name);
        loop {
            if std::fs::read(&seen).is_ok_and(|b| b == body.as_bytes()) {
                break;
            }
            if t.elapsed() > Duration::from_secs(30) {
                // Not left in the tree: the next run would count it.
                for m in &made {
                    let _ = std::fs::remove_file(m);
                }
                bail!("{name} made on disk was not in the mount after 30 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        out.push(ms(t.elapsed()));
    }
    for m in made {
        let _ = std::fs::remove_file(m);
    }
    let in_order: Vec<u64> = out.iter().map(|v| v.round() as u64).collect();
    eprintln!(
        "bench-mount-scale: live changes in {}, in order (ms): {in_order:?}",
        rel.display()
    );
    Ok(sorted(out))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let tree = args
        .tree
        .canonicalize()
        .with_context(|| format!("no tree at {}", args.tree.display()))?;

    eprintln!("bench-mount-scale: walking {} ...", tree.display());
    let walked = folders(&tree)?;
    let (biggest, biggest_n) = walked
        .folders
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(p, n)| (p.clone(), *n))
        .context("no folders")?;
    let mut small: Vec<&PathBuf> = walked
        .folders
        .iter()
        .filter(|(_, n)| (1..=10).contains(*n))
        .map(|(p, _)| p)
        .collect();
    small.sort();
    // Warm: every inode read once (the sharer's walk reads them all; `find` alone does not).
    let stat_walk = timed(Command::new("find").arg(&tree).args(["-printf", "%s\\n"]))?;
    let (find_disk, disk_entries) = find(&tree)?;
    if disk_entries != walked.entries {
        bail!(
            "find listed {disk_entries} entries, the walk {}",
            walked.entries
        );
    }
    timed(Command::new("ls").arg("-f").arg(tree.join(&biggest)))?;
    let ls_disk = timed(Command::new("ls").arg("-f").arg(tree.join(&biggest)))?;
    eprintln!(
        "bench-mount-scale: {disk_entries} entries, find {find_disk:.2} s; biggest folder {} ({biggest_n}), ls -f {ls_disk:.3} s",
        biggest.display()
    );

    let (link, share) = start_share_niced(&tree, Some(args.sharer_nice))?;
    let linked = Instant::now();
    std::fs::create_dir_all(&args.work)?;
    let mnt = args.work.join("mnt");
    std::fs::create_dir_all(&mnt)?;
    let mnt = mnt.canonicalize()?;
    let (mount, mounted_s) = start_mount(&link, &mnt)?;
    // Ready: the top of the share listed.
    let first = std::fs::read_dir(&mnt)?.next().transpose()?;
    let ready_s = linked.elapsed().as_secs_f64();
    if first.is_none() {
        bail!("the mount's top folder is empty");
    }
    let (find_mount, mount_entries) = find(&mnt)?;
    // The mount is up before its index is complete: when that was.
    let index_complete_s = mount_index_complete_s(&mnt, Duration::from_secs(600))?;
    let (find_mount_again, _) = find(&mnt)?;
    if mount_entries != disk_entries {
        bail!("find listed {mount_entries} entries in the mount, {disk_entries} on disk");
    }
    eprintln!(
        "bench-mount-scale: ready in {ready_s:.2} s; find over the mount {find_mount:.2} s, again {find_mount_again:.2} s"
    );

    let ls_mount_warm = timed(Command::new("ls").arg("-f").arg(mnt.join(&biggest)))?;
    // Cold: the kernel's dentries and inodes dropped ("2"), so every name comes from
    // the mount again, three times, the median kept. The kernel frees what it
    // dropped (tens of millions of dentries and inodes after the `find`s at 10M) in
    // the background for a while after the write returns, on the same 2 cores, so
    // each listing waits SETTLE first: a user's cold folder comes without that.
    // Dropping the page cache too ("3") also drops the pages of `ls`, libc and
    // linkfs's own code, and the listing then waits on the disk to read programs
    // back: kept as a figure of its own, once, at once, not held to the budget.
    const SETTLE: Duration = Duration::from_secs(3);
    let mut ls_cold_runs = Vec::new();
    for _ in 0..3 {
        drop_caches("2");
        std::thread::sleep(SETTLE);
        ls_cold_runs.push(timed(Command::new("ls").arg("-f").arg(mnt.join(&biggest)))?);
    }
    let ls_cold_runs = sorted(ls_cold_runs);
    let ls_mount_cold = ls_cold_runs[1];
    drop_caches("3");
    let ls_mount_all_dropped = timed(Command::new("ls").arg("-f").arg(mnt.join(&biggest)))?;

    let n = args.samples;
    let in_big = entries_of(&tree, &biggest, n)?;
    let mut in_small = Vec::new();
    for rel in small.iter().step_by((small.len() / n.max(1)).max(1)) {
        in_small.extend(entries_of(&tree, rel, 1)?);
        if in_small.len() == n {
            break;
        }
    }
    // Fewer small folders than samples (a tree of one big folder has one: its
    // top): the same names again, the dentry cache dropped before each.
    let distinct = in_small.len();
    for i in distinct..if distinct == 0 { 0 } else { n } {
        in_small.push(in_small[i % distinct].clone());
    }
    let (stat_big, stat_small) = lookups_in_turns(&mnt, &in_big, &in_small)?;
    let first_big = first_bytes(&tree, &mnt, &in_big)?;
    let first_small = first_bytes(&tree, &mnt, &in_small)?;
    let live_big = live_changes(&tree, &mnt, &biggest, n.min(40), "big")?;
    let live_small = match small.first() {
        Some(rel) => live_changes(&tree, &mnt, rel, n.min(40), "small")?,
        None => Vec::new(),
    };

    let mount_peak = peak_rss(mount.pid())?;
    let share_peak = peak_rss(share.pid())?;
    drop(mount);

    // A later visitor: a second mount of the same share, its walk long done
    // (most mounts come after the sharer has walked; the first one above came
    // with the link). Nothing of the first mount is kept: it ended above.
    let mnt_later = args.work.join("mnt-later");
    std::fs::create_dir_all(&mnt_later)?;
    let mnt_later = mnt_later.canonicalize()?;
    let later_started = Instant::now();
    let (later, _) = start_mount(&link, &mnt_later)?;
    std::fs::read_dir(&mnt_later)?.next().transpose()?;
    let later_ready_s = later_started.elapsed().as_secs_f64();
    let (find_later, later_entries) = find(&mnt_later)?;
    let later_complete_s = mount_index_complete_s(&mnt_later, Duration::from_secs(600))?;
    if later_entries != disk_entries {
        bail!("find listed {later_entries} entries in the later mount, {disk_entries} on disk");
    }
    eprintln!(
        "bench-mount-scale: a later mount ready in {later_ready_s:.2} s; find over it {find_later:.2} s; its index complete at {later_complete_s:.2} s"
    );
    drop(later);

    // A third visitor, who lists only once its index is complete: the mount
    // alone, without the index arriving beside `find` on the same cores.
    let (settled, _) = start_mount(&link, &mnt_later)?;
    let settled_complete_s = mount_index_complete_s(&mnt_later, Duration::from_secs(600))?;
    let (find_settled, settled_entries) = find(&mnt_later)?;
    if settled_entries != disk_entries {
        bail!("find listed {settled_entries} entries in the third mount, {disk_entries} on disk");
    }
    eprintln!(
        "bench-mount-scale: a third mount's index complete at {settled_complete_s:.2} s; find over it then {find_settled:.2} s"
    );
    drop(settled);
    drop(share);

    let ratio = |a: &[f64], b: &[f64], p: f64| {
        if a.is_empty() || b.is_empty() {
            serde_json::Value::Null
        } else {
            round(percentile(a, p) / percentile(b, p), 2).into()
        }
    };
    let figures = serde_json::json!({
        "bench": "mount-scale",
        "tree": tree.display().to_string(),
        "sharer_nice": args.sharer_nice,
        "entries": disk_entries,
        "folders": walked.folders.len(),
        "biggest_folder": biggest.display().to_string(),
        "biggest_folder_entries": biggest_n,
        "small_folders": small.len(),
        "find_disk_warm_s": round(find_disk, 3),
        "find_printf_size_disk_s": round(stat_walk, 3),
        "mounted_s": round(mounted_s, 3),
        "ready_s": round(ready_s, 3),
        "index_complete_s": round(index_complete_s, 3),
        "find_mount_s": round(find_mount, 3),
        "find_mount_again_s": round(find_mount_again, 3),
        "find_mount_vs_disk": round(find_mount / find_disk, 2),
        "later_mount_ready_s": round(later_ready_s, 3),
        "later_mount_index_complete_s": round(later_complete_s, 3),
        "find_later_mount_s": round(find_later, 3),
        "find_later_mount_vs_disk": round(find_later / find_disk, 2),
        "third_mount": { "index_complete_s": round(settled_complete_s, 3),
                         "find_once_complete_s": round(find_settled, 3),
                         "find_once_complete_vs_disk": round(find_settled / find_disk, 2) },
        "guest_halt_poll_ns": guest_halt_poll_ns(),
        "ls_f_biggest_disk_warm_s": round(ls_disk, 3),
        "ls_f_biggest_mount_warm_s": round(ls_mount_warm, 3),
        "ls_f_biggest_mount_cold_s": round(ls_mount_cold, 3),
        "ls_f_biggest_mount_cold_runs_s": ls_cold_runs.iter().map(|s| round(*s, 3)).collect::<Vec<_>>(),
        "ls_f_mount_cold_vs_disk": round(ls_mount_cold / ls_disk, 2),
        "ls_f_biggest_mount_page_cache_dropped_too_s": round(ls_mount_all_dropped, 3),
        "stat_ms": { "biggest": p50_p99(&stat_big), "small": p50_p99(&stat_small),
                     "p50_ratio": ratio(&stat_big, &stat_small, 0.5), "p99_ratio": ratio(&stat_big, &stat_small, 0.99) },
        "first_byte_ms": { "biggest": p50_p99(&first_big), "small": p50_p99(&first_small),
                           "p50_ratio": ratio(&first_big, &first_small, 0.5), "p99_ratio": ratio(&first_big, &first_small, 0.99) },
        "live_ms": { "biggest": p50_p99(&live_big), "small": p50_p99(&live_small),
                     "p50_ratio": ratio(&live_big, &live_small, 0.5), "p99_ratio": ratio(&live_big, &live_small, 0.99) },
        "mount_peak_rss_bytes": mount_peak,
        "mount_bytes_per_entry": round(mount_peak as f64 / disk_entries as f64, 1),
        "sharer_peak_rss_bytes": share_peak,
        "sharer_bytes_per_entry": round(share_peak as f64 / disk_entries as f64, 1),
        "budgets": { "ready_s": 2, "find_mount_vs_disk": 2, "ls_f_mount_vs_disk": 2,
                     "mount_bytes_per_entry": 32, "biggest_vs_small": 2 },
    });
    println!("{figures}");
    Ok(())
}
