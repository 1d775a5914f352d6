//! Reductions composed from primitive ones: `logsumexp` (max-shifted),
//! `var` and `std` (unbiased, from the mean).
//!
//! Each is built on `Op::Reduce` sums and maxima, whose lowering fills a
//! dynamic dim's padding with the reduction's identity, and on
//! elementwise ops; so over a dynamic dim only the real elements count,
//! and gradients come from the primitives' rules.

use super::dim::{DimIndex, ResolveDim};
use super::grad_mode::no_grad;
use super::Tensor;
use crate::symint::SizeExpr;

impl Tensor {
    /// `ln(sum(exp(self)))` along `dim`, computed stably: the maximum is
    /// subtracted first (as PyTorch, an infinite maximum is not, so
    /// `+inf` gives `+inf` and an all `-inf` or empty lane gives `-inf`).
    /// Integers give F32. Along a dynamic dim only the real elements
    /// count. The gradient is `softmax(self)` along `dim`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1000.0f32, 1000.0, 0.0, 0.0], &[2, 2]).unwrap();
    /// let y = x.logsumexp(1, false).to_vec::<f32>().unwrap();
    /// assert!((y[0] - (1000.0 + 2f32.ln())).abs() < 1e-3);
    /// assert!((y[1] - 2f32.ln()).abs() < 1e-6);
    /// assert_eq!(x.logsumexp(0, true).upper_bounds(), vec![1, 2]);
    /// ```
    #[track_caller]
    pub fn logsumexp(&self, dim: impl DimIndex, keepdim: bool) -> Tensor {
        if self.rank() == 0 {
            // PyTorch reduces a 0-d tensor as one element along dim 0 or -1.
            dim.resolve("logsumexp", &[SizeExpr::constant(1)]);
            return self.reshape(&[1]).logsumexp(0, false);
        }
        let d = dim.resolve("logsumexp", &self.shape_exprs());
        let x = self.unary_float();
        // The shift cancels out of the value, so it takes no gradient. (The
        // operand is recorded once with gradients on first: a leaf that
        // requires grad then has one node for both uses.)
        let _ = x.input_node();
        let shift = no_grad(|| {
            let m = x.max_keepdim_unchecked(d);
            let infinite = m.abs().eq_scalar(f64::INFINITY);
            infinite.where_cond(&m.zeros_like(), &m)
        });
        let out = (&x - &shift).exp().sum_dims(&[d], true).log() + &shift;
        if keepdim {
            out
        } else {
            out.squeeze(d)
        }
    }

    /// The unbiased variance along `dim` (PyTorch's `var(dim, keepdim)`,
    /// correction 1): `sum((self - mean)²) / (n - 1)`, NaN for a lane of
    /// one element or none. Float tensors only. Along a dynamic dim `n` is
    /// the real size and the padding is never read.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0], &[2, 3]).unwrap();
    /// assert_eq!(x.var(1, false).to_vec::<f32>().unwrap(), vec![1.0, 4.0]);
    /// assert_eq!(x.var(0, true).upper_bounds(), vec![1, 3]);
    /// ```
    #[track_caller]
    pub fn var(&self, dim: impl DimIndex, keepdim: bool) -> Tensor {
        self.variance("var", dim, keepdim)
    }

    /// The unbiased standard deviation along `dim`: the square root of
    /// [`var`](Tensor::var).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 5.0], &[3]).unwrap();
    /// assert_eq!(x.std(0, false).item::<f32>().unwrap(), 2.0);
    /// ```
    #[track_caller]
    pub fn std(&self, dim: impl DimIndex, keepdim: bool) -> Tensor {
        self.variance("std", dim, keepdim).sqrt()
    }

    #[track_caller]
    fn variance(&self, op: &'static str, dim: impl DimIndex, keepdim: bool) -> Tensor {
        self.require_float(op);
        if self.rank() == 0 {
            dim.resolve(op, &[SizeExpr::constant(1)]);
            return self.reshape(&[1]).variance(op, 0, false);
        }
        let shape = self.shape_exprs();
        let d = dim.resolve(op, &shape);
        let dev = self - &self.mean_dims(&[d], true);
        let squares = (&dev * &dev).sum_dims(&[d], keepdim);
        // n - 1 degrees of freedom; 0 (so 0/0 = NaN) for n <= 1.
        let dof = shape[d]
            .sub(&SizeExpr::constant(1))
            .maximum(&SizeExpr::constant(0));
        match dof.as_const() {
            Some(c) => squares.div_scalar(c as f64),
            None => squares.div(&self.size_value(dof).to_dtype(self.dtype())),
        }
    }
}
