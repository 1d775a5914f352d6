//! Dimension variables: the unknowns that dynamic sizes are made of.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock, Weak};

static NEXT_VAR: AtomicU64 = AtomicU64::new(0);

/// One data-dependent size: the length of a dynamic dimension introduced by a
/// dynamic op (`nonzero`, `masked_select`, `unique`) or by `mark_dynamic`.
/// Dynamic ops counting the same quantity of the same value share one
/// variable (`ir::size_source`), so several nodes may define it.
///
/// Invariant: every graph node whose shape mentions a variable has a node
/// that defines it among its transitive inputs, or the variable is already
/// bound to a computed size (`runtime::size_values`), so any program that
/// needs the value can compute it or receive it as an argument.
#[derive(Debug)]
pub(crate) struct DimVar {
    /// Unique per process; identity of the variable.
    pub id: u64,
    /// Smallest possible value.
    pub lo: i64,
    /// Largest possible value (the bound).
    pub hi: i64,
    /// True once a program has computed the value (set by
    /// `runtime::size_values::bind`, never cleared: a value never changes).
    computed: AtomicBool,
    /// Told this variable's id when it drops, besides [`on_drop`]'s
    /// function: the table that made it (`ir::size_source`) forgets it.
    on_drop: Option<fn(u64)>,
}

/// Told the id of every variable dropped from now on (the runtime, which
/// keeps computed sizes in a table keyed by variable, forgets its value).
static ON_DROP: OnceLock<fn(u64)> = OnceLock::new();

/// Sets the function told of dropped variables (once; later calls are
/// ignored).
pub(crate) fn on_drop(f: fn(u64)) {
    let _ = ON_DROP.set(f);
}

impl Drop for DimVar {
    fn drop(&mut self) {
        if let Some(f) = ON_DROP.get() {
            f(self.id);
        }
        if let Some(f) = self.on_drop {
            f(self.id);
        }
    }
}

/// A shared handle to a [`DimVar`], compared and hashed by identity.
#[derive(Clone, Debug)]
pub(crate) struct VarRef(pub Arc<DimVar>);

impl VarRef {
    /// A fresh variable with bounds `[lo, hi]`.
    pub fn fresh(lo: i64, hi: i64) -> VarRef {
        VarRef::fresh_with_drop(lo, hi, None)
    }

    /// A fresh variable with bounds `[lo, hi]` that tells `on_drop` its id
    /// when it drops (a table of variables held weakly, which forgets it).
    /// `on_drop` runs inside the drop of the variable's last handle: it
    /// must not wait for a lock its caller might hold.
    pub fn fresh_with_drop(lo: i64, hi: i64, on_drop: Option<fn(u64)>) -> VarRef {
        debug_assert!(lo <= hi);
        VarRef(Arc::new(DimVar {
            id: NEXT_VAR.fetch_add(1, AtomicOrdering::Relaxed),
            lo,
            hi,
            computed: AtomicBool::new(false),
            on_drop,
        }))
    }

    /// The process-wide id.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// A handle that does not keep the variable alive.
    pub fn downgrade(&self) -> WeakVar {
        WeakVar(Arc::downgrade(&self.0))
    }

    /// True once a program has computed the value (see
    /// [`mark_computed`](VarRef::mark_computed)).
    pub fn is_computed(&self) -> bool {
        self.0.computed.load(AtomicOrdering::Acquire)
    }

    /// Records that the value has been computed. Only the runtime's table
    /// of values (`runtime::size_values::bind`) calls this, after it holds
    /// the value.
    pub fn mark_computed(&self) {
        self.0.computed.store(true, AtomicOrdering::Release);
    }
}

/// A weak handle to a [`DimVar`]: names a variable without keeping it alive.
#[derive(Clone, Debug)]
pub(crate) struct WeakVar(Weak<DimVar>);

impl WeakVar {
    /// The variable, if it is still alive.
    pub fn upgrade(&self) -> Option<VarRef> {
        self.0.upgrade().map(VarRef)
    }

    /// True while some handle keeps the variable alive (a hint: it may
    /// drop right after).
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
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

/// Numbers variables by first appearance: the printer's `s0, s1, ..` and
/// the cache key's variable numbers, so that two traces of the same
/// program with fresh variables print and key alike.
#[derive(Default)]
pub(crate) struct Renumbering {
    seen: Vec<u64>,
}

impl Renumbering {
    /// `v`'s number: its position among the variables seen so far.
    pub fn number(&mut self, v: &VarRef) -> usize {
        self.number_id(v.0.id)
    }

    /// How many variables have a number.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// The process-wide ids of the variables numbered from `from` on.
    pub fn since(&self, from: usize) -> &[u64] {
        &self.seen[from..]
    }

    /// The number of the variable with process-wide id `id`.
    pub fn number_id(&mut self, id: u64) -> usize {
        match self.seen.iter().position(|&s| s == id) {
            Some(p) => p,
            None => {
                self.seen.push(id);
                self.seen.len() - 1
            }
        }
    }
}

/// The tag in the top bits of a variable's `write_i128`: no other value in
/// a program hashes an `i128`, so a key writer (`ir::program::KeyWriter`)
/// recognises variables and writes their [`Renumbering`] instead of their
/// process-wide id.
pub(crate) const VAR_TAG: i128 = 0x5641_5200 << 96;

impl Hash for VarRef {
    /// The identity (as `Eq`) and bounds. The identity goes through
    /// `write_i128` with [`VAR_TAG`], which ordinary hashers hash like
    /// any integer and a key writer renumbers.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_i128(VAR_TAG | self.0.id as i128);
        self.0.lo.hash(state);
        self.0.hi.hash(state);
    }
}
