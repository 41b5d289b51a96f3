//! `linkfs mount`, `linkfs ls`, `linkfs get`: the native receiver's commands.
//!
//! Each connects to the link's sharer, waits for the whole index (a progress bar
//! on stderr: entries received of announced), then works from the local index.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use linkfs_core::EndReason;
use linkfs_peer::transport::{IcePolicy, TransportConfig};
use linkfs_peer::visit::get::{GetOptions, get};
use linkfs_peer::visit::listing::{ListOptions, list};
use linkfs_peer::visit::mount::{LISTING_WAIT, LinkFs, MountOptions};
use linkfs_peer::visit::{Client, VisitError, open};
use linkfs_proto::EntryId;

#[derive(Debug, clap::Args)]
pub struct ConnectArgs {
    /// The share's link (http://host:port/#room.secret), as `linkfs share` printed it.
    link: String,
    /// Local addresses for peer-to-peer traffic (default: 127.0.0.1 and every
    /// address of an up interface, IPv4 and IPv6).
    #[arg(long = "webrtc-bind", value_name = "IP:PORT", global = true)]
    webrtc_bind: Vec<SocketAddr>,
    /// `relay`: connect only through the relay's TURN server (the sharer never
    /// learns this machine's addresses; fails if the relay offers no TURN);
    /// `all` (default): direct when possible.
    #[arg(long, value_name = "POLICY", default_value = "all", global = true)]
    ice_policy: IcePolicy,
    /// More connections to open beside the first for bulk reads on a path
    /// with a round trip of 4 ms or more (a loss then slows only one of
    /// them); 0: one connection only.
    #[arg(long, value_name = "N", default_value_t = linkfs_peer::lanes::MAX_LANES, global = true)]
    lanes: u8,
    /// The link's password, from the first line of FILE (without it, a link
    /// that needs one asks for it when run in a terminal).
    #[arg(long, value_name = "FILE", global = true)]
    password_file: Option<PathBuf>,
}

/// Where the link's password comes from, if the sharer asks for one.
fn password_source(
    args: &ConnectArgs,
) -> anyhow::Result<Option<linkfs_peer::visit::PasswordSource>> {
    use std::io::IsTerminal;
    if let Some(file) = &args.password_file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the password from {}", file.display()))?;
        let password = text.lines().next().unwrap_or("").to_owned();
        return Ok(Some(std::sync::Arc::new(move || Some(password.clone()))));
    }
    if std::io::stdin().is_terminal() {
        return Ok(Some(std::sync::Arc::new(|| {
            rpassword::prompt_password("linkfs: this link needs a password: ").ok()
        })));
    }
    Ok(None)
}

#[derive(Debug, clap::Args)]
pub struct MountArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// An empty folder to mount the share on.
    mountpoint: PathBuf,
    /// Most MiB of file data cached in memory.
    #[arg(long, default_value_t = 64)]
    cache_mib: u64,
    /// Threads serving the kernel's requests.
    #[arg(long, default_value_t = 4)]
    threads: usize,
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// A folder or file in the share (default: the top).
    #[arg(default_value = "")]
    path: std::ffi::OsString,
    /// One JSON object per line: path, kind, size, mtime, mode (and target for
    /// symlinks); a name that is not UTF-8 also as `path_hex` (`target_hex`).
    #[arg(long)]
    json: bool,
    /// Everything below PATH, by path.
    #[arg(short = 'R', long)]
    recursive: bool,
}

#[derive(Debug, clap::Args)]
pub struct PutArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Files and folders to add (a folder with everything in it).
    #[arg(required = true, value_name = "FILE|DIR")]
    paths: Vec<PathBuf>,
    /// Where to put them in the link's folder (made if missing; default: at its top).
    #[arg(long, value_name = "PATH", default_value = "", value_parser = folder_in_link)]
    to: String,
}

/// A `--to` folder: inside the link's folder, so never from the root.
fn folder_in_link(to: &str) -> Result<String, FromTheRoot> {
    if to.starts_with('/') {
        return Err(FromTheRoot(to.to_owned()));
    }
    Ok(to.to_owned())
}

/// A `--to` folder that starts at the root.
#[derive(Debug, thiserror::Error)]
#[error(
    "'{0}' starts at the root ('/'); --to names a folder inside the link's folder, like photos/2026"
)]
struct FromTheRoot(String);

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// A folder or file in the share (default: all of it).
    #[arg(default_value = "")]
    path: std::ffi::OsString,
    /// Where to put it (created if missing). Nothing is ever written outside it.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Files of more than 4 MiB downloaded at once (smaller ones go up to 256 at once beside them)
    #[arg(long, default_value_t = 8)]
    parallel: usize,
}

fn transport(args: &ConnectArgs) -> TransportConfig {
    let mut t = TransportConfig::default();
    if !args.webrtc_bind.is_empty() {
        t.udp_bind = args.webrtc_bind.clone();
    }
    t.ice_policy = args.ice_policy;
    t.lanes = args.lanes.min(linkfs_peer::lanes::MAX_LANES);
    t
}

fn bar(template: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
    if !std::io::stderr().is_terminal() {
        b.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template(template) {
        b.set_style(style.progress_chars("=> "));
    }
    b
}

/// Says on stderr when the connection to the sharer is lost and when it is back.
fn report_reconnects(client: &Client) {
    let mut watch = client.watch();
    tokio::spawn(async move {
        let mut was = false;
        loop {
            let s = watch.borrow_and_update().clone();
            if s.ended.is_some() {
                return;
            }
            if s.reconnecting != was {
                was = s.reconnecting;
                if was {
                    eprintln!(
                        "linkfs: lost the connection to the sharer; reconnecting (reads wait) ..."
                    );
                } else {
                    eprintln!("linkfs: reconnected to the sharer");
                }
            }
            if watch.changed().await.is_err() {
                return;
            }
        }
    });
}

/// How the link travels, said once ICE says: while the index arrives, or
/// after it by a task of its own (the index never waits for ICE).
struct RouteTold(Option<tokio::task::JoinHandle<()>>);

impl RouteTold {
    /// Waits up to `wait` for the route to be said, so a short command does
    /// not end before it says how it went.
    async fn settle(self, wait: Duration) {
        if let Some(task) = self.0 {
            let _ = tokio::time::timeout(wait, task).await;
        }
    }
}

fn say_route(route: Option<linkfs_peer::transport::Route>, b: Option<&ProgressBar>) {
    if let Some(route) = route {
        let say = || eprintln!("linkfs: connected to the sharer {route}");
        match b {
            Some(b) => b.suspend(say),
            None => say(),
        }
    }
}

/// Connects and waits for the complete index, showing its progress.
async fn connect_and_index(args: &ConnectArgs) -> anyhow::Result<(Client, RouteTold)> {
    connect_until(args, IndexWait::Whole).await
}

/// How much of the index a command waits for before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IndexWait {
    /// All of it (`get`, `ls -R`).
    Whole,
    /// The root folder whole; the rest comes in behind, and a line says when
    /// it is complete (`mount`: it shows folders as they become whole).
    RootThenSay,
    /// The root folder whole, quietly (`ls PATH` then waits for its folders).
    Root,
}

/// Connects and takes in the index as far as `wait` says.
async fn connect_until(args: &ConnectArgs, wait: IndexWait) -> anyhow::Result<(Client, RouteTold)> {
    let root_only = wait != IndexWait::Whole;
    let started = std::time::Instant::now();
    eprintln!("linkfs: connecting to the sharer ...");
    let client = open(&args.link, &transport(args), password_source(args)?).await?;
    report_reconnects(&client);
    let b = bar("{spinner} index: {pos}/{len} entries {wide_bar} {elapsed}");
    let mut route_said = false;
    let mut watch = client.watch();
    let done = loop {
        if !route_said && let Some(route) = client.route_now() {
            route_said = true;
            say_route(route, Some(&b));
        }
        let s = watch.borrow_and_update().clone();
        b.set_length(s.announced.max(s.received));
        b.set_position(s.received);
        if s.complete || (root_only && client.folder_listed(EntryId::ROOT)) {
            break Ok(s.received);
        }
        if let Some(reason) = s.ended {
            break Err(reason);
        }
        tokio::select! {
            changed = watch.changed() => if changed.is_err() { break Err(EndReason::ClosedHere) },
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    };
    b.finish_and_clear();
    let told = RouteTold((!route_said).then(|| {
        let client = client.clone();
        tokio::spawn(async move { say_route(client.settled_route().await, None) })
    }));
    match done {
        Ok(_) if client.status().complete => {
            say_complete(&client, started);
            Ok((client, told))
        }
        Ok(_) if wait == IndexWait::Root => Ok((client, told)),
        Ok(entries) => {
            eprintln!(
                "linkfs: the root folder is here ({entries} entries so far, {:.2} s); the rest of the index follows",
                started.elapsed().as_secs_f64()
            );
            let follower = client.clone();
            tokio::spawn(async move {
                if follower.wait_complete().await.is_ok() {
                    say_complete(&follower, started);
                }
            });
            Ok((client, told))
        }
        Err(reason) => {
            use linkfs_core::FailureKind;
            let kind = reason.kind();
            let e = anyhow::Error::new(VisitError::Ended(reason));
            Err(match kind {
                // The link itself was refused: that is the whole story, with the fix.
                FailureKind::PasswordRefused => e.context(
                    "the sharer refused the link's password; give the right one (typed when asked, or --password-file FILE)",
                ),
                FailureKind::InvalidLink | FailureKind::LinkEnded => e,
                _ => e.context("the index did not arrive"),
            })
        }
    }
}

/// "index complete", with its size and time, and any entries refused.
fn say_complete(client: &Client, started: std::time::Instant) {
    let entries = client.status().received;
    let bytes = client.with_visit(|v| v.index_wire_bytes());
    eprintln!(
        "linkfs: index complete: {entries} entries ({}) in {:.2} s",
        super::sizes::human_bytes(bytes),
        started.elapsed().as_secs_f64()
    );
    let (refused, count) = client.refusals();
    if count > 0 {
        eprintln!(
            "linkfs: warning: the sharer sent {count} entries that are not valid; they were skipped (first: {})",
            refused.first().map_or("", String::as_str)
        );
    }
}

/// Waits until every folder on the way to `path`, and `path` itself if it is
/// a folder, is whole (or the wait for one runs out): a listing of it is
/// then as complete as after the whole index, and a name not there is
/// really not there.
async fn wait_for_path(client: &Client, path: &[u8]) {
    let mut dir = EntryId::ROOT;
    for name in path
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
    {
        if !client.wait_folder_listed(dir, LISTING_WAIT).await {
            return;
        }
        let child = client.with_index(|ix| {
            let id = ix.lookup_child(dir, name)?;
            ix.get(id).map(|e| (id, e.kind))
        });
        match child {
            Some((id, linkfs_proto::EntryKind::Dir)) => dir = id,
            _ => return,
        }
    }
    client.wait_folder_listed(dir, LISTING_WAIT).await;
}

pub async fn ls(args: LsArgs) -> anyhow::Result<()> {
    // `ls -R` lists everything below: the whole index. One folder's listing
    // needs only the folders on its way.
    let (client, route) = if args.recursive {
        connect_and_index(&args.connect).await?
    } else {
        let (client, route) = connect_until(&args.connect, IndexWait::Root).await?;
        wait_for_path(&client, args.path.as_bytes()).await;
        (client, route)
    };
    let options = ListOptions {
        json: args.json,
        recursive: args.recursive,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = client.with_index(|ix| list(ix, args.path.as_bytes(), options, &mut out));
    route.settle(Duration::from_secs(3)).await;
    client.shutdown().await;
    match result {
        Ok(_) => {
            out.flush()?;
            Ok(())
        }
        // A closed pipe (`linkfs ls ... | head`) is not an error.
        Err(linkfs_peer::visit::listing::ListError::Write(e))
            if e.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn get_cmd(args: GetArgs) -> anyhow::Result<()> {
    let (client, route) = connect_and_index(&args.connect).await?;
    let b = bar("{bytes}/{total_bytes} {wide_bar} {bytes_per_sec} eta {eta}");
    let options = GetOptions {
        path: args.path.as_bytes().to_vec(),
        out: args.out.clone(),
        parallel_files: args.parallel,
    };
    let started = std::time::Instant::now();
    let summary = tokio::select! {
        s = get(&client, &options, &b) => s?,
        () = super::stop::stop_signal() => {
            b.abandon();
            client.shutdown().await;
            bail!("interrupted; run the same command again to continue where it stopped");
        }
    };
    b.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    route.settle(Duration::from_secs(3)).await;
    client.shutdown().await;
    eprintln!(
        "linkfs: {} files ({} already complete), {} folders, {} symlinks; fetched {} bytes in {:.2} s ({:.1} MB/s) into {}",
        summary.files,
        summary.already_complete,
        summary.folders,
        summary.symlinks,
        summary.bytes_fetched,
        secs,
        summary.bytes_fetched as f64 / secs.max(1e-9) / 1e6,
        args.out.display()
    );
    for h in summary.hidden_symlinks.iter().take(20) {
        eprintln!(
            "linkfs: not made: {} (a symlink that leads out of what this link shows; the sharer does not say where)",
            linkfs_peer::terminal::escaped(h)
        );
    }
    for r in summary.refused.iter().take(20) {
        eprintln!("linkfs: refused: {}", linkfs_peer::terminal::escaped(r));
    }
    for f in summary.failed.iter().take(20) {
        eprintln!("linkfs: failed: {}", linkfs_peer::terminal::escaped(f));
    }
    let problems = summary.refused.len() + summary.failed.len();
    // The session ended under it (its link withdrawn or expired, the sharer
    // gone): that is the reason, with its exit code, not a retry. Its end is
    // read after this side closed it (the end's news can come just after the
    // failures it caused), and a session closed here is never the reason.
    if problems > 0
        && let Some(end) = client.status().ended.filter(|e| {
            !matches!(
                e.kind(),
                linkfs_core::FailureKind::Unreachable
                    | linkfs_core::FailureKind::Other
                    | linkfs_core::FailureKind::Closed
            )
        })
    {
        return Err(anyhow::Error::new(VisitError::Ended(end)).context(format!(
            "{} entries were not fetched; what completed is in place",
            summary.refused.len() + summary.failed.len()
        )));
    }
    if problems > 0 {
        bail!(
            "{} entries were refused and {} failed (listed above); what completed is in place, and running the command again retries the rest",
            summary.refused.len(),
            summary.failed.len()
        );
    }
    Ok(())
}

/// Unmounts (lazily, so a program still inside does not keep it): directly as
/// root, else through `fusermount3 -u -z`.
fn unmount(mountpoint: &std::path::Path) -> anyhow::Result<()> {
    match nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_DETACH) {
        // EINVAL: not a mount point (any more): someone unmounted it first.
        Ok(()) | Err(nix::errno::Errno::EINVAL) => Ok(()),
        Err(nix::errno::Errno::EPERM) => {
            let status = std::process::Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(mountpoint)
                .status()
                .context("cannot run fusermount3")?;
            if status.success() {
                Ok(())
            } else {
                bail!("fusermount3 -u failed ({status})")
            }
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn mount(args: MountArgs) -> anyhow::Result<()> {
    let meta = std::fs::metadata(&args.mountpoint).with_context(|| {
        format!(
            "cannot use {} as the mount point",
            args.mountpoint.display()
        )
    })?;
    if !meta.is_dir() {
        bail!(
            "{} is not a folder; give an empty folder to mount on",
            args.mountpoint.display()
        );
    }
    let holds_something = std::fs::read_dir(&args.mountpoint)
        .with_context(|| format!("cannot read {}", args.mountpoint.display()))?
        .next()
        .is_some();
    if holds_something {
        bail!(
            "{} is not empty: the share mounted there would hide what it holds until unmounted; give an empty folder (mkdir {}-share)",
            args.mountpoint.display(),
            args.mountpoint.display()
        );
    }
    let (client, _route) = connect_until(&args.connect, IndexWait::RootThenSay).await?;
    let fs = LinkFs::new(
        client.clone(),
        MountOptions {
            cache_bytes: args.cache_mib << 20,
            ..MountOptions::default()
        },
        tokio::runtime::Handle::current(),
    );
    let kept = fs.kept_listings();
    // Before the mount is up: a change from then on is followed.
    let follower = linkfs_peer::visit::mount::ChangeFollower::new(&client);
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::RO,
        fuser::MountOption::FSName("linkfs".into()),
        fuser::MountOption::Subtype("linkfs".into()),
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        fuser::MountOption::DefaultPermissions,
    ];
    config.n_threads = Some(args.threads.max(1));
    // Mounted directly as root, else through fusermount3 (fuser chooses). Not
    // auto_unmount: measured here, its fusermount3 watcher exited at once and the
    // mount stayed; this process unmounts itself on every way out instead.
    let mountpoint = args.mountpoint.clone();
    let session = fuser::spawn_mount(fs, &mountpoint, &config).with_context(|| {
        format!(
            "cannot mount on {} (is FUSE available? `apt-get install fuse3`; is the folder empty and not already a mount?)",
            mountpoint.display()
        )
    })?;
    tokio::spawn(linkfs_peer::visit::mount::follow_changes(
        follower,
        session.notifier(),
        kept,
    ));
    eprintln!(
        "linkfs: mounted at {} (read-only); Ctrl-C to unmount",
        mountpoint.display()
    );
    let mut unmounted_outside = false;
    let mut ended: Option<EndReason> = None;
    let reason = tokio::select! {
        () = super::stop::stop_signal() => "stopped".to_owned(),
        r = client.ended() => {
            let words = format!("the share ended: {r}");
            ended = Some(r);
            words
        }
        () = async {
            while !session.guard.is_finished() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        } => {
            unmounted_outside = true;
            "it was unmounted".to_owned()
        }
    };
    // Reads still waiting fail with EIO once the session is closed.
    client.shutdown().await;
    if !unmounted_outside && let Err(e) = unmount(&mountpoint) {
        eprintln!(
            "linkfs: warning: unmounting {} failed: {e} (run `fusermount3 -u {}`)",
            mountpoint.display(),
            mountpoint.display()
        );
    }
    let joined = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || session.umount_and_join()),
    )
    .await;
    if !matches!(joined, Ok(Ok(Ok(())))) {
        tracing::debug!(
            ?joined,
            "the FUSE session ended with an error after unmounting"
        );
    }
    eprintln!("linkfs: unmounted {} ({reason})", mountpoint.display());
    if let Some(end) = ended {
        return Err(anyhow::Error::new(VisitError::Ended(end)).context(format!(
            "the share ended; unmounted {}",
            mountpoint.display()
        )));
    }
    Ok(())
}

/// A progress bar for `put`.
struct PutBar(ProgressBar);

impl linkfs_peer::visit::put::PutProgress for PutBar {
    fn advanced(&self, bytes: u64) {
        self.0.inc(bytes);
    }
    fn say(&self, line: String) {
        self.0
            .suspend(|| eprintln!("linkfs: {}", linkfs_peer::terminal::escaped(&line)));
    }
}

pub async fn put_cmd(args: PutArgs) -> anyhow::Result<()> {
    use linkfs_peer::visit::put::{gather, put};
    let (files, skipped) = gather(&args.paths, &args.to);
    for s in &skipped {
        eprintln!("linkfs: skipped {}", linkfs_peer::terminal::escaped(s));
    }
    if files.is_empty() {
        bail!("nothing to add: give files or folders that exist");
    }
    let total: u64 = files.iter().map(|f| f.size).sum();
    let (client, _route) = connect_and_index(&args.connect).await?;
    let rights = client.rights();
    if !rights.is_some_and(|r| r.upload) {
        client.shutdown().await;
        bail!(
            "this link does not let visitors add files; ask the sharer for one made with `linkfs link add --allow-upload` (or --drop)"
        );
    }
    let b = bar("{bytes}/{total_bytes} {wide_bar} {bytes_per_sec} eta {eta}");
    b.set_length(total);
    let started = std::time::Instant::now();
    let progress = PutBar(b.clone());
    let summary = tokio::select! {
        s = put(&client, files, &progress) => s,
        () = super::stop::stop_signal() => {
            b.abandon();
            client.shutdown().await;
            bail!("interrupted; run the same command again to go on where it stopped");
        }
    };
    b.finish_and_clear();
    client.shutdown().await;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "linkfs: added {} files ({} bytes sent, {} went on from an earlier run) in {:.2} s ({:.1} MB/s)",
        summary.files,
        summary.bytes_sent,
        summary.resumed,
        secs,
        summary.bytes_sent as f64 / secs.max(1e-9) / 1e6
    );
    for (path, _, why) in summary.failed.iter().take(20) {
        eprintln!(
            "linkfs: not added: {}: {}",
            linkfs_peer::terminal::escaped(path),
            linkfs_peer::terminal::escaped(why)
        );
    }
    if !summary.failed.is_empty() {
        bail!(
            "{} files were not added (listed above); what was added is in place, and running the command again sends the rest",
            summary.failed.len()
        );
    }
    Ok(())
}
