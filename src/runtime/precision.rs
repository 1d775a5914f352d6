//! The precision of `f32` matrix products in the programs traced from now
//! on: PyTorch's `torch.set_float32_matmul_precision`, process-wide.
//!
//! PyTorch computes `f32` matrix products in `f32` unless told otherwise,
//! where XLA lets an accelerator use TensorFloat-32 (JAX's and PyTorch/XLA's
//! default on GPUs): a product then differs from PyTorch's in the fourth
//! digit. lazyxla follows PyTorch. The level is read when a program is
//! traced and is part of its key, so changing it compiles anew and
//! changing it back finds the earlier program.
//!
//! `set_float32_matmul_precision("highest" | "high" | "medium")`, default
//! "highest", emits `HIGHEST`, `HIGH` or nothing on each f32
//! `dot_general`; a loop body takes its enclosing program's level. Half
//! products, widened to f32 to accumulate, and convolutions keep XLA's
//! default (a GPU runs them on its fast units, as PyTorch's cuDNN does by
//! default). A CPU computes every level in f32: the optimised CPU programs
//! differ only in the annotation. On a GPU "highest" costs mostly compile
//! time, for JAX as well.

use crate::ir::program::MatmulPrecision;
use crate::{Error, Result};
use std::sync::atomic::{AtomicU8, Ordering};

static LEVEL: AtomicU8 = AtomicU8::new(0);

const LEVELS: [(MatmulPrecision, &str); 3] = [
    (MatmulPrecision::Highest, "highest"),
    (MatmulPrecision::High, "high"),
    (MatmulPrecision::Medium, "medium"),
];

/// The level set now, with its name.
fn level() -> (MatmulPrecision, &'static str) {
    LEVELS[LEVEL.load(Ordering::Relaxed) as usize % LEVELS.len()]
}

/// The level programs are traced with now.
pub(crate) fn current() -> MatmulPrecision {
    level().0
}

/// Sets the internal precision of `f32` matrix products (`matmul`,
/// `Linear`, their gradients) in the programs traced from now on, with
/// PyTorch's names: `"highest"` (the default: `f32` throughout, as PyTorch
/// computes), `"high"` (TensorFloat-32, or three bf16 passes, where the
/// device has them) or `"medium"` (the device's fastest: TensorFloat-32 on
/// NVIDIA GPUs, as JAX does by default). CPUs compute every level in
/// `f32`. Convolutions are not affected: XLA's default lets a GPU use
/// TensorFloat-32 for them, as PyTorch's cuDNN does by default.
///
/// ```
/// lazyxla::set_float32_matmul_precision("high").unwrap();
/// assert_eq!(lazyxla::float32_matmul_precision(), "high");
/// assert!(lazyxla::set_float32_matmul_precision("tf32").is_err());
/// lazyxla::set_float32_matmul_precision("highest").unwrap();
/// ```
pub fn set_float32_matmul_precision(precision: &str) -> Result<()> {
    let k = LEVELS
        .iter()
        .position(|(_, name)| *name == precision)
        .ok_or_else(|| {
            Error::invalid(
                "set_float32_matmul_precision",
                format!(
                    "unknown precision {precision:?}: use \"highest\" (f32, the default), \
                     \"high\" (TensorFloat-32 where available) or \"medium\" (the device's fastest)"
                ),
            )
        })?;
    LEVEL.store(k as u8, Ordering::Relaxed);
    Ok(())
}

/// The level [`set_float32_matmul_precision`] set: `"highest"`, `"high"`
/// or `"medium"`.
///
/// ```
/// assert_eq!(lazyxla::float32_matmul_precision(), "highest");
/// ```
pub fn float32_matmul_precision() -> &'static str {
    level().1
}
