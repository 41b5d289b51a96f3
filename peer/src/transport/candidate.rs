//! ICE candidates between webrtc-rs and their signaling form,
//! [`IceCandidate`](linkfs_core::IceCandidate) (the browser's `RTCIceCandidateInit` shape).
//!
//! webrtc-rs reports every local candidate with `sdpMid: ""` and `sdpMLineIndex: 0`
//! (`RTCIceCandidate::to_json`). An empty mid is not a valid mid for a browser, so
//! local candidates go out with no mid and index 0: a data-channel-only session has
//! exactly one m-line.

use linkfs_core::IceCandidate;
use webrtc::peer_connection::{RTCIceCandidate, RTCIceCandidateInit};

/// A locally gathered candidate as the other side should receive it, or `None` if
/// webrtc-rs cannot write it out (it then is not worth sending).
pub(crate) fn from_local(candidate: &RTCIceCandidate) -> Option<IceCandidate> {
    let init = candidate.to_json().ok()?;
    Some(IceCandidate {
        candidate: init.candidate,
        sdp_mid: init.sdp_mid.filter(|mid| !mid.is_empty()),
        sdp_mline_index: Some(init.sdp_mline_index.unwrap_or(0)),
    })
}

/// The form webrtc-rs takes for a remote candidate.
pub(crate) fn to_init(candidate: &IceCandidate) -> RTCIceCandidateInit {
    RTCIceCandidateInit {
        candidate: candidate.candidate.clone(),
        sdp_mid: candidate.sdp_mid.clone().filter(|mid| !mid.is_empty()),
        sdp_mline_index: candidate.sdp_mline_index,
        username_fragment: None,
        url: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let init = to_init(&IceCandidate {
            candidate: "c".into(),
            sdp_mid: Some(String::new()),
            sdp_mline_index: Some(0),
        });
        assert_eq!(init.sdp_mid, None);
    }
}
