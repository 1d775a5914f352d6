//! Pointwise functions for models: clamps with one bound or with tensor
//! bounds, activations (`silu`, `leaky_relu`, `elu`, `softplus`), the
//! unary primitives `log1p`, `expm1`, `ceil`, `round`, and float
//! classification (`isnan`, `isfinite`).
//!
//! Clamps and piecewise activations are selects over elementwise
//! primitives, so they cost one compare and one select, run on dynamic
//! tensors as every elementwise op does, and their gradients are
//! PyTorch's at the kinks (a clamp passes the gradient where the input
//! lies within its bounds, ends included). A branch that a select
//! discards is computed on a safe input, so its gradient (zero) never
//! meets an infinity and turns into NaN.

use super::broadcast::priority;
use super::Tensor;
use crate::dtype::{result_type, DType, Priority};
use crate::error::Error;
use crate::ir::UnaryOp;

impl Tensor {
    /// Every element at least `lo` (PyTorch's `clamp_min`; integer
    /// tensors give F32, as [`clamp`](Tensor::clamp) does). NaN stays NaN;
    /// a NaN bound gives NaN everywhere. The gradient passes where
    /// `self >= lo`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0], &[3]).unwrap();
    /// assert_eq!(x.clamp_min(0.0).to_vec::<f32>().unwrap(), vec![0.0, 0.5, 3.0]);
    /// ```
    #[track_caller]
    pub fn clamp_min(&self, lo: f64) -> Tensor {
        self.clamp_scalar(lo, true)
    }

    /// Every element at most `hi` (PyTorch's `clamp_max`), as
    /// [`clamp_min`](Tensor::clamp_min) from above.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0], &[3]).unwrap();
    /// assert_eq!(x.clamp_max(1.0).to_vec::<f32>().unwrap(), vec![-2.0, 0.5, 1.0]);
    /// ```
    #[track_caller]
    pub fn clamp_max(&self, hi: f64) -> Tensor {
        self.clamp_scalar(hi, false)
    }

    #[track_caller]
    fn clamp_scalar(&self, bound: f64, lower: bool) -> Tensor {
        let dt = result_type(&[
            (self.dtype(), priority(self)),
            (DType::F64, Priority::Scalar),
        ]);
        let x = self.to_dtype(dt);
        if bound.is_nan() {
            return x.full_like(f64::NAN);
        }
        let outside = if lower {
            x.lt_scalar(bound)
        } else {
            x.gt_scalar(bound)
        };
        outside.where_cond(&x.full_like(bound), &x)
    }

    /// `self` clamped elementwise to `[lo, hi]` with tensor bounds
    /// (PyTorch's `clamp(min=tensor, max=tensor)`): all three broadcast
    /// and promote together, the result is `min(max(self, lo), hi)` (so
    /// `hi` wins where `lo > hi`), and a NaN anywhere gives NaN there.
    /// Gradients: `self` where `lo <= self <= hi`, `lo` where it clamps,
    /// `hi` where it clamps.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-2.0f32, 0.5, 3.0, 1.0], &[2, 2]).unwrap();
    /// let lo = Tensor::from_vec(vec![0.0f32, 1.0], &[2]).unwrap();
    /// let hi = Tensor::scalar(2.0f32);
    /// let y = x.clamp_tensor(&lo, &hi);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn clamp_tensor(&self, lo: &Tensor, hi: &Tensor) -> Tensor {
        let dt = result_type(&[
            (self.dtype(), priority(self)),
            (lo.dtype(), priority(lo)),
            (hi.dtype(), priority(hi)),
        ]);
        if dt == DType::Bool {
            panic!(
                "{}",
                Error::dtype(
                    "clamp_tensor",
                    format!(
                        "cannot clamp bool tensors (shapes {}, {} and {}); convert with to_dtype first",
                        self.shape_string(),
                        lo.shape_string(),
                        hi.shape_string()
                    )
                )
            );
        }
        let (x, lo, hi) = (self.to_dtype(dt), lo.to_dtype(dt), hi.to_dtype(dt));
        let above_lo = x.lt(&lo).where_cond(&lo, &x);
        let clamped = above_lo.gt(&hi).where_cond(&hi, &above_lo);
        if !dt.is_float() {
            return clamped;
        }
        // Comparisons with a NaN bound are false, which would keep `x`.
        let clamped = lo.isnan().where_cond(&lo, &clamped);
        hi.isnan().where_cond(&hi, &clamped)
    }

    /// SiLU (swish): `self * sigmoid(self)`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 1.0], &[2]).unwrap();
    /// let y = x.silu().to_vec::<f32>().unwrap();
    /// assert_eq!(y[0], 0.0);
    /// assert!((y[1] - 0.7310586).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn silu(&self) -> Tensor {
        let x = self.unary_float();
        &x * &x.sigmoid()
    }

    /// Leaky ReLU: `self` where positive, else `self * slope` (PyTorch's
    /// `leaky_relu(negative_slope)`; at 0 the gradient is `slope`).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-2.0f32, 3.0], &[2]).unwrap();
    /// assert_eq!(x.leaky_relu(0.1).to_vec::<f32>().unwrap(), vec![-0.2, 3.0]);
    /// ```
    #[track_caller]
    pub fn leaky_relu(&self, slope: f64) -> Tensor {
        let x = self.unary_float();
        x.gt_scalar(0.0).where_cond(&x, &(&x * slope))
    }

    /// ELU: `self` where positive, else `alpha * (exp(self) - 1)`
    /// (PyTorch's `elu(alpha)`).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 2.0, -1000.0], &[3]).unwrap();
    /// assert_eq!(x.elu(1.5).to_vec::<f32>().unwrap(), vec![0.0, 2.0, -1.5]);
    /// ```
    #[track_caller]
    pub fn elu(&self, alpha: f64) -> Tensor {
        let x = self.unary_float();
        let positive = x.gt_scalar(0.0);
        // The negative branch on min(x, 0): exp of a large x is never taken.
        let neg = positive.where_cond(&x.zeros_like(), &x);
        positive.where_cond(&x, &(&neg.expm1() * alpha))
    }

    /// Softplus `ln(1 + e^self)` with PyTorch's defaults (`beta = 1`,
    /// `threshold = 20`): above 20 it is `self` itself.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 30.0], &[2]).unwrap();
    /// let y = x.softplus().to_vec::<f32>().unwrap();
    /// assert!((y[0] - 2f32.ln()).abs() < 1e-6);
    /// assert_eq!(y[1], 30.0);
    /// ```
    #[track_caller]
    pub fn softplus(&self) -> Tensor {
        const THRESHOLD: f64 = 20.0;
        let x = self.unary_float();
        let linear = x.gt_scalar(THRESHOLD);
        // The log branch on a bounded input, so exp never overflows there.
        let safe = linear.where_cond(&x.zeros_like(), &x);
        linear.where_cond(&x, &safe.exp().log1p())
    }

    /// `ln(1 + self)`, accurate for small values (integers give F32).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// // In f32, 1 + 1e-10 is 1: `(x + 1.0).log()` would give 0.
    /// let x = Tensor::from_vec(vec![1e-10f32, 0.0], &[2]).unwrap();
    /// let y = x.log1p().to_vec::<f32>().unwrap();
    /// assert!((y[0] - 1e-10).abs() < 1e-16 && y[1] == 0.0);
    /// ```
    #[track_caller]
    pub fn log1p(&self) -> Tensor {
        self.unary(UnaryOp::Log1p)
    }

    /// `e^self - 1`, accurate for small values (integers give F32).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1e-10f32, 0.0], &[2]).unwrap();
    /// let y = x.expm1().to_vec::<f32>().unwrap();
    /// assert!((y[0] - 1e-10).abs() < 1e-16 && y[1] == 0.0);
    /// ```
    #[track_caller]
    pub fn expm1(&self) -> Tensor {
        self.unary(UnaryOp::Expm1)
    }

    /// Rounds up. Integer and bool tensors are returned as they are (as
    /// PyTorch does for integers); the gradient is 0.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-1.5f32, 0.2, 2.0], &[3]).unwrap();
    /// assert_eq!(x.ceil().to_vec::<f32>().unwrap(), vec![-1.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn ceil(&self) -> Tensor {
        self.rounding(UnaryOp::Ceil)
    }

    /// Rounds to the nearest integer, halves to the even one (PyTorch's
    /// `round`: `round(2.5) == 2`). Integer and bool tensors are returned
    /// as they are; the gradient is 0.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, -2.5, 2.6], &[5]).unwrap();
    /// assert_eq!(x.round().to_vec::<f32>().unwrap(), vec![0.0, 2.0, 2.0, -2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn round(&self) -> Tensor {
        self.rounding(UnaryOp::RoundNearestEven)
    }

    #[track_caller]
    fn rounding(&self, op: UnaryOp) -> Tensor {
        if self.dtype().is_float() {
            self.unary(op)
        } else {
            self.clone()
        }
    }

    /// True (Bool) where the element is NaN; false everywhere for
    /// integer and bool tensors.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![f32::NAN, 1.0, f32::INFINITY], &[3]).unwrap();
    /// assert_eq!(x.isnan().to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    #[track_caller]
    pub fn isnan(&self) -> Tensor {
        if self.dtype().is_float() {
            // NaN is the only value unequal to itself.
            self.ne(self)
        } else {
            self.full_like_dtype(0.0, DType::Bool)
        }
    }

    /// True (Bool) where the element is infinite (either sign), as
    /// `torch.isinf`; false everywhere for integer and bool tensors.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![f32::NAN, 1.0, f32::NEG_INFINITY, f32::INFINITY], &[4]).unwrap();
    /// assert_eq!(x.isinf().to_vec::<bool>().unwrap(), vec![false, false, true, true]);
    /// ```
    #[track_caller]
    pub fn isinf(&self) -> Tensor {
        if self.dtype().is_float() {
            self.abs().eq_scalar(f64::INFINITY)
        } else {
            self.full_like_dtype(0.0, DType::Bool)
        }
    }

    /// True (Bool) where the element is neither infinite nor NaN; true
    /// everywhere for integer and bool tensors.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![f32::NAN, 1.0, f32::NEG_INFINITY], &[3]).unwrap();
    /// assert_eq!(x.isfinite().to_vec::<bool>().unwrap(), vec![false, true, false]);
    /// ```
    #[track_caller]
    pub fn isfinite(&self) -> Tensor {
        if self.dtype().is_float() {
            self.unary(UnaryOp::IsFinite)
        } else {
            self.full_like_dtype(1.0, DType::Bool)
        }
    }
}
