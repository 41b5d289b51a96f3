//! What a new link may be given on a command line (`linkfs link add` and
//! `linkfs share`): its upload rights and its password.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use linkfs_peer::sharer::links::UploadRights;

use super::sizes::parse_size;

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
