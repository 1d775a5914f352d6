//! The values of size variables: runtime state, kept in a table keyed by
//! the variable, since sizes themselves are value-free expressions.
//!
//! A variable is bound once, to the cell holding its computed value (on
//! the device until read, see [`SizeCell`]); every program that needs it
//! afterwards takes the cell as an argument. An entry lives exactly as
//! long as its variable: a variable's drop tells this table to forget it
//! (`symint::var::on_drop`), so the size buffers the cells hold are freed
//! with the last size that names them.

use super::size_cell::SizeCell;
use crate::symint::VarRef;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Once};

static TABLE: Mutex<Option<FxHashMap<u64, Arc<SizeCell>>>> = Mutex::new(None);

/// The cell of `v`'s value, once a program has computed it (or it was
/// known from the start).
pub(crate) fn cell(v: &VarRef) -> Option<Arc<SizeCell>> {
    TABLE.lock().as_ref()?.get(&v.0.id).cloned()
}

/// True once `v` has a value (the variable's own flag, set by [`bind`]
/// once its cell is in the table: no lock to take).
pub(crate) fn is_bound(v: &VarRef) -> bool {
    v.is_computed()
}

/// Binds `v` to the cell of its value; the first binding stays (a value
/// never changes). Returns the variable's cell.
pub(crate) fn bind(v: &VarRef, cell: Arc<SizeCell>) -> Arc<SizeCell> {
    static FORGET_ON_DROP: Once = Once::new();
    FORGET_ON_DROP.call_once(|| crate::symint::var::on_drop(forget));
    let mut t = TABLE.lock();
    let bound = t
        .get_or_insert_with(FxHashMap::default)
        .entry(v.0.id)
        .or_insert(cell)
        .clone();
    // Also tells `ir::size_source` that the variable may no longer be
    // shared by new nodes.
    v.mark_computed();
    bound
}

/// Forgets the value of the dropped variable `id`.
fn forget(id: u64) {
    // Taken out under the lock, dropped after it: freeing a cell frees a
    // device buffer.
    let old = TABLE.lock().as_mut().and_then(|m| m.remove(&id));
    drop(old);
}

/// A fresh variable with bounds `[lo, hi]` whose value is already known on
/// the host (the length of a `mark_dynamic` input).
pub(crate) fn known_var(lo: i64, hi: i64, value: i64) -> VarRef {
    known_var_with(lo, hi, value, None)
}

/// [`known_var`] telling `on_drop` its id when it drops.
pub(crate) fn known_var_with(lo: i64, hi: i64, value: i64, on_drop: Option<fn(u64)>) -> VarRef {
    let v = VarRef::fresh_with_drop(lo, hi, on_drop);
    bind(&v, Arc::new(SizeCell::host(value)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_lives_as_long_as_its_variable() {
        let v = known_var(0, 8, 3);
        assert_eq!(cell(&v).and_then(|c| c.known()), Some(3));
        // The first binding stays.
        let c = bind(&v, Arc::new(SizeCell::host(5)));
        assert_eq!(c.known(), Some(3));
        let (id, held) = (v.0.id, v.clone());
        drop(v);
        assert!(is_bound(&held), "a clone still names it");
        drop(held);
        assert!(TABLE.lock().as_ref().is_some_and(|m| !m.contains_key(&id)));
    }
}
