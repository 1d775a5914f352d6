//! The registry of live tensors, so `mark_step()` can find pending work.
//!
//! A slab: each tensor holds its slot and frees it when dropped, so the
//! registry holds exactly the live tensors and a sync visits only those
//! (a training step creates hundreds of short-lived tensors per step).

use crate::tensor::{Tensor, TensorInner};
use parking_lot::Mutex;
use std::sync::{Arc, Weak};

struct Registry {
    slots: Vec<Option<Weak<TensorInner>>>,
    /// Indices of empty slots, reused before the slab grows.
    free: Vec<usize>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    slots: Vec::new(),
    free: Vec::new(),
});

/// Records a tensor that may hold pending work; returns its slot, which
/// the tensor passes to [`unregister`] when it is dropped.
#[track_caller]
pub(crate) fn register(t: Weak<TensorInner>) -> usize {
    let mut r = REGISTRY.lock();
    match r.free.pop() {
        Some(slot) => {
            r.slots[slot] = Some(t);
            slot
        }
        None => {
            r.slots.push(Some(t));
            r.slots.len() - 1
        }
    }
}

/// Frees the slot of a dropped tensor.
#[track_caller]
pub(crate) fn unregister(slot: usize) {
    let mut r = REGISTRY.lock();
    // Taking the `Weak` out runs no tensor destructor (it is already
    // running), so holding the lock here cannot re-enter the registry.
    if r.slots.get_mut(slot).and_then(Option::take).is_some() {
        r.free.push(slot);
    }
}

/// Every live tensor whose value is not computed yet, in creation order.
#[track_caller]
pub(crate) fn pending() -> Vec<Tensor> {
    live_where(Tensor::is_pending)
}

/// Every live tensor, in creation order.
#[track_caller]
pub(crate) fn live() -> Vec<Tensor> {
    live_where(|_| true)
}

#[track_caller]
fn live_where(keep: impl Fn(&Tensor) -> bool) -> Vec<Tensor> {
    // Upgrade under the lock but drop the strong handles after releasing
    // it: dropping the last handle of a tensor re-enters the registry.
    let upgraded: Vec<Arc<TensorInner>> = {
        let r = REGISTRY.lock();
        r.slots.iter().flatten().filter_map(Weak::upgrade).collect()
    };
    let mut out: Vec<Tensor> = upgraded
        .into_iter()
        .map(Tensor::from_inner)
        .filter(keep)
        .collect();
    out.sort_by_key(|t| t.id());
    out
}

/// The number of live tensors in the registry.
#[track_caller]
pub(crate) fn len() -> usize {
    let r = REGISTRY.lock();
    r.slots.len() - r.free.len()
}
