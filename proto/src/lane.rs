//! Lanes: more peer connections that carry one receiver's read chunks (and
//! its upload chunks the other way).
//!
//! One SCTP association halves its congestion window at every loss and grows
//! it by one packet per round trip; across a lossy path of 20-100 ms that caps
//! a transfer at a few MB/s whatever the path can carry. Chunks spread over
//! several associations lose only one window of several at a loss. A lane is
//! such an association: a peer connection the receiver opens beside its
//! session's own, through the same link and relay, that carries nothing but
//! `ReadChunk` frames toward the receiver and `UploadChunk` frames toward the
//! sender.
//!
//! ```text
//! receiver                                          sender (the sharer)
//!   session's link:  <-- LaneOffer {token, lanes} -----|  first frame of a session
//!   a new connection: -- LaneJoin {token} ------------>|  first (and only) frame on a lane
//!                    <-- ReadChunk ... -----------------|  chunks of reads asked on the session
//!                    -- UploadChunk ... --------------->|  chunks of uploads begun on the session
//! ```
//!
//! These two frames belong to the shells that carry sessions, not to the
//! sessions: a session decodes them as `Unknown` and skips them, so a sharer
//! that offers no lanes and a receiver that opens none still talk to each
//! other as before. The token is random (128 bits) and travels only inside the
//! session's encrypted link; a lane that names no live session is closed.

use crate::DecodeError;
use crate::varint::Reader;

pub const FRAME_LANE_OFFER: u8 = 0x30;
pub const FRAME_LANE_JOIN: u8 = 0x31;

/// Names one session to the lanes that join it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaneToken(pub [u8; 16]);

impl std::fmt::Debug for LaneToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A capability: never printed whole.
        write!(f, "LaneToken({:02x}{:02x}..)", self.0[0], self.0[1])
    }
}

/// The sender's offer, first on a session's link: lanes may join it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneOffer {
    pub token: LaneToken,
    /// Most lanes the sender takes for this session.
    pub lanes: u8,
}

impl LaneOffer {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(18);
        out.push(FRAME_LANE_OFFER);
        out.extend_from_slice(&self.token.0);
        out.push(self.lanes);
        out
    }

    /// `Ok(None)` when `frame` is not a lane offer.
    pub fn decode(frame: &[u8]) -> Result<Option<LaneOffer>, DecodeError> {
        if frame.first() != Some(&FRAME_LANE_OFFER) {
            return Ok(None);
        }
        let mut r = Reader::new(&frame[1..]);
        let token = LaneToken(r.array()?);
        let lanes = r.u8()?;
        r.finish()?;
        Ok(Some(LaneOffer { token, lanes }))
    }
}

/// The first frame on a lane: which session it joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneJoin {
    pub token: LaneToken,
}

impl LaneJoin {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(17);
        out.push(FRAME_LANE_JOIN);
        out.extend_from_slice(&self.token.0);
        out
    }

    /// `Ok(None)` when `frame` is not a lane join.
    pub fn decode(frame: &[u8]) -> Result<Option<LaneJoin>, DecodeError> {
        if frame.first() != Some(&FRAME_LANE_JOIN) {
            return Ok(None);
        }
        let mut r = Reader::new(&frame[1..]);
        let token = LaneToken(r.array()?);
        r.finish()?;
        Ok(Some(LaneJoin { token }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReceiverToSender, SenderToReceiver};

    #[test]
    fn offer_and_join_round_trip_and_reject_trailing_or_short_bytes() {
        let offer = LaneOffer {
            token: LaneToken([7; 16]),
            lanes: 4,
        };
        assert_eq!(LaneOffer::decode(&offer.encode()), Ok(Some(offer)));
        let join = LaneJoin {
            token: LaneToken([9; 16]),
        };
        assert_eq!(LaneJoin::decode(&join.encode()), Ok(Some(join)));
        let mut long = join.encode();
        long.push(0);
        assert!(LaneJoin::decode(&long).is_err());
        assert!(LaneOffer::decode(&offer.encode()[..10]).is_err());
        assert_eq!(LaneJoin::decode(&offer.encode()), Ok(None));
    }

    #[test]
    fn sessions_that_know_nothing_of_lanes_skip_both_frames() {
        let offer = LaneOffer {
            token: LaneToken([1; 16]),
            lanes: 2,
        }
        .encode();
        assert!(matches!(
            SenderToReceiver::decode(&offer),
            Ok(SenderToReceiver::Unknown {
                kind: FRAME_LANE_OFFER
            })
        ));
        let join = LaneJoin {
            token: LaneToken([1; 16]),
        }
        .encode();
        assert!(matches!(
            ReceiverToSender::decode(&join),
            Ok(ReceiverToSender::Unknown {
                kind: FRAME_LANE_JOIN
            })
        ));
    }
}
