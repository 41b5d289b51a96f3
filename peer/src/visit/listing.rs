//! `linkfs ls`: listings from the local index (no round trip per directory).
//!
//! Text: one line per entry, `MODE SIZE MTIME NAME` (`ls -l` style, mtime in
//! UTC, a symlink as `name -> target`, names written as their raw bytes except
//! that control characters are escaped as `\xNN` and a backslash as `\\`: a
//! sharer's names cannot drive the terminal, see [`crate::terminal`]). With
//! `-R`, every entry below PATH by its path relative to PATH, depth first, each
//! directory's entries in the order the web page shows them (folders first,
//! then case-insensitive by name).
//! JSON (`--json`): one object per line (JSON Lines, so a million entries
//! stream): `{"path","kind","size","mtime","mode"}` plus `"target"` for
//! symlinks; names that are not UTF-8 are shown with U+FFFD (their raw bytes are
//! in the text form).

use std::io::Write;

use linkfs_core::{EntryRef, Index};
use linkfs_proto::{EntryId, EntryKind};

use crate::terminal::{TerminalSafeJson, escape_bytes};

/// How to print.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListOptions {
    pub json: bool,
    pub recursive: bool,
}

/// Why a listing could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListError {
    #[error("{0}: no such file or folder in the share")]
    NotFound(String),
    #[error("cannot write the listing: {0}")]
    Write(#[from] std::io::Error),
}

/// `ls -l`'s mode string: `drwxr-xr-x`.
pub fn mode_string(kind: EntryKind, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(match kind {
        EntryKind::Dir => 'd',
        EntryKind::Symlink => 'l',
        _ => '-',
    });
    for shift in [6u32, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// Seconds since 1970 as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn utc_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A path as the command line took it: '/' at either end does not count.
pub fn trim_slashes(path: &[u8]) -> &[u8] {
    let start = path.iter().position(|b| *b != b'/').unwrap_or(path.len());
    let end = path
        .iter()
        .rposition(|b| *b != b'/')
        .map_or(start, |e| e + 1);
    &path[start..end]
}

fn json_line(out: &mut impl Write, path: &[u8], e: &EntryRef<'_>) -> std::io::Result<()> {
    let mut obj = serde_json::json!({
        "path": String::from_utf8_lossy(path),
        "kind": e.kind.as_str(),
        "size": e.size,
        "mtime": e.mtime,
        "mode": e.mode,
    });
    // JSON strings are Unicode: a name that is not UTF-8 also comes as its
    // bytes in hex, so two such names never look the same.
    if std::str::from_utf8(path).is_err() {
        obj["path_hex"] = hex(path).into();
    }
    if e.kind == EntryKind::Symlink {
        obj["target"] = String::from_utf8_lossy(e.target).into();
        if std::str::from_utf8(e.target).is_err() {
            obj["target_hex"] = hex(e.target).into();
        }
    }
    let mut json = serde_json::Serializer::with_formatter(&mut *out, TerminalSafeJson);
    serde::Serialize::serialize(&obj, &mut json).map_err(std::io::Error::other)?;
    out.write_all(b"\n")
}

fn text_line(out: &mut impl Write, path: &[u8], e: &EntryRef<'_>) -> std::io::Result<()> {
    write!(
        out,
        "{} {:>12} {} ",
        mode_string(e.kind, e.mode),
        e.size,
        utc_time(e.mtime)
    )?;
    out.write_all(&escape_bytes(path))?;
    if e.kind == EntryKind::Symlink {
        out.write_all(b" -> ")?;
        out.write_all(&escape_bytes(e.target))?;
    }
    out.write_all(b"\n")
}

/// Writes the listing of `path` (a folder: its entries; a file: itself).
/// Returns how many entries were written.
pub fn list(
    index: &Index,
    path: &[u8],
    options: ListOptions,
    out: &mut impl Write,
) -> Result<u64, ListError> {
    let trimmed = trim_slashes(path);
    let not_found = || ListError::NotFound(crate::terminal::escaped_name(path));
    let id = if trimmed.is_empty() || trimmed == b"." {
        EntryId(0)
    } else {
        index.lookup(trimmed).ok_or_else(not_found)?
    };
    let e = index.get(id).ok_or_else(not_found)?;
    let line = |out: &mut _, p: &[u8], e: &EntryRef<'_>| {
        if options.json {
            json_line(out, p, e)
        } else {
            text_line(out, p, e)
        }
    };
    if e.kind != EntryKind::Dir {
        line(out, &e.name, &e)?;
        return Ok(1);
    }
    let mut written = 0u64;
    // Depth first with an explicit stack of (directory, its path relative to `path`).
    let mut stack: Vec<(EntryId, Vec<u8>)> = vec![(id, Vec::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let children = index.children(dir);
        let mut subdirs = Vec::new();
        for &child in children {
            let Some(c) = index.get(EntryId(child)) else {
                continue;
            };
            let mut p = prefix.clone();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(&c.name);
            let shown = if options.recursive { &p[..] } else { &c.name };
            line(out, shown, &c)?;
            written += 1;
            if options.recursive && c.kind == EntryKind::Dir {
                subdirs.push((EntryId(child), p));
            }
        }
        // Reversed so the first folder is listed next.
        stack.extend(subdirs.into_iter().rev());
    }
    out.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_match_known_dates() {
        assert_eq!(utc_time(0), "1970-01-01 00:00:00");
        assert_eq!(utc_time(1_767_225_600), "2026-01-01 00:00:00");
        assert_eq!(utc_time(951_825_599), "2000-02-29 11:59:59");
        assert_eq!(utc_time(-1), "1969-12-31 23:59:59");
    }

    #[test]
    fn modes_read_like_ls() {
        assert_eq!(mode_string(EntryKind::Dir, 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(EntryKind::File, 0o640), "-rw-r-----");
        assert_eq!(mode_string(EntryKind::Symlink, 0o777), "lrwxrwxrwx");
    }
}
