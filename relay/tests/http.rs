//! The relay's plain HTTP side: health, metrics, the web app, and refusals before
//! the WebSocket upgrade.

mod common;

use std::path::PathBuf;

use common::{Client, http_get, http_request, metric, relay, relay_with, wait_for_metric};
use linkfs_proto::signal::RelayErrorCode;
use linkfs_relay::{CONTENT_SECURITY_POLICY, Limits, RelayConfig};

static ROOM: std::sync::LazyLock<String> = std::sync::LazyLock::new(common::test_room);

#[tokio::test]
async fn healthz_says_ok() {
    let relay = relay(Limits::default()).await;
    let r = http_get(relay.local_addr(), "/healthz").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "ok");
}

#[tokio::test]
async fn metrics_count_rooms_connections_messages_and_rejections() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let before = http_get(addr, "/metrics").await;
    assert_eq!(before.status, 200);
    assert!(
        before
            .header("content-type")
            .unwrap_or_default()
            .starts_with("text/plain; version=0.0.4")
    );
    let before = before.text();
    assert_eq!(metric(&before, "linkfs_relay_rooms"), 0);
    assert_eq!(metric(&before, "linkfs_relay_connections"), 0);

    let mut host = Client::host(addr, &ROOM).await;
    let mut guest = Client::join(addr, &ROOM, "guest", 1).await;
    host.recv().await; // joined
    guest.send_msg(0, "aGVsbG8").await;
    host.recv_msg_from(1).await;
    let mut nobody = Client::connect_raw(addr, "empty-room", "guest").await;
    nobody.expect_error(RelayErrorCode::NoSuchRoom).await;
    nobody.expect_end().await;

    wait_for_metric(addr, "linkfs_relay_connections", 2).await;
    let after = http_get(addr, "/metrics").await.text();
    assert_eq!(metric(&after, "linkfs_relay_rooms"), 1);
    assert_eq!(metric(&after, "linkfs_relay_guests"), 1);
    assert_eq!(metric(&after, "linkfs_relay_connections"), 2);
    assert_eq!(metric(&after, "linkfs_relay_connections_total"), 3);
    assert_eq!(metric(&after, "linkfs_relay_messages_forwarded_total"), 1);
    assert_eq!(
        metric(&after, "linkfs_relay_bytes_forwarded_total"),
        r#"{"t":"msg","from":1,"data":"aGVsbG8"}"#.len() as u64
    );
    assert_eq!(
        metric(
            &after,
            "linkfs_relay_rejections_total{code=\"no-such-room\"}"
        ),
        1
    );
}

#[tokio::test]
async fn a_bad_room_id_or_role_is_400_with_a_reason_before_the_upgrade() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    for (path, reason) in [
        ("/signal/short?role=host", "Invalid room id"),
        ("/signal/has.dots.in.it?role=host", "Invalid room id"),
        ("/signal/k3v9x2mq8w4t7r1z?role=admin", "Invalid role"),
        ("/signal/k3v9x2mq8w4t7r1z", "Invalid role"),
    ] {
        let r = http_request(
            addr,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\
                 Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            ),
        )
        .await;
        assert_eq!(r.status, 400, "{path}");
        assert!(r.text().starts_with(reason), "{path}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    }
    // A plain GET of the endpoint says what it is for.
    let r = http_get(addr, &format!("/signal/{}?role=host", *ROOM)).await;
    assert!(r.status >= 400, "{}", r.status);
    assert!(r.text().contains("only accepts WebSocket"), "{}", r.text());
    let metrics = http_get(addr, "/metrics").await.text();
    assert_eq!(
        metric(
            &metrics,
            "linkfs_relay_rejections_total{code=\"bad-request\"}"
        ),
        4
    );
}

#[tokio::test]
async fn connections_beyond_the_limit_get_503_before_the_upgrade() {
    let relay = relay(Limits {
        max_connections: 1,
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let host = Client::host(addr, &ROOM).await;
    let url = format!("ws://{addr}/signal/{}?role=guest", *ROOM);
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503);
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned();
            assert!(body.contains("limit of 1 connections"), "{body}");
        }
        other => panic!("expected HTTP 503, got {other:?}"),
    }
    // The slot frees when the first connection ends.
    drop(host);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    Client::host(addr, &ROOM).await;
}

#[tokio::test]
async fn web_files_are_served_from_a_directory_with_types_caching_and_csp() {
    let dir = TempDir::new("web-dir");
    dir.write("index.html", b"<!doctype html><title>linkfs</title>");
    dir.write("assets/app-1a2b3c.js", b"console.log(1)");
    dir.write("assets/app-1a2b3c.css", b"body{}");
    dir.write("assets/core-9f8e.wasm", b"\0asm\x01\0\0\0");
    dir.write("favicon.svg", b"<svg/>");
    let relay = relay_with(RelayConfig {
        web_dir: Some(dir.path.clone()),
        ..RelayConfig::default()
    })
    .await;
    let addr = relay.local_addr();

    let index = http_get(addr, "/").await;
    assert_eq!(index.status, 200);
    assert_eq!(index.body, b"<!doctype html><title>linkfs</title>");
    assert_eq!(
        index.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(index.header("cache-control"), Some("no-cache"));
    assert_eq!(
        index.header("content-security-policy"),
        Some(CONTENT_SECURITY_POLICY)
    );
    assert_eq!(index.header("referrer-policy"), Some("no-referrer"));
    assert_eq!(index.header("x-content-type-options"), Some("nosniff"));

    for (path, body, content_type) in [
        (
            "/assets/app-1a2b3c.js",
            &b"console.log(1)"[..],
            "text/javascript; charset=utf-8",
        ),
        (
            "/assets/app-1a2b3c.css",
            b"body{}",
            "text/css; charset=utf-8",
        ),
        (
            "/assets/core-9f8e.wasm",
            b"\0asm\x01\0\0\0",
            "application/wasm",
        ),
    ] {
        let r = http_get(addr, path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body, body, "{path}");
        assert_eq!(r.header("content-type"), Some(content_type), "{path}");
        assert_eq!(
            r.header("cache-control"),
            Some("public, max-age=31536000, immutable"),
            "{path}"
        );
        assert_eq!(
            r.header("content-security-policy"),
            Some(CONTENT_SECURITY_POLICY)
        );
    }
    let svg = http_get(addr, "/favicon.svg").await;
    assert_eq!(svg.header("content-type"), Some("image/svg+xml"));
    assert_eq!(svg.header("cache-control"), Some("no-cache"));

    // HEAD gives the headers without the body; other methods are refused.
    let head = http_request(
        addr,
        &format!(
            "HEAD /assets/app-1a2b3c.js HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(head.body.is_empty());
    let post = http_request(
        addr,
        &format!(
            "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(post.status, 405);

    // Unknown paths are 404, not the index (the app's state is in the fragment).
    for path in [
        "/nope",
        "/assets/",
        "/assets",
        "/../Cargo.toml",
        "/assets/../index.html",
    ] {
        let r = http_get(addr, path).await;
        assert_eq!(r.status, 404, "{path}");
        assert!(!r.text().contains("linkfs</title>"), "{path}");
    }
}

#[tokio::test]
async fn a_symlink_out_of_the_web_dir_is_not_followed() {
    let dir = TempDir::new("web-dir-link");
    let outside = TempDir::new("outside");
    outside.write("secret.txt", b"secret");
    dir.write("index.html", b"ok");
    std::os::unix::fs::symlink(outside.path.join("secret.txt"), dir.path.join("leak.txt"))
        .expect("symlink");
    let relay = relay_with(RelayConfig {
        web_dir: Some(dir.path.clone()),
        ..RelayConfig::default()
    })
    .await;
    let r = http_get(relay.local_addr(), "/leak.txt").await;
    assert_eq!(r.status, 404);
    assert!(!r.text().contains("secret"));
}

/// Every file of the directory embedded at build time (`$LINKFS_WEB_DIST` or
/// `web/dist`) is served byte for byte with its type; without one, `/` says how to
/// build the app. Run with `LINKFS_WEB_DIST=/some/dir cargo test` to check a build.
#[tokio::test]
async fn the_embedded_web_app_is_served_byte_for_byte() {
    let relay = relay(Limits::default()).await;
    let addr = relay.local_addr();
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dist = match std::env::var_os("LINKFS_WEB_DIST").filter(|v| !v.is_empty()) {
        Some(dir) => manifest.join(dir),
        None => manifest.join("../web/dist"),
    };
    if !dist.is_dir() {
        let r = http_get(addr, "/").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        assert!(r.text().contains(
            "The linkfs web app is not built. Run <code>npm run build</code>, then rebuild linkfs."
        ));
        return;
    }
    let mut files = Vec::new();
    walk(&dist, &mut files);
    assert!(!files.is_empty(), "{} is empty", dist.display());
    for file in files {
        let rel = file
            .strip_prefix(&dist)
            .expect("under dist")
            .to_str()
            .expect("UTF-8");
        let r = http_get(addr, &format!("/{rel}")).await;
        assert_eq!(r.status, 200, "{rel}");
        assert_eq!(
            r.body,
            std::fs::read(&file).expect("read"),
            "{rel} differs: rebuild the relay"
        );
        let expected_type = match file.extension().and_then(|e| e.to_str()) {
            Some("html") => "text/html; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("wasm") => "application/wasm",
            _ => continue,
        };
        assert_eq!(r.header("content-type"), Some(expected_type), "{rel}");
        assert_eq!(
            r.header("content-security-policy"),
            Some(CONTENT_SECURITY_POLICY)
        );
    }
    let index = http_get(addr, "/").await;
    assert_eq!(
        index.body,
        std::fs::read(dist.join("index.html")).expect("dist has index.html")
    );
}

fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("list").flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// A directory under the system temp dir, removed on drop.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(
            format!(
                "linkfs-relay-test-{name}-{}-{:?}",
                std::process::id(),
                std::time::SystemTime::now()
            )
            .replace([' ', '{', '}', ':', ','], "_"),
        );
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.path.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(path, bytes).expect("write");
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[tokio::test]
async fn a_silent_or_half_sent_request_is_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let relay = relay(Limits {
        ping_interval: std::time::Duration::from_millis(100),
        idle_timeout: std::time::Duration::from_millis(300),
        silence_timeout: std::time::Duration::from_millis(400),
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let mut silent = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut slowloris = tokio::net::TcpStream::connect(addr).await.expect("connect");
    slowloris
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let started = std::time::Instant::now();
    for tcp in [&mut silent, &mut slowloris] {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(common::PATIENCE, tcp.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the relay kept a silent socket open");
    }
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(350),
        "{waited:?}"
    );
    // Live traffic is unaffected.
    assert_eq!(http_get(addr, "/healthz").await.text(), "ok");
}

/// A WebSocket upgrade to `room` as a guest with an `X-Forwarded-For` header; the HTTP status.
async fn upgrade_from(addr: std::net::SocketAddr, forwarded_for: &str) -> u16 {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{addr}/signal/{}?role=guest", *ROOM)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("x-forwarded-for", forwarded_for.parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, response)) => {
            // Keep it open for the rest of the test.
            std::mem::forget(ws);
            response.status().as_u16()
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => r.status().as_u16(),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn one_address_gets_a_bounded_number_of_connections_and_forwarded_for_counts_only_from_a_trusted_proxy()
 {
    let limits = Limits {
        max_connections_per_address: 3,
        ..Limits::default()
    };
    // Not behind a proxy: X-Forwarded-For is ignored, 127.0.0.1 is the client.
    let relay = relay(limits.clone()).await;
    let addr = relay.local_addr();
    let _host = Client::host(addr, &ROOM).await;
    for _ in 0..2 {
        assert_eq!(upgrade_from(addr, "10.0.0.1").await, 101);
    }
    assert_eq!(
        upgrade_from(addr, "10.0.0.2").await,
        429,
        "a forged header changes nothing"
    );

    // Behind a trusted proxy (127.0.0.1 here): each forwarded client has its own count.
    let relay = relay_with(RelayConfig {
        limits,
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        ..RelayConfig::default()
    })
    .await;
    let addr = relay.local_addr();
    let _host = Client::host(addr, &ROOM).await;
    for _ in 0..3 {
        assert_eq!(upgrade_from(addr, "10.0.0.1").await, 101);
    }
    assert_eq!(upgrade_from(addr, "10.0.0.1").await, 429);
    assert_eq!(upgrade_from(addr, "10.0.0.2").await, 101);
}

#[tokio::test]
async fn metrics_need_the_token_when_one_is_set() {
    let relay = relay_with(RelayConfig {
        metrics_token: Some("s3cret".into()),
        ..RelayConfig::default()
    })
    .await;
    let addr = relay.local_addr();
    assert_eq!(http_get(addr, "/metrics").await.status, 401);
    let ok = http_request(
        addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(ok.status, 200);
    assert!(ok.text().contains("linkfs_relay"));
}

#[tokio::test]
async fn a_request_head_trickled_a_byte_at_a_time_is_dropped_at_the_header_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let relay = relay(Limits {
        header_timeout: std::time::Duration::from_millis(800),
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let mut slowloris = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let started = std::time::Instant::now();
    // Never idle long enough for the silence timeout (90 s), never finishing the head.
    let mut closed = false;
    for b in b"GET / HTTP/1.1\r\nHost: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        .iter()
        .cycle()
        .take(60)
    {
        if slowloris.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        let mut one = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            slowloris.read(&mut one),
        )
        .await
        {
            closed = true;
            break;
        }
    }
    let waited = started.elapsed();
    assert!(
        closed,
        "the relay kept a trickling connection for {waited:?}"
    );
    assert!(waited < std::time::Duration::from_secs(3), "{waited:?}");
    // A request that arrives whole is served.
    assert_eq!(http_get(addr, "/healthz").await.text(), "ok");
}

#[tokio::test]
async fn one_address_cannot_fill_a_room_with_its_own_guests() {
    let relay = relay(Limits {
        max_guests_per_address: 2,
        ..Limits::default()
    })
    .await;
    let addr = relay.local_addr();
    let _host = Client::host(addr, &ROOM).await;
    assert_eq!(upgrade_from(addr, "192.0.2.1").await, 101);
    assert_eq!(upgrade_from(addr, "192.0.2.1").await, 101);
    assert_eq!(
        upgrade_from(addr, "192.0.2.1").await,
        429,
        "a third guest from one address"
    );
}

/// A host upgrade from a web page (an `Origin` header, as browsers send) or
/// not; the HTTP status and body.
async fn host_upgrade(addr: std::net::SocketAddr, origin: Option<&str>) -> (u16, String) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!(
        "ws://{addr}/signal/{}?role=host{}",
        *ROOM,
        common::host_proof(&ROOM)
    )
    .into_client_request()
    .unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, response)) => {
            drop(ws);
            (response.status().as_u16(), String::new())
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => (
            r.status().as_u16(),
            String::from_utf8_lossy(r.body().as_deref().unwrap_or_default()).into_owned(),
        ),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn with_no_tab_sharing_a_sharer_in_a_web_page_is_refused_in_words_and_the_app_is_not() {
    let relay = relay_with(RelayConfig {
        no_tab_sharing: true,
        ..RelayConfig::default()
    })
    .await;
    let addr = relay.local_addr();
    let origin = format!("http://{addr}");
    let (status, body) = host_upgrade(addr, Some(&origin)).await;
    assert_eq!(status, 403);
    assert!(
        body.contains("does not take shares from a browser tab"),
        "{body}"
    );
    assert!(
        body.contains("linkfs app"),
        "says what to do instead: {body}"
    );
    let (status, _) = host_upgrade(addr, None).await;
    assert_eq!(
        status, 101,
        "the native sharer sends no Origin and is welcome"
    );
    // A visitor in a browser is welcome either way.
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut guest = format!("ws://{addr}/signal/{}?role=guest", *ROOM)
        .into_client_request()
        .unwrap();
    guest
        .headers_mut()
        .insert("origin", origin.parse().unwrap());
    let (_ws, response) = tokio_tungstenite::connect_async(guest)
        .await
        .expect("a guest");
    assert_eq!(response.status().as_u16(), 101);
    // By default a sharer may connect from a page.
    let open = relay_with(RelayConfig::default()).await;
    let (status, _) = host_upgrade(open.local_addr(), Some("http://example.test")).await;
    assert_eq!(status, 101);
}
