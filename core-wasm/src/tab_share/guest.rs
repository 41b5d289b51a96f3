//! One guest's peer connection on the sharing tab: the browser answers the
//! guest's offer, trades candidates, and carries the data channel the guest
//! opened. IO only; what each event means is the share's
//! (`linkfs_core::share::Share`) and the visitor's session's.
//!
//! ```text
//! start(offer)  -> setRemoteDescription, createAnswer, setLocalDescription -> Answer(sdp)
//! icecandidate  -> Candidate        add(candidate) -> addIceCandidate (held until described)
//! datachannel   -> (the guest's channel, label linkfs/1)
//!   open -> Opened   message -> Frame   bufferedamountlow -> Room   close -> Closed
//! connection failed -> Closed (with words)
//! ```

use std::any::Any;
use std::rc::Rc;

use js_sys::{ArrayBuffer, Uint8Array};
use linkfs_core::IceCandidate;
use linkfs_proto::CHANNEL_LABEL;
use linkfs_proto::signal::{IceServer, PeerId};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, spawn_local};
use web_sys::{
    MessageEvent, RtcDataChannel, RtcDataChannelEvent, RtcDataChannelState, RtcPeerConnection,
    RtcPeerConnectionIceEvent, RtcPeerConnectionState, RtcSdpType, RtcSessionDescriptionInit,
};

use crate::data_link::{add_candidate, js_message, rtc_configuration};

/// Candidates held until the remote description is set (the handshake
/// machine bounds them the same).
const EARLY_CANDIDATES: usize = linkfs_core::signaling::CANDIDATES_PER_VISITOR;

/// A visitor's link has room for another frame while the browser holds less
/// than this, queued and not yet sent (the session then takes the next one).
pub const HIGH_WATER: u32 = 1 << 20;
/// `bufferedamountlow` fires when the queue falls to this.
const LOW_WATER: u32 = 256 << 10;

/// What a guest's connection tells the share.
#[derive(Debug)]
pub enum GuestNews {
    Answer(String),
    Candidate(IceCandidate),
    /// The guest's data channel came (take it: [`GuestLink::take_channel`]).
    Channel(RtcDataChannel),
    /// Its data channel opened.
    Opened,
    Frame(Vec<u8>),
    /// The channel's queue drained below the low water mark.
    Room,
    /// The channel or the connection closed (or never came up): why.
    Closed(String),
}

/// Where a guest's news goes.
pub type Report = Rc<dyn Fn(PeerId, GuestNews)>;

/// See the module docs.
pub struct GuestLink {
    pc: RtcPeerConnection,
    dc: Option<RtcDataChannel>,
    described: bool,
    early: Vec<IceCandidate>,
    closed: bool,
    keep: Vec<Box<dyn Any>>,
}

impl std::fmt::Debug for GuestLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestLink")
            .field("described", &self.described)
            .field("open", &self.is_open())
            .finish()
    }
}

impl GuestLink {
    /// Answers `offer` (the answer comes as [`GuestNews::Answer`]).
    pub fn start(
        peer: PeerId,
        offer: String,
        ice_servers: &[IceServer],
        report: &Report,
    ) -> Result<GuestLink, String> {
        let pc = RtcPeerConnection::new_with_configuration(&rtc_configuration(ice_servers, false))
            .map_err(|e| js_message(&e))?;
        let mut keep: Vec<Box<dyn Any>> = Vec::new();

        let r = report.clone();
        let on_candidate = Closure::<dyn FnMut(RtcPeerConnectionIceEvent)>::new(
            move |ev: RtcPeerConnectionIceEvent| {
                if let Some(c) = ev.candidate() {
                    r(
                        peer,
                        GuestNews::Candidate(IceCandidate {
                            candidate: c.candidate(),
                            sdp_mid: c.sdp_mid().filter(|m| !m.is_empty()),
                            sdp_mline_index: c.sdp_m_line_index(),
                        }),
                    );
                }
            },
        );
        pc.set_onicecandidate(Some(on_candidate.as_ref().unchecked_ref()));
        keep.push(Box::new(on_candidate));

        let (r, pc2) = (report.clone(), pc.clone());
        let on_state = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
            web_sys::console::debug_1(&JsValue::from_str(&format!(
                "linkfs: visitor {} connection {:?}, ICE {:?}",
                peer.0,
                pc2.connection_state(),
                pc2.ice_connection_state()
            )));
            if pc2.connection_state() == RtcPeerConnectionState::Failed {
                r(peer, GuestNews::Closed("the connection failed".into()));
            }
        });
        pc.set_onconnectionstatechange(Some(on_state.as_ref().unchecked_ref()));
        keep.push(Box::new(on_state));

        let r = report.clone();
        let on_channel =
            Closure::<dyn FnMut(RtcDataChannelEvent)>::new(move |ev: RtcDataChannelEvent| {
                let dc = ev.channel();
                if dc.label() == CHANNEL_LABEL {
                    r(peer, GuestNews::Channel(dc));
                } else {
                    dc.close();
                }
            });
        pc.set_ondatachannel(Some(on_channel.as_ref().unchecked_ref()));
        keep.push(Box::new(on_channel));

        let desc = RtcSessionDescriptionInit::new(RtcSdpType::Offer);
        desc.set_sdp(&offer);
        let (r, pc2) = (report.clone(), pc.clone());
        spawn_local(async move {
            let made: Result<String, JsValue> = async {
                JsFuture::from(pc2.set_remote_description(&desc)).await?;
                let answer: RtcSessionDescriptionInit =
                    JsFuture::from(pc2.create_answer()).await?.unchecked_into();
                let sdp = answer.get_sdp().unwrap_or_default();
                JsFuture::from(pc2.set_local_description(&answer)).await?;
                Ok(sdp)
            }
            .await;
            match made {
                Ok(sdp) => r(peer, GuestNews::Answer(sdp)),
                Err(e) => r(
                    peer,
                    GuestNews::Closed(format!(
                        "its connection details were not accepted: {}",
                        js_message(&e)
                    )),
                ),
            }
        });
        Ok(GuestLink {
            pc,
            dc: None,
            described: false,
            early: Vec::new(),
            closed: false,
            keep,
        })
    }

    /// The answer is made and set: candidates held go in now.
    pub fn described(&mut self) {
        self.described = true;
        for c in std::mem::take(&mut self.early) {
            let pc = self.pc.clone();
            spawn_local(async move { add_candidate(&pc, c).await });
        }
    }

    /// A candidate of the guest's.
    pub fn add(&mut self, c: IceCandidate) {
        if self.described {
            let pc = self.pc.clone();
            spawn_local(async move { add_candidate(&pc, c).await });
        } else if self.early.len() < EARLY_CANDIDATES {
            self.early.push(c);
        }
    }

    /// Takes the guest's data channel when it comes (one: a later one is closed).
    pub fn take_channel(&mut self, dc: RtcDataChannel, peer: PeerId, report: &Report) {
        if self.dc.is_some() || self.closed {
            dc.close();
            return;
        }
        dc.set_binary_type(web_sys::RtcDataChannelType::Arraybuffer);
        dc.set_buffered_amount_low_threshold(LOW_WATER);
        let r = report.clone();
        let on_open =
            Closure::<dyn FnMut(web_sys::Event)>::new(move |_| r(peer, GuestNews::Opened));
        dc.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        let r = report.clone();
        let on_frame = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Ok(buf) = ev.data().dyn_into::<ArrayBuffer>() {
                r(peer, GuestNews::Frame(Uint8Array::new(&buf).to_vec()));
            }
        });
        dc.set_onmessage(Some(on_frame.as_ref().unchecked_ref()));
        let r = report.clone();
        let on_low = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| r(peer, GuestNews::Room));
        dc.set_onbufferedamountlow(Some(on_low.as_ref().unchecked_ref()));
        let r = report.clone();
        let on_close = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
            r(peer, GuestNews::Closed("it closed the connection".into()));
        });
        dc.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        self.keep.push(Box::new(on_open));
        self.keep.push(Box::new(on_frame));
        self.keep.push(Box::new(on_low));
        self.keep.push(Box::new(on_close));
        if dc.ready_state() == RtcDataChannelState::Open {
            report(peer, GuestNews::Opened);
        }
        self.dc = Some(dc);
    }

    pub fn is_open(&self) -> bool {
        !self.closed
            && self
                .dc
                .as_ref()
                .is_some_and(|dc| dc.ready_state() == RtcDataChannelState::Open)
    }

    /// Whether the channel has room for another frame now.
    pub fn has_room(&self) -> bool {
        self.is_open()
            && self
                .dc
                .as_ref()
                .is_some_and(|dc| dc.buffered_amount() < HIGH_WATER)
    }

    /// The connection's `RTCStatsReport` (a Promise): direct or through TURN.
    pub fn stats(&self) -> Option<js_sys::Promise> {
        (!self.closed).then(|| self.pc.get_stats())
    }

    /// Bytes queued, not yet sent.
    pub fn queued(&self) -> u32 {
        self.dc.as_ref().map_or(0, RtcDataChannel::buffered_amount)
    }

    /// Sends one frame (dropped if the channel is not open).
    pub fn send(&self, frame: &[u8]) {
        if let Some(dc) = &self.dc
            && self.is_open()
        {
            let _ = dc.send_with_u8_array(frame);
        }
    }

    /// Closes the channel after what it holds was sent, then the connection.
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let dc = self.dc.clone();
        if let Some(dc) = &dc {
            dc.set_onopen(None);
            dc.set_onmessage(None);
            dc.set_onbufferedamountlow(None);
            dc.set_onclose(None);
        }
        let pc = self.pc.clone();
        pc.set_onicecandidate(None);
        pc.set_onconnectionstatechange(None);
        pc.set_ondatachannel(None);
        // The channel and the connection close a little later, so that the
        // channel's last frames (a goodbye) leave first: closing the channel
        // at once resets its stream, which raced the goodbye (measured: 3 of
        // 8 closing tabs' goodbyes never reached the visitor).
        let close = Closure::once_into_js(move || {
            if let Some(dc) = dc {
                dc.close();
            }
            pc.close();
        });
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(
                close.unchecked_ref(),
                CLOSE_AFTER_MS,
            );
        }
    }
}

/// How long after its channel a closed guest's peer connection closes.
const CLOSE_AFTER_MS: i32 = 3_000;
