//! Inference of the collectives: ops that combine values across the
//! replicas running one program (see `Op::AllReduce` and DESIGN.md
//! "Several devices").
//!
//! Every replica runs the same program on its own data, so a collective
//! sees one operand per replica, all of one dtype and static shape. A
//! bounded (dynamic) operand is refused: replicas may hold different real
//! sizes, and XLA cannot run a collective on a bounded operand
//! (`reference/mlir/multi/FAILS_all_reduce_bounded_operand.mlir`); the
//! error says to reduce the dynamic dimensions first (the gradients a
//! data-parallel step reduces are static).

use super::node::{shape_string, Node};
use super::op::ReduceKind;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::{Shape, SizeExpr};
use std::sync::Arc;

/// `all_reduce` by `kind` over `replicas` replicas of `inputs[0]`.
pub(crate) fn all_reduce(
    name: &'static str,
    kind: ReduceKind,
    replicas: usize,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = operand(name, inputs, replicas)?;
    if kind == ReduceKind::Prod {
        return Err(Error::invalid(
            name,
            "a collective reduces by sum, max or min; multiply on each replica instead",
        ));
    }
    if x.dtype == DType::Bool {
        return Err(Error::dtype(
            name,
            format!(
                "does not reduce bool values (shape {}); convert with to_dtype first",
                shape_string(&x.shape)
            ),
        ));
    }
    Ok((x.dtype, x.shape.clone()))
}

/// `all_gather` along `dim` over `replicas` replicas of `inputs[0]`.
pub(crate) fn all_gather(
    name: &'static str,
    dim: usize,
    replicas: usize,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = operand(name, inputs, replicas)?;
    let mut shape = along(name, x, dim)?;
    let n = shape[dim].as_const().unwrap_or(0);
    shape[dim] = SizeExpr::constant(n.saturating_mul(replicas as i64));
    Ok((x.dtype, shape))
}

/// `reduce_scatter` (a sum) along `dim` over `replicas` replicas of
/// `inputs[0]`.
pub(crate) fn reduce_scatter(
    name: &'static str,
    dim: usize,
    replicas: usize,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = operand(name, inputs, replicas)?;
    let mut shape = along(name, x, dim)?;
    let n = shape[dim].as_const().unwrap_or(0);
    if x.dtype == DType::Bool || n % replicas as i64 != 0 {
        return Err(Error::shape(
            name,
            format!(
                "dimension {dim} of the {} operand {} must split into {replicas} equal blocks, one per replica (and not be bool); pad or narrow it to a multiple of {replicas}",
                x.dtype,
                shape_string(&x.shape)
            ),
        ));
    }
    shape[dim] = SizeExpr::constant(n / replicas as i64);
    Ok((x.dtype, shape))
}

/// The one operand of a collective over `replicas` replicas: static.
fn operand<'a>(name: &'static str, inputs: &'a [Arc<Node>], replicas: usize) -> Result<&'a Node> {
    let [x] = inputs else {
        return Err(Error::internal(
            name,
            format!("expected 1 operand, got {}", inputs.len()),
        ));
    };
    if replicas == 0 {
        return Err(Error::internal(name, "a collective over no replicas"));
    }
    if let Some(dim) = x.shape.iter().position(|d| d.as_const().is_none()) {
        return Err(Error::shape(
            name,
            format!(
                "does not support the dynamic dimension {dim} of its operand (shape {}): replicas may hold different sizes, and XLA cannot combine a bounded operand across devices; reduce the dynamic dimensions first (for example `sum_dims` or `mean_dims`, whose result is static), or `pad_to_bound(fill)` the operand",
                shape_string(&x.shape)
            ),
        ));
    }
    Ok(x)
}

/// `x`'s shape, after checking that `dim` is one of its dims.
fn along(name: &'static str, x: &Node, dim: usize) -> Result<Shape> {
    if dim >= x.shape.len() {
        return Err(Error::DimOutOfRange {
            op: name,
            dim: dim as i64,
            rank: x.shape.len(),
            shape: shape_string(&x.shape),
        });
    }
    Ok(x.shape.clone())
}
