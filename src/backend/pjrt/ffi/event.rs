//! Completion events of asynchronous work (an execution in flight).

use std::ptr::null_mut;
use std::sync::Arc;

use super::{sys, PjrtError, Plugin};

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
}

impl Drop for Event {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            self.plugin.destroy_event(self.raw);
        }
    }
}
