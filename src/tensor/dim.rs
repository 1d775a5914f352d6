//! Dimension arguments: non-negative, or negative counting from the end.

use crate::error::Error;
use crate::ir::node::shape_string;
use crate::symint::SizeExpr;

/// A dimension index: `usize`, or `i64`/`i32` where `-1` is the last
/// dimension (as in PyTorch).
///
/// ```
/// use lazyxla::Tensor;
/// let t = Tensor::zeros(&[2, 3], lazyxla::DType::F32);
/// assert_eq!(t.size(-1).as_static(), Some(3));
/// assert_eq!(t.size(0usize).as_static(), Some(2));
/// ```
pub trait DimIndex: Copy {
    /// The signed index.
    fn signed(self) -> i64;
}

/// Resolution of a [`DimIndex`] against a shape (crate-internal).
pub(crate) trait ResolveDim {
    /// The dimension in `0..rank`, or a panic naming the op and shape.
    fn resolve(self, op: &'static str, shape: &[SizeExpr]) -> usize;
}

impl<D: DimIndex> ResolveDim for D {
    #[track_caller]
    fn resolve(self, op: &'static str, shape: &[SizeExpr]) -> usize {
        resolve_in(self.signed(), op, shape, shape.len())
    }
}

/// Resolves `dim` against `0..extent` (extent is `rank + 1` for
/// `unsqueeze`).
#[track_caller]
pub(crate) fn resolve_in(dim: i64, op: &'static str, shape: &[SizeExpr], extent: usize) -> usize {
    let r = extent as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        let e = if extent == shape.len() {
            Error::DimOutOfRange {
                op,
                dim,
                rank: shape.len(),
                shape: shape_string(shape),
            }
        } else {
            // Ops that insert a dimension (unsqueeze, stack) take 0..=rank.
            Error::shape(
                op,
                format!(
                    "dimension {dim} is out of range for inserting a dimension into a tensor of rank {} (shape {}); valid positions are 0..={}, or negative counting from the end",
                    shape.len(),
                    shape_string(shape),
                    shape.len()
                ),
            )
        };
        panic!("{e}");
    }
    d as usize
}

impl DimIndex for usize {
    #[track_caller]
    fn signed(self) -> i64 {
        self as i64
    }
}
impl DimIndex for i64 {
    #[track_caller]
    fn signed(self) -> i64 {
        self
    }
}
impl DimIndex for i32 {
    #[track_caller]
    fn signed(self) -> i64 {
        self as i64
    }
}
