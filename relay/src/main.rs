//! `linkfs-relay`: the signaling relay and web app server. Glue around the library:
//! flags, logs, signals.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use linkfs_proto::signal::IceServer;
use linkfs_relay::{Limits, RelayConfig};

/// Signaling relay and web app server for linkfs.
///
/// Serves the linkfs web app at `/`, WebSocket signaling at `/signal/{room}`,
/// `/healthz` and `/metrics`. It forwards only sealed signaling messages and learns
/// no secrets; file bytes go peer to peer.
#[derive(Debug, Parser)]
#[command(name = "linkfs-relay", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: SocketAddr,

    /// STUN or TURN server for peers, as `URL` or `URL,USERNAME,CREDENTIAL`
    /// (e.g. `stun:stun.example.org:3478`). Repeatable. None by default: none are
    /// needed on one host or a LAN.
    #[arg(long = "ice-server", value_name = "URL")]
    ice_servers: Vec<String>,

    /// Serve the web app from this directory instead of the copy built into the
    /// binary (for development).
    #[arg(long, value_name = "DIR")]
    web_dir: Option<PathBuf>,

    /// Most WebSocket connections at once; more get HTTP 503.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,

    /// Most rooms (shares) at once.
    #[arg(long, default_value_t = Limits::default().max_rooms)]
    max_rooms: usize,

    /// Most guests (visitors) per room.
    #[arg(long, default_value_t = Limits::default().max_guests_per_room)]
    max_guests_per_room: usize,

    /// Largest signaling message in bytes (at most 16384).
    #[arg(long, default_value_t = Limits::default().max_message)]
    max_message: usize,

    /// Messages per second per connection, long term.
    #[arg(long, default_value_t = Limits::default().rate_per_sec)]
    rate_per_sec: u32,

    /// Messages per connection allowed at once before the rate applies.
    #[arg(long, default_value_t = Limits::default().rate_burst)]
    rate_burst: u32,

    /// Seconds without any traffic before a WebSocket is closed (a TCP connection
    /// that sends nothing at all is dropped 30 s later).
    #[arg(long, default_value_t = Limits::default().idle_timeout.as_secs())]
    idle_timeout_secs: u64,

    /// Seconds between the relay's pings (must be below the idle timeout).
    #[arg(long, default_value_t = Limits::default().ping_interval.as_secs())]
    ping_interval_secs: u64,

    /// Open WebSockets from one client address at once.
    #[arg(long, default_value_t = Limits::default().max_connections_per_address)]
    max_connections_per_address: usize,

    /// Shares (rooms) opened from one client address at once.
    #[arg(long, default_value_t = Limits::default().max_rooms_per_address)]
    max_rooms_per_address: usize,

    /// Visitors of one share from one client address at once.
    #[arg(long, default_value_t = Limits::default().max_guests_per_address)]
    max_guests_per_address: usize,

    /// TCP connections from one client address that have not sent their
    /// first request head yet; beyond it the oldest is dropped (a slow flood
    /// from one address holds no more). Trusted proxies (--trust-proxy) are exempt.
    #[arg(long, default_value_t = Limits::default().max_unfinished_per_address)]
    max_unfinished_per_address: usize,

    /// A reverse proxy in front of the relay, or a network of them (repeatable,
    /// e.g. 127.0.0.1 or 172.16.0.0/12): its X-Forwarded-For names the client for
    /// the per-address limits. Nobody else's is believed.
    #[arg(long = "trust-proxy", value_name = "IP[/BITS]")]
    trusted_proxies: Vec<linkfs_relay::IpNetwork>,

    /// Take no shares from browser tabs: a sharer must run the linkfs app.
    /// (Visitors in browsers are welcome either way; a sharer costs the relay
    /// signaling only, from a tab as from the app.)
    #[arg(long)]
    no_tab_sharing: bool,

    /// Serve /metrics only to requests with `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "TOKEN")]
    metrics_token: Option<String>,

    /// The `static-auth-secret` of a coturn run with `use-auth-secret`: every
    /// member of a live room (and nobody else) gets short-lived credentials for
    /// the --turn-url servers. Or from the file --turn-secret-file, or the
    /// environment variable LINKFS_TURN_SECRET (keeps it out of `ps`).
    #[arg(
        long,
        value_name = "SECRET",
        env = "LINKFS_TURN_SECRET",
        hide_env_values = true
    )]
    turn_secret: Option<String>,

    /// Read the TURN secret from this file (its first line).
    #[arg(long, value_name = "FILE", conflicts_with = "turn_secret")]
    turn_secret_file: Option<PathBuf>,

    /// A TURN server for the credentials, e.g. `turn:turn.example.org:3478`
    /// (repeatable: `turn:...?transport=tcp`, `turns:...:5349`).
    #[arg(long = "turn-url", value_name = "URL")]
    turn_urls: Vec<String>,

    /// Seconds the handed-out TURN credentials stay valid (renewed every half).
    #[arg(long, default_value_t = linkfs_relay::DEFAULT_TURN_LIFETIME.as_secs())]
    turn_lifetime_secs: u64,

    /// Serve the same rooms as every other relay with this Redis
    /// (`redis://[:PASSWORD@]HOST:PORT[/DB]`), behind a load balancer: a sharer
    /// and its visitors may connect to different relays. Also from the
    /// environment variable LINKFS_REDIS_URL (keeps a password out of `ps`).
    #[arg(
        long,
        value_name = "URL",
        env = "LINKFS_REDIS_URL",
        hide_env_values = true
    )]
    redis: Option<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    linkfs_process::log_output(
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
    );
    let args = Args::parse();
    let config = config(&args)?;
    raise_open_file_limit(&config);
    let listener = linkfs_relay::bind(args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let relay = linkfs_relay::spawn(listener, config).await?;
    println!("linkfs-relay listening on http://{}", relay.local_addr());
    shutdown_signal().await?;
    tracing::info!("shutting down");
    relay.shutdown().await;
    Ok(())
}

fn config(args: &Args) -> Result<RelayConfig> {
    let mut ice_servers = Vec::new();
    for spec in &args.ice_servers {
        ice_servers.push(ice_server(spec)?);
    }
    if let Some(dir) = &args.web_dir
        && !dir.is_dir()
    {
        bail!("--web-dir {}: not a directory", dir.display());
    }
    let limits = Limits {
        max_connections: args.max_connections,
        max_rooms: args.max_rooms,
        max_guests_per_room: args.max_guests_per_room,
        max_connections_per_address: args.max_connections_per_address,
        max_rooms_per_address: args.max_rooms_per_address,
        max_guests_per_address: args.max_guests_per_address,
        max_unfinished_per_address: args.max_unfinished_per_address,
        max_message: args.max_message,
        rate_per_sec: args.rate_per_sec,
        rate_burst: args.rate_burst,
        idle_timeout: Duration::from_secs(args.idle_timeout_secs),
        // Silent sockets go 30 s after a WebSocket's idle timeout would have.
        silence_timeout: Duration::from_secs(args.idle_timeout_secs.saturating_add(30)),
        ping_interval: Duration::from_secs(args.ping_interval_secs),
        ..Limits::default()
    };
    let turn_secret = match (&args.turn_secret, &args.turn_secret_file) {
        (Some(s), _) => Some(s.clone()),
        (None, Some(file)) => Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read --turn-secret-file {}", file.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
        ),
        (None, None) => None,
    };
    let turn = match (turn_secret, args.turn_urls.is_empty()) {
        (Some(secret), _) => Some(linkfs_relay::TurnConfig {
            secret,
            urls: args.turn_urls.clone(),
            lifetime: Duration::from_secs(args.turn_lifetime_secs),
        }),
        (None, false) => bail!(
            "--turn-url needs --turn-secret (coturn's static-auth-secret); for a TURN server with fixed credentials use --ice-server URL,USER,PASSWORD"
        ),
        (None, true) => None,
    };
    let config = RelayConfig {
        limits,
        ice_servers,
        web_dir: args.web_dir.clone(),
        trusted_proxies: args.trusted_proxies.clone(),
        metrics_token: args.metrics_token.clone(),
        turn,
        redis: args.redis.clone(),
        no_tab_sharing: args.no_tab_sharing,
    };
    config.validate()?;
    Ok(config)
}

fn ice_server(spec: &str) -> Result<IceServer> {
    IceServer::parse_flag(spec).map_err(|e| anyhow::anyhow!("--ice-server {e}"))
}

/// Raises the soft limit on open files to the hard one (every WebSocket and
/// every HTTP connection is a descriptor), and says so if even that is below
/// what the limits allow.
fn raise_open_file_limit(config: &RelayConfig) {
    let limit = linkfs_process::raise_open_file_limit();
    let needed = (config.limits.max_connections + config.limits.max_http_connections) as u64 + 64;
    if limit.now < needed {
        tracing::warn!(
            limit = limit.now,
            needed,
            "the open-file limit is below --max-connections plus HTTP connections; raise it (ulimit -n, or LimitNOFILE= in a systemd unit) or lower --max-connections"
        );
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() -> Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    tokio::select! {
        ctrl_c = tokio::signal::ctrl_c() => ctrl_c.context("cannot listen for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}
