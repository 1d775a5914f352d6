//! Replaying a captured step: gather the program's parameters, run it,
//! and bind its results where the recording says they go.

use super::{DimTemplate, ParamSource, Returned, Variant};
use crate::backend::{ExecArgs, SizeArg};
use crate::ir::Node;
use crate::runtime::device_data::DeviceData;
use crate::runtime::{metrics, sync};
use crate::symint::{SizeExpr, VarRef};
use crate::tensor::Tensor;
use crate::{Error, Result};
use smallvec::SmallVec;
use std::sync::Arc;

/// Runs `v` on `inputs` (computed; `nodes` are their nodes, and they
/// match `v`'s signature). `Ok(None)` when the state no longer fits the
/// recording (a tensor it reads is gone or changed shape, a gradient
/// appeared or vanished): the caller records the step again.
pub(super) fn replay(
    v: &Variant,
    inputs: &[Tensor],
    nodes: &[Arc<Node>],
) -> Result<Option<Vec<Tensor>>> {
    for g in &v.grads {
        if let Some(owner) = g.owner.upgrade() {
            if owner.grad.lock().is_some() != g.had_grad {
                return Ok(None);
            }
        }
    }
    // The tensors holding each parameter's data (none for constants), and
    // their nodes.
    let mut holders: SmallVec<[Option<Holder>; 16]> = SmallVec::with_capacity(v.params.len());
    let mut pending = Vec::new();
    for p in &v.params {
        let holder = match &p.source {
            ParamSource::Input(k) => Some(inputs[*k].clone()),
            ParamSource::State(w) => match w.upgrade() {
                Some(inner) => Some(Tensor::from_inner(inner)),
                None => return Ok(None),
            },
            ParamSource::GradOf(w) => match w.upgrade().and_then(|o| o.grad.lock().clone()) {
                Some(g) => Some(g),
                None => return Ok(None),
            },
            ParamSource::Const(_) => None,
        };
        holders.push(holder.map(|h| {
            let n = h.node();
            if n.data.is_none() {
                pending.push(h.clone());
            }
            (h, n)
        }));
    }
    if !pending.is_empty() {
        sync::sync_tensors(&pending)?;
        for (h, n) in holders.iter_mut().flatten() {
            *n = h.node();
        }
    }
    let mut data: SmallVec<[Arc<DeviceData>; 16]> = SmallVec::with_capacity(v.params.len());
    for (p, h) in v.params.iter().zip(&holders) {
        let d = match (&p.source, h) {
            (ParamSource::Const(c), _) => c.clone(),
            (_, Some((_, n))) => {
                if p.guard.as_ref().is_some_and(|g| !g.admits(n)) {
                    return Ok(None);
                }
                n.data
                    .clone()
                    .ok_or_else(|| Error::internal("capture", "a computed tensor without data"))?
            }
            (_, None) => return Err(Error::internal("capture", "a parameter without a holder")),
        };
        data.push(d);
    }
    drop(holders);

    let _lock = sync::lock();
    let results = match &v.program {
        None => Vec::new(),
        Some(exe) => {
            let params = data
                .iter()
                .map(|d| d.exec_arg())
                .collect::<Result<Vec<_>>>()?;
            let vars = v
                .arg_sizes
                .iter()
                .map(|&(k, dim)| input_size(&nodes[k], dim))
                .collect::<Result<Vec<_>>>()?;
            let out = metrics::time("ExecuteTime", || {
                v.device.backend().execute(exe, ExecArgs { params, vars })
            })?;
            metrics::inc("ExecuteGraph");
            let fresh: Vec<VarRef> = v
                .fresh
                .iter()
                .map(|&(lo, hi)| VarRef::fresh(lo, hi))
                .collect();
            let mut results = Vec::with_capacity(v.outputs.len());
            for (t, (buffer, sizes)) in v.outputs.iter().zip(out.tensors) {
                let shape = t
                    .dims
                    .iter()
                    .map(|d| match d {
                        DimTemplate::Static(c) => SizeExpr::constant(*c),
                        DimTemplate::Input { input, dim } => nodes[*input].shape[*dim].clone(),
                        DimTemplate::Fresh(i) => SizeExpr::var(fresh[*i].clone()),
                    })
                    .collect();
                results.push(sync::data_node(&v.device, t.dtype, shape, buffer, sizes));
            }
            results
        }
    };
    metrics::inc("StepReplay");
    for (w, i) in &v.assigned {
        if let Some(inner) = w.upgrade() {
            Tensor::from_inner(inner).rebind(results[*i].clone());
        }
    }
    for g in &v.grads {
        if let Some(owner) = g.owner.upgrade() {
            let new = g
                .set
                .map(|i| Tensor::from_node(results[i].clone(), &v.device));
            *owner.grad.lock() = new;
        }
    }
    let returned = v
        .returned
        .iter()
        .map(|r| match r {
            Returned::Output(i) => Tensor::from_node(results[*i].clone(), &v.device),
            Returned::Input(k) => inputs[*k].clone(),
            Returned::Same(t) => t.clone(),
            Returned::Const(n) => Tensor::from_node(n.clone(), &v.device),
        })
        .collect();
    Ok(Some(returned))
}

/// A tensor holding a parameter's data, and its node.
type Holder = (Tensor, Arc<Node>);

/// The size of dimension `dim` of a computed input, as a program argument.
fn input_size(node: &Node, dim: usize) -> Result<SizeArg> {
    let cell = node
        .data
        .as_ref()
        .and_then(|d| d.sizes.get(dim).cloned().flatten())
        .ok_or_else(|| Error::internal("capture", "a dynamic input without its size"))?;
    Ok(cell.as_arg())
}
