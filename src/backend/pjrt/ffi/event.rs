//! Completion events of asynchronous work (an execution in flight).

use std::any::Any;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::Arc;

use super::{new_args, sys, PjrtError, Plugin};

/// A `PJRT_Event` owned by this value: [`Event::wait`] blocks until it fires
/// and reports its status; dropping it without waiting only releases the
/// handle (the work it tracks goes on).
pub struct Event {
    plugin: Arc<Plugin>,
    raw: *mut sys::Event,
    /// The C API function that produced the event, for error messages.
    function: &'static str,
}

// SAFETY: PJRT events may be awaited and destroyed from any thread; this
// value is the sole owner of the pointer.
unsafe impl Send for Event {}
// SAFETY: `&Event` gives no access to the pointer.
unsafe impl Sync for Event {}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("function", &self.function)
            .finish()
    }
}

impl Event {
    /// Takes ownership of `raw` (null means "already complete").
    pub(super) fn adopt(
        plugin: &Arc<Plugin>,
        raw: *mut sys::Event,
        function: &'static str,
    ) -> Event {
        Event {
            plugin: plugin.clone(),
            raw,
            function,
        }
    }

    /// Blocks until the event fires; the error is the failed work's status,
    /// prefixed with the function that started it.
    pub fn wait(mut self) -> Result<(), PjrtError> {
        let raw = std::mem::replace(&mut self.raw, null_mut());
        self.plugin.await_event(raw, self.function)
    }

    /// Whether the event has fired (a null event, "already complete",
    /// has). A plugin without the query answers false.
    pub fn is_ready(&self) -> bool {
        if self.raw.is_null() {
            return true;
        }
        let mut args = new_args::<sys::EventIsReadyArgs>();
        args.event = self.raw;
        if let Ok(is_ready) = api_fn!(self.plugin, PJRT_Event_IsReady) {
            // SAFETY: `raw` is a live event owned by this value.
            let asked = unsafe { self.plugin.call(is_ready, &mut args, self.function) };
            return asked.is_ok() && args.is_ready;
        }
        false
    }

    /// Drops `value` once the event fires: on the plugin thread that fires
    /// it, or before this returns when it already has. This is how host
    /// memory lent to the plugin lives exactly as long as the plugin reads
    /// it. Should the plugin refuse the callback, `value` is leaked:
    /// freeing memory the plugin may still read would be worse.
    pub(super) fn drop_when_ready(mut self, value: Box<dyn Any + Send>) {
        let raw = std::mem::replace(&mut self.raw, null_mut());
        if raw.is_null() {
            return;
        }
        let held = Box::into_raw(Box::new(Held {
            plugin: self.plugin.clone(),
            _value: value,
        }));
        let registered = (|| {
            let on_ready = api_fn!(self.plugin, PJRT_Event_OnReady)?;
            let mut args = new_args::<sys::EventOnReadyArgs>();
            args.event = raw;
            args.callback = Some(release_held);
            args.user_arg = held.cast::<c_void>();
            // SAFETY: `raw` is live (destroyed below, which the header
            // allows once the callback is registered); `held` is ours until
            // the callback takes it back, exactly once.
            unsafe { self.plugin.call(on_ready, &mut args, self.function) }
        })();
        // On an error `held` was never handed over and stays leaked.
        let _ = registered;
        self.plugin.destroy_event(raw);
    }
}

/// What an `OnReady` callback frees: the value, and the plugin to free the
/// event's error with.
struct Held {
    plugin: Arc<Plugin>,
    _value: Box<dyn Any + Send>,
}

/// The `OnReady` callback of [`Event::drop_when_ready`].
unsafe extern "C" fn release_held(error: *mut sys::Error, user_arg: *mut c_void) {
    // SAFETY: `user_arg` is the `Box<Held>` registered once in
    // `drop_when_ready`; the plugin calls this once.
    let held = unsafe { Box::from_raw(user_arg.cast::<Held>()) };
    if !error.is_null() {
        held.plugin.destroy_error(error);
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            self.plugin.destroy_event(self.raw);
        }
    }
}
