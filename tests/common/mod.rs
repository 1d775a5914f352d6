//! Shared test harness: one test body, run once per backend.
//!
//! `backend_test! { fn name() { body } }` expands to a module `name` with a
//! `reference` test and a `pjrt` test. Both hold the process-wide test
//! lock, because counters, the compile cache and `mark_step` are
//! process-wide, and start from a fresh process state
//! ([`fresh_process_state`]). The PJRT test
//! FAILS when `LAZYXLA_REQUIRE_PJRT=1` and no plugin loads; without that
//! variable it reports the skip on stderr and returns.
#![allow(dead_code)]

pub mod fixtures;

use lazyxla::Device;
use parking_lot::{Mutex, MutexGuard};

static LOCK: Mutex<()> = Mutex::new(());

/// Serialises tests that touch process-wide state: held, no other test
/// of the binary that asks for it runs. See [`Serial`].
pub fn lock() -> Serial {
    ask_for_devices();
    Serial(LOCK.lock())
}

/// The guard of [`lock`]. Process-wide state a test may change or count
/// (counters, the compile cache, switches, the live node count) is only
/// its own while it holds this. A test's thread also keeps state of its
/// own that holds graph nodes (the shared scalar operands), which would
/// go when the thread ends: after the next test has started, changing
/// that test's live node count. So the guard drops it before it lets the
/// next test run.
pub struct Serial(#[allow(dead_code)] MutexGuard<'static, ()>);

impl Drop for Serial {
    fn drop(&mut self) {
        lazyxla::debug::clear_thread_caches();
    }
}

/// The test binaries of data parallelism and collectives run on 4 CPU
/// devices; the others on the default, one. The count is fixed when the
/// first device is made, so every test of such a binary asks before it
/// touches a device (through [`lock`] and [`pjrt_device`]).
fn ask_for_devices() {
    if matches!(
        env!("CARGO_CRATE_NAME"),
        "data_parallel"
            | "ops_collective"
            | "donation"
            | "threads"
            | "sharding"
            | "sharding_models"
            | "sharding_dynamic"
            | "fuzz_sharding"
    ) {
        lazyxla::set_cpu_device_count(4).unwrap();
    }
}

/// The PJRT device, when a plugin loads.
pub fn pjrt_device() -> Option<Device> {
    ask_for_devices();
    match Device::pjrt() {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("LAZYXLA_REQUIRE_PJRT").as_deref() == Ok("1") {
                panic!("LAZYXLA_REQUIRE_PJRT=1 but no PJRT plugin loads: {e}");
            }
            eprintln!(
                "SKIPPED (no PJRT plugin; set LAZYXLA_REQUIRE_PJRT=1 to make this a failure): {e}"
            );
            None
        }
    }
}

/// The path of the plugin `Device::pjrt()` would load first
/// (`LAZYXLA_PJRT_PLUGIN`, else discovery), for the tests of the FFI
/// layer. With `LAZYXLA_REQUIRE_PJRT=1` a missing plugin FAILS the test;
/// otherwise the skip is reported on stderr and this gives `None`.
pub fn plugin_path() -> Option<std::path::PathBuf> {
    match lazyxla::debug::pjrt_plugin_path() {
        Ok(p) => Some(p),
        Err(e) => {
            if std::env::var("LAZYXLA_REQUIRE_PJRT").as_deref() == Ok("1") {
                panic!("LAZYXLA_REQUIRE_PJRT=1 but no PJRT plugin is found: {e}");
            }
            eprintln!(
                "SKIPPED (no PJRT plugin; set LAZYXLA_REQUIRE_PJRT=1 to make this a failure): {e}"
            );
            None
        }
    }
}

/// That plugin, loaded (see [`plugin_path`]).
pub fn plugin() -> Option<std::sync::Arc<lazyxla::debug::pjrt_ffi::Plugin>> {
    let path = plugin_path()?;
    Some(lazyxla::debug::pjrt_ffi::Plugin::load(&path).expect("load plugin"))
}

/// Runs `body` on `device` with the process-wide state a test may count
/// or change set back first (see [`fresh_process_state`]).
pub fn run_on(device: &Device, body: impl FnOnce()) {
    let _g = lock();
    fresh_process_state();
    device.scoped(body)
}

/// The process-wide state every test of one binary shares, set as a new
/// process would have it: the counters, the compile cache (a test that
/// counts compiles must not find the programs another test compiled first:
/// which test runs first changes from run to run), and the switches a
/// test may turn (bucketed bounds, automatic dynamic dims, the graph
/// limits). A test that changes one of them holds [`lock`] while it does.
pub fn fresh_process_state() {
    lazyxla::metrics::reset();
    lazyxla::debug::clear_compile_cache();
    lazyxla::set_size_buckets(None);
    lazyxla::set_automatic_dynamic(false);
    lazyxla::debug::set_graph_limits(4_000_000, 64);
}

#[macro_export]
macro_rules! backend_test {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(#[$meta])*
            #[test]
            fn reference() {
                $crate::common::run_on(&lazyxla::Device::reference(), || $body);
            }
            $(#[$meta])*
            #[test]
            fn pjrt() {
                if let Some(d) = $crate::common::pjrt_device() {
                    $crate::common::run_on(&d, || $body);
                }
            }
        }
    };
}

/// Asserts two float slices agree within `tol` (absolute + relative).
pub fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(
        got.len(),
        want.len(),
        "lengths differ: got {got:?}, want {want:?}"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(
            ok,
            "element {i}: got {g}, want {w} (got {got:?}, want {want:?})"
        );
    }
}

/// The same for f64.
pub fn assert_close64(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(
        got.len(),
        want.len(),
        "lengths differ: got {got:?}, want {want:?}"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(
            ok,
            "element {i}: got {g}, want {w} (got {got:?}, want {want:?})"
        );
    }
}

/// Runs `f`, which must panic, and returns the panic message.
pub fn panic_message(f: impl FnOnce()) -> String {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(prev);
    match r {
        Ok(()) => panic!("expected a panic, got none"),
        Err(e) => e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    }
}

/// A small deterministic generator for host-side test data.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next pseudo-random value (31 bits).
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// `n` values in `[0, 1)`, in steps of 0.001.
    pub fn floats(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % 1000) as f32 / 1000.0)
            .collect()
    }
}

/// A scratch directory for one test's files, removed with its contents
/// when dropped (also when the test fails): tests leave nothing in the
/// system's temporary directory, however often the suite runs.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("lazyxla-test-")
        .tempdir()
        .expect("a temporary directory")
}

/// Reads the program a compile error's `message` says was dumped, then
/// removes the dump (and its folder, once empty): the dump is for users,
/// and tests leave none behind.
pub fn take_dump(message: &str) -> String {
    let at = message.find("dumped to ").expect("dump path") + "dumped to ".len();
    // The path ends the parenthesis it is in (more may follow it).
    let hlo = std::path::Path::new(message[at..].split(')').next().unwrap_or_default());
    let text = std::fs::read_to_string(hlo).unwrap();
    let _ = std::fs::remove_file(hlo);
    let _ = std::fs::remove_file(hlo.to_string_lossy().replace(".stablehlo.mlir", ".ir.txt"));
    let _ = std::fs::remove_dir(hlo.parent().unwrap());
    text
}
