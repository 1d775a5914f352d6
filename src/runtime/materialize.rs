//! Materialising sizes: the values behind `SymInt::materialize()` and
//! `concrete_shape()`.

use super::size_values;
use super::sync;
use crate::ir::Node;
use crate::metrics;
use crate::symint::{SizeExpr, VarRef};
use crate::{Device, Error, Result};
use std::sync::Arc;

/// The value of the size expression `expr`; `anchors` are nodes that can
/// compute its variables (see [`materialize_all`]).
pub(crate) fn materialize(expr: &SizeExpr, anchors: &[Arc<Node>]) -> Result<i64> {
    Ok(materialize_all(std::slice::from_ref(expr), anchors)?[0])
}

/// The values of size expressions. Runs one program for the variables no
/// program has computed yet (returning only sizes, so XLA prunes
/// everything else), reads computed ones from the device once, and caches
/// the values in their cells so asking again runs and counts nothing.
pub(crate) fn materialize_all(exprs: &[SizeExpr], anchors: &[Arc<Node>]) -> Result<Vec<i64>> {
    let mut vars: Vec<VarRef> = Vec::new();
    for e in exprs {
        for v in e.vars() {
            if !vars.contains(&v) {
                vars.push(v);
            }
        }
    }
    let all_known = vars
        .iter()
        .all(|v| size_values::cell(v).is_some_and(|c| c.known().is_some()));
    if !all_known {
        metrics::inc(metrics::Counter::SizeMaterialization);
        let pending: Vec<VarRef> = vars
            .iter()
            .filter(|v| !size_values::is_bound(v))
            .cloned()
            .collect();
        if !pending.is_empty() {
            if anchors.is_empty() {
                return Err(Error::internal(
                    "materialize",
                    "a pending size without the graph that computes it",
                ));
            }
            let device = anchor_device(anchors).unwrap_or_default();
            sync::compute_sizes(&device, anchors, &pending)?;
        }
    }
    let mut values = Vec::with_capacity(vars.len());
    for v in &vars {
        let cell = size_values::cell(v)
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
    Ok(exprs.iter().map(|e| e.eval(&mut |v| lookup(v))).collect())
}

/// The device of the data the anchors' graph reads.
fn anchor_device(anchors: &[Arc<Node>]) -> Option<Device> {
    let order = crate::ir::node::topo_order(anchors, |_| false);
    order
        .iter()
        .find_map(|m| super::device_data::of(m).map(|d| d.device.clone()))
}
