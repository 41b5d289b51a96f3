//! A share's links besides its main one: each with its own secret (so one
//! can be withdrawn without touching the others), a label and an optional
//! expiry. Kept with the share's state (`links.json`, 0600) so they survive
//! a restart like the main link does; told to the host's signaling machine
//! ([`crate::HostSignaling::add_link`]) by their [`LinkId`].
//!
//! ```text
//! links.json  {"next_id": 4, "links": [
//!   {"id": 1, "label": "for Ann", "secret": "<22 base64url>", "created": 1795630000,
//!    "expires": 1795802800},                                   // live until then
//!   {"id": 2, "label": "", "secret": "...", "created": ..., "ended": {"why": "withdrawn", "at": ...}}
//! ]}
//! ```
//!
//! Bounds: [`MAX_LIVE_LINKS`] live links per share; the [`ENDED_KEPT`] most
//! recently ended ones are remembered, so their visitors are told "withdrawn"
//! or "expired" rather than "not valid". Ids are never reused. The main link
//! is [`LinkId`]`(0)` and is not kept here (it is the folder's kept link).

use serde::{Deserialize, Serialize};

use crate::link::ShareSecret;
use crate::signaling::{LinkEnd, LinkId};

/// Most live links a share has besides its main one.
pub const MAX_LIVE_LINKS: usize = 64;
/// Ended links remembered (their visitors are told why).
pub const ENDED_KEPT: usize = 64;
/// Longest label, in bytes.
pub const MAX_LABEL: usize = 200;

/// Why a link ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndedWhy {
    Withdrawn,
    Expired,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ended {
    pub why: EndedWhy,
    /// Unix seconds.
    pub at: u64,
}

/// One link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
    pub id: LinkId,
    #[serde(default)]
    pub label: String,
    /// The secret, base64url (as in the link).
    pub secret: String,
    /// Unix seconds.
    pub created: u64,
    /// Unix seconds; none: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// The folder of the share this link shows as its root ('/'-separated,
    /// relative to the shared folder); empty: the whole share.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
    /// The paths this link selects ('/'-separated, relative to the shared
    /// folder), shown at their places under the share's root; empty: none
    /// (the scope, or the whole share). See `linkfs_core::Selection`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selection: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ended>,
    /// Made for `linkfs share`'s command line (`--scope`, `--expires`,
    /// `--label`): printed again by a later run that asks the same.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub started: bool,
    /// The link's password as an Argon2id hash (PHC string); none: no password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Bytes of files served to this link's visitors who have left (those
    /// connected now are counted by the desk), across runs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub served: u64,
    /// Visitors may add files (see [`UploadRights`]); none: they may not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<UploadRights>,
    /// A drop link's own folder (in the folder it was made for), where what
    /// its visitors add lands, apart from the sharer's files; made when the
    /// first file lands. Empty: not a drop link, or one kept before this
    /// field (see [`LinkRecord::drop_folder`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub drop_folder: String,
}

/// What a link that takes files takes, and what it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UploadRights {
    /// A drop link: its visitors add files and see nothing of the share.
    #[serde(default)]
    pub drop: bool,
    /// Caps (0: none): bytes in all, files in all, the largest file.
    #[serde(default)]
    pub max_bytes: u64,
    #[serde(default)]
    pub max_files: u64,
    #[serde(default)]
    pub max_file: u64,
    /// Added through the link so far (kept across runs): bytes and files that
    /// landed, and every byte received (landed or not: what the byte cap counts).
    #[serde(default)]
    pub added_bytes: u64,
    #[serde(default)]
    pub added_files: u64,
    #[serde(default)]
    pub received_bytes: u64,
    /// Uploads may make hidden names (starting with `.`): only when the sharer
    /// asked for it (`--allow-hidden`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
}

/// The folder a drop link's files land in: its label's, or its number's,
/// made a safe single name (never hidden, never the staging folder's).
pub fn drop_folder_name(id: LinkId, label: &str) -> String {
    let wanted = if label.trim().is_empty() {
        format!("Dropped files (link {id})")
    } else {
        format!("{} (dropped files)", label.trim().replace('/', "_"))
    };
    crate::upload_name::safe_path(wanted.as_bytes())
        .ok()
        .and_then(|p| p.parts.into_iter().next())
        .unwrap_or_else(|| format!("Dropped files (link {id})"))
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LinkRecord {
    /// A drop link's own folder: the one kept, or (a link kept before drop
    /// links had one) the one it would be given now.
    pub fn drop_folder(&self) -> Option<String> {
        let drop = self.upload.is_some_and(|u| u.drop);
        drop.then(|| {
            if self.drop_folder.is_empty() {
                drop_folder_name(self.id, &self.label)
            } else {
                self.drop_folder.clone()
            }
        })
    }

    /// What this link shows, as a key: empty for the whole share, its scope,
    /// or its selection's paths each after a NUL (a scope holds none).
    pub fn view_key(&self) -> String {
        if self.selection.is_empty() {
            self.scope.clone()
        } else {
            self.selection.iter().map(|p| format!("\0{p}")).collect()
        }
    }

    pub fn link_id(&self) -> LinkId {
        self.id
    }

    /// The secret, if the record holds a valid one.
    pub fn secret(&self) -> Option<ShareSecret> {
        ShareSecret::decode(&self.secret).ok()
    }

    /// What its visitors are told once it ended.
    pub fn end(&self) -> Option<LinkEnd> {
        let ended = self.ended?;
        Some(match ended.why {
            EndedWhy::Withdrawn => LinkEnd::Withdrawn {
                words: "This link was withdrawn by the sharer. Ask them for a new one.".into(),
            },
            EndedWhy::Expired => LinkEnd::Expired {
                words: format!(
                    "This link expired on {}. Ask the sharer for a new one.",
                    when(ended.at)
                ),
            },
        })
    }
}

/// A moment for people: `2026-11-27 18:00 UTC`.
pub fn when(unix: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix);
    let s = humantime::format_rfc3339_seconds(t).to_string();
    // 2026-11-27T18:00:00Z -> 2026-11-27 18:00 UTC
    match (s.get(..10), s.get(11..16)) {
        (Some(day), Some(hm)) => format!("{day} {hm} UTC"),
        _ => s,
    }
}

/// Why a change to the links was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinksError {
    #[error(
        "this share has {MAX_LIVE_LINKS} live links, the most it keeps: withdraw one first (`linkfs link revoke ID`)"
    )]
    TooMany,
    #[error("there is no link {0} (`linkfs link list` shows them)")]
    NoSuchLink(LinkId),
    #[error("link {0} has already ended")]
    AlreadyEnded(LinkId),
    #[error(
        "the main link (0) is withdrawn with `linkfs share DIR --new-link`, which makes a new one"
    )]
    MainLink,
    #[error("a label is at most {MAX_LABEL} bytes")]
    LabelTooLong,
    #[error("the expiry {0} is already past")]
    ExpiryPast(String),
    #[error(
        "links.json is not valid ({0}); it was set aside and the share starts with no extra links"
    )]
    Damaged(String),
}

/// The links of one share (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Links {
    next_id: u32,
    links: Vec<LinkRecord>,
}

impl Links {
    /// Links as kept in `links.json`.
    pub fn from_json(bytes: &[u8]) -> Result<Links, LinksError> {
        let mut links: Links =
            serde_json::from_slice(bytes).map_err(|e| LinksError::Damaged(e.to_string()))?;
        links.next_id = links
            .links
            .iter()
            .map(|l| l.id.0.saturating_add(1))
            .max()
            .unwrap_or(1)
            .max(links.next_id)
            .max(1);
        links
            .links
            .retain(|l| l.id != LinkId(0) && l.secret().is_some());
        Ok(links)
    }

    pub fn to_json(&self) -> Vec<u8> {
        // Plain data: serialising it cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Every kept link, oldest first.
    pub fn all(&self) -> &[LinkRecord] {
        &self.links
    }

    pub fn get(&self, id: LinkId) -> Option<&LinkRecord> {
        self.links.iter().find(|l| l.id == id)
    }

    /// Live links.
    pub fn live(&self) -> impl Iterator<Item = &LinkRecord> {
        self.links.iter().filter(|l| l.ended.is_none())
    }

    /// A new link with its own secret.
    pub fn add(
        &mut self,
        label: &str,
        expires: Option<u64>,
        scope: &str,
        secret: ShareSecret,
        now: u64,
    ) -> Result<&LinkRecord, LinksError> {
        if label.len() > MAX_LABEL {
            return Err(LinksError::LabelTooLong);
        }
        if let Some(at) = expires.filter(|at| *at <= now) {
            return Err(LinksError::ExpiryPast(when(at)));
        }
        if self.live().count() >= MAX_LIVE_LINKS {
            return Err(LinksError::TooMany);
        }
        let id = self.next_id.max(1);
        self.next_id = id + 1;
        self.links.push(LinkRecord {
            id: LinkId(id),
            label: label.to_owned(),
            secret: secret.encode(),
            created: now,
            expires,
            scope: scope.to_owned(),
            selection: Vec::new(),
            served: 0,
            upload: None,
            ended: None,
            started: false,
            password: None,
            drop_folder: String::new(),
        });
        self.trim_ended();
        Ok(self.links.last().expect("just pushed"))
    }

    /// Counts `bytes` more served to link `id`'s visitors.
    pub fn add_served(&mut self, id: LinkId, bytes: u64) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            l.served = l.served.saturating_add(bytes);
        }
    }

    /// Sets what link `id` takes of uploads (and what it took).
    pub fn set_upload(&mut self, id: LinkId, rights: Option<UploadRights>) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            l.upload = rights;
            // A drop link's own folder is named once, when it becomes one.
            if rights.is_some_and(|r| r.drop) && l.drop_folder.is_empty() {
                l.drop_folder = drop_folder_name(l.id, &l.label);
            }
        }
    }

    /// Makes link `id` show `paths` of the share (see [`LinkRecord::selection`]).
    pub fn set_selection(&mut self, id: LinkId, paths: Vec<String>) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            l.selection = paths;
        }
    }

    /// Gives link `id` a password (its hash).
    pub fn set_password(&mut self, id: LinkId, hash: String) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            l.password = Some(hash);
        }
    }

    /// Marks link `id` as made for `linkfs share`'s command line.
    pub fn mark_started(&mut self, id: LinkId) {
        if let Some(l) = self.links.iter_mut().find(|l| l.id == id) {
            l.started = true;
        }
    }

    /// Withdraws link `id`.
    pub fn revoke(&mut self, id: LinkId, now: u64) -> Result<LinkRecord, LinksError> {
        if id == LinkId(0) {
            return Err(LinksError::MainLink);
        }
        let l = self
            .links
            .iter_mut()
            .find(|l| l.id == id)
            .ok_or(LinksError::NoSuchLink(id))?;
        if l.ended.is_some() {
            return Err(LinksError::AlreadyEnded(id));
        }
        l.ended = Some(Ended {
            why: EndedWhy::Withdrawn,
            at: now,
        });
        let revoked = l.clone();
        self.trim_ended();
        Ok(revoked)
    }

    /// Ends the live links whose time ran out by `now`; their ids.
    pub fn expire_due(&mut self, now: u64) -> Vec<LinkId> {
        let mut due = Vec::new();
        for l in &mut self.links {
            if l.ended.is_none() && l.expires.is_some_and(|at| at <= now) {
                l.ended = Some(Ended {
                    why: EndedWhy::Expired,
                    at: l.expires.unwrap_or(now),
                });
                due.push(l.id);
            }
        }
        self.trim_ended();
        due
    }

    /// When the next live link expires (unix seconds).
    pub fn next_expiry(&self) -> Option<u64> {
        self.live().filter_map(|l| l.expires).min()
    }

    fn trim_ended(&mut self) {
        let ended = self.links.iter().filter(|l| l.ended.is_some()).count();
        let mut drop = ended.saturating_sub(ENDED_KEPT);
        if drop == 0 {
            return;
        }
        // The longest-ended go first.
        let mut order: Vec<(u64, LinkId)> = self
            .links
            .iter()
            .filter_map(|l| l.ended.map(|e| (e.at, l.id)))
            .collect();
        order.sort_unstable();
        let gone: Vec<LinkId> = order.iter().take(drop).map(|(_, id)| *id).collect();
        self.links.retain(|l| {
            if drop > 0 && gone.contains(&l.id) {
                drop -= 1;
                false
            } else {
                true
            }
        });
    }
}

/// An expiry as people write it: a duration from `now` (`48h`, `30m`,
/// `7d`, `1w 2d`), a date (`2026-11-27`, the start of that day, UTC) or a
/// moment (`2026-11-27 18:00`, `2026-11-27T18:00:00Z`, UTC). Unix seconds.
pub fn parse_expiry(text: &str, now: u64) -> Result<u64, ExpiryError> {
    let t = text.trim();
    if let Ok(d) = humantime::parse_duration(t) {
        return Ok(now.saturating_add(d.as_secs().max(1)));
    }
    let t2 = t.replacen(' ', "T", 1);
    let moment = match t2.len() {
        10 => format!("{t2}T00:00:00Z"),
        16 => format!("{t2}:00Z"),
        19 => format!("{t2}Z"),
        _ => t2,
    };
    humantime::parse_rfc3339(&moment)
        .map(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        })
        .map_err(|_| ExpiryError(text.to_owned()))
}

/// An expiry that is neither a duration nor a date and time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not an expiry: give a duration (48h, 30m, 7d) or a date and time in UTC (2026-11-27 or 2026-11-27 18:00)"
)]
pub struct ExpiryError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_795_600_000;

    fn secret(n: u8) -> ShareSecret {
        ShareSecret::from_bytes([n; 16])
    }

    #[test]
    fn links_survive_a_round_trip_through_their_file() {
        let mut links = Links::default();
        links
            .add("for Ann", Some(NOW + 3600), "photos", secret(1), NOW)
            .unwrap();
        links.add("", None, "", secret(2), NOW).unwrap();
        links.revoke(LinkId(2), NOW + 5).unwrap();
        let back = Links::from_json(&links.to_json()).unwrap();
        assert_eq!(back, links);
        assert_eq!(back.live().count(), 1);
        assert_eq!(back.get(LinkId(1)).unwrap().secret(), Some(secret(1)));
    }

    #[test]
    fn ids_are_never_reused_and_the_main_link_is_not_kept_here() {
        let mut links = Links::default();
        let a = links.add("a", None, "", secret(1), NOW).unwrap().id;
        links.revoke(a, NOW).unwrap();
        let b = links.add("b", None, "", secret(2), NOW).unwrap().id;
        assert!(b > a && a >= LinkId(1));
        assert_eq!(links.revoke(LinkId(0), NOW), Err(LinksError::MainLink));
        assert_eq!(
            links.revoke(LinkId(99), NOW),
            Err(LinksError::NoSuchLink(LinkId(99)))
        );
        assert_eq!(links.revoke(a, NOW), Err(LinksError::AlreadyEnded(a)));
    }

    #[test]
    fn links_expire_when_their_time_comes_and_say_when() {
        let mut links = Links::default();
        links
            .add("soon", Some(NOW + 60), "", secret(1), NOW)
            .unwrap();
        links
            .add("later", Some(NOW + 600), "", secret(2), NOW)
            .unwrap();
        assert_eq!(links.next_expiry(), Some(NOW + 60));
        assert!(links.expire_due(NOW + 59).is_empty());
        assert_eq!(links.expire_due(NOW + 60), vec![LinkId(1)]);
        assert_eq!(links.next_expiry(), Some(NOW + 600));
        match links.get(LinkId(1)).unwrap().end() {
            Some(LinkEnd::Expired { words }) => {
                assert!(words.contains("expired on 2026-"), "{words}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            links.add("x", Some(NOW - 1), "", secret(3), NOW),
            Err(LinksError::ExpiryPast(when(NOW - 1)))
        );
    }

    #[test]
    fn live_and_ended_links_are_bounded() {
        let mut links = Links::default();
        for i in 0..MAX_LIVE_LINKS {
            links.add("", None, "", secret(i as u8), NOW).unwrap();
        }
        assert_eq!(
            links.add("", None, "", secret(0), NOW),
            Err(LinksError::TooMany)
        );
        for id in 1..=MAX_LIVE_LINKS as u32 {
            links.revoke(LinkId(id), NOW + u64::from(id)).unwrap();
        }
        for i in 0..10 {
            let id = links.add("", None, "", secret(i), NOW).unwrap().id;
            links.revoke(id, NOW + 1000 + u64::from(i)).unwrap();
        }
        assert_eq!(links.all().len(), ENDED_KEPT);
        assert!(
            links.get(LinkId(1)).is_none(),
            "the longest-ended went first"
        );
    }

    #[test]
    fn a_damaged_file_is_refused_in_words() {
        assert!(matches!(
            Links::from_json(b"{not json"),
            Err(LinksError::Damaged(_))
        ));
    }

    #[test]
    fn expiries_read_as_people_write_them() {
        assert_eq!(parse_expiry("48h", NOW), Ok(NOW + 48 * 3600));
        assert_eq!(parse_expiry("30m", NOW), Ok(NOW + 1800));
        assert_eq!(parse_expiry("7d", NOW), Ok(NOW + 7 * 86400));
        assert_eq!(parse_expiry("2026-11-27", NOW), Ok(1_795_737_600));
        assert_eq!(
            parse_expiry("2026-11-27 18:00", NOW),
            Ok(1_795_737_600 + 18 * 3600)
        );
        assert_eq!(
            parse_expiry("2026-11-27T18:00:00Z", NOW),
            Ok(1_795_737_600 + 18 * 3600)
        );
        let e = parse_expiry("next tuesday", NOW).unwrap_err().to_string();
        assert!(e.contains("48h") && e.contains("2026-11-27"), "{e}");
        assert_eq!(when(1_795_737_600 + 18 * 3600), "2026-11-27 18:00 UTC");
    }
}
