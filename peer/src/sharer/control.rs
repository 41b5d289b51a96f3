//! The running sharer's control socket: `linkfs link add|list|revoke`,
//! `linkfs visitors` and `linkfs kick` talk to it.
//!
//! ```text
//! <share's state folder>/control.sock   (the folder is 0700, the socket 0600;
//!                                        a peer of another user is refused)
//!   client: one JSON request line   {"cmd":"add","label":"for Ann","expires":"48h"}
//!   sharer: one JSON answer line    {"ok":true,"link":{...}}  |  {"ok":false,"error":"words"}
//! ```
//!
//! The listener only carries requests to the share loop ([`ControlRequest`]
//! with a reply channel) and answers back; the loop decides. Bounds: a
//! request line of at most [`MAX_REQUEST`] bytes, within [`REQUEST_TIME`];
//! at most [`AT_ONCE`] connections served at a time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use linkfs_proto::signal::PeerId;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Longest request line.
pub const MAX_REQUEST: usize = 4096;
/// How long a client has to send its request.
pub const REQUEST_TIME: Duration = Duration::from_secs(5);
/// Connections served at once.
pub const AT_ONCE: usize = 8;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// Every link of the share.
    List,
    /// A new link; `expires` as people write it (`48h`, `2026-11-27 18:00`).
    Add {
        #[serde(default)]
        label: String,
        #[serde(default)]
        expires: Option<String>,
        /// A folder of the share to show as the link's root.
        #[serde(default)]
        scope: Option<String>,
        /// Several paths of the share for the link to show, at their places
        /// under its root (with `scope`, if given, as one more).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        selection: Vec<String>,
        /// Visitors may add files (and what they may add).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        upload: Option<linkfs_core::share::links::UploadRights>,
        /// The link's password (kept only as a hash).
        #[serde(default)]
        password: Option<String>,
    },
    /// Withdraws link `id`: its visitors are disconnected at once.
    Revoke { id: linkfs_core::LinkId },
    /// The visitors connected now.
    Visitors,
    /// Disconnects visitor `visitor` (its number in `visitors`).
    Kick { visitor: PeerId },
}

/// One link, as `list` and `add` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkView {
    pub id: linkfs_core::LinkId,
    pub label: String,
    pub url: String,
    /// The folder it shows as its root; empty: the whole share.
    #[serde(default)]
    pub scope: String,
    /// The paths it selects (see `linkfs link add --scope`); empty: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selection: Vec<String>,
    /// It takes files (and what it took).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<linkfs_core::share::links::UploadRights>,
    /// A drop link: the folder its visitors' files land in ('/'-separated,
    /// relative to the shared folder; made when the first file lands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_folder: Option<String>,
    /// It asks for a password.
    #[serde(default)]
    pub password: bool,
    /// Unix seconds.
    pub created: Option<u64>,
    pub expires: Option<u64>,
    /// "withdrawn" or "expired", once it ended.
    pub ended: Option<String>,
    /// Bytes of files served through it: to its visitors now and to those
    /// who left (the main link's: since the sharer started).
    #[serde(default)]
    pub bytes_served: u64,
    pub visitors: usize,
}

/// One visitor, as `visitors` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisitorView {
    /// Its number (for `kick`).
    pub visitor: PeerId,
    pub link: linkfs_core::LinkId,
    pub link_label: String,
    /// Unix seconds.
    pub since: u64,
    pub connected: bool,
    /// "direct" or "turn", once known.
    #[serde(default)]
    pub route: Option<String>,
    #[serde(default)]
    pub bytes_served: u64,
    /// The file it last started reading (within its link's view).
    #[serde(default)]
    pub reading: Option<String>,
    /// Files it added (uploads that landed), and their bytes.
    #[serde(default)]
    pub files_uploaded: u64,
    #[serde(default)]
    pub bytes_uploaded: u64,
}

/// The sharer's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub visitors: Vec<VisitorView>,
    /// What was done, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub said: String,
}

impl Answer {
    pub fn failed(error: impl std::fmt::Display) -> Answer {
        Answer {
            ok: false,
            error: Some(error.to_string()),
            links: Vec::new(),
            visitors: Vec::new(),
            said: String::new(),
        }
    }

    pub fn done(said: impl Into<String>) -> Answer {
        Answer {
            ok: true,
            error: None,
            links: Vec::new(),
            visitors: Vec::new(),
            said: said.into(),
        }
    }
}

/// A request for the share loop, with where its answer goes.
#[derive(Debug)]
pub struct ControlRequest {
    pub request: Request,
    pub reply: oneshot::Sender<Answer>,
}

/// Listens on `socket` (replacing a stale one) until `cancel` fires; each
/// request goes to `requests`. The socket file is removed at the end.
pub fn listen(
    socket: PathBuf,
    requests: mpsc::Sender<ControlRequest>,
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    let me = nix::unistd::getuid().as_raw();
    Ok(tokio::spawn(async move {
        let slots = std::sync::Arc::new(Semaphore::new(AT_ONCE));
        loop {
            let conn = tokio::select! {
                () = cancel.cancelled() => break,
                conn = listener.accept() => conn,
            };
            let Ok((stream, _)) = conn else { continue };
            if !stream.peer_cred().is_ok_and(|c| c.uid() == me) {
                continue;
            }
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let requests = requests.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let _ = tokio::time::timeout(REQUEST_TIME * 2, serve(stream, requests)).await;
            });
        }
        let _ = std::fs::remove_file(&socket);
    }))
}

async fn serve(stream: UnixStream, requests: mpsc::Sender<ControlRequest>) {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let mut reader = BufReader::new(read.take(MAX_REQUEST as u64 + 1));
    let got = tokio::time::timeout(REQUEST_TIME, reader.read_until(b'\n', &mut line)).await;
    let answer = match got {
        Ok(Ok(_)) if line.len() > MAX_REQUEST => Answer::failed("the request is too long"),
        Ok(Ok(_)) => match serde_json::from_slice::<Request>(&line) {
            Ok(request) => {
                let (reply, answer) = oneshot::channel();
                if requests
                    .send(ControlRequest { request, reply })
                    .await
                    .is_err()
                {
                    Answer::failed("the share is stopping")
                } else {
                    answer
                        .await
                        .unwrap_or_else(|_| Answer::failed("the share is stopping"))
                }
            }
            Err(e) => Answer::failed(format!("not a request this sharer knows: {e}")),
        },
        _ => Answer::failed("no request came"),
    };
    let mut out = serde_json::to_vec(&answer).unwrap_or_default();
    out.push(b'\n');
    let _ = write.write_all(&out).await;
}

/// Why a client could not talk to the sharer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error(
        "no `linkfs share` of {0} is running here (start it with `linkfs share {0}`; the folder must be the one it shares)"
    )]
    NotSharing(String),
    #[error("talking to the running sharer failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the running sharer answered something this linkfs does not understand: {0}")]
    BadAnswer(String),
}

/// Sends `request` to the sharer listening at `socket`; `folder` names it in errors.
pub async fn ask(socket: &Path, folder: &str, request: &Request) -> Result<Answer, ClientError> {
    let stream = match UnixStream::connect(socket).await {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(ClientError::NotSharing(folder.to_owned()));
        }
        Err(e) => return Err(e.into()),
    };
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(request).unwrap_or_default();
    line.push(b'\n');
    write.write_all(&line).await?;
    let mut answer = Vec::new();
    let mut reader = BufReader::new(read.take(1 << 20));
    tokio::time::timeout(REQUEST_TIME * 4, reader.read_until(b'\n', &mut answer))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    serde_json::from_slice(&answer).map_err(|e| ClientError::BadAnswer(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_the_documented_json() {
        let r: Request =
            serde_json::from_str(r#"{"cmd":"add","label":"for Ann","expires":"48h"}"#).unwrap();
        assert_eq!(
            r,
            Request::Add {
                label: "for Ann".into(),
                expires: Some("48h".into()),
                scope: None,
                selection: Vec::new(),
                upload: None,
                password: None,
            }
        );
        assert_eq!(
            serde_json::to_string(&Request::Revoke {
                id: linkfs_core::LinkId(3)
            })
            .unwrap(),
            r#"{"cmd":"revoke","id":3}"#
        );
    }

    #[tokio::test]
    async fn a_request_reaches_the_loop_and_its_answer_comes_back() {
        let dir = std::env::temp_dir().join(format!("linkfs-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("control.sock");
        let (tx, mut rx) = mpsc::channel(4);
        let cancel = CancellationToken::new();
        let task = listen(socket.clone(), tx, cancel.clone()).unwrap();
        let looped = tokio::spawn(async move {
            let r = rx.recv().await.unwrap();
            assert_eq!(
                r.request,
                Request::Revoke {
                    id: linkfs_core::LinkId(9)
                }
            );
            let _ = r.reply.send(Answer::failed("there is no link 9"));
        });
        let a = ask(
            &socket,
            "DIR",
            &Request::Revoke {
                id: linkfs_core::LinkId(9),
            },
        )
        .await
        .unwrap();
        assert_eq!(a.error.as_deref(), Some("there is no link 9"));
        looped.await.unwrap();
        // Junk gets words, not silence.
        let mut s = UnixStream::connect(&socket).await.unwrap();
        s.write_all(b"{\"cmd\":\"dance\"}\n").await.unwrap();
        let mut back = String::new();
        s.read_to_string(&mut back).await.unwrap();
        assert!(back.contains("not a request"), "{back}");
        cancel.cancel();
        task.await.unwrap();
        assert!(!socket.exists(), "the socket is removed at the end");
        let e = ask(&socket, "DIR", &Request::List).await.unwrap_err();
        assert!(e.to_string().contains("no `linkfs share` of DIR"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
