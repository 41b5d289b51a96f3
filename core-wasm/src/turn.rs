//! A later turn of the worker's event loop, without the timer clamp.
//!
//! The stepped restore and the index's background work yield between steps
//! so IndexedDB's answers and the page's messages get in. A `setTimeout(0)`
//! chain is clamped to 4 ms once it nests five deep (the HTML timer rules),
//! and a step is 12 ms: a quarter of a long restore went to waiting. A
//! message posted to a `MessageChannel` of our own is a task like any other
//! and is not clamped; its answer resolves the oldest waiting turn. Where a
//! channel cannot be made, a timer is used.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use js_sys::{Function, Promise};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::MessageChannel;

/// The channel and the turns waiting for its messages (one message each).
struct Turns {
    channel: MessageChannel,
    waiting: Rc<RefCell<VecDeque<Function>>>,
    _on_message: Closure<dyn FnMut()>,
}

thread_local! {
    static TURNS: Option<Turns> = make();
}

fn make() -> Option<Turns> {
    let channel = MessageChannel::new().ok()?;
    let waiting: Rc<RefCell<VecDeque<Function>>> = Rc::default();
    let queue = waiting.clone();
    let on_message = Closure::<dyn FnMut()>::new(move || {
        let next = queue.borrow_mut().pop_front();
        if let Some(resolve) = next {
            let _ = resolve.call0(&JsValue::NULL);
        }
    });
    channel
        .port1()
        .set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    Some(Turns {
        channel,
        waiting,
        _on_message: on_message,
    })
}

/// Resolves in a later task, after whatever else the worker has queued.
pub async fn next_turn() {
    let promise = Promise::new(&mut |resolve, _| {
        let posted = TURNS.with(|turns| {
            let t = turns.as_ref()?;
            t.waiting.borrow_mut().push_back(resolve.clone());
            if t.channel.port2().post_message(&JsValue::UNDEFINED).is_ok() {
                return Some(());
            }
            t.waiting.borrow_mut().pop_back();
            None
        });
        if posted.is_none() && !after_ms(&resolve, 0) {
            let _ = resolve.call0(&JsValue::NULL);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// `setTimeout(f, ms)` on the worker (or window); false where neither is.
/// (With 0, the fallback above.)
pub(crate) fn after_ms(f: &Function, ms: i32) -> bool {
    let global = js_sys::global();
    if let Some(w) = global.dyn_ref::<web_sys::WorkerGlobalScope>() {
        return w
            .set_timeout_with_callback_and_timeout_and_arguments_0(f, ms)
            .is_ok();
    }
    global.dyn_ref::<web_sys::Window>().is_some_and(|w| {
        w.set_timeout_with_callback_and_timeout_and_arguments_0(f, ms)
            .is_ok()
    })
}
