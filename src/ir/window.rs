//! Sliding windows: the [`Window`] of `Op::ReduceWindow` and
//! `Op::SelectAndScatter`, and their shape inference.
//!
//! A window has one entry per operand dim. Along a dim of size `n`, the
//! operand is dilated (`dilation - 1` holes between neighbours), padded
//! with `padding.0` elements before and `padding.1` after, and read by
//! windows of `size` elements every `stride` elements; padding and holes
//! read as the reduction's identity. A dynamic dim has no padding
//! between its real elements and its bound, only after them, so a window
//! that reads past the real elements reads the identity too.

use super::conv::{dilated, window_count};
use super::node::{shape_string, Node};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::{Shape, SizeExpr};

/// The reduction of `Op::ReduceWindow`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum WindowKind {
    /// Sum (identity 0).
    Sum,
    /// Product (identity 1).
    Product,
    /// Maximum, NaN propagating (identity: the lowest value).
    Max,
    /// Minimum, NaN propagating (identity: the highest value). No user
    /// method records it yet; every stage implements it.
    #[allow(dead_code)]
    Min,
}

/// A window over every dim of an operand (XLA's `Window`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    /// The window's extent along each dim (at least 1).
    pub size: Vec<usize>,
    /// The step between consecutive windows (at least 1).
    pub stride: Vec<usize>,
    /// Identity elements before and after the (dilated) operand.
    pub padding: Vec<(usize, usize)>,
    /// The operand's dilation (XLA's base dilation): `d` puts `d - 1`
    /// identity holes between neighbouring elements (at least 1).
    pub dilation: Vec<usize>,
}

impl Window {
    /// A window of `size` with unit strides and dilation and no padding.
    pub fn new(size: Vec<usize>) -> Window {
        let r = size.len();
        Window {
            size,
            stride: vec![1; r],
            padding: vec![(0, 0); r],
            dilation: vec![1; r],
        }
    }

    /// The number of dims.
    pub fn rank(&self) -> usize {
        self.size.len()
    }

    /// True when along `d` each output element is its input element.
    pub fn is_trivial(&self, d: usize) -> bool {
        self.size[d] == 1 && self.keeps_size(d)
    }

    /// True when along `d` the output has the input's size whatever it is:
    /// unit stride and dilation, `padding.0 + padding.1 == size - 1` (a
    /// scan, or a centred sliding window).
    pub fn keeps_size(&self, d: usize) -> bool {
        let (lo, hi) = self.padding[d];
        self.stride[d] == 1 && self.dilation[d] == 1 && lo + hi + 1 == self.size[d]
    }

    /// The output size along `d` for an input size `n` (0 when not even
    /// one window fits).
    pub fn out_size(&self, d: usize, n: usize) -> usize {
        let (lo, hi) = self.padding[d];
        let padded = dilated(n as i64, self.dilation[d]) + (lo + hi) as i64;
        window_count(padded, self.size[d] as i64, self.stride[d]).unwrap_or(0) as usize
    }

    /// `size=[..] stride=[..] pad=[lo:hi, ..]`, and `dilation=[..]` when
    /// some dim is dilated (the printer's attributes).
    pub(crate) fn describe(&self) -> String {
        let pads: Vec<String> = self
            .padding
            .iter()
            .map(|(l, h)| format!("{l}:{h}"))
            .collect();
        let mut s = format!(
            "size={:?} stride={:?} pad=[{}]",
            self.size,
            self.stride,
            pads.join(", ")
        );
        if self.dilation.iter().any(|&d| d != 1) {
            s.push_str(&format!(" dilation={:?}", self.dilation));
        }
        s
    }

    /// Checks the window against an operand shape; `dynamic_ok(d)` says
    /// whether a dynamic dim `d` may have this window along it.
    fn check(
        &self,
        op: &'static str,
        shape: &[SizeExpr],
        dynamic_ok: impl Fn(usize) -> bool,
    ) -> Result<Shape> {
        let r = shape.len();
        if [self.stride.len(), self.padding.len(), self.dilation.len()] != [r; 3]
            || self.rank() != r
        {
            return Err(Error::internal(
                op,
                format!(
                    "the window {} does not have one entry per dim of {}",
                    self.describe(),
                    shape_string(shape)
                ),
            ));
        }
        if self.size.contains(&0) || self.stride.contains(&0) || self.dilation.contains(&0) {
            return Err(Error::invalid(
                op,
                format!(
                    "window sizes, strides and dilations must be at least 1, got {}",
                    self.describe()
                ),
            ));
        }
        (0..r)
            .map(|d| match shape[d].as_const() {
                Some(n) => Ok(SizeExpr::constant(
                    self.out_size(d, n.max(0) as usize) as i64
                )),
                None if dynamic_ok(d) => Ok(shape[d].clone()),
                None => Err(Error::DynamicUnsupported {
                    op,
                    dim: d,
                    shape: shape_string(shape),
                }),
            })
            .collect()
    }
}

fn no_bool(op: &'static str, x: &Node) -> Result<()> {
    if x.dtype == DType::Bool {
        return Err(Error::dtype(
            op,
            format!(
                "cannot reduce bool tensors (shape {}); convert with to_dtype first",
                shape_string(&x.shape)
            ),
        ));
    }
    Ok(())
}

/// The dtype and shape of `Op::ReduceWindow`. A dynamic dim takes a
/// trivial window, or for sum and product one that keeps its size (a
/// scan): the padding after the real elements reads as the identity,
/// which the lowering writes there.
pub(crate) fn infer_reduce_window(
    op: &'static str,
    kind: WindowKind,
    window: &Window,
    x: &Node,
) -> Result<(DType, Shape)> {
    no_bool(op, x)?;
    let shape = window.check(op, &x.shape, |d| match kind {
        WindowKind::Sum | WindowKind::Product => window.keeps_size(d),
        // The gradient (`select_and_scatter`) takes trivial windows only.
        WindowKind::Max | WindowKind::Min => window.is_trivial(d),
    })?;
    Ok((x.dtype, shape))
}

/// The dtype and shape of `Op::SelectAndScatter`: `x`'s; `source` must
/// have the shape of `x`'s window reduction.
pub(crate) fn infer_select_and_scatter(
    op: &'static str,
    window: &Window,
    x: &Node,
    source: &Node,
) -> Result<(DType, Shape)> {
    no_bool(op, x)?;
    if x.dtype != source.dtype {
        return Err(Error::dtype(
            op,
            format!(
                "operand dtypes differ: {} and {}; convert one with to_dtype",
                x.dtype, source.dtype
            ),
        ));
    }
    if window.dilation.iter().any(|&d| d != 1) {
        return Err(Error::invalid(
            op,
            format!("takes no dilation, got {}", window.describe()),
        ));
    }
    let expected = window.check(op, &x.shape, |d| window.is_trivial(d))?;
    if expected != source.shape {
        return Err(Error::shape(
            op,
            format!(
                "the source {} must have the shape {} of the windows over the operand {} ({})",
                shape_string(&source.shape),
                shape_string(&expected),
                shape_string(&x.shape),
                window.describe()
            ),
        ));
    }
    Ok((x.dtype, x.shape.clone()))
}
