//! The web app files compiled into the binary by `build.rs`.

/// One embedded file.
#[derive(Debug)]
pub(crate) struct EmbeddedFile {
    /// Path under the app root, `/`-separated, no leading slash (`assets/app-1a2b.js`).
    pub path: &'static str,
    pub bytes: &'static [u8],
    pub content_type: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/web_files.rs"));

/// The embedded file at `path`, if any. `WEB_FILES` is sorted by path.
pub(crate) fn find(path: &str) -> Option<&'static EmbeddedFile> {
    WEB_FILES
        .binary_search_by(|f| f.path.cmp(path))
        .ok()
        .and_then(|i| WEB_FILES.get(i))
}

/// Whether a real build was embedded (not the "not built" page).
pub(crate) fn is_built() -> bool {
    !WEB_SOURCE.is_empty()
}
