//! Indexing: selecting and gathering by index tensors, and their
//! scatter-add inverses (used by gradients).

use super::dim::{DimIndex, ResolveDim};
use super::Tensor;
use crate::ir::Op;
use smallvec::SmallVec;

impl Tensor {
    /// Slices along `dim` at the positions in the 1-D integer `index`
    /// (which may be dynamic, e.g. from `nonzero`).
    pub fn index_select(&self, dim: impl DimIndex, index: &Tensor) -> Tensor {
        let d = dim.resolve("index_select", &self.shape_exprs());
        Tensor::apply(Op::IndexSelect { dim: d }, &[self, index], SmallVec::new())
    }

    /// PyTorch's `gather`: `out[i][j] = self[index[i][j]][j]` for `dim = 0`.
    /// `index` has the input's rank; outside `dim` its sizes are at most
    /// the input's (equal where a size is dynamic). The result has the
    /// index's shape.
    pub fn gather(&self, dim: impl DimIndex, index: &Tensor) -> Tensor {
        let d = dim.resolve("gather", &self.shape_exprs());
        Tensor::apply(Op::Gather { dim: d }, &[self, index], SmallVec::new())
    }

    /// `self` with slice `k` of `src` added at `index[k]` along `dim`.
    pub fn index_add(&self, dim: impl DimIndex, index: &Tensor, src: &Tensor) -> Tensor {
        let d = dim.resolve("index_add", &self.shape_exprs());
        Tensor::apply(
            Op::IndexAdd { dim: d },
            &[self, index, &src.to_dtype(self.dtype())],
            SmallVec::new(),
        )
    }

    /// PyTorch's `scatter_add` along `dim`.
    pub fn scatter_add(&self, dim: impl DimIndex, index: &Tensor, src: &Tensor) -> Tensor {
        let d = dim.resolve("scatter_add", &self.shape_exprs());
        Tensor::apply(
            Op::ScatterAdd { dim: d },
            &[self, index, &src.to_dtype(self.dtype())],
            SmallVec::new(),
        )
    }

    /// `self` with its true-`mask` positions (row-major) replaced by the
    /// elements of the 1-D `src`, in order.
    pub fn masked_scatter(&self, mask: &Tensor, src: &Tensor) -> Tensor {
        Tensor::apply(
            Op::MaskedScatter,
            &[self, mask, &src.to_dtype(self.dtype())],
            SmallVec::new(),
        )
    }

    /// Softmax along `dim` (stable: the maximum is subtracted first).
    pub fn softmax(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("softmax", &self.shape_exprs());
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.to_dtype(crate::DType::F32)
        };
        let e = (&x - &x.max_keepdim_unchecked(d)).exp();
        &e / &e.sum_dims(&[d], true)
    }

    /// Log of softmax along `dim`, computed stably.
    pub fn log_softmax(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("log_softmax", &self.shape_exprs());
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.to_dtype(crate::DType::F32)
        };
        let shifted = &x - &x.max_keepdim_unchecked(d);
        let lse = shifted.exp().sum_dims(&[d], true).log();
        &shifted - &lse
    }
}
