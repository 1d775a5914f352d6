//! The collectives, in replica mode: the program is the per-device
//! program, compiled with `num_replicas = n` (see `pjrt/placed.rs`), and
//! each collective names the replicas `0..n` as one group, with no
//! channel (`reference/mlir/multi/*_replicas.mlir` is the form measured
//! on both CPU plugins). Operands are static (inference refuses bounded
//! ones, which XLA cannot reduce across devices). Halves are combined in
//! f32 and rounded once, as reductions are.

use super::emit::{Elt, Ty, V};
use super::Ctx;
use crate::ir::program::Program;
use crate::ir::{Op, ReduceKind};

/// `replica_groups = dense<[[0, 1, .., n-1]]> : tensor<1xnxi64>`.
fn one_group(replicas: usize) -> String {
    let ids: Vec<String> = (0..replicas).map(|r| r.to_string()).collect();
    format!(
        "replica_groups = dense<[[{}]]> : tensor<1x{replicas}xi64>",
        ids.join(", ")
    )
}

/// The replica count of every collective in `program` (a replicated
/// backend checks them against its own).
pub(crate) fn collective_replicas(program: &Program) -> impl Iterator<Item = usize> + '_ {
    // Only the collectives carry a replica count; every other op is
    // replica-agnostic, which is why this is no exhaustive match.
    program.nodes.iter().filter_map(|n| {
        if let Op::AllReduce { replicas, .. }
        | Op::AllGather { replicas, .. }
        | Op::ReduceScatter { replicas, .. } = n.op
        {
            Some(replicas)
        } else {
            None
        }
    })
}

impl Ctx<'_> {
    /// `stablehlo.all_reduce` of a static `x` by `kind` (sum, or max or
    /// min propagating NaN).
    pub(super) fn all_reduce(&mut self, kind: ReduceKind, x: &V, replicas: usize, ty: &Ty) -> V {
        self.in_f32(std::slice::from_ref(x), ty, |c, ins, ty| {
            let e = ty.elt;
            c.b.region_op(
                "all_reduce",
                &[&ins[0]],
                &one_group(replicas),
                &[e, e],
                &[ty.bound()],
                // XLA's CPU collectives take only a plain combiner (one
                // add, multiply, maximum or minimum); its maximum and
                // minimum propagate NaN, as `reduce`'s select does.
                |b, a| {
                    let name = match kind {
                        ReduceKind::Sum => "add",
                        ReduceKind::Prod => "multiply",
                        ReduceKind::Max => "maximum",
                        ReduceKind::Min => "minimum",
                    };
                    vec![b.bin(name, &a[0], &a[1])]
                },
            )
            .remove(0)
        })
    }

    /// `stablehlo.all_gather` of a static `x` along `dim`.
    pub(super) fn all_gather(&mut self, x: &V, dim: usize, replicas: usize, ty: &Ty) -> V {
        let attrs = format!("all_gather_dim = {dim} : i64, {}", one_group(replicas));
        self.b.op("all_gather", &[x], &attrs, ty.bound())
    }

    /// `stablehlo.reduce_scatter` (a sum) of a static `x` along `dim`:
    /// replica `r` keeps block `r`.
    pub(super) fn reduce_scatter(&mut self, x: &V, dim: usize, replicas: usize, ty: &Ty) -> V {
        self.in_f32(std::slice::from_ref(x), ty, |c, ins, ty| {
            let e = ty.elt;
            let attrs = format!("scatter_dimension = {dim} : i64, {}", one_group(replicas));
            c.b.region_op(
                "reduce_scatter",
                &[&ins[0]],
                &attrs,
                &[e, e],
                &[ty.bound()],
                |b, a| vec![b.bin("add", &a[0], &a[1])],
            )
            .remove(0)
        })
    }

    /// `stablehlo.replica_id` (a `ui32`) as an I64 scalar.
    pub(super) fn replica_id(&mut self) -> V {
        let id = self.b.op("replica_id", &[], "", Ty::scalar(Elt::U32));
        self.b.convert(&id, Elt::I64)
    }

    /// A sharding constraint (`Op::Sharding`): XLA's `Sharding` custom
    /// call, which the SPMD partitioner obeys (and drops in a program of
    /// one partition).
    pub(super) fn sharding_constraint(&mut self, x: &V, s: &crate::ir::sharding::Sharding) -> V {
        let attrs = format!(
            "call_target_name = \"Sharding\", mhlo.sharding = \"{}\"",
            s.hlo()
        );
        self.b.op("custom_call", &[x], &attrs, x.ty.clone())
    }
}
