//! `linkfs-gen-tree --files N --out DIR [--seed S] [--big-dir 100000]`: builds
//! a realistic test tree of N files for walk, share and mount benchmarks.
//!
//! Shape (all of it deterministic from the seed, whatever the thread count):
//! * folders: about `min(N/20, 2000 + N/500)` (2,200 for 100k files, 4,000
//!   for 1M), each under the root (15%), under one of the last 8 folders made
//!   (40%, which makes deep chains, at most 20 levels) or under any earlier one;
//! * one folder, `big-<count>` under the root, holding `--big-dir` files (at
//!   most N/2);
//! * every other file in a folder picked with a skew (index ~ u^2), so a few
//!   folders hold many files and most hold a few;
//! * names of 3 to 40 bytes, about one character in ten outside ASCII, unique
//!   through a hex counter after the last `_`;
//! * sizes 0 (10%) or 1 to 4,096 bytes of seeded random bytes; mtimes spread
//!   over the four years before 2026; modes 0644, 0600, 0755, 0444, 0640 for
//!   files and 0755, 0700, 0775, 0750 for folders.
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

    let big = args.big_dir.min(args.files / 2);
    let dirs = args
        .dirs
        .unwrap_or_else(|| (args.files / 20).min(2000 + args.files / 500))
        .max(1);
    let plan = FolderPlan::new(args.seed, dirs, big);
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
/// itself; the big folder, when there is one, is the last.
struct FolderPlan {
    folders: Vec<Folder>,
    /// Folders that get random files: all but the big one.
    ordinary: usize,
}

impl FolderPlan {
    fn new(seed: u64, dirs: u64, big: u64) -> FolderPlan {
        let mut rng = Rng::new(seed, u64::MAX);
        let mut folders = vec![Folder {
            rel: PathBuf::new(),
            depth: 0,
        }];
        let first_random = folders.len();
        for i in 0..dirs {
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
            let name = rng.name(i, "");
            let rel = folders[parent].rel.join(OsStr::from_bytes(&name));
            folders.push(Folder {
                rel,
                depth: folders[parent].depth + 1,
            });
        }
        // The big folder comes last, so no other folder or file lands in it.
        let ordinary = folders.len();
        if big > 0 {
            folders.push(Folder {
                rel: PathBuf::from(format!("big-{big}")),
                depth: 1,
            });
        }
        FolderPlan { folders, ordinary }
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
        let ext = *rng.pick(&[
            "", ".txt", ".jpg", ".md", ".rs", ".json", ".png", ".pdf", ".tar.gz", ".c",
        ]);
        let name = rng.name(number, ext);
        let size = if rng.below(10) == 0 {
            0
        } else {
            1 + rng.below(MAX_SIZE)
        };
        let content = &mut content[..size as usize];
        rng.fill(content);
        let mtime = rng.mtime();
        let mode = *rng.pick(&[
            0o644, 0o644, 0o644, 0o644, 0o644, 0o644, 0o644, 0o600, 0o755, 0o444, 0o640,
        ]);

        let path = dir.join(OsStr::from_bytes(&name));
        let what = || format!("cannot make {}", path.display());
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(what)?;
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

    /// A name of 3 to 40 bytes, unique through `_<hex of unique>` before `ext`.
    fn name(&mut self, unique: u64, ext: &str) -> Vec<u8> {
        const PLAIN: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        const INNER: &[u8] = b" -.()+,";
        const WIDE: &[&str] = &[
            "é", "ü", "ß", "ñ", "ø", "Ж", "Ω", "日本", "文件", "😀", "🎉", "한",
        ];
        let suffix = format!("_{unique:x}{ext}");
        let len = 3 + self.below(38) as usize;
        let mut name = Vec::with_capacity(40);
        while name.len() + suffix.len() < len {
            let room = len - suffix.len() - name.len();
            let roll = self.below(100);
            if roll < 10 {
                let wide = self.pick(WIDE).as_bytes();
                if wide.len() <= room {
                    name.extend_from_slice(wide);
                    continue;
                }
            } else if roll < 20 && !name.is_empty() && room > 1 {
                name.push(*self.pick(INNER));
                continue;
            }
            name.push(*self.pick(PLAIN));
        }
        name.extend_from_slice(suffix.as_bytes());
        name
    }
}
