//! Counters and timers, named as in PyTorch/XLA where a name exists.
//!
//! ```
//! lazyxla::metrics::reset();
//! assert_eq!(lazyxla::metrics::counter("UncachedCompile"), 0);
//! println!("{}", lazyxla::metrics::report());
//! ```

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Default)]
struct TimerStat {
    count: u64,
    total: Duration,
    max: Duration,
}

#[derive(Default)]
struct Metrics {
    counters: BTreeMap<&'static str, u64>,
    timers: BTreeMap<&'static str, TimerStat>,
}

static METRICS: LazyLock<Mutex<Metrics>> = LazyLock::new(|| Mutex::new(Metrics::default()));

/// The value of a counter (0 when it was never incremented).
///
/// Counters: `MarkStep`, `UncachedCompile`, `CachedCompile`,
/// `ExecuteGraph`, `TransferToDevice`, `TransferFromDevice`,
/// `SizeMaterialization`, `CompileCacheEviction`, and for captured steps
/// (`capture`) `StepRecording` and `StepReplay`.
pub fn counter(name: &str) -> u64 {
    METRICS.lock().counters.get(name).copied().unwrap_or(0)
}

/// Sets every counter and timer back to zero.
pub fn reset() {
    let mut m = METRICS.lock();
    m.counters.clear();
    m.timers.clear();
}

/// A human-readable table of every counter and timer: `CompileTime`,
/// `TraceTime`, `ExecuteTime` (starting a program: on XLA it runs on
/// asynchronously) and `DeviceWaitTime` (waiting for the previous program,
/// see `Device::synchronize`).
pub fn report() -> String {
    let m = METRICS.lock();
    let mut out = String::from("lazyxla metrics\n  counters:\n");
    for (name, v) in &m.counters {
        out.push_str(&format!("    {name:<22} {v}\n"));
    }
    out.push_str("  timers:\n");
    for (name, t) in &m.timers {
        let mean = if t.count > 0 {
            t.total / t.count as u32
        } else {
            Duration::ZERO
        };
        out.push_str(&format!(
            "    {name:<22} count={} total={:.3?} mean={:.3?} max={:.3?}\n",
            t.count, t.total, mean, t.max
        ));
    }
    out
}

/// The total time recorded by a timer.
pub fn timer_total(name: &str) -> Duration {
    METRICS
        .lock()
        .timers
        .get(name)
        .map(|t| t.total)
        .unwrap_or_default()
}

pub(crate) fn inc(name: &'static str) {
    add(name, 1)
}

pub(crate) fn add(name: &'static str, n: u64) {
    *METRICS.lock().counters.entry(name).or_insert(0) += n;
}

/// Runs `f`, recording its duration under `name`.
pub(crate) fn time<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let r = f();
    let d = start.elapsed();
    let mut m = METRICS.lock();
    let t = m.timers.entry(name).or_default();
    t.count += 1;
    t.total += d;
    t.max = t.max.max(d);
    r
}
