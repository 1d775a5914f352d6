//! Inference of the layout family: ops that move, repeat, cut, place or
//! rename their operand's elements (`Op::family`), values unchanged.

use super::{check_dim, same_dtype, shape_string, size_mismatch, sorted_distinct};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ir::check::{CheckKind, SizeCheck};
use crate::ir::node::Node;
use crate::ir::sharding::Sharding;
use crate::symint::{Shape, SizeExpr};
use std::sync::Arc;

/// One operand constrained to a sharding of its rank.
pub(super) fn sharding(
    name: &'static str,
    s: &Sharding,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    if s.tiles().len() != x.shape.len() {
        return Err(Error::invalid(
            name,
            format!(
                "a sharding of rank {} for a value of rank {}",
                s.tiles().len(),
                x.shape.len()
            ),
        ));
    }
    Ok((x.dtype, x.shape.clone()))
}

/// One operand placed into `shape`; a dim of size 1 or of the target size.
pub(super) fn broadcast(
    name: &'static str,
    shape: &Shape,
    dims: &[usize],
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    if dims.len() != x.shape.len()
        || dims.windows(2).any(|w| w[0] >= w[1])
        || dims.iter().any(|&d| d >= shape.len())
    {
        return Err(Error::internal(
            name,
            format!(
                "bad dims {dims:?} for {} -> {}",
                shape_string(&x.shape),
                shape_string(shape)
            ),
        ));
    }
    for (i, &d) in dims.iter().enumerate() {
        let (from, to) = (&x.shape[i], &shape[d]);
        if from != to && from.as_const() != Some(1) {
            return Err(size_mismatch(name, from, to, &x.shape, shape));
        }
    }
    Ok((x.dtype, shape.clone()))
}

/// One operand of as many elements as `shape`, with at most one dynamic dim that XLA can express.
pub(super) fn reshape(
    name: &'static str,
    shape: &Shape,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    let (from, to) = (numel(&x.shape), numel(shape));
    if from != to {
        return Err(Error::shape(
            name,
            format!(
                "cannot reshape {} ({} elements) into {} ({} elements): the element counts must be equal; pass sizes whose product is {}, or -1 for one size to infer it",
                shape_string(&x.shape),
                count_string(&from),
                shape_string(shape),
                count_string(&to),
                count_string(&from),
            ),
        ));
    }
    // Inserting or removing size-1 dims keeps every dynamic dim as
    // it is, which XLA expresses; otherwise a dynamic dim would be
    // split or merged into several dynamic dims, which it cannot.
    let non_unit = |s: &[SizeExpr]| -> Shape {
        s.iter()
            .filter(|d| d.as_const() != Some(1))
            .cloned()
            .collect()
    };
    if shape.iter().filter(|d| d.as_const().is_none()).count() > 1
        && non_unit(&x.shape) != non_unit(shape)
    {
        return Err(Error::shape(
            name,
            format!(
                "cannot reshape {} into {}: the result would have more than one dynamic dimension, which XLA cannot express; pad_to_bound(fill) the input first",
                shape_string(&x.shape),
                shape_string(shape)
            ),
        ));
    }
    Ok((x.dtype, shape.clone()))
}

/// One operand with its dims permuted by `perm`.
pub(super) fn transpose(
    name: &'static str,
    perm: &[usize],
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    let mut sorted = perm.to_vec();
    sorted.sort_unstable();
    if sorted != (0..x.shape.len()).collect::<Vec<_>>() {
        return Err(Error::shape(
            name,
            format!(
                "{perm:?} is not a permutation of the dims of {}",
                shape_string(&x.shape)
            ),
        ));
    }
    Ok((x.dtype, perm.iter().map(|&p| x.shape[p].clone()).collect()))
}

/// `len` elements from `start` along `dim` (see [`slice_size`]).
pub(super) fn slice(
    name: &'static str,
    dim: usize,
    start: usize,
    len: usize,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    check_dim(name, dim, &x.shape)?;
    let mut out = x.shape.clone();
    out[dim] = slice_size(&x.shape, dim, start, len)?;
    Ok((x.dtype, out))
}

/// Operands of one dtype and rank, equal off `dim`: their sizes along it add up.
pub(super) fn concat(dim: usize, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::invalid("cat", "needs at least one tensor"))?;
    check_dim("cat", dim, &first.shape)?;
    let mut total = SizeExpr::constant(0);
    for x in inputs.iter() {
        same_dtype("cat", first, x)?;
        if x.shape.len() != first.shape.len() {
            return Err(Error::shape(
                "cat",
                format!(
                    "all tensors need the same rank; got {} and {}",
                    shape_string(&first.shape),
                    shape_string(&x.shape)
                ),
            ));
        }
        for d in 0..x.shape.len() {
            if d != dim && x.shape[d] != first.shape[d] {
                return Err(size_mismatch(
                    "cat",
                    &first.shape[d],
                    &x.shape[d],
                    &first.shape,
                    &x.shape,
                ));
            }
        }
        total = total.add(&x.shape[dim]);
    }
    let mut out = first.shape.clone();
    out[dim] = total;
    Ok((first.dtype, out))
}

/// One operand reversed along sorted, distinct `dims`.
pub(super) fn reverse(
    name: &'static str,
    dims: &[usize],
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    for &d in dims {
        check_dim(name, d, &x.shape)?;
    }
    sorted_distinct(name, dims)?;
    Ok((x.dtype, x.shape.clone()))
}

/// One operand as the static tensor of its bound shape.
pub(super) fn pad_to_bound(inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    Ok((
        x.dtype,
        x.shape
            .iter()
            .map(|d| SizeExpr::constant(d.hi().max(0)))
            .collect(),
    ))
}

/// One operand with its padding along `dims` filled: its dtype and shape.
pub(super) fn fill_padding(
    name: &'static str,
    dims: &[usize],
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    if let Some(&d) = dims.iter().find(|&&d| d >= x.shape.len()) {
        return Err(Error::internal(
            name,
            format!("dim {d} of a rank-{} operand", x.shape.len()),
        ));
    }
    Ok((x.dtype, x.shape.clone()))
}

/// One operand renamed to `shape`: every size that changes is checked equal (or within a bound) by `checks`.
pub(super) fn guard(
    name: &'static str,
    shape: &Shape,
    checks: &[SizeCheck],
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    if shape.len() != x.shape.len() {
        return Err(Error::internal(
            name,
            format!(
                "the shape {} has another rank than the operand's {}",
                shape_string(shape),
                shape_string(&x.shape)
            ),
        ));
    }
    for (from, to) in x.shape.iter().zip(shape.iter()) {
        let checked = from == to
            || checks.iter().any(|c| match c.kind {
                CheckKind::Equal => {
                    (&c.lhs, &c.rhs) == (from, to) || (&c.lhs, &c.rhs) == (to, from)
                }
                // A size checked to fit a bound, given that bound.
                CheckKind::AtMost => &c.lhs == from && *to == from.minimum(&c.rhs),
                CheckKind::NonNegative | CheckKind::MultipleOf => false,
            });
        if !checked {
            return Err(Error::internal(
                name,
                format!("the size {to} replaces {from} without a check"),
            ));
        }
    }
    Ok((x.dtype, shape.clone()))
}

fn numel(shape: &[SizeExpr]) -> SizeExpr {
    shape
        .iter()
        .fold(SizeExpr::constant(1), |acc, d| acc.mul(d))
}

/// An element count for messages: `6`, or `s0*3` with its bounds.
fn count_string(n: &SizeExpr) -> String {
    match n.as_const() {
        Some(c) => c.to_string(),
        None => format!("{n} in [{}, {}]", n.lo(), n.hi()),
    }
}

/// The size of `len` elements from `start` along `dim`: exactly `len` on
/// a static dim (where running past the end is an error), and on a
/// dynamic dim the real elements from `start`, at most `len` (Python's
/// `x[start:start + len]`, which clamps).
fn slice_size(shape: &[SizeExpr], dim: usize, start: usize, len: usize) -> Result<SizeExpr> {
    let size = &shape[dim];
    let (start_e, end_e) = (
        SizeExpr::constant(start as i64),
        SizeExpr::constant(start.saturating_add(len) as i64),
    );
    match size.as_const() {
        Some(n) if start.saturating_add(len) > n as usize => Err(Error::shape(
            "narrow",
            format!(
                "start {start} + length {len} exceeds the size {n} of dim {dim} (shape {})",
                shape_string(shape)
            ),
        )),
        Some(_) => Ok(SizeExpr::constant(len as i64)),
        None if start as i64 >= size.hi() => Ok(SizeExpr::constant(0)),
        None => {
            let real = size.minimum(&end_e).sub(&start_e);
            Ok(if real.lo() >= 0 {
                real
            } else {
                real.maximum(&SizeExpr::constant(0))
            })
        }
    }
}
