//! Element types and PyTorch's type promotion.

use std::fmt;

/// The element type of a tensor.
///
/// ```
/// use lazyxla::DType;
/// assert!(DType::F32.is_float());
/// assert_eq!(DType::I64.to_string(), "i64");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans.
    Bool,
    /// 32-bit signed integers.
    I32,
    /// 64-bit signed integers.
    I64,
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
    /// True for `F32` and `F64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// True for `I32` and `I64`.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// Short name used by the printer and in messages (`f32`, `i64`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    pub(crate) fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::I32 | DType::I64 => Category::Int,
            DType::F32 | DType::F64 => Category::Float,
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
        .max()
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

/// A Rust type that can be the element of a tensor.
///
/// Implemented for `f32`, `f64`, `i32`, `i64` and `bool`.
pub trait Element: Copy + Send + Sync + fmt::Debug + PartialEq + 'static + sealed::Sealed {
    /// The dtype this type maps to.
    const DTYPE: DType;
    /// Lossy conversion to `f64`, used for printing and scalars.
    fn to_f64(self) -> f64;
    /// Conversion from `f64` (truncating for integers).
    fn from_f64(v: f64) -> Self;
    /// Wraps an array of this type into the dtype-tagged host array.
    fn into_host(a: ndarray::ArrayD<Self>) -> crate::host::HostArray;
    /// Borrows the array of this type out of a host array, if the dtype matches.
    fn from_host(a: &crate::host::HostArray) -> Option<&ndarray::ArrayD<Self>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for bool {}
}

macro_rules! element {
    ($t:ty, $d:ident, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            fn into_host(a: ndarray::ArrayD<Self>) -> crate::host::HostArray {
                crate::host::HostArray::$d(a)
            }
            fn from_host(a: &crate::host::HostArray) -> Option<&ndarray::ArrayD<Self>> {
                match a {
                    crate::host::HostArray::$d(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}

element!(f32, F32, |x: f32| x as f64, |v: f64| v as f32);
element!(f64, F64, |x: f64| x, |v: f64| v);
element!(i32, I32, |x: i32| x as f64, |v: f64| v as i32);
element!(i64, I64, |x: i64| x as f64, |v: f64| v as i64);
element!(bool, Bool, |x: bool| if x { 1.0 } else { 0.0 }, |v: f64| v
    != 0.0);

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
    }
}
