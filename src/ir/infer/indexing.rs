//! Inference of the indexing family: ops that read or write at integer
//! indices or at the true positions of a mask.

use super::{check_dim, same_dtype, same_shape, shape_string, size_mismatch};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ir::node::Node;
use crate::symint::{Shape, SizeExpr};
use std::sync::Arc;

/// Slices of `x` along `dim` at a 1-D integer index.
pub(super) fn index_select(dim: usize, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let (x, idx) = (&inputs[0], &inputs[1]);
    check_dim("index_select", dim, &x.shape)?;
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
    out[dim] = idx.shape[0].clone();
    Ok((x.dtype, out))
}

/// `x` read along `dim` at an integer index of `x`'s rank: the index's shape.
pub(super) fn gather(dim: usize, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let (x, idx) = (&inputs[0], &inputs[1]);
    check_dim("gather", dim, &x.shape)?;
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
    index_within("gather", dim, x, idx)?;
    Ok((x.dtype, idx.shape.clone()))
}

/// `base` with slices of `src` added along `dim` at a 1-D index.
pub(super) fn index_add(dim: usize, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let (base, idx, src) = (&inputs[0], &inputs[1], &inputs[2]);
    check_dim("index_add", dim, &base.shape)?;
    index_dtype("index_add", idx)?;
    same_dtype("index_add", base, src)?;
    let mut expect = base.shape.clone();
    expect[dim] = idx
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

/// `base` with `src` (the index's shape) written along `dim` at the index.
pub(super) fn scatter(
    name: &'static str,
    dim: usize,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let (base, idx, src) = (&inputs[0], &inputs[1], &inputs[2]);
    check_dim(name, dim, &base.shape)?;
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
    index_within(name, dim, base, idx)?;
    Ok((base.dtype, base.shape.clone()))
}

/// The I64 sorting permutation along `dim`, or its first `k` entries.
pub(super) fn argsort(
    name: &'static str,
    dim: usize,
    first: Option<usize>,
    inputs: &[Arc<Node>],
) -> Result<(DType, Shape)> {
    let x = &inputs[0];
    check_dim(name, dim, &x.shape)?;
    let mut shape = x.shape.clone();
    if let Some(k) = first {
        if k as i64 > shape[dim].hi() {
            return Err(Error::shape(
                name,
                format!(
                    "the first {k} of dimension {dim} of {}, which has fewer",
                    shape_string(&x.shape)
                ),
            ));
        }
        shape[dim] = SizeExpr::constant(k as i64);
    }
    Ok((DType::I64, shape))
}

/// `base` with a 1-D `src` written at the true positions of a Bool mask of its shape.
pub(super) fn masked_scatter(inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
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
