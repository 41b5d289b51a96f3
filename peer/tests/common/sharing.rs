//! A folder shared by a running `linkfs share` for the tests that need one
//! (links, uploads): its own state folder, `linkfs link`/`visitors` asked of it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

const LINKFS: &str = env!("CARGO_BIN_EXE_linkfs");

/// A folder shared by a running `linkfs share`, with its own state folder.
pub struct Share {
    child: Option<Child>,
    pub link: String,
    pub dir: PathBuf,
    pub state: PathBuf,
}

impl Share {
    pub fn new(tag: &str) -> Share {
        let dir = std::env::temp_dir().join(format!("linkfs-links-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.txt"), b"hello").unwrap();
        std::fs::write(dir.join("sub/b.txt"), b"world").unwrap();
        let state = dir.with_extension("state");
        let _ = std::fs::remove_dir_all(&state);
        let mut s = Share {
            child: None,
            link: String::new(),
            dir,
            state,
        };
        s.start();
        s
    }

    pub fn start(&mut self) {
        self.start_with(&[]);
    }

    /// Starts `linkfs share` with more arguments.
    pub fn start_with(&mut self, args: &[&str]) {
        let mut child = Command::new(LINKFS)
            .args(["share", "--no-qr"])
            .args(args)
            .arg(&self.dir)
            .env("LINKFS_STATE_DIR", &self.state)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start linkfs share");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the link");
        self.link = line.trim().to_owned();
        self.child = Some(child);
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// `linkfs ARGS --dir <the shared folder>` with this share's state folder.
    pub fn ask(&self, args: &[&str]) -> Output {
        Command::new(LINKFS)
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .env("LINKFS_STATE_DIR", &self.state)
            .output()
            .expect("run linkfs")
    }

    pub fn add(&self, label: &str, expires: Option<&str>) -> String {
        let mut args = vec!["link", "add", "--label", label];
        if let Some(e) = expires {
            args.extend(["--expires", e]);
        }
        let o = self.ask(&args);
        assert!(o.status.success(), "link add: {}", text(&o.stderr));
        text(&o.stdout).trim().to_owned()
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
