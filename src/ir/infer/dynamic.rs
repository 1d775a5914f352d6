//! Inference of the dynamic family: results whose size depends on the
//! data, each a size variable of what it counts (`ir::size_source`), with
//! bounds from the operand's bounds.

use super::same_shape;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ir::node::Node;
use crate::ir::size_source::{size_var, SizeKind};
use crate::symint::{Shape, SizeExpr};
use smallvec::smallvec;
use std::sync::Arc;

/// The coordinates of the nonzeros: `[<=numel, rank]`, one variable per operand.
pub(super) fn nonzero(inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    let n = size_var(SizeKind::Nonzero, x, 0, bound_numel(&x.shape));
    Ok((
        DType::I64,
        smallvec![SizeExpr::var(n), SizeExpr::constant(x.shape.len() as i64)],
    ))
}

/// The elements where a Bool mask of the operand's shape holds: `[<=numel]`, the size of `nonzero(mask)`.
pub(super) fn masked_select(inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
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

/// The sorted distinct values of a non-Bool operand: `[<=numel]`, at least 1 when the operand cannot be empty.
pub(super) fn unique(inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
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

fn bound_numel(shape: &[SizeExpr]) -> i64 {
    shape.iter().map(|d| d.hi().max(0)).product()
}

fn min_numel(shape: &[SizeExpr]) -> i64 {
    shape.iter().map(|d| d.lo().max(0)).product()
}
