//! Gradients of the elementwise ops: the `grad:` column of the table in
//! `ir::elementwise`, plus the rules too long for a row.

use super::rules::Grads;
use crate::ir::elementwise::{binary_ops, unary_ops};
use crate::ir::{BinaryOp, UnaryOp};
use crate::tensor::Tensor;
use smallvec::smallvec;

/// A row's one-operand gradient `f(g, a, out)` (typed here, so the row's
/// closure needs no annotation).
#[track_caller]
fn unary_grad(
    f: impl Fn(&Tensor, &Tensor, &Tensor) -> Tensor,
    g: &Tensor,
    a: &Tensor,
    out: &Tensor,
) -> Grads {
    smallvec![Some(f(g, a, out))]
}

/// A row's two-operand gradients `f(g, a, b, out)`.
#[track_caller]
fn binary_grads(
    f: impl Fn(&Tensor, &Tensor, &Tensor, &Tensor) -> (Tensor, Tensor),
    g: &Tensor,
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
) -> Grads {
    let (da, db) = f(g, a, b, out);
    smallvec![Some(da), Some(db)]
}

/// A row's `grad:` column: `(none)` or a function.
macro_rules! row_grad {
    ((none), $n:literal, $($x:ident),+) => {
        smallvec![None; $n]
    };
    (($f:expr), 1, $($x:ident),+) => {
        unary_grad($f, $($x),+)
    };
    (($f:expr), 2, $($x:ident),+) => {
        binary_grads($f, $($x),+)
    };
}

macro_rules! unary_rules {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        /// The gradient of `u` at operand `a`, whose result is `out`.
        #[track_caller]
        pub(super) fn unary(u: UnaryOp, g: &Tensor, a: &Tensor, out: &Tensor) -> Grads {
            match u {
                $( UnaryOp::$Var => row_grad!($grad, 1, g, a, out), )*
            }
        }
    };
}
unary_ops!(unary_rules);

macro_rules! binary_rules {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        /// The gradients of `op` at operands `a` and `b`, whose result is
        /// `out`.
        #[track_caller]
        pub(super) fn binary(op: BinaryOp, g: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Grads {
            match op {
                $( BinaryOp::$Var => row_grad!($grad, 2, g, a, b, out), )*
            }
        }
    };
}
binary_ops!(binary_rules);

/// The gradients of `a ** c`.
#[track_caller]
fn pow_grads(g: &Tensor, a: &Tensor, c: &Tensor, out: &Tensor) -> (Tensor, Tensor) {
    let da = g * &(c * &a.pow_tensor(&(c - 1.0)));
    // d/dc a^c = a^c ln a, defined as 0 where a == 0 (as PyTorch).
    let dc = a
        .eq_scalar(0.0)
        .where_cond(&g.zeros_like(), &(g * &(out * &a.log())));
    (da, dc)
}

/// The gradients of a maximum or minimum of `a` and `c`: `a` takes the
/// gradient where it `wins` (is the larger, for a maximum), `c` where `a`
/// `loses`, and ties split it.
#[track_caller]
fn extremum_grads(
    g: &Tensor,
    a: &Tensor,
    c: &Tensor,
    wins: Tensor,
    loses: Tensor,
) -> (Tensor, Tensor) {
    let half = g * 0.5;
    let zero = g.zeros_like();
    let da = wins.where_cond(g, &a.eq(c).where_cond(&half, &zero));
    let dc = loses.where_cond(g, &a.eq(c).where_cond(&half, &zero));
    (da, dc)
}
