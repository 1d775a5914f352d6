//! Recording a captured step: run the function lazily, compute what it
//! left pending as one program, and note where each parameter and result
//! of that program lives.

use super::{
    DimTemplate, GradUpdate, Kept, OutputTemplate, Param, ParamSource, Returned, Signature,
    StateGuard, Variant,
};
use crate::backend::ExecOutputs;
use crate::ir::Node;
use crate::metrics;
use crate::runtime::device_data::{self, Bounds, DeviceData};
use crate::runtime::sync;
use crate::tensor::registry;
use crate::tensor::{next_tensor_id, Tensor};
use crate::{Error, Result};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A tensor as it was before the step: its data and gradient.
struct Before {
    tensor: std::sync::Weak<crate::tensor::TensorInner>,
    /// Held until the step has run, then released (`None`) so that it
    /// does not keep the recording's sync from donating the old value.
    data: Option<Arc<DeviceData>>,
    grad: Option<u64>,
}

/// Where a parameter's data came from, keyed by the data's address.
type Sources = FxHashMap<*const DeviceData, (ParamSource, Option<StateGuard>)>;

/// The tensors of the step's `before` (by index) whose gradient the step
/// changed, with the new gradient.
type GradChanges = Vec<(usize, Option<Tensor>)>;

/// Runs `step` on `inputs` (computed, with signature `signature`), runs
/// its pending work as one program and returns the recording and what the
/// step returned.
pub(super) fn record<F>(
    step: &mut F,
    inputs: &[Tensor],
    signature: Signature,
) -> Result<(Variant, Vec<Tensor>)>
where
    F: FnMut(&[Tensor]) -> Vec<Tensor>,
{
    // The device random state the step may draw from exists before it
    // (state of the step, not a tensor it creates).
    let device = inputs
        .first()
        .map_or_else(crate::Device::default, |t| t.device().clone());
    crate::tensor::prepare_random_state(&device);
    // Work pending before the step is not part of it.
    crate::mark_step()?;
    let first_new = next_tensor_id();
    let (sources, mut before) = state_before(inputs);
    let returned = run_step(step, inputs)?;
    let pending = registry::pending();
    let (device, grads_after) = check_pending(&pending, &before, inputs, &returned, first_new)?;

    // Addresses only: a reference held here would be one the sync cannot
    // account for, and it would donate nothing (`runtime::donation`). The
    // roots outlive these comparisons in `synced`.
    for b in &mut before {
        b.data = None;
    }
    let pending_nodes: Vec<*const Node> = pending
        .iter()
        .map(|t| t.with_node(|n| n as *const Node))
        .collect();
    let synced = crate::tensor::sync::sync_program(&pending)?;
    metrics::inc(metrics::Counter::StepRecording);
    let root_of = |t: &Tensor| -> Option<usize> {
        let i = pending.iter().position(|p| p.is(t))?;
        let roots = &synced.as_ref()?.roots;
        roots
            .iter()
            .position(|r| Arc::as_ptr(r) == pending_nodes[i])
    };

    let input_nodes: Vec<Arc<Node>> = inputs.iter().map(Tensor::node).collect();
    let mut templates = Templates::new(&input_nodes);
    let mut variant = Variant {
        signature,
        device: device.clone(),
        program: None,
        checked: false,
        params: Vec::new(),
        arg_sizes: Vec::new(),
        outputs: Vec::new(),
        fresh: Vec::new(),
        assigned: Vec::new(),
        grads: Vec::new(),
        donations: Vec::new(),
        returned: Vec::new(),
        kept: Kept::default(),
    };
    if let Some(s) = &synced {
        describe_program(&mut variant, s, &sources, &mut templates)?;
    }
    variant.fresh = templates.fresh;
    let unsynced = || Error::internal("capture", "a pending tensor the sync did not compute");
    for t in &pending {
        if t.id() < first_new {
            let i = root_of(t).ok_or_else(unsynced)?;
            variant.assigned.push((Arc::downgrade(&t.inner), i));
        }
    }
    if let Some(s) = &synced {
        // A donated parameter is the old value of the tensor that takes
        // the result it aliases; anything else is never donated again.
        for &(k, j) in &s.ran.aliases {
            let ParamSource::State(w) = &variant.params[k].source else {
                continue;
            };
            if variant.assigned.iter().any(|(t, i)| *i == j && t.ptr_eq(w)) {
                variant.donations.push(k);
            }
        }
    }
    for (i, grad) in grads_after {
        let set = match &grad {
            None => None,
            Some(g) => Some(root_of(g).ok_or_else(unsynced)?),
        };
        variant.grads.push(GradUpdate {
            owner: before[i].tensor.clone(),
            had_grad: before[i].grad.is_some(),
            set,
        });
    }
    for r in &returned {
        let how = if let Some(k) = inputs.iter().position(|i| i.is(r)) {
            Returned::Input(k)
        } else if let Some(i) = root_of(r).filter(|_| r.id() >= first_new) {
            Returned::Output(i)
        } else if r.id() < first_new {
            Returned::Same(r.clone())
        } else {
            Returned::Const(r.node())
        };
        variant.returned.push(how);
    }
    variant.mark_in_place();
    Ok((variant, returned))
}

/// The data of every live tensor and of its gradient before the step,
/// with what each parameter would be read from (an input over a state).
fn state_before(inputs: &[Tensor]) -> (Sources, Vec<Before>) {
    let mut sources = Sources::default();
    let mut before = Vec::new();
    for t in registry::live() {
        let n = t.node();
        if let Some(d) = device_data::of(&n) {
            sources.entry(d as *const DeviceData).or_insert_with(|| {
                (
                    ParamSource::State(Arc::downgrade(&t.inner)),
                    Some(StateGuard::of(&n)),
                )
            });
        }
        let grad = t.grad();
        if let Some(g) = &grad {
            let gn = g.node();
            if let Some(d) = device_data::of(&gn) {
                // The gradient tensor itself is replaced by replays; its
                // owner is what stays.
                sources.insert(
                    d as *const DeviceData,
                    (
                        ParamSource::GradOf(Arc::downgrade(&t.inner)),
                        Some(StateGuard::of(&gn)),
                    ),
                );
            }
        }
        before.push(Before {
            tensor: Arc::downgrade(&t.inner),
            data: device_data::shared(&n),
            grad: grad.map(|g| g.id()),
        });
    }
    for (k, t) in inputs.iter().enumerate().rev() {
        if let Some(d) = device_data::of(&t.node()) {
            sources.insert(d as *const DeviceData, (ParamSource::Input(k), None));
        }
    }
    (sources, before)
}

/// Runs `step` lazily; an error if it read a value while recorded.
fn run_step<F>(step: &mut F, inputs: &[Tensor]) -> Result<Vec<Tensor>>
where
    F: FnMut(&[Tensor]) -> Vec<Tensor>,
{
    let reads = || {
        (
            sync::executions(),
            metrics::counter("TransferFromDevice"),
            metrics::counter("SizeMaterialization"),
        )
    };
    let reads_before = reads();
    let returned = super::recording(|| step(inputs));
    if reads() != reads_before {
        return Err(Error::invalid(
            "capture",
            "the step read a value (item, to_vec, a size's materialize) or ran mark_step while \
             being recorded; a captured step must be one program: return the tensors you want to \
             read and read them after `run`",
        ));
    }
    Ok(returned)
}

/// Checks what the step left pending: results, assigned state and
/// gradients, anything else an error (it would go stale on replays).
/// The step's device, and the tensors of `before` whose gradient changed.
fn check_pending(
    pending: &[Tensor],
    before: &[Before],
    inputs: &[Tensor],
    returned: &[Tensor],
    first_new: u64,
) -> Result<(crate::Device, GradChanges)> {
    let input_index = |t: &Tensor| inputs.iter().position(|i| i.is(t));
    let is_returned = |t: &Tensor| returned.iter().any(|r| r.is(t));
    let mut grads_after = GradChanges::new();
    for (i, b) in before.iter().enumerate() {
        let Some(inner) = b.tensor.upgrade() else {
            continue;
        };
        let t = Tensor::from_inner(inner);
        let grad = t.grad();
        if grad.as_ref().map(Tensor::id) != b.grad {
            grads_after.push((i, grad));
        }
        let n = t.node();
        let now = device_data::of(&n).map(|d| d as *const DeviceData);
        if now.is_some() && now != b.data.as_ref().map(Arc::as_ptr) {
            return Err(Error::invalid(
                "capture",
                format!(
                    "the step assigned to a tensor {}{} a value it does not compute; assign a \
                     computed value (for example `x.assign(&(&v + 0.0))`) or pass the value as \
                     an input",
                    t.dtype(),
                    t.shape_string()
                ),
            ));
        }
    }
    let device = match pending.first() {
        Some(t) => t.device().clone(),
        None => inputs
            .first()
            .map_or_else(crate::Device::default, |t| t.device().clone()),
    };
    for t in pending {
        if !t.device().same(&device) {
            return Err(Error::DeviceMismatch {
                op: "capture",
                lhs: device.name().to_string(),
                rhs: t.device().name().to_string(),
            });
        }
        let is_grad = grads_after
            .iter()
            .any(|(_, g)| g.as_ref().is_some_and(|g| g.is(t)));
        let existed = t.id() < first_new;
        if existed && input_index(t).is_some() {
            return Err(Error::invalid(
                "capture",
                format!(
                    "the step assigned to its input {}{}; inputs are read-only in a captured \
                     step: return the new value instead",
                    t.dtype(),
                    t.shape_string()
                ),
            ));
        }
        if !(existed || is_returned(t) || is_grad) {
            return Err(Error::invalid(
                "capture",
                format!(
                    "the step created a tensor {}{} that is still alive after it but neither \
                     returned nor a gradient, so replays could not update it; return it, or \
                     drop it before the step returns",
                    t.dtype(),
                    t.shape_string()
                ),
            ));
        }
    }
    // A gradient the step changed is cleared or computed by the program.
    if let Some(g) = grads_after
        .iter()
        .filter_map(|(_, g)| g.as_ref())
        .find(|g| !g.is_pending())
    {
        return Err(Error::invalid(
            "capture",
            format!(
                "the step set a gradient {}{} that it does not compute",
                g.dtype(),
                g.shape_string()
            ),
        ));
    }
    Ok((device, grads_after))
}

/// The program's parameters, size arguments and results, as `variant`
/// reads and writes them on replays.
fn describe_program(
    variant: &mut Variant,
    s: &sync::Synced,
    sources: &Sources,
    templates: &mut Templates,
) -> Result<()> {
    variant.program = Some(s.ran.exe.clone());
    variant.checked = s.ran.outputs_checked;
    for d in &s.ran.params {
        let (source, guard) = sources
            .get(&Arc::as_ptr(d))
            .cloned()
            .unwrap_or_else(|| (ParamSource::Const(d.clone()), None));
        variant.params.push(Param { source, guard });
    }
    for v in &s.ran.arg_vars {
        let at = templates.input_dim(v.0.id).ok_or_else(|| {
            Error::invalid(
                "capture",
                "the step uses the size of a tensor that is neither an input nor computed \
                 in the step; pass that tensor as an input",
            )
        })?;
        variant.arg_sizes.push(at);
    }
    let mut at = 0;
    for (r, d) in s.roots.iter().zip(&s.data_nodes) {
        let bounds = crate::runtime::device_data::of(d)
            .map(|d| d.bounds().into())
            .ok_or_else(|| Error::internal("capture", "a result without data"))?;
        variant.outputs.push(templates.output(r, at, bounds));
        at += ExecOutputs::of_result(&r.shape);
    }
    Ok(())
}

/// Names the sizes of a program's results for replays: an input's size
/// stays that input's, a size the program computes becomes a fresh
/// variable per replay (results sharing one variable share the new one).
struct Templates<'a> {
    inputs: &'a [Arc<Node>],
    /// Variable id → fresh slot.
    slots: FxHashMap<u64, usize>,
    fresh: Vec<(i64, i64)>,
}

impl<'a> Templates<'a> {
    fn new(inputs: &'a [Arc<Node>]) -> Templates<'a> {
        Templates {
            inputs,
            slots: FxHashMap::default(),
            fresh: Vec::new(),
        }
    }

    /// The (input, dimension) whose size is variable `id`.
    fn input_dim(&self, id: u64) -> Option<(usize, usize)> {
        self.inputs.iter().enumerate().find_map(|(k, n)| {
            n.shape
                .iter()
                .position(|e| e.as_var().is_some_and(|v| v.0.id == id))
                .map(|d| (k, d))
        })
    }

    /// The template of result `root`, whose buffer is output `at`, of
    /// shape `bounds`.
    fn output(&mut self, root: &Node, at: usize, bounds: Bounds) -> OutputTemplate {
        let dims = root
            .shape
            .iter()
            .map(|e| {
                if let Some(c) = e.as_const() {
                    return DimTemplate::Static(c);
                }
                let var = e.as_var().map(|v| v.0.id);
                if let Some((input, dim)) = var.and_then(|id| self.input_dim(id)) {
                    return DimTemplate::Input { input, dim };
                }
                // From 0, as a sync's results (`runtime::sync::FreshSizes`):
                // a lower bound that rose with every replay would make
                // every replay's result a new input signature.
                let bounds = match var {
                    Some(_) => (e.lo(), e.hi()),
                    None => (e.lo().min(0), e.hi()),
                };
                let fresh = &mut self.fresh;
                let mut new_slot = || {
                    fresh.push(bounds);
                    fresh.len() - 1
                };
                // A compound size (`2 * s`) gets a variable of its own.
                let slot = match var {
                    Some(id) => *self.slots.entry(id).or_insert_with(new_slot),
                    None => new_slot(),
                };
                DimTemplate::Fresh(slot)
            })
            .collect();
        OutputTemplate {
            dtype: root.dtype,
            dims,
            in_place: false,
            at,
            bounds,
        }
    }
}
