//! The page's side of a share: [`DataLink`], the browser's RTCPeerConnection
//! and RTCDataChannel, opened through the relay by core's [`GuestSignaling`]
//! (the same handshake machine the native receiver drives).
//!
//! ```text
//! WebSocket /signal/{room}?role=guest          RTCPeerConnection
//!   text frames -> machine.handle_relay_text     icecandidate -> machine.local_candidate
//!   machine: Send(text)   -> ws.send            MakeOffer   -> createOffer, setLocalDescription,
//!            ApplyAnswer  -> setRemoteDescription, answer_applied        machine.offer_made
//!            AddCandidate -> addIceCandidate (one that cannot be used is skipped)
//!            CloseRelay   -> the WebSocket closes once the channel is open
//!            Fail(why)    -> a final status in words
//! data channel open -> frames flow: onFrame / send
//! ```
//!
//! Chromium cannot hand a data channel to a worker, so frames are passed to
//! JavaScript (`onFrame`), which forwards them to the worker.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::ArrayBuffer;
use linkfs_core::{GuestAction, GuestFailure, GuestSignaling, IceCandidate, ShareLink};
use linkfs_proto::signal::{IceServer, Role};
use linkfs_proto::{CHANNEL_LABEL, MAX_FRAME_LEN};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, spawn_local};
use web_sys::{
    CloseEvent, MessageEvent, RtcConfiguration, RtcDataChannel, RtcDataChannelInit,
    RtcDataChannelState, RtcIceCandidateInit, RtcIceServer, RtcPeerConnection,
    RtcPeerConnectionIceEvent, RtcPeerConnectionState, RtcSdpType, RtcSessionDescriptionInit,
    WebSocket,
};

#[wasm_bindgen(typescript_custom_section)]
const HANDLERS_TS: &str = r#"
/** The states a data link reports. */
export type LinkState = 'connecting' | 'connected' | 'sharer-gone' | 'invalid-link' | 'error';

/** Callbacks a DataLink reports to. */
export interface DataLinkHandlers {
  onStatus(state: LinkState, message: string): void;
  /** The data channel opened: frames may be sent. */
  onOpen(): void;
  /** One frame from the sharer. */
  onFrame(frame: ArrayBuffer): void;
  /** The data channel closed after it had opened (the link is over; a new DataLink may follow). */
  onClose(message: string): void;
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(typescript_type = "DataLinkHandlers")]
    pub type DataLinkHandlers;

    #[wasm_bindgen(method, js_name = onStatus)]
    fn on_status(this: &DataLinkHandlers, state: &str, message: &str);
    #[wasm_bindgen(method, js_name = onOpen)]
    fn on_open(this: &DataLinkHandlers);
    #[wasm_bindgen(method, js_name = onFrame)]
    fn on_frame(this: &DataLinkHandlers, frame: ArrayBuffer);
    #[wasm_bindgen(method, js_name = onClose)]
    fn on_close(this: &DataLinkHandlers, message: &str);
}

/// Words for the user, kept in one place.
mod words {
    pub const CONNECTING_RELAY: &str = "Connecting to the relay…";
    pub const CONNECTING_SHARER: &str = "Connecting to the sharer…";
    pub const CONNECTED: &str = "Connected to the sharer";
    pub const INVALID: &str = "This link is not valid: its secret does not match the share. Check that you copied the whole link, including everything after '#'.";
    pub const RELAY_LOST: &str = "Lost the connection to the relay before the sharer could be reached. Check your network and reload the page.";
    pub const SHARER_GONE: &str = "No one is sharing at this link now: the sharer stopped sharing, or the link is old. Ask them to share again and reload the page.";
    pub const CHANNEL_CLOSED: &str = "The connection to the sharer was lost.";
    pub const PEER_FAILED: &str = "Could not reach the sharer directly. If you are on different networks, the relay needs a TURN server.";
    pub const NO_TURN_FOR_RELAY_ONLY: &str = "This page was asked to connect only through a relay (?ice=relay in its address), but the relay offers no TURN server. Remove ?ice=relay from the address, or ask the relay's operator for TURN.";
}

/// The state and words for a failed handshake.
fn failure_status(f: &GuestFailure) -> (&'static str, String) {
    match f {
        GuestFailure::InvalidLink => ("invalid-link", words::INVALID.into()),
        GuestFailure::SharerGone => ("sharer-gone", words::SHARER_GONE.into()),
        GuestFailure::RelayLost => ("error", words::RELAY_LOST.into()),
        GuestFailure::Refused(reason) => ("error", reason.clone()),
        other => ("error", sentence(&other.to_string())),
    }
}

/// "the relay says: x" -> "The relay says: x."
fn sentence(text: &str) -> String {
    let mut s: String = text.chars().take(1).flat_map(char::to_uppercase).collect();
    s.push_str(text.get(1..).unwrap_or(""));
    if !s.ends_with(['.', '!', '?']) {
        s.push('.');
    }
    s
}

struct Inner {
    machine: GuestSignaling,
    /// Connect only through a TURN relay (`?ice=relay` in the page's address).
    relay_only: bool,
    handlers: DataLinkHandlers,
    ws: Option<WebSocket>,
    pc: Option<RtcPeerConnection>,
    dc: Option<RtcDataChannel>,
    opened: bool,
    finished: bool,
    keep: Vec<Box<dyn std::any::Any>>,
}

type Shared = Rc<RefCell<Inner>>;

/// The data link from this page to the sharer of one link.
#[wasm_bindgen]
pub struct DataLink {
    inner: Shared,
}

fn handlers(inner: &Shared) -> DataLinkHandlers {
    let h: JsValue = inner.borrow().handlers.clone();
    h.unchecked_into()
}

/// Unhooks every browser event handler, then closes the socket, channel and
/// connection. The closures stay alive (in `keep`) until the link is dropped,
/// so an event the browser already queued finds a live closure that sees
/// `finished` and does nothing.
fn detach(i: &mut Inner) {
    i.finished = true;
    close_relay(i);
    if let Some(dc) = i.dc.take() {
        dc.set_onopen(None);
        dc.set_onmessage(None);
        dc.set_onclose(None);
        dc.close();
    }
    if let Some(pc) = i.pc.take() {
        pc.set_onicecandidate(None);
        pc.set_onconnectionstatechange(None);
        pc.close();
    }
}

fn close_relay(i: &mut Inner) {
    if let Some(ws) = i.ws.take() {
        ws.set_onmessage(None);
        ws.set_onclose(None);
        let _ = ws.close();
    }
}

/// Ends the attempt with a final status (nothing more will be reported).
fn finish(inner: &Shared, state: &str, message: &str) {
    {
        let mut i = inner.borrow_mut();
        if i.finished {
            return;
        }
        detach(&mut i);
    }
    handlers(inner).on_status(state, message);
}

fn js_message(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "unknown error".into())
}

/// Carries out what the signaling machine asks for, until it asks for nothing.
fn pump(inner: &Shared) {
    loop {
        let action = {
            let mut i = inner.borrow_mut();
            if i.finished {
                return;
            }
            i.machine.poll_action()
        };
        let Some(action) = action else { return };
        match action {
            GuestAction::Send(text) => {
                if let Some(ws) = &inner.borrow().ws {
                    let _ = ws.send_with_str(&text);
                }
            }
            GuestAction::MakeOffer { ice_servers } => {
                let relay_only = inner.borrow().relay_only;
                if relay_only && !ice_servers.iter().any(IceServer::is_turn) {
                    return finish(inner, "error", words::NO_TURN_FOR_RELAY_ONLY);
                }
                handlers(inner).on_status("connecting", words::CONNECTING_SHARER);
                if let Err(e) = start_peer(inner, &ice_servers, relay_only) {
                    let m = format!(
                        "This browser could not start a WebRTC connection: {}",
                        js_message(&e)
                    );
                    return finish(inner, "error", &m);
                }
            }
            GuestAction::ApplyAnswer { sdp } => apply_answer(inner, sdp),
            GuestAction::AddCandidate(c) => {
                if let Some(pc) = inner.borrow().pc.clone() {
                    spawn_local(async move { add_candidate(&pc, c).await });
                }
            }
            GuestAction::CloseRelay => close_relay(&mut inner.borrow_mut()),
            GuestAction::Fail(why) => {
                let (state, message) = failure_status(&why);
                return finish(inner, state, &message);
            }
            _ => {}
        }
    }
}

#[wasm_bindgen]
impl DataLink {
    /// Starts connecting to the sharer of `link` (the whole link, or the
    /// page's origin followed by its fragment). `ice_policy` is `"relay"` to
    /// connect only through the relay's TURN server (the sharer then never
    /// learns this browser's addresses), anything else for any path.
    #[wasm_bindgen(constructor)]
    pub fn new(
        link: &str,
        ice_policy: &str,
        handlers: DataLinkHandlers,
    ) -> Result<DataLink, JsError> {
        crate::install_panic_hook();
        let link = ShareLink::parse(link).map_err(|e| JsError::new(&e.to_string()))?;
        let mut seed = [0u8; 16];
        getrandom::getrandom(&mut seed).map_err(|_| {
            JsError::new("this browser has no secure random numbers (crypto.getRandomValues)")
        })?;
        let ws = WebSocket::new(&link.signal_url(Role::Guest))
            .map_err(|_| JsError::new("could not open a WebSocket to the relay"))?;
        let inner = Rc::new(RefCell::new(Inner {
            machine: GuestSignaling::new(&link, seed),
            relay_only: ice_policy == "relay",
            handlers,
            ws: Some(ws.clone()),
            pc: None,
            dc: None,
            opened: false,
            finished: false,
            keep: Vec::new(),
        }));
        self::handlers(&inner).on_status("connecting", words::CONNECTING_RELAY);

        let weak = Rc::downgrade(&inner);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let Some(inner) = weak.upgrade() else { return };
            if let Some(text) = ev.data().as_string() {
                inner.borrow_mut().machine.handle_relay_text(&text);
                pump(&inner);
            }
        });
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        let weak = Rc::downgrade(&inner);
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |_ev: CloseEvent| {
            let Some(inner) = weak.upgrade() else { return };
            inner.borrow_mut().ws = None;
            inner.borrow_mut().machine.relay_closed();
            pump(&inner);
        });
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        {
            let mut i = inner.borrow_mut();
            i.keep.push(Box::new(on_message));
            i.keep.push(Box::new(on_close));
        }
        Ok(DataLink { inner })
    }

    /// Sends one frame to the sharer. Fails if the channel is not open or the
    /// frame is over the protocol's limit.
    pub fn send(&self, frame: &[u8]) -> Result<(), JsError> {
        if frame.len() > MAX_FRAME_LEN {
            return Err(JsError::new("frame is over the protocol's size limit"));
        }
        let i = self.inner.borrow();
        match &i.dc {
            Some(dc) if dc.ready_state() == RtcDataChannelState::Open => dc
                .send_with_u8_array(frame)
                .map_err(|_| JsError::new("the data channel refused the frame")),
            _ => Err(JsError::new("the connection to the sharer is not open")),
        }
    }

    /// Bytes queued in the data channel, not yet sent.
    #[wasm_bindgen(js_name = bufferedAmount)]
    pub fn buffered_amount(&self) -> u32 {
        self.inner
            .borrow()
            .dc
            .as_ref()
            .map_or(0, |dc| dc.buffered_amount())
    }

    /// The connection's `RTCStatsReport` (a Promise), or `undefined` before the
    /// peer connection exists. The page reads the selected candidate pair from it
    /// (direct or through TURN, round-trip time, bytes received).
    #[wasm_bindgen(js_name = statsReport)]
    pub fn stats_report(&self) -> Option<js_sys::Promise> {
        self.inner.borrow().pc.as_ref().map(|pc| pc.get_stats())
    }

    /// Closes everything; no more callbacks.
    pub fn close(&self) {
        detach(&mut self.inner.borrow_mut());
    }
}

fn rtc_configuration(ice_servers: &[IceServer], relay_only: bool) -> RtcConfiguration {
    let servers = js_sys::Array::new();
    for s in ice_servers {
        let urls = js_sys::Array::new();
        for u in &s.urls {
            urls.push(&JsValue::from_str(u));
        }
        let server = RtcIceServer::new();
        server.set_urls(&urls);
        if let Some(u) = &s.username {
            server.set_username(u);
        }
        if let Some(c) = &s.credential {
            server.set_credential(c);
        }
        servers.push(&server);
    }
    let config = RtcConfiguration::new();
    config.set_ice_servers(&servers);
    if relay_only {
        config.set_ice_transport_policy(web_sys::RtcIceTransportPolicy::Relay);
    }
    config
}

fn start_peer(inner: &Shared, ice_servers: &[IceServer], relay_only: bool) -> Result<(), JsValue> {
    let pc =
        RtcPeerConnection::new_with_configuration(&rtc_configuration(ice_servers, relay_only))?;
    let init = RtcDataChannelInit::new();
    init.set_ordered(true);
    let dc = pc.create_data_channel_with_data_channel_dict(CHANNEL_LABEL, &init);
    dc.set_binary_type(web_sys::RtcDataChannelType::Arraybuffer);

    let weak = Rc::downgrade(inner);
    let on_candidate = Closure::<dyn FnMut(RtcPeerConnectionIceEvent)>::new(
        move |ev: RtcPeerConnectionIceEvent| {
            let Some(inner) = weak.upgrade() else { return };
            if let Some(c) = ev.candidate() {
                inner.borrow_mut().machine.local_candidate(IceCandidate {
                    candidate: c.candidate(),
                    sdp_mid: c.sdp_mid().filter(|m| !m.is_empty()),
                    sdp_mline_index: c.sdp_m_line_index(),
                });
                pump(&inner);
            }
        },
    );
    pc.set_onicecandidate(Some(on_candidate.as_ref().unchecked_ref()));

    let weak = Rc::downgrade(inner);
    let pc2 = pc.clone();
    let on_state = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
        let Some(inner) = weak.upgrade() else { return };
        if pc2.connection_state() == RtcPeerConnectionState::Failed {
            let opened = inner.borrow().opened;
            if opened {
                channel_closed(&inner);
            } else {
                finish(&inner, "error", words::PEER_FAILED);
            }
        }
    });
    pc.set_onconnectionstatechange(Some(on_state.as_ref().unchecked_ref()));

    let weak = Rc::downgrade(inner);
    let on_open = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
        let Some(inner) = weak.upgrade() else { return };
        {
            let mut i = inner.borrow_mut();
            if i.finished {
                return;
            }
            i.opened = true;
            i.machine.channel_open();
        }
        // Signaling is done: the machine closes the relay socket (frees its slot).
        pump(&inner);
        let h = handlers(&inner);
        h.on_status("connected", words::CONNECTED);
        h.on_open();
    });
    dc.set_onopen(Some(on_open.as_ref().unchecked_ref()));

    let weak = Rc::downgrade(inner);
    let on_frame = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(inner) = weak.upgrade() else { return };
        if inner.borrow().finished {
            return;
        }
        if let Ok(buf) = ev.data().dyn_into::<ArrayBuffer>() {
            handlers(&inner).on_frame(buf);
        }
    });
    dc.set_onmessage(Some(on_frame.as_ref().unchecked_ref()));

    let weak = Rc::downgrade(inner);
    let on_close = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
        if let Some(inner) = weak.upgrade() {
            channel_closed(&inner);
        }
    });
    dc.set_onclose(Some(on_close.as_ref().unchecked_ref()));

    {
        let mut i = inner.borrow_mut();
        i.pc = Some(pc.clone());
        i.dc = Some(dc);
        i.keep.push(Box::new(on_candidate));
        i.keep.push(Box::new(on_state));
        i.keep.push(Box::new(on_open));
        i.keep.push(Box::new(on_frame));
        i.keep.push(Box::new(on_close));
    }

    let inner = inner.clone();
    spawn_local(async move {
        let result: Result<String, JsValue> = async {
            let offer: RtcSessionDescriptionInit =
                JsFuture::from(pc.create_offer()).await?.unchecked_into();
            let sdp = offer.get_sdp().unwrap_or_default();
            JsFuture::from(pc.set_local_description(&offer)).await?;
            Ok(sdp)
        }
        .await;
        match result {
            Ok(sdp) => {
                inner.borrow_mut().machine.offer_made(sdp);
                pump(&inner);
            }
            Err(e) => {
                let m = format!(
                    "This browser could not make a WebRTC offer: {}",
                    js_message(&e)
                );
                finish(&inner, "error", &m);
            }
        }
    });
    Ok(())
}

fn apply_answer(inner: &Shared, sdp: String) {
    let Some(pc) = inner.borrow().pc.clone() else {
        return;
    };
    let inner = inner.clone();
    spawn_local(async move {
        let desc = RtcSessionDescriptionInit::new(RtcSdpType::Answer);
        desc.set_sdp(&sdp);
        if let Err(e) = JsFuture::from(pc.set_remote_description(&desc)).await {
            let m = format!(
                "The sharer's connection details were not accepted: {}",
                js_message(&e)
            );
            return finish(&inner, "error", &m);
        }
        inner.borrow_mut().machine.answer_applied();
        pump(&inner);
    });
}

/// The open channel closed (or the connection failed after it opened): the
/// page decides, with the worker, whether to reconnect.
fn channel_closed(inner: &Shared) {
    {
        let mut i = inner.borrow_mut();
        if i.finished {
            return;
        }
        detach(&mut i);
    }
    handlers(inner).on_close(words::CHANNEL_CLOSED);
}

async fn add_candidate(pc: &RtcPeerConnection, c: IceCandidate) {
    let init = RtcIceCandidateInit::new(&c.candidate);
    match c.sdp_mid.filter(|m| !m.is_empty()) {
        Some(mid) => init.set_sdp_mid(Some(&mid)),
        None => init.set_sdp_m_line_index(Some(c.sdp_mline_index.unwrap_or(0))),
    }
    // A candidate the browser cannot use is not fatal: others may work.
    let _ = JsFuture::from(pc.add_ice_candidate_with_opt_rtc_ice_candidate_init(Some(&init))).await;
}
