//! Sorting: `sort`, `argsort` and `topk`, all from one primitive
//! (`Op::Argsort`, the stable sorting permutation or its first `k`) and
//! `gather`.

use super::dim::{DimIndex, ResolveDim};
use super::guard::non_negative_checks;
use super::Tensor;
use crate::error::Error;
use crate::ir::Op;
use crate::symint::SizeExpr;
use smallvec::SmallVec;

impl Tensor {
    /// The values sorted along `dim` and the I64 indices they came from
    /// (PyTorch's `torch.sort(stable=True)`): equal values keep their
    /// order, NaN sorts as the largest value (last ascending, first
    /// `descending`). Along a dynamic dim only the real elements are
    /// sorted; the result has the input's sizes. Gradients flow to the
    /// values through the indices.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![3.0f32, f32::NAN, 1.0, 3.0], &[4]).unwrap();
    /// let (v, i) = x.sort(0, false);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 0, 3, 1]);
    /// assert_eq!(&v.to_vec::<f32>().unwrap()[..3], &[1.0, 3.0, 3.0]);
    /// let (_, i) = x.sort(0, true);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 0, 3, 2]);
    /// ```
    #[track_caller]
    pub fn sort(&self, dim: impl DimIndex, descending: bool) -> (Tensor, Tensor) {
        let d = dim.resolve("sort", &self.shape_exprs());
        let idx = self.argsort(d, descending);
        (self.gather(d, &idx), idx)
    }

    /// The I64 indices that sort `self` along `dim`: the second result of
    /// [`sort`](Tensor::sort).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![2i64, 0, 1, 3], &[2, 2]).unwrap();
    /// assert_eq!(x.argsort(1, false).to_vec::<i64>().unwrap(), vec![1, 0, 0, 1]);
    /// assert_eq!(x.argsort(0, true).to_vec::<i64>().unwrap(), vec![0, 1, 1, 0]);
    /// ```
    #[track_caller]
    pub fn argsort(&self, dim: impl DimIndex, descending: bool) -> Tensor {
        let d = dim.resolve("argsort", &self.shape_exprs());
        let op = Op::Argsort {
            dim: d,
            descending,
            first: None,
        };
        Tensor::apply(op, &[self], SmallVec::new())
    }

    /// The `k` largest (or, with `largest = false`, smallest) values along
    /// `dim`, sorted (descending for the largest, ascending for the
    /// smallest, as PyTorch), and their I64 indices; ties keep the lower
    /// index first, NaN counts as the largest value.
    ///
    /// The result's `dim` has size `k`. Along a dynamic dim of size `n`
    /// (`[<=N]`, with `k <= N`), as PyTorch, fewer than `k` real elements
    /// are an error: when the program runs, `n >= k` is checked and a
    /// failing check fails the step (`Error::SizeCheckFailed`). For "at
    /// most `k`", pad first: `x.pad_to_bound(f64::NEG_INFINITY).topk(k, ..)`.
    /// Panics when `k` exceeds the size (or bound) of `dim`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.5f32, 2.0, -1.0, 2.0, 1.0], &[5]).unwrap();
    /// let (v, i) = x.topk(3, 0, true);
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![2.0, 2.0, 1.0]);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 3, 4]);
    /// let (v, _) = x.masked_select(&x.gt_scalar(0.0)).topk(2, 0, false);
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![0.5, 1.0]);
    /// assert_eq!(v.size(0).as_static(), Some(2));
    /// ```
    #[track_caller]
    pub fn topk(&self, k: usize, dim: impl DimIndex, largest: bool) -> (Tensor, Tensor) {
        let shape = self.shape_exprs();
        let d = dim.resolve("topk", &shape);
        let size = &shape[d];
        if k as i64 > size.hi() {
            panic!(
                "{}",
                Error::shape(
                    "topk",
                    format!(
                        "k = {k} is larger than the size {} of dimension {d} (shape {}); choose k at most the size",
                        size.hi(),
                        self.shape_string()
                    ),
                )
            );
        }
        let op = Op::Argsort {
            dim: d,
            descending: largest,
            first: Some(k),
        };
        let mut idx = Tensor::apply(op, &[self], SmallVec::new());
        if size.as_const().is_none() {
            // Fewer than `k` real elements fail the step, as in PyTorch.
            let short = size.sub(&SizeExpr::constant(k as i64));
            let checks = non_negative_checks("topk", std::slice::from_ref(&short))
                .unwrap_or_else(|e| panic!("{e}"));
            idx = idx.checked(checks, &[self.node()]);
        }
        (self.gather(d, &idx), idx)
    }
}
