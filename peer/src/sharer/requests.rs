//! The control socket's requests ([`super::control`]) and the link `linkfs
//! share` prints, answered from the share machine (the links, who came
//! through them, the rules) and the views (the disk, each visitor's figures).
//!
//! ```text
//! add:    ask(...)  the expiry read, the rights checked, what it shows found on the disk
//!         -> hashed() (Argon2, off the share loop) -> make(share, ...) -> the link
//! list, visitors, revoke, kick: at once, from the machine
//! ```

use linkfs_core::share::links::{EndedWhy, ExpiryError, LinkRecord, UploadRights, parse_expiry};
use linkfs_core::share::rights::{RightsError, Shown, check_new};
use linkfs_core::share::{AddLinkError, NewLink, Now, Share};
use linkfs_core::{LinkId, ShareLink, ShareSecret};
use linkfs_proto::signal::PeerId;

use super::control::{Answer, LinkView, VisitorView};
use super::event::StartLink;
use super::password::{self, HashError};
use super::share_state::{ShareState, StateError};
use super::views::{ViewError, Views};
use crate::random::{RandomError, random_bytes};

/// Why a link cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkRefused {
    #[error(transparent)]
    Expiry(#[from] ExpiryError),
    #[error(transparent)]
    Rights(#[from] RightsError),
    #[error(transparent)]
    View(#[from] ViewError),
    #[error(transparent)]
    Add(#[from] AddLinkError),
    #[error(transparent)]
    Password(#[from] HashError),
    #[error(transparent)]
    Random(#[from] RandomError),
    #[error("the kept link's secret is damaged; run `linkfs share --new-link` for a new one")]
    DamagedSecret,
    #[error("the link could not be kept for the next run: {0}")]
    Keep(#[from] StateError),
}

/// A link asked for, checked, its password not hashed yet.
#[derive(Debug)]
pub struct LinkAsked {
    new: NewLink,
    password: Option<String>,
}

impl LinkAsked {
    /// The link with its password hashed (Argon2: slow, keep it off the share loop).
    pub fn hashed(mut self) -> Result<NewLink, LinkRefused> {
        if let Some(p) = self.password.take() {
            self.new.password_hash = Some(password::hash(&p)?);
        }
        Ok(self.new)
    }
}

/// What a link to make asks for, checked (its expiry as people write it;
/// what it shows from [`Views::rights`], which found it on the disk).
pub fn ask(
    now_unix: u64,
    label: String,
    expires: Option<&str>,
    shown: Shown,
    upload: Option<UploadRights>,
    password: Option<String>,
    started: bool,
) -> Result<LinkAsked, LinkRefused> {
    let expires = expires.map(|e| parse_expiry(e, now_unix)).transpose()?;
    check_new(&shown, upload.is_some(), password.as_deref())?;
    Ok(LinkAsked {
        new: NewLink {
            label,
            expires,
            shown,
            upload,
            password_hash: None,
            started,
        },
        password,
    })
}

/// Makes the link, with a fresh secret.
pub fn make(share: &mut Share, now: Now, new: NewLink) -> Result<LinkRecord, LinkRefused> {
    let secret = ShareSecret::from_bytes(random_bytes()?);
    Ok(share.add_link(now, new, secret)?)
}

/// The answer to a link made.
pub fn made(share: &Share, views: &Views, record: &LinkRecord) -> Answer {
    Answer {
        links: vec![view(share, views, record)],
        ..Answer::done(format!("link {} added", record.id))
    }
}

/// Every link, the main one first.
pub fn link_views(share: &Share, views: &Views) -> Vec<LinkView> {
    let main = LinkView {
        id: LinkId(0),
        label: "main".into(),
        url: share.main_link().to_url(),
        scope: String::new(),
        selection: Vec::new(),
        upload: None,
        drop_folder: None,
        password: false,
        created: None,
        expires: None,
        ended: None,
        visitors: share.visitors_of(LinkId(0)),
        bytes_served: share.served_by_departed(LinkId(0)) + views.serving_now(LinkId(0)),
    };
    std::iter::once(main)
        .chain(share.links().all().iter().map(|l| view(share, views, l)))
        .collect()
}

fn view(share: &Share, views: &Views, l: &LinkRecord) -> LinkView {
    LinkView {
        id: l.id,
        label: l.label.clone(),
        url: share.url_of(l),
        scope: l.scope.clone(),
        selection: l.selection.clone(),
        upload: l.upload,
        drop_folder: l.drop_folder().map(|own| {
            if l.scope.is_empty() {
                own
            } else {
                format!("{}/{own}", l.scope)
            }
        }),
        password: l.password.is_some(),
        created: Some(l.created),
        expires: l.expires,
        ended: l.ended.map(|e| match e.why {
            EndedWhy::Withdrawn => "withdrawn".into(),
            EndedWhy::Expired => "expired".into(),
        }),
        visitors: share.visitors_of(l.id),
        bytes_served: l.served + views.serving_now(l.id),
    }
}

/// Every visitor (lanes aside), with what it is doing.
pub fn visitor_views(share: &Share, views: &Views) -> Vec<VisitorView> {
    share
        .visitors()
        .map(|(peer, link, since, serving)| {
            let doing = views.doing(peer).unwrap_or_default();
            VisitorView {
                visitor: peer,
                link,
                link_label: share.label_of(link),
                since,
                connected: serving,
                route: doing.route,
                bytes_served: doing.bytes_served,
                reading: doing.reading,
                files_uploaded: doing.files_uploaded,
                bytes_uploaded: doing.bytes_uploaded,
            }
        })
        .collect()
}

pub fn revoke(share: &mut Share, now: Now, id: LinkId) -> Answer {
    match share.revoke(now, id) {
        Ok(gone) => Answer::done(format!(
            "link {id} withdrawn; {gone} visitor{} disconnected",
            if gone == 1 { "" } else { "s" }
        )),
        Err(e) => Answer::failed(e),
    }
}

pub fn kick(share: &mut Share, now: Now, visitor: PeerId) -> Answer {
    match share.kick(now, visitor) {
        Ok(()) => Answer::done(format!("visitor {visitor} disconnected")),
        Err(e) => Answer::failed(e),
    }
}

/// The link `linkfs share` prints when its command line gives rights: a
/// live one it printed before with the same label, view, upload rights and
/// password, or a new one (kept in `state`).
pub async fn start_link(
    share: &mut Share,
    views: &mut Views,
    state: Option<&ShareState>,
    start: &StartLink,
    now: Now,
) -> Result<ShareLink, LinkRefused> {
    let shown = match start.scopes.as_slice() {
        [] => Shown::Whole,
        [one] => views.rights(Some(one), &[])?,
        several => views.rights(None, several)?,
    };
    let rights =
        |u: Option<UploadRights>| u.map(|u| (u.drop, u.max_bytes, u.max_files, u.max_file));
    let alike: Vec<LinkRecord> = share
        .links()
        .live()
        .filter(|l| {
            l.started
                && l.label == start.label
                && l.view_key() == shown.key()
                && rights(l.upload) == rights(start.upload)
                && l.password.is_some() == start.password.is_some()
        })
        .cloned()
        .collect();
    let mut kept = None;
    for l in alike {
        let same = match (l.password.clone(), start.password.clone()) {
            (Some(hash), Some(p)) => {
                tokio::task::spawn_blocking(move || password::matches(&hash, &p))
                    .await
                    .unwrap_or(false)
            }
            _ => true,
        };
        if same {
            kept = Some(l);
            break;
        }
    }
    let record = match kept {
        Some(r) => r,
        None => {
            let asked = ask(
                now.unix,
                start.label.clone(),
                start.expires.as_deref(),
                shown,
                start.upload,
                start.password.clone(),
                true,
            )?;
            let new = tokio::task::spawn_blocking(move || asked.hashed())
                .await
                .map_err(HashError::from)??;
            let record = make(share, now, new)?;
            if let Some(state) = state {
                state.keep_links(share.links())?;
            }
            record
        }
    };
    let secret = record.secret().ok_or(LinkRefused::DamagedSecret)?;
    Ok(ShareLink {
        secret,
        ..share.main_link().clone()
    })
}
