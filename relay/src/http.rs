//! The HTTP surface: routes, the WebSocket upgrade and its checks, security headers.
//!
//! | route | answer |
//! | --- | --- |
//! | `GET /signal/{room}?role=host\|guest` | WebSocket upgrade ([`crate::session`]); 400 for a bad room id or role, 503 at `max_connections` |
//! | `GET /healthz` | `200 ok`; `503 not ready: ...` while a fleet relay cannot reach Redis |
//! | `GET /metrics` | Prometheus text ([`crate::metrics`]) |
//! | `GET /*` | the web app ([`crate::web`]); 404 for anything that is not a file |
//!
//! Every response carries the Content-Security-Policy, `Referrer-Policy: no-referrer`
//! and `X-Content-Type-Options: nosniff`. The CSP allows scripts and connections only
//! to the page's own origin (`connect-src 'self'` covers the same-origin `ws:`/`wss:`
//! signaling socket) and wasm compilation, so the page cannot send the link's secret
//! anywhere else.

use crate::host_proofs::ProofRefused;
use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use linkfs_proto::sharer_key::check_host_query;
use linkfs_proto::signal::{Role, is_valid_room_id};

use std::net::IpAddr;

use crate::config::IpNetwork;
use crate::error::AppError;
use crate::listener::PeerAddr;
use crate::metrics::Rejection;
use crate::session;
use crate::state::RelayState;

/// The Content-Security-Policy on every response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; style-src 'self' 'unsafe-inline'; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// tungstenite's read buffer per connection, allocated up front. Signaling messages
/// are small; a larger message is read in several system calls.
const READ_BUFFER: usize = 4 * 1024;

/// The relay's routes over `state`.
pub fn app(state: RelayState) -> Router {
    Router::new()
        .route("/signal/{room}", get(signal))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .fallback(get(web_file))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(state)
}

async fn signal(
    State(state): State<RelayState>,
    ConnectInfo(PeerAddr(peer)): ConnectInfo<PeerAddr>,
    headers: HeaderMap,
    room: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, AppError> {
    let checked = check_signal_request(room, query.as_deref());
    if checked.is_err() {
        state.metrics().rejected(Rejection::BadRequest);
    }
    let (room, role) = checked?;
    let upgrade = upgrade.map_err(|rejection| AppError::NotWebSocket(rejection.status()))?;
    if role == Role::Host
        && state.config().no_tab_sharing
        && headers.contains_key(axum::http::header::ORIGIN)
    {
        state.metrics().rejected(Rejection::BadRequest);
        return Err(AppError::NoTabSharing);
    }
    let client = client_address(peer.ip(), &headers, &state.config().trusted_proxies);
    if role == Role::Host {
        // Only the holder of the room's key may open it (see linkfs_proto::sharer_key).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let proof = check_host_query(&room, query.as_deref().unwrap_or_default(), now);
        let first_use = match &proof {
            Ok(sig) => state.first_use_of_host_proof(sig, client, now),
            Err(_) => Ok(()),
        };
        if first_use == Err(ProofRefused::TooManyFromAddress) {
            state.metrics().rejected(Rejection::TooManyConnections);
            return Err(AppError::TooManyFromAddress("new shares"));
        }
        if first_use == Err(ProofRefused::TooMany) {
            state.metrics().rejected(Rejection::Unavailable);
            return Err(AppError::Unavailable(
                "the relay is taking too many new shares; try again in a few minutes".into(),
            ));
        }
        let mut fresh = proof.is_ok() && first_use.is_ok();
        // With a fleet, the proof counts once across every relay.
        if let (true, Ok(sig), Some(fleet)) = (fresh, &proof, state.fleet()) {
            let window = std::time::Duration::from_secs(
                2 * linkfs_proto::sharer_key::HOST_PROOF_WINDOW_SECS,
            );
            fresh = match fleet.first_use_of_proof(sig, window).await {
                Ok(first) => first,
                Err(e) => {
                    state.metrics().rejected(Rejection::Unavailable);
                    return Err(AppError::Unavailable(e.to_string()));
                }
            };
        }
        if !fresh {
            state.metrics().rejected(Rejection::BadRequest);
            return Err(AppError::NotTheRoomsSharer(match proof {
                Err(e) => e.to_string(),
                Ok(_) => "this proof of the sharer's key was used before".into(),
            }));
        }
    }
    let claim = state
        .claim_address(client, &room, role == Role::Host)
        .map_err(|what| {
            state.metrics().rejected(Rejection::TooManyConnections);
            AppError::TooManyFromAddress(what)
        })?;
    let limits = &state.config().limits;
    let Some(slot) = state.websocket_slot() else {
        state.metrics().rejected(Rejection::TooManyConnections);
        return Err(AppError::TooManyConnections(limits.max_connections));
    };
    let response = upgrade
        .max_message_size(limits.max_message)
        .max_frame_size(limits.max_message)
        .read_buffer_size(READ_BUFFER)
        // Write each message at once (signaling is latency-bound), and let at most
        // two maximum-size messages pile up in the writer if the socket is slow.
        .write_buffer_size(0)
        .max_write_buffer_size(2 * limits.max_message + 1024)
        .on_upgrade(move |socket| {
            let (sink, stream) = socket.split();
            let sessions = state.sessions().clone();
            sessions.track_future(async move {
                session::run(state, room, role, client, sink, stream).await;
                drop(slot);
                drop(claim);
            })
        });
    Ok(response)
}

fn check_signal_request(
    room: Result<Path<String>, PathRejection>,
    query: Option<&str>,
) -> Result<(Box<str>, Role), AppError> {
    let Ok(Path(room)) = room else {
        return Err(AppError::BadRoomId);
    };
    if !is_valid_room_id(&room) {
        return Err(AppError::BadRoomId);
    }
    let role = query
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("role="))
        .and_then(|role| match role {
            "host" => Some(Role::Host),
            "guest" => Some(Role::Guest),
            _ => None,
        })
        .ok_or(AppError::BadRole)?;
    Ok((room.into_boxed_str(), role))
}

/// `200 ok`, or `503` with the reason when the relay cannot do its work
/// (with `--redis`: Redis does not answer), for load balancers.
async fn healthz(State(state): State<RelayState>) -> Response {
    match state.ready() {
        Ok(()) => "ok".into_response(),
        Err(why) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

/// The client's address: the peer's, or for a trusted proxy the last
/// `X-Forwarded-For` entry that is not itself a trusted proxy.
fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNetwork]) -> IpAddr {
    let is_proxy = |ip: &IpAddr| trusted.iter().any(|n| n.contains(*ip));
    if !is_proxy(&peer) {
        return peer;
    }
    headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .rev()
        .find(|a| !is_proxy(a))
        .unwrap_or(peer)
}

async fn metrics(
    State(state): State<RelayState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, AppError> {
    if let Some(token) = &state.config().metrics_token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(token.as_str()) {
            return Err(AppError::MetricsToken);
        }
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        state.render_metrics(),
    ))
}

async fn web_file(State(state): State<RelayState>, uri: Uri) -> Result<Response, AppError> {
    state.web().respond(uri.path()).await
}

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_of_proxies_is_trusted_and_its_forwarded_client_is_believed() {
        let trusted: Vec<IpNetwork> =
            vec!["172.16.0.0/12".parse().unwrap(), "::1".parse().unwrap()];
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("203.0.113.9, 172.18.0.4"),
        );
        let proxy: IpAddr = "172.18.0.2".parse().unwrap();
        assert_eq!(
            client_address(proxy, &headers, &trusted),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        let stranger: IpAddr = "198.51.100.7".parse().unwrap();
        assert_eq!(client_address(stranger, &headers, &trusted), stranger);
        assert!("10.0.0.0/33".parse::<IpNetwork>().is_err());
        assert!(
            "fd00::/8"
                .parse::<IpNetwork>()
                .unwrap()
                .contains("fd12::1".parse().unwrap())
        );
        assert!(
            !"fd00::/8"
                .parse::<IpNetwork>()
                .unwrap()
                .contains("10.0.0.1".parse().unwrap())
        );
    }

    fn check(room: &str, query: Option<&str>) -> Result<Role, AppError> {
        check_signal_request(Ok(Path(room.to_owned())), query).map(|(_, role)| role)
    }

    #[test]
    fn room_and_role_are_checked() {
        assert_eq!(check("room-0001", Some("role=host")).ok(), Some(Role::Host));
        assert_eq!(
            check("room-0001", Some("x=1&role=guest")).ok(),
            Some(Role::Guest)
        );
        assert!(
            check("short", Some("role=host"))
                .unwrap_err()
                .to_string()
                .starts_with("Invalid room id")
        );
        assert!(
            check("room-0001", Some("role=admin"))
                .unwrap_err()
                .to_string()
                .starts_with("Invalid role")
        );
        assert!(
            check("room-0001", None)
                .unwrap_err()
                .to_string()
                .starts_with("Invalid role")
        );
    }
}
