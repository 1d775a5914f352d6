//! The narrow API through which a captured step's replay (`capture`)
//! binds its results to tensors without a sync: in-place result binding
//! and the sole-handle check. Only `capture` uses it (`tests/layers.rs`
//! checks); everything else goes through the public `Tensor` API and
//! `tensor::sync`.

use super::Tensor;
use crate::ir::{Node, Op};
use crate::runtime::device_data::DeviceData;
use crate::symint::{Shape, SizeExpr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Tensor {
    /// Replaces the node unconditionally (the replay holds the sync lock
    /// while it binds its results).
    #[track_caller]
    pub(crate) fn rebind(&self, new: Arc<Node>) {
        *self.inner.node.lock() = new;
        self.inner.before_assign.lock().take();
    }

    /// Puts a
    /// program's result into this computed tensor's own node and
    /// data, in place, when no other node or tensor shares them and `fits`
    /// accepts the node (the caller checks that the result has the node's
    /// dtype and rank). `write` is called only then, with the node and its
    /// data (see [`DataLeafMut`]). The tensor becomes a plain data leaf, as
    /// after [`Tensor::rebind`], and the old buffer is released. False when
    /// the node or data is shared: the caller then builds a new node.
    ///
    /// This is a captured step's cheapest rebinding: no tensor, node or
    /// data to allocate, nothing to free but the old buffer and sizes,
    /// and for a static result not even a shape to rebuild.
    #[track_caller]
    pub(crate) fn write_result(
        &self,
        fits: impl FnOnce(&Node) -> bool,
        write: impl FnOnce(&mut DataLeafMut) -> crate::Result<()>,
    ) -> crate::Result<bool> {
        let mut n = self.inner.node.lock();
        let Some(node) = Arc::get_mut(&mut n) else {
            return Ok(false);
        };
        if !fits(node) {
            return Ok(false);
        }
        // Only a data leaf takes a result.
        let Node {
            op: Op::Data { data, .. },
            shape,
            ..
        } = node
        else {
            return Ok(false);
        };
        let Some(data) = data.get_mut::<DeviceData>() else {
            return Ok(false);
        };
        write(&mut DataLeafMut { shape, data })?;
        node.requires_grad = false;
        node.grad_leaf = None;
        node.grad_history = None;
        Ok(true)
    }

    /// True when this tensor's value is `data`, held by its node alone,
    /// and the node by this tensor alone: besides `data` itself (the one
    /// other reference the caller holds), nothing can read the value once
    /// the tensor takes a new one.
    #[track_caller]
    pub(crate) fn holds_alone(&self, data: &Arc<DeviceData>) -> bool {
        let n = self.inner.node.lock();
        Arc::strong_count(&n) == 1
            && n.grad_history.is_none()
            && n.leaf_data()
                .is_some_and(|l| l.ptr() == Arc::as_ptr(data) as *const ())
            && Arc::strong_count(data) == 2
    }

    /// True when this handle is the only way to reach it: no other
    /// handle, no weak reference but the registry's, and no gradient state
    /// (the replay may then reuse a tensor it returned before for its next
    /// result).
    #[track_caller]
    pub(crate) fn is_sole_handle(&self) -> bool {
        Arc::strong_count(&self.inner) == 1 && Arc::weak_count(&self.inner) == 1 && {
            // Pairs with the release in the drop of every other handle:
            // what their threads did to the flags below is visible.
            std::sync::atomic::fence(Ordering::Acquire);
            !self.inner.requires_grad.load(Ordering::Relaxed) && self.inner.grad.is_none()
        }
    }
}

/// A data leaf's shape and data, borrowed to take a program's result in
/// place (see [`Tensor::write_result`]).
pub(crate) struct DataLeafMut<'a> {
    shape: &'a mut Shape,
    data: &'a mut DeviceData,
}

impl DataLeafMut<'_> {
    /// Dimension `d`, dynamic, now has size `e`, held by `cell`.
    #[track_caller]
    pub fn set_size(
        &mut self,
        d: usize,
        e: SizeExpr,
        cell: Arc<crate::runtime::size_cell::SizeCell>,
    ) {
        self.data.sizes[d] = Some(cell);
        if self.shape[d] != e {
            self.shape[d] = e;
        }
    }

    /// The elements are now in `buffer`.
    #[track_caller]
    pub fn set_buffer(&mut self, buffer: crate::backend::DeviceBuffer) {
        self.data.set_buffer(buffer);
    }
}
