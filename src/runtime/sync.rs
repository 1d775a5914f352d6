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
