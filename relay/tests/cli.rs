//! The `linkfs-relay` binary: flags, the first stdout line, clean exit on SIGTERM.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linkfs-relay");

#[test]
fn help_lists_the_operator_flags() {
    let out = Command::new(BIN).arg("--help").output().expect("run");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--bind",
        "--ice-server",
        "--web-dir",
        "--max-connections",
        "--max-rooms",
        "--max-guests-per-room",
        "--rate-per-sec",
        "--idle-timeout-secs",
        "[default: 127.0.0.1:8080]",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn bad_flags_fail_with_a_reason() {
    for (args, reason) in [
        (
            &["--ice-server", "http://example.org"][..],
            "expected a stun:, stuns:, turn: or turns: URL",
        ),
        (
            &["--ice-server", "turn:t.example.org,user"][..],
            "both a username and a credential",
        ),
        (
            &["--max-rooms", "0"][..],
            "the limit `max_rooms` must be at least 1",
        ),
        (&["--web-dir", "/nonexistent/linkfs"][..], "not a directory"),
        (
            &["--ping-interval-secs", "90"][..],
            "must be shorter than the idle timeout",
        ),
    ] {
        let out = Command::new(BIN)
            .args(["--bind", "127.0.0.1:0"])
            .args(args)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn it_serves_until_sigterm_then_exits_0() {
    let mut child = Command::new(BIN)
        .args([
            "--bind",
            "127.0.0.1:0",
            "--ice-server",
            "stun:stun.example.org:3478",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let stdout = child.stdout.take().expect("piped");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("first line");
    let addr: SocketAddr = first
        .trim()
        .strip_prefix("linkfs-relay listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .parse()
        .expect("address");

    assert_eq!(common::http_get(addr, "/healthz").await.text(), "ok");
    let mut host = common::Client::connect_raw(addr, &common::test_room(), "host").await;
    match host.recv().await {
        linkfs_proto::signal::RelayToClient::Welcome { ice_servers, .. } => {
            assert_eq!(ice_servers[0].urls, ["stun:stun.example.org:3478"]);
        }
        other => panic!("expected welcome, got {other:?}"),
    }

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert_eq!(
        host.expect_end().await,
        common::Ended::Close(Some((1001, "The relay is shutting down.".into())))
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        assert!(Instant::now() < deadline, "still running 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
}
