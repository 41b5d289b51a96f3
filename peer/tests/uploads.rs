//! Visitors adding files, for real: `linkfs put` through links that take
//! files, against a running `linkfs share`. Needs WebRTC on loopback (and,
//! for the full disk, root to mount a small tmpfs in a mount namespace), so
//! these run inside the test namespace (scripts/test).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::sharing::{Share, text};

const LINKFS: &str = env!("CARGO_BIN_EXE_linkfs");

fn put(link: &str, args: &[&Path], to: Option<&str>) -> Output {
    let mut c = Command::new(LINKFS);
    c.args(["put", link]).args(args);
    if let Some(to) = to {
        c.args(["--to", to]);
    }
    c.output().expect("run linkfs put")
}

/// `linkfs ls ARGS LINK`'s output once it `shows` what is wanted, or after 5 s
/// (the share takes a file that landed in live, within a moment; a visitor
/// that connects at once, 0.1 s on loopback, may come before it).
fn listing_once(link: &str, args: &[&str], shows: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let o = Command::new(LINKFS)
            .arg("ls")
            .args(args)
            .arg(link)
            .output()
            .unwrap();
        let out = text(&o.stdout);
        if shows(&out) || Instant::now() >= deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn add_link(share: &Share, args: &[&str]) -> String {
    let mut all = vec!["link", "add"];
    all.extend_from_slice(args);
    let o = share.ask(&all);
    assert!(o.status.success(), "link add {args:?}: {}", text(&o.stderr));
    text(&o.stdout).trim().to_owned()
}

/// Every path under `dir` with its bytes (folders: None), sorted; the
/// staging folder left out.
fn tree(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<(String, Option<Vec<u8>>)>) {
        for e in std::fs::read_dir(at).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".linkfs-incoming" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                out.push((rel, None));
                walk(root, &p, out);
            } else {
                out.push((rel, Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn source(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linkfs-upload-src-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
#[ignore = "needs WebRTC on loopback: runs in the test namespace (scripts/test)"]
fn a_folder_put_through_an_upload_link_lands_whole_in_its_scope_and_never_over_a_file() {
    let share = Share::new("put");
    std::fs::create_dir_all(share.dir.join("inbox")).unwrap();
    std::fs::write(share.dir.join("inbox/notes.txt"), b"the sharer's own").unwrap();
    let link = add_link(
        &share,
        &["--allow-upload", "--scope", "inbox", "--label", "in"],
    );

    let src = source("folder");
    let album = src.join("album");
    for d in ["album/2026/summer", "album/empty-not-sent"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    std::fs::write(
        album.join("2026/summer/beach day.jpg"),
        random_bytes(3 << 20, 1),
    )
    .unwrap();
    std::fs::write(album.join("2026/Cafe\u{301} menu.txt"), b"menu").unwrap();
    std::fs::write(album.join("tab\there.txt"), b"tab").unwrap();
    std::fs::write(album.join("back\\slash.txt"), b"slash").unwrap();
    std::fs::write(src.join("notes.txt"), b"the visitor's").unwrap();

    let o = put(&link, &[&album, &src.join("notes.txt")], None);
    let said = text(&o.stderr);
    assert!(o.status.success(), "put: {said}");
    assert!(said.contains("added 5 files"), "{said}");
    // Every change to a name is said; the taken name too.
    assert!(said.contains("control characters removed"), "{said}");
    assert!(said.contains("replaced by '_'"), "{said}");
    assert!(said.contains("Unicode normalised (NFC)"), "{said}");
    assert!(
        said.contains("notes.txt: that name was taken; saved as notes (2).txt"),
        "{said}"
    );

    let inbox = share.dir.join("inbox");
    assert_eq!(
        std::fs::read(inbox.join("notes.txt")).unwrap(),
        b"the sharer's own"
    );
    assert_eq!(
        std::fs::read(inbox.join("notes (2).txt")).unwrap(),
        b"the visitor's"
    );
    assert_eq!(
        std::fs::read(inbox.join("album/2026/summer/beach day.jpg")).unwrap(),
        random_bytes(3 << 20, 1)
    );
    assert!(inbox.join("album/tabhere.txt").exists());
    assert_eq!(
        std::fs::read(inbox.join("album/2026/Caf\u{e9} menu.txt")).unwrap(),
        b"menu",
        "the name lands in NFC"
    );
    assert!(inbox.join("album/back_slash.txt").exists());
    // Nothing outside the scope, nothing left aside.
    let top: Vec<String> = tree(&share.dir)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !p.starts_with("inbox"))
        .collect();
    assert_eq!(top, vec!["a.txt", "sub", "sub/b.txt"]);
    let staged = std::fs::read_dir(share.dir.join(".linkfs-incoming"))
        .unwrap()
        .count();
    assert_eq!(staged, 0, "parts left aside");

    // Another visitor of the link sees the new files through the live share.
    let listing = listing_once(&link, &["-R"], |l| l.contains("beach day.jpg"));
    assert!(listing.contains("beach day.jpg"), "{listing}");
    // The sharer sees them in `link list` and the visitors' figures.
    let list = text(&share.ask(&["link", "list", "--json"]).stdout);
    assert!(list.contains("\"added_files\":5"), "{list}");
    let _ = std::fs::remove_dir_all(&src);
}

#[test]
#[ignore = "needs WebRTC on loopback: runs in the test namespace (scripts/test)"]
fn a_put_stopped_midway_goes_on_from_its_byte_when_run_again() {
    let share = Share::new("resume");
    let link = add_link(&share, &["--allow-upload"]);
    let src = source("resume");
    let big = src.join("big.bin");
    let bytes = random_bytes(400 << 20, 7);
    std::fs::write(&big, &bytes).unwrap();

    let small = src.join("small.txt");
    std::fs::write(&small, b"small first").unwrap();
    let mut first = Command::new(LINKFS)
        .args(["put", &link])
        .arg(&small)
        .arg(&big)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Stopped once part of it is on the sharer's disk.
    let staging = share.dir.join(".linkfs-incoming");
    let deadline = Instant::now() + Duration::from_secs(60);
    let part_len = || -> u64 {
        std::fs::read_dir(&staging)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    };
    while part_len() < 50 << 20 {
        assert!(Instant::now() < deadline, "the upload did not start");
        assert!(
            first.try_wait().unwrap().is_none(),
            "the put ended before it was stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The sharer sees what the visitor added so far.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = text(&share.ask(&["visitors", "--json"]).stdout);
        if seen.contains("\"files_uploaded\":1") {
            assert!(seen.contains("\"bytes_uploaded\":11"), "{seen}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "linkfs visitors does not show the landed file: {seen}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap();
    let _ = first.wait();
    let held = part_len();
    assert!(held < bytes.len() as u64, "it had finished");
    assert!(!share.dir.join("big.bin").exists(), "half a file in place");

    // Again: it goes on (the sharer may still hold the old connection for a
    // moment: then it is busy, and a later run goes on).
    let deadline = Instant::now() + Duration::from_secs(60);
    let said = loop {
        let o = put(&link, &[&big], None);
        let said = text(&o.stderr);
        if o.status.success() {
            break said;
        }
        assert!(said.contains("another connection"), "{said}");
        assert!(Instant::now() < deadline, "{said}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(said.contains("big.bin: going on from byte"), "{said}");
    assert!(said.contains("1 went on from an earlier run"), "{said}");
    assert_eq!(std::fs::read(share.dir.join("big.bin")).unwrap(), bytes);
    let _ = std::fs::remove_dir_all(&src);
}

#[test]
#[ignore = "needs WebRTC on loopback: runs in the test namespace (scripts/test)"]
fn a_drop_link_shows_nothing_takes_files_and_its_caps_say_no_in_words() {
    let share = Share::new("drop");
    let drop = add_link(
        &share,
        &[
            "--drop",
            "--label",
            "Send me files",
            "--max-upload-file",
            "1K",
            "--max-upload-files",
            "2",
        ],
    );
    let o = Command::new(LINKFS)
        .args(["ls", "-R", &drop])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).trim(), "", "a drop link lists nothing");
    for secret in ["a.txt", "sub", "b.txt"] {
        assert!(!text(&o.stdout).contains(secret));
    }
    let src = source("drop");
    std::fs::write(src.join("small.txt"), b"small").unwrap();
    std::fs::write(src.join("big.txt"), vec![b'x'; 2048]).unwrap();
    let o = put(&drop, &[&src.join("small.txt"), &src.join("big.txt")], None);
    let said = text(&o.stderr);
    assert!(!o.status.success(), "a refused file is a failure: {said}");
    assert!(
        said.contains("big.txt: this link takes files of at most 1024 bytes")
            || said.contains("at most 1024 bytes"),
        "{said}"
    );
    // It lands in the link's own folder, apart from the sharer's files.
    let own = share.dir.join("Send me files (dropped files)");
    assert_eq!(std::fs::read(own.join("small.txt")).unwrap(), b"small");
    assert!(!own.join("big.txt").exists() && !share.dir.join("small.txt").exists());
    std::fs::write(src.join("two.txt"), b"2").unwrap();
    std::fs::write(src.join("three.txt"), b"3").unwrap();
    let o = put(&drop, &[&src.join("two.txt"), &src.join("three.txt")], None);
    let said = text(&o.stderr);
    assert!(said.contains("at most 2 files"), "{said}");
    assert_eq!(
        ["two.txt", "three.txt"]
            .iter()
            .filter(|n| own.join(n).exists())
            .count(),
        1,
        "the second file of the cap landed, the third did not"
    );
    // A read-only link says how to get one that takes files.
    let o = put(&share.link, &[&src.join("two.txt")], None);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("--allow-upload"),
        "{}",
        text(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&src);
}

/// What `put` said, with `name` written as NAME and every number as #
/// (times, rates and byte counts differ from run to run).
fn said_about(o: &Output, name: &str) -> String {
    text(&o.stderr)
        .replace(name, "NAME")
        .lines()
        .filter(|l| !l.contains("connect"))
        .map(|l| {
            l.chars()
                .map(|c| if c.is_ascii_digit() { '#' } else { c })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[ignore = "needs WebRTC on loopback: runs in the test namespace (scripts/test)"]
fn a_drop_link_says_the_same_for_names_that_exist_and_plants_nothing_beside_the_sharers_files() {
    // Regression: `put DROP secret.txt` answered "that name was taken; saved as
    // secret (2).txt" when the sharer had a secret.txt, `--to private` and
    // `--to secret.txt/x` answered differently for names that exist, and
    // `put DROP authorized_keys --to .ssh` made `.ssh/authorized_keys` at the
    // share's root.
    let share = Share::new("drop-oracle");
    std::fs::write(share.dir.join("secret.txt"), b"the sharer's").unwrap();
    std::fs::create_dir_all(share.dir.join("private")).unwrap();
    let before = tree(&share.dir);
    let drop = add_link(&share, &["--drop", "--label", "files for me"]);
    let src = source("drop-oracle");
    for name in ["secret.txt", "unheard.txt", "authorized_keys", ".bashrc"] {
        std::fs::write(src.join(name), format!("the visitor's {name}")).unwrap();
    }
    let same = |a: (&Output, &str), b: (&Output, &str)| {
        assert!(
            a.0.status.success() && b.0.status.success(),
            "{}\n{}",
            text(&a.0.stderr),
            text(&b.0.stderr)
        );
        assert_eq!(
            said_about(a.0, a.1),
            said_about(b.0, b.1),
            "a drop link answered differently for a name the sharer has"
        );
    };
    let taken = put(&drop, &[&src.join("secret.txt")], None);
    let free = put(&drop, &[&src.join("unheard.txt")], None);
    same((&taken, "secret.txt"), (&free, "unheard.txt"));
    assert!(
        !text(&taken.stderr).contains("taken"),
        "{}",
        text(&taken.stderr)
    );
    let taken = put(&drop, &[&src.join("secret.txt")], Some("private"));
    let free = put(&drop, &[&src.join("secret.txt")], Some("unheard"));
    same((&taken, "private"), (&free, "unheard"));
    let taken = put(&drop, &[&src.join("unheard.txt")], Some("secret.txt/x"));
    let free = put(&drop, &[&src.join("unheard.txt")], Some("unheard.txt/x"));
    same((&taken, "secret.txt"), (&free, "unheard.txt"));
    // Hidden names are not made, and nothing lands beside the sharer's files.
    let o = put(&drop, &[&src.join("authorized_keys")], Some(".ssh"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = put(&drop, &[&src.join(".bashrc")], None);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let after = tree(&share.dir);
    let own = "files for me (dropped files)";
    let outside: Vec<_> = after
        .iter()
        .filter(|(p, _)| !p.starts_with(own) && !before.iter().any(|(b, _)| b == p))
        .collect();
    assert!(
        outside.is_empty(),
        "landed beside the sharer's files: {outside:?}"
    );
    assert_eq!(
        before,
        after
            .iter()
            .filter(|(p, _)| !p.starts_with(own))
            .cloned()
            .collect::<Vec<_>>(),
        "the sharer's files changed"
    );
    let mine = share.dir.join(own);
    assert_eq!(
        std::fs::read(mine.join("_ssh/authorized_keys")).unwrap(),
        b"the visitor's authorized_keys"
    );
    assert_eq!(
        std::fs::read(mine.join("_bashrc")).unwrap(),
        b"the visitor's .bashrc"
    );
    assert!(!share.dir.join(".ssh").exists() && !share.dir.join(".bashrc").exists());
    // A folder named where a file is: the next numbered folder, silently.
    assert_eq!(
        std::fs::read(mine.join("secret.txt")).unwrap(),
        b"the visitor's secret.txt"
    );
    assert_eq!(
        std::fs::read(mine.join("secret (2).txt/x/unheard.txt")).unwrap(),
        b"the visitor's unheard.txt"
    );
    assert_eq!(
        std::fs::read(mine.join("unheard (2).txt/x/unheard.txt")).unwrap(),
        b"the visitor's unheard.txt"
    );
    // The sharer sees where they land.
    let list = text(&share.ask(&["link", "list", "--json"]).stdout);
    assert!(
        list.contains(&format!("\"drop_folder\":\"{own}\"")),
        "{list}"
    );
    let _ = std::fs::remove_dir_all(&src);
}

/// The bytes of part files in the share's staging folder.
fn staged_bytes(share: &Share) -> u64 {
    std::fs::read_dir(share.dir.join(".linkfs-incoming"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

#[test]
#[ignore = "needs WebRTC on loopback: runs in the test namespace (scripts/test)"]
fn uploads_to_a_refused_target_keep_no_bytes_and_count_against_no_one() {
    // Regression: six 1 MiB puts at a refused target under --max-upload-bytes
    // 3M left 6 MiB in .linkfs-incoming for a week, counted against no cap.
    let share = Share::new("refused-bytes");
    std::fs::create_dir_all(share.dir.join("inbox")).unwrap();
    std::fs::write(share.dir.join("inbox/existing.txt"), b"the sharer's").unwrap();
    let link = add_link(
        &share,
        &[
            "--allow-upload",
            "--scope",
            "inbox",
            "--max-upload-bytes",
            "3M",
        ],
    );
    let src = source("refused-bytes");
    for n in 0..6 {
        std::fs::write(src.join(format!("m{n}.bin")), random_bytes(1 << 20, n)).unwrap();
    }
    for n in 0..6 {
        let o = put(
            &link,
            &[&src.join(format!("m{n}.bin"))],
            Some("existing.txt"),
        );
        let said = text(&o.stderr);
        assert!(
            !o.status.success(),
            "a file where a folder is named was taken: {said}"
        );
        // Named from the link's folder, as the visitor knows it.
        assert!(
            said.contains("'existing.txt'") && !said.contains("inbox/"),
            "{said}"
        );
    }
    assert_eq!(
        staged_bytes(&share),
        0,
        "refused uploads left bytes on the sharer's disk"
    );
    // The cap was not spent by them: 3 MiB still go in.
    let o = put(
        &link,
        &[
            &src.join("m0.bin"),
            &src.join("m1.bin"),
            &src.join("m2.bin"),
        ],
        None,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    // And now it is: a fourth is refused before its first byte, keeping nothing.
    let o = put(&link, &[&src.join("m3.bin")], Some("more"));
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("at most 3145728 bytes"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(staged_bytes(&share), 0);
    let _ = std::fs::remove_dir_all(&src);
}

#[test]
#[ignore = "needs WebRTC on loopback: runs in the test namespace (scripts/test)"]
fn put_refuses_a_target_from_the_root_and_never_writes_into_the_staging_folder() {
    // Regressions: `put --to /tmp` dropped the '/' silently, and `--to
    // .linkfs-incoming` on a whole-share link landed in the real staging
    // folder, invisible and never swept.
    let share = Share::new("put-targets");
    let link = add_link(&share, &["--allow-upload", "--allow-hidden"]);
    let src = source("put-targets");
    std::fs::write(src.join("f.txt"), b"f").unwrap();
    let o = put(&link, &[&src.join("f.txt")], Some("/tmp"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("'/tmp'"), "{}", text(&o.stderr));
    assert!(!share.dir.join("tmp").exists());
    let o = put(&link, &[&src.join("f.txt")], Some(".linkfs-incoming"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read(share.dir.join("_linkfs-incoming/f.txt")).unwrap(),
        b"f"
    );
    assert_eq!(staged_bytes(&share), 0);
    // With --allow-hidden, a hidden name is made as asked.
    let o = put(&link, &[&src.join("f.txt")], Some(".config"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(share.dir.join(".config/f.txt").exists());
    let _ = std::fs::remove_dir_all(&src);
}

#[test]
#[ignore = "needs WebRTC on loopback and root (a tmpfs in a mount namespace): runs in the test namespace (scripts/test)"]
fn a_full_disk_is_said_to_the_uploader_and_leaves_nothing_half_written() {
    // The sharer's folder is a 24 MiB tmpfs in a mount namespace of its own.
    let dir = std::env::temp_dir().join(format!("linkfs-upload-full-{}", std::process::id()));
    let state = dir.with_extension("state");
    for d in [&dir, &state] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    let script = format!(
        "mount -t tmpfs -o size=24m tmpfs '{d}' && exec '{LINKFS}' share --no-qr '{d}'",
        d = dir.display()
    );
    let mut sharer = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .env("LINKFS_STATE_DIR", &state)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("unshare");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(sharer.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let main = line.trim().to_owned();
    assert!(main.starts_with("http"), "no link: {line:?}");
    let o = Command::new(LINKFS)
        .args(["link", "add", "--allow-upload", "--dir"])
        .arg(&dir)
        .env("LINKFS_STATE_DIR", &state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let link = text(&o.stdout).trim().to_owned();

    // Two 14 MiB files at once: each fits alone, both do not.
    let src = source("full");
    let a = src.join("a.bin");
    let b = src.join("b.bin");
    std::fs::write(&a, random_bytes(14 << 20, 3)).unwrap();
    std::fs::write(&b, random_bytes(14 << 20, 4)).unwrap();
    let o = put(&link, &[&a, &b], None);
    let said = text(&o.stderr);
    assert!(!o.status.success(), "{said}");
    assert!(said.contains("disk is full"), "{said}");
    // Through the main link: one whole file, nothing of the other, nothing aside.
    let listing = listing_once(&main, &["-R", "--json"], |l| {
        l.contains("\"path\":\"a.bin\"") || l.contains("\"path\":\"b.bin\"")
    });
    let landed: Vec<&str> = ["a.bin", "b.bin"]
        .into_iter()
        .filter(|n| listing.contains(&format!("\"path\":\"{n}\"")))
        .collect();
    assert_eq!(landed.len(), 1, "{listing}");
    assert!(
        listing.contains(&format!("\"size\":{}", 14 << 20)),
        "{listing}"
    );
    assert!(!listing.contains("linkfs-incoming"), "{listing}");
    let got = dir.with_extension("got");
    let o = Command::new(LINKFS)
        .args(["get", &main, landed[0], "--out"])
        .arg(&got)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read(got.join(landed[0])).unwrap(),
        std::fs::read(src.join(landed[0])).unwrap()
    );
    let _ = sharer.kill();
    let _ = sharer.wait();
    for d in [&dir, &state, &got, &src] {
        let _ = std::fs::remove_dir_all(d);
    }
}
