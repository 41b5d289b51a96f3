//! ICE candidates as they travel through signaling: the fields of
//! [`SignalPayload::Candidate`], in the browser's `RTCIceCandidateInit` shape.
//!
//! webrtc-rs reports every local candidate with `sdpMid: ""` and `sdpMLineIndex: 0`
//! (`RTCIceCandidate::to_json`). An empty mid is not a valid mid for a browser, so
//! local candidates go out with no mid and index 0: a data-channel-only session has
//! exactly one m-line.

use linkfs_proto::signal::SignalPayload;
use webrtc::peer_connection::{RTCIceCandidate, RTCIceCandidateInit};

/// One ICE candidate, either gathered here (to send) or received (to add).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IceCandidate {
    /// The `candidate:...` attribute line.
    pub candidate: String,
    /// The media id it belongs to; `None` when unknown.
    pub sdp_mid: Option<String>,
    /// The m-line index it belongs to; `None` when unknown.
    pub sdp_mline_index: Option<u16>,
}

impl IceCandidate {
    /// The signaling payload carrying this candidate.
    pub fn into_payload(self) -> SignalPayload {
        SignalPayload::Candidate {
            candidate: self.candidate,
            sdp_mid: self.sdp_mid,
            sdp_mline_index: self.sdp_mline_index,
        }
    }

    /// The candidate in a signaling payload, or `None` if the payload is something else.
    pub fn from_payload(payload: &SignalPayload) -> Option<Self> {
        match payload {
            SignalPayload::Candidate {
                candidate,
                sdp_mid,
                sdp_mline_index,
            } => Some(Self {
                candidate: candidate.clone(),
                sdp_mid: sdp_mid.clone(),
                sdp_mline_index: *sdp_mline_index,
            }),
            _ => None,
        }
    }

    /// A locally gathered candidate as the other side should receive it, or `None` if
    /// webrtc-rs cannot write it out (it then is not worth sending).
    pub(crate) fn from_local(candidate: &RTCIceCandidate) -> Option<Self> {
        let init = candidate.to_json().ok()?;
        Some(Self {
            candidate: init.candidate,
            sdp_mid: init.sdp_mid.filter(|mid| !mid.is_empty()),
            sdp_mline_index: Some(init.sdp_mline_index.unwrap_or(0)),
        })
    }

    /// The form webrtc-rs takes for a remote candidate.
    pub(crate) fn to_init(&self) -> RTCIceCandidateInit {
        RTCIceCandidateInit {
            candidate: self.candidate.clone(),
            sdp_mid: self.sdp_mid.clone().filter(|mid| !mid.is_empty()),
            sdp_mline_index: self.sdp_mline_index,
            username_fragment: None,
            url: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trip_keeps_every_field() {
        let c = IceCandidate {
            candidate: "candidate:1 1 udp 2130706431 127.0.0.1 5000 typ host".into(),
            sdp_mid: Some("0".into()),
            sdp_mline_index: Some(0),
        };
        let payload = c.clone().into_payload();
        assert_eq!(IceCandidate::from_payload(&payload), Some(c));
        assert_eq!(
            IceCandidate::from_payload(&SignalPayload::Offer { sdp: "v=0".into() }),
            None
        );
    }

    #[test]
    fn local_candidates_go_out_without_the_empty_mid() {
        let json = serde_json::to_string(
            &IceCandidate {
                candidate: "candidate:1 1 udp 1 127.0.0.1 5000 typ host".into(),
                sdp_mid: None,
                sdp_mline_index: Some(0),
            }
            .into_payload(),
        )
        .unwrap();
        assert_eq!(
            json,
            r#"{"type":"candidate","candidate":"candidate:1 1 udp 1 127.0.0.1 5000 typ host","sdpMid":null,"sdpMLineIndex":0}"#
        );
    }
}
