//! Short-lived TURN credentials for the members of live rooms, in coturn's
//! REST scheme (`use-auth-secret` / `static-auth-secret`): the username is
//! `<unix expiry>:<name>`, the password base64(HMAC-SHA1(secret, username)).
//! coturn checks both without asking anyone, and refuses the pair once the
//! expiry has passed.
//!
//! Only a socket that opened or joined a live room gets them (in its
//! `welcome`), and it gets fresh ones ([`RelayToClient::IceServers`]) every half
//! lifetime while it stays, so a long share never holds expired ones. A
//! relayed connection made with them lasts as long as coturn lets its
//! allocation live; linkfs reconnects (and resumes) when a link drops.
//!
//! [`RelayToClient::IceServers`]: linkfs_proto::signal::RelayToClient::IceServers

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use linkfs_proto::signal::IceServer;
use sha1::Sha1;

/// Default lifetime of the credentials handed out: one hour.
pub const DEFAULT_TURN_LIFETIME: Duration = Duration::from_secs(3600);

/// A TURN server that shares a secret with the relay.
#[derive(Clone, PartialEq, Eq)]
pub struct TurnConfig {
    /// coturn's `static-auth-secret`.
    pub secret: String,
    /// `turn:` / `turns:` URLs of the server (several transports or addresses
    /// of one server).
    pub urls: Vec<String>,
    /// How long handed-out credentials stay valid.
    pub lifetime: Duration,
}

impl std::fmt::Debug for TurnConfig {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnConfig")
            .field("secret", &"<secret>")
            .field("urls", &self.urls)
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

impl TurnConfig {
    /// Credentials for `name` valid until `now + lifetime` (unix seconds).
    pub fn credentials(&self, name: &str, now_unix: u64) -> IceServer {
        let expiry = now_unix.saturating_add(self.lifetime.as_secs());
        let username = format!("{expiry}:{name}");
        IceServer {
            urls: self.urls.clone(),
            credential: Some(password(&self.secret, &username)),
            username: Some(username),
        }
    }

    /// Credentials for `name` valid from now.
    pub fn credentials_now(&self, name: &str) -> IceServer {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.credentials(name, now)
    }

    /// How often a member gets fresh credentials: half their lifetime.
    pub fn refresh_every(&self) -> Duration {
        self.lifetime / 2
    }
}

/// coturn's password for `username`: base64(HMAC-SHA1(secret, username)).
pub fn password(secret: &str, username: &str) -> String {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha1>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(username.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_coturns() {
        // python3 -c 'import hmac,hashlib,base64;
        //   print(base64.b64encode(hmac.new(b"S3cret", b"1700003600:room-1",
        //   hashlib.sha1).digest()).decode())'
        assert_eq!(
            password("S3cret", "1700003600:room-1"),
            "mMjudeGVk11pd1QJcCCMKI+eIt8="
        );
    }

    #[test]
    fn credentials_expire_a_lifetime_from_now() {
        let turn = TurnConfig {
            secret: "S3cret".into(),
            urls: vec!["turn:127.0.0.1:3478".into()],
            lifetime: Duration::from_secs(3600),
        };
        let c = turn.credentials("room-1", 1_700_000_000);
        assert_eq!(c.username.as_deref(), Some("1700003600:room-1"));
        assert_eq!(
            c.credential.as_deref(),
            Some("mMjudeGVk11pd1QJcCCMKI+eIt8=")
        );
        assert_eq!(c.urls, ["turn:127.0.0.1:3478"]);
        assert!(!format!("{turn:?}").contains("S3cret"), "no secret in logs");
    }
}
