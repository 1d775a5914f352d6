//! # lazyxla
//!
//! A lazy-tensor runtime with bounded dynamic shapes: eager-looking tensor
//! code records a graph, and [`mark_step`] (or reading a value) compiles
//! it into one XLA program through a PJRT plugin and runs it. Sizes may
//! depend on data ([`Tensor::nonzero`], [`Tensor::masked_select`],
//! [`Tensor::unique`], variable-length batches): they are [`SymInt`]s,
//! static or data-dependent with a static upper bound (`<=25`), so a loop
//! whose sizes change every step compiles once.
//!
//! ```
//! use lazyxla::{Tensor, mark_step, metrics};
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 0.0, 1.0, 3.0], &[5]).unwrap();
//! let b = a.nonzero();                 // shape [<=5, 1], nothing runs yet
//! let d = &b * 2 + 1;
//! mark_step().unwrap();                // one program computes b and d
//! assert_eq!(d.size(0).to_string(), "<=5");
//! assert_eq!(d.size(0).materialize().unwrap(), 4);
//! assert_eq!(d.to_vec::<i64>().unwrap(), vec![1, 3, 7, 9]);
//! ```
//!
//! ## Running on XLA
//!
//! Programs run on XLA through a PJRT plugin, found by [`Device::pjrt`]
//! and used by [`Device::default`] when one loads; without one they run
//! on the embedded reference backend (an ndarray interpreter, correct but
//! slow), and one stderr line says how to get a plugin. Install XLA's CPU
//! plugin once, without Python, from lazyxla's source directory (a
//! checkout, or the crate's source that Cargo downloaded):
//!
//! ```sh
//! cargo run --release --example install_plugin            # XLA's CPU plugin
//! cargo run --release --example install_plugin -- --gpu cuda12   # or cuda13
//! ```
//!
//! It puts the plugin in [`Device::plugin_cache_dir`], where discovery
//! looks. `LAZYXLA_BACKEND=reference` chooses the reference backend (and
//! silences that line); `LAZYXLA_PJRT_PLUGIN=/path/plugin.so` picks a
//! plugin file.
//!
//! ## Where things are
//!
//! - [`Tensor`]: creation, elementwise, reduction, shape, indexing and
//!   data-dependent ops, autograd ([`Tensor::backward`]), reading values
//!   ([`Tensor::to_vec`], [`Tensor::item`]); [`DType`], [`SymInt`],
//!   [`SymBool`].
//! - [`mark_step`], [`capture`] (record a training step once, replay it),
//!   [`fori_loop`] and [`while_loop`] (loops compiled as one program),
//!   [`set_size_buckets`], [`set_compilation_cache_dir`].
//! - [`Device`], [`devices`]: the reference backend and XLA devices.
//! - [`nn`]: the [`nn::Module`] trait, layers, activations and losses;
//!   [`optim`]: SGD, Adam, AdamW and learning-rate schedules.
//! - [`parallel`]: data parallelism in one program across devices.
//! - [`safetensors`]: checkpoints PyTorch reads and writes.
//! - [`vision`]: detection ops (`box_iou`, `roi_align`, `nms`).
//! - [`metrics`]: counters and timers (compiles, cache hits, transfers);
//!   [`debug`]: why a program compiled, and introspection for tests.
//! - [`host`]: host arrays, the data that crosses to and from devices.
//! - [`prelude`]: the names a training script uses, in one import.
//!
//! The data path inside: tensor ops record nodes (typed by dtype and
//! `SymInt` shape), a sync canonicalises the pending graph into a program
//! and its cache key, and a backend compiles and runs it (the reference
//! interpreter, or XLA through PJRT). The repository's `DESIGN.md`
//! describes it. What the crate promises between versions: the README's
//! "Stability" section (0.x: a minor release may break the API; the
//! enums that will grow are `#[non_exhaustive]`).

#![warn(missing_docs, missing_debug_implementations)]
// The public API mirrors PyTorch's names (`add`, `mul`, `neg`, ..).
#![allow(clippy::should_implement_trait)]

mod autograd;
mod backend;
mod capture;
mod device;
mod dtype;
mod error;
pub mod host;
mod ir;
pub mod metrics;
pub mod nn;
pub mod optim;
pub mod parallel;
mod runtime;
pub mod safetensors;
pub mod sharding;
pub mod vision;

/// The names a training script uses, in one import:
/// `use lazyxla::prelude::*;`.
///
/// ```
/// use lazyxla::prelude::*;
/// let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true);
/// let mut opt = optim::Sgd::new(vec![w.clone()], 0.1);
/// (&w * &w).sum().backward();
/// opt.step();
/// mark_step().unwrap();
/// assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.8, 1.6]);
/// ```
pub mod prelude {
    pub use crate::nn::{self, Module};
    pub use crate::optim::{self, Optimizer};
    pub use crate::{
        capture, mark_step, no_grad, DType, Device, Error, Result, SymBool, SymInt, Tensor,
    };
}
mod symint;
mod tensor;

/// The key-value store of a job spanning several hosts, for
/// [`Device::pjrt_distributed`].
pub use backend::pjrt::ffi::{KeyValueStore, KvError};
pub use backend::pjrt::persistent::{compilation_cache_dir, set_compilation_cache_dir};
pub use capture::{capture, CapturedStep};
pub use device::{devices, set_cpu_async_dispatch, set_cpu_device_count, Device};
pub use dtype::DType;
pub use error::{Error, Result};
/// The `half` crate, whose `f16` and `bf16` are the elements of
/// [`DType::F16`] and [`DType::BF16`].
pub use half;
pub use host::Element;
pub use runtime::auto_dynamic::{automatic_dynamic, set_automatic_dynamic};
pub use runtime::buckets::{set_size_buckets, size_buckets, SizeBuckets};
pub use runtime::precision::{float32_matmul_precision, set_float32_matmul_precision};
pub use tensor::no_grad;

pub use tensor::sync::mark_step;
pub use tensor::{fori_loop, manual_seed, scan, while_loop, TripCount};
pub use tensor::{DimIndex, SymBool, SymInt, Tensor};

/// Introspection for tests, debugging and benchmarks.
pub mod debug {
    use crate::runtime::canonical::trace;
    use crate::Tensor;

    pub use crate::runtime::diagnose::{
        compile_log, set_graph_limits, warnings, CompileCause, CompileEntry,
    };

    /// The number of graph nodes alive in the process. It stays bounded over
    /// a training loop because a sync releases the graph behind the tensors
    /// it computes.
    ///
    /// ```
    /// let before = lazyxla::debug::live_node_count();
    /// let t = lazyxla::Tensor::arange(3) + 1;
    /// assert!(lazyxla::debug::live_node_count() > before);
    /// drop(t);
    /// ```
    pub fn live_node_count() -> usize {
        crate::ir::live_node_count()
    }

    /// True when `t` holds a computed value together with the graph it was
    /// computed from, for a backward still to come (see
    /// [`Tensor::backward`]): a value read before its backward was
    /// recorded. False once a backward went through that graph.
    ///
    /// ```
    /// use lazyxla::{debug, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// let loss = (&w * &w).sum();
    /// loss.item::<f32>().unwrap(); // read before backward
    /// assert!(debug::keeps_grad_history(&loss));
    /// loss.backward();
    /// // Backward before the read: the value alone is kept.
    /// let loss = (&w * &w).sum();
    /// loss.backward();
    /// lazyxla::mark_step().unwrap();
    /// loss.item::<f32>().unwrap();
    /// assert!(!debug::keeps_grad_history(&loss));
    /// ```
    pub fn keeps_grad_history(t: &Tensor) -> bool {
        t.with_node(|n| n.grad_history.is_some())
    }

    /// The project's FFI layer over the PJRT C API (for the FFI tests and
    /// the benchmark; not a stable interface).
    #[doc(hidden)]
    pub use crate::backend::pjrt::ffi as pjrt_ffi;

    /// A device on `device`'s PJRT client whose executions a [`Recorder`]
    /// records (the executable, copies of its argument buffers, the
    /// identities of its argument and result buffers), so a benchmark can
    /// run the same program directly through the FFI, with the same
    /// argument values, or chaining results into arguments as consecutive
    /// steps do. Run the steps to record on the returned device
    /// (`Device::scoped`).
    #[doc(hidden)]
    pub fn pjrt_recording(device: &crate::Device) -> crate::Result<(crate::Device, Recorder)> {
        let mut recorder = None;
        let d = device.wrapped(|inner| {
            let (b, r) = crate::backend::pjrt::recording::RecordingBackend::new(inner)?;
            recorder = Some(r);
            Ok::<_, crate::Error>(std::sync::Arc::new(b) as _)
        })?;
        Ok((d, recorder.expect("set by a successful wrap")))
    }

    /// Switches recording on a [`pjrt_recording`] device on and off.
    #[doc(hidden)]
    pub use crate::backend::pjrt::recording::{RecordedExecution, Recorder};

    /// The plugin file [`Device::pjrt`](crate::Device::pjrt) would load
    /// first: `LAZYXLA_PJRT_PLUGIN`, else the first one discovered.
    #[doc(hidden)]
    pub fn pjrt_plugin_path() -> crate::Result<std::path::PathBuf> {
        crate::device::plugin_path()
    }

    /// Compiles StableHLO text on a PJRT device exactly as a program's
    /// lowering is compiled (dumps and error message included).
    #[doc(hidden)]
    pub fn pjrt_compile_text(device: &crate::Device, text: &str) -> crate::Result<()> {
        let backend = device
            .backend()
            .as_any()
            .and_then(|a| a.downcast_ref::<crate::backend::pjrt::PjrtBackend>())
            .ok_or_else(|| crate::Error::Plugin(format!("{device} is not a PJRT device")))?;
        backend
            .compile_text("(raw StableHLO text)", text)
            .map(|_| ())
    }

    /// The StableHLO text the PJRT backend would compile for the program
    /// computing `tensors` (nothing runs).
    ///
    /// ```
    /// let y = lazyxla::Tensor::arange(3) * 2;
    /// let text = lazyxla::debug::stablehlo_text(&[&y]).unwrap();
    /// assert!(text.contains("stablehlo"), "{text}");
    /// ```
    pub fn stablehlo_text(tensors: &[&Tensor]) -> crate::Result<String> {
        let roots: Vec<_> = tensors.iter().map(|t| t.node()).collect();
        let t = trace(&roots, &[], &[])?;
        crate::backend::pjrt::lower_text(&t.program())
    }

    /// How long the host side of a sync takes for the program computing
    /// `tensors`, without compiling or running it: (tracing and keying,
    /// lowering to StableHLO text on the PJRT backend's lowering, the
    /// program's node count). For the scaling benchmark.
    #[doc(hidden)]
    pub fn host_costs(
        tensors: &[&Tensor],
    ) -> crate::Result<(std::time::Duration, std::time::Duration, usize)> {
        let roots: Vec<_> = tensors.iter().map(|t| t.node()).collect();
        let start = std::time::Instant::now();
        let t = trace(&roots, &[], &[])?;
        let traced = start.elapsed();
        let program = t.program();
        let start = std::time::Instant::now();
        let text = crate::backend::pjrt::lower_text(&program)?;
        let lowered = start.elapsed();
        std::hint::black_box(text);
        Ok((traced, lowered, program.nodes.len()))
    }

    /// The number of compiled programs in the cache.
    ///
    /// ```
    /// use lazyxla::{debug, mark_step, Tensor};
    /// let y = Tensor::arange(3) * 2;
    /// mark_step().unwrap();
    /// assert!(debug::cached_programs() >= 1);
    /// drop(y);
    /// ```
    pub fn cached_programs() -> usize {
        crate::runtime::cache::len()
    }

    /// Forgets every compiled program of this process (the persistent
    /// cache on disk is untouched): the next step compiles again. For
    /// tests that count compiles, so that programs another test compiled
    /// first do not change their counts.
    ///
    /// ```
    /// lazyxla::debug::clear_compile_cache();
    /// assert_eq!(lazyxla::debug::cached_programs(), 0);
    /// ```
    pub fn clear_compile_cache() {
        crate::runtime::cache::clear()
    }

    /// Drops what this thread keeps for reuse that holds graph nodes (the
    /// shared scalar operands), as the thread's end would. For tests that
    /// count live nodes: a test harness calls it before it lets the next
    /// test start, so no earlier test's thread releases nodes during a
    /// later test.
    ///
    /// ```
    /// lazyxla::debug::clear_thread_caches();
    /// ```
    #[doc(hidden)]
    pub fn clear_thread_caches() {
        crate::tensor::broadcast::splat::clear()
    }

    /// Sets how many compiled programs the compile cache holds (default
    /// 256, or `LAZYXLA_CACHE_SIZE`); the least recently used are evicted
    /// first, and compiling one again is logged as such.
    ///
    /// ```
    /// lazyxla::debug::set_compile_cache_capacity(64);
    /// ```
    pub fn set_compile_cache_capacity(programs: usize) {
        crate::runtime::cache::set_capacity(programs)
    }

    /// The number of entries in the live-tensor registry (live tensors plus
    /// not yet pruned dead ones).
    ///
    /// ```
    /// let t = lazyxla::Tensor::arange(3);
    /// assert!(lazyxla::debug::registry_len() >= 1);
    /// drop(t);
    /// ```
    pub fn registry_len() -> usize {
        crate::tensor::registry::len()
    }

    /// The program the PJRT backend lowers for `tensors`: the canonical
    /// program of [`ir_text`] after the lowering passes (the fills of
    /// padding that ops read as `fill_padding` nodes, products in the
    /// forms XLA runs fastest), printed in the same format after a
    /// line naming the passes. Runs nothing.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// let g = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
    /// // A transposed product is written as the product swapped: only
    /// // the transpose of `x` is left.
    /// let y = x.transpose(0, 1).matmul(&g).transpose(0, 1);
    /// let text = lazyxla::debug::lowered_ir_text(&[&y]);
    /// assert_eq!(text.matches("transpose").count(), 1, "{text}");
    /// ```
    pub fn lowered_ir_text(tensors: &[&Tensor]) -> String {
        let roots: Vec<_> = tensors.iter().map(|t| t.node()).collect();
        match trace(&roots, &[], &[]) {
            Ok(t) => {
                let program = t.program();
                let names: Vec<&str> = crate::ir::passes::LOWERING.iter().map(|p| p.name).collect();
                format!(
                    "# after passes: {}\n{}",
                    names.join(", "),
                    crate::ir::print::print_program(&crate::ir::passes::lowering(&program))
                )
            }
            Err(e) => format!("<error: {e}>"),
        }
    }

    /// A reference device that runs every program after the PJRT
    /// backend's lowering passes ([`lowered_ir_text`]), so that a test can
    /// check the passes keep every value against [`Device::reference`](crate::Device::reference).
    #[doc(hidden)]
    pub fn reference_after_passes() -> crate::Device {
        crate::device::reference_after_passes()
    }

    /// The canonical program that would compute `tensors`, printed (see the
    /// format in the module docs of `src/ir/print.rs`). Runs nothing.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let text = lazyxla::debug::ir_text(&[&(&a * &a)]);
    /// assert!(text.contains("mul a a"));
    /// ```
    pub fn ir_text(tensors: &[&Tensor]) -> String {
        let roots: Vec<_> = tensors.iter().map(|t| t.node()).collect();
        match trace(&roots, &[], &[]) {
            Ok(t) => crate::ir::print::print_program(&t.program()),
            Err(e) => format!("<error: {e}>"),
        }
    }
}
