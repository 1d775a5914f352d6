//! Elementwise ops: broadcasting and dtype promotion as in PyTorch, then
//! one primitive.

use super::{record, size_deps_for, Tensor};
use crate::dtype::{result_type, DType, Priority};
use crate::ir::infer::size_mismatch;
use crate::ir::node::shape_string;
use crate::ir::node::Inputs;
use crate::ir::{BinaryOp, CmpOp, Op, UnaryOp};
use crate::ir::{Lit, Node};
use crate::symint::{Shape, SizeExpr};
use smallvec::SmallVec;
use std::sync::Arc;

/// The right operand of a binary op.
#[derive(Clone, Copy)]
pub(crate) enum Rhs<'a> {
    Tensor(&'a Tensor),
    /// A Rust number; its dtype only decides the category (see `Priority`).
    Scalar(f64, DType),
}

#[track_caller]
pub(super) fn priority(t: &Tensor) -> Priority {
    if t.rank() == 0 {
        Priority::ZeroDim
    } else {
        Priority::Dimensioned
    }
}

/// The broadcast shape of two shapes (right-aligned, size 1 stretches);
/// panics with the message of [`try_broadcast_shapes`].
#[track_caller]
pub(crate) fn broadcast_shapes(op: &'static str, a: &[SizeExpr], b: &[SizeExpr]) -> Shape {
    try_broadcast_shapes(op, a, b).unwrap_or_else(|e| panic!("{e}"))
}

/// The broadcast shape of two shapes, or the error naming both shapes and
/// the way to make them broadcast.
#[track_caller]
pub(crate) fn try_broadcast_shapes(
    op: &'static str,
    a: &[SizeExpr],
    b: &[SizeExpr],
) -> crate::Result<Shape> {
    let r = a.len().max(b.len());
    let one = SizeExpr::constant(1);
    (0..r)
        .map(|i| {
            let x = if i + a.len() >= r {
                &a[i + a.len() - r]
            } else {
                &one
            };
            let y = if i + b.len() >= r {
                &b[i + b.len() - r]
            } else {
                &one
            };
            if x == y || y.as_const() == Some(1) {
                Ok(x.clone())
            } else if x.as_const() == Some(1) {
                Ok(y.clone())
            } else if x.as_const().is_none() || y.as_const().is_none() {
                // Sizes recording cannot tell apart: checked equal when the
                // program runs (the operands are unified by a guard), unless
                // the bounds already rule it out.
                match crate::ir::check::SizeCheck::equal(op, x, y).decided() {
                    Some(false) => Err(size_mismatch(op, x, y, a, b)),
                    _ if y.as_const().is_some() => Ok(y.clone()),
                    _ => Ok(x.clone()),
                }
            } else {
                Err(crate::Error::shape(
                    op,
                    format!(
                        "cannot broadcast shapes {} and {}: sizes {x} and {y} at dim {i} of the result are neither equal nor 1; reshape, expand or narrow an operand so that they broadcast",
                        shape_string(a),
                        shape_string(b)
                    ),
                ))
            }
        })
        .collect()
}

impl Tensor {
    /// This tensor broadcast to `shape` (right-aligned); `others` may hold
    /// the nodes defining `shape`'s dynamic sizes.
    #[track_caller]
    pub(crate) fn broadcast_to(&self, shape: &[SizeExpr], others: &[&Tensor]) -> Tensor {
        self.broadcast_for("expand", shape, others)
    }

    /// [`Tensor::broadcast_to`] for `op`, which names the size checks it
    /// records (see [`try_broadcast_shapes`]).
    #[track_caller]
    pub(crate) fn broadcast_for(
        &self,
        op: &'static str,
        shape: &[SizeExpr],
        others: &[&Tensor],
    ) -> Tensor {
        let node = self.node();
        if node.shape[..] == *shape {
            return self.clone();
        }
        let candidates: Vec<Arc<Node>> = others.iter().map(|t| t.node()).collect();
        let x = super::guard::unify_for_broadcast(op, &self.input_node(), shape, &candidates)
            .unwrap_or_else(|e| panic!("{e}"));
        if x.shape[..] == *shape {
            return Tensor::from_node(x, self.device());
        }
        let node = record(
            broadcast_op(&x.shape, shape),
            Inputs::from_iter([x]),
            size_deps_for(shape, &candidates),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_node(node, self.device())
    }

    /// This tensor converted to `dtype` (no op when it already is).
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let i = x.to_dtype(DType::I64);
    /// assert_eq!(i.dtype(), DType::I64);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2]);
    /// ```
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        Tensor::apply(Op::Convert(dtype), &[self], SmallVec::new())
    }

    /// The operand node of this tensor converted to `dtype` (an intermediate
    /// node: no `Tensor` is made for the conversion).
    #[track_caller]
    fn input_node_as(&self, dtype: DType) -> Arc<Node> {
        let n = self.input_node();
        if n.dtype == dtype {
            return n;
        }
        record(Op::Convert(dtype), smallvec::smallvec![n], SmallVec::new())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Promotes and broadcasts both operands; `float` forces a float result
    /// type (true division, float-only functions). Returns operand nodes:
    /// the scalar and broadcast intermediates need no `Tensor`.
    #[track_caller]
    fn operands(&self, op: &'static str, rhs: Rhs<'_>, float: bool) -> (Arc<Node>, Arc<Node>) {
        let (rdt, rprio) = match rhs {
            Rhs::Tensor(t) => (t.dtype(), priority(t)),
            Rhs::Scalar(_, d) => (d, Priority::Scalar),
        };
        let mut dt = result_type(&[(self.dtype(), priority(self)), (rdt, rprio)]);
        if float && !dt.is_float() {
            dt = DType::F32;
        }
        let a = self.input_node_as(dt);
        match rhs {
            Rhs::Tensor(t) => {
                if !t.device().same(self.device()) {
                    panic!(
                        "{}",
                        crate::Error::DeviceMismatch {
                            op,
                            lhs: self.device().to_string(),
                            rhs: t.device().to_string()
                        }
                    );
                }
                let b = t.input_node_as(dt);
                if a.shape == b.shape {
                    return (a, b);
                }
                let shape = broadcast_shapes(op, &a.shape, &b.shape);
                (
                    broadcast_node(op, &a, &shape, &b),
                    broadcast_node(op, &b, &shape, &a),
                )
            }
            Rhs::Scalar(v, _) => {
                let b = splat::shared_or(v, dt, &a.shape, || {
                    let s = record(
                        Op::Scalar {
                            value: Lit(v),
                            dtype: dt,
                        },
                        Inputs::new(),
                        SmallVec::new(),
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                    broadcast_node(op, &s, &a.shape, &a)
                });
                (a, b)
            }
        }
    }

    #[track_caller]
    pub(crate) fn binary(&self, op: BinaryOp, rhs: Rhs<'_>) -> Tensor {
        let name = Op::Binary(op).name();
        let float = float_result(op);
        let (a, b) = self.operands(name, rhs, float);
        self.record_on_device(Op::Binary(op), [a, b])
    }

    #[track_caller]
    fn compare(&self, op: CmpOp, rhs: Rhs<'_>) -> Tensor {
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

/// Whether `op` gives a float for integer operands: true division (as
/// PyTorch's `/`) and the ops only defined on floats.
fn float_result(op: BinaryOp) -> bool {
    op == BinaryOp::Div || op.rule().float_only()
}

/// The op broadcasting `from` into `to` (right-aligned).
#[track_caller]
fn broadcast_op(from: &[SizeExpr], to: &[SizeExpr]) -> Op {
    Op::Broadcast {
        shape: to.iter().cloned().collect(),
        dims: (to.len() - from.len()..to.len()).collect(),
    }
}

/// `x` broadcast to `shape`, whose dynamic sizes `other` defines, for
/// `op` (which names the size checks it records).
#[track_caller]
fn broadcast_node(
    op: &'static str,
    x: &Arc<Node>,
    shape: &[SizeExpr],
    other: &Arc<Node>,
) -> Arc<Node> {
    if x.shape[..] == *shape {
        return x.clone();
    }
    let others = std::slice::from_ref(other);
    let x =
        super::guard::unify_for_broadcast(op, x, shape, others).unwrap_or_else(|e| panic!("{e}"));
    if x.shape[..] == *shape {
        return x;
    }
    let deps = size_deps_for(shape, others);
    let mut inputs = Inputs::new();
    inputs.push(x.clone());
    record(broadcast_op(&x.shape, shape), inputs, deps).unwrap_or_else(|e| panic!("{e}"))
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

/// A comparison with an integral number keeps an integer tensor's dtype.
#[track_caller]
fn scalar_cmp_dtype(v: f64) -> DType {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        DType::I64
    } else {
        DType::F64
    }
}

/// Scalar operands broadcast to static shapes, shared between the ops
/// (and steps) that use them: a training step multiplies by the same
/// constants every time, and the two nodes of a constant (the scalar and
/// its broadcast) cost twice what the op using them does to record
/// (`benches/record.rs`). Nodes never change once made, so a graph that
/// shares one computes what it would with its own; a trace meets it once.
/// Per thread, and bounded: past `CAPACITY` entries the cache starts over.
mod splat {
    use crate::dtype::DType;
    use crate::ir::Node;
    use crate::symint::SizeExpr;
    use rustc_hash::FxHashMap;
    use smallvec::SmallVec;
    use std::cell::RefCell;
    use std::sync::Arc;

    const CAPACITY: usize = 256;

    type Key = (u64, DType, SmallVec<[i64; 4]>);

    thread_local! {
        static SPLATS: RefCell<FxHashMap<Key, Arc<Node>>> = RefCell::new(FxHashMap::default());
    }

    /// The key of `v` as `dtype` at `shape`, if the shape is static.
    #[track_caller]
    fn key(v: f64, dtype: DType, shape: &[SizeExpr]) -> Option<Key> {
        let dims = shape
            .iter()
            .map(SizeExpr::as_const)
            .collect::<Option<_>>()?;
        Some((v.to_bits(), dtype, dims))
    }

    /// The shared node of `v` as `dtype` broadcast to `shape`, made by
    /// `make` (and kept, when the shape is static) if there is none.
    #[track_caller]
    pub(super) fn shared_or(
        v: f64,
        dtype: DType,
        shape: &[SizeExpr],
        make: impl FnOnce() -> Arc<Node>,
    ) -> Arc<Node> {
        let Some(k) = key(v, dtype, shape) else {
            return make();
        };
        if let Some(n) = SPLATS.with(|m| m.borrow().get(&k).cloned()) {
            return n;
        }
        // Made outside the borrow, so that recording can never find the
        // cache borrowed.
        let n = make();
        SPLATS.with(|m| {
            let mut m = m.borrow_mut();
            if m.len() >= CAPACITY {
                m.clear();
            }
            m.insert(k, n.clone());
        });
        n
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;
    use std::sync::Arc;

    /// The broadcast operand of `t`'s op (its second input).
    fn operand(t: &Tensor) -> Arc<crate::ir::Node> {
        t.node().inputs[1].clone()
    }

    #[test]
    fn a_scalar_operand_at_a_static_shape_is_one_node_shared_by_its_uses() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let b = Tensor::from_vec(vec![3.0f32, 4.0], &[2]).unwrap();
        let (x, y) = (&a * 0.5, &b * 0.5);
        assert!(Arc::ptr_eq(&operand(&x), &operand(&y)));
        // Another value, dtype or shape is another node.
        assert!(!Arc::ptr_eq(&operand(&x), &operand(&(&a * 0.25))));
        let c = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
        assert!(!Arc::ptr_eq(&operand(&x), &operand(&(&c * 0.5))));
        let d = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap();
        assert!(!Arc::ptr_eq(&operand(&x), &operand(&(&d * 0.5))));
        // Shared, the program still computes each use.
        assert_eq!((&x + &y).to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    }
}
