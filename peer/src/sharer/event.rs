//! What the sharer tells its user interface, why sharing stops, and the link
//! its command line asks for: the words and types every part of the sharer
//! uses (so none of them imports the share loop).

use std::path::PathBuf;

use linkfs_core::HostFailure;
use linkfs_proto::signal::PeerId;

use super::visitors::VisitorEnd;
use crate::random::RandomError;
use crate::relay_client::RelayClientError;
use crate::walk::WalkError;
use linkfs_core::share::links;

/// The rights of the link `linkfs share` prints, when given on its command
/// line (`--scope`, `--expires`, `--label`): a link of its own beside the
/// main one, kept like the others. Run again with the same label and scope,
/// the same link is printed again while it lives (its expiry stays the first
/// one's); otherwise a new one is made.
#[derive(Debug, Clone, Default)]
pub struct StartLink {
    pub label: String,
    /// `--scope`, as often as given: one folder becomes the link's root; a
    /// file or several paths make a selection.
    pub scopes: Vec<String>,
    /// Visitors may add files (`--allow-upload`, `--drop`).
    pub upload: Option<links::UploadRights>,
    pub expires: Option<String>,
    pub password: Option<String>,
}

/// What the sharer reports to its user interface.
#[derive(Debug)]
#[non_exhaustive]
pub enum ShareEvent {
    /// The share can be opened at this link (and, for an embedded relay on
    /// every interface, at these others: the machine's other addresses).
    Ready {
        link: String,
        other_links: Vec<String>,
    },
    /// A visitor's data link opened (`who`: "visitor 4 (link 1, for Ann)").
    VisitorConnected {
        peer: PeerId,
        visitors: usize,
        who: String,
    },
    /// A visitor left (or could not connect), after `served` bytes.
    VisitorLeft {
        peer: PeerId,
        visitors: usize,
        end: VisitorEnd,
        who: String,
        served: u64,
    },
    /// Something worth telling the user that does not stop the share.
    Warning(String),
    /// A change to the share's links (added, withdrawn, expired), in words.
    Links(String),
}

/// Why sharing could not start or had to stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShareError {
    #[error(transparent)]
    Walk(#[from] WalkError),
    #[error("cannot open {path} for reading")]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the relay on {bind} (is the port in use? pick another with --bind)")]
    RelayBind {
        bind: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the relay: {0}")]
    Relay(String),
    #[error(transparent)]
    RelayClient(#[from] RelayClientError),
    #[error(transparent)]
    Refused(HostFailure),
    #[error("the relay closed the connection before the share was registered")]
    RelayClosed,
    #[error(transparent)]
    Random(#[from] RandomError),
    #[error("cannot start a thread: {0}")]
    Thread(std::io::Error),
    /// The link asked for on the command line cannot be made (why: a
    /// `LinkRefused`, boxed so these words need none of the share loop's modules).
    #[error(transparent)]
    StartLink(Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot write the activity log {path}: {source}")]
    ActivityLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot watch the folder for changes: {0} (share it without following changes: --no-watch)"
    )]
    Watch(#[from] notify::Error),
}
