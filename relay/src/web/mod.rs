//! Serving the web app: embedded in the binary, or from a directory (development).
//!
//! `GET /` is `index.html`; every other path must name a file exactly (the app keeps
//! its state in the URL fragment, so there is no client-side routing to fall back
//! for): anything else is 404. Paths with empty, `.` or `..` segments or
//! backslashes are 404 before the file system is touched; in directory mode the
//! resolved file must also stay inside the directory (symlinks included).
//!
//! Caching: hashed files under `/assets/` are immutable for a year; everything
//! else (`index.html` above all) is `no-cache`, so a new build shows on reload.
//! The security headers every response carries are added in [`crate::http`].

mod content_type;
mod embedded;

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;

use crate::error::AppError;

const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const NO_CACHE: &str = "no-cache";

/// Where the web app comes from.
#[derive(Debug, Clone)]
pub(crate) enum WebApp {
    /// The copy `build.rs` compiled in.
    Embedded,
    /// Files read from this directory on every request.
    Dir(PathBuf),
}

impl WebApp {
    pub fn new(dir: Option<PathBuf>) -> Self {
        match dir {
            Some(dir) => WebApp::Dir(dir),
            None => {
                if !embedded::is_built() {
                    tracing::warn!(
                        "this binary holds no web app (web/dist was missing at build time)"
                    );
                }
                WebApp::Embedded
            }
        }
    }

    /// The response for a request of `uri_path` (e.g. `/assets/app.js`).
    pub async fn respond(&self, uri_path: &str) -> Result<Response, AppError> {
        let path = file_path(uri_path).ok_or(AppError::NotFound)?;
        let (body, content_type) = match self {
            WebApp::Embedded => {
                let file = embedded::find(&path).ok_or(AppError::NotFound)?;
                (Body::from(file.bytes), file.content_type)
            }
            WebApp::Dir(dir) => {
                let bytes = read_inside(dir, &path).await?;
                (Body::from(bytes), content_type::for_path(&path))
            }
        };
        let cache = if path.starts_with("assets/") {
            IMMUTABLE
        } else {
            NO_CACHE
        };
        let mut response = Response::new(body);
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        Ok(response)
    }
}

/// The app-relative file path for a request path, or `None` if it can't name a file.
fn file_path(uri_path: &str) -> Option<String> {
    let rel = uri_path.strip_prefix('/')?;
    if rel.is_empty() {
        return Some("index.html".to_owned());
    }
    let safe = rel
        .split('/')
        .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains(['\\', '\0']));
    safe.then(|| rel.to_owned())
}

/// Reads `rel` under `dir`, refusing anything that resolves outside it.
async fn read_inside(dir: &Path, rel: &str) -> Result<Vec<u8>, AppError> {
    let not_found = |_| AppError::NotFound;
    let root = tokio::fs::canonicalize(dir)
        .await
        .map_err(|err| AppError::Internal(format!("web dir {}: {err}", dir.display())))?;
    let file = tokio::fs::canonicalize(root.join(rel))
        .await
        .map_err(not_found)?;
    if !file.starts_with(&root) {
        return Err(AppError::NotFound);
    }
    let meta = tokio::fs::metadata(&file).await.map_err(not_found)?;
    if !meta.is_file() {
        return Err(AppError::NotFound);
    }
    tokio::fs::read(&file)
        .await
        .map_err(|err| AppError::Internal(format!("read {}: {err}", file.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_map_to_files_or_nothing() {
        assert_eq!(file_path("/").as_deref(), Some("index.html"));
        assert_eq!(
            file_path("/assets/a-1.js").as_deref(),
            Some("assets/a-1.js")
        );
        for bad in [
            "/../etc/passwd",
            "/a/../b",
            "/a//b",
            "/./a",
            "/a\\b",
            "/dir/",
            "x",
        ] {
            assert_eq!(file_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn content_types_follow_the_extension() {
        assert_eq!(content_type::for_path("x.wasm"), "application/wasm");
        assert_eq!(
            content_type::for_path("a/b.JS"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type::for_path("s.css"), "text/css; charset=utf-8");
        assert_eq!(
            content_type::for_path("index.html"),
            "text/html; charset=utf-8"
        );
        assert_eq!(content_type::for_path("noext"), "application/octet-stream");
    }

    #[test]
    fn the_embedded_table_has_an_index() {
        assert!(embedded::find("index.html").is_some());
    }
}
