//! Bucketed bounds on device data (`runtime::buckets`): when a step first
//! uses a tensor holding device data with dynamic dims, each dim whose
//! real size fits a bucket is bounded by that bucket.

use super::Tensor;
use crate::ir::{Node, Op};
use crate::runtime::buckets::{self, SizeBuckets};
use crate::runtime::device_data::{self, DeviceData};
use crate::runtime::size_values;
use crate::symint::var::WeakVar;
use crate::symint::{Shape, SizeExpr, VarRef};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    /// Each variable a leaf's dim was renamed from, with its new name: two
    /// tensors holding one size (results of one step that shared a size
    /// variable) keep sharing one after bucketing.
    static RENAMED: RefCell<Vec<(WeakVar, WeakVar)>> = const { RefCell::new(Vec::new()) };
}

/// A dim to bound by a bucket.
struct Rebound {
    dim: usize,
    bucket: usize,
}

impl Tensor {
    /// With bucketed bounds on ([`crate::set_size_buckets`]), rebinds a
    /// tensor holding device data to the same data with each dynamic dim
    /// bounded by the bucket of its real size (read from the device if it
    /// is not known yet, which waits for the program that computed it), in
    /// a buffer of the bucket's length (`buckets::buffer_for`; data in a
    /// buffer of another length is copied into one through the host).
    /// Anything that fails here leaves the tensor as it is: the step then
    /// uses its bounds as computed, and a real error shows where the data
    /// is used.
    #[track_caller]
    pub(crate) fn apply_buckets(&self) {
        let Some(b) = buckets::size_buckets() else {
            return;
        };
        let node = self.node();
        if !matches!(node.op, Op::Data { .. }) || !node.is_dynamic() || node.requires_grad {
            return;
        }
        let Some(data) = device_data::shared(&node) else {
            return;
        };
        let Some(plan) = plan(&node, &data, b) else {
            return;
        };
        let Some(new) = rebound(self, &node, &data, &plan) else {
            return;
        };
        let mut n = self.inner.node.lock();
        if Arc::ptr_eq(&n, &node) {
            *n = new;
        }
    }
}

/// The dims of `node` (a data leaf holding `data`) to rebound, or `None`
/// when each already has its bucket's bound and buffer.
#[track_caller]
fn plan(node: &Node, data: &DeviceData, b: SizeBuckets) -> Option<SmallVec<[Rebound; 2]>> {
    let mut plan = SmallVec::new();
    let mut changes = false;
    for (dim, e) in node.shape.iter().enumerate() {
        if e.as_const().is_some() {
            continue;
        }
        let real = data.sizes.get(dim)?.as_ref()?.get().ok()?;
        let Some(bucket) = b.bucket(real.max(0) as usize) else {
            continue;
        };
        let done = e.as_var().is_some()
            && e.hi() == bucket as i64
            && e.lo() == 0
            && data.bounds().get(dim) == Some(&buckets::buffer_for(bucket));
        changes |= !done;
        plan.push(Rebound { dim, bucket });
    }
    changes.then_some(plan)
}

/// The data leaf of `node`'s data with the dims of `plan` bounded by their
/// buckets, copied into buffers of the buckets' lengths where its buffer
/// has another length.
#[track_caller]
fn rebound(
    t: &Tensor,
    node: &Arc<Node>,
    data: &Arc<DeviceData>,
    plan: &[Rebound],
) -> Option<Arc<Node>> {
    let mut shape: Shape = node.shape.clone();
    let mut bounds: Vec<usize> = data.bounds().to_vec();
    for r in plan {
        let cell = data.sizes[r.dim].clone()?;
        shape[r.dim] = SizeExpr::var(renamed(&node.shape[r.dim], r.bucket, cell));
        bounds[r.dim] = buckets::buffer_for(r.bucket);
    }
    if bounds[..] == data.bounds()[..] {
        let shared = device_data::leaf_shared(node.dtype, shape, data.clone());
        return Some(shared);
    }
    // Another buffer length: the real elements into a new buffer.
    let host = match data.host_copy() {
        Some(h) => h,
        None => Arc::new(t.to_host().ok()?),
    };
    let copy = DeviceData::from_host(data.device.clone(), host, bounds, data.sizes.clone());
    Some(device_data::leaf(node.dtype, shape, copy))
}

/// The variable naming a dim of size `old` bounded by `bucket`: the one
/// an earlier rebinding in this thread gave the same variable, else a
/// fresh one bound to `cell`, the size's value.
#[track_caller]
fn renamed(
    old: &SizeExpr,
    bucket: usize,
    cell: Arc<crate::runtime::size_cell::SizeCell>,
) -> VarRef {
    let bucket = bucket as i64;
    let old_var = old.as_var().cloned();
    if let Some(v) = &old_var {
        let found = RENAMED.with(|r| {
            let mut r = r.borrow_mut();
            r.retain(|(from, to)| from.is_alive() && to.is_alive());
            r.iter().find_map(|(from, to)| {
                let (from, to) = (from.upgrade()?, to.upgrade()?);
                (from == *v && to.0.hi == bucket).then_some(to)
            })
        });
        if let Some(w) = found {
            return w;
        }
    }
    let w = VarRef::fresh(0, bucket);
    size_values::bind(&w, cell);
    if let Some(v) = old_var {
        RENAMED.with(|r| r.borrow_mut().push((v.downgrade(), w.downgrade())));
    }
    w
}
