//! Shape and dtype inference: one exhaustive `match` over [`Op`], each
//! arm checking the operand count and calling its family's rule
//! (`layout.rs`, `indexing.rs`, `dynamic.rs`; elementwise ops in
//! `ir::elementwise`, windows, contractions, collectives and loops in
//! their own modules).
//!
//! Inference is the single place that decides whether an op accepts its
//! operands. It never runs anything; dynamic ops introduce size variables
//! here, with bounds from their operands' bounds: one per quantity they
//! count, shared by every op counting the same (see `ir::size_source`).

mod dynamic;
mod indexing;
mod layout;

use super::node::{shape_string, Node};
use super::op::Op;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::{Shape, SizeExpr};
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
    // The operands, when there are `n` of them.
    let arity = |n: usize| -> Result<&[Arc<Node>]> {
        if inputs.len() == n {
            Ok(inputs)
        } else {
            Err(Error::internal(
                name,
                format!("expected {n} operands, got {}", inputs.len()),
            ))
        }
    };
    match op {
        // ----- sources -----
        Op::Data { .. } => Err(Error::internal(
            name,
            "a data leaf's shape comes with its data; it is not inferred",
        )),
        Op::Scalar { dtype, .. } => arity(0).map(|_| (*dtype, Shape::new())),
        Op::Iota { dtype, shape, dim } => {
            arity(0)?;
            check_dim(name, *dim, shape)?;
            Ok((*dtype, shape.clone()))
        }
        Op::SizeOf(_) => arity(0).map(|_| (DType::I64, Shape::new())),
        Op::RandomUniform { dtype, shape } => random_uniform(name, *dtype, shape, arity(1)?),
        // ----- elementwise -----
        Op::Unary(u) => super::elementwise::infer_unary(name, *u, &arity(1)?[0]),
        Op::Binary(b) => {
            let ins = arity(2)?;
            super::elementwise::infer_binary(name, *b, &ins[0], &ins[1])
        }
        Op::Compare(_) => {
            let ins = arity(2)?;
            super::elementwise::infer_compare(name, &ins[0], &ins[1])
        }
        Op::Select => super::elementwise::infer_select(name, arity(3)?),
        Op::Convert(d) => Ok((*d, arity(1)?[0].shape.clone())),
        // ----- layout -----
        Op::Broadcast { shape, dims } => layout::broadcast(name, shape, dims, arity(1)?),
        Op::Reshape { shape } => layout::reshape(name, shape, arity(1)?),
        Op::Transpose { perm } => layout::transpose(name, perm, arity(1)?),
        Op::Slice { dim, start, len } => layout::slice(name, *dim, *start, *len, arity(1)?),
        Op::Concat { dim } => layout::concat(*dim, inputs),
        Op::Reverse { dims } => layout::reverse(name, dims, arity(1)?),
        Op::PadToBound { .. } => layout::pad_to_bound(arity(1)?),
        Op::Guard { shape, checks } => layout::guard(name, shape, checks, arity(1)?),
        Op::Sharding(s) => layout::sharding(name, s, arity(1)?),
        Op::FillPadding { dims, .. } => layout::fill_padding(name, dims, arity(1)?),
        // ----- reductions, windows, contractions -----
        Op::Reduce { dims, .. } => reduce(name, dims, arity(1)?),
        Op::ArgReduce { dim, .. } => arg_reduce(name, *dim, arity(1)?),
        Op::ReduceWindow { kind, window } => {
            super::window::infer_reduce_window(name, *kind, window, &arity(1)?[0])
        }
        Op::SelectAndScatter { window, .. } => {
            let ins = arity(2)?;
            super::window::infer_select_and_scatter(name, window, &ins[0], &ins[1])
        }
        Op::Dot(dot) => {
            let ins = arity(2)?;
            dot.infer(&ins[0], &ins[1])
        }
        Op::Convolution(conv) => {
            let ins = arity(2)?;
            conv.infer(name, &ins[0], &ins[1])
        }
        // ----- indexing -----
        Op::IndexSelect { dim } => indexing::index_select(*dim, arity(2)?),
        Op::Gather { dim } => indexing::gather(*dim, arity(2)?),
        Op::IndexAdd { dim } => indexing::index_add(*dim, arity(3)?),
        Op::Scatter { dim, .. } => indexing::scatter(name, *dim, arity(3)?),
        Op::Argsort { dim, first, .. } => indexing::argsort(name, *dim, *first, arity(1)?),
        Op::MaskedScatter => indexing::masked_scatter(arity(3)?),
        // ----- dynamic -----
        Op::Nonzero => dynamic::nonzero(arity(1)?),
        Op::MaskedSelect => dynamic::masked_select(arity(2)?),
        Op::Unique => dynamic::unique(arity(1)?),
        Op::UniqueCounts => Ok((DType::I64, arity(2)?[1].shape.clone())),
        // ----- collectives -----
        Op::AllReduce { kind, replicas } => {
            super::collective::all_reduce(name, *kind, *replicas, inputs)
        }
        Op::AllGather { dim, replicas } => {
            super::collective::all_gather(name, *dim, *replicas, inputs)
        }
        Op::ReduceScatter { dim, replicas } => {
            super::collective::reduce_scatter(name, *dim, *replicas, inputs)
        }
        Op::ReplicaId => arity(0).map(|_| (DType::I64, Shape::new())),
        // ----- control flow -----
        Op::While(l) => super::loops::infer_while(l, inputs),
        Op::LoopResult { index } => super::loops::infer_result(*index, inputs),
    }
}

/// One non-Bool operand reduced over sorted, distinct `dims`.
fn reduce(name: &'static str, dims: &[usize], inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    for &d in dims {
        check_dim(name, d, &x.shape)?;
    }
    sorted_distinct(name, dims)?;
    reject_bool(name, x)?;
    let out = (0..x.shape.len())
        .filter(|d| !dims.contains(d))
        .map(|d| x.shape[d].clone())
        .collect();
    Ok((x.dtype, out))
}

/// The I64 index of an extremum of a non-Bool operand along `dim`.
fn arg_reduce(name: &'static str, dim: usize, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    check_dim(name, dim, &x.shape)?;
    reject_bool(name, x)?;
    let mut out = x.shape.clone();
    out.remove(dim);
    Ok((DType::I64, out))
}

/// Reductions of Bool tensors are refused: the user converts first.
fn reject_bool(name: &'static str, x: &Node) -> Result<()> {
    if x.dtype == DType::Bool {
        return Err(Error::dtype(
            name,
            "cannot reduce bool tensors; convert with to_dtype first",
        ));
    }
    Ok(())
}

/// Random floats of a static `shape` from an I64 scalar seed.
fn random_uniform(
    name: &'static str,
    dtype: DType,
    shape: &Shape,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
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
    Ok((dtype, shape.clone()))
}

pub(super) fn check_dim(op: &'static str, dim: usize, shape: &[SizeExpr]) -> Result<()> {
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
pub(super) fn sorted_distinct(op: &'static str, dims: &[usize]) -> Result<()> {
    if dims.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::internal(
            op,
            format!("dims {dims:?} must be sorted and distinct"),
        ));
    }
    Ok(())
}

pub(super) fn reject_dynamic(op: &'static str, shape: &[SizeExpr]) -> Result<()> {
    match shape.iter().position(|d| d.as_const().is_none()) {
        Some(dim) => Err(Error::DynamicUnsupported {
            op,
            dim,
            shape: shape_string(shape),
        }),
        None => Ok(()),
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
