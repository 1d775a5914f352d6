//! Materialising sizes: `SymInt::materialize()` and `concrete_shape()`.

use super::sync;
use crate::ir::Node;
use crate::metrics;
use crate::symint::{SymInt, VarRef};
use crate::{Device, Error, Result};
use std::sync::Arc;

/// The value of a size (see [`materialize_all`]).
pub(crate) fn materialize(s: &SymInt) -> Result<i64> {
    Ok(materialize_all(std::slice::from_ref(s))?[0])
}

/// The values of sizes. Runs one program for the variables no program has
/// computed yet (returning only sizes, so XLA prunes everything else),
/// reads computed ones from the device once, and caches the values in the
/// variables so asking again runs and counts nothing.
pub(crate) fn materialize_all(sizes: &[SymInt]) -> Result<Vec<i64>> {
    let mut vars: Vec<VarRef> = Vec::new();
    let mut anchors: Vec<Arc<Node>> = Vec::new();
    for s in sizes {
        for v in s.expr.vars() {
            if !vars.contains(&v) {
                vars.push(v);
            }
        }
        for a in &s.anchors {
            if !anchors.iter().any(|b| Arc::ptr_eq(a, b)) {
                anchors.push(a.clone());
            }
        }
    }
    let all_known = vars
        .iter()
        .all(|v| v.0.cell.get().is_some_and(|c| c.known().is_some()));
    if !all_known {
        metrics::inc(metrics::Counter::SizeMaterialization);
        let pending: Vec<VarRef> = vars
            .iter()
            .filter(|v| v.0.cell.get().is_none())
            .cloned()
            .collect();
        if !pending.is_empty() {
            if anchors.is_empty() {
                return Err(Error::internal(
                    "materialize",
                    "a pending size without the graph that computes it",
                ));
            }
            let device = anchor_device(&anchors).unwrap_or_default();
            sync::compute_sizes(&device, &anchors, &pending)?;
        }
    }
    let mut values = Vec::with_capacity(vars.len());
    for v in &vars {
        let cell =
            v.0.cell
                .get()
                .ok_or_else(|| Error::internal("materialize", "size was not computed"))?;
        values.push((v.0.id, cell.get()?));
    }
    let lookup = |v: &VarRef| {
        values
            .iter()
            .find(|(id, _)| *id == v.0.id)
            .map(|(_, x)| *x)
            .unwrap_or(0)
    };
    Ok(sizes
        .iter()
        .map(|s| s.expr.eval(&mut |v| lookup(v)))
        .collect())
}

/// The device of the data the anchors' graph reads.
fn anchor_device(anchors: &[Arc<Node>]) -> Option<Device> {
    let order = crate::ir::node::topo_order(anchors, |_| false);
    order
        .iter()
        .find_map(|m| super::device_data::of(m).map(|d| d.device.clone()))
}
