//! Masks and fills: `masked_fill`, `tril`, `triu`, `one_hot`.
//!
//! Each is a comparison (of a mask, or of iotas) and a select or a
//! conversion, which is what XLA would run for them anyway; iotas take
//! their sizes from the input's (maybe dynamic) dims, so the masks line up
//! with the real elements.

use super::Tensor;
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::node::shape_string;
use crate::SymInt;

impl Tensor {
    /// `self` with `value` wherever the Bool `mask` is true (PyTorch's
    /// `masked_fill`). The mask broadcasts to `self`'s shape (not the
    /// other way round); `value` is converted to `self`'s dtype. The
    /// gradient passes where the mask is false.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// let m = Tensor::from_vec(vec![true, false], &[2]).unwrap();
    /// let y = x.masked_fill(&m, f64::NEG_INFINITY);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![f32::NEG_INFINITY, 2.0, f32::NEG_INFINITY, 4.0]);
    /// ```
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Tensor {
        let op = "masked_fill";
        if mask.dtype() != DType::Bool {
            panic!(
                "{}",
                Error::dtype(
                    op,
                    format!(
                        "the mask must be bool, got {}{}; make one with a comparison (e.g. `x.gt_scalar(0.0)`)",
                        mask.dtype(),
                        mask.shape_string()
                    )
                )
            );
        }
        let (shape, mshape) = (self.shape_exprs(), mask.shape_exprs());
        let joint = super::broadcast::broadcast_shapes(op, &mshape, &shape);
        if joint.len() != shape.len() {
            panic!(
                "{}",
                Error::shape(
                    op,
                    format!(
                        "the mask {} has more dims than the input {}; it must broadcast to the input's shape",
                        shape_string(&mshape),
                        shape_string(&shape)
                    )
                )
            );
        }
        if let Some(d) = (0..shape.len()).find(|&d| joint[d] != shape[d]) {
            panic!(
                "{}",
                Error::shape(
                    op,
                    format!(
                        "the mask {} does not broadcast to the input's shape {}: dim {d} would grow from {} to {}",
                        shape_string(&mshape),
                        shape_string(&shape),
                        shape[d],
                        joint[d]
                    )
                )
            );
        }
        let fill = Tensor::scalar_op(value, self.dtype(), self.device());
        mask.where_cond(&fill, self)
    }

    /// The lower triangle of the last two dims (PyTorch's `tril`): the
    /// elements with `col - row <= k` are kept, the rest set to 0 (false).
    /// `k = 0` is the main diagonal, positive `k` above it. Needs rank 2
    /// or more; either matrix dim may be dynamic.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((1..=9).collect::<Vec<i64>>(), &[3, 3]).unwrap();
    /// assert_eq!(x.tril(0).to_vec::<i64>().unwrap(), vec![1, 0, 0, 4, 5, 0, 7, 8, 9]);
    /// assert_eq!(x.tril(-1).to_vec::<i64>().unwrap(), vec![0, 0, 0, 4, 0, 0, 7, 8, 0]);
    /// ```
    #[track_caller]
    pub fn tril(&self, k: i64) -> Tensor {
        let keep = self.diagonal_offsets("tril").le_scalar(k as f64);
        keep.where_cond(self, &self.zeros_like())
    }

    /// The upper triangle of the last two dims (PyTorch's `triu`): the
    /// elements with `col - row >= k` are kept, the rest set to 0.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((1..=6).collect::<Vec<i64>>(), &[2, 3]).unwrap();
    /// assert_eq!(x.triu(1).to_vec::<i64>().unwrap(), vec![0, 2, 3, 0, 0, 6]);
    /// ```
    #[track_caller]
    pub fn triu(&self, k: i64) -> Tensor {
        let keep = self.diagonal_offsets("triu").ge_scalar(k as f64);
        keep.where_cond(self, &self.zeros_like())
    }

    /// `col - row` (I64) over the last two dims' (maybe dynamic) sizes.
    #[track_caller]
    fn diagonal_offsets(&self, op: &'static str) -> Tensor {
        let r = self.rank();
        if r < 2 {
            panic!(
                "{}",
                Error::shape(
                    op,
                    format!(
                        "needs a tensor of at least 2 dims, got shape {}",
                        self.shape_string()
                    )
                )
            );
        }
        let sizes = self.sizes();
        let iota = |s: &SymInt| self.device().scoped(|| Tensor::arange_sym(s));
        let rows = iota(&sizes[r - 2]).unsqueeze(1);
        let cols = iota(&sizes[r - 1]).unsqueeze(0);
        &cols - &rows
    }

    /// One-hot encoding of class indices (PyTorch's `one_hot`): an I64
    /// tensor gives an I64 tensor with one more dim of size
    /// `num_classes`, holding 1 at each element's class. A value outside
    /// `[0, num_classes)` gives a row of zeros (PyTorch raises; here the
    /// value is known only when the program runs). Dynamic dims stay
    /// dynamic.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
    /// assert_eq!(x.one_hot(3).to_vec::<i64>().unwrap(), vec![0, 0, 1, 1, 0, 0]);
    /// assert_eq!(x.one_hot(3).upper_bounds(), vec![2, 3]);
    /// ```
    #[track_caller]
    pub fn one_hot(&self, num_classes: usize) -> Tensor {
        if self.dtype() != DType::I64 {
            panic!(
                "{}",
                Error::dtype(
                    "one_hot",
                    format!(
                        "needs an i64 tensor of class indices, got {}{}; convert with to_dtype(DType::I64)",
                        self.dtype(),
                        self.shape_string()
                    )
                )
            );
        }
        let n = i64::try_from(num_classes).unwrap_or(i64::MAX);
        let classes = self.device().scoped(|| Tensor::arange(n));
        self.unsqueeze(-1).eq(&classes).to_dtype(DType::I64)
    }
}
