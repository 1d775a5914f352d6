//! How many CPU devices a process has: the PJRT CPU client's
//! `cpu_device_count` and the number of reference devices.
//!
//! One, unless asked otherwise, as in JAX and PyTorch/XLA: the CPU plugin
//! sizes its client and intra-op thread pools at max(cores, devices), so
//! every extra device is a thread more on each pool, and on a machine with
//! fewer cores than devices every step pays for the oversubscription
//! (`benches/README.md`, "Current figures"). Several CPU devices
//! are a test bed for data parallelism, asked for with
//! [`set_cpu_device_count`](crate::set_cpu_device_count) or
//! `LAZYXLA_CPU_DEVICES`. The count is fixed when the first CPU client or
//! reference device group is made.
//!
//! A CPU client of more than one device is created with one device more
//! than lazyxla exposes: the 0.81 plugin runs a launch's replicas on a pool
//! of one thread per device, and a launch on every device could wait in
//! its first collective for the last replica's thread until the plugin
//! aborts. Devices are named `pjrt:cpu`, `pjrt:cpu:1`, .. (`reference`,
//! `reference:1`, .. on the reference backend, all in host memory); a
//! program for device `k` is compiled with a device assignment naming it
//! (`CompileOptions`). `to_device` between devices of one client copies
//! device to device (`PJRT_Buffer_CopyToDevice`, counted
//! `TransferBetweenDevices`).

use crate::error::{Error, Result};
use parking_lot::Mutex;

/// What was asked for, and the count once fixed (with whether it was
/// asked for).
struct Count {
    asked: Option<usize>,
    fixed: Option<(usize, bool)>,
}

static COUNT: Mutex<Count> = Mutex::new(Count {
    asked: None,
    fixed: None,
});

/// The most devices one may ask for.
const MOST: usize = 4096;

/// Asks for `n` CPU devices; see [`crate::set_cpu_device_count`].
pub(crate) fn ask(n: usize) -> Result<()> {
    let invalid = |m: String| Error::invalid("set_cpu_device_count", m);
    if !(1..=MOST).contains(&n) {
        return Err(invalid(format!(
            "{n} CPU devices were asked for; ask for 1 to {MOST}"
        )));
    }
    let mut count = COUNT.lock();
    match count.fixed {
        Some((have, _)) if have != n => Err(invalid(format!(
            "{n} CPU devices were asked for, but the process already has {have} \
             (the count is fixed when the first device is made); call \
             set_cpu_device_count({n}) before any tensor or device is made, or start \
             the process with LAZYXLA_CPU_DEVICES={n}"
        ))),
        _ => {
            count.asked = Some(n);
            Ok(())
        }
    }
}

/// The CPU device count, fixed from here on: what
/// [`crate::set_cpu_device_count`] asked for, else `LAZYXLA_CPU_DEVICES`,
/// else 1; and whether it was asked for (a CPU plugin that refuses the
/// count is then an error rather than taken as it is).
pub(crate) fn fixed() -> Result<(usize, bool)> {
    let mut count = COUNT.lock();
    if let Some(fixed) = count.fixed {
        return Ok(fixed);
    }
    let fixed = match count.asked {
        Some(n) => (n, true),
        None => env()?.map_or((1, false), |n| (n, true)),
    };
    count.fixed = Some(fixed);
    Ok(fixed)
}

/// `LAZYXLA_CPU_DEVICES`; `None` when unset.
fn env() -> Result<Option<usize>> {
    match std::env::var_os("LAZYXLA_CPU_DEVICES").filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => parse(&v.to_string_lossy()).map(Some),
    }
}

/// A device count as `LAZYXLA_CPU_DEVICES` gives it.
fn parse(v: &str) -> Result<usize> {
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=MOST).contains(&n) => Ok(n),
        _ => Err(Error::Plugin(format!(
            "LAZYXLA_CPU_DEVICES={v} is not a device count; use a whole number from 1 to {MOST}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_device_count_is_a_positive_number() {
        assert_eq!(super::parse(" 8 ").unwrap(), 8);
        for bad in ["0", "-2", "four", "5000", ""] {
            let e = super::parse(bad).unwrap_err().to_string();
            assert!(e.contains("LAZYXLA_CPU_DEVICES"), "{e}");
        }
    }
}
