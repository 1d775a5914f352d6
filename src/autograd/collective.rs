//! Gradients of the collectives. A replicated program's objective is the
//! sum of every replica's loss, so a value that reaches every replica
//! (an `all_reduce`, an `all_gather`) sends each replica's gradient back
//! to every contributor: the transpose of a sum over replicas is a sum
//! over replicas, that of a gather a reduce-scatter, and conversely.

use crate::ir::ReduceKind;
use crate::tensor::Tensor;

/// The gradient of `out = all_reduce(kind)(x)` over `replicas` replicas:
/// every replica's `g` summed; for max and min, given to the replicas
/// holding the extremum (ties share it, as `reduce`'s max).
#[track_caller]
pub(super) fn all_reduce(
    kind: ReduceKind,
    replicas: usize,
    x: &Tensor,
    out: &Tensor,
    g: &Tensor,
) -> Tensor {
    let total = g.all_reduce_over(ReduceKind::Sum, replicas);
    match kind {
        ReduceKind::Sum => total,
        ReduceKind::Max | ReduceKind::Min | ReduceKind::Prod => {
            let mask = x.eq(out).to_dtype(x.dtype());
            let count = mask.all_reduce_over(ReduceKind::Sum, replicas);
            &(&total * &mask) / &count
        }
    }
}
