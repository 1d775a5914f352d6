//! `mark_step` and syncing tensors: the runtime computes their pending
//! nodes, and the tensors are rebound to the data leaves it returns.
//!
//! **Reading size checks.** Checks cost no extra program: the reference
//! backend evaluates each before its node runs; on XLA the program returns
//! one more output, `i32[3]` (the first failed check or -1, and its two
//! sizes). A sync binds its results without waiting and leaves that status
//! unread (`verify`): `mark_step` reads it before returning, a read after
//! its transfer (which waits for the program anyway), and the next sync,
//! size read or replay before going on; the CPU plugin's status is read in
//! place. A failed check is `Error::SizeCheckFailed`, naming the op and
//! both sizes with bounds and values; the step is undone: every tensor it
//! `assign`ed gets its earlier value back (parameters and optimizer state
//! read as before the step) and its other results fail with the same error
//! wherever used. A captured replay reads the status before binding, since
//! its results move into tensors in place.
//!
//! **Reads share work** (`with_sharing`). A read computes, with its
//! tensor, every live pending tensor whose pending work (nodes that depend
//! on device data) it shares, as `mark_step` would, except tensors
//! gradients flow through (their graph waits for a backward); when that
//! program fails a size check they stay pending and the read computes its
//! tensor alone. So a loop that reads its loss and carries a state without
//! `mark_step` runs one cached program per iteration instead of a graph
//! that grows.
//!
//! **Failed steps.** `Error::StepFailed` gives the backend's reason, what
//! it was computing and the pending tensors that need it, largest first:
//! those stay pending and fail every later step until dropped or
//! reassigned. On XLA a program that fails while running (out of device
//! memory, say) is reported by the next `mark_step`, read or
//! `Device::synchronize`, as PyTorch/XLA and JAX do: the tensors it
//! computed hold the error, everything before is intact, except the old
//! values of the tensors it updated that were donated to it (those hold
//! the error too).

use super::{registry, Tensor, TensorInner};
use crate::device::Device;
use crate::ir::{Node, Op};
use crate::metrics;
use crate::runtime::device_data::{self, DeviceData};
use crate::runtime::sync::{self, Synced};
use crate::Result;
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::{Arc, Weak};

/// The last step whose size checks were not read yet (see [`verify`]).
static UNVERIFIED: Mutex<Option<Unverified>> = Mutex::new(None);

/// A step bound to its tensors before its size checks were read.
struct Unverified {
    status: sync::Status,
    /// Each tensor the step rebound, with the value it had before the step
    /// when the step assigned it.
    rebound: Vec<(Weak<TensorInner>, Option<Arc<Node>>)>,
    /// The data the step computed.
    results: Vec<Arc<DeviceData>>,
    /// For a read that computed other tensors with it ([`with_sharing`]):
    /// each rebound tensor's pending node, which a failed check gives back
    /// (the read then computes its tensor alone, so a check that only
    /// another tensor needs cannot fail it).
    pending: Option<Vec<Arc<Node>>>,
}

/// Reads the size checks (`ir::check`) of the last step, if nobody has
/// yet. A sync starts its program and binds the results without waiting
/// for it, as every sync does; the checks are read before anything uses
/// those results: by `mark_step` before it returns, by a read after its
/// transfer (which waits for the program anyway), and before the next
/// sync, size read or replay. When a check failed, the step is undone:
/// every tensor it assigned gets its value from before the step back, its
/// other results fail with the check's error wherever they are used, and
/// this returns that error.
#[track_caller]
pub(crate) fn verify() -> Result<()> {
    let Some(u) = UNVERIFIED.lock().take() else {
        return Ok(());
    };
    let Err(e) = u.status.check() else {
        return Ok(());
    };
    for d in &u.results {
        d.fail(e.clone());
    }
    if let Some(pending) = u.pending {
        for ((t, before), node) in u.rebound.into_iter().zip(pending) {
            if let Some(inner) = t.upgrade() {
                Tensor::from_inner(inner).restore_pending(node, before);
            }
        }
        return Err(e);
    }
    for (t, before) in u.rebound {
        if let (Some(inner), Some(before)) = (t.upgrade(), before) {
            Tensor::from_inner(inner).restore_to(before);
        }
    }
    Err(e)
}

/// Computes every live tensor with pending work, one program per device
/// (in practice, the default device), and leaves them holding device data.
///
/// ```
/// use lazyxla::Tensor;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let b = &a * 2.0;
/// lazyxla::mark_step().unwrap();
/// assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
/// ```
#[track_caller]
pub fn mark_step() -> crate::Result<()> {
    crate::tensor::at_site("mark_step", || {
        metrics::inc(metrics::Counter::MarkStep);
        let mut pending = registry::pending();
        if !super::control_flow::tracing_body() {
            // Values of a loop body another thread is tracing: not ours.
            pending.retain(|t| t.node().loop_depth == 0);
        }
        let mut devices: Vec<Device> = Vec::new();
        for t in &pending {
            if !devices.iter().any(|d| d.same(t.device())) {
                devices.push(t.device().clone());
            }
        }
        for d in devices {
            let group: Vec<Tensor> = pending
                .iter()
                .filter(|t| t.device().same(&d))
                .cloned()
                .collect();
            sync_tensors(&group)?;
        }
        verify()
    })
}

/// `t`, when pending, with every live pending tensor of its device whose
/// pending work shares a node with `t`'s: what a read of `t` computes, as
/// `mark_step` would. Computing only `t` would leave the others' graphs
/// holding the work again, one step deeper each time: a loop that reads
/// its loss every step and carries a state without `mark_step` would
/// compile a larger program at every step. Nodes that depend on no device
/// data (constants, shared broadcasts of scalars) do not count as shared
/// work.
#[track_caller]
pub(crate) fn with_sharing(t: &Tensor) -> Vec<Tensor> {
    let root = t.node();
    if matches!(root.op, Op::Data { .. }) {
        return vec![t.clone()];
    }
    let is_data = |n: &Node| matches!(n.op, Op::Data { .. });
    // `t`'s pending nodes that depend on device data.
    let order = crate::ir::node::topo_order(std::slice::from_ref(&root), is_data);
    let mut on_data: FxHashMap<*const Node, bool> = FxHashMap::default();
    let mut mine: FxHashSet<*const Node> = FxHashSet::default();
    for n in &order {
        let dep = is_data(n)
            || n.inputs
                .iter()
                .chain(&n.size_deps)
                .any(|i| on_data.get(&Arc::as_ptr(i)).copied().unwrap_or(false));
        on_data.insert(Arc::as_ptr(n), dep);
        if dep && !is_data(n) {
            mine.insert(Arc::as_ptr(n));
        }
    }
    drop(order);
    let mut out = vec![t.clone()];
    let tracing = super::control_flow::tracing_body();
    // Whether a node reaches one of `t`'s, memoised across the tensors.
    let mut reaches: FxHashMap<*const Node, bool> = FxHashMap::default();
    for u in registry::pending() {
        if u.is(t) || !u.device().same(t.device()) {
            continue;
        }
        let n = u.node();
        // A tensor gradients flow through keeps its graph for a backward
        // still to come: computing it early would cut that graph.
        if (!tracing && n.loop_depth > 0) || n.requires_grad {
            continue;
        }
        if reaches_any(&n, &mine, &mut reaches) {
            out.push(u);
        }
    }
    out
}

/// True when the pending graph of `n` contains a node of `targets`.
fn reaches_any(
    n: &Arc<Node>,
    targets: &FxHashSet<*const Node>,
    memo: &mut FxHashMap<*const Node, bool>,
) -> bool {
    let mut stack: Vec<(&Arc<Node>, bool)> = vec![(n, false)];
    while let Some((m, expanded)) = stack.pop() {
        let key = Arc::as_ptr(m);
        if memo.contains_key(&key) {
            continue;
        }
        if targets.contains(&key) {
            memo.insert(key, true);
            continue;
        }
        if matches!(m.op, Op::Data { .. }) {
            memo.insert(key, false);
            continue;
        }
        let deps = || m.inputs.iter().chain(&m.size_deps);
        if expanded {
            let hit = deps().any(|d| memo.get(&Arc::as_ptr(d)).copied().unwrap_or(false));
            memo.insert(key, hit);
        } else {
            stack.push((m, true));
            for d in deps() {
                if !memo.contains_key(&Arc::as_ptr(d)) {
                    stack.push((d, false));
                }
            }
        }
    }
    memo.get(&Arc::as_ptr(n)).copied().unwrap_or(false)
}

/// Computes `tensors` (all on one device) in one program and rebinds them
/// to the results. On error nothing is rebound: the tensors stay pending
/// and valid.
#[track_caller]
pub(crate) fn sync_tensors(tensors: &[Tensor]) -> Result<()> {
    sync_program(tensors).map(|_| ())
}

/// [`sync_tensors`], returning what ran (`None` when nothing was pending).
#[track_caller]
pub(crate) fn sync_program(tensors: &[Tensor]) -> Result<Option<Synced>> {
    sync_program_undoing(tensors, false)
}

/// Computes `tensors` for a read of `tensors[0]`, the others computed with
/// it ([`with_sharing`]): when a size check of the program fails, every
/// tensor stays pending and the read computes its tensor alone.
#[track_caller]
pub(crate) fn sync_read(tensors: &[Tensor]) -> Result<()> {
    if tensors.len() == 1 {
        return sync_tensors(tensors);
    }
    match sync_program_undoing(tensors, true) {
        Ok(_) => Ok(()),
        Err(crate::Error::SizeCheckFailed { .. }) => sync_tensors(&tensors[..1]),
        Err(e) => Err(e),
    }
}

#[track_caller]
fn sync_program_undoing(tensors: &[Tensor], undo_to_pending: bool) -> Result<Option<Synced>> {
    let _guard = sync::lock();
    verify()?;
    // Take each distinct pending node once, in the order of `tensors`.
    // `root_at` finds a node's position among them without a scan: a step
    // with thousands of pending tensors (a large model's parameters and
    // moments) syncs in linear time.
    let mut roots: Vec<Arc<Node>> = Vec::new();
    let mut root_at: rustc_hash::FxHashMap<*const Node, usize> = Default::default();
    for t in tensors {
        let n = t.node();
        if !matches!(n.op, Op::Data { .. }) {
            if let std::collections::hash_map::Entry::Vacant(e) = root_at.entry(Arc::as_ptr(&n)) {
                e.insert(roots.len());
                roots.push(n);
            }
        }
    }
    if roots.is_empty() {
        return Ok(None);
    }
    let mut holders = holders(tensors, &roots);
    let synced = match sync::run_roots(tensors[0].device(), roots, &mut holders) {
        Ok(synced) => synced,
        Err(e) => {
            if let crate::Error::SizeCheckFailed { .. } = e {
                // The step changes nothing (see `Error::SizeCheckFailed`).
                for t in tensors {
                    t.restore_before_assign();
                }
            }
            return Err(e);
        }
    };
    drop(holders);
    let mut rebound = Vec::new();
    let mut pending = Vec::new();
    // `synced.roots` are `roots`, in order (`run_roots`).
    debug_assert_eq!(synced.roots.len(), root_at.len());
    for t in tensors {
        let current = t.node();
        if let Some(&i) = root_at.get(&Arc::as_ptr(&current)) {
            let data = synced.data_nodes[i].with_grad_history(&current);
            if let Some(before) = t.rebind_if_unchanged(&current, data) {
                rebound.push((Arc::downgrade(&t.inner), before));
                pending.push(current);
            }
        }
    }
    let mut synced = synced;
    if let Some(status) = synced.status.take() {
        let results = synced
            .data_nodes
            .iter()
            .filter_map(|n| device_data::shared(n))
            .collect();
        *UNVERIFIED.lock() = Some(Unverified {
            status,
            rebound,
            results,
            pending: undo_to_pending.then_some(pending),
        });
    }
    Ok(Some(synced))
}

/// For the runtime's choice of what to donate (`runtime::donation`): per
/// root, how many of `tensors` (counted once each) hold it, and for those
/// assigned since their last sync, the data leaf they held then.
#[track_caller]
fn holders<'a>(tensors: &'a [Tensor], roots: &[Arc<Node>]) -> sync::Holders<'a> {
    let at: rustc_hash::FxHashMap<*const Node, usize> = roots
        .iter()
        .enumerate()
        .map(|(j, r)| (Arc::as_ptr(r), j))
        .collect();
    let mut counts = vec![0; roots.len()];
    let mut updates = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for t in tensors {
        if !seen.insert(Arc::as_ptr(&t.inner)) {
            continue;
        }
        let Some(j) = t.with_node(|n| at.get(&(n as *const Node)).copied()) else {
            continue;
        };
        counts[j] += 1;
        if let Some(old) = t.assigned_from() {
            updates.push((j, old));
        }
    }
    // The runtime asks while it holds the roots, so their addresses still
    // name them. A gradient is counted once however many tensors hold it.
    let gradients = move || {
        let mut grads = rustc_hash::FxHashSet::default();
        for t in tensors {
            let grad = t.inner.grad.lock().as_ref().map(Tensor::node);
            if let Some(&j) = grad.and_then(|g| at.get(&Arc::as_ptr(&g))) {
                grads.insert(j);
            }
        }
        grads.len()
    };
    sync::Holders {
        tensors: counts,
        updates,
        pinned: Vec::new(),
        gradients: Box::new(gradients),
    }
}
