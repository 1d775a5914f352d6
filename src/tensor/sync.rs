//! `mark_step` and syncing tensors: the runtime computes their pending
//! nodes, and the tensors are rebound to the data leaves it returns.

use super::{registry, Tensor};
use crate::device::Device;
use crate::ir::{Node, Op};
use crate::metrics;
use crate::runtime::sync::{self, Synced};
use crate::Result;
use std::sync::Arc;

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
    metrics::inc(metrics::Counter::MarkStep);
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
    sync_program(tensors).map(|_| ())
}

/// [`sync_tensors`], returning what ran (`None` when nothing was pending).
pub(crate) fn sync_program(tensors: &[Tensor]) -> Result<Option<Synced>> {
    let _guard = sync::lock();
    // Take each distinct pending node once.
    let mut roots: Vec<Arc<Node>> = Vec::new();
    for t in tensors {
        let n = t.node();
        if !matches!(n.op, Op::Data { .. }) && !roots.iter().any(|r| Arc::ptr_eq(r, &n)) {
            roots.push(n);
        }
    }
    if roots.is_empty() {
        return Ok(None);
    }
    let synced = match sync::run_roots(tensors[0].device(), roots) {
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
    for t in tensors {
        let current = t.node();
        if let Some(i) = synced.roots.iter().position(|r| Arc::ptr_eq(r, &current)) {
            t.rebind_if_unchanged(&current, synced.data_nodes[i].clone());
        }
    }
    Ok(Some(synced))
}
