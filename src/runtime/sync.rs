//! Sync: turn pending graphs into device data (the tensor layer rebinds
//! its handles to the data leaves returned here).
//!
//! Computed sizes stay on the device in `runtime::size_values`, keyed by
//! variable, while a size names it; `materialize()` reads them once
//! (`SizeMaterialization`) or runs a program that returns only those sizes.
//!
//! **Carried sizes** (`FreshSizes`). A sync names each result's compound
//! dynamic size (`min(256, s0 + 1)` after a `cat` and a `with_bound`) with
//! a fresh variable bounded by `[0, bound]`, one per distinct expression; a
//! size that is one variable keeps it. So data carried from step to step (a
//! cache, a list of boxes) starts every step with a size of the same bounds
//! and the step reuses its program; kept as an expression, the size would
//! nest one level deeper and its lower bound rise every step. The price: a
//! user's `SymInt` from before the sync and the data's new size are no
//! longer equal as expressions, so an op that needs them equal checks it
//! when the program runs (`reshape_sym` included).

use super::cache;
use super::canonical::trace_unkeyed;
use super::device_data::{Bounds, DeviceData, SizeCells};
use super::diagnose;
pub(crate) use super::donation::Holders;
use super::size_cell::SizeCell;
use super::size_values;
use crate::backend::{DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef};
use crate::device::Device;
use crate::ir::Node;
use crate::metrics;
use crate::symint::{Shape, SizeExpr, VarRef};
use crate::Result;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

/// One sync at a time: a sync reads and rebinds tensors' nodes (the
/// caller rebinds under this lock), and two interleaved syncs would
/// compute the same work twice.
static SYNC: LazyLock<Mutex<()>> = LazyLock::new(|| Mutex::new(()));

/// The number of programs executed by syncs so far; a captured step
/// checks that recording it ran none (see `capture`).
static EXECUTIONS: AtomicU64 = AtomicU64::new(0);

/// Holds off other syncs while a captured step replays its program.
pub(crate) fn lock() -> parking_lot::MutexGuard<'static, ()> {
    SYNC.lock()
}

/// See [`EXECUTIONS`].
pub(crate) fn executions() -> u64 {
    EXECUTIONS.load(Ordering::Relaxed)
}

/// What [`run_roots`] computed: a data leaf for each root, in order, and
/// the program that ran.
pub(crate) struct Synced {
    /// The program's output nodes, before they were computed.
    pub roots: Vec<Arc<Node>>,
    /// A data leaf holding each root's value, in the order of `roots`.
    pub data_nodes: Vec<Arc<Node>>,
    /// The execution.
    pub ran: Ran,
    /// The status of the program's size checks, not read yet: the caller
    /// reads it before anyone reads these results (see
    /// `tensor::sync::verify`), so a step never waits for its own program.
    pub status: Option<Status>,
}

/// A program's check status, to read once the program is done (see
/// `Backend::check_status`).
pub(crate) struct Status {
    device: Device,
    exe: ExecutableRef,
    buffer: DeviceBuffer,
}

impl Status {
    /// Waits for the program if it still runs; the error of the first
    /// failed check, if any.
    pub fn check(&self) -> Result<()> {
        self.device.backend().check_status(&self.exe, &self.buffer)
    }
}

/// Computes `roots` (distinct pending nodes of one device) in one program
/// and returns a data leaf for each. The caller holds [`lock`] until it
/// has rebound its handles to the results. On error nothing is computed.
///
/// `holders` says which tensors hold the roots and the old values of
/// those the step updates: their parameters are donated to the program
/// where that is proven safe (see `runtime::donation`).
pub(crate) fn run_roots(
    device: &Device,
    roots: Vec<Arc<Node>>,
    holders: &mut Holders,
) -> Result<Synced> {
    let inner = inner_vars(&roots);
    let buckets = super::buckets::size_buckets();
    let bounds: Vec<Bounds> = roots.iter().map(|r| result_bounds(r, buckets)).collect();
    let pinned = keep_placement(device, &roots, holders);
    if let Some(p) = &pinned {
        holders.pinned = p
            .iter()
            .zip(&roots)
            .map(|(p, r)| !Arc::ptr_eq(p, r))
            .collect();
    }
    let program_roots = pinned.as_deref().unwrap_or(&roots);
    let mut ran = run(device, program_roots, &[], &inner, Some(holders), &bounds)
        .map_err(|e| step_failed(e, &roots))?;
    let status = match ran.outputs_checked {
        true => Some(Status {
            device: device.clone(),
            exe: ran.exe.clone(),
            buffer: ran.outputs.take_last()?,
        }),
        false => None,
    };
    let mut data_nodes = Vec::with_capacity(roots.len());
    let mut fresh = FreshSizes::default();
    let mut at = 0;
    for (root, bounds) in roots.iter().zip(bounds) {
        let buffer = ran.outputs.take(at)?;
        let shape = match root.keeps_history_after_sync() {
            // A backward through the history meets its sizes as they were.
            true => root.shape.clone(),
            false => fresh.shape(&root.shape),
        };
        let cells = size_cells(device, &shape, &mut ran.outputs, at)?;
        at += ExecOutputs::of_result(&root.shape);
        let mut data = data_node(device, root.dtype, shape, buffer, cells, bounds);
        if let Some(d) = Arc::get_mut(&mut data) {
            // Made where the op it computes was recorded (diagnostics).
            d.location = root.location;
        }
        data_nodes.push(data);
    }
    // The size outputs follow the results.
    for (i, v) in inner.iter().enumerate() {
        size_values::bind(v, cell(device, ran.outputs.take(at + i)?));
    }
    Ok(Synced {
        roots,
        data_nodes,
        ran,
        status,
    })
}

/// On an SPMD device, the roots with every update of a value constrained
/// to the value's sharding (whole, for a whole value): an updated
/// parameter or optimizer state keeps its placement from step to step,
/// rather than the one XLA's propagation would choose for the result,
/// so the next step's program is the same one. `None` elsewhere.
fn keep_placement(
    device: &Device,
    roots: &[Arc<Node>],
    holders: &Holders,
) -> Option<Vec<Arc<Node>>> {
    let n = device.backend().placement().partitions();
    if n == 1 || holders.updates.is_empty() {
        return None;
    }
    let mut out = roots.to_vec();
    for (k, old) in &holders.updates {
        let (Some(root), Some(data)) = (roots.get(*k), super::device_data::of(old)) else {
            continue;
        };
        let static_shape = root.shape.iter().all(|e| e.as_const().is_some());
        let constrained = matches!(root.op, crate::ir::Op::Sharding(_));
        if !static_shape || constrained || !data.device.same(device) {
            continue;
        }
        let sharding = data.sharding().or_else(|| {
            let rank = root.shape.len();
            crate::ir::sharding::Sharding::new(vec![1; rank], n, (0..n).collect()).map(Arc::new)
        });
        if let Some(s) = sharding {
            out[*k] = Node::new(
                crate::ir::Op::Sharding(s),
                smallvec::smallvec![root.clone()],
                smallvec::SmallVec::new(),
                root.dtype,
                root.shape.clone(),
                false,
            );
        }
    }
    Some(out)
}

/// The shape of a buffer a program writes a result of `root`'s shape
/// into: its bounds, longer along a dynamic dim with bucketed bounds (see
/// `runtime::buckets`).
pub(crate) fn result_bounds(root: &Node, buckets: Option<super::buckets::SizeBuckets>) -> Bounds {
    root.shape
        .iter()
        .map(|e| {
            let bound = e.hi().max(0) as usize;
            match e.as_const() {
                Some(_) => bound,
                None => super::buckets::result_buffer(buckets, bound),
            }
        })
        .collect()
}

/// New names for the sizes of a sync's results. A dynamic size that is
/// an expression (`min(256, s0 + 1)` after a `cat` and a `with_bound`)
/// becomes a fresh variable bounded by `[0, bound]`, bound to the size the
/// program computed; one per distinct expression, so results that shared
/// a size still share one. So data carried from step to step (a cache, a
/// list of boxes) starts each step with a variable of the same bounds, and
/// the step's program is the same every time: kept as an expression, its
/// size would nest one level deeper and its lower bound rise every step,
/// and every step would compile anew. A size that is one variable keeps
/// it (results of one `nonzero` stay provably equal).
#[derive(Default)]
pub(crate) struct FreshSizes {
    named: Vec<(SizeExpr, SizeExpr)>,
}

impl FreshSizes {
    /// `shape` with each compound dynamic size renamed.
    pub fn shape(&mut self, shape: &[SizeExpr]) -> Shape {
        shape.iter().map(|e| self.size(e)).collect()
    }

    fn size(&mut self, e: &SizeExpr) -> SizeExpr {
        if e.as_const().is_some() || e.as_var().is_some() || e.hi() <= 0 {
            return e.clone();
        }
        if let Some((_, v)) = self.named.iter().find(|(x, _)| x == e) {
            return v.clone();
        }
        let v = SizeExpr::var(VarRef::fresh(0, e.hi()));
        self.named.push((e.clone(), v.clone()));
        v
    }
}

/// Variables that the roots' shapes name only inside larger expressions
/// (`2*s` after flattening a `[s, 2]`), with no value yet: the program
/// returns them too, so the results' sizes stay readable as expressions
/// once the nodes that define them are gone. (A variable that is a whole
/// dimension of a root is bound from that dimension's size.)
fn inner_vars(roots: &[Arc<Node>]) -> Vec<VarRef> {
    let mut inner = Vec::new();
    for d in roots.iter().flat_map(|r| r.shape.iter()) {
        if d.as_const().is_some() || d.as_var().is_some() {
            continue;
        }
        for v in d.vars() {
            let whole = roots
                .iter()
                .any(|r| r.shape.iter().any(|e| e.as_var() == Some(&v)));
            if !size_values::is_bound(&v) && !whole && !inner.contains(&v) {
                inner.push(v);
            }
        }
    }
    inner
}

/// `e`, the failure of the program computing `roots`, naming them (they
/// stay pending) unless the backend already named what failed (a failed
/// size check names its op and sizes). Errors of
/// the recording (inference) never get here.
fn step_failed(e: crate::Error, roots: &[Arc<Node>]) -> crate::Error {
    match e {
        crate::Error::StepFailed { .. } | crate::Error::SizeCheckFailed { .. } => e,
        e => crate::Error::StepFailed {
            failed: "the step's program".into(),
            pending: crate::ir::node::describe_values(
                roots.iter().map(|r| (&r.op, r.dtype, &r.shape[..])),
            ),
            source: Box::new(e),
        },
    }
}

/// Computes the values of `vars` (size variables no program has computed
/// yet) by running just what they need: the `include` nodes define them.
pub(crate) fn compute_sizes(device: &Device, include: &[Arc<Node>], vars: &[VarRef]) -> Result<()> {
    let _guard = SYNC.lock();
    let mut ran = run(device, &[], include, vars, None, &[])?;
    if ran.outputs_checked {
        // Sizes are read as soon as they are computed: check at once.
        let status = ran.outputs.take_last()?;
        device.backend().check_status(&ran.exe, &status)?;
    }
    // The size outputs follow the results, and no result was asked for.
    let first = ran.outputs.len().saturating_sub(vars.len());
    for (i, v) in vars.iter().enumerate() {
        size_values::bind(v, cell(device, ran.outputs.take(first + i)?));
    }
    Ok(())
}

/// The cell of a size a program computed into `b`.
pub(crate) fn cell(device: &Device, b: DeviceBuffer) -> Arc<SizeCell> {
    Arc::new(SizeCell::on_device(b, device.clone()))
}

/// The size cells of a program's result of `shape` whose buffer is output
/// `at`, from the size outputs that follow it (one per dynamic dimension,
/// in order); see [`size_cell`].
pub(crate) fn size_cells(
    device: &Device,
    shape: &[SizeExpr],
    outputs: &mut ExecOutputs,
    at: usize,
) -> Result<SizeCells> {
    let mut cells = SizeCells::with_capacity(shape.len());
    let mut next = at + 1;
    for d in shape {
        if d.as_const().is_some() {
            cells.push(None);
            continue;
        }
        cells.push(Some(size_cell(device, d, outputs.take(next)?)));
        next += 1;
    }
    Ok(cells)
}

/// The cell of a result's dynamic dimension of size `dim`, from its size
/// output. A size that is a variable shares the variable's cell: the
/// first result to name the variable binds it, and the size outputs of
/// later ones repeat its value and are released.
pub(crate) fn size_cell(device: &Device, dim: &SizeExpr, size: DeviceBuffer) -> Arc<SizeCell> {
    match dim.as_var() {
        Some(v) => match size_values::cell(v) {
            Some(c) => c,
            None => size_values::bind(v, cell(device, size)),
        },
        None => cell(device, size),
    }
}

/// A data leaf holding a program's result of type `dtype` and `shape`,
/// its sizes in `cells` (see [`size_cells`]), in a buffer of shape
/// `bounds` ([`result_bounds`]).
pub(crate) fn data_node(
    device: &Device,
    dtype: crate::DType,
    shape: Shape,
    buffer: DeviceBuffer,
    cells: SizeCells,
    bounds: Bounds,
) -> Arc<Node> {
    let data = DeviceData::on_device(device.clone(), buffer, cells, bounds);
    super::device_data::leaf(dtype, shape, data)
}

/// Starts `exe` on `device`, timed as `ExecuteTime` and counted as
/// `ExecuteGraph`: a sync's program or a captured step's replay.
pub(crate) fn execute(
    device: &Device,
    exe: &ExecutableRef,
    args: &ExecArgs<'_>,
) -> Result<ExecOutputs> {
    let outputs = metrics::time(metrics::Timer::ExecuteTime, || {
        device.backend().execute(exe, args)
    })?;
    metrics::inc(metrics::Counter::ExecuteGraph);
    Ok(outputs)
}

/// One execution by a sync: its outputs, and what a captured step needs
/// to run the same program again.
pub(crate) struct Ran {
    pub outputs: ExecOutputs,
    pub exe: ExecutableRef,
    /// The data of each parameter, in order.
    pub params: Vec<Arc<DeviceData>>,
    /// The variables whose values were passed as arguments, in order.
    pub arg_vars: Vec<VarRef>,
    /// True when the program makes size checks (its last output, until
    /// taken, is their status).
    pub outputs_checked: bool,
    /// The parameters the program aliases to its results, as
    /// `(parameter, output)` positions (`Program::aliases`).
    pub aliases: Vec<(usize, usize)>,
}

/// Traces, compiles (or takes from the cache) and executes a program that
/// returns `outputs` (output `k` into a buffer of shape
/// `output_bounds[k]`, see [`result_bounds`]) and the values of
/// `size_requests`; `include` adds nodes that define requested sizes.
fn run(
    device: &Device,
    outputs: &[Arc<Node>],
    include: &[Arc<Node>],
    size_requests: &[VarRef],
    holders: Option<&Holders>,
    output_bounds: &[Bounds],
) -> Result<Ran> {
    let mut traced = metrics::time(metrics::Timer::TraceTime, || {
        let mut traced = trace_unkeyed(outputs, include, size_requests)?;
        traced.write_outputs_into(output_bounds);
        // A failed size check gives the step's assigned tensors their old
        // values back, so a program with checks donates none of those
        // (`donation::choose`).
        match holders {
            Some(h) if device.backend().donates() => traced.donate(outputs, h),
            _ => {}
        }
        traced.compute_key();
        Ok::<_, crate::Error>(traced)
    })?;
    cache::with_device(&mut traced.key, device.id());
    let exe = match cache::get(&traced.key) {
        Some(exe) => {
            metrics::inc(metrics::Counter::CachedCompile);
            exe
        }
        None => {
            let program = traced.program();
            diagnose::before_compile(device.id(), &program, || traced.most_recorded_line())?;
            let start = std::time::Instant::now();
            let exe = metrics::time(metrics::Timer::CompileTime, || {
                device.backend().compile(&program)
            })?;
            metrics::inc(metrics::Counter::UncachedCompile);
            diagnose::compiled(
                device.id(),
                &program,
                &traced.locations(),
                &traced.key,
                start.elapsed(),
                holders.map_or(0, |h| (h.gradients)()),
            );
            cache::put(traced.key.clone(), exe.clone());
            exe
        }
    };
    diagnose::forced(|| match outputs.is_empty() {
        true => format!("{} size(s)", size_requests.len()),
        false => {
            crate::ir::node::describe_values(outputs.iter().map(|r| (&r.op, r.dtype, &r.shape[..])))
        }
    });
    super::canonical::recycle_key(std::mem::take(&mut traced.key));
    let outputs = execute(device, &exe, &traced.args()?)?;
    EXECUTIONS.fetch_add(1, Ordering::Relaxed);
    for &k in &traced.donated {
        // Its buffer is gone: any later use is an error, never a read.
        traced.params_data[k].mark_donated();
        metrics::inc(metrics::Counter::DonatedBuffer);
    }
    Ok(Ran {
        outputs,
        exe,
        arg_vars: traced.arg_vars(),
        params: std::mem::take(&mut traced.params_data),
        outputs_checked: traced.checked,
        aliases: std::mem::take(&mut traced.aliases),
    })
}
