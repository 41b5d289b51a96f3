//! A tab share's links besides the main one, as the page asks for them: what
//! each shows (the whole folder, one folder as its root, or chosen paths at
//! their places), when it expires, its password (hashed by the page's
//! worker), and the rows the page lists. The rules are core's
//! (`linkfs_core::share::Share::add_link`, `revoke`, expiry); this only reads
//! the page's words and checks the paths against the share's index, as the
//! native sharer checks them on disk.

use linkfs_core::share::links::{EndedWhy, LinkRecord, parse_expiry};
use linkfs_core::share::rights::{Shown, normal_scope};
use linkfs_core::share::{NewLink, Now, Share};
use linkfs_core::{LinkId, Selection, ShareIndex, ShareSecret};
use linkfs_proto::EntryKind;
use serde::Serialize;
use tsify::Tsify;

/// One link, for the page's list.
#[derive(Debug, Clone, Serialize, Tsify)]
#[serde(rename_all = "camelCase")]
pub struct TabLink {
    /// 0: the main link.
    pub id: u32,
    pub label: String,
    pub url: String,
    /// What it shows, in words ("the whole folder", "Photos/2024", "a.txt, b/").
    pub shows: String,
    /// Unix seconds.
    pub expires: Option<f64>,
    /// "withdrawn" or "expired", once it ended.
    pub ended: Option<String>,
    pub password: bool,
    /// Visitors through it now.
    pub visitors: u32,
}

/// What the page asked for, in its words.
pub struct Asked<'a> {
    pub label: &'a str,
    /// One path (a folder becomes the link's root; a file, a selection of one).
    pub scope: &'a str,
    /// Several paths, shown at their places.
    pub paths: &'a [String],
    /// As people write it (`48h`, `7d`, `2026-12-01`); empty: never.
    pub expires: &'a str,
    pub password_hash: Option<String>,
}

/// Makes the link the page asked for, or says in words why not.
pub fn add(
    share: &mut Share,
    index: &mut ShareIndex,
    now: Now,
    asked: Asked<'_>,
    secret: [u8; 16],
) -> Result<LinkRecord, String> {
    let expires = match asked.expires.trim() {
        "" | "never" => None,
        text => Some(parse_expiry(text, now.unix).map_err(|e| e.to_string())?),
    };
    if expires.is_some_and(|at| at <= now.unix) {
        return Err("that time has passed: give a later expiry".into());
    }
    let shown = shown(index, asked.scope, asked.paths)?;
    let new = NewLink {
        label: asked.label.trim().to_owned(),
        expires,
        shown,
        upload: None,
        password_hash: asked.password_hash,
        started: false,
    };
    share
        .add_link(now, new, ShareSecret::from_bytes(secret))
        .map_err(|e| e.to_string())
}

/// What a link asking for `scope` and `paths` shows, each path found in the index.
fn shown(index: &mut ShareIndex, scope: &str, paths: &[String]) -> Result<Shown, String> {
    let scope = normal_scope(scope).map_err(|e| e.to_string())?;
    let mut paths: Vec<String> = paths
        .iter()
        .map(|p| normal_scope(p))
        .filter(|p| !matches!(p, Ok(p) if p.is_empty()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if paths.is_empty() {
        if scope.is_empty() {
            return Ok(Shown::Whole);
        }
        return Ok(match kind_at(index, &scope)? {
            EntryKind::Dir => Shown::Folder(scope),
            _ => Shown::Selection(vec![scope]),
        });
    }
    if !scope.is_empty() {
        paths.push(scope);
    }
    for p in &paths {
        kind_at(index, p)?;
    }
    let selection = Selection::new(&paths).map_err(|e| e.to_string())?;
    Ok(Shown::Selection(
        selection
            .paths()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
    ))
}

fn kind_at(index: &mut ShareIndex, path: &str) -> Result<EntryKind, String> {
    index
        .lookup(path.as_bytes())
        .and_then(|id| index.view(id))
        .map(|v| v.kind)
        .ok_or_else(|| format!("there is no '{path}' in the shared folder"))
}

/// Every link, the main one first.
pub fn rows(share: &Share) -> Vec<TabLink> {
    let mut rows = vec![TabLink {
        id: 0,
        label: "main".into(),
        url: share.main_link().to_url(),
        shows: "the whole folder".into(),
        expires: None,
        ended: None,
        password: false,
        visitors: share.visitors_of(LinkId(0)) as u32,
    }];
    rows.extend(share.links().all().iter().map(|l| row(share, l)));
    rows
}

pub fn row(share: &Share, l: &LinkRecord) -> TabLink {
    TabLink {
        id: l.id.0,
        label: l.label.clone(),
        url: share.url_of(l),
        shows: match Shown::of(l) {
            Shown::Whole => "the whole folder".into(),
            Shown::Folder(scope) => format!("{scope}/"),
            Shown::Selection(paths) => paths.join(", "),
        },
        expires: l.expires.map(|e| e as f64),
        ended: l.ended.map(|e| {
            match e.why {
                EndedWhy::Withdrawn => "withdrawn",
                EndedWhy::Expired => "expired",
            }
            .to_owned()
        }),
        password: l.password.is_some(),
        visitors: share.visitors_of(l.id) as u32,
    }
}
