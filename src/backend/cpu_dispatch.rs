//! How a one-device PJRT CPU client runs programs: on the thread that
//! starts them (inline), on the plugin's worker threads (asynchronous
//! dispatch, the client option `asynchronous`), or, by default, inline
//! when short and on lazyxla's dispatch thread when long.
//!
//! Inline dispatch saves the hand-over: waking a worker and, for the read
//! that follows, being woken back, all on the cores the program runs on.
//! A small step read before the next one is recorded gains from it; a
//! long one should neither hold up the recording of the next step nor
//! take its temporaries from the main thread's `malloc` arena (measured in
//! `benches/README.md`, "Current figures"). So by default the client runs
//! programs inline and the backend hands those whose last run took 1 ms
//! or more to a thread of its own (`pjrt::ffi::dispatch`), which gives
//! both. The user may fix either plain form instead
//! ([`set_cpu_async_dispatch`](crate::set_cpu_async_dispatch) or
//! `LAZYXLA_CPU_ASYNC_DISPATCH=1|0`). With several devices dispatch is
//! asynchronous: a program's replicas must run at the same time. The
//! client's form is fixed when it is made.
//!
//! A program handed over runs inline on the dispatch thread (its own
//! `malloc` arena) while the caller goes on. Its results are `PjrtPending`
//! buffers that wait for the run on first use (an argument of the next
//! program, a read). Its arguments are lent as raw handles, so while any
//! handed-over run is queued or running, a PJRT buffer dropped on another
//! thread is destroyed by the dispatch thread after them, in queue order.
//! The exit handler waits for the run in flight as for a plugin's event.
//! `xla-cpu-pjrt` (C API 0.81) accepts the client option and ignores it:
//! its runs never complete inside the call, so none is timed or handed
//! over. The counters `ExecuteInline` (the completion event had fired when
//! the execute call returned) and `ExecuteDispatched` say which way each
//! run went. The thread's own arena is no cure-all: glibc shrinks it too,
//! which costs a long step some of what the plugin's workers save; a
//! program of long steps can ask for the plugin's dispatch.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// How programs run; see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// On the plugin's worker threads.
    Asynchronous,
    /// Inside the execute call, whatever their length.
    Inline,
    /// Inline when short, on lazyxla's dispatch thread when long.
    Auto,
}

/// What was asked for, and what the client does once it exists.
struct Dispatch {
    asked: Option<bool>,
    fixed: Option<Fixed>,
}

/// The client's dispatch, and why when it is asynchronous without being
/// asked to.
#[derive(Clone, Copy)]
struct Fixed {
    asynchronous: bool,
    devices: usize,
}

static DISPATCH: Mutex<Dispatch> = Mutex::new(Dispatch {
    asked: None,
    fixed: None,
});

/// Whether long programs go to the dispatch thread: set when an inline
/// client is made in [`Mode::Auto`], cleared when the user then asks for
/// plain inline dispatch.
static LONG_ON_THREAD: AtomicBool = AtomicBool::new(false);

/// Asks for asynchronous dispatch or plain inline dispatch; see
/// [`crate::set_cpu_async_dispatch`].
pub(crate) fn ask(asynchronous: bool) -> Result<()> {
    let mut d = DISPATCH.lock();
    match d.fixed {
        Some(f) if f.asynchronous != asynchronous => {
            let how = |a: bool| if a { "asynchronous" } else { "inline" };
            let why = if f.devices > 1 {
                format!(
                    " (the process has {} CPU devices, whose replicas must run at the same time)",
                    f.devices
                )
            } else {
                String::new()
            };
            Err(Error::invalid(
                "set_cpu_async_dispatch",
                format!(
                    "{} dispatch was asked for, but the CPU client already dispatches {}{why}; \
                     the choice is fixed when the first device is made: call \
                     set_cpu_async_dispatch({asynchronous}) before any tensor or device is made, \
                     or start the process with LAZYXLA_CPU_ASYNC_DISPATCH={}",
                    how(asynchronous),
                    if f.asynchronous {
                        "asynchronously"
                    } else {
                        "inline (long programs on lazyxla's dispatch thread, unless plain inline \
                         dispatch was asked for)"
                    },
                    u8::from(asynchronous)
                ),
            ))
        }
        _ => {
            d.asked = Some(asynchronous);
            if !asynchronous {
                LONG_ON_THREAD.store(false, Ordering::Relaxed);
            }
            Ok(())
        }
    }
}

/// How a CPU client of `devices` devices should run programs: see the
/// module docs.
pub(crate) fn wanted(devices: usize) -> Result<Mode> {
    let asked = DISPATCH.lock().asked;
    let asked = match asked {
        Some(a) => Some(a),
        None => env()?,
    };
    Ok(match (devices, asked) {
        (2.., _) | (_, Some(true)) => Mode::Asynchronous,
        (_, Some(false)) => Mode::Inline,
        (_, None) => Mode::Auto,
    })
}

/// Records how the CPU client dispatches (asynchronously when the plugin
/// refused the option), and whether long programs go to the dispatch
/// thread.
pub(crate) fn fix(asynchronous: bool, devices: usize, long_on_thread: bool) {
    let mut d = DISPATCH.lock();
    d.fixed = Some(Fixed {
        asynchronous,
        devices,
    });
    LONG_ON_THREAD.store(
        long_on_thread && !asynchronous && d.asked != Some(false),
        Ordering::Relaxed,
    );
}

/// Whether long programs go to the dispatch thread (see [`Mode::Auto`]).
pub(crate) fn long_on_thread() -> bool {
    LONG_ON_THREAD.load(Ordering::Relaxed)
}

/// `LAZYXLA_CPU_ASYNC_DISPATCH`; `None` when unset (or `auto`).
fn env() -> Result<Option<bool>> {
    match std::env::var_os("LAZYXLA_CPU_ASYNC_DISPATCH").filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => parse(&v.to_string_lossy()),
    }
}

/// A switch as `LAZYXLA_CPU_ASYNC_DISPATCH` gives it: `None` for `auto`.
fn parse(v: &str) -> Result<Option<bool>> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        "auto" => Ok(None),
        _ => Err(Error::Plugin(format!(
            "LAZYXLA_CPU_ASYNC_DISPATCH={v} is not a switch; use 1 (asynchronous), 0 (inline) \
             or auto (inline, long programs on lazyxla's dispatch thread: the default)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dispatch_switch_reads_as_a_boolean_or_auto() {
        assert_eq!(super::parse(" 1 ").unwrap(), Some(true));
        assert_eq!(super::parse("True").unwrap(), Some(true));
        assert_eq!(super::parse("off").unwrap(), Some(false));
        assert_eq!(super::parse("Auto").unwrap(), None);
        let e = super::parse("async").unwrap_err().to_string();
        assert!(e.contains("LAZYXLA_CPU_ASYNC_DISPATCH=async"), "{e}");
    }
}
