//! The `linkfs` command line: `--help` and the exit codes a script can rely on.
//! The tests that open a share need WebRTC on loopback, so they run inside the
//! private network namespace like the rest (scripts/test).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const LINKFS: &str = env!("CARGO_BIN_EXE_linkfs");

fn linkfs(args: &[&str]) -> Output {
    Command::new(LINKFS)
        .args(args)
        .output()
        .expect("run linkfs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_lists_the_exit_codes() {
    for args in [
        &["--help"][..],
        &["mount", "--help"],
        &["ls", "--help"],
        &["get", "--help"],
    ] {
        let o = linkfs(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8_lossy(&o.stdout);
        for line in [
            "0  done",
            "2  the command line is not valid",
            "3  the sharer stopped sharing",
            "4  this link is not valid",
            "5  the relay or the sharer could not be reached",
        ] {
            assert!(
                text.contains(line),
                "{args:?} --help lacks {line:?}:\n{text}"
            );
        }
    }
}

#[test]
fn a_bad_command_line_exits_2() {
    let o = linkfs(&["ls"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = linkfs(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_malformed_link_exits_4_and_says_so() {
    let o = linkfs(&["ls", "http://127.0.0.1:1/#not-a-key"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("not valid"), "{}", stderr(&o));
    let o = linkfs(&["ls", "http://127.0.0.1:1/"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(stderr(&o).contains("after '#'"), "{}", stderr(&o));
}

#[test]
fn a_relay_that_cannot_be_reached_exits_5() {
    // Port 9 (discard) on loopback: nothing listens there.
    let o = linkfs(&[
        "ls",
        "http://127.0.0.1:9/#aaaaaaaaaaaaaaaa.AAAAAAAAAAAAAAAAAAAAAA",
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("could not reach the relay"),
        "{}",
        stderr(&o)
    );
}

struct Sharing {
    child: Child,
    link: String,
    dir: PathBuf,
}

impl Drop for Sharing {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `linkfs share` of a fresh folder, with its embedded relay or through `relay`.
fn share(tag: &str, relay: Option<&str>) -> Sharing {
    let dir = std::env::temp_dir().join(format!("linkfs-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), b"hello").unwrap();
    let mut command = Command::new(LINKFS);
    command.args(["share", "--no-qr"]).arg(&dir);
    command.env("LINKFS_STATE_DIR", dir.with_extension("state"));
    if let Some(relay) = relay {
        command.args(["--relay", relay]);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start linkfs share");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the link");
    Sharing {
        child,
        link: line.trim().to_owned(),
        dir,
    }
}

/// Replaces the room or the secret of a link, keeping the rest.
fn with_key(link: &str, room: Option<&str>, secret: Option<&str>) -> String {
    let (origin, key) = link.split_once('#').unwrap();
    let (r, s) = key.split_once('.').unwrap();
    format!("{origin}#{}.{}", room.unwrap_or(r), secret.unwrap_or(s))
}

#[test]
#[ignore = "needs WebRTC on loopback: runs in the test namespace (scripts/test)"]
fn exit_codes_against_a_real_share() {
    // One share holds the relay; the one under test uses it.
    let holder = share("relay", None);
    let origin = holder.link.split_once('#').unwrap().0.trim_end_matches('/');
    let s = share("shared", Some(origin));
    let o = linkfs(&["ls", &s.link]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("a.txt"));

    // Nobody shares in that room: 3.
    let o = linkfs(&["ls", &with_key(&s.link, Some("nobodysharesthis"), None)]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("not there any more"), "{}", stderr(&o));

    // The right room with another secret: 4.
    let o = linkfs(&[
        "ls",
        &with_key(&s.link, None, Some("BBBBBBBBBBBBBBBBBBBBBA")),
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("secret does not match"),
        "{}",
        stderr(&o)
    );

    // The sharer stops (the relay stays): 3 again.
    let link = s.link.clone();
    drop(s);
    std::thread::sleep(Duration::from_millis(300));
    let o = linkfs(&["ls", &link]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    drop(holder);
}
