//! The names uploaded files land under: what a visitor asked for, made safe
//! for the sharer's disk, every change said in words for the uploader.
//!
//! A path is '/'-separated and relative to the folder the link shows. Each
//! component is made safe on its own:
//! - Unicode is normalised to NFC (what macOS sends as NFD lands as NFC, so
//!   two spellings of one name cannot sit side by side);
//! - control characters (C0, DEL, C1) are dropped; `\` becomes `_`;
//! - a name that is empty, `.` or `..` after that is refused (a path that
//!   climbs or names nothing is not made "safe", it is wrong);
//! - a name longer than [`MAX_NAME_BYTES`] is shortened at a character
//!   boundary, keeping its extension;
//! - bytes that are not UTF-8 are refused (browsers and `linkfs put` send
//!   UTF-8; a name the sharer's user cannot read is not made up);
//! - a name starting with `.` (hidden on the sharer's system: `.bashrc`,
//!   `.ssh`) gets `_` for its dot, unless the link was made to take hidden
//!   names ([`NameRules::hidden`]); [`STAGING_NAME`] (where uploads are
//!   written aside) is never a name an upload takes, whatever the rules.
//!
//! Conflicts ("never over an existing file") are the landing's: it tries the
//! name, then [`numbered`] ones (`a (2).jpg`), comparing with [`same_name`]
//! (case and normalisation folded), so `Report.PDF` does not land beside
//! `report.pdf` as a look-alike either.

use unicode_normalization::UnicodeNormalization;

/// Longest name most Linux file systems take (bytes).
pub const MAX_NAME_BYTES: usize = 255;

/// The longest ending after a dot kept whole as an extension when a name is
/// shortened or numbered; a longer one is part of the name.
const MAX_EXTENSION_BYTES: usize = 16;
/// Deepest path an upload may make (components).
pub const MAX_DEPTH: usize = 64;
/// Longest path an upload may name (bytes, as sent).
pub const MAX_PATH_BYTES: usize = 4096;

/// The folder uploads are written in before they land, at the top of the
/// shared folder: never a name an upload lands under.
pub const STAGING_NAME: &str = ".linkfs-incoming";

/// What a link lets its uploads be named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NameRules {
    /// Names may start with `.` (hidden files and folders): only when the
    /// sharer asked for it when making the link.
    pub hidden: bool,
}

/// A path made safe, and what was changed to make it so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafePath {
    pub parts: Vec<String>,
    /// One line per change, in words ("'a\u{7}b' -> 'ab': control characters removed").
    pub changes: Vec<String>,
}

impl SafePath {
    /// The path, '/'-separated.
    pub fn joined(&self) -> String {
        self.parts.join("/")
    }
}

/// Why a path cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadNameError {
    #[error("the name is empty")]
    Empty,
    #[error("the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    #[error("the path is more than {MAX_DEPTH} folders deep")]
    TooDeep,
    #[error("the path is not UTF-8 text")]
    NotText,
    #[error("the path starts at the root ('/'): give it relative to the link's folder")]
    Absolute,
    #[error("the path names '{0}', which is not a name (nothing, '.' or '..')")]
    NotAName(String),
}

/// [`safe_path_with`] under the default rules (no hidden names).
pub fn safe_path(path: &[u8]) -> Result<SafePath, UploadNameError> {
    safe_path_with(path, NameRules::default())
}

/// See the module docs.
pub fn safe_path_with(path: &[u8], rules: NameRules) -> Result<SafePath, UploadNameError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(UploadNameError::TooLong);
    }
    let text = std::str::from_utf8(path).map_err(|_| UploadNameError::NotText)?;
    if text.is_empty() {
        return Err(UploadNameError::Empty);
    }
    if text.starts_with('/') {
        return Err(UploadNameError::Absolute);
    }
    let raw: Vec<&str> = text.split('/').collect();
    if raw.len() > MAX_DEPTH {
        return Err(UploadNameError::TooDeep);
    }
    let mut out = SafePath {
        parts: Vec::with_capacity(raw.len()),
        changes: Vec::new(),
    };
    for part in raw {
        let (mut name, mut why) = safe_name(part);
        if name.is_empty() || name == "." || name == ".." {
            return Err(UploadNameError::NotAName(shown(part)));
        }
        if name.eq_ignore_ascii_case(STAGING_NAME) {
            name.replace_range(..1, "_");
            why.push("the name of the sharer's own folder for uploads under way");
        } else if name.starts_with('.') && !rules.hidden {
            name.replace_range(..1, "_");
            why.push("'.' at the start would hide it; this link does not take hidden names");
        }
        if !why.is_empty() {
            out.changes.push(format!(
                "'{}' -> '{}': {}",
                shown(part),
                name,
                why.join(", ")
            ));
        }
        out.parts.push(name);
    }
    Ok(out)
}

/// A name as words can show it (control characters escaped).
fn shown(name: &str) -> String {
    name.chars().flat_map(char::escape_default).collect()
}

/// One component made safe, and what was done to it.
fn safe_name(part: &str) -> (String, Vec<&'static str>) {
    let mut why = Vec::new();
    let nfc: String = part.nfc().collect();
    if nfc != part {
        why.push("Unicode normalised (NFC)");
    }
    let mut name = String::with_capacity(nfc.len());
    let mut dropped = false;
    let mut backslash = false;
    for c in nfc.chars() {
        if c.is_control() {
            dropped = true;
        } else if c == '\\' {
            backslash = true;
            name.push('_');
        } else {
            name.push(c);
        }
    }
    if dropped {
        why.push("control characters removed");
    }
    if backslash {
        why.push("'\\' replaced by '_'");
    }
    if name.len() > MAX_NAME_BYTES {
        name = shortened(&name, MAX_NAME_BYTES);
        why.push("shortened to 255 bytes");
    }
    (name, why)
}

/// `name` cut to at most `max` bytes at a character boundary, keeping a
/// short extension (`.jpg`) at its end.
fn shortened(name: &str, max: usize) -> String {
    let ext = name
        .rfind('.')
        .filter(|at| *at > 0 && name.len() - at <= MAX_EXTENSION_BYTES)
        .map_or("", |at| &name[at..]);
    let mut stem_end = max - ext.len();
    while !name.is_char_boundary(stem_end) {
        stem_end -= 1;
    }
    format!("{}{ext}", &name[..stem_end])
}

/// The `n`th name to try for `name` when it is taken (n >= 2): `a (2).jpg`,
/// `archive (2).tar.gz`, `.bashrc (2)`, `notes (3)`; within the length limit.
pub fn numbered(name: &str, n: u32) -> String {
    let suffix = format!(" ({n})");
    // The extension: from the first dot of the last one or two parts, so
    // `.tar.gz` stays whole; a name starting with a dot has none there.
    let body_start = usize::from(name.starts_with('.'));
    let ext_at = {
        let body = &name[body_start..];
        let last = body.rfind('.');
        let before = last.and_then(|l| body[..l].rfind('.'));
        match (before, last) {
            (Some(b), Some(l)) if l - b <= 4 && body.len() - l <= 4 => Some(b),
            (_, Some(l)) if l > 0 => Some(l),
            _ => None,
        }
        .map(|at| at + body_start)
    };
    // A long "extension" is part of the name (`a.` and 250 letters), so the
    // number always fits before it.
    let (stem, ext) = match ext_at {
        Some(at) if at > 0 && name.len() - at <= MAX_EXTENSION_BYTES => name.split_at(at),
        _ => (name, ""),
    };
    let whole = format!("{stem}{suffix}{ext}");
    if whole.len() <= MAX_NAME_BYTES {
        return whole;
    }
    let keep = MAX_NAME_BYTES - suffix.len() - ext.len();
    let mut end = keep.min(stem.len());
    while !stem.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}{ext}", &stem[..end])
}

/// A key two names share if a visitor could take one for the other: NFC
/// and case folded (`Report.PDF`, `report.pdf`, `Réport` in NFD and NFC).
pub fn same_name(name: &str) -> String {
    let nfc: String = name.nfc().collect();
    caseless::default_case_fold_str(&nfc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names_pass_unchanged_and_unsafe_ones_are_fixed_and_said() {
        let p = safe_path("photos/2026/beach day.jpg".as_bytes()).unwrap();
        assert_eq!(p.joined(), "photos/2026/beach day.jpg");
        assert!(p.changes.is_empty());

        let p = safe_path("a\u{7}b\\c/e\u{301}t\u{e9}.txt".as_bytes()).unwrap();
        assert_eq!(
            p.parts,
            vec!["ab_c".to_owned(), "\u{e9}t\u{e9}.txt".to_owned()]
        );
        assert_eq!(p.changes.len(), 2);
        assert!(
            p.changes[0].contains("control characters removed"),
            "{:?}",
            p.changes
        );
        assert!(p.changes[0].contains("replaced by '_'"), "{:?}", p.changes);
        assert!(p.changes[1].contains("NFC"), "{:?}", p.changes);

        let long = format!("{}.jpg", "é".repeat(200));
        let p = safe_path(long.as_bytes()).unwrap();
        assert!(p.parts[0].len() <= MAX_NAME_BYTES);
        assert!(p.parts[0].ends_with("é.jpg"), "{}", p.parts[0]);
        assert!(p.changes[0].contains("shortened"));
    }

    #[test]
    fn uploads_never_make_a_hidden_name_unless_the_link_takes_them() {
        // Regression: `put DROP .bashrc` made `.bashrc`, and `--to .ssh` made
        // `.ssh/authorized_keys`, beside the sharer's own.
        let p = safe_path(b".ssh/authorized_keys").unwrap();
        assert_eq!(p.joined(), "_ssh/authorized_keys");
        assert_eq!(p.changes.len(), 1, "{:?}", p.changes);
        assert!(p.changes[0].contains("hidden"), "{:?}", p.changes);
        assert_eq!(safe_path(b".bashrc").unwrap().joined(), "_bashrc");
        assert_eq!(
            safe_path(b"a/b/.hidden.txt").unwrap().joined(),
            "a/b/_hidden.txt"
        );
        assert_eq!(safe_path(b"not.hidden").unwrap().joined(), "not.hidden");
        let hidden = NameRules { hidden: true };
        assert_eq!(
            safe_path_with(b".ssh/x", hidden).unwrap().joined(),
            ".ssh/x"
        );
        // The staging folder is never a name an upload takes, whatever the rules.
        for rules in [NameRules::default(), hidden] {
            assert_eq!(
                safe_path_with(b".linkfs-incoming/x", rules)
                    .unwrap()
                    .joined(),
                "_linkfs-incoming/x"
            );
            assert_eq!(
                safe_path_with(b".LINKFS-INCOMING", rules).unwrap().joined(),
                "_LINKFS-INCOMING"
            );
        }
    }

    #[test]
    fn paths_that_climb_name_nothing_or_start_at_the_root_are_refused() {
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "..",
            ".",
            "a//b",
            "a/",
            "\u{7}",
            "a/\u{1}\u{2}",
        ] {
            assert!(safe_path(bad.as_bytes()).is_err(), "{bad:?} was taken");
        }
        assert_eq!(safe_path(b"a/\xff"), Err(UploadNameError::NotText));
        let deep = vec!["d"; MAX_DEPTH + 1].join("/");
        assert_eq!(safe_path(deep.as_bytes()), Err(UploadNameError::TooDeep));
        assert_eq!(
            safe_path(&vec![b'a'; MAX_PATH_BYTES + 1]),
            Err(UploadNameError::TooLong)
        );
    }

    #[test]
    fn a_taken_name_gets_a_number_before_its_extension() {
        assert_eq!(numbered("a.jpg", 2), "a (2).jpg");
        assert_eq!(numbered("archive.tar.gz", 2), "archive (2).tar.gz");
        assert_eq!(numbered("notes", 3), "notes (3)");
        assert_eq!(numbered(".bashrc", 2), ".bashrc (2)");
        assert_eq!(numbered("v1.2.3-release.zip", 2), "v1.2.3-release (2).zip");
        let long = "x".repeat(MAX_NAME_BYTES - 4) + ".bin";
        let n = numbered(&long, 12);
        assert!(n.len() <= MAX_NAME_BYTES && n.ends_with(" (12).bin"), "{n}");
    }

    #[test]
    fn a_taken_name_with_a_long_ending_after_its_dot_is_numbered_within_the_limit() {
        // Taken twice over a drop link: this overflowed the length sum.
        for name in [
            format!("a.{}", "b".repeat(MAX_NAME_BYTES - 2)),
            format!(".{}", "c".repeat(MAX_NAME_BYTES - 1)),
            format!("x.{}.{}", "d".repeat(120), "e".repeat(130)),
        ] {
            for n in [2, 4_000_000_000] {
                let numbered = numbered(&name, n);
                assert!(
                    numbered.len() <= MAX_NAME_BYTES,
                    "{} bytes: {numbered}",
                    numbered.len()
                );
                assert!(numbered.ends_with(&format!(" ({n})")), "{numbered}");
                assert!(numbered.starts_with(&name[..3]), "{numbered}");
            }
        }
    }

    #[test]
    fn look_alike_names_share_a_key() {
        assert_eq!(same_name("Report.PDF"), same_name("report.pdf"));
        assert_eq!(
            same_name("Re\u{301}sume\u{301}"),
            same_name("R\u{e9}sum\u{e9}")
        );
        assert_ne!(same_name("a.txt"), same_name("b.txt"));
    }
}
