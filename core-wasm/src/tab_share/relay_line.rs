//! The sharing tab's line to its relay: one WebSocket as the room's host,
//! opened with a fresh proof that this tab holds the room's key. IO only:
//! what is sent, when to connect again and what the relay says are the
//! share machine's (its `Relay`, `ConnectRelay`, `CloseRelay` outputs).
//!
//! Text the share sends before the socket is open waits in a bounded outbox.

use std::any::Any;
use std::rc::Rc;

use linkfs_proto::sharer_key::{SharerKey, host_query};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{CloseEvent, MessageEvent, WebSocket};

/// Texts held while the socket opens (the share sends a handful: its
/// registration, answers and candidates of guests that came just before).
const OUTBOX: usize = 256;

/// What the relay line tells the share.
#[derive(Debug)]
pub enum RelayNews {
    Opened,
    Text(String),
    /// The socket closed (or never opened): [`RelayLine::closed`] says which.
    Closed,
}

pub type RelayReport = Rc<dyn Fn(RelayNews)>;

/// See the module docs.
pub struct RelayLine {
    /// The signaling URL without the proof (a fresh one per connection).
    url: String,
    sharer: SharerKey,
    ws: Option<WebSocket>,
    open: bool,
    outbox: Vec<String>,
    keep: Vec<Box<dyn Any>>,
}

impl std::fmt::Debug for RelayLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayLine")
            .field("open", &self.open)
            .finish()
    }
}

impl RelayLine {
    pub fn new(url: String, sharer: SharerKey) -> RelayLine {
        RelayLine {
            url,
            sharer,
            ws: None,
            open: false,
            outbox: Vec::new(),
            keep: Vec::new(),
        }
    }

    /// Opens a connection (the last one, if any, is dropped).
    pub fn connect(&mut self, report: &RelayReport) -> Result<(), String> {
        self.close();
        let url = format!("{}{}", self.url, proof(&self.sharer)?);
        let ws = WebSocket::new(&url).map_err(|e| crate::data_link::js_message(&e))?;
        let r = report.clone();
        let on_open = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| r(RelayNews::Opened));
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        let r = report.clone();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            if let Some(text) = ev.data().as_string() {
                r(RelayNews::Text(text));
            }
        });
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        let r = report.clone();
        let on_close =
            Closure::<dyn FnMut(CloseEvent)>::new(move |_ev: CloseEvent| r(RelayNews::Closed));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        self.keep = vec![Box::new(on_open), Box::new(on_message), Box::new(on_close)];
        self.ws = Some(ws);
        Ok(())
    }

    /// The socket opened: what waited goes out.
    pub fn opened(&mut self) {
        self.open = true;
        if let Some(ws) = &self.ws {
            for text in self.outbox.drain(..) {
                let _ = ws.send_with_str(&text);
            }
        }
    }

    /// The socket closed: whether it had opened.
    pub fn closed(&mut self) -> bool {
        let was_open = self.open;
        self.open = false;
        self.ws = None;
        self.outbox.clear();
        was_open
    }

    pub fn send(&mut self, text: String) {
        match &self.ws {
            Some(ws) if self.open => {
                let _ = ws.send_with_str(&text);
            }
            Some(_) if self.outbox.len() < OUTBOX => self.outbox.push(text),
            _ => {}
        }
    }

    pub fn close(&mut self) {
        if let Some(ws) = self.ws.take() {
            ws.set_onopen(None);
            ws.set_onmessage(None);
            ws.set_onclose(None);
            let _ = ws.close();
        }
        self.open = false;
        self.outbox.clear();
    }
}

/// The query that proves this tab holds the room's key (the relay takes each
/// proof once, within a few minutes of its time).
fn proof(sharer: &SharerKey) -> Result<String, String> {
    let mut nonce = [0u8; 12];
    getrandom::getrandom(&mut nonce)
        .map_err(|_| "this browser has no secure random numbers".to_owned())?;
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let now = (js_sys::Date::now() / 1000.0) as u64;
    Ok(host_query(sharer, now, &nonce))
}
