//! Shape and dtype inference: one exhaustive `match` over [`Op`].
//!
//! Inference is the single place that decides whether an op accepts its
//! operands. It never runs anything; dynamic ops introduce size variables
//! here, with bounds from their operands' bounds: one per quantity they
//! count, shared by every op counting the same (see `ir::size_source`).

use super::check::CheckKind;
use super::node::{shape_string, Node};
use super::op::Op;
use super::size_source::{size_var, SizeKind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::{Shape, SizeExpr};
use smallvec::smallvec;
use std::sync::Arc;

/// The dtype and shape of `op` applied to `inputs`, or why it does not apply
/// (including a result no backend could hold: see [`check_representable`]).
pub(crate) fn infer(op: &Op, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let (dtype, shape) = infer_op(op, inputs)?;
    check_representable(op.name(), dtype, &shape)?;
    Ok((dtype, shape))
}

/// The largest bound of a dynamic dimension: XLA computes sizes as i32
/// (`get_dimension_size`), and so does the lowering.
pub(crate) const MAX_DYNAMIC_BOUND: i64 = i32::MAX as i64;

/// Rejects a shape whose element count or byte size (at its bounds)
/// cannot be represented, or a dynamic bound above
/// [`MAX_DYNAMIC_BOUND`], before anything reaches a plugin or an allocator
/// (XLA throws a C++ exception on such a shape, which would abort the
/// process; an allocator would abort on the byte count).
pub(crate) fn check_representable(
    op: &'static str,
    dtype: DType,
    shape: &[SizeExpr],
) -> Result<()> {
    let too_large = |why: String| {
        Err(Error::shape(
            op,
            format!(
                "the result {dtype}{} is too large: {why}; use smaller sizes (or bounds)",
                shape_string(shape)
            ),
        ))
    };
    if let Some(d) = shape
        .iter()
        .find(|d| d.as_const().is_none() && d.hi() > MAX_DYNAMIC_BOUND)
    {
        return too_large(format!(
            "the dynamic dimension's bound {} is above {MAX_DYNAMIC_BOUND}, the largest size XLA computes (i32)",
            d.hi()
        ));
    }
    let numel = shape
        .iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(d.hi().max(0) as u64));
    let bytes = numel.and_then(|n| n.checked_mul(dtype.size_in_bytes() as u64));
    match bytes {
        Some(b) if b <= isize::MAX as u64 => Ok(()),
        _ => too_large(format!(
            "its element count or byte size overflows a 64-bit address space (dims {:?})",
            shape.iter().map(|d| d.hi()).collect::<Vec<_>>()
        )),
    }
}

/// [`infer`] without the representability check.
fn infer_op(op: &Op, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let name = op.name();
    let arity = |n: usize| -> Result<()> {
        if inputs.len() == n {
            Ok(())
        } else {
            Err(Error::internal(
                name,
                format!("expected {n} operands, got {}", inputs.len()),
            ))
        }
    };
    match op {
        Op::AllReduce { kind, replicas } => {
            super::collective::all_reduce(name, *kind, *replicas, inputs)
        }
        Op::AllGather { dim, replicas } => {
            super::collective::all_gather(name, *dim, *replicas, inputs)
        }
        Op::ReduceScatter { dim, replicas } => {
            super::collective::reduce_scatter(name, *dim, *replicas, inputs)
        }
        Op::Sharding(s) => {
            arity(1)?;
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
        Op::ReplicaId => {
            arity(0)?;
            Ok((DType::I64, Shape::new()))
        }
        Op::Data { .. } => Err(Error::internal(
            name,
            "a data leaf's shape comes with its data; it is not inferred",
        )),
        Op::Scalar { dtype, .. } => {
            arity(0)?;
            Ok((*dtype, Shape::new()))
        }
        Op::Iota { dtype, shape, dim } => {
            arity(0)?;
            check_dim(name, *dim, shape)?;
            Ok((*dtype, shape.clone()))
        }
        Op::SizeOf(_) => {
            arity(0)?;
            Ok((DType::I64, Shape::new()))
        }
        Op::RandomUniform { dtype, shape } => {
            arity(1)?;
            if !dtype.is_float() {
                return Err(Error::dtype(
                    name,
                    format!("needs a float dtype, got {dtype}"),
                ));
            }
            let seed = &inputs[0];
            if seed.dtype != DType::I64 || !seed.shape.is_empty() {
                return Err(Error::dtype(name, "the seed must be an i64 scalar tensor"));
            }
            reject_dynamic(name, shape)?;
            Ok((*dtype, shape.clone()))
        }
        Op::Unary(u) => {
            arity(1)?;
            super::elementwise::infer_unary(name, *u, &inputs[0])
        }
        Op::Binary(b) => {
            arity(2)?;
            super::elementwise::infer_binary(name, *b, &inputs[0], &inputs[1])
        }
        Op::Compare(_) => {
            arity(2)?;
            super::elementwise::infer_compare(name, &inputs[0], &inputs[1])
        }
        Op::Select => {
            arity(3)?;
            super::elementwise::infer_select(name, inputs)
        }
        Op::Convert(d) => {
            arity(1)?;
            Ok((*d, inputs[0].shape.clone()))
        }
        Op::Broadcast { shape, dims } => {
            arity(1)?;
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
        Op::Reshape { shape } => {
            arity(1)?;
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
        Op::Transpose { perm } => {
            arity(1)?;
            let x = &inputs[0];
            let mut sorted = perm.clone();
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
        Op::Slice { dim, start, len } => {
            arity(1)?;
            let x = &inputs[0];
            check_dim(name, *dim, &x.shape)?;
            let mut out = x.shape.clone();
            out[*dim] = slice_size(&x.shape, *dim, *start, *len)?;
            Ok((x.dtype, out))
        }
        Op::Concat { dim } => {
            let first = inputs
                .first()
                .ok_or_else(|| Error::invalid("cat", "needs at least one tensor"))?;
            check_dim("cat", *dim, &first.shape)?;
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
                    if d != *dim && x.shape[d] != first.shape[d] {
                        return Err(size_mismatch(
                            "cat",
                            &first.shape[d],
                            &x.shape[d],
                            &first.shape,
                            &x.shape,
                        ));
                    }
                }
                total = total.add(&x.shape[*dim]);
            }
            let mut out = first.shape.clone();
            out[*dim] = total;
            Ok((first.dtype, out))
        }
        Op::Reverse { dims } => {
            arity(1)?;
            let x = &inputs[0];
            for &d in dims {
                check_dim(name, d, &x.shape)?;
            }
            sorted_distinct(name, dims)?;
            Ok((x.dtype, x.shape.clone()))
        }
        Op::PadToBound { .. } => {
            arity(1)?;
            let x = &inputs[0];
            Ok((
                x.dtype,
                x.shape
                    .iter()
                    .map(|d| SizeExpr::constant(d.hi().max(0)))
                    .collect(),
            ))
        }
        Op::Guard { shape, checks } => {
            arity(1)?;
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
        Op::Reduce { dims, .. } => {
            arity(1)?;
            let x = &inputs[0];
            for &d in dims {
                check_dim(name, d, &x.shape)?;
            }
            sorted_distinct(name, dims)?;
            if x.dtype == DType::Bool {
                return Err(Error::dtype(
                    name,
                    "cannot reduce bool tensors; convert with to_dtype first",
                ));
            }
            let out = (0..x.shape.len())
                .filter(|d| !dims.contains(d))
                .map(|d| x.shape[d].clone())
                .collect();
            Ok((x.dtype, out))
        }
        Op::ArgReduce { dim, .. } => {
            arity(1)?;
            let x = &inputs[0];
            check_dim(name, *dim, &x.shape)?;
            if x.dtype == DType::Bool {
                return Err(Error::dtype(
                    name,
                    "cannot reduce bool tensors; convert with to_dtype first",
                ));
            }
            let mut out = x.shape.clone();
            out.remove(*dim);
            Ok((DType::I64, out))
        }
        Op::ReduceWindow { kind, window } => {
            arity(1)?;
            super::window::infer_reduce_window(name, *kind, window, &inputs[0])
        }
        Op::SelectAndScatter { window, .. } => {
            arity(2)?;
            super::window::infer_select_and_scatter(name, window, &inputs[0], &inputs[1])
        }
        Op::Dot(dot) => {
            arity(2)?;
            dot.infer(&inputs[0], &inputs[1])
        }
        Op::Convolution(conv) => {
            arity(2)?;
            conv.infer(name, &inputs[0], &inputs[1])
        }
        Op::IndexSelect { dim } => {
            arity(2)?;
            let (x, idx) = (&inputs[0], &inputs[1]);
            check_dim("index_select", *dim, &x.shape)?;
            index_dtype("index_select", idx)?;
            if idx.shape.len() != 1 {
                return Err(Error::shape(
                    "index_select",
                    format!(
                        "the index must be 1-D, got shape {}",
                        shape_string(&idx.shape)
                    ),
                ));
            }
            let mut out = x.shape.clone();
            out[*dim] = idx.shape[0].clone();
            Ok((x.dtype, out))
        }
        Op::Gather { dim } => {
            arity(2)?;
            let (x, idx) = (&inputs[0], &inputs[1]);
            check_dim("gather", *dim, &x.shape)?;
            index_dtype("gather", idx)?;
            if idx.shape.len() != x.shape.len() {
                return Err(Error::shape(
                    "gather",
                    format!(
                        "the index {} must have the rank of the input {}",
                        shape_string(&idx.shape),
                        shape_string(&x.shape)
                    ),
                ));
            }
            index_within("gather", *dim, x, idx)?;
            Ok((x.dtype, idx.shape.clone()))
        }
        Op::IndexAdd { dim } => {
            arity(3)?;
            let (base, idx, src) = (&inputs[0], &inputs[1], &inputs[2]);
            check_dim("index_add", *dim, &base.shape)?;
            index_dtype("index_add", idx)?;
            same_dtype("index_add", base, src)?;
            let mut expect = base.shape.clone();
            expect[*dim] = idx
                .shape
                .first()
                .cloned()
                .unwrap_or_else(|| SizeExpr::constant(1));
            if idx.shape.len() != 1 || expect != src.shape {
                return Err(Error::shape(
                    "index_add",
                    format!(
                        "source {} must be the base {} with dim {dim} replaced by the index length (index {})",
                        shape_string(&src.shape),
                        shape_string(&base.shape),
                        shape_string(&idx.shape)
                    ),
                ));
            }
            Ok((base.dtype, base.shape.clone()))
        }
        Op::Scatter { dim, .. } => {
            arity(3)?;
            let (base, idx, src) = (&inputs[0], &inputs[1], &inputs[2]);
            check_dim(name, *dim, &base.shape)?;
            index_dtype(name, idx)?;
            same_dtype(name, base, src)?;
            same_shape(name, idx, src)?;
            if idx.shape.len() != base.shape.len() {
                return Err(Error::shape(
                    name,
                    format!(
                        "the index {} and the base {} need the same rank",
                        shape_string(&idx.shape),
                        shape_string(&base.shape)
                    ),
                ));
            }
            index_within(name, *dim, base, idx)?;
            Ok((base.dtype, base.shape.clone()))
        }
        Op::Argsort { dim, first, .. } => {
            arity(1)?;
            let x = &inputs[0];
            check_dim(name, *dim, &x.shape)?;
            let mut shape = x.shape.clone();
            if let Some(k) = *first {
                if k as i64 > shape[*dim].hi() {
                    return Err(Error::shape(
                        name,
                        format!(
                            "the first {k} of dimension {dim} of {}, which has fewer",
                            shape_string(&x.shape)
                        ),
                    ));
                }
                shape[*dim] = SizeExpr::constant(k as i64);
            }
            Ok((DType::I64, shape))
        }
        Op::MaskedScatter => {
            arity(3)?;
            let (base, mask, src) = (&inputs[0], &inputs[1], &inputs[2]);
            if mask.dtype != DType::Bool {
                return Err(Error::dtype("masked_scatter", "the mask must be bool"));
            }
            same_shape("masked_scatter", base, mask)?;
            same_dtype("masked_scatter", base, src)?;
            if src.shape.len() != 1 {
                return Err(Error::shape("masked_scatter", "the source must be 1-D"));
            }
            Ok((base.dtype, base.shape.clone()))
        }
        Op::Nonzero => {
            arity(1)?;
            let x = &inputs[0];
            let n = size_var(SizeKind::Nonzero, x, 0, bound_numel(&x.shape));
            Ok((
                DType::I64,
                smallvec![SizeExpr::var(n), SizeExpr::constant(x.shape.len() as i64)],
            ))
        }
        Op::MaskedSelect => {
            arity(2)?;
            let (x, mask) = (&inputs[0], &inputs[1]);
            if mask.dtype != DType::Bool {
                return Err(Error::dtype(
                    "masked_select",
                    format!("the mask must be bool, got {}", mask.dtype),
                ));
            }
            same_shape("masked_select", x, mask)?;
            // The count of true elements of the mask: `nonzero(mask)`'s.
            let n = size_var(SizeKind::Nonzero, mask, 0, bound_numel(&mask.shape));
            Ok((x.dtype, smallvec![SizeExpr::var(n)]))
        }
        Op::Unique => {
            arity(1)?;
            let x = &inputs[0];
            if x.dtype == DType::Bool {
                return Err(Error::dtype(
                    "unique",
                    "bool tensors are not supported; convert with to_dtype first",
                ));
            }
            let total = bound_numel(&x.shape);
            let lo = if min_numel(&x.shape) > 0 { 1 } else { 0 };
            let n = size_var(SizeKind::Distinct, x, lo, total.max(lo));
            Ok((x.dtype, smallvec![SizeExpr::var(n)]))
        }
        Op::UniqueCounts => {
            arity(2)?;
            Ok((DType::I64, inputs[1].shape.clone()))
        }
        Op::While(l) => super::loops::infer_while(l, inputs),
        Op::LoopResult { index } => super::loops::infer_result(*index, inputs),
    }
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

fn bound_numel(shape: &[SizeExpr]) -> i64 {
    shape.iter().map(|d| d.hi().max(0)).product()
}

fn min_numel(shape: &[SizeExpr]) -> i64 {
    shape.iter().map(|d| d.lo().max(0)).product()
}

fn check_dim(op: &'static str, dim: usize, shape: &[SizeExpr]) -> Result<()> {
    if dim < shape.len() {
        Ok(())
    } else {
        Err(Error::DimOutOfRange {
            op,
            dim: dim as i64,
            rank: shape.len(),
            shape: shape_string(shape),
        })
    }
}

/// Dims listed by an op's own arguments: sorted and distinct (the tensor
/// layer sorts them and rejects repeats with the user's words).
fn sorted_distinct(op: &'static str, dims: &[usize]) -> Result<()> {
    if dims.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::internal(
            op,
            format!("dims {dims:?} must be sorted and distinct"),
        ));
    }
    Ok(())
}

fn reject_dynamic(op: &'static str, shape: &[SizeExpr]) -> Result<()> {
    match shape.iter().position(|d| d.as_const().is_none()) {
        Some(dim) => Err(Error::DynamicUnsupported {
            op,
            dim,
            shape: shape_string(shape),
        }),
        None => Ok(()),
    }
}

/// As torch.gather and torch.scatter: outside `dim` the index may be
/// smaller than `x` (static sizes), or the same size.
fn index_within(op: &'static str, dim: usize, x: &Node, idx: &Node) -> Result<()> {
    for d in 0..x.shape.len() {
        let smaller = matches!(
            (idx.shape[d].as_const(), x.shape[d].as_const()),
            (Some(i), Some(n)) if i <= n
        );
        if d != dim && idx.shape[d] != x.shape[d] && !smaller {
            return Err(size_mismatch(
                op,
                &x.shape[d],
                &idx.shape[d],
                &x.shape,
                &idx.shape,
            ));
        }
    }
    Ok(())
}

fn index_dtype(op: &'static str, idx: &Node) -> Result<()> {
    if idx.dtype.is_int() {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!("the index must be i32 or i64, got {}", idx.dtype),
        ))
    }
}

pub(crate) fn same_dtype(op: &'static str, a: &Node, b: &Node) -> Result<()> {
    if a.dtype == b.dtype {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!(
                "operand dtypes differ: {} and {}; convert one with to_dtype",
                a.dtype, b.dtype
            ),
        ))
    }
}

/// Two shapes must be equal dim by dim (as canonical expressions).
pub(crate) fn same_shape(op: &'static str, a: &Node, b: &Node) -> Result<()> {
    if a.shape.len() != b.shape.len() {
        return Err(Error::shape(
            op,
            format!(
                "operand shapes {} and {} have different ranks",
                shape_string(&a.shape),
                shape_string(&b.shape)
            ),
        ));
    }
    for (x, y) in a.shape.iter().zip(&b.shape) {
        if x != y {
            return Err(size_mismatch(op, x, y, &a.shape, &b.shape));
        }
    }
    Ok(())
}

/// The error for two sizes that must be equal and are not (or cannot be
/// proven to be).
pub(crate) fn size_mismatch(
    op: &'static str,
    x: &SizeExpr,
    y: &SizeExpr,
    xs: &[SizeExpr],
    ys: &[SizeExpr],
) -> Error {
    if x.as_const().is_some() && y.as_const().is_some() {
        Error::shape(
            op,
            format!(
                "sizes {x} and {y} do not match (operand shapes {} and {}); they must be equal: reshape, narrow or expand an operand so that they are",
                shape_string(xs),
                shape_string(ys)
            ),
        )
    } else {
        let describe = |e: &SizeExpr| match e.as_const() {
            Some(c) => c.to_string(),
            None => format!("{e} in [{}, {}]", e.lo(), e.hi()),
        };
        if x.hi() < y.lo() || y.hi() < x.lo() {
            return Error::shape(
                op,
                format!(
                    "the sizes {} and {} can never be equal: their bounds do not overlap (operand shapes {} and {}); narrow, expand or `pad_to_bound(fill)` an operand so that they are",
                    describe(x),
                    describe(y),
                    shape_string(xs),
                    shape_string(ys)
                ),
            );
        }
        Error::UnprovableEquality {
            op,
            lhs: describe(x),
            rhs: describe(y),
            lhs_shape: shape_string(xs),
            rhs_shape: shape_string(ys),
        }
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
