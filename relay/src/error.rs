//! Errors: what an HTTP client is told ([`AppError`]), and why the relay could not
//! start ([`RelayError`]).
//!
//! An [`AppError`] becomes a plain-text response in words a user understands.
//! Internal details (file paths, OS errors) are logged, never sent.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::config::ConfigError;

/// An HTTP request the relay answers with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    #[error(
        "Invalid room id: it must be 8 to 64 characters of A-Z, a-z, 0-9, '_' or '-'. \
         Check that the link was copied whole."
    )]
    BadRoomId,
    #[error("Invalid role: connect with ?role=host (the sharer) or ?role=guest (a visitor).")]
    BadRole,
    #[error("This is the linkfs signaling endpoint; it only accepts WebSocket connections.")]
    NotWebSocket(StatusCode),
    #[error("The relay is at its limit of {0} connections. Try again in a moment.")]
    TooManyConnections(usize),
    /// One client address holds as many of these as the relay allows.
    #[error("Too many {0} from your address at once. Close some and try again.")]
    TooManyFromAddress(&'static str),
    /// `/metrics` without the operator's token.
    #[error("The metrics need the operator's token (Authorization: Bearer ...).")]
    MetricsToken,
    /// A host without a valid proof that it holds the room's key.
    #[error("This room belongs to another sharer: {0}")]
    NotTheRoomsSharer(String),
    /// A sharer in a web page, where the operator turned tab sharing off.
    #[error(
        "This relay does not take shares from a browser tab (its operator turned that off). Share with the linkfs app, or use another relay."
    )]
    NoTabSharing,
    #[error("Not found.")]
    NotFound,
    /// The fleet's room directory cannot be reached (the words say so).
    #[error("{0}")]
    Unavailable(String),
    /// Something failed inside the relay; the detail is logged, not sent.
    #[error("The relay ran into an internal problem; try again.")]
    Internal(String),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRoomId | AppError::BadRole => StatusCode::BAD_REQUEST,
            AppError::NotWebSocket(status) => *status,
            AppError::TooManyConnections(_) | AppError::Unavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppError::NotTheRoomsSharer(_) | AppError::NoTabSharing => StatusCode::FORBIDDEN,
            AppError::TooManyFromAddress(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::MetricsToken => StatusCode::UNAUTHORIZED,
            AppError::NotFound => StatusCode::NOT_FOUND,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::Internal(detail) = &self {
            tracing::error!(%detail, "internal error");
        }
        let mut response = (self.status(), format!("{self}\n")).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if matches!(
            self,
            AppError::TooManyConnections(_) | AppError::Unavailable(_)
        ) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    #[error("invalid relay configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("cannot read the listening socket's address: {0}")]
    Listener(#[source] std::io::Error),
}
