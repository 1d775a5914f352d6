//! Replaying a captured step: gather the program's parameters, run it,
//! and bind its results where the recording says they go.

use super::{DimTemplate, Kept, ParamSource, Returned, Variant};
use crate::backend::{ExecArgs, ExecOutputs, SizeArg};
use crate::ir::Node;
use crate::metrics;
use crate::runtime::device_data::{self, DeviceData};
use crate::runtime::sync;
use crate::symint::{Shape, SizeExpr, VarRef};
use crate::tensor::replay_hooks::DataLeafMut;
use crate::tensor::Tensor;
use crate::{Error, Result};
use smallvec::SmallVec;
use std::sync::Arc;

/// Runs `v` on `inputs` (computed; `nodes` are their nodes, and they
/// match `v`'s signature). `Ok(None)` when the state no longer fits the
/// recording (a tensor it reads is gone or changed shape, a gradient
/// appeared or vanished): the caller records the step again.
///
/// `kept` is what the last replay left (see [`Kept`]).
pub(super) fn replay(
    v: &Variant,
    kept: &mut Kept,
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
    // A lazy step before this one whose checks are unread may have
    // computed what the replay reads.
    crate::tensor::sync::verify()?;
    let data = match gather(v, nodes)? {
        Gathered::Data(data) => data,
        Gathered::Pending(pending) => {
            crate::tensor::sync::sync_tensors(&pending)?;
            match gather(v, nodes)? {
                Gathered::Data(data) => data,
                Gathered::Pending(_) => {
                    return Err(Error::internal(
                        "capture",
                        "a parameter still pending after a sync",
                    ))
                }
                Gathered::Stale => return Ok(None),
            }
        }
        Gathered::Stale => return Ok(None),
    };

    let _lock = sync::lock();
    let Some(exe) = &v.program else {
        metrics::inc(metrics::Counter::StepReplay);
        return returned(v, &mut kept.returned, inputs, None).map(Some);
    };
    let mut params = SmallVec::with_capacity(data.len());
    for d in &data {
        params.push(d.exec_arg()?);
    }
    let mut vars = SmallVec::with_capacity(v.arg_sizes.len());
    for &(k, dim) in &v.arg_sizes {
        vars.push(input_size(&nodes[k], dim)?);
    }
    let donate = donations(v, &data);
    let mut out = sync::execute(
        &v.device,
        exe,
        &ExecArgs {
            params,
            vars,
            donate: donate.clone(),
        },
    )?;
    for &k in &donate {
        // Its buffer is gone: any later use is an error, never a read.
        data[k].mark_donated();
        metrics::inc(metrics::Counter::DonatedBuffer);
    }
    if v.checked {
        let status = out.take_last()?;
        v.device.backend().check_status(exe, &status)?;
    }
    // Released before the results are bound: a result may move into a
    // parameter's data in place, which needs it unshared. (The backend
    // keeps what the running program reads alive on its own.)
    drop(data);
    metrics::inc(metrics::Counter::StepReplay);
    // A caller may still hold the last replay's sizes: each replay names
    // its computed sizes with new variables.
    let fresh = v
        .fresh
        .iter()
        .map(|&(lo, hi)| SizeExpr::var(VarRef::fresh(lo, hi)))
        .collect();
    let mut results = Results {
        v,
        inputs: nodes,
        fresh,
        outputs: out,
        nodes: SmallVec::new(),
        moved: 0,
    };
    for (w, i) in &v.assigned {
        if let Some(inner) = w.upgrade() {
            let t = Tensor::from_inner(inner);
            if !results.move_into(*i, &t)? {
                t.rebind(results.node(*i)?);
            }
        }
    }
    for g in &v.grads {
        let Some(owner) = g.owner.upgrade() else {
            continue;
        };
        let mut grad = owner.grad.lock();
        let Some(i) = g.set else {
            *grad = None;
            continue;
        };
        // A gradient nobody else holds takes the new value in place; one a
        // caller still holds keeps its value, as in eager code, where every
        // backward makes a new gradient tensor.
        if let Some(old) = grad.as_ref() {
            if Arc::strong_count(&old.inner) == 1 && results.move_into(i, old)? {
                continue;
            }
        }
        *grad = Some(Tensor::from_node(results.node(i)?, &v.device));
    }
    let out = returned(v, &mut kept.returned, inputs, Some(&mut results))?;
    metrics::add(metrics::Counter::InPlaceResult, results.moved);
    Ok(Some(out))
}

/// The parameters this replay donates (see `Variant::donations`): each
/// whose tensor alone holds its data, so nothing reads the old value once
/// the program starts. A value someone still holds (`let old =
/// w.detach()`) is not donated: the program then writes that result to
/// fresh memory and the old value stays intact.
fn donations(v: &Variant, data: &[Arc<DeviceData>]) -> SmallVec<[usize; 4]> {
    if v.checked || v.donations.is_empty() || !v.device.backend().donates() {
        return SmallVec::new();
    }
    v.donations
        .iter()
        .copied()
        .filter(|&k| {
            let super::ParamSource::State(w) = &v.params[k].source else {
                return false;
            };
            // `holds_alone` proves the data has two references, its
            // node's and `data[k]`: so no other parameter passes it (that
            // would be a third). No scan of `data` per donation: a step
            // with thousands of parameters pays linear time.
            w.upgrade()
                .is_some_and(|inner| Tensor::from_inner(inner).holds_alone(&data[k]))
        })
        .collect()
}

/// A variant's arguments, or why there are none yet.
enum Gathered {
    /// Each parameter's data, in order (inline for a few: a replay
    /// allocates nothing for them).
    Data(SmallVec<[Arc<DeviceData>; 4]>),
    /// The tensors among them with pending work: sync them and gather again.
    Pending(Vec<Tensor>),
    /// A tensor the program reads is gone or no longer has its recorded
    /// type: the step must be recorded again.
    Stale,
}

/// Gathers the current data of `v`'s parameters (`nodes`: the inputs'
/// nodes, all computed). Host data not on the device yet is uploaded when
/// the arguments are built (`DeviceData::exec_arg`).
fn gather(v: &Variant, nodes: &[Arc<Node>]) -> Result<Gathered> {
    let mut data = SmallVec::with_capacity(v.params.len());
    let mut pending = Vec::new();
    for p in &v.params {
        let admits = |n: &Node| p.guard.as_ref().is_none_or(|g| g.admits(n));
        let holder = match &p.source {
            ParamSource::Const(c) => {
                data.push(c.clone());
                continue;
            }
            ParamSource::Input(k) => {
                let n = &nodes[*k];
                if !admits(n) {
                    return Ok(Gathered::Stale);
                }
                data.push(
                    device_data::shared(n)
                        .ok_or_else(|| Error::internal("capture", "an input without data"))?,
                );
                continue;
            }
            ParamSource::State(w) => match w.upgrade() {
                Some(inner) => Tensor::from_inner(inner),
                None => return Ok(Gathered::Stale),
            },
            ParamSource::GradOf(w) => match w.upgrade().and_then(|o| o.grad.lock().clone()) {
                Some(g) => g,
                None => return Ok(Gathered::Stale),
            },
        };
        match holder.with_node(|n| admits(n).then(|| device_data::shared(n))) {
            None => return Ok(Gathered::Stale),
            Some(Some(d)) => data.push(d),
            Some(None) => pending.push(holder),
        }
    }
    Ok(if pending.is_empty() {
        Gathered::Data(data)
    } else {
        Gathered::Pending(pending)
    })
}

/// The values `run` returns (`results`: none when the step computed
/// nothing). A result goes into the tensor returned in its place last
/// time when the caller has dropped that tensor (`Tensor::is_sole_handle`):
/// a loop that reads its step's outputs and lets them go allocates no
/// tensors for them.
fn returned(
    v: &Variant,
    kept: &mut Vec<Option<Tensor>>,
    inputs: &[Tensor],
    mut results: Option<&mut Results>,
) -> Result<Vec<Tensor>> {
    kept.resize(v.returned.len(), None);
    let mut out = Vec::with_capacity(v.returned.len());
    for (r, slot) in v.returned.iter().zip(kept.iter_mut()) {
        let t = match r {
            Returned::Output(i) => {
                let results = results
                    .as_deref_mut()
                    .ok_or_else(|| Error::internal("capture", "a result without a program"))?;
                let t = match slot.take() {
                    Some(t) if t.is_sole_handle() && results.move_into(*i, &t)? => t,
                    _ => Tensor::from_node(results.node(*i)?, &v.device),
                };
                if v.outputs[*i].in_place {
                    *slot = Some(t.clone());
                }
                t
            }
            Returned::Input(k) => inputs[*k].clone(),
            Returned::Same(t) => t.clone(),
            Returned::Const(n) => Tensor::from_node(n.clone(), &v.device),
        };
        out.push(t);
    }
    Ok(out)
}

/// A replay's results: each one's buffers (at the output its template
/// names) until it is moved into a tensor in place or wrapped in a data
/// node (built once, on first use).
struct Results<'a> {
    v: &'a Variant,
    /// The inputs' nodes.
    inputs: &'a [Arc<Node>],
    /// This replay's sizes for the variables the program computes.
    fresh: SmallVec<[SizeExpr; 2]>,
    outputs: ExecOutputs,
    /// Empty until the first result is wrapped in a node.
    nodes: SmallVec<[Option<Arc<Node>>; 8]>,
    /// How many results moved in place (counted once per replay).
    moved: u64,
}

impl Results<'_> {
    /// Moves result `i` into `t`'s node and data in place, if the recording
    /// allows it and `t` has the result's type and unshared data
    /// (`Tensor::write_result`). False when it did not: the result is
    /// still here for [`Results::node`].
    fn move_into(&mut self, i: usize, t: &Tensor) -> Result<bool> {
        let template = &self.v.outputs[i];
        if !template.in_place || !self.outputs.has(template.at) {
            return Ok(false);
        }
        let moved = t.write_result(|n| template.fits(n), |leaf| self.write(i, leaf))?;
        self.moved += u64::from(moved);
        Ok(moved)
    }

    /// Writes result `i` over a data leaf of its type
    /// (`OutputTemplate::fits`): its buffer, and per dynamic dimension its
    /// size and the size's name, the only part of the shape that can
    /// differ.
    fn write(&mut self, i: usize, leaf: &mut DataLeafMut) -> Result<()> {
        let template = &self.v.outputs[i];
        // Checked before anything is written: the tensor keeps its old
        // value whole if this fails.
        if !(template.at..template.at + template.outputs()).all(|k| self.outputs.has(k)) {
            return Err(Error::internal(
                "capture",
                "a result without its buffer and one size per dynamic dimension",
            ));
        }
        let mut next = template.at + 1;
        for (d, dim) in template.dims.iter().enumerate() {
            if matches!(dim, DimTemplate::Static(_)) {
                continue;
            }
            let e = self.size(dim);
            let size = self.outputs.take(next)?;
            let cell = sync::size_cell(&self.v.device, &e, size);
            next += 1;
            leaf.set_size(d, e, cell);
        }
        leaf.set_buffer(self.outputs.take(template.at)?);
        Ok(())
    }

    /// Result `i` as a data node, its sizes named by the template.
    fn node(&mut self, i: usize) -> Result<Arc<Node>> {
        if self.nodes.is_empty() {
            self.nodes.resize(self.v.outputs.len(), None);
        }
        if let Some(n) = &self.nodes[i] {
            return Ok(n.clone());
        }
        let template = &self.v.outputs[i];
        let shape: Shape = template.dims.iter().map(|d| self.size(d)).collect();
        let cells = sync::size_cells(&self.v.device, &shape, &mut self.outputs, template.at)?;
        let buffer = self.outputs.take(template.at)?;
        let n = sync::data_node(
            &self.v.device,
            template.dtype,
            shape,
            buffer,
            cells,
            template.bounds.clone(),
        );
        self.nodes[i] = Some(n.clone());
        Ok(n)
    }

    /// The size of a result's dimension in this replay.
    fn size(&self, dim: &DimTemplate) -> SizeExpr {
        match dim {
            DimTemplate::Static(c) => SizeExpr::constant(*c),
            DimTemplate::Input { input, dim } => self.inputs[*input].shape[*dim].clone(),
            DimTemplate::Fresh(f) => self.fresh[*f].clone(),
        }
    }
}

/// The size of dimension `dim` of a computed input, as a program argument.
fn input_size(node: &Node, dim: usize) -> Result<SizeArg<'_>> {
    let cell = device_data::of(node)
        .and_then(|d| d.sizes.get(dim)?.as_ref())
        .ok_or_else(|| Error::internal("capture", "a dynamic input without its size"))?;
    Ok(cell.as_arg())
}
