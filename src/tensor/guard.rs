//! Recording size checks (`ir::check`): where an op needs two sizes equal
//! and recording can neither prove nor refute it, the operand is wrapped
//! in an `Op::Guard` that gives it the other size and checks, when the
//! program runs, that they agree. Ops after it then see one size.

use super::{record, size_deps_for, Tensor};
use crate::ir::check::SizeCheck;
use crate::ir::infer::size_mismatch;
use crate::ir::node::Inputs;
use crate::ir::{Node, Op};
use crate::symint::{Shape, SizeExpr};
use crate::Result;
use std::sync::Arc;

/// `x` checked by `checks` and given the sizes `shape` (see `Op::Guard`);
/// `others` may define the variables of `shape`. `x` itself when there is
/// nothing to check.
#[track_caller]
pub(crate) fn guard_node(
    x: &Arc<Node>,
    shape: Shape,
    checks: Vec<SizeCheck>,
    others: &[Arc<Node>],
) -> Result<Arc<Node>> {
    if checks.is_empty() && x.shape == shape {
        return Ok(x.clone());
    }
    let mut candidates = vec![x.clone()];
    candidates.extend(others.iter().cloned());
    let mut exprs: Vec<SizeExpr> = shape.to_vec();
    for c in &checks {
        exprs.push(c.lhs.clone());
        exprs.push(c.rhs.clone());
    }
    let deps = size_deps_for(&exprs, &candidates);
    let mut inputs = Inputs::new();
    inputs.push(x.clone());
    record(
        Op::Guard {
            shape,
            checks: checks.into(),
        },
        inputs,
        deps,
    )
}

/// `x` given the sizes `shape` (same rank): each size that differs from
/// `x`'s own is checked equal to it when the program runs. An error when
/// a pair is proven unequal (different constants, disjoint bounds).
#[track_caller]
pub(crate) fn unify_node(
    op: &'static str,
    x: &Arc<Node>,
    shape: &[SizeExpr],
    others: &[Arc<Node>],
) -> Result<Arc<Node>> {
    if x.shape[..] == *shape {
        return Ok(x.clone());
    }
    let mut checks = Vec::new();
    // The size kept first: `a - b` relabels `b`, and the message names
    // `a`'s size first.
    for (a, b) in x.shape.iter().zip(shape) {
        let check = SizeCheck::equal(op, b, a);
        match check.decided() {
            Some(true) => {}
            Some(false) => return Err(size_mismatch(op, a, b, &x.shape, shape)),
            None => checks.push(check),
        }
    }
    guard_node(x, shape.iter().cloned().collect(), checks, others)
}

/// `x`, about to be broadcast to `shape` (right-aligned), with each of its
/// sizes that is not 1 unified with the size it broadcasts to.
#[track_caller]
pub(crate) fn unify_for_broadcast(
    op: &'static str,
    x: &Arc<Node>,
    shape: &[SizeExpr],
    others: &[Arc<Node>],
) -> Result<Arc<Node>> {
    let offset = shape.len().saturating_sub(x.shape.len());
    let target: Shape = x
        .shape
        .iter()
        .enumerate()
        .map(|(i, d)| match shape.get(offset + i) {
            Some(to) if d.as_const() != Some(1) => to.clone(),
            _ => d.clone(),
        })
        .collect();
    unify_node(op, x, &target, others)
}

/// The checks that the sizes `shape` are not negative, for those whose
/// bounds allow it; an error for a size proven negative.
#[track_caller]
pub(crate) fn non_negative_checks(op: &'static str, shape: &[SizeExpr]) -> Result<Vec<SizeCheck>> {
    let mut checks = Vec::new();
    for d in shape {
        let check = SizeCheck::non_negative(op, d);
        match check.decided() {
            Some(true) => {}
            Some(false) => {
                return Err(crate::Error::shape(
                    op,
                    format!(
                        "the size {d} is negative (at most {}); sizes must be at least 0",
                        d.hi()
                    ),
                ))
            }
            None => checks.push(check),
        }
    }
    Ok(checks)
}

/// `max(e, 0)`: the size a possibly-negative expression gives a shape
/// (its check, from [`non_negative_checks`], fails the step when it is
/// negative, so the clamp never hides one).
#[track_caller]
pub(crate) fn clamp_size(e: &SizeExpr) -> SizeExpr {
    if e.lo() >= 0 {
        e.clone()
    } else {
        e.maximum(&SizeExpr::constant(0))
    }
}

impl Tensor {
    /// This tensor given the sizes `shape` with their checks (see
    /// [`unify_node`]); panics when a pair is proven unequal.
    #[track_caller]
    pub(crate) fn unify_to(
        &self,
        op: &'static str,
        shape: &[SizeExpr],
        others: &[&Tensor],
    ) -> Tensor {
        let others: Vec<Arc<Node>> = others.iter().map(|t| t.node()).collect();
        let node =
            unify_node(op, &self.input_node(), shape, &others).unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_node(node, self.device())
    }

    /// This tensor, once `checks` hold when the program runs (itself when
    /// there are none); `others` may define the checks' variables.
    #[track_caller]
    pub(crate) fn checked(&self, checks: Vec<SizeCheck>, others: &[Arc<Node>]) -> Tensor {
        if checks.is_empty() {
            return self.clone();
        }
        let node = self.input_node();
        let node =
            guard_node(&node, node.shape.clone(), checks, others).unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_node(node, self.device())
    }

    /// The gradient of a guard: `self` (shaped like the guard's result)
    /// given `like`'s sizes under the guard's own `checks`.
    #[track_caller]
    pub(crate) fn guard_back(&self, like: &Tensor, checks: &Arc<[SizeCheck]>) -> Tensor {
        let shape = like.shape_exprs();
        let deps = size_deps_for(&shape, &[like.node()]);
        Tensor::apply(
            Op::Guard {
                shape,
                checks: checks.clone(),
            },
            &[self],
            deps,
        )
    }
}
