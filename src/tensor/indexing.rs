//! Indexing: selecting and gathering by index tensors, and their
//! scatter-add inverses (used by gradients).

use super::dim::{DimIndex, ResolveDim};
use super::Tensor;
use crate::ir::{Op, ScatterMode};
use smallvec::SmallVec;

impl Tensor {
    /// Slices along `dim` at the positions in the 1-D integer `index`
    /// (which may be dynamic, e.g. from `nonzero`).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], &[3]).unwrap();
    /// let i = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
    /// assert_eq!(x.index_select(0, &i).to_vec::<f32>().unwrap(), vec![30.0, 10.0]);
    /// ```
    #[track_caller]
    pub fn index_select(&self, dim: impl DimIndex, index: &Tensor) -> Tensor {
        let d = dim.resolve("index_select", &self.shape_exprs());
        Tensor::apply(Op::IndexSelect { dim: d }, &[self, index], SmallVec::new())
    }

    /// PyTorch's `gather`: `out[i][j] = self[index[i][j]][j]` for `dim = 0`.
    /// `index` has the input's rank; outside `dim` its sizes are at most
    /// the input's (equal where a size is dynamic). The result has the
    /// index's shape.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// let i = Tensor::from_vec(vec![1i64, 0], &[2, 1]).unwrap();
    /// assert_eq!(x.gather(1, &i).to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn gather(&self, dim: impl DimIndex, index: &Tensor) -> Tensor {
        let d = dim.resolve("gather", &self.shape_exprs());
        Tensor::apply(Op::Gather { dim: d }, &[self, index], SmallVec::new())
    }

    /// `self` with slice `k` of `src` added at `index[k]` along `dim`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::zeros(&[3], lazyxla::DType::F32);
    /// let i = Tensor::from_vec(vec![0i64, 0, 2], &[3]).unwrap();
    /// let src = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// assert_eq!(x.index_add(0, &i, &src).to_vec::<f32>().unwrap(), vec![3.0, 0.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn index_add(&self, dim: impl DimIndex, index: &Tensor, src: &Tensor) -> Tensor {
        let d = dim.resolve("index_add", &self.shape_exprs());
        Tensor::apply(
            Op::IndexAdd { dim: d },
            &[self, index, &src.to_dtype(self.dtype())],
            SmallVec::new(),
        )
    }

    /// PyTorch's `scatter_add` along `dim`: `self` with `src[i][j]` added
    /// at `[index[i][j]][j]` for `dim = 0`; duplicate indices accumulate.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let idx = Tensor::from_vec(vec![1i64, 1, 0], &[3]).unwrap();
    /// let src = Tensor::from_vec(vec![1.0f32, 2.0, 4.0], &[3]).unwrap();
    /// let out = Tensor::zeros(&[2], DType::F32).scatter_add(0, &idx, &src);
    /// assert_eq!(out.to_vec::<f32>().unwrap(), vec![4.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn scatter_add(&self, dim: impl DimIndex, index: &Tensor, src: &Tensor) -> Tensor {
        self.scatter_with(ScatterMode::Add, dim, index, src)
    }

    /// PyTorch's `scatter` along `dim`: `self` with `[index[i][j]][j]` set
    /// to `src[i][j]` for `dim = 0` (the index has `self`'s rank; outside
    /// `dim` its sizes are at most `self`'s; `src` has the index's shape,
    /// or a larger static one whose leading part is used). With duplicate
    /// indices the reference backend keeps the last in row-major order of
    /// the index, XLA any one of them (PyTorch leaves it unspecified).
    /// Gradients: the source's is the output's gathered at `index`; the
    /// overwritten positions of `self` get none.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let idx = Tensor::from_vec(vec![2i64, 0], &[1, 2]).unwrap();
    /// let src = Tensor::from_vec(vec![5.0f32, 6.0], &[1, 2]).unwrap();
    /// let out = Tensor::zeros(&[3, 2], DType::F32).scatter(0, &idx, &src);
    /// assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 6.0, 0.0, 0.0, 5.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn scatter(&self, dim: impl DimIndex, index: &Tensor, src: &Tensor) -> Tensor {
        self.scatter_with(ScatterMode::Overwrite, dim, index, src)
    }

    #[track_caller]
    fn scatter_with(
        &self,
        mode: ScatterMode,
        dim: impl DimIndex,
        index: &Tensor,
        src: &Tensor,
    ) -> Tensor {
        let op = Op::Scatter { dim: 0, mode };
        let d = dim.resolve(op.name(), &self.shape_exprs());
        // As PyTorch, a larger (static) source contributes its leading part.
        let mut src = src.to_dtype(self.dtype());
        let (want, have) = (index.shape_exprs(), src.shape_exprs());
        if want.len() == have.len() {
            for (j, (w, h)) in want.iter().zip(&have).enumerate() {
                if let (Some(w), Some(h)) = (w.as_const(), h.as_const()) {
                    if w < h {
                        src = src.narrow(j, 0, w as usize);
                    }
                }
            }
        }
        Tensor::apply(
            Op::Scatter { dim: d, mode },
            &[self, index, &src],
            SmallVec::new(),
        )
    }

    /// `self` with its true-`mask` positions (row-major) replaced by the
    /// elements of the 1-D `src`, in order.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::zeros(&[4], lazyxla::DType::F32);
    /// let mask = Tensor::from_vec(vec![true, false, true, false], &[4]).unwrap();
    /// let src = Tensor::from_vec(vec![5.0f32, 6.0, 7.0, 8.0], &[4]).unwrap();
    /// assert_eq!(x.masked_scatter(&mask, &src).to_vec::<f32>().unwrap(), vec![5.0, 0.0, 6.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn masked_scatter(&self, mask: &Tensor, src: &Tensor) -> Tensor {
        Tensor::apply(
            Op::MaskedScatter,
            &[self, mask, &src.to_dtype(self.dtype())],
            SmallVec::new(),
        )
    }

    /// Softmax along `dim` (stable: the maximum is subtracted first).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 0.0], &[2]).unwrap();
    /// assert_eq!(x.softmax(0).to_vec::<f32>().unwrap(), vec![0.5, 0.5]);
    /// ```
    #[track_caller]
    pub fn softmax(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("softmax", &self.shape_exprs());
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.to_dtype(crate::DType::F32)
        };
        // The shift cancels in the result, so no gradient goes through it
        // (as PyTorch's and JAX's): the max's backward would be a
        // compare, a count and a scatter over the whole input for zero.
        let e = (&x - &x.max_keepdim_unchecked(d).detach()).exp();
        &e / &e.sum_dims(&[d], true)
    }

    /// Log of softmax along `dim`, computed stably.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// let total: f32 = x.log_softmax(0).exp().to_vec::<f32>().unwrap().iter().sum();
    /// assert!((total - 1.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn log_softmax(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("log_softmax", &self.shape_exprs());
        let x = if self.dtype().is_float() {
            self.clone()
        } else {
            self.to_dtype(crate::DType::F32)
        };
        // The shift cancels (see `softmax`): no gradient through it.
        let shifted = &x - &x.max_keepdim_unchecked(d).detach();
        let lse = shifted.exp().sum_dims(&[d], true).log();
        &shifted - &lse
    }
}
