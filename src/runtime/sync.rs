//! Sync: turn pending graphs into device data.

use super::canonical::trace;
use super::device_data::DeviceData;
use super::size_cell::SizeCell;
use super::{cache, metrics, registry};
use crate::backend::{ExecOutputs, SizeArg};
use crate::device::Device;
use crate::ir::{Node, Op};
use crate::symint::VarRef;
use crate::tensor::Tensor;
use crate::Result;
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::{Arc, LazyLock};

/// One sync at a time: a sync reads and rebinds tensors' nodes, and two
/// interleaved syncs would compute the same work twice.
static SYNC: LazyLock<Mutex<()>> = LazyLock::new(|| Mutex::new(()));

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
pub fn mark_step() -> crate::Result<()> {
    metrics::inc("MarkStep");
    let pending = registry::pending();
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
    Ok(())
}

/// Computes `tensors` (all on one device) in one program and rebinds them
/// to the results. On error nothing is rebound: the tensors stay pending
/// and valid.
pub(crate) fn sync_tensors(tensors: &[Tensor]) -> Result<()> {
    let _guard = SYNC.lock();
    // Take each distinct pending node once.
    let mut roots: Vec<Arc<Node>> = Vec::new();
    for t in tensors {
        let n = t.node();
        if !matches!(n.op, Op::Data { .. }) && !roots.iter().any(|r| Arc::ptr_eq(r, &n)) {
            roots.push(n);
        }
    }
    if roots.is_empty() {
        return Ok(());
    }
    let device = tensors[0].device().clone();
    let outputs = run(&device, &roots, &[], &[])?;
    let mut data_nodes = Vec::with_capacity(roots.len());
    for (root, (buffer, sizes)) in roots.iter().zip(outputs.tensors) {
        data_nodes.push(data_node(&device, root, buffer, sizes));
    }
    for t in tensors {
        let current = t.node();
        if let Some(i) = roots.iter().position(|r| Arc::ptr_eq(r, &current)) {
            t.rebind_if_unchanged(&current, data_nodes[i].clone());
        }
    }
    Ok(())
}

/// Computes the values of `vars` (size variables no program has computed
/// yet) by running just what they need: the `include` nodes define them.
pub(crate) fn compute_sizes(device: &Device, include: &[Arc<Node>], vars: &[VarRef]) -> Result<()> {
    let _guard = SYNC.lock();
    let outputs = run(device, &[], include, vars)?;
    for (v, s) in vars.iter().zip(outputs.sizes) {
        bind(v, cell(device, s));
    }
    Ok(())
}

fn cell(device: &Device, s: SizeArg) -> Arc<SizeCell> {
    Arc::new(match s {
        SizeArg::Host(v) => SizeCell::host(v),
        SizeArg::Device(b) => SizeCell::on_device(b, device.clone()),
    })
}

fn bind(v: &VarRef, c: Arc<SizeCell>) {
    let _ = v.0.cell.set(c);
}

/// A data leaf holding a program's result for `root`, with the same dtype
/// and shape; binds the size variables that the result's dims are.
fn data_node(
    device: &Device,
    root: &Arc<Node>,
    buffer: crate::backend::BufferRef,
    sizes: Vec<SizeArg>,
) -> Arc<Node> {
    let mut cells = Vec::with_capacity(root.shape.len());
    let mut dynamic = sizes.into_iter();
    for d in &root.shape {
        if d.as_const().is_some() {
            cells.push(None);
            continue;
        }
        let c = cell(device, dynamic.next().expect("one size per dynamic dim"));
        if let Some(v) = d.as_var() {
            bind(v, c.clone());
        }
        cells.push(Some(c));
    }
    let data = DeviceData::on_device(device.clone(), buffer, cells);
    Node::new(
        Op::Data {
            dtype: root.dtype,
            shape: root.shape.clone(),
        },
        SmallVec::new(),
        SmallVec::new(),
        root.dtype,
        root.shape.clone(),
        Some(Arc::new(data)),
        false,
    )
}

/// Traces, compiles (or takes from the cache) and executes a program that
/// returns `outputs` and the values of `size_requests`; `include` adds
/// nodes that define requested sizes.
fn run(
    device: &Device,
    outputs: &[Arc<Node>],
    include: &[Arc<Node>],
    size_requests: &[VarRef],
) -> Result<ExecOutputs> {
    let mut traced = metrics::time("TraceTime", || trace(outputs, include, size_requests))?;
    let key = (device.id(), std::mem::take(&mut traced.key));
    let exe = match cache::get(&key) {
        Some(exe) => {
            metrics::inc("CachedCompile");
            exe
        }
        None => {
            let exe = metrics::time("CompileTime", || {
                device.backend().compile(&traced.program())
            })?;
            metrics::inc("UncachedCompile");
            cache::put(key, exe.clone());
            exe
        }
    };
    let args = traced.args()?;
    let out = metrics::time("ExecuteTime", || device.backend().execute(&exe, args))?;
    metrics::inc("ExecuteGraph");
    Ok(out)
}
