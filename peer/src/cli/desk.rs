//! `linkfs link add|list|revoke`, `linkfs visitors`, `linkfs kick`: requests
//! to a running `linkfs share` of a folder, over its control socket
//! (`linkfs_peer::sharer::control`).

use std::path::{Path, PathBuf};

use super::link_args::{NewPassword, UploadArgs};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use linkfs_peer::sharer::control::{Answer, Request, ask};
use linkfs_peer::sharer::links::when;
use linkfs_peer::sharer::share_state::{CONTROL_SOCKET, default_state_root, share_dir};
use linkfs_proto::signal::PeerId;

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
        id: linkfs_core::LinkId,
        #[command(flatten)]
        share: ShareDir,
    },
}

#[derive(Debug, Args)]
pub struct VisitorsArgs {
    #[command(flatten)]
    share: ShareDir,
}

#[derive(Debug, Args)]
pub struct KickArgs {
    /// The visitor's number (`linkfs visitors`).
    visitor: PeerId,
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
                    super::sizes::human_bytes(l.bytes_served),
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
                super::sizes::human_bytes(v.bytes_uploaded),
                v.files_uploaded
            )
        };
        println!(
            "{:>7}  {:<24} {:<22} {:<7} {:>10} {:>18}  {}",
            v.visitor,
            link,
            when(v.since),
            route,
            super::sizes::human_bytes(v.bytes_served),
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
