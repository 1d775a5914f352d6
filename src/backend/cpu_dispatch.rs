//! Whether the PJRT CPU client runs a program on the thread that starts it
//! (inline) or hands it to its worker threads (asynchronous dispatch, the
//! client option `asynchronous`).
//!
//! Asynchronous unless asked otherwise, as in JAX
//! (`jax_cpu_enable_async_dispatch`). Inline dispatch saves the hand-over:
//! waking a worker and, for the read that follows, being woken back, all
//! on the cores the program runs on. A small step read before the next one
//! is recorded gains from it, a large multi-threaded one can lose (measured
//! in `benches/README.md`, "Inline dispatch"), so it is the user's choice
//! ([`set_cpu_async_dispatch`](crate::set_cpu_async_dispatch) or
//! `LAZYXLA_CPU_ASYNC_DISPATCH=0`), for a process of one CPU device: with
//! several, a program's replicas must run at the same time. The choice is
//! fixed when the CPU client is made.

use crate::{Error, Result};
use parking_lot::Mutex;

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

/// Asks for asynchronous dispatch or not; see
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
                        "inline"
                    },
                    u8::from(asynchronous)
                ),
            ))
        }
        _ => {
            d.asked = Some(asynchronous);
            Ok(())
        }
    }
}

/// Whether a CPU client of `devices` devices should dispatch inline: one
/// device, and [`crate::set_cpu_async_dispatch`] or
/// `LAZYXLA_CPU_ASYNC_DISPATCH` asked for it.
pub(crate) fn inline_wanted(devices: usize) -> Result<bool> {
    let asked = DISPATCH.lock().asked;
    let asynchronous = match asked {
        Some(a) => a,
        None => env()?.unwrap_or(true),
    };
    Ok(devices == 1 && !asynchronous)
}

/// Records how the CPU client dispatches (asynchronously when the plugin
/// refused the option).
pub(crate) fn fix(asynchronous: bool, devices: usize) {
    DISPATCH.lock().fixed = Some(Fixed {
        asynchronous,
        devices,
    });
}

/// `LAZYXLA_CPU_ASYNC_DISPATCH`; `None` when unset.
fn env() -> Result<Option<bool>> {
    match std::env::var_os("LAZYXLA_CPU_ASYNC_DISPATCH").filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => parse(&v.to_string_lossy()).map(Some),
    }
}

/// A switch as `LAZYXLA_CPU_ASYNC_DISPATCH` gives it.
fn parse(v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::Plugin(format!(
            "LAZYXLA_CPU_ASYNC_DISPATCH={v} is not a switch; use 1 (asynchronous) or 0 (inline)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dispatch_switch_reads_as_a_boolean() {
        assert!(super::parse(" 1 ").unwrap());
        assert!(super::parse("True").unwrap());
        assert!(!super::parse("off").unwrap());
        let e = super::parse("async").unwrap_err().to_string();
        assert!(e.contains("LAZYXLA_CPU_ASYNC_DISPATCH=async"), "{e}");
    }
}
