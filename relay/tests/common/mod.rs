//! Shared test helpers: a real relay on 127.0.0.1:0, WebSocket clients
//! (tokio-tungstenite) and a minimal HTTP/1.1 GET.

#![allow(dead_code)] // each test binary uses a different subset

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use linkfs_proto::signal::{PeerId, RelayErrorCode, RelayToClient};
use linkfs_relay::{Limits, RelayConfig, RelayHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long a test waits for something that should happen at once.
pub const PATIENCE: Duration = Duration::from_secs(5);

pub async fn relay_with(config: RelayConfig) -> RelayHandle {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    linkfs_relay::spawn(listener, config)
        .await
        .expect("spawn relay")
}

pub async fn relay(limits: Limits) -> RelayHandle {
    relay_with(RelayConfig {
        limits,
        ..RelayConfig::default()
    })
    .await
}

pub struct Client {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

/// What ended a connection, as the client saw it.
#[derive(Debug, PartialEq)]
pub enum Ended {
    Close(Option<(u16, String)>),
    Eof,
}

/// The room of test key `seed` (rooms are derived from the sharer's key).
pub fn room_of_seed(seed: u8) -> String {
    linkfs_proto::sharer_key::SharerKey::from_seed([seed; 32]).room()
}

/// The room most tests use.
pub fn test_room() -> String {
    room_of_seed(42)
}

/// A fresh proof that the host holds `room`'s key, if `room` is a test key's.
pub fn host_proof(room: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NONCE: AtomicU64 = AtomicU64::new(0);
    let Some(seed) = (0..=255u8).find(|s| room_of_seed(*s) == room) else {
        return String::new();
    };
    let key = linkfs_proto::sharer_key::SharerKey::from_seed([seed; 32]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let nonce = format!("test{}", NONCE.fetch_add(1, Ordering::Relaxed));
    linkfs_proto::sharer_key::host_query(&key, now, &nonce)
}

impl Client {
    /// Connects and returns the client without reading anything. A host
    /// proves it holds the room's key (see [`host_proof`]).
    pub async fn connect_raw(addr: SocketAddr, room: &str, role: &str) -> Client {
        let proof = if role == "host" {
            host_proof(room)
        } else {
            String::new()
        };
        let url = format!("ws://{addr}/signal/{room}?role={role}{proof}");
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("WebSocket upgrade");
        Client { ws }
    }

    /// Connects and checks the welcome names `expected` peer.
    pub async fn join(addr: SocketAddr, room: &str, role: &str, expected: u32) -> Client {
        let mut c = Client::connect_raw(addr, room, role).await;
        match c.recv().await {
            RelayToClient::Welcome { peer, .. } => assert_eq!(peer, PeerId(expected)),
            other => panic!("expected welcome for peer {expected}, got {other:?}"),
        }
        c
    }

    pub async fn host(addr: SocketAddr, room: &str) -> Client {
        Client::join(addr, room, "host", 0).await
    }

    /// The next relay message (skipping pings), within [`PATIENCE`].
    pub async fn recv(&mut self) -> RelayToClient {
        loop {
            let frame = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("a message within the patience")
                .expect("the connection is open")
                .expect("a readable frame");
            match frame {
                Message::Text(t) => {
                    return serde_json::from_str(t.as_str()).expect("relay JSON");
                }
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    /// The next relay message must be `error` with `code`; returns its message.
    pub async fn expect_error(&mut self, code: RelayErrorCode) -> String {
        match self.recv().await {
            RelayToClient::Error { code: got, message } => {
                assert_eq!(got, code, "error message: {message}");
                message
            }
            other => panic!("expected error {code:?}, got {other:?}"),
        }
    }

    /// Reads until the connection ends; text frames before the end are an error.
    pub async fn expect_end(&mut self) -> Ended {
        loop {
            let frame = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("the connection ends within the patience");
            match frame {
                None | Some(Err(_)) => return Ended::Eof,
                Some(Ok(Message::Close(frame))) => {
                    return Ended::Close(
                        frame.map(|CloseFrame { code, reason }| (code.into(), reason.to_string())),
                    );
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(other)) => panic!("expected the end, got {other:?}"),
            }
        }
    }

    /// Expects that nothing but pings arrives for `quiet`.
    pub async fn expect_quiet(&mut self, quiet: Duration) {
        let deadline = tokio::time::Instant::now() + quiet;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return,
                Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => continue,
                Ok(other) => panic!("expected silence, got {other:?}"),
            }
        }
    }

    pub async fn send_text(&mut self, text: impl Into<String>) {
        self.ws
            .send(Message::Text(text.into().into()))
            .await
            .expect("send");
    }

    pub async fn send_msg(&mut self, to: u32, data: &str) {
        self.send_text(format!(r#"{{"t":"msg","to":{to},"data":"{data}"}}"#))
            .await;
    }

    /// The next message must be `msg` from `from`; returns its data.
    pub async fn recv_msg_from(&mut self, from: u32) -> String {
        match self.recv().await {
            RelayToClient::Msg { from: got, data } => {
                assert_eq!(got, PeerId(from));
                data
            }
            other => panic!("expected msg from {from}, got {other:?}"),
        }
    }
}

/// A response to [`http_get`].
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// GET `path` over a fresh HTTP/1.1 connection (`Connection: close`).
pub async fn http_get(addr: SocketAddr, path: &str) -> HttpResponse {
    http_request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
    .await
}

/// Sends `request` verbatim and reads the whole response.
pub async fn http_request(addr: SocketAddr, request: &str) -> HttpResponse {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut raw = Vec::new();
    tokio::time::timeout(PATIENCE, tcp.read_to_end(&mut raw))
        .await
        .expect("response within the patience")
        .expect("read response");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of headers");
    let head = String::from_utf8(raw[..split].to_vec()).expect("ASCII headers");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size = usize::from_str_radix(
            std::str::from_utf8(&raw[..line_end]).expect("hex").trim(),
            16,
        )
        .expect("chunk size");
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// A metric's value from `/metrics` text (`name` includes any labels).
pub fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("metric {name} missing in\n{text}"))
}

/// Waits (within [`PATIENCE`]) until `/metrics` shows `name` at `value`: sessions
/// finish a moment after their client sees the close.
pub async fn wait_for_metric(addr: SocketAddr, name: &str, value: u64) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let now = metric(&http_get(addr, "/metrics").await.text(), name);
        if now == value {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} stayed at {now}, expected {value}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
