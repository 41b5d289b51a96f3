//! `linkfs-gen-tree --files N --out DIR [--seed S] [--big-dir 100000] [--empty]`: builds
//! a realistic test tree of N files for walk, share and mount benchmarks.
//!
//! Shape (all of it deterministic from the seed, whatever the thread count):
//! * folders: about `min(N/20, 2000 + N/500)` (2,200 for 100k files, 4,000
//!   for 1M), each under the root (15%), under one of the last 8 folders made
//!   (40%, which makes deep chains, at most 20 levels) or under any earlier one;
//! * one folder, `big-<count>` under the root, holding `--big-dir` files (at
//!   most N/2), and one, `single` under the root, holding exactly one file (the
//!   small side of the big-versus-small folder figures);
//! * every other file in a folder picked with a skew (index ~ u^2), so a few
//!   folders hold many files and most hold a few;
//! * names as people and programs make them, 2 to about 60 bytes: camera and
//!   phone photos (`IMG_0042.JPG`, `PXL_20230815_141502123.jpg`), documents of
//!   one to four words with dates and versions (`Budget 2024-03 final (2).xlsx`),
//!   source files (`session_store.rs`, `indexProgress.ts`), numbered parts
//!   (`part-00042.parquet`), content hashes (40 hex digits, as in git and
//!   caches) and words in other scripts (`café`, `写真`, `Übersicht`, emoji) in
//!   about one name in eight; a name that is taken in its folder gets ` (n)`;
//! * sizes 0 (10%) or 1 to 4,096 bytes of seeded random bytes; mtimes spread
//!   over the four years before 2026 (`--empty`: every file 0 bytes, the rest
//!   the same); modes 0644, 0600, 0755, 0444, 0640 for files and 0755, 0700,
//!   0775, 0750 for folders.
//!
//! Folders are made first (one thread), then files by `--threads` threads,
//! each filling whole folders (fullest first) taken from a shared counter, so
//! no two threads create in the same folder; then the folders' mtimes and
//! modes are set (creating files changes them). Prints one JSON
//! line: `{"files":N,"dirs":D,"bytes":B,"seconds":S}`.

use std::ffi::OsStr;
use std::fs::{self, File, FileTimes, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use clap::Parser;

/// Build a realistic test tree of N files.
#[derive(Debug, Parser)]
#[command(name = "linkfs-gen-tree")]
struct Args {
    /// How many files to make.
    #[arg(long)]
    files: u64,
    /// Where to make them: a folder that does not exist yet or is empty.
    #[arg(long)]
    out: PathBuf,
    /// Seed of everything random: the same seed gives the same tree.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Files in the one big folder (at most half of --files; 0 for none).
    #[arg(long, default_value_t = 100_000)]
    big_dir: u64,
    /// Folders besides the big one (default: min(N/20, 2000 + N/500), at least 1).
    #[arg(long)]
    dirs: Option<u64>,
    /// Threads creating files (default: one per CPU core; more did not help
    /// on the 2-core test machine).
    #[arg(long)]
    threads: Option<usize>,
    /// Every file empty (names, mtimes and modes as usual): for walk, index
    /// and mount figures at sizes where writing the bytes would dominate (10M
    /// files of 0-4 KiB are 17 GiB).
    #[arg(long)]
    empty: bool,
    /// Every file in the one big folder, and no other folder: the shape of a
    /// million names in one folder (`--big-dir` and `--dirs` are then unused).
    #[arg(long)]
    one_folder: bool,
}

/// Deepest folder nesting below the root.
const MAX_DEPTH: u32 = 20;
/// Largest file made, in bytes.
const MAX_SIZE: u64 = 4096;
/// 2026-01-01T00:00:00Z; mtimes fall in the four years before it.
const LATEST_MTIME: u64 = 1_767_225_600;
const MTIME_SPAN: u64 = 4 * 365 * 24 * 3600;

fn main() -> Result<()> {
    let args = Args::parse();
    let started = Instant::now();
    prepare_out(&args.out)?;

    let (big, dirs) = if args.one_folder {
        (args.files, 0)
    } else {
        let dirs = args
            .dirs
            .unwrap_or_else(|| (args.files / 20).min(2000 + args.files / 500))
            .max(1);
        (args.big_dir.min(args.files / 2), dirs)
    };
    let plan = FolderPlan::new(args.seed, dirs, big, args.files > big);
    for folder in &plan.folders[1..] {
        let path = args.out.join(&folder.rel);
        fs::create_dir(&path)
            .with_context(|| format!("cannot create folder {}", path.display()))?;
    }

    let work = FolderWork::new(&plan, args.files, big, args.seed);
    let next = AtomicUsize::new(0);
    let bytes = AtomicU64::new(0);
    let maker = FileMaker {
        args: &args,
        plan: &plan,
        big,
    };
    std::thread::scope(|scope| -> Result<()> {
        let threads = args.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        });
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| scope.spawn(|| maker.make_folders(&work, &next, &bytes)))
            .collect();
        for worker in workers {
            match worker.join() {
                Ok(result) => result?,
                Err(_) => bail!("a file-making thread crashed"),
            }
        }
        Ok(())
    })?;

    for (i, folder) in plan.folders.iter().enumerate().skip(1).rev() {
        let path = args.out.join(&folder.rel);
        let mut rng = Rng::new(args.seed, 1 << 40 | i as u64);
        let dir =
            File::open(&path).with_context(|| format!("cannot open folder {}", path.display()))?;
        dir.set_times(FileTimes::new().set_modified(rng.mtime()))
            .with_context(|| format!("cannot set the time of {}", path.display()))?;
        let mode = *rng.pick(&[
            0o755, 0o755, 0o755, 0o755, 0o755, 0o755, 0o700, 0o775, 0o750,
        ]);
        dir.set_permissions(Permissions::from_mode(mode))
            .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    }

    println!(
        "{{\"files\":{},\"dirs\":{},\"bytes\":{},\"seconds\":{:.3}}}",
        args.files,
        plan.folders.len() - 1,
        bytes.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn prepare_out(out: &Path) -> Result<()> {
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut listing =
        fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?;
    if listing.next().is_some() {
        bail!("{} is not empty; give a new or empty folder", out.display());
    }
    Ok(())
}

/// One folder to make: its path under the output folder.
struct Folder {
    rel: PathBuf,
    depth: u32,
}

/// The folders, decided before anything is made. Index 0 is the output folder
/// itself; then the random folders, the one-file folder and the big folder,
/// when there are these.
struct FolderPlan {
    folders: Vec<Folder>,
    /// Folders that get random files: all but the one-file and the big one.
    ordinary: usize,
    /// The folder holding exactly one file (file number `big`).
    single: Option<usize>,
}

impl FolderPlan {
    fn new(seed: u64, dirs: u64, big: u64, single: bool) -> FolderPlan {
        let mut rng = Rng::new(seed, u64::MAX);
        let mut folders = vec![Folder {
            rel: PathBuf::new(),
            depth: 0,
        }];
        let first_random = folders.len();
        let mut taken = std::collections::HashSet::new();
        for _ in 0..dirs {
            let made = folders.len();
            let roll = rng.below(100);
            let mut parent = if roll < 15 || made <= first_random {
                0
            } else if roll < 55 {
                made - 1 - rng.below(8.min(made - first_random) as u64) as usize
            } else {
                rng.below(made as u64) as usize
            };
            if folders[parent].depth >= MAX_DEPTH {
                parent = 0;
            }
            let mut name = rng.folder_name();
            let mut rel = folders[parent].rel.join(OsStr::from_bytes(&name));
            let mut copy = 1;
            while taken.contains(&rel) {
                copy += 1;
                name = with_copy_number(&rng.folder_name(), copy);
                rel = folders[parent].rel.join(OsStr::from_bytes(&name));
            }
            taken.insert(rel.clone());
            folders.push(Folder {
                rel,
                depth: folders[parent].depth + 1,
            });
        }
        // The one-file and the big folder come last, so no other folder or
        // file lands in them. A random folder may be called `single` too: then
        // this one is `single (2)`.
        let ordinary = folders.len();
        let single = single.then(|| {
            let mut rel = PathBuf::from("single");
            let mut copy = 1;
            while taken.contains(&rel) {
                copy += 1;
                rel = PathBuf::from(format!("single ({copy})"));
            }
            folders.push(Folder { rel, depth: 1 });
            folders.len() - 1
        });
        if big > 0 {
            folders.push(Folder {
                rel: PathBuf::from(format!("big-{big}")),
                depth: 1,
            });
        }
        FolderPlan {
            folders,
            ordinary,
            single,
        }
    }
}

struct FileMaker<'a> {
    args: &'a Args,
    plan: &'a FolderPlan,
    big: u64,
}

/// The file numbers of each folder, so that each folder is filled by one
/// thread: threads creating files in the same folder contend for its lock and
/// made creation slower than one thread alone.
struct FolderWork {
    /// (folder, its file numbers), the fullest folder first.
    folders: Vec<(usize, Vec<u64>)>,
}

impl FolderWork {
    fn new(plan: &FolderPlan, files: u64, big: u64, seed: u64) -> FolderWork {
        let mut by_folder = vec![Vec::new(); plan.folders.len()];
        for number in 0..files {
            let folder = folder_of(&mut Rng::new(seed, number), number, big, plan);
            by_folder[folder].push(number);
        }
        let mut folders: Vec<_> = by_folder
            .into_iter()
            .enumerate()
            .filter(|(_, f)| !f.is_empty())
            .collect();
        folders.sort_by_key(|(_, f)| std::cmp::Reverse(f.len()));
        FolderWork { folders }
    }
}

/// The folder of file `number`: the first draw of its random stream.
fn folder_of(rng: &mut Rng, number: u64, big: u64, plan: &FolderPlan) -> usize {
    if number < big {
        return plan.folders.len() - 1;
    }
    if number == big
        && let Some(single) = plan.single
    {
        return single;
    }
    let u = rng.unit();
    ((u * u * plan.ordinary as f64) as usize).min(plan.ordinary - 1)
}

impl FileMaker<'_> {
    fn make_folders(&self, work: &FolderWork, next: &AtomicUsize, bytes: &AtomicU64) -> Result<()> {
        let mut content = vec![0u8; MAX_SIZE as usize];
        let mut made = 0;
        while let Some((folder, numbers)) = work.folders.get(next.fetch_add(1, Ordering::Relaxed)) {
            let dir = self.args.out.join(&self.plan.folders[*folder].rel);
            for &number in numbers {
                made += self.make(&dir, number, &mut content)?;
            }
        }
        bytes.fetch_add(made, Ordering::Relaxed);
        Ok(())
    }

    /// Makes file `number` in `dir`; returns its size.
    fn make(&self, dir: &Path, number: u64, content: &mut [u8]) -> Result<u64> {
        let mut rng = Rng::new(self.args.seed, number);
        folder_of(&mut rng, number, self.big, self.plan);
        let name = rng.file_name(number);
        let size = if rng.below(10) == 0 {
            0
        } else {
            1 + rng.below(MAX_SIZE)
        };
        let size = if self.args.empty { 0 } else { size };
        let content = &mut content[..size as usize];
        rng.fill(content);
        let mtime = rng.mtime();
        let mode = *rng.pick(&[
            0o644, 0o644, 0o644, 0o644, 0o644, 0o644, 0o644, 0o600, 0o755, 0o444, 0o640,
        ]);

        // One thread fills a folder, in file-number order, so taken names and
        // their " (n)" forms come out the same on every run.
        let mut path = dir.join(OsStr::from_bytes(&name));
        let mut copy = 1;
        let mut file = loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(f) => break f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && copy < 1000 => {
                    copy += 1;
                    path = dir.join(OsStr::from_bytes(&with_copy_number(&name, copy)));
                }
                Err(e) => return Err(e).with_context(|| format!("cannot make {}", path.display())),
            }
        };
        let what = || format!("cannot make {}", path.display());
        file.write_all(content).with_context(what)?;
        file.set_times(FileTimes::new().set_modified(mtime))
            .with_context(what)?;
        file.set_permissions(Permissions::from_mode(mode))
            .with_context(what)?;
        Ok(size)
    }
}

/// SplitMix64: small, fast and good enough for test data. Each file and folder
/// gets its own stream, so the tree does not depend on which thread makes what.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = Rng(seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        rng.next();
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'t, T>(&mut self, from: &'t [T]) -> &'t T {
        &from[self.below(from.len() as u64) as usize]
    }

    fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }

    fn mtime(&mut self) -> std::time::SystemTime {
        let secs = LATEST_MTIME - self.below(MTIME_SPAN);
        UNIX_EPOCH + Duration::new(secs, self.below(1_000_000_000) as u32)
    }

    /// A word, one time in eight from another script.
    fn word(&mut self) -> &'static str {
        let from = if self.below(8) == 0 {
            WORDS_WIDE
        } else {
            WORDS
        };
        from[self.below(from.len() as u64) as usize]
    }

    /// A folder name: one or two words, sometimes a year or a number.
    fn folder_name(&mut self) -> Vec<u8> {
        let name = match self.below(10) {
            0 => format!("{} {}", self.word(), 2015 + self.below(11)),
            1 => format!("{:02}-{}", self.below(40), self.word()),
            2 | 3 => format!("{}_{}", self.word(), self.word()),
            4 => self.word().to_uppercase(),
            _ => self.word().to_owned(),
        };
        name.into_bytes()
    }

    /// A file name in one of the styles of the module doc; `number` makes the
    /// numbered styles differ between files.
    fn file_name(&mut self, number: u64) -> Vec<u8> {
        let date = |r: &mut Rng| {
            format!(
                "{}-{:02}-{:02}",
                2019 + r.below(7),
                1 + r.below(12),
                1 + r.below(28)
            )
        };
        let name = match self.below(100) {
            0..=14 => match self.below(3) {
                0 => format!(
                    "IMG_{:04}.{}",
                    number % 10_000,
                    self.pick(&["JPG", "HEIC", "jpg", "MOV"])
                ),
                1 => format!(
                    "DSC{:05}.{}",
                    number % 100_000,
                    self.pick(&["JPG", "ARW", "NEF"])
                ),
                _ => format!(
                    "PXL_{}{:02}{:02}_{:02}{:02}{:02}{:03}.jpg",
                    2019 + self.below(7),
                    1 + self.below(12),
                    1 + self.below(28),
                    self.below(24),
                    self.below(60),
                    self.below(60),
                    self.below(1000)
                ),
            },
            15..=39 => {
                let words: Vec<&str> = (0..1 + self.below(4)).map(|_| self.word()).collect();
                let sep = *self.pick(&[" ", " ", "_", "-"]);
                let mut n = words.join(sep);
                match self.below(6) {
                    0 => n = format!("{n} {}", date(self)),
                    1 => n = format!("{n}{sep}v{}", 1 + self.below(9)),
                    2 => n = format!("{n} ({})", 1 + self.below(5)),
                    3 => n.push_str(" final"),
                    _ => {}
                }
                let ext = *self.pick(&["pdf", "docx", "txt", "md", "xlsx", "odt", "pptx", "csv"]);
                format!("{n}.{ext}")
            }
            40..=64 => {
                let words: Vec<String> = (0..1 + self.below(3))
                    .map(|_| (*self.pick(WORDS)).to_owned())
                    .collect();
                let (stem, ext) = match self.below(4) {
                    0 => (words.join("_"), *self.pick(&["rs", "py", "c", "h", "go"])),
                    1 => {
                        let mut camel = words[0].clone();
                        for w in &words[1..] {
                            let mut c = w.chars();
                            if let Some(f) = c.next() {
                                camel.extend(f.to_uppercase());
                                camel.push_str(c.as_str());
                            }
                        }
                        (camel, *self.pick(&["ts", "js", "java", "swift"]))
                    }
                    2 => (
                        words.join("-"),
                        *self.pick(&["css", "html", "vue", "svelte", "json"]),
                    ),
                    _ => (
                        words.join("_"),
                        *self.pick(&["test.ts", "spec.js", "d.ts", "min.js"]),
                    ),
                };
                format!("{stem}.{ext}")
            }
            65..=77 => match self.below(3) {
                0 => format!(
                    "part-{:05}.{}",
                    number % 100_000,
                    self.pick(&["parquet", "csv.gz", "avro"])
                ),
                1 => format!("{}.{}.log", self.pick(WORDS), date(self)),
                _ => format!("chunk_{:06}.bin", number % 1_000_000),
            },
            78..=89 => {
                let mut hex = String::with_capacity(40);
                for _ in 0..5 {
                    hex.push_str(&format!("{:08x}", self.next() as u32));
                }
                if self.below(2) == 0 {
                    hex
                } else {
                    format!("{}.pack", &hex[..38])
                }
            }
            _ => format!(
                "{}.{}",
                self.word(),
                self.pick(&["txt", "jpg", "png", "mp3", "zip", "tar.gz"])
            ),
        };
        name.into_bytes()
    }
}

/// `name` with a copy number, as file managers do: `a.txt` -> `a (2).txt`.
fn with_copy_number(name: &[u8], n: u32) -> Vec<u8> {
    let dot = name
        .iter()
        .position(|b| *b == b'.')
        .filter(|p| *p > 0)
        .unwrap_or(name.len());
    let mut out = name[..dot].to_vec();
    out.extend_from_slice(format!(" ({n})").as_bytes());
    out.extend_from_slice(&name[dot..]);
    out
}

const WORDS: &[&str] = &[
    "report",
    "budget",
    "invoice",
    "notes",
    "draft",
    "summary",
    "meeting",
    "plan",
    "photo",
    "scan",
    "letter",
    "contract",
    "resume",
    "project",
    "design",
    "review",
    "backup",
    "archive",
    "export",
    "import",
    "data",
    "config",
    "settings",
    "index",
    "main",
    "utils",
    "helpers",
    "session",
    "store",
    "server",
    "client",
    "handler",
    "router",
    "model",
    "view",
    "controller",
    "service",
    "cache",
    "queue",
    "worker",
    "parser",
    "lexer",
    "token",
    "stream",
    "buffer",
    "reader",
    "writer",
    "image",
    "video",
    "audio",
    "music",
    "album",
    "track",
    "cover",
    "thumbnail",
    "family",
    "holiday",
    "beach",
    "mountain",
    "city",
    "trip",
    "party",
    "wedding",
    "birthday",
    "garden",
    "kitchen",
    "house",
    "car",
    "school",
    "work",
    "home",
    "personal",
    "shared",
    "public",
    "private",
    "old",
    "new",
    "final",
    "copy",
    "test",
    "sample",
    "example",
    "template",
    "theme",
    "style",
    "layout",
    "header",
    "footer",
    "sidebar",
    "button",
    "icon",
    "logo",
    "banner",
    "chart",
    "table",
    "graph",
    "map",
    "list",
    "tree",
    "node",
    "edge",
    "path",
    "file",
    "folder",
    "link",
    "user",
    "account",
    "profile",
    "login",
    "logout",
    "signup",
    "payment",
    "order",
    "cart",
    "product",
    "price",
    "customer",
    "supplier",
    "stock",
    "sales",
    "tax",
    "year",
    "quarter",
    "month",
    "week",
    "daily",
    "weekly",
    "monthly",
    "annual",
    "q1",
    "q2",
    "q3",
    "q4",
    "spring",
    "summer",
    "autumn",
    "winter",
    "january",
    "march",
    "june",
    "october",
    "december",
    "alpha",
    "beta",
    "release",
    "build",
    "debug",
    "docs",
    "src",
    "lib",
    "bin",
    "assets",
    "static",
    "public",
    "vendor",
    "tools",
    "scripts",
    "tests",
    "fixtures",
    "migrations",
    "schema",
];

const WORDS_WIDE: &[&str] = &[
    "café",
    "naïve",
    "résumé",
    "Übersicht",
    "Straße",
    "größe",
    "año",
    "niño",
    "ÅNGSTRÖM",
    "smörgåsbord",
    "Привет",
    "смета",
    "отчёт",
    "Ελλάδα",
    "写真",
    "報告書",
    "文件",
    "資料",
    "日本語",
    "東京",
    "서울",
    "사진",
    "😀",
    "🎉",
    "📷",
    "🌲",
    "zürich",
    "kraków",
    "łódź",
    "İstanbul",
];
