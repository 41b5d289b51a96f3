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
//!
//! **Lanes** (`linkfs_core::lanes`, `linkfs_proto::lane`): a link at a
//! distance whose bulk reads move slowly opens more peer connections to the
//! same sharer, each through its own relay WebSocket and handshake, and joins
//! them to its session (`LaneJoin`, first frame). The read chunks that come on
//! them go to the same `onFrame`: the page and the worker never see lanes.
//! Measured why: Chromium's UDP socket drops datagrams when its network thread
//! is busy (293 per 192 MiB at 20 ms), each loss halves the sender's SCTP
//! window, and one association then moves a quarter of the path. A lane that
//! ends ends the link after `LANE_END_GRACE` (the visit reconnects and asks
//! again for what it lacks); closing the link closes its lanes. Lanes are
//! connected `LANES_CONNECTING_AT_ONCE` at a time, and the gate sees every
//! lane's chunks too, so it can ask for more while they add up.
//!
//! Uploads the same way round: once a lane joined, an upload's chunks go up
//! the lane with the fewest bytes queued ([`DataLink::send`]); everything
//! else stays on the session's link. The set counts the upload bytes the
//! sharer acknowledges as chunks, twice (`LaneSet::with_browser_uploads`:
//! the browser's sender is held by its own CPU first), so an upload that
//! losses hold back opens lanes as a slow read does. Measured why: Chromium adding a file
//! across 20 ms with 0.1% loss moved 1.3-1.6 MB/s on one connection.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::ArrayBuffer;
use std::rc::Weak;

use linkfs_core::lanes::{
    FRAME_HEAD_BYTES, FrameIs, LaneDo, LaneNo, LaneSet, MAX_LANES, lane_may_carry_up,
};
use linkfs_core::{GuestAction, GuestFailure, GuestSignaling, IceCandidate, Millis, ShareLink};
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
export type LinkState = 'connecting' | 'connected' | 'sharer-gone' | 'invalid-link' | 'link-ended' | 'error';

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
        GuestFailure::LinkWithdrawn(words) | GuestFailure::LinkExpired(words) => {
            ("link-ended", sentence(words))
        }
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

/// Most lanes a page opens for one link.
const PAGE_LANES: u8 = MAX_LANES;

/// Where a link's events go.
enum Reports {
    /// The session's own link: everything to the page.
    Page {
        handlers: DataLinkHandlers,
        /// Everything about lanes is decided here; this shell connects and
        /// closes what it says.
        lanes: Box<LaneSet>,
        /// To connect lanes: the share, and when the set's clock started.
        link: ShareLink,
        started_ms: f64,
        /// Lanes connected (or connecting) for this link.
        conns: Vec<(LaneNo, Shared)>,
        /// The set's timeout a browser timer is set for.
        timer_for: Option<Millis>,
    },
    /// A lane: only its read chunks, to the page through its session link
    /// (and upload chunks up it, from [`DataLink::send`]).
    Lane {
        session: Weak<RefCell<Inner>>,
        lane: LaneNo,
        join: Vec<u8>,
    },
}

struct Inner {
    machine: GuestSignaling,
    /// Connect only through a TURN relay (`?ice=relay` in the page's address).
    relay_only: bool,
    reports: Reports,
    ws: Option<WebSocket>,
    pc: Option<RtcPeerConnection>,
    dc: Option<RtcDataChannel>,
    opened: bool,
    finished: bool,
    /// Bytes of the frames this connection delivered.
    frame_bytes: u64,
    keep: Vec<Box<dyn std::any::Any>>,
}

type Shared = Rc<RefCell<Inner>>;

/// The data link from this page to the sharer of one link.
#[wasm_bindgen]
pub struct DataLink {
    inner: Shared,
}

/// The page's handlers, for the session's own link (a lane reports nothing).
fn handlers(inner: &Shared) -> Option<DataLinkHandlers> {
    match &inner.borrow().reports {
        Reports::Page { handlers, .. } => {
            let h: JsValue = (**handlers).clone();
            Some(h.unchecked_into())
        }
        Reports::Lane { .. } => None,
    }
}

fn report_status(inner: &Shared, state: &str, message: &str) {
    if let Some(h) = handlers(inner) {
        h.on_status(state, message);
    }
}

/// Unhooks every browser event handler, then closes the socket, channel and
/// connection. The closures stay alive (in `keep`) until the link is dropped,
/// so an event the browser already queued finds a live closure that sees
/// `finished` and does nothing.
fn detach(i: &mut Inner) {
    i.finished = true;
    if let Reports::Page { conns, .. } = &mut i.reports {
        for (_, lane) in conns.drain(..) {
            if let Ok(mut lane) = lane.try_borrow_mut() {
                detach(&mut lane);
            }
        }
    }
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
    report_status(inner, state, message);
    lane_closed(inner);
}

/// The page's monotonic clock (ms): `performance.now()`, in a window or a worker.
pub(crate) fn monotonic_ms() -> f64 {
    js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("performance"))
        .ok()
        .and_then(|p| p.dyn_into::<web_sys::Performance>().ok())
        .map_or_else(js_sys::Date::now, |p| p.now())
}

/// The lane set's time for a session link that started at `started_ms`.
fn set_time(started_ms: f64) -> Millis {
    Millis((monotonic_ms() - started_ms).max(0.0) as u64)
}

/// Runs `f` on the lane set of `session` (a page link) at the set's now.
fn with_lanes<T>(session: &Shared, f: impl FnOnce(&mut LaneSet, Millis) -> T) -> Option<T> {
    let mut i = session.borrow_mut();
    if i.finished {
        return None;
    }
    match &mut i.reports {
        Reports::Page {
            lanes, started_ms, ..
        } => {
            let now = set_time(*started_ms);
            Some(f(lanes, now))
        }
        Reports::Lane { .. } => None,
    }
}

/// If `inner` is a lane, tells its session's set it closed (before or after
/// it opened), and carries out what the set says then.
fn lane_closed(inner: &Shared) {
    let (session, lane) = match &inner.borrow().reports {
        Reports::Lane { session, lane, .. } => (session.upgrade(), *lane),
        Reports::Page { .. } => return,
    };
    if let Some(session) = session {
        if let Reports::Page { conns, .. } = &mut session.borrow_mut().reports {
            conns.retain(|(n, _)| *n != lane);
        }
        with_lanes(&session, |set, now| set.lane_closed(now, lane));
        obey_lanes(&session);
    }
}

pub(crate) fn js_message(e: &JsValue) -> String {
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
                report_status(inner, "connecting", words::CONNECTING_SHARER);
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
        let reports = Reports::Page {
            handlers,
            lanes: Box::new(LaneSet::new(PAGE_LANES).with_browser_uploads()),
            link: link.clone(),
            started_ms: monotonic_ms(),
            conns: Vec::new(),
            timer_for: None,
        };
        let inner = connect(&link, ice_policy == "relay", reports)?;
        Ok(DataLink { inner })
    }

    /// Sends one frame to the sharer. Fails if the channel is not open or the
    /// frame is over the protocol's limit.
    pub fn send(&self, frame: &[u8]) -> Result<(), JsError> {
        if frame.len() > MAX_FRAME_LEN {
            return Err(JsError::new("frame is over the protocol's size limit"));
        }
        // An upload's chunk goes up the lane with the least queued, once one
        // joined (bulk then stays off the session's own link, as reads' do).
        if lane_may_carry_up(frame)
            && let Some(lane) = self.emptiest_lane()
        {
            return lane
                .send_with_u8_array(frame)
                .map_err(|_| JsError::new("a lane's data channel refused the frame"));
        }
        let i = self.inner.borrow();
        match &i.dc {
            Some(dc) if dc.ready_state() == RtcDataChannelState::Open => dc
                .send_with_u8_array(frame)
                .map_err(|_| JsError::new("the data channel refused the frame")),
            _ => Err(JsError::new("the connection to the sharer is not open")),
        }
    }

    /// The channel of the joined lane with the fewest bytes queued, if any.
    fn emptiest_lane(&self) -> Option<RtcDataChannel> {
        let i = self.inner.borrow();
        let Reports::Page { conns, .. } = &i.reports else {
            return None;
        };
        conns
            .iter()
            .filter_map(|(_, lane)| {
                let lane = lane.try_borrow().ok()?;
                let dc = lane.dc.as_ref().filter(|_| lane.opened && !lane.finished)?;
                (dc.ready_state() == RtcDataChannelState::Open).then(|| dc.clone())
            })
            .min_by_key(RtcDataChannel::buffered_amount)
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

    /// Lanes open beside this link now (more connections carrying its reads).
    #[wasm_bindgen(js_name = lanesOpen)]
    pub fn lanes_open(&self) -> u32 {
        match &self.inner.borrow().reports {
            Reports::Page { lanes, .. } => lanes.open() as u32,
            Reports::Lane { .. } => 0,
        }
    }

    /// Bytes of every frame delivered so far, over this link and its lanes.
    #[wasm_bindgen(js_name = frameBytes)]
    pub fn frame_bytes(&self) -> f64 {
        let i = self.inner.borrow();
        let lanes = match &i.reports {
            Reports::Page { conns, .. } => conns
                .iter()
                .filter_map(|(_, l)| l.try_borrow().ok().map(|l| l.frame_bytes))
                .sum(),
            Reports::Lane { .. } => 0,
        };
        (i.frame_bytes + lanes) as f64
    }

    /// Closes everything; no more callbacks.
    pub fn close(&self) {
        detach(&mut self.inner.borrow_mut());
    }
}

/// Starts a link to the sharer of `link` through the relay, reporting to `reports`.
fn connect(link: &ShareLink, relay_only: bool, reports: Reports) -> Result<Shared, JsError> {
    let mut seed = [0u8; 16];
    getrandom::getrandom(&mut seed).map_err(|_| {
        JsError::new("this browser has no secure random numbers (crypto.getRandomValues)")
    })?;
    let ws = WebSocket::new(&link.signal_url(Role::Guest))
        .map_err(|_| JsError::new("could not open a WebSocket to the relay"))?;
    let inner = Rc::new(RefCell::new(Inner {
        machine: GuestSignaling::new(link, seed),
        relay_only,
        reports,
        ws: Some(ws.clone()),
        pc: None,
        dc: None,
        opened: false,
        finished: false,
        frame_bytes: 0,
        keep: Vec::new(),
    }));
    report_status(&inner, "connecting", words::CONNECTING_RELAY);

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
    Ok(inner)
}

pub(crate) fn rtc_configuration(ice_servers: &[IceServer], relay_only: bool) -> RtcConfiguration {
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
        match handlers(&inner) {
            Some(h) => {
                h.on_status("connected", words::CONNECTED);
                h.on_open();
            }
            None => join_lane(&inner),
        }
    });
    dc.set_onopen(Some(on_open.as_ref().unchecked_ref()));

    let weak = Rc::downgrade(inner);
    let on_frame = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(inner) = weak.upgrade() else { return };
        if inner.borrow().finished {
            return;
        }
        if let Ok(buf) = ev.data().dyn_into::<ArrayBuffer>() {
            deliver(&inner, buf);
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
    let is_lane = {
        let mut i = inner.borrow_mut();
        if i.finished {
            return;
        }
        detach(&mut i);
        matches!(i.reports, Reports::Lane { .. })
    };
    if is_lane {
        lane_closed(inner);
    } else if let Some(h) = handlers(inner) {
        h.on_close(words::CHANNEL_CLOSED);
    }
}

/// One frame from the sharer: to the page, if the lane set says it is the
/// session's.
fn deliver(inner: &Shared, buf: ArrayBuffer) {
    let len = buf.byte_length() as usize;
    let head_len = len.min(FRAME_HEAD_BYTES);
    let mut head = [0u8; FRAME_HEAD_BYTES];
    js_sys::Uint8Array::new_with_byte_offset_and_length(&buf, 0, head_len as u32)
        .copy_to(&mut head[..head_len]);
    let head = &head[..head_len];
    let (session, lane) = {
        let mut i = inner.borrow_mut();
        i.frame_bytes += len as u64;
        match &i.reports {
            Reports::Page { .. } => (inner.clone(), None),
            Reports::Lane { session, lane, .. } => match session.upgrade() {
                Some(session) => (session, Some(*lane)),
                None => return,
            },
        }
    };
    let is = with_lanes(&session, |set, now| match lane {
        None => set.on_session_frame(now, head, len),
        Some(lane) => set.on_lane_frame(now, lane, head, len),
    });
    obey_lanes(&session);
    // (The set may have ended the link just now: then nothing more goes up.)
    if is == Some(FrameIs::Deliver)
        && !session.borrow().finished
        && let Some(h) = handlers(&session)
    {
        h.on_frame(buf);
    }
}

/// Carries out what the lane set of `session` says, until it says nothing,
/// and keeps a browser timer set for its next timeout.
fn obey_lanes(session: &Shared) {
    while let Some(todo) = with_lanes(session, |set, _| set.poll_output()).flatten() {
        match todo {
            LaneDo::MeasureRoundTrip => measure_round_trip(session),
            LaneDo::Connect { lane, join } => connect_lane(session, lane, join),
            LaneDo::EndLink => return channel_closed(session),
        }
    }
    arm_lane_timer(session);
}

fn measure_round_trip(session: &Shared) {
    let pc = session.borrow().pc.clone();
    let weak = Rc::downgrade(session);
    spawn_local(async move {
        let rtt = match pc {
            Some(pc) => round_trip(&pc).await,
            None => None,
        };
        let Some(session) = weak.upgrade() else {
            return;
        };
        let rtt = rtt.filter(|r| r.is_finite() && *r >= 0.0);
        with_lanes(&session, |set, now| {
            set.round_trip(now, rtt.map(std::time::Duration::from_secs_f64))
        });
        obey_lanes(&session);
    });
}

/// Starts lane `lane` beside `session`; it joins with `join` once open.
fn connect_lane(session: &Shared, lane: LaneNo, join: Vec<u8>) {
    let (link, relay_only) = {
        let i = session.borrow();
        match &i.reports {
            Reports::Page { link, .. } => (link.clone(), i.relay_only),
            Reports::Lane { .. } => return,
        }
    };
    let reports = Reports::Lane {
        session: Rc::downgrade(session),
        lane,
        join,
    };
    match connect(&link, relay_only, reports) {
        Ok(conn) => {
            if let Reports::Page { conns, .. } = &mut session.borrow_mut().reports {
                conns.push((lane, conn));
            }
        }
        // No WebSocket: this lane is gone; the set may start the next.
        Err(_) => {
            with_lanes(session, |set, now| set.lane_closed(now, lane));
        }
    }
}

/// Keeps one browser timer set for the lane set's next timeout.
fn arm_lane_timer(session: &Shared) {
    let due = {
        let mut i = session.borrow_mut();
        if i.finished {
            return;
        }
        let Reports::Page {
            lanes,
            started_ms,
            timer_for,
            ..
        } = &mut i.reports
        else {
            return;
        };
        let due = lanes.poll_timeout();
        if due.is_none() || due == *timer_for {
            return;
        }
        *timer_for = due;
        due.map(|d| d.0.saturating_sub(set_time(*started_ms).0))
    };
    let Some(wait) = due else { return };
    let weak = Rc::downgrade(session);
    let fire = Closure::once_into_js(move || {
        let Some(session) = weak.upgrade() else {
            return;
        };
        with_lanes(&session, |set, now| set.handle_timeout(now));
        if let Reports::Page { timer_for, .. } = &mut session.borrow_mut().reports {
            *timer_for = None;
        }
        obey_lanes(&session);
    });
    let global: web_sys::Window = js_sys::global().unchecked_into();
    let _ = global.set_timeout_with_callback_and_timeout_and_arguments_0(
        fire.unchecked_ref(),
        i32::try_from(wait).unwrap_or(i32::MAX),
    );
}

/// A lane's channel opened: its first frame names the session it joins,
/// then the session's set counts it open.
fn join_lane(lane: &Shared) {
    let (session, no) = {
        let i = lane.borrow();
        let Reports::Lane {
            session,
            lane,
            join,
        } = &i.reports
        else {
            return;
        };
        // A lane that cannot say so carries nothing: the sharer closes it.
        if let Some(dc) = &i.dc {
            let _ = dc.send_with_u8_array(join);
        }
        (session.upgrade(), *lane)
    };
    if let Some(session) = session {
        with_lanes(&session, |set, now| set.lane_opened(now, no));
        obey_lanes(&session);
    }
}

/// The round trip of the connection's selected candidate pair (seconds), as
/// the browser measured it: the transport's selected pair, else the nominated
/// one that succeeded; its `currentRoundTripTime`, else the mean of its
/// consent checks' round trips (`None` if neither is known yet).
async fn round_trip(pc: &RtcPeerConnection) -> Option<f64> {
    let report = JsFuture::from(pc.get_stats()).await.ok()?;
    let report: js_sys::Map = report.unchecked_into();
    let field = |value: &JsValue, k: &str| js_sys::Reflect::get(value, &JsValue::from_str(k)).ok();
    let mut selected: Option<String> = None;
    report.for_each(&mut |value: JsValue, _key: JsValue| {
        if field(&value, "type").and_then(|t| t.as_string()).as_deref() == Some("transport") {
            selected = selected
                .take()
                .or_else(|| field(&value, "selectedCandidatePairId").and_then(|s| s.as_string()));
        }
    });
    let mut best: Option<f64> = None;
    report.for_each(&mut |value: JsValue, _key: JsValue| {
        let get = |k: &str| field(&value, k);
        if get("type").and_then(|t| t.as_string()).as_deref() != Some("candidate-pair") {
            return;
        }
        let chosen = match &selected {
            Some(id) => get("id").and_then(|i| i.as_string()).as_deref() == Some(id.as_str()),
            None => {
                get("nominated").and_then(|n| n.as_bool()) == Some(true)
                    && get("state").and_then(|s| s.as_string()).as_deref() == Some("succeeded")
            }
        };
        if !chosen {
            return;
        }
        let current = get("currentRoundTripTime").and_then(|r| r.as_f64());
        let mean = || {
            let total = get("totalRoundTripTime").and_then(|r| r.as_f64())?;
            let n = get("responsesReceived").and_then(|r| r.as_f64())?;
            (n > 0.0).then(|| total / n)
        };
        if let Some(rtt) = current.or_else(mean) {
            best = Some(best.map_or(rtt, |b: f64| b.min(rtt)));
        }
    });
    best
}

pub(crate) async fn add_candidate(pc: &RtcPeerConnection, c: IceCandidate) {
    let init = RtcIceCandidateInit::new(&c.candidate);
    match c.sdp_mid.filter(|m| !m.is_empty()) {
        Some(mid) => init.set_sdp_mid(Some(&mid)),
        None => init.set_sdp_m_line_index(Some(c.sdp_mline_index.unwrap_or(0))),
    }
    // A candidate the browser cannot use is not fatal: others may work.
    let _ = JsFuture::from(pc.add_ice_candidate_with_opt_rtc_ice_candidate_init(Some(&init))).await;
}
