//! Waiting, at process exit, for the programs still running on PJRT
//! clients (`mark_step` does not wait for them).
//!
//! Without it a plugin's static destructors tear down state under a
//! running program: measured, a segfault at exit in 4 runs of 5 with a
//! program in flight. Exit handlers run in reverse order of registration
//! and plugins create statics lazily, so the backend registers the handler
//! again after each program's first run (once per compiled program) to
//! stay ahead of them.

use super::ffi::dispatch::{self, Completion};
use parking_lot::Mutex;
use std::sync::{Arc, Weak};

/// The execution in flight on one client, shared with the exit handler.
pub(super) type InFlight = Arc<Mutex<Option<Completion>>>;

/// Every client's in-flight slot; a dropped client's entry is dead.
static CLIENTS: Mutex<Vec<Weak<Mutex<Option<Completion>>>>> = Mutex::new(Vec::new());

/// A new client's in-flight slot, known to the exit handler.
pub(super) fn in_flight_slot() -> InFlight {
    let slot: InFlight = Arc::new(Mutex::new(None));
    let mut clients = CLIENTS.lock();
    clients.retain(|w| w.strong_count() > 0);
    clients.push(Arc::downgrade(&slot));
    slot
}

/// (Re-)registers the handler that waits for every client's execution in
/// flight when the process exits.
pub(super) fn register() {
    #[cfg(unix)]
    {
        extern "C" fn wait_for_clients() {
            // `try_lock`: another thread may be exiting the process while it
            // holds a lock; then there is nothing safe to do.
            let Some(clients) = CLIENTS.try_lock() else {
                return;
            };
            for slot in clients.iter().filter_map(Weak::upgrade) {
                if let Some(event) = slot.try_lock().and_then(|mut s| s.take()) {
                    let _ = event.wait();
                }
            }
            dispatch::exiting();
        }
        // SAFETY: registers a plain function with no preconditions; it only
        // locks statics that outlive every exit handler.
        if unsafe { libc::atexit(wait_for_clients) } != 0 {
            eprintln!(
                "lazyxla: could not register the exit handler that waits for running programs"
            );
        }
    }
}
