//! What a link shows and lets its visitors do, decided from its record alone
//! (the disk checks of a scope or a selection are the shell's, before a link
//! is made and when a visitor comes).

use super::links::LinkRecord;

/// What a link shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// The whole share (the main link's view).
    Whole,
    /// One folder, as the link's root ('/'-separated, relative to the share).
    Folder(String),
    /// Several paths (or a file), at their places under the share's root.
    Selection(Vec<String>),
}

impl Shown {
    /// What `record` shows.
    pub fn of(record: &LinkRecord) -> Shown {
        if !record.selection.is_empty() {
            Shown::Selection(record.selection.clone())
        } else if record.scope.is_empty() {
            Shown::Whole
        } else {
            Shown::Folder(record.scope.clone())
        }
    }

    /// As [`LinkRecord::view_key`] has it: links with the same key share one view.
    pub fn key(&self) -> String {
        match self {
            Shown::Whole => String::new(),
            Shown::Folder(scope) => scope.clone(),
            Shown::Selection(paths) => paths.iter().map(|p| format!("\0{p}")).collect(),
        }
    }

    /// The record's `scope` and `selection` for it.
    pub fn as_record(&self) -> (String, Vec<String>) {
        match self {
            Shown::Whole => (String::new(), Vec::new()),
            Shown::Folder(scope) => (scope.clone(), Vec::new()),
            Shown::Selection(paths) => (String::new(), paths.clone()),
        }
    }
}

/// Why a scope or a new link's rights cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RightsError {
    #[error("the scope '{0}' climbs out with '..': give a folder inside the share, relative to it")]
    Climbs(String),
    #[error("a scope cannot contain NUL")]
    Nul,
    #[error(
        "a selection names paths inside the share; '/' is the whole share: give no --scope for it"
    )]
    WholeInSelection,
    #[error(
        "a link that selects paths cannot take files: give it one folder (--scope DIR) or the whole share"
    )]
    UploadToSelection,
    #[error("an empty password is no password: give one, or none")]
    EmptyPassword,
}

/// Whether a new link may have these rights: one that selects paths takes
/// no files, and an empty password is no password (`password`: as given,
/// before it is hashed; `None` when there is none or it is checked already).
pub fn check_new(
    shown: &Shown,
    takes_files: bool,
    password: Option<&str>,
) -> Result<(), RightsError> {
    if takes_files && matches!(shown, Shown::Selection(_)) {
        return Err(RightsError::UploadToSelection);
    }
    if password.is_some_and(str::is_empty) {
        return Err(RightsError::EmptyPassword);
    }
    Ok(())
}

/// A scope as given (`a/b`, `/a/b/`, `./a//b`): its '/'-separated form
/// relative to the shared folder, or why it cannot be one.
pub fn normal_scope(text: &str) -> Result<String, RightsError> {
    let mut parts = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(RightsError::Climbs(text.to_owned())),
            p if p.contains('\0') => return Err(RightsError::Nul),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_normal_and_never_climb() {
        assert_eq!(normal_scope("/a//b/./"), Ok("a/b".into()));
        assert_eq!(normal_scope(""), Ok(String::new()));
        assert!(matches!(
            normal_scope("a/../b"),
            Err(RightsError::Climbs(_))
        ));
        assert_eq!(normal_scope("a/\0"), Err(RightsError::Nul));
    }

    #[test]
    fn links_that_show_the_same_share_one_view() {
        assert_eq!(Shown::Whole.key(), "");
        assert_eq!(Shown::Folder("a".into()).key(), "a");
        assert_eq!(
            Shown::Selection(vec!["a".into(), "b/c".into()]).key(),
            "\0a\0b/c"
        );
    }
}
