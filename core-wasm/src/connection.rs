//! The page's side of a share: signaling through the relay and the browser's
//! own RTCPeerConnection and RTCDataChannel.
//!
//! ```text
//! WebSocket /signal/{room}?role=guest
//!   <- welcome {ice_servers}      -> create the peer connection and the data channel,
//!                                    make the offer, send it sealed to the host
//!   <- msg {answer}  (sealed)     -> setRemoteDescription, then queued candidates
//!   <- msg {candidate} (sealed)   -> addIceCandidate (queued until the answer is set)
//!   -> msg {candidate} (sealed)   <- every local candidate
//! data channel open               -> the WebSocket is closed; frames flow
//! ```
//!
//! A message from the host that does not open with the link's secret means the
//! link's secret is wrong: the page says "This link is not valid" and stops.
//! Chromium cannot hand a data channel to a worker, so frames are passed to
//! JavaScript (`onFrame`), which forwards them to the worker.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{ArrayBuffer, Reflect};
use linkfs_core::{Direction, ShareLink, SignalKey};
use linkfs_proto::signal::{ClientToRelay, PeerId, RelayErrorCode, RelayToClient, SignalPayload};
use linkfs_proto::{CHANNEL_LABEL, MAX_FRAME_LEN};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, spawn_local};
use web_sys::{
    CloseEvent, MessageEvent, RtcDataChannel, RtcDataChannelInit, RtcDataChannelState,
    RtcIceCandidateInit, RtcPeerConnection, RtcPeerConnectionIceEvent, RtcPeerConnectionState,
    RtcSdpType, RtcSessionDescriptionInit, WebSocket,
};

#[wasm_bindgen(typescript_custom_section)]
const HANDLERS_TS: &str = r#"
/** Callbacks a Connection reports to. */
export interface ConnectionHandlers {
  /** state: 'connecting' | 'connected' | 'sharer-gone' | 'invalid-link' | 'error' */
  onStatus(state: string, message: string): void;
  /** The data channel opened: frames may be sent. */
  onOpen(): void;
  /** One frame from the sharer. */
  onFrame(frame: ArrayBuffer): void;
  /** The data channel closed (after it had opened). */
  onClose(message: string): void;
}
"#;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(typescript_type = "ConnectionHandlers")]
    pub type ConnectionHandlers;

    #[wasm_bindgen(method, js_name = onStatus)]
    fn on_status(this: &ConnectionHandlers, state: &str, message: &str);
    #[wasm_bindgen(method, js_name = onOpen)]
    fn on_open(this: &ConnectionHandlers);
    #[wasm_bindgen(method, js_name = onFrame)]
    fn on_frame(this: &ConnectionHandlers, frame: ArrayBuffer);
    #[wasm_bindgen(method, js_name = onClose)]
    fn on_close(this: &ConnectionHandlers, message: &str);
}

/// Words for the user, kept in one place.
mod words {
    pub const CONNECTING_RELAY: &str = "Connecting to the relay…";
    pub const CONNECTING_SHARER: &str = "Connecting to the sharer…";
    pub const CONNECTED: &str = "Connected to the sharer";
    pub const INVALID: &str = "This link is not valid: its secret does not match the share. Check that you copied the whole link, including everything after '#'.";
    pub const RELAY_LOST: &str = "Lost the connection to the relay before the sharer could be reached. Check your network and reload the page.";
    pub const SHARER_LEFT: &str = "The sharer went away before the connection was made. Ask them to share again and reload the page.";
    pub const CHANNEL_CLOSED: &str = "The sharer went away. You can still browse what was received; reopen the link when they share again.";
    pub const PEER_FAILED: &str = "Could not reach the sharer directly. If you are on different networks, the relay needs a TURN server.";
}

struct Inner {
    link: ShareLink,
    key: SignalKey,
    handlers: ConnectionHandlers,
    ws: Option<WebSocket>,
    pc: Option<RtcPeerConnection>,
    dc: Option<RtcDataChannel>,
    remote_set: bool,
    queued: Vec<SignalPayload>,
    opened: bool,
    finished: bool,
    keep: Vec<Box<dyn std::any::Any>>,
}

type Shared = Rc<RefCell<Inner>>;

/// A connection from this page to the sharer of one link.
#[wasm_bindgen]
pub struct Connection {
    inner: Shared,
}

fn random_nonce() -> [u8; 24] {
    let mut n = [0u8; 24];
    // The browser's crypto.getRandomValues; it does not fail for 24 bytes.
    getrandom::getrandom(&mut n).expect("crypto.getRandomValues is available");
    n
}

fn status(inner: &Shared, state: &str, message: &str) {
    let h: JsValue = inner.borrow().handlers.clone();
    h.unchecked_into::<ConnectionHandlers>()
        .on_status(state, message);
}

/// Unhooks every browser event handler, then closes the socket, channel and
/// connection. The closures stay alive (in `keep`) until the connection is
/// dropped, so an event the browser already queued finds a live closure that
/// sees `finished` and does nothing.
fn detach(i: &mut Inner) {
    i.finished = true;
    if let Some(ws) = i.ws.take() {
        ws.set_onmessage(None);
        ws.set_onclose(None);
        let _ = ws.close();
    }
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

/// Ends the attempt with a final status (nothing more will be reported).
fn finish(inner: &Shared, state: &str, message: &str) {
    {
        let mut i = inner.borrow_mut();
        if i.finished {
            return;
        }
        detach(&mut i);
    }
    status(inner, state, message);
}

fn send_sealed(inner: &Shared, payload: &SignalPayload) {
    let i = inner.borrow();
    let Some(ws) = &i.ws else { return };
    let data = i.key.seal_payload(
        &i.link.room,
        Direction::GuestToHost,
        random_nonce(),
        payload,
    );
    let msg = ClientToRelay::Msg {
        to: PeerId::HOST,
        data,
    };
    if let Ok(text) = serde_json::to_string(&msg) {
        let _ = ws.send_with_str(&text);
    }
}

#[wasm_bindgen]
impl Connection {
    /// Starts connecting to the sharer of `link` (the whole link, or the
    /// page's origin followed by its fragment).
    #[wasm_bindgen(constructor)]
    pub fn new(link: &str, handlers: ConnectionHandlers) -> Result<Connection, JsError> {
        crate::install_panic_hook();
        let link = ShareLink::parse(link).map_err(|e| JsError::new(&e.to_string()))?;
        let key = SignalKey::from_secret(&link.secret);
        let ws = WebSocket::new(&link.signal_url(linkfs_proto::signal::Role::Guest))
            .map_err(|_| JsError::new("could not open a WebSocket to the relay"))?;
        let inner = Rc::new(RefCell::new(Inner {
            link,
            key,
            handlers,
            ws: Some(ws.clone()),
            pc: None,
            dc: None,
            remote_set: false,
            queued: Vec::new(),
            opened: false,
            finished: false,
            keep: Vec::new(),
        }));
        status(&inner, "connecting", words::CONNECTING_RELAY);

        let weak = Rc::downgrade(&inner);
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let Some(inner) = weak.upgrade() else { return };
            let Some(text) = ev.data().as_string() else {
                return;
            };
            match serde_json::from_str::<RelayToClient>(&text) {
                Ok(msg) => on_relay_message(&inner, msg),
                Err(_) => finish(
                    &inner,
                    "error",
                    "The relay sent something this page does not understand. Reload the page; if it persists, the relay may be a different version.",
                ),
            }
        });
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        let weak = Rc::downgrade(&inner);
        let on_close = Closure::<dyn FnMut(CloseEvent)>::new(move |_ev: CloseEvent| {
            let Some(inner) = weak.upgrade() else { return };
            let opened = inner.borrow().opened;
            if !opened {
                finish(&inner, "error", words::RELAY_LOST);
            }
        });
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        {
            let mut i = inner.borrow_mut();
            i.keep.push(Box::new(on_message));
            i.keep.push(Box::new(on_close));
        }
        Ok(Connection { inner })
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

    /// Closes everything; no more callbacks.
    pub fn close(&self) {
        detach(&mut self.inner.borrow_mut());
    }
}

fn on_relay_message(inner: &Shared, msg: RelayToClient) {
    if inner.borrow().finished {
        return;
    }
    match msg {
        RelayToClient::Welcome { ice_servers, .. } => {
            status(inner, "connecting", words::CONNECTING_SHARER);
            if let Err(e) = start_peer(inner, &ice_servers) {
                let m = format!(
                    "This browser could not start a WebRTC connection: {}",
                    js_message(&e)
                );
                finish(inner, "error", &m);
            }
        }
        RelayToClient::Msg { from, data } if from == PeerId::HOST => {
            let opened = {
                let i = inner.borrow();
                i.key
                    .open_payload(&i.link.room, Direction::HostToGuest, &data)
            };
            match opened {
                Ok(payload) => on_signal(inner, payload),
                Err(_) => finish(inner, "invalid-link", words::INVALID),
            }
        }
        RelayToClient::Left { peer } if peer == PeerId::HOST && !inner.borrow().opened => {
            finish(inner, "sharer-gone", words::SHARER_LEFT);
        }
        RelayToClient::Error { code, message } => {
            let state = match code {
                RelayErrorCode::NoSuchRoom => "sharer-gone",
                _ => "error",
            };
            if !inner.borrow().opened {
                finish(inner, state, &message);
            }
        }
        _ => {}
    }
}

fn js_message(e: &JsValue) -> String {
    Reflect::get(e, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "unknown error".into())
}

fn start_peer(
    inner: &Shared,
    ice_servers: &[linkfs_proto::signal::IceServer],
) -> Result<(), JsValue> {
    let config = js_sys::Object::new();
    let servers = serde_wasm_bindgen::to_value(ice_servers)?;
    Reflect::set(&config, &"iceServers".into(), &servers)?;
    let pc = RtcPeerConnection::new_with_configuration(config.unchecked_ref())?;
    let init = RtcDataChannelInit::new();
    init.set_ordered(true);
    let dc = pc.create_data_channel_with_data_channel_dict(CHANNEL_LABEL, &init);
    dc.set_binary_type(web_sys::RtcDataChannelType::Arraybuffer);

    let weak = Rc::downgrade(inner);
    let on_candidate = Closure::<dyn FnMut(RtcPeerConnectionIceEvent)>::new(
        move |ev: RtcPeerConnectionIceEvent| {
            let Some(inner) = weak.upgrade() else { return };
            if let Some(c) = ev.candidate() {
                let candidate = c.candidate();
                if candidate.is_empty() {
                    return;
                }
                send_sealed(
                    &inner,
                    &SignalPayload::Candidate {
                        candidate,
                        sdp_mid: c.sdp_mid().filter(|m| !m.is_empty()),
                        sdp_mline_index: c.sdp_m_line_index(),
                    },
                );
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
        let handlers: JsValue = {
            let mut i = inner.borrow_mut();
            if i.finished {
                return;
            }
            i.opened = true;
            // Signaling is done: free the relay's slot.
            if let Some(ws) = i.ws.take() {
                ws.set_onclose(None);
                let _ = ws.close();
            }
            i.handlers.clone()
        };
        status(&inner, "connected", words::CONNECTED);
        handlers.unchecked_into::<ConnectionHandlers>().on_open();
    });
    dc.set_onopen(Some(on_open.as_ref().unchecked_ref()));

    let weak = Rc::downgrade(inner);
    let on_frame = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(inner) = weak.upgrade() else { return };
        if inner.borrow().finished {
            return;
        }
        if let Ok(buf) = ev.data().dyn_into::<ArrayBuffer>() {
            let handlers: JsValue = inner.borrow().handlers.clone();
            handlers
                .unchecked_into::<ConnectionHandlers>()
                .on_frame(buf);
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
        let result: Result<(), JsValue> = async {
            let offer = JsFuture::from(pc.create_offer()).await?;
            let sdp = Reflect::get(&offer, &"sdp".into())?
                .as_string()
                .unwrap_or_default();
            let desc = RtcSessionDescriptionInit::new(RtcSdpType::Offer);
            desc.set_sdp(&sdp);
            JsFuture::from(pc.set_local_description(&desc)).await?;
            send_sealed(&inner, &SignalPayload::Offer { sdp });
            Ok(())
        }
        .await;
        if let Err(e) = result {
            let m = format!(
                "This browser could not make a WebRTC offer: {}",
                js_message(&e)
            );
            finish(&inner, "error", &m);
        }
    });
    Ok(())
}

fn channel_closed(inner: &Shared) {
    let handlers: JsValue = {
        let mut i = inner.borrow_mut();
        if i.finished {
            return;
        }
        detach(&mut i);
        i.handlers.clone()
    };
    let h = handlers.unchecked_into::<ConnectionHandlers>();
    h.on_status("sharer-gone", words::CHANNEL_CLOSED);
    h.on_close(words::CHANNEL_CLOSED);
}

fn on_signal(inner: &Shared, payload: SignalPayload) {
    match payload {
        SignalPayload::Answer { sdp } => {
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
                let queued = {
                    let mut i = inner.borrow_mut();
                    i.remote_set = true;
                    std::mem::take(&mut i.queued)
                };
                for c in queued {
                    add_candidate(&pc, c).await;
                }
            });
        }
        c @ SignalPayload::Candidate { .. } => {
            let (pc, ready) = {
                let i = inner.borrow();
                (i.pc.clone(), i.remote_set)
            };
            let Some(pc) = pc else { return };
            if ready {
                spawn_local(async move { add_candidate(&pc, c).await });
            } else {
                inner.borrow_mut().queued.push(c);
            }
        }
        SignalPayload::Reject { reason } => finish(inner, "error", &reason),
        _ => {}
    }
}

async fn add_candidate(pc: &RtcPeerConnection, c: SignalPayload) {
    let SignalPayload::Candidate {
        candidate,
        sdp_mid,
        sdp_mline_index,
    } = c
    else {
        return;
    };
    let init = RtcIceCandidateInit::new(&candidate);
    match sdp_mid.filter(|m| !m.is_empty()) {
        Some(mid) => init.set_sdp_mid(Some(&mid)),
        None => init.set_sdp_m_line_index(Some(sdp_mline_index.unwrap_or(0))),
    }
    // A candidate the browser cannot use is not fatal: others may work.
    let _ = JsFuture::from(pc.add_ice_candidate_with_opt_rtc_ice_candidate_init(Some(&init))).await;
}
