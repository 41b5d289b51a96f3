//! `linkfs link add|list|revoke`, `linkfs visitors`, `linkfs kick`: requests
//! to a running `linkfs share` of a folder, over its control socket
//! (`linkfs_peer::sharer::control`).

use linkfs_peer::sharer::links::UploadRights;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use linkfs_peer::sharer::control::{Answer, Request, ask};
use linkfs_peer::sharer::links::when;
use linkfs_peer::sharer::share_state::{CONTROL_SOCKET, default_state_root, share_dir};

/// Which running share.
#[derive(Debug, Args)]
pub struct ShareDir {
    /// The folder the running `linkfs share` shares (default: this one).
    #[arg(long = "dir", value_name = "DIR", default_value = ".", global = true)]
    dir: PathBuf,
    /// Print the answer as JSON.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum LinkCommand {
    /// Every link of the share: id, label, expiry, visitors now, the link itself.
    List(ShareDir),
    /// A new link with its own secret; prints it.
    Add {
        /// A name to know it by in `list` and `visitors`.
        #[arg(long, default_value = "")]
        label: String,
        /// When it stops working: a duration (48h, 30m, 7d) or a date and time
        /// in UTC (2026-11-27, 2026-11-27 18:00). Default: never.
        #[arg(long, value_name = "WHEN")]
        expires: Option<String>,
        /// Show only this folder of the share (relative to it) as the link's
        /// root: nothing above or beside it is ever sent. Given more than
        /// once (or naming a file), the link shows those paths at their
        /// places under the share's root, and nothing beside them (at most 32).
        #[arg(long, value_name = "PATH")]
        scope: Vec<String>,
        #[command(flatten)]
        password: NewPassword,
        #[command(flatten)]
        upload: UploadArgs,
        #[command(flatten)]
        share: ShareDir,
    },
    /// Withdraw a link: it stops working and its visitors are disconnected
    /// at once (other links and their visitors are untouched).
    Revoke {
        /// The link's id (`linkfs link list`).
        id: u32,
        #[command(flatten)]
        share: ShareDir,
    },
}

/// What visitors of a new link may add.
#[derive(Debug, Args)]
pub struct UploadArgs {
    /// Visitors may add files to what the link shows (its folder, or the
    /// whole share): they land beside what is there, never over it.
    #[arg(long)]
    allow_upload: bool,
    /// A drop link: visitors add files and see nothing of the share; what
    /// they add lands in a folder of the link's own (named in `link list`).
    #[arg(long)]
    drop: bool,
    /// Uploads may make hidden files and folders (names starting with `.`,
    /// such as `.ssh`); without it such a name gets `_` for its dot.
    #[arg(long)]
    allow_hidden: bool,
    /// Most bytes visitors may add through the link in all (10G, 500M, 1.5GiB).
    #[arg(long, value_name = "SIZE")]
    max_upload_bytes: Option<String>,
    /// Most files visitors may add through the link in all.
    #[arg(long, value_name = "N")]
    max_upload_files: Option<u64>,
    /// Largest file visitors may add (2G, 700M).
    #[arg(long, value_name = "SIZE")]
    max_upload_file: Option<String>,
}

impl UploadArgs {
    /// The rights asked for, if any.
    pub fn rights(&self) -> anyhow::Result<Option<UploadRights>> {
        let capped = self.max_upload_bytes.is_some()
            || self.max_upload_files.is_some()
            || self.max_upload_file.is_some();
        if !self.allow_upload && !self.drop {
            if capped {
                anyhow::bail!("upload caps need --allow-upload (or --drop)");
            }
            if self.allow_hidden {
                anyhow::bail!("--allow-hidden needs --allow-upload (or --drop)");
            }
            return Ok(None);
        }
        let size = |s: &Option<String>| {
            s.as_deref()
                .map(parse_size)
                .transpose()
                .map(Option::unwrap_or_default)
        };
        Ok(Some(UploadRights {
            drop: self.drop,
            max_bytes: size(&self.max_upload_bytes)?,
            max_files: self.max_upload_files.unwrap_or(0),
            max_file: size(&self.max_upload_file)?,
            hidden: self.allow_hidden,
            ..UploadRights::default()
        }))
    }
}

/// A size as people write it: `1048576`, `500M`, `10G`, `1.5GiB`, `2TB`
/// (K, M, G, T: powers of 1024).
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("'{text}' is not a size (for example 500M, 10G)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => anyhow::bail!("'{text}' is not a size (for example 500M, 10G)"),
    };
    let bytes = number * (1u64 << shift) as f64;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        anyhow::bail!("'{text}' is not a size this can use");
    }
    Ok(bytes as u64)
}

/// A password for a new link.
#[derive(Debug, Args)]
pub struct NewPassword {
    /// Ask visitors for a password before anything of the share (typed
    /// here, twice, without echo).
    #[arg(long)]
    password: bool,
    /// The password, from the first line of FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "password")]
    password_file: Option<PathBuf>,
}

impl NewPassword {
    /// The password asked for, if one was.
    pub fn read(&self) -> anyhow::Result<Option<String>> {
        if let Some(file) = &self.password_file {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the password from {}", file.display()))?;
            let p = text.lines().next().unwrap_or("").to_owned();
            if p.is_empty() {
                bail!("{} holds no password on its first line", file.display());
            }
            return Ok(Some(p));
        }
        if !self.password {
            return Ok(None);
        }
        let first = rpassword::prompt_password("linkfs: the link's password: ").context(
            "cannot read the password (run in a terminal, or give --password-file FILE)",
        )?;
        let again = rpassword::prompt_password("linkfs: the same again: ")
            .context("cannot read the password")?;
        if first != again {
            bail!("the two passwords differ; nothing was changed");
        }
        if first.is_empty() {
            bail!("an empty password is no password; nothing was changed");
        }
        Ok(Some(first))
    }
}

#[derive(Debug, Args)]
pub struct VisitorsArgs {
    #[command(flatten)]
    share: ShareDir,
}

#[derive(Debug, Args)]
pub struct KickArgs {
    /// The visitor's number (`linkfs visitors`).
    visitor: u32,
    #[command(flatten)]
    share: ShareDir,
}

async fn request(share: &ShareDir, request: Request) -> anyhow::Result<Answer> {
    let Some(root) = default_state_root() else {
        bail!(
            "no state folder to find the running share in: set LINKFS_STATE_DIR (or HOME) as the share has it"
        );
    };
    let (dir, folder) = share_dir(&root, &share.dir)
        .with_context(|| format!("cannot find the folder {}", share.dir.display()))?;
    let socket = dir.join(CONTROL_SOCKET);
    let answer = ask(&socket, &shown(&folder), &request).await?;
    if !answer.ok {
        bail!(
            "{}",
            answer
                .error
                .clone()
                .unwrap_or_else(|| "the sharer refused".into())
        );
    }
    Ok(answer)
}

fn shown(p: &Path) -> String {
    linkfs_peer::terminal::escaped(&p.display().to_string())
}

fn print_json<T: serde::Serialize>(value: &T) {
    println!("{}", serde_json::to_string(value).unwrap_or_default());
}

pub async fn link(cmd: LinkCommand) -> anyhow::Result<()> {
    match cmd {
        LinkCommand::List(share) => {
            let a = request(&share, Request::List).await?;
            if share.json {
                for l in &a.links {
                    print_json(l);
                }
                return Ok(());
            }
            println!(
                "{:>4}  {:<20} {:<20} {:<26} {:>8} {:>10}  LINK",
                "ID", "LABEL", "SCOPE", "EXPIRES", "VISITORS", "SERVED"
            );
            for l in &a.links {
                let expires = match (&l.ended, l.expires) {
                    (Some(why), _) => why.clone(),
                    (None, Some(at)) => when(at),
                    (None, None) => "never".into(),
                };
                let url = if l.ended.is_some() { "-" } else { &l.url };
                let mut scope = if l.selection.is_empty() {
                    format!("/{}", l.scope)
                } else {
                    l.selection
                        .iter()
                        .map(|p| format!("/{p}"))
                        .collect::<Vec<_>>()
                        .join(" + ")
                };
                match (l.upload, &l.drop_folder) {
                    (Some(u), Some(folder)) if u.drop => scope = format!("drop into /{folder}"),
                    (Some(u), None) if u.drop => scope.push_str(" (drop)"),
                    (Some(_), _) => scope.push_str(" (+upload)"),
                    (None, _) => {}
                }
                println!(
                    "{:>4}  {:<20} {:<20} {:<26} {:>8} {:>10}  {}",
                    l.id,
                    linkfs_peer::terminal::escaped(&l.label),
                    linkfs_peer::terminal::escaped(&scope),
                    expires,
                    l.visitors,
                    super::share::human_bytes(l.bytes_served),
                    url
                );
            }
        }
        LinkCommand::Add {
            label,
            expires,
            scope,
            password,
            upload,
            share,
        } => {
            let password = password.read()?;
            let upload = upload.rights()?;
            let a = request(
                &share,
                Request::Add {
                    label,
                    expires,
                    scope: (scope.len() == 1).then(|| scope[0].clone()),
                    selection: if scope.len() > 1 { scope } else { Vec::new() },
                    upload,
                    password,
                },
            )
            .await?;
            let Some(l) = a.links.first() else {
                bail!("the sharer added a link but did not say which");
            };
            if share.json {
                print_json(l);
            } else {
                println!("{}", l.url);
                let until = l
                    .expires
                    .map_or("never expires".into(), |at| format!("expires {}", when(at)));
                eprintln!("link {} added; it {until}", l.id);
            }
        }
        LinkCommand::Revoke { id, share } => {
            let a = request(&share, Request::Revoke { id }).await?;
            eprintln!("{}", a.said);
        }
    }
    Ok(())
}

pub async fn visitors(args: VisitorsArgs) -> anyhow::Result<()> {
    let a = request(&args.share, Request::Visitors).await?;
    if args.share.json {
        for v in &a.visitors {
            print_json(v);
        }
        return Ok(());
    }
    if a.visitors.is_empty() {
        eprintln!("no visitors now");
        return Ok(());
    }
    println!(
        "{:>7}  {:<24} {:<22} {:<7} {:>10} {:>18}  READING",
        "VISITOR", "LINK", "SINCE", "ROUTE", "SERVED", "ADDED"
    );
    for v in &a.visitors {
        let link = format!(
            "{} {}",
            v.link,
            linkfs_peer::terminal::escaped(&v.link_label)
        );
        let route = match (&v.route, v.connected) {
            (Some(r), _) => r.clone(),
            (None, true) => "?".into(),
            (None, false) => "joining".into(),
        };
        let reading = v
            .reading
            .as_deref()
            .map_or(String::new(), linkfs_peer::terminal::escaped);
        let added = if v.files_uploaded == 0 {
            "-".to_owned()
        } else {
            format!(
                "{} ({} files)",
                super::share::human_bytes(v.bytes_uploaded),
                v.files_uploaded
            )
        };
        println!(
            "{:>7}  {:<24} {:<22} {:<7} {:>10} {:>18}  {}",
            v.visitor,
            link,
            when(v.since),
            route,
            super::share::human_bytes(v.bytes_served),
            added,
            reading
        );
    }
    Ok(())
}

pub async fn kick(args: KickArgs) -> anyhow::Result<()> {
    let a = request(
        &args.share,
        Request::Kick {
            visitor: args.visitor,
        },
    )
    .await?;
    eprintln!("{}", a.said);
    Ok(())
}
