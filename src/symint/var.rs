//! Dimension variables: the unknowns that dynamic sizes are made of.

use crate::runtime::size_cell::SizeCell;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};

static NEXT_VAR: AtomicU64 = AtomicU64::new(0);

/// One data-dependent size: the length of a dynamic dimension introduced by a
/// dynamic op (`nonzero`, `masked_select`, `unique`) or by `mark_dynamic`.
///
/// Invariant: every graph node whose shape mentions a variable has the node
/// that defines it among its transitive inputs, or the variable is already
/// bound to a computed size (`cell`), so any program that needs the value
/// can compute it or receive it as an argument.
#[derive(Debug)]
pub(crate) struct DimVar {
    /// Unique per process; identity of the variable.
    pub id: u64,
    /// Smallest possible value.
    pub lo: i64,
    /// Largest possible value (the bound).
    pub hi: i64,
    /// The computed size, once a program has produced it (on the device,
    /// read to the host lazily).
    pub cell: OnceLock<Arc<SizeCell>>,
}

/// A shared handle to a [`DimVar`], compared and hashed by identity.
#[derive(Clone, Debug)]
pub(crate) struct VarRef(pub Arc<DimVar>);

impl VarRef {
    /// A fresh variable with bounds `[lo, hi]`.
    pub fn fresh(lo: i64, hi: i64) -> VarRef {
        debug_assert!(lo <= hi);
        VarRef(Arc::new(DimVar {
            id: NEXT_VAR.fetch_add(1, AtomicOrdering::Relaxed),
            lo,
            hi,
            cell: OnceLock::new(),
        }))
    }

    /// Makes this variable a fresh one with bounds `[lo, hi]` (a new
    /// identity, no value), reusing its memory, when nothing else refers
    /// to it; else `None`. Returns the cell of its old value, if it had
    /// one.
    pub fn renew(&mut self, lo: i64, hi: i64) -> Option<Option<Arc<SizeCell>>> {
        debug_assert!(lo <= hi);
        let var = Arc::get_mut(&mut self.0)?;
        var.id = NEXT_VAR.fetch_add(1, AtomicOrdering::Relaxed);
        var.lo = lo;
        var.hi = hi;
        Some(var.cell.take())
    }

    /// A fresh variable whose value is already known on the host.
    pub fn known(lo: i64, hi: i64, value: i64) -> VarRef {
        let v = VarRef::fresh(lo, hi);
        let _ = v.0.cell.set(Arc::new(SizeCell::host(value)));
        v
    }
}

impl PartialEq for VarRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}
impl Eq for VarRef {}
impl PartialOrd for VarRef {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for VarRef {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.id.cmp(&other.0.id)
    }
}

thread_local! {
    /// While set, variables hash as their position of first appearance
    /// instead of their process-wide id, so that two traces of the same
    /// program with fresh variables give the same cache key.
    static NUMBERING: std::cell::RefCell<Option<Vec<u64>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with variables hashed by relative position (see [`NUMBERING`]).
pub(crate) fn with_relative_numbering<R>(f: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            NUMBERING.with(|n| *n.borrow_mut() = None);
        }
    }
    NUMBERING.with(|n| *n.borrow_mut() = Some(Vec::new()));
    let _reset = Reset;
    f()
}

impl Hash for VarRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let relative = NUMBERING.with(|n| {
            n.borrow_mut()
                .as_mut()
                .map(|seen| match seen.iter().position(|&id| id == self.0.id) {
                    Some(p) => p as u64,
                    None => {
                        seen.push(self.0.id);
                        (seen.len() - 1) as u64
                    }
                })
        });
        match relative {
            Some(r) => r.hash(state),
            None => self.0.id.hash(state),
        }
        self.0.lo.hash(state);
        self.0.hi.hash(state);
    }
}
