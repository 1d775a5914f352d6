//! Counters, gauges and timers, named as in PyTorch/XLA where a name
//! exists.
//!
//! ```
//! lazyxla::metrics::reset();
//! assert_eq!(lazyxla::metrics::counter("UncachedCompile"), 0);
//! println!("{}", lazyxla::metrics::report());
//! ```
//!
//! The set is closed (an enum each), so counting is one relaxed atomic
//! add: the runtime counts on every step, and a captured step's replay
//! takes a few microseconds in all.
//!
//! A counter counts events since the last [`reset`]; a gauge is a level
//! read when asked (`LiveBuffers`: the device buffers alive now), which
//! [`reset`] leaves alone. Both are read with [`counter`].

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

macro_rules! named {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $name { $($(#[$vm])* $v),* }

        impl $name {
            const ALL: &'static [$name] = &[$($name::$v),*];

            fn name(self) -> &'static str {
                match self { $($name::$v => stringify!($v)),* }
            }

            fn named(name: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|c| c.name() == name)
            }
        }
    };
}

named!(
    /// An event lazyxla counts.
    Counter {
        MarkStep,
        UncachedCompile,
        CachedCompile,
        ExecuteGraph,
        TransferToDevice,
        TransferFromDevice,
        TransferBetweenDevices,
        SizeMaterialization,
        CompileCacheEviction,
        StepRecording,
        StepReplay,
        InPlaceResult,
        DonatedBuffer,
        ExecuteInline,
        ExecuteDispatched,
        PersistentCacheHit,
        PersistentCacheMiss,
    }
);

named!(
    /// A level lazyxla reads when asked, never reset.
    Gauge {
        LiveBuffers,
    }
);

/// Per gauge, its level.
static LEVELS: [AtomicI64; Gauge::ALL.len()] = [const { AtomicI64::new(0) }; Gauge::ALL.len()];

impl Gauge {
    fn value(self) -> u64 {
        LEVELS[self as usize].load(Relaxed).max(0) as u64
    }
}

/// Raises a gauge by one (a buffer created).
#[inline]
pub(crate) fn rise(g: Gauge) {
    LEVELS[g as usize].fetch_add(1, Relaxed);
}

/// Lowers a gauge by one (a buffer dropped).
#[inline]
pub(crate) fn fall(g: Gauge) {
    LEVELS[g as usize].fetch_sub(1, Relaxed);
}

named!(
    /// A span of work lazyxla times (the names are the report's, as in
    /// PyTorch/XLA).
    #[allow(clippy::enum_variant_names)]
    Timer {
        CompileTime,
        TraceTime,
        ExecuteTime,
        DeviceWaitTime,
    }
);

static COUNTS: [AtomicU64; Counter::ALL.len()] = [const { AtomicU64::new(0) }; Counter::ALL.len()];

/// Per timer: how many spans, their total and their maximum, in ns.
static TIMES: [[AtomicU64; 3]; Timer::ALL.len()] =
    [const { [const { AtomicU64::new(0) }; 3] }; Timer::ALL.len()];

/// The value of a counter or gauge (0 when it was never incremented, or
/// for a name that is neither).
///
/// Counters: `MarkStep`, `UncachedCompile`, `CachedCompile`,
/// `ExecuteGraph`, `TransferToDevice`, `TransferFromDevice`,
/// `TransferBetweenDevices` (a device-to-device copy by `to_device`, with
/// no host transfer), `SizeMaterialization`, `CompileCacheEviction`, and for captured steps
/// (`capture`) `StepRecording`, `StepReplay` and `InPlaceResult` (a
/// replay's result moved into a tensor that already existed, without
/// allocating a new one: the state it updates, a gradient, or a value it
/// returned last time that the caller has dropped), and `DonatedBuffer` (a
/// parameter's buffer given to the program that updates it, which writes
/// the new value in its place; XLA only, see DESIGN.md "Donated
/// buffers").
///
/// Gauge: `LiveBuffers`, how many device buffers (on every backend) are
/// alive right now: tensors' data, the sizes of dynamic dimensions kept
/// on the device, and a running program's temporary arguments (on the
/// reference backend, a compiled program held by the cache also keeps the
/// sizes of the run that compiled it). A level, not a count of events:
/// [`reset`] leaves it alone, and it falls when tensors are dropped. A
/// training loop's level is the same from step to step; growth is a leak
/// (`benches/soak.rs` checks it).
///
/// ```
/// use lazyxla::{mark_step, metrics, Tensor};
/// metrics::reset();
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let y = &x * 2;
/// mark_step().unwrap();
/// println!("compiles: {}", metrics::counter("UncachedCompile"));
/// assert_eq!(metrics::counter("NoSuchCounter"), 0);
/// drop((x, y));
/// ```
pub fn counter(name: &str) -> u64 {
    match Counter::named(name) {
        Some(c) => COUNTS[c as usize].load(Relaxed),
        None => Gauge::named(name).map_or(0, Gauge::value),
    }
}

/// Sets every counter and timer back to zero (gauges are levels, and stay
/// as they are).
///
/// ```
/// use lazyxla::metrics;
/// metrics::reset();
/// assert_eq!(metrics::counter("UncachedCompile"), 0);
/// ```
pub fn reset() {
    for c in &COUNTS {
        c.store(0, Relaxed);
    }
    for c in TIMES.iter().flatten() {
        c.store(0, Relaxed);
    }
    if let Some((_, clear)) = SECTION.get() {
        clear();
    }
}

/// A section of [`report`] kept by a later layer (the runtime's account
/// of compiles and reads, `runtime::diagnose`), with what [`reset`]
/// clears of it.
static SECTION: std::sync::OnceLock<Section> = std::sync::OnceLock::new();

/// A report section's text, and what clears it.
type Section = (fn() -> String, fn());

/// Sets the report's extra section (once).
pub(crate) fn set_report_section(section: fn() -> String, clear: fn()) {
    let _ = SECTION.set((section, clear));
}

/// A human-readable table of every counter and timer that is not zero,
/// and of every gauge:
/// `CompileTime`, `TraceTime`, `ExecuteTime` (starting a program: on XLA
/// it runs on asynchronously) and `DeviceWaitTime` (waiting for the
/// previous program, see `Device::synchronize`).
///
/// ```
/// use lazyxla::{mark_step, metrics, Tensor};
/// let y = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().exp();
/// mark_step().unwrap();
/// println!("{}", metrics::report());
/// drop(y);
/// ```
pub fn report() -> String {
    let mut counters: Vec<(&str, u64)> = Counter::ALL
        .iter()
        .map(|&c| (c.name(), COUNTS[c as usize].load(Relaxed)))
        .filter(|&(_, v)| v > 0)
        .collect();
    counters.sort();
    let mut out = String::from("lazyxla metrics\n  counters:\n");
    for (name, v) in counters {
        out.push_str(&format!("    {name:<22} {v}\n"));
    }
    out.push_str("  gauges:\n");
    for &g in Gauge::ALL {
        out.push_str(&format!("    {:<22} {}\n", g.name(), g.value()));
    }
    let mut timers: Vec<(&str, [u64; 3])> = Timer::ALL
        .iter()
        .map(|&t| {
            (
                t.name(),
                TIMES[t as usize].each_ref().map(|a| a.load(Relaxed)),
            )
        })
        .filter(|&(_, [count, _, _])| count > 0)
        .collect();
    timers.sort();
    out.push_str("  timers:\n");
    for (name, [count, total, max]) in timers {
        let (total, max) = (Duration::from_nanos(total), Duration::from_nanos(max));
        out.push_str(&format!(
            "    {name:<22} count={count} total={total:.3?} mean={:.3?} max={max:.3?}\n",
            total / count as u32,
        ));
    }
    if let Some((section, _)) = SECTION.get() {
        out.push_str(&section());
    }
    out
}

/// The total time recorded by a timer (zero for a name that is not one).
///
/// ```
/// use lazyxla::metrics;
/// metrics::reset();
/// assert_eq!(metrics::timer_total("CompileTime"), std::time::Duration::ZERO);
/// ```
pub fn timer_total(name: &str) -> Duration {
    Timer::named(name).map_or(Duration::ZERO, |t| {
        Duration::from_nanos(TIMES[t as usize][1].load(Relaxed))
    })
}

pub(crate) fn inc(c: Counter) {
    add(c, 1)
}

pub(crate) fn add(c: Counter, n: u64) {
    COUNTS[c as usize].fetch_add(n, Relaxed);
}

/// The timers' clock: the CPU's time-stamp counter where it is reliable
/// (a read costs a few nanoseconds, a tenth of `Instant::now`'s, which
/// matters on a captured step's replay of a few microseconds), else the
/// OS clock. No thread-local: timers also run in exit handlers.
static CLOCK: std::sync::LazyLock<quanta::Clock> = std::sync::LazyLock::new(quanta::Clock::new);

/// Runs `f`, recording its duration under `timer`.
pub(crate) fn time<R>(timer: Timer, f: impl FnOnce() -> R) -> R {
    let start = CLOCK.now();
    let r = f();
    let ns = u64::try_from(CLOCK.now().duration_since(start).as_nanos()).unwrap_or(u64::MAX);
    let [count, total, max] = &TIMES[timer as usize];
    count.fetch_add(1, Relaxed);
    total.fetch_add(ns, Relaxed);
    // A read first: the maximum rarely changes, and a read-modify-write
    // on every span would cost more than the rest of the bookkeeping.
    if ns > max.load(Relaxed) {
        max.fetch_max(ns, Relaxed);
    }
    r
}
