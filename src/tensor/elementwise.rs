//! Elementwise ops: arithmetic and math functions, each one primitive of
//! the op table (`ir::elementwise`) on operands promoted and broadcast as
//! in PyTorch (`broadcast.rs`).

use super::broadcast::Rhs;
use super::{record, Tensor};
use crate::dtype::DType;
use crate::ir::node::Inputs;
use crate::ir::{BinaryOp, CmpOp, Node, Op, UnaryOp};
use smallvec::SmallVec;
use std::sync::Arc;

impl Tensor {
    #[track_caller]
    pub(crate) fn binary(&self, op: BinaryOp, rhs: Rhs<'_>) -> Tensor {
        let name = Op::Binary(op).name();
        let float = float_result(op);
        let (a, b) = self.operands(name, rhs, float);
        self.record_on_device(Op::Binary(op), [a, b])
    }

    #[track_caller]
    pub(super) fn compare(&self, op: CmpOp, rhs: Rhs<'_>) -> Tensor {
        let (a, b) = self.operands(Op::Compare(op).name(), rhs, false);
        self.record_on_device(Op::Compare(op), [a, b])
    }

    #[track_caller]
    pub(crate) fn unary(&self, op: UnaryOp) -> Tensor {
        let x = if op.rule().float_only() && !self.dtype().is_float() {
            self.to_dtype(DType::F32)
        } else {
            self.clone()
        };
        Tensor::apply(Op::Unary(op), &[&x], SmallVec::new())
    }

    /// `self + other` with broadcasting and promotion.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.add(&b).to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    /// assert_eq!((&a + &b).to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn add(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Add, Rhs::Tensor(other))
    }
    /// `self - other`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.sub(&b).to_vec::<f32>().unwrap(), vec![-1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn sub(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Sub, Rhs::Tensor(other))
    }
    /// `self * other`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.mul(&b).to_vec::<f32>().unwrap(), vec![2.0, 8.0]);
    /// ```
    #[track_caller]
    pub fn mul(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Mul, Rhs::Tensor(other))
    }
    /// `self / other` (true division: integers give F32, as in PyTorch).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.div(&b).to_vec::<f32>().unwrap(), vec![0.5, 2.0]);
    /// ```
    #[track_caller]
    pub fn div(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Div, Rhs::Tensor(other))
    }
    /// Elementwise maximum.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.maximum(&b).to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn maximum(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Max, Rhs::Tensor(other))
    }
    /// Elementwise minimum.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.minimum(&b).to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn minimum(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Min, Rhs::Tensor(other))
    }
    /// `self ** other` elementwise (float).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![2.0f32, 3.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![3.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.pow_tensor(&b).to_vec::<f32>().unwrap(), vec![8.0, 9.0]);
    /// ```
    #[track_caller]
    pub fn pow_tensor(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Pow, Rhs::Tensor(other))
    }
    /// Remainder with the sign of the divisor (PyTorch's `remainder`).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![5.0f32, 7.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![3.0f32, 3.0], &[2]).unwrap();
    /// assert_eq!(a.remainder(&b).to_vec::<f32>().unwrap(), vec![2.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn remainder(&self, other: &Tensor) -> Tensor {
        self.binary(BinaryOp::Rem, Rhs::Tensor(other))
    }

    /// `self + v`; a Rust number does not widen a tensor's float type.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.add_scalar(1.0).to_vec::<f32>().unwrap(), vec![2.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn add_scalar(&self, v: f64) -> Tensor {
        self.binary(BinaryOp::Add, Rhs::Scalar(v, DType::F64))
    }
    /// `self - v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.sub_scalar(1.0).to_vec::<f32>().unwrap(), vec![0.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn sub_scalar(&self, v: f64) -> Tensor {
        self.binary(BinaryOp::Sub, Rhs::Scalar(v, DType::F64))
    }
    /// `self * v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.mul_scalar(3.0).to_vec::<f32>().unwrap(), vec![3.0, 12.0]);
    /// ```
    #[track_caller]
    pub fn mul_scalar(&self, v: f64) -> Tensor {
        self.binary(BinaryOp::Mul, Rhs::Scalar(v, DType::F64))
    }
    /// `self / v`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.div_scalar(2.0).to_vec::<f32>().unwrap(), vec![0.5, 2.0]);
    /// ```
    #[track_caller]
    pub fn div_scalar(&self, v: f64) -> Tensor {
        self.binary(BinaryOp::Div, Rhs::Scalar(v, DType::F64))
    }
    /// `v - self` (promoted first, so a bool tensor is subtracted, not
    /// negated).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.rsub_scalar(10.0).to_vec::<f32>().unwrap(), vec![9.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn rsub_scalar(&self, v: f64) -> Tensor {
        self.reversed(BinaryOp::Sub, v, DType::F64)
    }

    /// `v op self` for a Rust number `v` of category `dt`, with the same
    /// promotion as `self op v`.
    #[track_caller]
    pub(crate) fn reversed(&self, op: BinaryOp, v: f64, dt: DType) -> Tensor {
        let name = Op::Binary(op).name();
        let float = float_result(op);
        let (a, b) = self.operands(name, Rhs::Scalar(v, dt), float);
        self.record_on_device(Op::Binary(op), [b, a])
    }
    /// `self ** e` (float).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.pow(2.0).to_vec::<f32>().unwrap(), vec![1.0, 16.0]);
    /// ```
    #[track_caller]
    pub fn pow(&self, e: f64) -> Tensor {
        self.binary(BinaryOp::Pow, Rhs::Scalar(e, DType::F64))
    }
    /// Clamps every element to `[lo, hi]`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 0.5, 2.0], &[3]).unwrap();
    /// assert_eq!(x.clamp(0.0, 1.0).to_vec::<f32>().unwrap(), vec![0.0, 0.5, 1.0]);
    /// ```
    #[track_caller]
    pub fn clamp(&self, lo: f64, hi: f64) -> Tensor {
        self.binary(BinaryOp::Max, Rhs::Scalar(lo, DType::F64))
            .binary(BinaryOp::Min, Rhs::Scalar(hi, DType::F64))
    }

    /// `-self`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 4.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![2.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(a.neg().to_vec::<f32>().unwrap(), vec![-1.0, -4.0]);
    /// ```
    #[track_caller]
    pub fn neg(&self) -> Tensor {
        self.unary(UnaryOp::Neg)
    }
    /// `|self|`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(x.abs().to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn abs(&self) -> Tensor {
        self.unary(UnaryOp::Abs)
    }
    /// `e^self`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    /// assert!((x.exp().item::<f32>().unwrap() - 1.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn exp(&self) -> Tensor {
        self.unary(UnaryOp::Exp)
    }
    /// Natural logarithm.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    /// assert!((x.log().item::<f32>().unwrap() - 0.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn log(&self) -> Tensor {
        self.unary(UnaryOp::Log)
    }
    /// Square root.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![4.0f32, 9.0], &[2]).unwrap();
    /// assert_eq!(x.sqrt().to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn sqrt(&self) -> Tensor {
        self.unary(UnaryOp::Sqrt)
    }
    /// `1 / sqrt(self)`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![4.0f32], &[1]).unwrap();
    /// assert!((x.rsqrt().item::<f32>().unwrap() - 0.5).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn rsqrt(&self) -> Tensor {
        self.unary(UnaryOp::Rsqrt)
    }
    /// Hyperbolic tangent.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    /// assert!((x.tanh().item::<f32>().unwrap() - 0.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn tanh(&self) -> Tensor {
        self.unary(UnaryOp::Tanh)
    }
    /// Logistic sigmoid.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    /// assert!((x.sigmoid().item::<f32>().unwrap() - 0.5).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn sigmoid(&self) -> Tensor {
        self.unary(UnaryOp::Sigmoid)
    }
    /// Error function.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    /// assert!((x.erf().item::<f32>().unwrap() - 0.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn erf(&self) -> Tensor {
        self.unary(UnaryOp::Erf)
    }
    /// Rounds down.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.5f32, -1.5], &[2]).unwrap();
    /// assert_eq!(x.floor().to_vec::<f32>().unwrap(), vec![1.0, -2.0]);
    /// ```
    #[track_caller]
    pub fn floor(&self) -> Tensor {
        self.unary(UnaryOp::Floor)
    }
    /// -1, 0 or 1.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-3.0f32, 0.0, 2.0], &[3]).unwrap();
    /// assert_eq!(x.sign().to_vec::<f32>().unwrap(), vec![-1.0, 0.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn sign(&self) -> Tensor {
        self.unary(UnaryOp::Sign)
    }
    /// Sine.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    /// assert!((x.sin().item::<f32>().unwrap() - 0.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn sin(&self) -> Tensor {
        self.unary(UnaryOp::Sin)
    }
    /// Cosine.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    /// assert!((x.cos().item::<f32>().unwrap() - 1.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn cos(&self) -> Tensor {
        self.unary(UnaryOp::Cos)
    }
    /// `max(self, 0)`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(x.relu().to_vec::<f32>().unwrap(), vec![0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn relu(&self) -> Tensor {
        self.binary(BinaryOp::Max, Rhs::Scalar(0.0, DType::I64))
    }
    /// GELU, exact form `x/2 * (1 + erf(x/sqrt(2)))` (PyTorch's default).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
    /// assert!((x.gelu().item::<f32>().unwrap() - 0.0).abs() < 1e-6);
    /// ```
    #[track_caller]
    pub fn gelu(&self) -> Tensor {
        let x = self.unary_float();
        let e = x
            .mul_scalar(std::f64::consts::FRAC_1_SQRT_2)
            .erf()
            .add_scalar(1.0);
        x.mul(&e).mul_scalar(0.5)
    }
    /// GELU, tanh approximation `x/2 * (1 + tanh(sqrt(2/pi) * (x +
    /// 0.044715 x^3)))`: PyTorch's `gelu(x, approximate="tanh")`, GPT-2's
    /// `gelu_new`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let y = x.gelu_tanh().to_vec::<f32>().unwrap();
    /// assert!((y[0] + 0.158808).abs() < 1e-5 && y[1] == 0.0 && (y[2] - 1.954598).abs() < 1e-5);
    /// ```
    #[track_caller]
    pub fn gelu_tanh(&self) -> Tensor {
        let x = self.unary_float();
        let cube = x.mul(&x).mul(&x);
        let inner = x
            .add(&cube.mul_scalar(0.044715))
            .mul_scalar((2.0 / std::f64::consts::PI).sqrt());
        x.mul(&inner.tanh().add_scalar(1.0)).mul_scalar(0.5)
    }
    /// Square.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![-3.0f32], &[1]).unwrap();
    /// assert_eq!(x.square().to_vec::<f32>().unwrap(), vec![9.0]);
    /// ```
    #[track_caller]
    pub fn square(&self) -> Tensor {
        self.mul(self)
    }

    /// This tensor, converted to F32 unless it is float already.
    #[track_caller]
    pub(super) fn unary_float(&self) -> Tensor {
        if self.dtype().is_float() {
            self.clone()
        } else {
            self.to_dtype(DType::F32)
        }
    }
}

/// Whether `op` gives a float for integer operands: true division (as
/// PyTorch's `/`) and the ops only defined on floats.
fn float_result(op: BinaryOp) -> bool {
    op == BinaryOp::Div || op.rule().float_only()
}

impl Tensor {
    /// Records `op` on operand nodes and wraps the result on this tensor's
    /// device.
    #[track_caller]
    fn record_on_device(&self, op: Op, operands: [Arc<Node>; 2]) -> Tensor {
        let node = record(op, Inputs::from_iter(operands), SmallVec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_node(node, self.device())
    }
}
