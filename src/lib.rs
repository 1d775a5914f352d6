//! # lazyxla
//!
//! A lazy-tensor runtime with bounded dynamic shapes. Eager-looking tensor
//! code records a graph; [`mark_step`] (or reading a value) compiles the
//! pending graph once per structure and runs it. Sizes are [`SymInt`]s:
//! static, or data-dependent with a static upper bound (`<=25`), so a loop
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
//! The data path: `tensor` (ops record nodes) → `ir` (nodes typed by
//! dtype and `SymInt` shape) → `runtime` (sync, canonical program, cache
//! key, compile cache) → `backend` (reference interpreter or XLA through
//! PJRT). See DESIGN.md.

#![warn(missing_docs)]
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
    pub fn live_node_count() -> usize {
        crate::ir::live_node_count()
    }

    /// True when `t` holds a computed value together with the graph it was
    /// computed from, for a backward still to come (see
    /// [`Tensor::backward`]): a value read before its backward was
    /// recorded. False once a backward went through that graph.
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
    pub fn stablehlo_text(tensors: &[&Tensor]) -> crate::Result<String> {
        let roots: Vec<_> = tensors.iter().map(|t| t.node()).collect();
        let t = trace(&roots, &[], &[])?;
        crate::backend::pjrt::lower_text(&t.program())
    }

    /// The number of compiled programs in the cache.
    pub fn cached_programs() -> usize {
        crate::runtime::cache::len()
    }

    /// Forgets every compiled program of this process (the persistent
    /// cache on disk is untouched): the next step compiles again. For
    /// tests that count compiles, so that programs another test compiled
    /// first do not change their counts.
    pub fn clear_compile_cache() {
        crate::runtime::cache::clear()
    }

    /// Sets how many compiled programs the compile cache holds (default
    /// 256, or `LAZYXLA_CACHE_SIZE`); the least recently used are evicted
    /// first, and compiling one again is logged as such.
    pub fn set_compile_cache_capacity(programs: usize) {
        crate::runtime::cache::set_capacity(programs)
    }

    /// The number of entries in the live-tensor registry (live tensors plus
    /// not yet pruned dead ones).
    pub fn registry_len() -> usize {
        crate::tensor::registry::len()
    }

    /// The canonical program that would compute `tensors`, printed (see the
    /// printer's format in DESIGN.md). Runs nothing.
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
