//! The relay client: one WebSocket to the relay, from a native peer (host or guest).
//!
//! JSON text frames of [`ClientToRelay`] / [`RelayToClient`]. What the frames mean is
//! the signaling machines' business ([`linkfs_core::signaling`]); this module only
//! moves text. Pings are answered by the WebSocket library while reading.

use futures_util::{SinkExt, StreamExt};
use linkfs_proto::signal::MAX_SIGNAL_MESSAGE;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Why talking to the relay failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayClientError {
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
pub struct RelayClient {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl std::fmt::Debug for RelayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RelayClient")
    }
}

impl RelayClient {
    pub async fn connect(url: &str) -> Result<RelayClient, RelayClientError> {
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(MAX_SIGNAL_MESSAGE * 2);
        config.max_frame_size = Some(MAX_SIGNAL_MESSAGE * 2);
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), false)
            .await
            .map_err(|source| RelayClientError::Connect {
                url: url.to_owned(),
                source,
            })?;
        Ok(RelayClient { ws })
    }

    /// The next text frame from the relay; `None` once the relay closed the
    /// socket. Cancel-safe.
    pub async fn recv(&mut self) -> Result<Option<String>, RelayClientError> {
        loop {
            match self.ws.next().await {
                None | Some(Ok(Message::Close(_))) => return Ok(None),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(Message::Text(text))) => return Ok(Some(text.as_str().to_owned())),
                Some(Ok(_)) => {}
            }
        }
    }

    /// Sends one text frame (what a signaling machine asked to send).
    pub async fn send(&mut self, text: String) -> Result<(), RelayClientError> {
        self.ws.send(Message::Text(text.into())).await?;
        Ok(())
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}
