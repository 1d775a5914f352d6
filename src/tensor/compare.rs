//! Comparisons (to Bool), logical ops and `where_cond`: elementwise ops
//! with a Bool result or condition.

use super::broadcast::{broadcast_shapes, priority, Rhs};
use super::Tensor;
use crate::dtype::{result_type, DType};
use crate::ir::{BinaryOp, CmpOp, Op, UnaryOp};
use smallvec::SmallVec;

impl Tensor {
    /// Elementwise `==` (Bool).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0, 2.0], &[3]).unwrap();
    /// assert_eq!(a.eq(&b).to_vec::<bool>().unwrap(), vec![false, true, false]);
    /// ```
    pub fn eq(&self, other: &Tensor) -> Tensor {
        self.compare(CmpOp::Eq, Rhs::Tensor(other))
    }
    /// Elementwise `!=`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0, 2.0], &[3]).unwrap();
    /// assert_eq!(a.ne(&b).to_vec::<bool>().unwrap(), vec![true, false, true]);
    /// ```
    #[track_caller]
    pub fn ne(&self, other: &Tensor) -> Tensor {
        self.compare(CmpOp::Ne, Rhs::Tensor(other))
    }
    /// Elementwise `<`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0, 2.0], &[3]).unwrap();
    /// assert_eq!(a.lt(&b).to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    #[track_caller]
    pub fn lt(&self, other: &Tensor) -> Tensor {
        self.compare(CmpOp::Lt, Rhs::Tensor(other))
    }
    /// Elementwise `<=`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0, 2.0], &[3]).unwrap();
    /// assert_eq!(a.le(&b).to_vec::<bool>().unwrap(), vec![true, true, false]);
    /// ```
    #[track_caller]
    pub fn le(&self, other: &Tensor) -> Tensor {
        self.compare(CmpOp::Le, Rhs::Tensor(other))
    }
    /// Elementwise `>`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0, 2.0], &[3]).unwrap();
    /// assert_eq!(a.gt(&b).to_vec::<bool>().unwrap(), vec![false, false, true]);
    /// ```
    #[track_caller]
    pub fn gt(&self, other: &Tensor) -> Tensor {
        self.compare(CmpOp::Gt, Rhs::Tensor(other))
    }
    /// Elementwise `>=`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0, 2.0], &[3]).unwrap();
    /// assert_eq!(a.ge(&b).to_vec::<bool>().unwrap(), vec![false, true, true]);
    /// ```
    #[track_caller]
    pub fn ge(&self, other: &Tensor) -> Tensor {
        self.compare(CmpOp::Ge, Rhs::Tensor(other))
    }
    /// `self == v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// assert_eq!(a.eq_scalar(2.0).to_vec::<bool>().unwrap(), vec![false, true, false]);
    /// ```
    #[track_caller]
    pub fn eq_scalar(&self, v: f64) -> Tensor {
        self.compare(CmpOp::Eq, Rhs::Scalar(v, scalar_cmp_dtype(v)))
    }
    /// `self != v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// assert_eq!(a.ne_scalar(2.0).to_vec::<bool>().unwrap(), vec![true, false, true]);
    /// ```
    #[track_caller]
    pub fn ne_scalar(&self, v: f64) -> Tensor {
        self.compare(CmpOp::Ne, Rhs::Scalar(v, scalar_cmp_dtype(v)))
    }
    /// `self < v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// assert_eq!(a.lt_scalar(2.0).to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    #[track_caller]
    pub fn lt_scalar(&self, v: f64) -> Tensor {
        self.compare(CmpOp::Lt, Rhs::Scalar(v, scalar_cmp_dtype(v)))
    }
    /// `self <= v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// assert_eq!(a.le_scalar(2.0).to_vec::<bool>().unwrap(), vec![true, true, false]);
    /// ```
    #[track_caller]
    pub fn le_scalar(&self, v: f64) -> Tensor {
        self.compare(CmpOp::Le, Rhs::Scalar(v, scalar_cmp_dtype(v)))
    }
    /// `self > v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// assert_eq!(a.gt_scalar(2.0).to_vec::<bool>().unwrap(), vec![false, false, true]);
    /// ```
    #[track_caller]
    pub fn gt_scalar(&self, v: f64) -> Tensor {
        self.compare(CmpOp::Gt, Rhs::Scalar(v, scalar_cmp_dtype(v)))
    }
    /// `self >= v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    /// assert_eq!(a.ge_scalar(2.0).to_vec::<bool>().unwrap(), vec![false, true, true]);
    /// ```
    #[track_caller]
    pub fn ge_scalar(&self, v: f64) -> Tensor {
        self.compare(CmpOp::Ge, Rhs::Scalar(v, scalar_cmp_dtype(v)))
    }

    /// This tensor as Bool: itself, or `!= 0` (NaN is true).
    #[track_caller]
    pub(super) fn to_bool(&self) -> Tensor {
        if self.dtype() == DType::Bool {
            self.clone()
        } else {
            self.ne_scalar(0.0)
        }
    }
    /// Logical and (nonzero is true).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 0.0, 1.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![1.0f32, 1.0, 0.0], &[3]).unwrap();
    /// assert_eq!(a.logical_and(&b).to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    #[track_caller]
    pub fn logical_and(&self, other: &Tensor) -> Tensor {
        self.to_bool()
            .binary(BinaryOp::And, Rhs::Tensor(&other.to_bool()))
    }
    /// Logical or.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 0.0, 0.0], &[3]).unwrap();
    /// let b = Tensor::from_vec(vec![0.0f32, 1.0, 0.0], &[3]).unwrap();
    /// assert_eq!(a.logical_or(&b).to_vec::<bool>().unwrap(), vec![true, true, false]);
    /// ```
    #[track_caller]
    pub fn logical_or(&self, other: &Tensor) -> Tensor {
        self.to_bool()
            .binary(BinaryOp::Or, Rhs::Tensor(&other.to_bool()))
    }
    /// Logical not.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 0.0], &[2]).unwrap();
    /// assert_eq!(a.logical_not().to_vec::<bool>().unwrap(), vec![false, true]);
    /// ```
    #[track_caller]
    pub fn logical_not(&self) -> Tensor {
        self.to_bool().unary(UnaryOp::Not)
    }

    /// `on_true` where `self` is true (nonzero), else `on_false`; all three
    /// broadcast together, the branches promote together.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(x.gt_scalar(0.0).where_cond(&x, &x.zeros_like()).to_vec::<f32>().unwrap(), vec![0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn where_cond(&self, on_true: &Tensor, on_false: &Tensor) -> Tensor {
        let c = self.to_bool();
        let dt = result_type(&[
            (on_true.dtype(), priority(on_true)),
            (on_false.dtype(), priority(on_false)),
        ]);
        let (t, f) = (on_true.to_dtype(dt), on_false.to_dtype(dt));
        let s1 = broadcast_shapes("where_cond", &c.shape_exprs(), &t.shape_exprs());
        let shape = broadcast_shapes("where_cond", &s1, &f.shape_exprs());
        let all = [&c, &t, &f];
        Tensor::apply(
            Op::Select,
            &[
                &c.broadcast_for("where", &shape, &all),
                &t.broadcast_for("where", &shape, &all),
                &f.broadcast_for("where", &shape, &all),
            ],
            SmallVec::new(),
        )
    }
}

/// A comparison with an integral number keeps an integer tensor's dtype.
#[track_caller]
fn scalar_cmp_dtype(v: f64) -> DType {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        DType::I64
    } else {
        DType::F64
    }
}
