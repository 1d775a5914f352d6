//! The registry of live tensors, so `mark_step()` can find pending work.

use crate::tensor::{Tensor, TensorInner};
use parking_lot::Mutex;
use std::sync::{Arc, LazyLock, Weak};

struct Registry {
    tensors: Vec<Weak<TensorInner>>,
    /// Prune dead entries when the list reaches this length, so the list
    /// stays proportional to the live tensors over thousands of steps.
    prune_at: usize,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| {
    Mutex::new(Registry {
        tensors: Vec::new(),
        prune_at: 1024,
    })
});

/// Records a tensor that may hold pending work.
pub(crate) fn register(t: &Arc<TensorInner>) {
    let weak = Arc::downgrade(t);
    let mut r = REGISTRY.lock();
    if r.tensors.len() >= r.prune_at {
        r.tensors.retain(|w| w.strong_count() > 0);
        r.prune_at = (r.tensors.len() * 2).max(1024);
    }
    r.tensors.push(weak);
}

/// Every live tensor whose value is not computed yet, in creation order.
pub(crate) fn pending() -> Vec<Tensor> {
    // Upgrade under the lock but drop the strong handles after releasing
    // it: dropping the last handle of a tensor must not happen while the
    // registry is locked.
    let upgraded: Vec<Arc<TensorInner>> = {
        let mut r = REGISTRY.lock();
        r.tensors.retain(|w| w.strong_count() > 0);
        r.tensors.iter().filter_map(|w| w.upgrade()).collect()
    };
    let mut out: Vec<Tensor> = upgraded
        .into_iter()
        .map(Tensor::from_inner)
        .filter(|t| t.is_pending())
        .collect();
    out.sort_by_key(|t| t.id());
    out
}

/// The number of entries in the registry (live or not yet pruned).
pub(crate) fn len() -> usize {
    REGISTRY.lock().tensors.len()
}
