//! Automatic dynamic dims: an input dim whose size changed between two
//! programs of one sync site becomes dynamic in the data made at the same
//! line from then on, with a bucketed bound, as `torch.compile`'s
//! automatic dynamic shapes do. The most common recompile of all (a last
//! batch that is smaller, text of another length) then costs one more
//! program, not one per size.
//!
//! The compile diagnostics (`runtime::diagnose`) find the change and
//! [`register`] the line and dims; the tensor layer asks [`dims_at`] when
//! it makes host data. A variable made this way is marked ([`is_auto`]):
//! an op that needs a static size specializes it back to its value (a
//! checked constant) instead of failing, so the switch never turns a
//! working program into an error.
//!
//! Off by default because one line can make several different inputs (a
//! test helper), which would all turn dynamic.

use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;
use std::panic::Location;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::LazyLock;

type Line = (&'static str, u32, u32);

/// 0: not read yet; 1 on; 2 off.
static ON: AtomicU8 = AtomicU8::new(0);
static LINES: LazyLock<Mutex<FxHashMap<Line, SmallVec<[usize; 2]>>>> =
    LazyLock::new(Default::default);
static VARS: LazyLock<Mutex<FxHashSet<u64>>> = LazyLock::new(Default::default);

/// Turns automatic dynamic dims on or off (default off;
/// `LAZYXLA_AUTOMATIC_DYNAMIC=1` turns them on from outside). With them
/// on, data made by `Tensor::from_vec` (or `from_slice`, ..) at a line
/// whose size changed in some dim between two programs of one sync site
/// is made with that dim dynamic from then on, bounded by its bucket
/// (`set_size_buckets`, else the power of two that holds it, at least
/// 16), so every later size compiles at most once per bucket. The compile
/// log says which dim became dynamic; `mark_dynamic(dim, bound)` at that
/// line pins the choice. Turning it off forgets the lines it learned.
///
/// Off by default because the data made at one line is not always one
/// input: a helper that makes tensors of several shapes for different
/// uses (a test's `check(values, shape, f)`) would make each of them
/// dynamic, and code that reads a size as a number (`as_static`,
/// `upper_bounds` for a `reshape`) then sees a bound instead. An op that
/// needs a static size (a convolution's height) gets it back: the
/// program is specialized to the value, checked when it runs.
///
/// ```
/// lazyxla::set_automatic_dynamic(true);
/// assert!(lazyxla::automatic_dynamic());
/// lazyxla::set_automatic_dynamic(false);
/// ```
pub fn set_automatic_dynamic(on: bool) {
    ON.store(if on { 1 } else { 2 }, Ordering::Relaxed);
    if !on {
        // Off forgets what it learned.
        LINES.lock().clear();
    }
}

/// Whether automatic dynamic dims are on (see [`set_automatic_dynamic`]).
///
/// ```
/// println!("automatic dynamic: {}", lazyxla::automatic_dynamic());
/// ```
pub fn automatic_dynamic() -> bool {
    if ON.load(Ordering::Relaxed) == 0 {
        let on = std::env::var("LAZYXLA_AUTOMATIC_DYNAMIC").is_ok_and(|v| v == "1");
        let _ = ON.compare_exchange(
            0,
            if on { 1 } else { 2 },
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
    ON.load(Ordering::Relaxed) == 1
}

/// Makes `dims` of the data made at `at` dynamic from now on; true when
/// one of them was not already.
pub(crate) fn register(at: &'static Location<'static>, dims: &[usize]) -> bool {
    if !automatic_dynamic() || dims.is_empty() {
        return false;
    }
    let key = (at.file(), at.line(), at.column());
    let mut lines = LINES.lock();
    let known = lines.entry(key).or_default();
    let mut new = false;
    for &d in dims {
        if !known.contains(&d) {
            known.push(d);
            new = true;
        }
    }
    new
}

/// The dims to make dynamic in data made at `at`, if any.
pub(crate) fn dims_at(at: &'static Location<'static>) -> Option<SmallVec<[usize; 2]>> {
    if !automatic_dynamic() {
        return None;
    }
    let lines = LINES.lock();
    if lines.is_empty() {
        return None;
    }
    lines.get(&(at.file(), at.line(), at.column())).cloned()
}

/// The bound a dim of `size` gets: its bucket, else the power of two that
/// holds it (at least 16).
pub(crate) fn bound_for(size: usize) -> usize {
    super::buckets::size_buckets()
        .and_then(|b| b.bucket(size))
        .unwrap_or_else(|| size.max(16).next_power_of_two())
}

/// Marks variable `id` as made by this feature.
pub(crate) fn mark(id: u64) {
    VARS.lock().insert(id);
}

/// Forgets a dropped variable (its `on_drop`).
pub(crate) fn forget(id: u64) {
    VARS.lock().remove(&id);
}

/// True when any variable made by this feature is alive.
pub(crate) fn any() -> bool {
    !VARS.lock().is_empty()
}

/// True for a variable made by this feature.
pub(crate) fn is_auto(id: u64) -> bool {
    let vars = VARS.lock();
    !vars.is_empty() && vars.contains(&id)
}
