//! What the benches that drive real `linkfs` processes share: the processes
//! (a share, a mount, killed when dropped), the kernel's caches, and the
//! figures' arithmetic.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A tool beside this one in the target directory (`linkfs`, `linkfs-gen-tree`).
pub fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(exe.with_file_name(name))
}

/// Drops the kernel's caches (`"2"`: dentries and inodes, `"3"`: the page
/// cache too). Needs root; without it, the figures are warm-cache ones.
pub fn drop_caches(what: &str) {
    let _ = std::fs::write("/proc/sys/vm/drop_caches", what);
}

/// The value at fraction `p` of `sorted` (nearest rank), 0 if empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

/// Runs `cmd` (its output thrown away); the seconds it took.
pub fn timed(cmd: &mut Command) -> Result<f64> {
    let t = Instant::now();
    let status = cmd.stdout(Stdio::null()).status()?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(t.elapsed().as_secs_f64())
}

/// A child process ended when dropped: SIGTERM, up to 10 s to go, then SIGKILL.
pub struct Killed(pub Child);

impl Killed {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `linkfs share TREE` with nothing kept from an earlier run (every run
/// walks the tree): the link it printed first, and the process.
pub fn start_share(tree: &Path) -> Result<(String, Killed)> {
    start_share_niced(tree, None)
}

/// [`start_share`], at nice value `nice` if given: a figure of the visitor's
/// side measured on one machine, where the sharer runs on another in real
/// use. With the kernel's autogroups (on by default on most desktop Linux) a
/// nice value counts only within one session, so the sharer gets a session
/// of its own (`setsid`, same pid) and that session's group the nice value
/// (`/proc/PID/autogroup`), as the page's scale test does.
pub fn start_share_niced(tree: &Path, nice: Option<i32>) -> Result<(String, Killed)> {
    let linkfs = sibling("linkfs")?;
    let mut command = match nice {
        Some(n) => {
            let mut c = Command::new("setsid");
            c.args(["nice", "-n", &n.to_string()]).arg(linkfs);
            c
        }
        None => Command::new(linkfs),
    };
    let mut share = command
        .arg("share")
        .arg(tree)
        .arg("--no-qr")
        .env(
            "LINKFS_STATE_DIR",
            std::env::temp_dir().join(format!("linkfs-bench-state-{}", std::process::id())),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("start linkfs share")?;
    let mut link = String::new();
    BufReader::new(share.stdout.take().context("share stdout")?).read_line(&mut link)?;
    if let Some(n) = nice {
        // The link is printed after exec, so the session is the sharer's now.
        let group = format!("/proc/{}/autogroup", share.id());
        let ours = std::fs::read_to_string("/proc/self/autogroup").unwrap_or_default();
        match std::fs::read_to_string(&group) {
            Ok(theirs) if theirs != ours => std::fs::write(&group, n.to_string())
                .with_context(|| format!("set the nice value of {group}"))?,
            // No autogroups here: the nice value alone does it.
            _ => {}
        }
    }
    Ok((link.trim().to_owned(), Killed(share)))
}

/// `linkfs mount LINK MNT`, once the kernel lists `mnt` as mounted (at most
/// 120 s): the process and the seconds that took.
pub fn start_mount(link: &str, mnt: &Path) -> Result<(Killed, f64)> {
    let started = Instant::now();
    let log = std::fs::File::create(mount_log(mnt)).context("create the mount's log")?;
    let mount = Killed(
        Command::new(sibling("linkfs")?)
            .args(["mount", link])
            .arg(mnt)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("start linkfs mount")?,
    );
    while !is_mounted(mnt) {
        if started.elapsed() > Duration::from_secs(120) {
            bail!("{} not mounted after 120 s", mnt.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((mount, started.elapsed().as_secs_f64()))
}

/// Where [`start_mount`] puts the mount's stderr: beside the mount point.
pub fn mount_log(mnt: &Path) -> std::path::PathBuf {
    mnt.with_extension("log")
}

/// Seconds from its start to a complete index, as the mount's own line says
/// ("index complete: ... in S s"); waits for that line up to `within`.
pub fn mount_index_complete_s(mnt: &Path, within: Duration) -> Result<f64> {
    let deadline = Instant::now() + within;
    loop {
        let log = std::fs::read_to_string(mount_log(mnt)).unwrap_or_default();
        let secs = log
            .lines()
            .find_map(|l| l.strip_prefix("linkfs: index complete: "))
            .and_then(|l| l.rsplit_once(" in "))
            .and_then(|(_, t)| t.trim().strip_suffix(" s"))
            .and_then(|t| t.parse::<f64>().ok());
        if let Some(secs) = secs {
            return Ok(secs);
        }
        if Instant::now() > deadline {
            bail!("the mount did not say its index was complete within {within:?}:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn is_mounted(mnt: &Path) -> bool {
    let want = mnt.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&want))
}

/// The most memory process `pid` has held so far (VmHWM), in bytes.
pub fn peak_rss(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid} is gone"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .context("no VmHWM in /proc/PID/status")
}
