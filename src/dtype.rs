//! Element types and PyTorch's type promotion.
//!
//! # Half precision
//!
//! `DType::F16` and `DType::BF16` (elements `half::f16`, `half::bf16`) are
//! floats in every respect: they promote as PyTorch (`bf16 + f32` is f32,
//! `f16 + bf16` meets at f32, a Rust number or zero-dim float tensor leaves
//! a half tensor half), can require gradients (the gradient has the leaf's
//! dtype; through `to_dtype` an f32 leaf gets f32), upload and download as
//! PJRT's F16/BF16 buffers and are read and written by `safetensors`.
//!
//! The reference backend computes each op in f32 and rounds the result to
//! the node's half type (`reference/eval.rs`: half operands widened
//! exactly, the result cast back), so every op rounds once. The XLA
//! lowering emits `f16`/`bf16` tensors; matrix products, convolutions and
//! reductions on halves widen their operands to f32, compute and convert
//! the result back (`Ctx::in_f32`), so they accumulate in f32 as PyTorch's
//! kernels do and agree with the reference. Elementwise ops stay in the
//! half type; XLA CPU evaluates them through f32 and, by default
//! (`xla_allow_excess_precision`, as in JAX), may keep f32 between the ops
//! of one program: a value stored as a half (a program's result, uploaded
//! data) is always rounded, an intermediate may be more precise than the
//! reference's. So the backends agree within a rounding of the half type
//! (the tolerance of `tests/half.rs`); with
//! `XLA_FLAGS=--xla_allow_excess_precision=false` XLA rounds every op too
//! and correctly rounded ops agree bit for bit (`tests/half_exact.rs`).
//! lazyxla does not set the flag itself: it would mean editing the process
//! environment, and it costs the excess-precision speed. Mixed-precision
//! training keeps f32 weights and casts them to bf16 in the forward
//! (`tests/half.rs`).

use std::fmt;

/// The element type of a tensor.
///
/// ```
/// use lazyxla::DType;
/// assert!(DType::F32.is_float());
/// assert_eq!(DType::I64.to_string(), "i64");
///
/// // Halves: `half::f16` and `half::bf16` (re-exported as `lazyxla::half`).
/// use lazyxla::half::bf16;
/// let t = lazyxla::Tensor::from_vec(vec![bf16::from_f32(1.5)], &[1]).unwrap();
/// assert_eq!(t.dtype(), DType::BF16);
/// assert_eq!((&t * 2.0).to_vec::<bf16>().unwrap(), vec![bf16::from_f32(3.0)]);
/// assert_eq!((&t + &t.to_dtype(DType::F16)).dtype(), DType::F32);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DType {
    /// Booleans.
    Bool,
    /// 32-bit signed integers.
    I32,
    /// 64-bit signed integers.
    I64,
    /// 16-bit IEEE half floats (`half::f16`).
    F16,
    /// 16-bit brain floats (`half::bf16`): f32's exponent range, 8 bits of
    /// mantissa.
    BF16,
    /// 32-bit floats.
    F32,
    /// 64-bit floats.
    F64,
}

/// The promotion category of a dtype: a higher category always wins.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Category {
    Bool,
    Int,
    Float,
}

impl DType {
    /// True for `F16`, `BF16`, `F32` and `F64`.
    ///
    /// ```
    /// use lazyxla::DType;
    /// assert!(DType::BF16.is_float() && !DType::I64.is_float());
    /// ```
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for the 16-bit floats `F16` and `BF16`.
    ///
    /// ```
    /// use lazyxla::DType;
    /// assert!(DType::F16.is_half() && !DType::F32.is_half());
    /// ```
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// True for `I32` and `I64`.
    ///
    /// ```
    /// use lazyxla::DType;
    /// assert!(DType::I32.is_int() && !DType::Bool.is_int());
    /// ```
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Bytes per element.
    ///
    /// ```
    /// use lazyxla::DType;
    /// assert_eq!(DType::BF16.size_in_bytes(), 2);
    /// assert_eq!(DType::I64.size_in_bytes(), 8);
    /// ```
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// Short name used by the printer and in messages (`f32`, `i64`, `bool`).
    ///
    /// ```
    /// use lazyxla::DType;
    /// assert_eq!(DType::F32.name(), "f32");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    pub(crate) fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::I32 | DType::I64 => Category::Int,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Category::Float,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How strongly an operand takes part in promotion (PyTorch's three tiers).
///
/// Within one category the highest tier present decides the dtype; a lower
/// tier only matters when it brings a higher category. So `f32 tensor + 2.5`
/// stays `f32`, `i64 tensor + 2.5` becomes `f32` (the default float), and
/// `bool tensor + 3` becomes `i64`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Priority {
    /// A Rust number passed to an op (`t + 2.0`).
    Scalar,
    /// A tensor of rank 0.
    ZeroDim,
    /// A tensor of rank >= 1.
    Dimensioned,
}

/// The result dtype of combining operands, as `torch.result_type` does.
pub(crate) fn result_type(operands: &[(DType, Priority)]) -> DType {
    let category = operands
        .iter()
        .map(|(d, _)| d.category())
        .max()
        .unwrap_or(Category::Float);
    // The strongest tier that holds an operand of the winning category picks
    // the dtype, the widest dtype within that tier.
    let tier = operands
        .iter()
        .filter(|(d, _)| d.category() == category)
        .map(|(_, p)| *p)
        .max()
        .unwrap_or(Priority::Scalar);
    let widest = operands
        .iter()
        .filter(|(d, p)| d.category() == category && *p == tier)
        .map(|(d, _)| *d)
        .reduce(join)
        .unwrap_or(DType::F32);
    if tier == Priority::Scalar {
        // A Rust number alone decides only the category: its dtype is the
        // default of that category.
        return match category {
            Category::Bool => DType::Bool,
            Category::Int => DType::I64,
            Category::Float => DType::F32,
        };
    }
    widest
}

/// The smaller dtype of one category that holds both: the wider one, except
/// that neither of `f16` and `bf16` holds the other, so they meet at `f32`
/// (as `torch.promote_types(torch.float16, torch.bfloat16)`).
fn join(a: DType, b: DType) -> DType {
    match (a, b) {
        (DType::F16, DType::BF16) | (DType::BF16, DType::F16) => DType::F32,
        _ => a.max(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Priority::*;

    #[test]
    fn promotion_follows_pytorch() {
        assert_eq!(
            result_type(&[(DType::I64, Dimensioned), (DType::F32, Dimensioned)]),
            DType::F32
        );
        assert_eq!(
            result_type(&[(DType::Bool, Dimensioned), (DType::I32, Dimensioned)]),
            DType::I32
        );
        assert_eq!(
            result_type(&[(DType::F64, Dimensioned), (DType::F32, Dimensioned)]),
            DType::F64
        );
        // Scalars do not widen a tensor's float type.
        assert_eq!(
            result_type(&[(DType::F32, Dimensioned), (DType::F64, Scalar)]),
            DType::F32
        );
        assert_eq!(
            result_type(&[(DType::I32, Dimensioned), (DType::I64, Scalar)]),
            DType::I32
        );
        // But they do lift the category, to the default dtype.
        assert_eq!(
            result_type(&[(DType::I64, Dimensioned), (DType::F64, Scalar)]),
            DType::F32
        );
        assert_eq!(
            result_type(&[(DType::Bool, Dimensioned), (DType::I64, Scalar)]),
            DType::I64
        );
        // Zero-dim tensors rank between the two.
        assert_eq!(
            result_type(&[(DType::F32, Dimensioned), (DType::F64, ZeroDim)]),
            DType::F32
        );
        assert_eq!(
            result_type(&[(DType::I32, Dimensioned), (DType::F64, ZeroDim)]),
            DType::F64
        );
        // Halves: bf16 + f32 is f32, f16 + bf16 meet at f32, a float
        // scalar or zero-dim f32 leaves a half tensor half.
        assert_eq!(
            result_type(&[(DType::BF16, Dimensioned), (DType::F32, Dimensioned)]),
            DType::F32
        );
        assert_eq!(
            result_type(&[(DType::F16, Dimensioned), (DType::BF16, Dimensioned)]),
            DType::F32
        );
        assert_eq!(
            result_type(&[(DType::BF16, Dimensioned), (DType::F64, Scalar)]),
            DType::BF16
        );
        assert_eq!(
            result_type(&[(DType::F16, Dimensioned), (DType::F32, ZeroDim)]),
            DType::F16
        );
        assert_eq!(
            result_type(&[(DType::I64, Dimensioned), (DType::BF16, ZeroDim)]),
            DType::BF16
        );
    }
}
