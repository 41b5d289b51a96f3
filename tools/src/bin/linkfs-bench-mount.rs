//! `linkfs-bench-mount [--work DIR]`: the native receiver's figures, as one JSON line.
//!
//! Run as root inside a private network namespace:
//!
//! ```text
//! bash tests-e2e/run exec -- target/release/linkfs-bench-mount
//! ```
//!
//! Makes (once, cached in `--work`) a tree of 200,000 files with a
//! 100,000-entry folder (`linkfs-gen-tree`) plus a 1 GiB random file, shares it
//! with the real `linkfs share`, mounts it with the real `linkfs mount`, and
//! measures with ordinary system calls:
//! - `ls -l` of the 100,000-entry folder on the mount (kernel caches dropped
//!   first) and on local disk (warm);
//! - `stat` of a file in that folder vs in a 1-entry folder (kernel dentry and
//!   inode caches dropped before each of 30 samples; medians);
//! - first byte of 200 distinct small files (open + read 1 byte; p50, p99);
//! - sequential read of the 1 GiB file through the mount (1 MiB reads, page
//!   cache dropped first) and through `linkfs get`.
//!
//! The raw data channel's figure for comparison comes from
//! `linkfs-bench-channel --same-host` (the same tuning `linkfs share` applies to
//! a native visitor on this host).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use linkfs_tools::bench::{
    drop_caches, mount_index_complete_s, ms, percentile, round, sibling, start_mount, start_share,
    timed,
};

#[derive(Debug, Parser)]
struct Args {
    /// Where the tree, the mount point and downloads go.
    #[arg(long, default_value = "tests-e2e/.tmp/bench-mount")]
    work: PathBuf,
    /// Files in the generated tree (the big folder holds 100,000 of them).
    #[arg(long, default_value_t = 200_000)]
    files: u64,
    /// MiB of the large file.
    #[arg(long, default_value_t = 1024)]
    large_mib: u64,
}

fn ensure_tree(args: &Args) -> Result<PathBuf> {
    let tree = args.work.join("tree");
    let marker = args.work.join("tree.done");
    let want = format!("{} files, {} MiB, shape 2\n", args.files, args.large_mib);
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(want.as_str()) {
        return Ok(tree);
    }
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(&args.work)?;
    eprintln!("bench-mount: generating {} files ...", args.files);
    let status = Command::new(sibling("linkfs-gen-tree")?)
        .args([
            "--files",
            &args.files.to_string(),
            "--big-dir",
            "100000",
            "--out",
        ])
        .arg(&tree)
        .stdout(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("linkfs-gen-tree failed");
    }
    let large = tree.join("large");
    std::fs::create_dir(&large)?;
    let mut out = std::fs::File::create(large.join("big.bin"))?;
    let mut xof = blake3::Hasher::new().update(b"bench-mount").finalize_xof();
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..args.large_mib {
        xof.fill(&mut buf);
        std::io::Write::write_all(&mut out, &buf)?;
    }
    out.sync_all()?;
    std::fs::write(&marker, want)?;
    Ok(tree)
}

/**
 * CPU seconds (user + system, with its reaped children) process `pid` has used so far.
 * /proc counts in USER_HZ ticks, 100 a second in Linux's ABI.
 */
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // After `comm` (which may hold spaces): field 3 (state) first, so utime..cstime
    // (fields 14-17) are 11..15.
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    (11..15)
        .filter_map(|i| fields.get(i)?.parse::<f64>().ok())
        .sum::<f64>()
        / 100.0
}

/// CPU seconds of this process's reaped children so far (`linkfs get` once it exits).
fn children_cpu_seconds() -> f64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).map_or(
        f64::NAN,
        |u| {
            let t = |v: nix::sys::time::TimeVal| v.tv_sec() as f64 + v.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        },
    )
}

/// Each side's CPU seconds per GB of `bytes`, and the cores they kept busy over `wall` seconds.
fn cpu_figures(bytes: u64, wall: f64, sides: &[(&str, f64)]) -> serde_json::Value {
    let gb = bytes as f64 / 1e9;
    let mut out = serde_json::Map::new();
    for (side, secs) in sides {
        out.insert(format!("{side}_s_per_gb"), round(secs / gb, 2).into());
    }
    let total: f64 = sides.iter().map(|(_, s)| s).sum();
    out.insert("cores_busy".into(), round(total / wall, 2).into());
    out.into()
}

fn main() -> Result<()> {
    let args = Args::parse();
    let tree = ensure_tree(&args)?.canonicalize()?;
    let linkfs = sibling("linkfs")?;

    let (link, share) = start_share(&tree)?;
    let share_pid = share.0.id();

    let mnt = args.work.join("mnt").canonicalize().or_else(|_| {
        std::fs::create_dir_all(args.work.join("mnt"))?;
        args.work.join("mnt").canonicalize()
    })?;
    let (mount, mounted_s) = start_mount(&link, &mnt)?;
    // The mount is up once its top folder is whole; the listing below is
    // of a mount that holds its whole index, as before that was so.
    let index_complete_s = mount_index_complete_s(&mnt, Duration::from_secs(300))?;

    // ls -l of the 100,000-entry folder.
    let big = "big-100000";
    drop_caches("3");
    let ls_mount = timed(Command::new("ls").arg("-l").arg(mnt.join(big)))?;
    let ls_mount_warm = timed(Command::new("ls").arg("-l").arg(mnt.join(big)))?;
    timed(Command::new("ls").arg("-l").arg(tree.join(big)))?;
    let ls_local = timed(Command::new("ls").arg("-l").arg(tree.join(big)))?;

    // stat in the big folder vs in the 1-entry folder.
    let mut names: Vec<PathBuf> = std::fs::read_dir(tree.join(big))?
        .filter_map(|e| e.ok().map(|e| e.file_name().into()))
        .collect();
    names.sort();
    let single: PathBuf = std::fs::read_dir(tree.join("single"))?
        .next()
        .context("the one-file folder is empty")??
        .file_name()
        .into();
    let mut stat_big = Vec::new();
    let mut stat_small = Vec::new();
    for i in 0..30 {
        let name = &names[(i * 3331) % names.len()];
        drop_caches("2");
        let t = Instant::now();
        std::fs::metadata(mnt.join(big).join(name))?;
        stat_big.push(ms(t.elapsed()));
        drop_caches("2");
        let t = Instant::now();
        std::fs::metadata(mnt.join("single").join(&single))?;
        stat_small.push(ms(t.elapsed()));
    }
    stat_big.sort_by(f64::total_cmp);
    stat_small.sort_by(f64::total_cmp);

    // First byte of 200 distinct small files.
    let mut first = Vec::new();
    for name in names.iter().step_by(names.len() / 400 + 1) {
        let local = tree.join(big).join(name);
        if std::fs::metadata(&local)?.len() == 0 {
            continue;
        }
        let t = Instant::now();
        let mut f = std::fs::File::open(mnt.join(big).join(name))?;
        let mut b = [0u8; 1];
        f.read_exact(&mut b)?;
        first.push(ms(t.elapsed()));
        if first.len() == 200 {
            break;
        }
    }
    first.sort_by(f64::total_cmp);

    // Sequential read of the large file through the mount.
    drop_caches("3");
    let large = args.large_mib << 20;
    let cpu_before = (cpu_seconds(share_pid), cpu_seconds(mount.0.id()));
    let t = Instant::now();
    let mut f = std::fs::File::open(mnt.join("large/big.bin"))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let mount_secs = t.elapsed().as_secs_f64();
    let mount_cpu = cpu_figures(
        large,
        mount_secs,
        &[
            ("sharer", cpu_seconds(share_pid) - cpu_before.0),
            ("mount", cpu_seconds(mount.0.id()) - cpu_before.1),
        ],
    );
    if total != large {
        bail!("read {total} bytes through the mount, expected {large}");
    }
    drop(mount);

    // The same file through `linkfs get`.
    let out = args.work.join("get-out");
    let _ = std::fs::remove_dir_all(&out);
    let cpu_before = (cpu_seconds(share_pid), children_cpu_seconds());
    let t = Instant::now();
    let got = Command::new(&linkfs)
        .args(["get", &link, "large", "--out"])
        .arg(&out)
        .output()?;
    let get_cpu = cpu_figures(
        large,
        t.elapsed().as_secs_f64(),
        &[
            ("sharer", cpu_seconds(share_pid) - cpu_before.0),
            ("get", children_cpu_seconds() - cpu_before.1),
        ],
    );
    let stderr = String::from_utf8_lossy(&got.stderr);
    if !got.status.success() {
        bail!("linkfs get failed: {stderr}");
    }
    let get_secs: f64 = stderr
        .split(" bytes in ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .context("no timing in linkfs get's output")?;
    let _ = std::fs::remove_dir_all(&out);
    drop(share);

    let figures = serde_json::json!({
        "files": args.files,
        "mount_ready_seconds": round(mounted_s, 3),
        "mount_index_complete_seconds": round(index_complete_s, 3),
        "ls_l_big_dir_mount_seconds": round(ls_mount, 3),
        "ls_l_big_dir_mount_warm_seconds": round(ls_mount_warm, 3),
        "ls_l_big_dir_local_seconds": round(ls_local, 3),
        "stat_big_dir_ms_p50": round(percentile(&stat_big, 0.5), 3),
        "stat_small_dir_ms_p50": round(percentile(&stat_small, 0.5), 3),
        "stat_big_vs_small": round(percentile(&stat_big, 0.5) / percentile(&stat_small, 0.5), 2),
        "first_byte_ms_p50": round(percentile(&first, 0.5), 3),
        "first_byte_ms_p99": round(percentile(&first, 0.99), 3),
        "first_byte_samples": first.len(),
        "large_file_bytes": large,
        "mount_read_mb_per_s": round(large as f64 / mount_secs / 1e6, 1),
        "get_mb_per_s": round(large as f64 / get_secs / 1e6, 1),
        // CPU seconds per GB of each side, and the cores they kept busy (2 here).
        "mount_read_cpu": mount_cpu,
        "get_cpu": get_cpu,
    });
    println!("{figures}");
    Ok(())
}
