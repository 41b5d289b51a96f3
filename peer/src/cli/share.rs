//! `linkfs share DIR`: the link on stdout, a QR code and progress on stderr.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use linkfs_core::SenderConfig;
use linkfs_peer::sharer::share_state::{StateError, default_state_root};
use linkfs_peer::sharer::{
    EmbeddedRelayConfig, RelayChoice, ShareEvent, ShareOptions, StartLink, WalkProgress, share,
};
use linkfs_peer::transport::{IcePolicy, TransportConfig};
use linkfs_proto::signal::IceServer;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub struct ShareArgs {
    /// The folder to share.
    dir: PathBuf,
    /// Use this relay (e.g. https://relay.example.org) instead of the embedded one.
    #[arg(long, value_name = "URL")]
    relay: Option<String>,
    /// Address of the embedded relay (and the web page); port 0 picks a free one.
    /// On 0.0.0.0 (or [::]) the link names the address of the interface holding
    /// the default route, so other machines on the LAN can open it; the
    /// machine's other addresses are listed on stderr.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:0",
        conflicts_with = "relay"
    )]
    bind: SocketAddr,
    /// What the link begins with, when visitors reach the embedded relay some
    /// other way (a reverse proxy, a port forward): e.g. https://files.example.org
    #[arg(long, value_name = "URL", conflicts_with = "relay")]
    public_url: Option<String>,
    /// Local addresses for peer-to-peer traffic (default: 127.0.0.1 and every
    /// address of an up interface, IPv4 and IPv6).
    #[arg(long = "webrtc-bind", value_name = "IP:PORT")]
    webrtc_bind: Vec<SocketAddr>,
    /// `relay`: reach visitors only through the relay's TURN server (they never
    /// learn this machine's addresses); `all` (default): direct when possible.
    #[arg(long, value_name = "POLICY", default_value = "all")]
    ice_policy: IcePolicy,
    /// A STUN or TURN server the embedded relay offers visitors: `URL` or
    /// `URL,USERNAME,CREDENTIAL` (repeatable), as linkfs-relay's --ice-server.
    #[arg(long = "ice-server", value_name = "URL", conflicts_with = "relay")]
    ice_servers: Vec<String>,
    /// The static-auth-secret of a coturn with use-auth-secret: the embedded
    /// relay hands every visitor short-lived credentials for --turn-url (also
    /// from the environment variable LINKFS_TURN_SECRET).
    #[arg(
        long,
        value_name = "SECRET",
        env = "LINKFS_TURN_SECRET",
        hide_env_values = true,
        conflicts_with = "relay"
    )]
    turn_secret: Option<String>,
    /// The TURN server for those credentials, e.g. turn:turn.example.org:3478 (repeatable).
    #[arg(long = "turn-url", value_name = "URL", conflicts_with = "relay")]
    turn_urls: Vec<String>,
    /// Seconds the handed-out TURN credentials stay valid (renewed every half).
    #[arg(long, value_name = "SECS", conflicts_with = "relay")]
    turn_lifetime_secs: Option<u64>,
    /// Most visitors connected at once.
    #[arg(long, default_value_t = 32)]
    max_visitors: usize,
    /// Do not print the QR code.
    #[arg(long)]
    no_qr: bool,
    /// Share the folder as the walk finds it, without following later changes.
    #[arg(long)]
    no_watch: bool,
    /// Make a new link for this folder; the link printed before stops working.
    /// (Without it, sharing the same folder again prints the same link: its key
    /// is kept in $LINKFS_STATE_DIR, else $XDG_STATE_HOME/linkfs, else
    /// ~/.local/state/linkfs, readable only by you.)
    #[arg(long)]
    new_link: bool,
    /// Print a link that shows only this folder of the share (relative to it)
    /// as its root, instead of the folder's main link (`linkfs link` for more).
    /// Given more than once (or naming a file): a link that shows those paths
    /// at their places under the share's root, and nothing beside them.
    #[arg(long, value_name = "PATH")]
    scope: Vec<String>,
    /// Print a link that stops working then: a duration (48h, 30m, 7d) or a
    /// date and time in UTC (2026-11-27, 2026-11-27 18:00).
    #[arg(long, value_name = "WHEN")]
    expires: Option<String>,
    /// A name for the printed link (`linkfs link list`, `linkfs visitors`).
    #[arg(long)]
    label: Option<String>,
    #[command(flatten)]
    password: super::link_args::NewPassword,
    #[command(flatten)]
    upload: super::link_args::UploadArgs,
    /// Write one JSON line per visitor's join, read, download and leave to
    /// FILE (0600; rotated to FILE.1 past 16 MiB).
    #[arg(long, value_name = "FILE")]
    activity_log: Option<PathBuf>,
}

fn qr(link: &str) -> Option<String> {
    let code = qrcode::QrCode::new(link.as_bytes()).ok()?;
    Some(
        code.render::<qrcode::render::unicode::Dense1x2>()
            .dark_color(qrcode::render::unicode::Dense1x2::Light)
            .light_color(qrcode::render::unicode::Dense1x2::Dark)
            .quiet_zone(true)
            .build(),
    )
}

/// Shows the walk: a spinner on a terminal, a line a second otherwise.
struct IndexingProgress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
}

impl IndexingProgress {
    fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} indexing: {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(Duration::from_millis(100));
            b
        });
        IndexingProgress {
            bar,
            started: Instant::now(),
            last_line: Instant::now(),
        }
    }

    fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn update(&mut self, p: &WalkProgress) {
        let rate = p.entries as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        let msg = format!("{} entries ({:.0}/s)", p.entries, rate);
        match &self.bar {
            Some(b) => b.set_message(msg),
            None if self.last_line.elapsed() >= Duration::from_secs(1) => {
                self.last_line = Instant::now();
                eprintln!("indexing: {msg}");
            }
            None => {}
        }
    }

    fn finish(&mut self, p: &WalkProgress) {
        if let Some(c) = &p.checked {
            let ch = &c.changes;
            let line = format!(
                "checked the kept index against the folder: {} entries, {} added, {} changed, {} removed while not shared ({:.2} s)",
                c.entries,
                ch.added,
                ch.updated + ch.moved,
                ch.removed,
                c.elapsed.as_secs_f64()
            );
            match self.bar.take() {
                Some(b) => b.finish_with_message(line),
                None => eprintln!("{line}"),
            }
            return;
        }
        let Some(s) = &p.summary else { return };
        let mut line = format!(
            "indexed {} entries ({} files, {} folders, {} symlinks, {}) in {:.2} s",
            s.entries,
            s.files,
            s.dirs,
            s.symlinks,
            super::sizes::human_bytes(s.bytes),
            s.elapsed.as_secs_f64()
        );
        if s.skipped_special > 0 {
            line.push_str(&format!(
                "; skipped {} sockets/fifos/devices",
                s.skipped_special
            ));
        }
        if s.error_count > 0 {
            line.push_str(&format!("; {} entries could not be read", s.error_count));
            for problem in s.errors.iter().take(3) {
                line.push_str(&format!(
                    "\n  {}: {}",
                    problem.path.display(),
                    problem.reason
                ));
            }
        }
        if let Some(f) = &p.failure {
            line.push_str(&format!("\nindexing stopped early: {f}"));
        }
        match self.bar.take() {
            Some(b) => b.finish_with_message(line.clone()),
            None => eprintln!("{line}"),
        }
    }
}

/// What the embedded relay offers visitors, from the command line.
fn embedded_relay_config(
    ice_servers: &[String],
    turn_secret: Option<String>,
    turn_urls: Vec<String>,
    turn_lifetime_secs: Option<u64>,
) -> anyhow::Result<EmbeddedRelayConfig> {
    let ice_servers = ice_servers
        .iter()
        .map(|spec| IceServer::parse_flag(spec).map_err(|e| anyhow::anyhow!("--ice-server {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if turn_secret.is_none() && !turn_urls.is_empty() {
        anyhow::bail!(
            "--turn-url needs --turn-secret (coturn's static-auth-secret); for a TURN server with fixed credentials use --ice-server URL,USER,PASSWORD"
        );
    }
    Ok(EmbeddedRelayConfig {
        ice_servers,
        turn_secret,
        turn_urls,
        turn_lifetime: turn_lifetime_secs.map(Duration::from_secs),
    })
}

pub async fn run(args: ShareArgs) -> anyhow::Result<()> {
    // Every visitor, relay connection and file being read is a descriptor.
    let limit = linkfs_process::raise_open_file_limit();
    if limit.now < 4096 {
        tracing::info!(
            limit = limit.now,
            "the open-file limit is low; the share and its relay shed work to stay within it"
        );
    }
    let relay = match args.relay {
        Some(url) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                anyhow::bail!("--relay must be an http:// or https:// URL, not {url:?}");
            }
            RelayChoice::External { url }
        }
        None => RelayChoice::Embedded {
            bind: args.bind,
            public_url: match args.public_url {
                Some(url) if url.starts_with("http://") || url.starts_with("https://") => Some(url),
                Some(url) => {
                    anyhow::bail!("--public-url must be an http:// or https:// URL, not {url:?}")
                }
                None => None,
            },
            config: embedded_relay_config(
                &args.ice_servers,
                args.turn_secret,
                args.turn_urls,
                args.turn_lifetime_secs,
            )?,
        },
    };
    let mut transport = TransportConfig::default();
    if !args.webrtc_bind.is_empty() {
        transport.udp_bind = args.webrtc_bind;
    }
    transport.ice_policy = args.ice_policy;
    let password = args.password.read()?;
    let upload = args.upload.rights()?;
    let options = ShareOptions {
        root: args.dir.clone(),
        relay,
        transport,
        sender: SenderConfig::default(),
        max_visitors: args.max_visitors.max(1),
        watch: !args.no_watch,
        state_root: default_state_root(),
        new_link: args.new_link,
        activity_log: args.activity_log.clone(),
        start_link: (!args.scope.is_empty()
            || upload.is_some()
            || args.expires.is_some()
            || args.label.is_some()
            || password.is_some())
        .then(|| StartLink {
            label: args.label.clone().unwrap_or_default(),
            scopes: args.scope.clone(),
            upload,
            expires: args.expires.clone(),
            password: password.clone(),
        }),
    };
    if options.state_root.is_none() {
        eprintln!("warning: {}", StateError::NoStateDir);
    }
    let (events_tx, mut events) = mpsc::channel(64);
    let (walk_tx, mut walk_rx) = watch::channel(WalkProgress::default());
    let cancel = CancellationToken::new();
    // SIGUSR1 drops every visitor's data link, as a network failure would: they
    // reconnect and resume (a way to see, or test, that reconnecting works).
    let (drop_tx, drop_rx) = watch::channel(0u64);
    if let Ok(mut usr1) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
    {
        tokio::spawn(async move {
            while usr1.recv().await.is_some() {
                drop_tx.send_modify(|n| *n += 1);
            }
        });
    }
    let sharing = tokio::spawn(share(options, events_tx, walk_tx, cancel.clone(), drop_rx));
    let stop = super::stop::stop_signal();
    tokio::pin!(stop);
    tokio::pin!(sharing);
    let mut progress: Option<IndexingProgress> = None;
    let mut walking = true;
    let mut ticker = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = &mut stop => {
                cancel.cancel();
                break;
            }
            result = &mut sharing => {
                return result
                    .context("the share stopped unexpectedly")?
                    .with_context(|| format!("cannot share {}", args.dir.display()));
            }
            Some(event) = events.recv() => match event {
                ShareEvent::Ready { link, other_links } => {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{link}").context("cannot write the link to stdout")?;
                    out.flush().ok();
                    drop(out);
                    if !args.no_qr && let Some(code) = qr(&link) {
                        eprintln!("{code}");
                    }
                    if !other_links.is_empty() {
                        eprintln!("This machine's other addresses, for visitors on other networks:");
                        for other in &other_links {
                            eprintln!("  {other}");
                        }
                    }
                    eprintln!("Sharing {} at the link above. Press Ctrl-C to stop.", args.dir.display());
                    progress = Some(IndexingProgress::new());
                }
                ShareEvent::VisitorConnected { visitors, who, .. } => {
                    let line = format!(
                        "{} connected ({visitors} connected; `linkfs visitors` lists them)",
                        linkfs_peer::terminal::escaped(&who)
                    );
                    match &progress { Some(p) => p.println(&line), None => eprintln!("{line}") }
                }
                // A lane is not a visitor: its visitor's own link says it all.
                ShareEvent::VisitorLeft { end: linkfs_peer::sharer::VisitorEnd::Lane, .. } => {}
                ShareEvent::VisitorLeft { visitors, end, who, served, .. } => {
                    // The visitor's own goodbye text is in `end`: escaped.
                    let line = format!(
                        "{} left after {}: {} ({visitors} connected)",
                        linkfs_peer::terminal::escaped(&who),
                        super::sizes::human_bytes(served),
                        linkfs_peer::terminal::escaped(&end.to_string())
                    );
                    match &progress { Some(p) => p.println(&line), None => eprintln!("{line}") }
                }
                ShareEvent::Warning(w) => {
                    let line = format!("warning: {w}");
                    match &progress { Some(p) => p.println(&line), None => eprintln!("{line}") }
                }
                ShareEvent::Links(said) => {
                    match &progress { Some(p) => p.println(&said), None => eprintln!("{said}") }
                }
                _ => {}
            },
            _ = ticker.tick(), if walking => {
                let p = walk_rx.borrow_and_update().clone();
                if let Some(bar) = progress.as_mut() {
                    if p.summary.is_some() || p.checked.is_some() {
                        bar.finish(&p);
                        walking = false;
                    } else {
                        bar.update(&p);
                    }
                }
            }
        }
    }
    // Saving the index of a huge folder takes a moment after the visitors are gone.
    let outcome = tokio::time::timeout(Duration::from_secs(10), &mut sharing).await;
    while let Ok(event) = events.try_recv() {
        if let ShareEvent::Warning(w) = event {
            eprintln!("warning: {w}");
        }
    }
    match outcome {
        Ok(Ok(result)) => {
            result.with_context(|| format!("while stopping the share of {}", args.dir.display()))?
        }
        Ok(Err(e)) => return Err(e).context("the share stopped unexpectedly"),
        Err(_) => eprintln!("linkfs: visitors did not disconnect in time; stopping anyway"),
    }
    eprintln!("stopped sharing {}", args.dir.display());
    Ok(())
}
