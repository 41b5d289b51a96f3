//! Who came through a share's links, and where each stands: one registry,
//! from the answer to a visitor's offer until its task ended.
//!
//! ```text
//!            Answer                link_opened        first frame
//!  (offer) --------> Connecting ------------> Opened --------------> Serving
//!                        |                      |  (a password link)     ^
//!                        |                      +----> AtPrompt --> Checking
//!                        |                      |      (60 s)        | wrong: Leaving
//!                        |                      +----> Lane (its first frame joined a session)
//!                        +-- revoked, expired, kicked, turned away: Leaving
//!  visitor_ended (its task ended, however): gone
//! ```

use crate::Millis;
use crate::password_gate::{GuessSource, GuessTicket};
use crate::signaling::LinkId;

/// Where one visitor stands.
#[derive(Debug)]
pub enum Phase {
    /// Its offer was answered; its data link is not open yet.
    Connecting,
    /// Its data link is open; its first frame decides what it is.
    Opened,
    /// Its link asks a password: asked, not answered yet (its first frame
    /// kept for its session).
    AtPrompt {
        until: Millis,
        held: Option<Vec<u8>>,
    },
    /// Its guess is being checked (Argon2, job `job`).
    Checking {
        job: u64,
        ticket: GuessTicket,
        held: Option<Vec<u8>>,
    },
    /// Its session runs.
    Serving,
    /// It is a lane of another visitor's session: not a visitor of its own.
    Lane,
    /// It was told to go (or is going): its task ends soon.
    Leaving,
}

/// One visitor.
#[derive(Debug)]
pub struct Visitor {
    pub link: LinkId,
    /// When it came (unix seconds).
    pub since: u64,
    /// Where its data link comes from (its password guesses count there).
    pub source: GuessSource,
    pub phase: Phase,
}

impl Visitor {
    pub fn new(link: LinkId, since: u64) -> Visitor {
        Visitor {
            link,
            since,
            source: GuessSource(None),
            phase: Phase::Connecting,
        }
    }

    /// Its session runs (it counts as connected).
    pub fn serving(&self) -> bool {
        matches!(self.phase, Phase::Serving)
    }

    /// A visitor of its own (not a lane), until it leaves.
    pub fn counts(&self) -> bool {
        !matches!(self.phase, Phase::Lane)
    }
}
