//! `linkfs-wan` between two fresh network namespaces, checked the way a user
//! would check a line: ping's round trip, and TCP (iperf3) near the set rate.
//! Root only (namespaces, TUN devices); `scripts/test` runs it:
//!
//! ```text
//! cargo test -p linkfs-tools --release --test wan_line -- --ignored
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Two named namespaces and a line between them; all gone on drop.
struct Line {
    near: String,
    far: String,
    wan: Child,
}

impl Line {
    fn start(tag: &str, args: &[&str]) -> Line {
        let pid = std::process::id();
        let (near, far) = (format!("wt-{tag}-a{pid}"), format!("wt-{tag}-b{pid}"));
        for ns in [&near, &far] {
            run("ip", &["netns", "add", ns]);
        }
        let mut wan = Command::new(env!("CARGO_BIN_EXE_linkfs-wan"))
            .args(["--a", &near, "--b", &far])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("linkfs-wan starts");
        let mut first = String::new();
        BufReader::new(wan.stdout.take().expect("its stdout"))
            .read_line(&mut first)
            .expect("linkfs-wan says the line is up");
        assert!(first.starts_with("linkfs-wan: "), "{first}");
        Line { near, far, wan }
    }

    /// Runs `cmd` in the far namespace; its stdout.
    fn far(&self, cmd: &[&str]) -> String {
        let mut all = vec!["netns", "exec", &self.far];
        all.extend_from_slice(cmd);
        run("ip", &all)
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let _ = self.wan.kill();
        let _ = self.wan.wait();
        for ns in [&self.near, &self.far] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// ping's average round trip, ms.
fn ping_ms(line: &Line) -> f64 {
    let out = line.far(&["ping", "-c", "10", "-i", "0.1", "-q", "10.88.0.1"]);
    // "rtt min/avg/max/mdev = 20.443/20.522/20.623/0.058 ms"
    let stats = out
        .lines()
        .find(|l| l.starts_with("rtt"))
        .unwrap_or_else(|| panic!("no round trip in ping's output:\n{out}"));
    let numbers = stats.split('=').nth(1).expect("numbers").trim();
    numbers
        .split('/')
        .nth(1)
        .and_then(|x| x.parse().ok())
        .expect("the average")
}

/// iperf3 from the near side to the far side for `secs`, Mbit/s received.
fn iperf_mbit(line: &Line, secs: u32) -> f64 {
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &line.near,
            "iperf3",
            "-s",
            "-1",
            "-B",
            "10.88.0.1",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("iperf3 -s starts");
    std::thread::sleep(Duration::from_millis(500));
    let out = line.far(&[
        "iperf3",
        "-c",
        "10.88.0.1",
        "-R",
        "-J",
        "-t",
        &secs.to_string(),
    ]);
    let _ = server.wait();
    let json: serde_json::Value = serde_json::from_str(&out).expect("iperf3 -J prints JSON");
    json["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .expect("bits per second")
        / 1e6
}

#[test]
#[ignore = "root only: network namespaces and TUN devices (scripts/test runs it)"]
fn the_line_adds_its_delay_to_a_ping_and_carries_tcp_near_its_rate() {
    let line = Line::start("rate", &["--delay-ms", "10", "--rate-mbit", "100"]);
    let rtt = ping_ms(&line);
    assert!(
        (20.0..25.0).contains(&rtt),
        "ping's round trip is {rtt} ms across a line of 10 ms each way"
    );
    let mbit = iperf_mbit(&line, 5);
    assert!(
        (80.0..=101.0).contains(&mbit),
        "TCP moved {mbit:.1} Mbit/s across a 100 Mbit/s line"
    );
}

#[test]
#[ignore = "root only: network namespaces and TUN devices (scripts/test runs it)"]
fn a_lossy_line_loses_about_the_share_asked_for() {
    let line = Line::start("loss", &["--delay-ms", "1", "--loss", "10"]);
    let out = line.far(&["ping", "-c", "200", "-i", "0.01", "-q", "10.88.0.1"]);
    // "200 packets transmitted, 162 received, 19% packet loss"; a ping is lost
    // if either way loses it: 1 - 0.9^2 = 19%.
    let received: f64 = out
        .split(", ")
        .find_map(|p| p.strip_suffix(" received"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in ping's output:\n{out}"));
    let lost = 1.0 - received / 200.0;
    assert!(
        (0.08..0.32).contains(&lost),
        "{:.0}% of pings lost across a line losing 10% each way",
        lost * 100.0
    );
}
