//! The elementwise op table: one row per op gives its name, the dtypes it
//! accepts, its reference kernel, its StableHLO lowering and its gradient.
//!
//! Each stage expands the rows where it lives, as candle's `unary_op!`
//! rows become its kernels: this module makes [`UnaryOp`], [`BinaryOp`]
//! and [`CmpOp`] with their names and [`DTypeRule`]s, and infers their
//! nodes; `backend::reference::elementwise` makes the kernels,
//! `backend::pjrt::lower::math` the StableHLO and `autograd::elementwise`
//! the gradients. Every expansion is an exhaustive `match` over the op
//! enum, so a row cannot miss a stage, and a new op is one row here plus
//! its `Tensor` method.
//!
//! A row's columns are tokens that only the expanding stage resolves, so
//! this layer imports nothing of the later ones:
//! - `reference:` for `Numeric` a function of any `Num` (the reference's
//!   arithmetic with XLA's integer semantics, `Num::neg`); for `Float`
//!   an `f64` function (f32 is computed in f64 and rounded, so both
//!   widths agree with XLA to within rounding); for `Logical` a `bool`
//!   function; for `FloatTest` an `f64 -> bool` test. Halves never reach
//!   a kernel: the reference computes them in f32.
//! - `stablehlo:` a StableHLO op name applied to the operands as they
//!   are, or the name of a `Ctx` method in `lower/math.rs` for a lowering
//!   of several ops.
//! - `grad:` a function of the output gradient `g`, the operands and the
//!   output (`|g, a, out|`, `|g, a, b, out|`) written with the `Tensor`
//!   API, or `(none)` for an op no gradient flows through.
//!
//! Comparisons need no `stablehlo:` column (all are `compare` with the
//! direction `lower::emit` names, which the lowering's own comparisons
//! share) and no `grad:` (a Bool result carries none).

use super::infer::{same_dtype, same_shape};
use super::node::{shape_string, Node};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::Shape;
use std::sync::Arc;

/// The rows of the elementwise functions of one operand: `$then!` gets
/// them all (see the module docs for the columns).
macro_rules! unary_ops {
    ($then:ident) => {
        $then! {
            /// `-x`.
            Neg = "neg", Numeric,
                reference: Num::neg, stablehlo: "negate",
                grad: (|g, _a, _out| g.neg());
            /// `|x|`.
            Abs = "abs", Numeric,
                reference: Num::abs, stablehlo: "abs",
                grad: (|g, a, _out| g * &a.sign());
            /// `e^x`.
            Exp = "exp", Float,
                reference: f64::exp, stablehlo: "exponential",
                grad: (|g, _a, out| g * out);
            /// The natural logarithm.
            Log = "log", Float,
                reference: f64::ln, stablehlo: "log",
                grad: (|g, a, _out| g / a);
            /// The square root.
            Sqrt = "sqrt", Float,
                reference: f64::sqrt, stablehlo: "sqrt",
                grad: (|g, _a, out| g * &(out.reciprocal() * 0.5));
            /// `1 / sqrt(x)`.
            Rsqrt = "rsqrt", Float,
                reference: |x| 1.0 / x.sqrt(), stablehlo: rsqrt,
                grad: (|g, _a, out| g * &(out * out * out * -0.5));
            /// The hyperbolic tangent.
            Tanh = "tanh", Float,
                reference: f64::tanh, stablehlo: "tanh",
                grad: (|g, _a, out| g * &(1.0 - out * out));
            /// `1 / (1 + e^-x)`.
            Sigmoid = "sigmoid", Float,
                reference: |x| 1.0 / (1.0 + (-x).exp()), stablehlo: sigmoid,
                grad: (|g, _a, out| g * &(out * &(1.0 - out)));
            /// The error function.
            Erf = "erf", Float,
                reference: erf, stablehlo: erf,
                grad: (|g, a, _out| g * &((a * a).neg().exp() * std::f64::consts::FRAC_2_SQRT_PI));
            /// Rounds down.
            Floor = "floor", Float,
                reference: f64::floor, stablehlo: "floor",
                grad: (|g, _a, _out| g.zeros_like());
            /// -1, 0 or 1 by the sign; a float's ±0 and NaN are kept.
            Sign = "sign", Numeric,
                reference: Num::sign, stablehlo: sign,
                grad: (|g, _a, _out| g.zeros_like());
            /// The sine.
            Sin = "sin", Float,
                reference: f64::sin, stablehlo: "sine",
                grad: (|g, a, _out| g * &a.cos());
            /// The cosine.
            Cos = "cos", Float,
                reference: f64::cos, stablehlo: "cosine",
                grad: (|g, a, _out| g * &a.sin().neg());
            /// Logical negation (Bool only).
            Not = "not", Logical,
                reference: |v| !v, stablehlo: "not",
                grad: (none);
            /// `ln(1 + x)`, accurate near 0 (StableHLO's `log_plus_one`).
            Log1p = "log1p", Float,
                reference: f64::ln_1p, stablehlo: "log_plus_one",
                grad: (|g, a, _out| g / &(a + 1.0));
            /// `e^x - 1`, accurate near 0 (StableHLO's `exponential_minus_one`).
            Expm1 = "expm1", Float,
                reference: f64::exp_m1, stablehlo: "exponential_minus_one",
                grad: (|g, _a, out| g * &(out + 1.0));
            /// Rounds up.
            Ceil = "ceil", Float,
                reference: f64::ceil, stablehlo: "ceil",
                grad: (|g, _a, _out| g.zeros_like());
            /// Rounds to the nearest integer, ties to even (PyTorch's `round`).
            RoundNearestEven = "round", Float,
                reference: f64::round_ties_even, stablehlo: "round_nearest_even",
                grad: (|g, _a, _out| g.zeros_like());
            /// True where the element is neither infinite nor NaN: a float
            /// operand, a Bool result.
            IsFinite = "isfinite", FloatTest,
                reference: f64::is_finite, stablehlo: is_finite,
                grad: (none);
        }
    };
}
pub(crate) use unary_ops;

/// The rows of the elementwise functions of two operands of one dtype and
/// shape: `$then!` gets them all (see the module docs for the columns).
macro_rules! binary_ops {
    ($then:ident) => {
        $then! {
            /// `a + b` (integers wrap).
            Add = "add", Numeric,
                reference: Num::add, stablehlo: "add",
                grad: (|g, _a, _b, _out| (g.clone(), g.clone()));
            /// `a - b` (integers wrap).
            Sub = "sub", Numeric,
                reference: Num::sub, stablehlo: "subtract",
                grad: (|g, _a, _b, _out| (g.clone(), g.neg()));
            /// `a * b` (integers wrap).
            Mul = "mul", Numeric,
                reference: Num::mul, stablehlo: "multiply",
                grad: (|g, a, b, _out| (g * b, g * a));
            /// Floats: true division; integers: truncating division, `x / 0`
            /// giving -1 and `MIN / -1` giving `MIN` (never a trap).
            Div = "div", Numeric,
                reference: Num::div, stablehlo: divide,
                grad: (|g, _a, b, out| (g / b, (g * out / b).neg()));
            /// `a ** b` (float).
            Pow = "pow", Float,
                reference: f64::powf, stablehlo: "power",
                grad: (pow_grads);
            /// The larger; NaN propagates, as in PyTorch and XLA.
            Max = "max", Numeric,
                reference: |a, b| if a.is_nan() || a > b { a } else { b },
                stablehlo: maximum,
                grad: (|g, a, b, _out| extremum_grads(g, a, b, a.gt(b), a.lt(b)));
            /// The smaller; NaN propagates, as in PyTorch and XLA.
            Min = "min", Numeric,
                reference: |a, b| if a.is_nan() || a < b { a } else { b },
                stablehlo: minimum,
                grad: (|g, a, b, _out| extremum_grads(g, a, b, a.lt(b), a.gt(b)));
            /// Remainder with the sign of the divisor (PyTorch's
            /// `remainder`); an integer remainder by 0 is the dividend.
            Rem = "rem", Numeric,
                reference: Num::rem, stablehlo: remainder,
                grad: (|g, a, b, _out| (g.clone(), (g * &(a / b).floor()).neg()));
            /// Logical and (Bool only).
            And = "and", Logical,
                reference: |a, b| a && b, stablehlo: "and",
                grad: (none);
            /// Logical or (Bool only).
            Or = "or", Logical,
                reference: |a, b| a || b, stablehlo: "or",
                grad: (none);
        }
    };
}
pub(crate) use binary_ops;

/// The rows of the comparisons (any dtype, a Bool result): `$then!` gets
/// them all (see the module docs for the columns).
macro_rules! compare_ops {
    ($then:ident) => {
        $then! {
            /// `a == b`.
            Eq = "eq", reference: |a, b| a == b;
            /// `a != b`.
            Ne = "ne", reference: |a, b| a != b;
            /// `a < b`.
            Lt = "lt", reference: |a, b| a < b;
            /// `a <= b`.
            Le = "le", reference: |a, b| a <= b;
            /// `a > b`.
            Gt = "gt", reference: |a, b| a > b;
            /// `a >= b`.
            Ge = "ge", reference: |a, b| a >= b;
        }
    };
}
pub(crate) use compare_ops;

/// Which operand dtypes an elementwise op accepts, and its result's.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DTypeRule {
    /// Floats (halves included); the result has the operand's dtype.
    Float,
    /// Integers and floats; the result has the operand's dtype.
    Numeric,
    /// Bool only.
    Logical,
    /// Floats; a Bool result (a test of each element).
    FloatTest,
}

impl DTypeRule {
    /// Whether an operand of `dtype` is accepted.
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            DTypeRule::Float | DTypeRule::FloatTest => dtype.is_float(),
            DTypeRule::Numeric => dtype != DType::Bool,
            DTypeRule::Logical => dtype == DType::Bool,
        }
    }

    /// The result's dtype for an accepted operand of `dtype`.
    pub fn result(self, dtype: DType) -> DType {
        match self {
            DTypeRule::Float | DTypeRule::Numeric | DTypeRule::Logical => dtype,
            DTypeRule::FloatTest => DType::Bool,
        }
    }

    /// Whether only floats are accepted: the tensor API converts an
    /// integer operand to F32 first, as PyTorch does for `exp`.
    pub fn float_only(self) -> bool {
        matches!(self, DTypeRule::Float | DTypeRule::FloatTest)
    }
}

/// Makes an op enum from the rows, with its names and dtype rules.
macro_rules! define_ops {
    ($(#[$enum_attr:meta])* $Enum:ident {
        $( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident; )*
    }) => {
        $(#[$enum_attr])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $Enum {
            $( $(#[$attr])* $Var, )*
        }

        impl $Enum {
            /// The op's name as the printer shows it.
            pub fn name(self) -> &'static str {
                match self {
                    $( $Enum::$Var => $name, )*
                }
            }

            /// The dtypes the op accepts.
            pub fn rule(self) -> DTypeRule {
                match self {
                    $( $Enum::$Var => DTypeRule::$rule, )*
                }
            }
        }
    };
}

macro_rules! define_unary {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        define_ops! {
            /// Elementwise functions of one operand (the rows of `unary_ops!`).
            UnaryOp { $( $(#[$attr])* $Var = $name, $rule; )* }
        }
    };
}
unary_ops!(define_unary);

macro_rules! define_binary {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        define_ops! {
            /// Elementwise functions of two operands of the same dtype and
            /// shape (the rows of `binary_ops!`).
            BinaryOp { $( $(#[$attr])* $Var = $name, $rule; )* }
        }
    };
}
binary_ops!(define_binary);

macro_rules! define_compare {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, reference: $kernel:expr; )*) => {
        /// Elementwise comparisons of two operands of the same dtype and
        /// shape; the result is Bool (the rows of `compare_ops!`).
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum CmpOp {
            $( $(#[$attr])* $Var, )*
        }

        impl CmpOp {
            /// The op's name as the printer shows it.
            pub fn name(self) -> &'static str {
                match self {
                    $( CmpOp::$Var => $name, )*
                }
            }
        }
    };
}
compare_ops!(define_compare);

/// The error for an operand dtype the op's rule does not accept.
fn rejected(op: &'static str, dtype: DType, shapes: String) -> Error {
    Error::dtype(
        op,
        format!("does not accept dtype {dtype} ({shapes}); convert with to_dtype first"),
    )
}

/// Inference of `Op::Unary`: one operand of a dtype its rule accepts.
pub(super) fn infer_unary(name: &'static str, u: UnaryOp, x: &Node) -> Result<(DType, Shape)> {
    let rule = u.rule();
    if !rule.accepts(x.dtype) {
        let shape = format!("shape {}", shape_string(&x.shape));
        return Err(rejected(name, x.dtype, shape));
    }
    Ok((rule.result(x.dtype), x.shape.clone()))
}

/// Inference of `Op::Binary`: two operands of one dtype, which its rule
/// accepts, and one shape.
pub(super) fn infer_binary(
    name: &'static str,
    b: BinaryOp,
    x: &Node,
    y: &Node,
) -> Result<(DType, Shape)> {
    same_dtype(name, x, y)?;
    let rule = b.rule();
    if !rule.accepts(x.dtype) {
        let shapes = format!(
            "operand shapes {} and {}",
            shape_string(&x.shape),
            shape_string(&y.shape)
        );
        return Err(rejected(name, x.dtype, shapes));
    }
    same_shape(name, x, y)?;
    Ok((rule.result(x.dtype), x.shape.clone()))
}

/// Inference of `Op::Compare`: two operands of one dtype and shape.
pub(super) fn infer_compare(name: &'static str, x: &Node, y: &Node) -> Result<(DType, Shape)> {
    same_dtype(name, x, y)?;
    same_shape(name, x, y)?;
    Ok((DType::Bool, x.shape.clone()))
}

/// Inference of `Op::Select`: a Bool condition and two branches of one
/// dtype, all of one shape.
pub(super) fn infer_select(name: &'static str, ins: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let (c, t, f) = (&ins[0], &ins[1], &ins[2]);
    if c.dtype != DType::Bool {
        return Err(Error::dtype(
            name,
            format!("the condition must be bool, got {}", c.dtype),
        ));
    }
    same_dtype(name, t, f)?;
    same_shape(name, c, t)?;
    same_shape(name, t, f)?;
    Ok((t.dtype, t.shape.clone()))
}
