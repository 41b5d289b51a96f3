//! Relays scaled out through Redis, measured: memory per WebSocket and the
//! latency the Redis hop adds to a signaling message. Prints one JSON line.
//!
//! Starts a real `redis-server` and two `linkfs-relay --redis` processes (their
//! memory is theirs alone), opens N WebSockets (N/2 rooms: each host on relay A
//! with a proof of its own key, its guest on relay B), reads both relays' RSS
//! before and after, then times message round trips host -> guest -> host across
//! the relays (through Redis twice) and within one relay, interleaved.
//!
//! ```text
//! cargo build --release -p linkfs-relay -p linkfs-tools
//! target/release/linkfs-bench-relay [--connections 10000] [--samples 2000]
//! ```
//! Loopback only; the open-file limit is raised to its hard limit (N + a few
//! hundred descriptors are needed here, and as many in each relay).

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use linkfs_proto::sharer_key::{SharerKey, host_query};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

#[derive(Parser)]
struct Args {
    /// WebSockets in all (half hosts on relay A, half guests on relay B).
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Round trips timed, each way of routing.
    #[arg(long, default_value_t = 2_000)]
    samples: usize,
    /// The relay binary (default: next to this one).
    #[arg(long)]
    relay_bin: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    linkfs_process::raise_open_file_limit();
    let relay_bin = match args.relay_bin {
        Some(p) => p,
        None => std::env::current_exe()?
            .parent()
            .context("no directory of this binary")?
            .join("linkfs-relay"),
    };
    let n = args.connections.max(2);
    let rooms = n / 2;

    let redis_port = free_port()?;
    let mut redis = Command::new("redis-server")
        .args(["--port", &redis_port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("redis-server must be installed (Debian package redis-server)")?;
    let redis_url = format!("redis://127.0.0.1:{redis_port}/");
    wait_for_port(redis_port).await?;
    let limit = (n + 100).to_string();
    let relay_args = [
        "--max-connections",
        &limit,
        "--max-rooms",
        &limit,
        "--max-connections-per-address",
        &limit,
        "--max-rooms-per-address",
        &limit,
        // 200 rooms connect at once, every socket from 127.0.0.1.
        "--max-unfinished-per-address",
        &limit,
        // The round trips send far faster than any client would.
        "--rate-per-sec",
        "100000",
        "--rate-burst",
        "100000",
        "--redis",
        &redis_url,
    ];
    let (mut relay_a, addr_a) = start_relay(&relay_bin, &relay_args).await?;
    let (mut relay_b, addr_b) = start_relay(&relay_bin, &relay_args).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid_a = relay_a.id().context("relay A exited")?;
    let pid_b = relay_b.id().context("relay B exited")?;
    let before = rss_kib(pid_a)? + rss_kib(pid_b)?;
    let redis_before = redis_used_memory(redis_port).await?;

    let started = Instant::now();
    let mut pairs: Vec<(Ws, Ws)> = Vec::with_capacity(rooms);
    for chunk_start in (0..rooms).step_by(200) {
        let tasks: Vec<_> = (chunk_start..(chunk_start + 200).min(rooms))
            .map(|i| {
                let (a, b) = (addr_a.clone(), addr_b.clone());
                tokio::spawn(async move { pair(&a, &b, i as u64).await })
            })
            .collect();
        for t in tasks {
            pairs.push(t.await??);
        }
    }
    let connect_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_kib(pid_a)? + rss_kib(pid_b)?;
    let redis_after = redis_used_memory(redis_port).await?;
    let per_connection = (after.saturating_sub(before) as f64 * 1024.0 / n as f64).round();

    // Round trips: across the relays (the first pairs) and within relay A (one more pair).
    let mut local = pair(&addr_a, &addr_a, u64::MAX / 2).await?;
    let mut across = Vec::with_capacity(args.samples);
    let mut within = Vec::with_capacity(args.samples);
    let probes = pairs.len().min(100);
    for k in 0..args.samples {
        let (host, guest) = &mut pairs[k % probes];
        across.push(round_trip(host, guest).await?);
        within.push(round_trip(&mut local.0, &mut local.1).await?);
    }
    across.sort_by(f64::total_cmp);
    within.sort_by(f64::total_cmp);
    let at = |v: &[f64], q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    // A round trip crosses the Redis hop twice; half the difference is one message's share.
    let hop = |q: f64| ((at(&across, q) - at(&within, q)) / 2.0).max(0.0);
    let figures = serde_json::json!({
        "connections": n,
        "rooms": rooms,
        "relays": 2,
        "connect_seconds": connect_secs,
        "relay_rss_kib_before": before,
        "relay_rss_kib_after": after,
        "bytes_per_connection": per_connection,
        "redis_bytes_per_room": (redis_after.saturating_sub(redis_before) as f64 / rooms as f64).round(),
        "round_trip_ms_across_relays": {"p50": at(&across, 0.5), "p99": at(&across, 0.99)},
        "round_trip_ms_within_one_relay": {"p50": at(&within, 0.5), "p99": at(&within, 0.99)},
        "redis_hop_ms_per_message": {"p50": hop(0.5), "p99": hop(0.99)},
        "samples": args.samples,
    });
    println!("{figures}");
    drop(pairs);
    let _ = relay_a.kill().await;
    let _ = relay_b.kill().await;
    let _ = redis.kill().await;
    Ok(())
}

/// A room of sharer key `seed`: its host on `host_addr`, one guest on `guest_addr`.
async fn pair(host_addr: &str, guest_addr: &str, seed: u64) -> anyhow::Result<(Ws, Ws)> {
    let mut key_seed = [7u8; 32];
    key_seed[..8].copy_from_slice(&seed.to_le_bytes());
    let key = SharerKey::from_seed(key_seed);
    let room = key.room();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let proof = host_query(&key, now, &format!("bench{seed}"));
    let mut host = open(&format!("ws://{host_addr}/signal/{room}?role=host{proof}")).await?;
    let guest = open(&format!("ws://{guest_addr}/signal/{room}?role=guest")).await?;
    // The host hears the guest join.
    expect(&mut host, "\"joined\"").await?;
    Ok((host, guest))
}

async fn open(url: &str) -> anyhow::Result<Ws> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .with_context(|| format!("connect {url}"))?;
    expect(&mut ws, "\"welcome\"").await?;
    Ok(ws)
}

async fn expect(ws: &mut Ws, what: &str) -> anyhow::Result<String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.contains(what) => return Ok(t.to_string()),
            Ok(Some(Ok(Message::Text(t)))) => bail!("expected {what}, got {t}"),
            Ok(Some(Ok(_))) => continue,
            other => bail!("expected {what}, got {other:?}"),
        }
    }
}

/// Host -> guest -> host, ms.
async fn round_trip(host: &mut Ws, guest: &mut Ws) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    host.send(Message::Text(r#"{"t":"msg","to":1,"data":"ping"}"#.into()))
        .await?;
    expect(guest, "\"msg\"").await?;
    guest
        .send(Message::Text(r#"{"t":"msg","to":0,"data":"pong"}"#.into()))
        .await?;
    expect(host, "\"msg\"").await?;
    Ok(t0.elapsed().as_secs_f64() * 1e3)
}

async fn start_relay(bin: &std::path::Path, extra: &[&str]) -> anyhow::Result<(Child, String)> {
    let mut child = Command::new(bin)
        .args(["--bind", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let first = BufReader::new(stdout)
        .lines()
        .next_line()
        .await?
        .context("the relay printed nothing")?;
    let addr = first
        .rsplit_once("http://")
        .map(|(_, a)| a.trim().to_owned())
        .context("no address in the relay's first line")?;
    // Ready once it has joined the fleet.
    for _ in 0..100 {
        if http_status(&addr, "/healthz").await == Some(200) {
            return Ok((child, addr));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the relay at {addr} never became ready")
}

async fn http_status(addr: &str, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    String::from_utf8_lossy(&buf)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
}

async fn redis_used_memory(port: u16) -> anyhow::Result<u64> {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "INFO", "memory"])
        .output()
        .await
        .context("redis-cli (Debian package redis-tools)")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no used_memory in INFO memory")
}

async fn wait_for_port(port: u16) -> anyhow::Result<()> {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    bail!("nothing listens on port {port}")
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")
}
