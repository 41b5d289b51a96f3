//! Raw native <-> native data-channel throughput: two real webrtc-rs peers in this
//! process over 127.0.0.1, frames through `DataLink`, one JSON line of figures.
//!
//! Run inside a private network namespace (see `peer/tests/transport.rs`):
//!
//! ```text
//! cargo run --release -p linkfs-tools --bin linkfs-bench-channel -- --mib 200 --runs 3
//! ```
//!
//! Each run sends `--mib` MiB from the offerer to the answerer, split evenly over
//! `--links` connections (one data channel each) sending at once. The receiver checks
//! the sequence number at the start of every frame (order and completeness) but does
//! not hash, so the figure is the transport's. `udp_receive_drops` counts datagrams
//! the namespace lost to full socket buffers during the runs (losses slow SCTP down).
//!
//! `--same-host` uses `NativeTuning::SAME_HOST`; `--sctp-mtu`, `--sctp-window`,
//! `--send-buffer`, `--socket-buffer` and `--links` try other settings.
//! `--stdio-answerer` answers one offer from another process instead (signaling as
//! JSON lines on stdin/stdout); `peer/tests/transport_chromium.rs` drives Chromium
//! against it.
//!
//! Measured on the 2-core machine, other work running (load 3), medians of 3 runs of
//! 200 MiB: defaults 268-330 MB/s; `--same-host` 730-915 MB/s; `--links 2` 360 MB/s;
//! 200-byte frames 190-215k per second; toward Chromium 48-63 MB/s with no datagram
//! lost (with a 64 KiB limit: 34-56 MB/s, 1,100-1,600 lost per 600 MiB).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::{Bytes, BytesMut};
use clap::Parser;
use linkfs_peer::transport::{
    LinkReceiver, LinkSender, NativeTuning, SendWindow, TransportConfig, connect_in_process,
};
use linkfs_proto::MAX_FRAME_LEN;

#[derive(Debug, Parser)]
#[command(about = "Native <-> native data-channel throughput over loopback (JSON output)")]
struct Args {
    /// MiB per run (across all links).
    #[arg(long, default_value_t = 200)]
    mib: usize,
    /// Runs on the same connections.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Bytes per message (8 ..= 61440).
    #[arg(long, default_value_t = MAX_FRAME_LEN)]
    frame: usize,
    /// Connections sending at once, one data channel each.
    #[arg(long, default_value_t = 1)]
    links: usize,
    /// A fixed window of this many unacknowledged bytes per channel (default: what the
    /// transport uses toward this kind of peer: paced, sized to the path).
    #[arg(long)]
    send_buffer: Option<usize>,
    /// SCTP packet size (native <-> native only; webrtc-rs default 1191).
    #[arg(long)]
    sctp_mtu: Option<u32>,
    /// SCTP receive window in bytes (webrtc-rs default 1 MiB).
    #[arg(long)]
    sctp_window: Option<u32>,
    /// Kernel buffer per UDP socket in bytes (the transport's default when absent).
    #[arg(long)]
    socket_buffer: Option<usize>,
    /// Use `NativeTuning::SAME_HOST` (overrides the four options above).
    #[arg(long)]
    same_host: bool,
    /// Answer one offer from another process instead (a browser driven by a script):
    /// signaling as `SignalPayload` JSON lines, offer and candidates on stdin, answer
    /// and candidates on stdout. Each run sends `--mib` MiB; the other side answers
    /// every run with one message once it has all the bytes.
    #[arg(long)]
    stdio_answerer: bool,
    /// With --stdio-answerer: bind 127.0.0.1 only instead of every interface.
    #[arg(long)]
    loopback_only: bool,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout_s: u64,
}

fn main() -> anyhow::Result<()> {
    // LINKFS_LOG=linkfs_peer::transport=debug: what the transport says, on stderr.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("LINKFS_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let args = Args::parse();
    if !(8..=MAX_FRAME_LEN).contains(&args.frame) {
        bail!("--frame must be 8 ..= {MAX_FRAME_LEN}");
    }
    if args.links == 0 || args.runs == 0 || args.mib == 0 {
        bail!("--links, --runs and --mib must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if args.stdio_answerer {
        return runtime.block_on(stdio_answerer(args));
    }
    runtime.block_on(bench(args))
}

/// Answers an offer read from stdin, sends `runs` x `mib` MiB to the other side and
/// prints the figures; the other side confirms each run with one message.
async fn stdio_answerer(args: Args) -> anyhow::Result<()> {
    use linkfs_peer::transport::{Handshake, HandshakeEvent, IceCandidate};
    use linkfs_proto::signal::SignalPayload;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    let offer = loop {
        let line = lines
            .next_line()
            .await?
            .context("stdin closed before the offer")?;
        if let SignalPayload::Offer { sdp } = serde_json::from_str(&line)? {
            break sdp;
        }
    };
    let base = if args.loopback_only {
        TransportConfig::loopback()
    } else {
        TransportConfig::default()
    };
    let config = TransportConfig {
        send_window: args.send_buffer.map_or(base.send_window, SendWindow::Fixed),
        socket_buffer: args.socket_buffer.or(base.socket_buffer),
        ..base
    };
    let started = Instant::now();
    let (mut handshake, answer) = Handshake::answer(&config, &offer).await?;
    // A bench pipe between two processes, not signaling: nothing to sign.
    let mut out = serde_json::to_string(&SignalPayload::Answer {
        sdp: answer,
        sig: String::new(),
    })?;
    out.push('\n');
    stdout.write_all(out.as_bytes()).await?;
    stdout.flush().await?;
    let link = loop {
        tokio::select! {
            event = handshake.next_event() => match event? {
                HandshakeEvent::LocalCandidate(c) => {
                    let mut out = serde_json::to_string(&c.into_payload())?;
                    out.push('\n');
                    stdout.write_all(out.as_bytes()).await?;
                    stdout.flush().await?;
                }
                HandshakeEvent::Open(link) => break link,
                _ => {}
            },
            line = lines.next_line() => {
                let line = line?.context("stdin closed during the handshake")?;
                let payload: SignalPayload = serde_json::from_str(&line)?;
                if let Some(c) = IceCandidate::from_payload(&payload)
                    && let Err(error) = handshake.add_remote_candidate(c).await
                {
                    eprintln!("skipping a remote candidate: {error}");
                }
            }
        }
    };
    let connect_ms = started.elapsed().as_secs_f64() * 1e3;
    let (sender, mut receiver) = link.split();
    let drops_before = udp_receive_drops();
    let total = args.mib * 1024 * 1024;
    let mut mb_per_s = Vec::new();
    for run in 0..args.runs as u64 {
        let started = Instant::now();
        let send = {
            let sender = sender.clone();
            let frame_len = args.frame;
            tokio::spawn(async move {
                let mut left = total;
                let mut seq = 0u64;
                while left > 0 {
                    let len = frame_len.min(left);
                    let mut frame = BytesMut::zeroed(len);
                    if len >= 8 {
                        frame[..8].copy_from_slice(&(run << 40 | seq).to_le_bytes());
                    }
                    sender.send(frame.freeze()).await?;
                    left -= len;
                    seq += 1;
                }
                anyhow::Ok(())
            })
        };
        let deadline = Duration::from_secs(args.timeout_s);
        tokio::time::timeout(deadline, receiver.recv())
            .await
            .with_context(|| format!("run {run}: no confirmation within {deadline:?}"))?
            .with_context(|| format!("run {run}: the link ended: {:?}", receiver.close_reason()))?;
        send.await??;
        mb_per_s.push(round1(total as f64 / started.elapsed().as_secs_f64() / 1e6));
    }
    let figures = serde_json::json!({
        "bench": "native -> other process (stdio signaling)",
        "mib": args.mib,
        "runs": args.runs,
        "frame_bytes": args.frame,
        "send_window": format!("{:?}", config.send_window),
        "socket_buffer": config.socket_buffer,
        "bind": config.udp_bind.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "connect_ms": round1(connect_ms),
        "mb_per_s": mb_per_s,
        "median_mb_per_s": median(&mb_per_s),
        "udp_receive_drops": drops_before
            .zip(udp_receive_drops())
            .map(|(before, after)| after.saturating_sub(before)),
    });
    let mut out = figures.to_string();
    out.push('\n');
    stdout.write_all(out.as_bytes()).await?;
    stdout.flush().await?;
    sender.close().await;
    Ok(())
}

async fn bench(args: Args) -> anyhow::Result<()> {
    let tuning = if args.same_host {
        NativeTuning::SAME_HOST
    } else {
        NativeTuning {
            sctp_mtu: args.sctp_mtu,
            sctp_receive_window: args.sctp_window,
            send_window: args
                .send_buffer
                .map(SendWindow::Fixed)
                .or(NativeTuning::ANY_PATH.send_window),
            socket_buffer: args.socket_buffer,
        }
    };
    let config = TransportConfig {
        native_peer: Some(tuning),
        ..TransportConfig::loopback()
    };

    let connect_started = Instant::now();
    let mut links = Vec::with_capacity(args.links);
    for _ in 0..args.links {
        let (offerer, answerer) = connect_in_process(&config, &config)
            .await
            .context("connecting two in-process peers")?;
        let (sender, _) = offerer.split();
        let (_, receiver) = answerer.split();
        links.push((sender, receiver));
    }
    let connect_ms = connect_started.elapsed().as_secs_f64() * 1e3 / args.links as f64;

    let drops_before = udp_receive_drops();
    let total = args.mib * 1024 * 1024;
    let per_link = total / args.links;
    let frames_per_link = per_link.div_ceil(args.frame);
    let mut mb_per_s = Vec::new();
    let mut messages_per_s = Vec::new();
    for run in 0..args.runs {
        let started = Instant::now();
        let mut tasks = Vec::new();
        for (sender, receiver) in links.drain(..) {
            tasks.push(tokio::spawn(one_link(
                sender, receiver, per_link, args.frame, run as u64,
            )));
        }
        let deadline = Duration::from_secs(args.timeout_s);
        for task in tasks {
            let (sender, receiver) = tokio::time::timeout(deadline, task)
                .await
                .with_context(|| format!("run {run} did not finish within {deadline:?}"))??
                .with_context(|| format!("run {run}"))?;
            links.push((sender, receiver));
        }
        let secs = started.elapsed().as_secs_f64();
        let bytes = per_link * args.links;
        mb_per_s.push(round1(bytes as f64 / secs / 1e6));
        messages_per_s.push((frames_per_link * args.links) as f64 / secs);
    }
    let udp_drops = drops_before
        .zip(udp_receive_drops())
        .map(|(before, after)| after.saturating_sub(before));
    for (sender, _) in &links {
        sender.close().await;
    }

    let figures = serde_json::json!({
        "bench": "native-native data channel",
        "mib": args.mib,
        "runs": args.runs,
        "frame_bytes": args.frame,
        "links": args.links,
        "send_window": format!("{:?}", tuning.send_window.unwrap_or(config.send_window)),
        "sctp_mtu": tuning.sctp_mtu,
        "sctp_window": tuning.sctp_receive_window,
        "socket_buffer": tuning.socket_buffer.or(config.socket_buffer),
        "connect_ms": round1(connect_ms),
        "mb_per_s": mb_per_s,
        "median_mb_per_s": median(&mb_per_s),
        "messages_per_s": messages_per_s.iter().map(|m| m.round()).collect::<Vec<_>>(),
        "median_messages_per_s": median(&messages_per_s).round(),
        "udp_receive_drops": udp_drops,
    });
    println!("{figures}");
    Ok(())
}

/// Sends `bytes` over one link and receives them on the other side, checking order.
async fn one_link(
    sender: LinkSender,
    mut receiver: LinkReceiver,
    bytes: usize,
    frame_len: usize,
    run: u64,
) -> anyhow::Result<(LinkSender, LinkReceiver)> {
    let frames = bytes.div_ceil(frame_len) as u64;
    let send_task = {
        let sender = sender.clone();
        tokio::spawn(async move {
            let template = vec![0xA5u8; frame_len];
            let mut left = bytes;
            for seq in 0..frames {
                let len = frame_len.min(left);
                let mut frame = BytesMut::with_capacity(len);
                frame.extend_from_slice(&template[..len]);
                if len >= 8 {
                    frame[..8].copy_from_slice(&(run << 40 | seq).to_le_bytes());
                }
                sender.send(frame.freeze()).await?;
                left -= len;
            }
            anyhow::Ok(())
        })
    };
    let mut got = 0usize;
    for seq in 0..frames {
        let frame: Bytes = receiver.recv().await.with_context(|| {
            format!(
                "the link ended after {got} of {bytes} bytes: {:?}",
                receiver.close_reason()
            )
        })?;
        if let Some(head) = frame.first_chunk::<8>()
            && u64::from_le_bytes(*head) != run << 40 | seq
        {
            bail!("frame {seq} arrived out of order");
        }
        got += frame.len();
    }
    send_task.await??;
    if got != bytes {
        bail!("received {got} bytes, expected {bytes}");
    }
    Ok((sender, receiver))
}

/// Datagrams this network namespace dropped for want of socket receive buffer
/// (`RcvbufErrors` in `/proc/net/snmp`); `None` where that cannot be read.
fn udp_receive_drops() -> Option<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = snmp.lines().filter(|line| line.starts_with("Udp:"));
    let names = udp.next()?.split_whitespace();
    let values = udp.next()?.split_whitespace();
    names
        .zip(values)
        .find(|(name, _)| *name == "RcvbufErrors")
        .and_then(|(_, value)| value.parse().ok())
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
