//! The relay's WebSocket, from a native peer (host or guest).
//!
//! JSON text frames of [`ClientToRelay`] / [`RelayToClient`]. Frames the relay
//! sends that are not JSON of the expected shape are skipped with a warning;
//! pings are answered by the WebSocket library while reading.

use futures_util::{SinkExt, StreamExt};
use linkfs_proto::signal::{ClientToRelay, MAX_SIGNAL_MESSAGE, RelayToClient};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Why talking to the relay failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignalError {
    #[error("could not reach the relay at {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: tokio_tungstenite::tungstenite::Error,
    },
    #[error("the connection to the relay failed: {0}")]
    Socket(#[from] tokio_tungstenite::tungstenite::Error),
}

/// One WebSocket to the relay.
pub struct SignalClient {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl std::fmt::Debug for SignalClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalClient")
    }
}

impl SignalClient {
    pub async fn connect(url: &str) -> Result<SignalClient, SignalError> {
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(MAX_SIGNAL_MESSAGE * 2);
        config.max_frame_size = Some(MAX_SIGNAL_MESSAGE * 2);
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), false)
            .await
            .map_err(|source| SignalError::Connect {
                url: url.to_owned(),
                source,
            })?;
        Ok(SignalClient { ws })
    }

    /// The next message from the relay; `None` once the relay closed the socket.
    /// Cancel-safe.
    pub async fn recv(&mut self) -> Result<Option<RelayToClient>, SignalError> {
        loop {
            match self.ws.next().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(Message::Text(text))) => match serde_json::from_str(text.as_str()) {
                    Ok(m) => return Ok(Some(m)),
                    Err(e) => {
                        tracing::warn!(error = %e, "skipping a relay message this version does not understand")
                    }
                },
                Some(Ok(Message::Close(_))) => return Ok(None),
                Some(Ok(_)) => {}
            }
        }
    }

    pub async fn send(&mut self, msg: &ClientToRelay) -> Result<(), SignalError> {
        // Serializing these plain enums cannot fail.
        let text = serde_json::to_string(msg).unwrap_or_default();
        self.ws.send(Message::Text(text.into())).await?;
        Ok(())
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
