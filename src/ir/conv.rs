//! The convolution primitive's attributes and its shape inference
//! (`Op::Convolution`, StableHLO's `convolution` in a fixed layout).
//!
//! Layout: the input is `[N, C, spatial..]`, the weight `[O, C / groups,
//! kernel..]` (PyTorch's NCHW / OIHW), the result `[N / batch_groups, O,
//! out..]`. One to three spatial dims. Per spatial dim, the input is
//! dilated by `lhs_dilation` (holes of zeros between its elements), padded
//! by `padding` (negative padding crops), and the kernel, dilated by
//! `rhs_dilation`, slides over it with `stride`:
//! `out = (dilated_padded - dilated_kernel) / stride + 1`.

use super::node::{shape_string, Node};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::{Shape, SizeExpr};

/// The attributes of a convolution; every list has one entry per spatial
/// dimension.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Conv {
    /// Window strides (at least 1).
    pub stride: Vec<usize>,
    /// Padding `(low, high)` of the dilated input; negative values crop.
    pub padding: Vec<(i64, i64)>,
    /// Input dilation (at least 1): 2 puts one zero between elements. The
    /// transposed convolution is a convolution with `lhs_dilation = stride`.
    pub lhs_dilation: Vec<usize>,
    /// Kernel dilation (at least 1), PyTorch's `dilation`.
    pub rhs_dilation: Vec<usize>,
    /// Input channels and output channels split into this many groups,
    /// each output group seeing one input group (PyTorch's `groups`).
    pub feature_groups: usize,
    /// Batch and output channels split into this many groups, each output
    /// group computed from one batch group (used by weight gradients of
    /// grouped convolutions). At most one of the group counts exceeds 1.
    pub batch_groups: usize,
}

/// `(n - 1) * d + 1`, or 0 for an empty dim.
pub(crate) fn dilated(n: i64, d: usize) -> i64 {
    if n <= 0 {
        0
    } else {
        (n - 1) * d as i64 + 1
    }
}

/// How many windows of extent `kernel` fit in `input` at `stride` (both
/// extents dilated and padded already); `None` when not one does. The
/// output size of a convolution and of a window reduction alike.
pub(crate) fn window_count(input: i64, kernel: i64, stride: usize) -> Option<i64> {
    (input >= kernel).then(|| (input - kernel) / stride as i64 + 1)
}

impl Conv {
    /// A plain convolution: `stride`, symmetric `padding`, kernel
    /// `dilation`, `groups`.
    pub(crate) fn new(
        stride: &[usize],
        padding: &[usize],
        dilation: &[usize],
        groups: usize,
    ) -> Conv {
        Conv {
            stride: stride.to_vec(),
            padding: padding.iter().map(|&p| (p as i64, p as i64)).collect(),
            lhs_dilation: vec![1; stride.len()],
            rhs_dilation: dilation.to_vec(),
            feature_groups: groups,
            batch_groups: 1,
        }
    }

    /// The number of spatial dims.
    pub(crate) fn rank(&self) -> usize {
        self.stride.len()
    }

    /// The output size along spatial dim `s` for an input of size `n` and
    /// a kernel of size `k`, or `None` when the dilated kernel does not
    /// fit into the dilated, padded input.
    pub(crate) fn out_size(&self, s: usize, n: i64, k: i64) -> Option<i64> {
        let (lo, hi) = self.padding[s];
        let input = dilated(n, self.lhs_dilation[s]) + lo + hi;
        let kernel = dilated(k, self.rhs_dilation[s]);
        window_count(input, kernel, self.stride[s]).filter(|_| k > 0)
    }

    /// The attributes as the printer shows them.
    pub(crate) fn describe(&self) -> String {
        let pads: Vec<String> = self
            .padding
            .iter()
            .map(|(l, h)| format!("({l}, {h})"))
            .collect();
        let mut s = format!(
            "stride={:?} padding=[{}] lhs_dilation={:?} rhs_dilation={:?}",
            self.stride,
            pads.join(", "),
            self.lhs_dilation,
            self.rhs_dilation
        );
        if self.feature_groups != 1 {
            s.push_str(&format!(" groups={}", self.feature_groups));
        }
        if self.batch_groups != 1 {
            s.push_str(&format!(" batch_groups={}", self.batch_groups));
        }
        s
    }

    /// Shape and dtype inference for input `x` and weight `w`.
    pub(crate) fn infer(&self, op: &'static str, x: &Node, w: &Node) -> Result<(DType, Shape)> {
        let (xs, ws) = (&x.shape, &w.shape);
        let shapes = || format!("input {} and weight {}", shape_string(xs), shape_string(ws));
        let r = self.rank();
        if !(1..=3).contains(&r)
            || [
                self.padding.len(),
                self.lhs_dilation.len(),
                self.rhs_dilation.len(),
            ]
            .iter()
            .any(|&n| n != r)
        {
            return Err(Error::internal(op, format!("bad attributes {self:?}")));
        }
        if xs.len() != r + 2 || ws.len() != r + 2 {
            return Err(Error::shape(
                op,
                format!(
                    "a {r}-d convolution needs a {}-d input [N, C, ..] and a {}-d weight [O, C/groups, ..], got {}",
                    r + 2,
                    r + 2,
                    shapes()
                ),
            ));
        }
        if x.dtype != w.dtype {
            return Err(Error::dtype(
                op,
                format!(
                    "input and weight dtypes differ: {} and {}; convert one with to_dtype",
                    x.dtype, w.dtype
                ),
            ));
        }
        if !x.dtype.is_float() {
            return Err(Error::dtype(
                op,
                format!(
                    "needs float operands, got {} ({}); convert with to_dtype first",
                    x.dtype,
                    shapes()
                ),
            ));
        }
        let zero = |v: &[usize]| v.contains(&0);
        if zero(&self.stride) || zero(&self.lhs_dilation) || zero(&self.rhs_dilation) {
            return Err(Error::invalid(
                op,
                format!(
                    "strides and dilations must be at least 1, got stride {:?}, dilation {:?}",
                    self.stride, self.rhs_dilation
                ),
            ));
        }
        let (fg, bg) = (self.feature_groups, self.batch_groups);
        if fg == 0 || bg == 0 || (fg > 1 && bg > 1) {
            return Err(Error::invalid(
                op,
                format!("groups must be at least 1, got {fg} (batch groups {bg})"),
            ));
        }
        // Only the batch may be dynamic: every batch element is computed on
        // its own, so padding rows stay in padding rows. A split batch
        // would mix them into the groups.
        let dynamic = |shape: &[SizeExpr], first: usize| {
            (first..shape.len()).find(|&d| shape[d].as_const().is_none())
        };
        let first = if bg == 1 { 1 } else { 0 };
        for (d, shape) in [(dynamic(xs, first), xs), (dynamic(ws, 0), ws)] {
            if let Some(dim) = d {
                return Err(Error::DynamicUnsupported {
                    op,
                    dim,
                    shape: shape_string(shape),
                });
            }
        }
        let c = xs[1].as_const().unwrap_or(0);
        let (o, ci) = (ws[0].as_const().unwrap_or(0), ws[1].as_const().unwrap_or(0));
        if o % fg as i64 != 0 || c % fg as i64 != 0 {
            return Err(Error::shape(
                op,
                format!(
                    "groups {fg} must divide both the input's {c} channels and the weight's {o} output channels ({})",
                    shapes()
                ),
            ));
        }
        if c != ci * fg as i64 {
            return Err(Error::shape(
                op,
                format!(
                    "the input has {c} channels but the weight expects {ci} per group x {fg} group(s) = {} ({}); the weight's dim 1 must be channels / groups",
                    ci * fg as i64,
                    shapes()
                ),
            ));
        }
        let mut batch = xs[0].clone();
        if bg > 1 {
            let n = xs[0].as_const().unwrap_or(0);
            if n % bg as i64 != 0 || o % bg as i64 != 0 {
                return Err(Error::shape(
                    op,
                    format!(
                        "batch groups {bg} must divide the batch {n} and the output channels {o} ({})",
                        shapes()
                    ),
                ));
            }
            batch = SizeExpr::constant(n / bg as i64);
        }
        let mut out: Shape = Shape::new();
        out.push(batch);
        out.push(ws[0].clone());
        for s in 0..r {
            let n = xs[s + 2].as_const().unwrap_or(0);
            let k = ws[s + 2].as_const().unwrap_or(0);
            let size = self.out_size(s, n, k).ok_or_else(|| {
                let (lo, hi) = self.padding[s];
                Error::shape(
                    op,
                    format!(
                        "spatial dim {s}: the kernel of size {k} (dilation {}: extent {}) does not fit into the input of size {n} padded by ({lo}, {hi}) (extent {}) ({}); pad more, or use a smaller kernel or dilation",
                        self.rhs_dilation[s],
                        dilated(k, self.rhs_dilation[s]),
                        dilated(n, self.lhs_dilation[s]) + lo + hi,
                        shapes()
                    ),
                )
            })?;
            out.push(SizeExpr::constant(size));
        }
        Ok((x.dtype, out))
    }
}
