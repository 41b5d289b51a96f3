//! Measures the relay's memory per idle WebSocket; prints JSON.
//!
//! Starts the `linkfs-relay` binary (a separate process, so client memory does not
//! count), opens N connections to it (N/2 rooms of one host and one guest), reads
//! the relay's RSS from /proc before and after, then has every guest send one
//! message (1 KiB unless given) to its host and reads it again.
//!
//! ```text
//! cargo build --release -p linkfs-relay --bin linkfs-relay --example idle_memory
//! ulimit -n 65536
//! target/release/examples/idle_memory target/release/linkfs-relay 10000 [MESSAGE_BYTES]
//! ```

use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let relay_bin = args
        .next()
        .ok_or("usage: idle_memory RELAY_BIN [CONNECTIONS [MESSAGE_BYTES]]")?;
    let n: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000);
    let message_len: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1024);
    let rooms = n / 2;

    let mut relay = Command::new(&relay_bin)
        .args([
            "--bind",
            "127.0.0.1:0",
            "--max-connections",
            &(n + 10).to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = relay.id().ok_or("relay exited")?;
    let stdout = relay.stdout.take().ok_or("no stdout")?;
    let first = BufReader::new(stdout)
        .lines()
        .next_line()
        .await?
        .ok_or("relay printed nothing")?;
    let addr = first
        .rsplit_once("http://")
        .map(|(_, a)| a.trim().to_owned())
        .ok_or("no address in the relay's first line")?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = rss_kib(pid)?;

    let started = Instant::now();
    let mut hosts = Vec::with_capacity(rooms);
    let mut guests = Vec::with_capacity(rooms);
    for chunk_start in (0..rooms).step_by(250) {
        let chunk: Vec<_> = (chunk_start..(chunk_start + 250).min(rooms))
            .map(|i| {
                let addr = addr.clone();
                tokio::spawn(async move {
                    let room = format!("memory-room-{i:08}");
                    let host = open(&addr, &room, "host").await?;
                    let guest = open(&addr, &room, "guest").await?;
                    Ok::<_, String>((host, guest))
                })
            })
            .collect();
        for task in chunk {
            let (host, guest) = task.await??;
            hosts.push(host);
            guests.push(guest);
        }
    }
    let connect_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_idle = rss_kib(pid)?;

    // One message from every guest to its host, read by the host.
    let data = "A".repeat(message_len);
    for (host, guest) in hosts.iter_mut().zip(guests.iter_mut()) {
        guest
            .send(Message::Text(
                format!(r#"{{"t":"msg","to":0,"data":"{data}"}}"#).into(),
            ))
            .await?;
        loop {
            match host.next().await {
                Some(Ok(Message::Text(t))) if t.contains("\"msg\"") => break,
                Some(Ok(_)) => continue,
                other => return Err(format!("host read: {other:?}").into()),
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after_traffic = rss_kib(pid)?;

    let per = |after: u64| (after.saturating_sub(rss_before) as f64 * 1024.0 / n as f64).round();
    println!(
        "{{\"connections\":{n},\"rooms\":{rooms},\"connect_secs\":{connect_secs:.2},\
         \"relay_rss_kib_before\":{rss_before},\"relay_rss_kib_idle\":{rss_idle},\
         \"message_bytes\":{message_len},\"relay_rss_kib_after_one_message_each\":{rss_after_traffic},\
         \"bytes_per_idle_connection\":{},\"bytes_per_connection_after_traffic\":{}}}",
        per(rss_idle),
        per(rss_after_traffic)
    );
    drop(hosts);
    drop(guests);
    relay.kill().await?;
    Ok(())
}

async fn open(addr: &str, room: &str, role: &str) -> Result<Ws, String> {
    let url = format!("ws://{addr}/signal/{room}?role={role}");
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .map_err(|e| format!("connect {room} {role}: {e}"))?;
    // The welcome.
    match ws.next().await {
        Some(Ok(Message::Text(t))) if t.contains("welcome") => Ok(ws),
        other => Err(format!("{room} {role}: expected welcome, got {other:?}")),
    }
}

fn rss_kib(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS".into())
}
