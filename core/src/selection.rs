//! A link that shows a selection of paths of a share: the selected files
//! and folders (each folder whole) at their places under the share's root,
//! and the folders on the way to them holding only what leads to a selected
//! path. Nothing beside a selected path is shown: not its name, size, kind
//! or count, and no symlink's target that leads to it.
//!
//! Paths are '/'-separated and relative to the shared folder, with no empty,
//! `.` or `..` component (the sharer normalises what the user gave).

/// Most paths one link may select.
pub const MAX_SELECTED_PATHS: usize = 32;

/// See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Sorted, none inside another.
    paths: Vec<Vec<u8>>,
}

/// Why a selection cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("a selection needs at least one path")]
    Empty,
    #[error("a link can select at most {MAX_SELECTED_PATHS} paths")]
    TooMany,
    #[error(
        "the selected path '{0}' is not a plain path inside the share (no '..', '.', empty parts or NUL)"
    )]
    NotPlain(String),
}

/// Whether `inner` is `outer` or below it.
fn within(inner: &[u8], outer: &[u8]) -> bool {
    inner.len() >= outer.len()
        && inner.starts_with(outer)
        && (inner.len() == outer.len() || inner[outer.len()] == b'/')
}

impl Selection {
    /// The selection of `paths` (a path inside another selected one adds nothing).
    pub fn new<P: AsRef<[u8]>>(paths: &[P]) -> Result<Selection, SelectionError> {
        if paths.is_empty() {
            return Err(SelectionError::Empty);
        }
        if paths.len() > MAX_SELECTED_PATHS {
            return Err(SelectionError::TooMany);
        }
        let mut sorted: Vec<Vec<u8>> = Vec::with_capacity(paths.len());
        for p in paths {
            let p = p.as_ref();
            let plain = !p.is_empty()
                && !p.contains(&0)
                && p.split(|b| *b == b'/')
                    .all(|part| !part.is_empty() && part != b"." && part != b"..");
            if !plain {
                return Err(SelectionError::NotPlain(
                    String::from_utf8_lossy(p).into_owned(),
                ));
            }
            sorted.push(p.to_vec());
        }
        // Shortest first, so a path inside an earlier one is dropped.
        sorted.sort_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
        let mut kept: Vec<Vec<u8>> = Vec::with_capacity(sorted.len());
        for p in sorted {
            if !kept.iter().any(|k| within(&p, k)) {
                kept.push(p);
            }
        }
        kept.sort();
        Ok(Selection { paths: kept })
    }

    /// The selected paths, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &[u8]> {
        self.paths.iter().map(Vec::as_slice)
    }

    /// Whether `rel` is a selected path or inside one (shown whole).
    pub fn holds(&self, rel: &[u8]) -> bool {
        self.paths.iter().any(|p| within(rel, p))
    }

    /// Whether `rel` is a folder on the way to a selected path (the root,
    /// `""`, always is).
    pub fn leads_to(&self, rel: &[u8]) -> bool {
        rel.is_empty()
            || self
                .paths
                .iter()
                .any(|p| p.len() > rel.len() && within(p, rel))
    }

    /// Whether the entry at `rel` is shown: inside a selected path, or a
    /// folder on the way to one (something else by that name is not).
    pub fn shows(&self, rel: &[u8], is_folder: bool) -> bool {
        self.holds(rel) || (is_folder && self.leads_to(rel))
    }

    /// Whether a symlink at `link_rel` pointing at `target` leads to
    /// something shown (or to a folder on the way to it). An absolute target
    /// or one climbing above the root does not.
    pub fn shows_target(&self, link_rel: &[u8], target: &[u8]) -> bool {
        match resolve(link_rel, target) {
            Some(at) => self.holds(&at) || self.leads_to(&at),
            None => false,
        }
    }
}

/// Where `target`, read relative to the folder holding `link_rel`, leads,
/// lexically; `None` if absolute or above the root.
pub fn resolve(link_rel: &[u8], target: &[u8]) -> Option<Vec<u8>> {
    if target.first() == Some(&b'/') {
        return None;
    }
    let mut at: Vec<&[u8]> = link_rel.split(|b| *b == b'/').collect();
    at.pop();
    for part in target.split(|b| *b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                at.pop()?;
            }
            p => at.push(p),
        }
    }
    Some(at.join(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(paths: &[&str]) -> Selection {
        Selection::new(paths).expect("a selection")
    }

    #[test]
    fn selected_paths_are_shown_whole_and_the_folders_on_the_way_only_as_folders() {
        let s = sel(&["docs/2026", "photos/trip.jpg"]);
        assert!(s.shows(b"", true));
        assert!(s.shows(b"docs", true));
        assert!(s.shows(b"docs/2026", true));
        assert!(s.shows(b"docs/2026/a/b.txt", false));
        assert!(s.shows(b"photos", true));
        assert!(s.shows(b"photos/trip.jpg", false));
        // Beside the selection.
        assert!(!s.shows(b"docs/2025", true));
        assert!(!s.shows(b"docs/20266", true));
        assert!(!s.shows(b"docs/readme", false));
        assert!(!s.shows(b"photos/other.jpg", false));
        assert!(!s.shows(b"secret", true));
        // A file where a folder on the way should be.
        assert!(!s.shows(b"docs", false));
    }

    #[test]
    fn a_path_inside_another_adds_nothing_and_bad_paths_are_refused() {
        assert_eq!(sel(&["a/b", "a", "c"]).paths().count(), 2);
        for bad in ["", "/a", "a/", "a/../b", "./a", "a//b", "a\0b"] {
            assert!(
                matches!(Selection::new(&[bad]), Err(SelectionError::NotPlain(_))),
                "{bad:?} was accepted"
            );
        }
        let many: Vec<String> = (0..=MAX_SELECTED_PATHS).map(|i| format!("p{i}")).collect();
        assert_eq!(Selection::new(&many), Err(SelectionError::TooMany));
        assert_eq!(Selection::new::<&str>(&[]), Err(SelectionError::Empty));
    }

    #[test]
    fn a_symlinks_target_counts_only_if_it_leads_to_what_is_shown() {
        let s = sel(&["docs/2026", "photos/trip.jpg"]);
        assert!(s.shows_target(b"docs/2026/link", b"a/b.txt"));
        assert!(s.shows_target(b"docs/2026/link", b"../../photos/trip.jpg"));
        assert!(s.shows_target(b"docs/2026/link", b".."));
        assert!(!s.shows_target(b"docs/2026/link", b"../2025/x"));
        assert!(!s.shows_target(b"docs/2026/link", b"../../secret"));
        assert!(!s.shows_target(b"docs/2026/link", b"../../../etc/passwd"));
        assert!(!s.shows_target(b"docs/2026/link", b"/etc/passwd"));
    }
}
