//! What a link names on the disk, checked: a scope is a real folder of the
//! share, a selected path a real file or folder, and neither goes through a
//! symlink (a link shows only what is inside what it names). Checked when a
//! link is made and again when its view starts.

use std::path::{Path, PathBuf};

/// Why a path a link names cannot be shown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("'{rel}' is not in the share ({source})")]
    Missing {
        rel: String,
        #[source]
        source: std::io::Error,
    },
    #[error("'{rel}' goes through a symlink ({part}): give what it points to, inside the share")]
    Symlink { rel: String, part: String },
    #[error("'{rel}' is not in the share ({part} is a file)")]
    ThroughFile { rel: String, part: String },
    #[error("'{rel}' is neither a file nor a folder")]
    Special { rel: String },
    #[error("the scope '{scope}' is not a folder of the share ({source})")]
    ScopeMissing {
        scope: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the scope '{scope}' goes through a symlink ({part}): give the folder itself")]
    ScopeSymlink { scope: String, part: String },
    #[error("the scope '{scope}' is not a folder ({part} is a file)")]
    ScopeNotFolder { scope: String, part: String },
}

/// Whether the path `rel` of the share names a folder (else a file): every
/// component on the way a real folder, none (itself included) a symlink.
pub fn selected_path(root: &Path, rel: &str) -> Result<bool, PathError> {
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at).map_err(|source| PathError::Missing {
            rel: rel.to_owned(),
            source,
        })?;
        if meta.file_type().is_symlink() {
            return Err(PathError::Symlink {
                rel: rel.to_owned(),
                part: (*part).to_owned(),
            });
        }
        let last = i + 1 == parts.len();
        if meta.is_dir() {
            continue;
        }
        if !last {
            return Err(PathError::ThroughFile {
                rel: rel.to_owned(),
                part: (*part).to_owned(),
            });
        }
        if !meta.is_file() {
            return Err(PathError::Special {
                rel: rel.to_owned(),
            });
        }
        return Ok(false);
    }
    Ok(true)
}

/// The folder `scope` names inside `root`: every component a real folder,
/// none a symlink.
pub fn scope_folder(root: &Path, scope: &str) -> Result<PathBuf, PathError> {
    let mut at = root.to_path_buf();
    for part in scope.split('/').filter(|p| !p.is_empty()) {
        at.push(part);
        let meta = std::fs::symlink_metadata(&at).map_err(|source| PathError::ScopeMissing {
            scope: scope.to_owned(),
            source,
        })?;
        if meta.file_type().is_symlink() {
            return Err(PathError::ScopeSymlink {
                scope: scope.to_owned(),
                part: part.to_owned(),
            });
        }
        if !meta.is_dir() {
            return Err(PathError::ScopeNotFolder {
                scope: scope.to_owned(),
                part: part.to_owned(),
            });
        }
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder removed when the test ends.
    struct Scratch(PathBuf);
    impl Scratch {
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_scope_through_a_symlink_or_a_file_is_refused_in_words() {
        let dir = std::env::temp_dir().join(format!("linkfs-shown-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dir = Scratch(dir);
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/f"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("l")).unwrap();
        assert_eq!(
            scope_folder(dir.path(), "a/b").unwrap(),
            dir.path().join("a/b")
        );
        let e = scope_folder(dir.path(), "l/b").unwrap_err().to_string();
        assert!(e.contains("goes through a symlink (l)"), "{e}");
        let e = scope_folder(dir.path(), "a/f").unwrap_err().to_string();
        assert!(e.contains("is not a folder (f is a file)"), "{e}");
        assert!(selected_path(dir.path(), "a/b").unwrap());
        assert!(!selected_path(dir.path(), "a/f").unwrap());
        let e = selected_path(dir.path(), "a/f/x").unwrap_err().to_string();
        assert!(
            e.contains("'a/f/x' is not in the share (f is a file)"),
            "{e}"
        );
        let e = selected_path(dir.path(), "nope").unwrap_err().to_string();
        assert!(e.contains("'nope' is not in the share"), "{e}");
    }
}
