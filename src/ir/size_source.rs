//! One size variable per source: the data-dependent sizes of dynamic ops,
//! hash-consed by what they count.
//!
//! The size of `nonzero(x)` is the number of nonzero elements of `x`; the
//! size of `masked_select(v, mask)` is the number of true elements of
//! `mask`, the same quantity as `nonzero(mask)`; the size of `unique(x)`
//! is the number of distinct elements of `x`. A size is therefore a
//! function of a [`SizeKind`] and one operand value, and this table gives
//! every op that counts the same kind of the same operand the same
//! variable, so that `pred.masked_select(&m) - tgt.masked_select(&m)`
//! type-checks as it runs in PyTorch (with a fresh variable per call, its
//! sizes `s0` and `s1` could not be proven equal).
//!
//! # When two operands are the same
//!
//! Exactly when they are the same node, or structurally identical nodes
//! over the same inputs, recursively ([`same_value`]): the same op, dtype
//! and shape, and operands that are the same in turn, down to leaves.
//! `(x > 0.5)` recorded twice is two `Compare` nodes over `x`'s node and
//! two separately made scalars: the same value. A data leaf is only the
//! same as a data leaf holding the same data (`Op`'s `Eq` ignores data, so
//! this is checked here): two uploads of equal numbers are different
//! operands. The comparison is exact; the structural hash only picks the
//! bucket of candidates (a false match would silently give a wrong size).
//!
//! # Invariant: an entry is valid only while its operand and variable live
//!
//! The table holds both weakly: it must keep neither the graph nor a size
//! alive. An entry whose operand died is never matched: a new operand
//! could sit at the dead one's address, and its leaves' data at the dead
//! data's, so identities are only meaningful between live values. While
//! the operand lives, its whole graph lives (nodes hold their inputs), so
//! the data it reads can neither be freed nor written in place (a
//! captured step writes a result into a data leaf only when nothing else
//! holds it): equal identities mean equal values, for as long as the
//! entry can match.
//!
//! A variable is shared only until a program computes it
//! (`VarRef::is_computed`); a later op counting the same operand gets a
//! fresh variable, which then takes the entry's place. Sharing equates two
//! computations of one quantity inside the graphs being recorded. A
//! computed value is runtime state that may reach a captured step as the
//! size of an input, and a step recorded with a node sharing it would be
//! replayed as if that equality held for any new input; with unshared
//! computed variables, every variable a step's own ops define is one the
//! step computes, and each replay names it anew. (A program that defines
//! a variable already computed, as when a result is read and pending work
//! on it runs later, is ordinary: the program reads its own definition and
//! `runtime::sync::size_cell` keeps the first value, which is equal.)
//!
//! Bounds come from the operand's shape, so equal operands give equal
//! bounds and the shared variable keeps them.
//!
//! # Sharing inside one program
//!
//! When two dynamic nodes of one program define the same variable, the
//! first in topological order is its source (`runtime::canonical::trace`)
//! and every node computes its own size, which is equal by construction:
//! the reference backend computes each op's real shape, and the PJRT
//! lowering gives each dynamic op the count it computed and runs
//! elementwise ops on bounded operands directly (as it already does for
//! `mark_dynamic_as` inputs, whose sizes come from two parameters).
//!
//! # Growth and threads
//!
//! A variable made here tells the table when it drops ([`forget`]), and
//! inserting prunes entries whose operand or variable died once the table
//! has doubled since the last pruning (amortized O(1)), so the table holds
//! about as many entries as there are live variables with live operands,
//! however long a training loop runs. The table is one `parking_lot`
//! mutex. Dropping the last handle of a variable takes that lock (in
//! [`forget`]), so no handle upgraded under the lock is dropped before
//! the lock is released ([`Held`]).
//!
//! While an entry exists, its weak handle on the operand keeps a captured
//! step from writing a result into that node in place (`Arc::get_mut`
//! fails on a node with weak handles); the replay then makes a new node,
//! as it does for any node something else shares.

use super::node::Node;
use crate::symint::var::WeakVar;
use crate::symint::VarRef;
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock, Weak};

/// What a data-dependent size counts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SizeKind {
    /// The nonzero (for Bool: true) elements of the operand: the size of
    /// `nonzero(x)` (operand `x`) and of `masked_select(v, mask)`
    /// (operand `mask`).
    Nonzero,
    /// The distinct elements of the operand: the size of `unique(x)`.
    Distinct,
}

/// The variable for the size `kind` of `operand`, with bounds `[lo, hi]`
/// computed from the operand's shape: the variable of an earlier op
/// counting the same of the same value (see the module docs), or a new
/// one.
pub(crate) fn size_var(kind: SizeKind, operand: &Arc<Node>, lo: i64, hi: i64) -> VarRef {
    if lo == hi {
        // A constant (`SizeExpr::var` folds it): nothing to share.
        return VarRef::fresh(lo, hi);
    }
    let key = bucket_key(kind, operand);
    // Dropped after the guard: the guard is a temporary of the `let`
    // below and goes at its end (in a tail expression it would outlive
    // `held`).
    let mut held = Held::default();
    let v = TABLE
        .lock()
        .var_for(kind, key, operand, (lo, hi), Some(forget), &mut held);
    v
}

/// The global table.
static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(Table::default()));

/// Told by a variable made by [`size_var`] that it dropped.
fn forget(var_id: u64) {
    TABLE.lock().forget(var_id);
}

/// Handles upgraded from weak ones while the table is locked, dropped once
/// it is not: dropping a variable's last handle (or a node's, which holds
/// variables in its shape) calls [`forget`].
#[derive(Default)]
struct Held {
    nodes: SmallVec<[Arc<Node>; 2]>,
    vars: SmallVec<[VarRef; 2]>,
}

/// One shared variable and the operand it counts, both held weakly.
struct Entry {
    kind: SizeKind,
    operand: Weak<Node>,
    var: WeakVar,
    var_id: u64,
}

impl Entry {
    /// False once the operand or the variable died: the entry can never
    /// match again.
    fn is_live(&self) -> bool {
        self.operand.strong_count() > 0 && self.var.is_alive()
    }
}

/// The fewest entries before the first pruning.
const MIN_PRUNE_AT: usize = 64;

/// Entries bucketed by the structural hash of their kind and operand.
#[derive(Default)]
struct Table {
    buckets: FxHashMap<u64, SmallVec<[Entry; 1]>>,
    /// The bucket of each entry, by its variable's id.
    bucket_of: FxHashMap<u64, u64>,
    /// Prune when the table reaches this many entries.
    prune_at: usize,
}

impl Table {
    /// The number of entries (live or not yet pruned).
    fn len(&self) -> usize {
        self.bucket_of.len()
    }

    /// [`size_var`] on this table: `key` is the bucket of `(kind,
    /// operand)`, `on_drop` what a new variable tells when it drops.
    /// Upgraded handles go to `held`, to be dropped by the caller after
    /// releasing the table.
    fn var_for(
        &mut self,
        kind: SizeKind,
        key: u64,
        operand: &Arc<Node>,
        (lo, hi): (i64, i64),
        on_drop: Option<fn(u64)>,
        held: &mut Held,
    ) -> VarRef {
        if let Some(bucket) = self.buckets.get_mut(&key) {
            for e in bucket.iter_mut().filter(|e| e.kind == kind) {
                let (Some(theirs), Some(var)) = (e.operand.upgrade(), e.var.upgrade()) else {
                    continue;
                };
                let same = same_value(&theirs, operand);
                held.nodes.push(theirs);
                held.vars.push(var.clone());
                if !same {
                    continue;
                }
                debug_assert_eq!(
                    (var.0.lo, var.0.hi),
                    (lo, hi),
                    "equal operands, equal bounds"
                );
                if !var.is_computed() {
                    return var;
                }
                // Computed: a new variable takes the entry's place.
                let new = VarRef::fresh_with_drop(lo, hi, on_drop);
                self.bucket_of.remove(&e.var_id);
                self.bucket_of.insert(new.id(), key);
                *e = Entry {
                    kind,
                    operand: Arc::downgrade(operand),
                    var: new.downgrade(),
                    var_id: new.id(),
                };
                return new;
            }
        }
        if self.len() >= self.prune_at {
            self.prune();
            self.prune_at = (2 * self.len()).max(MIN_PRUNE_AT);
        }
        let new = VarRef::fresh_with_drop(lo, hi, on_drop);
        self.bucket_of.insert(new.id(), key);
        self.buckets.entry(key).or_default().push(Entry {
            kind,
            operand: Arc::downgrade(operand),
            var: new.downgrade(),
            var_id: new.id(),
        });
        new
    }

    /// Removes the entry of the dropped variable `var_id`, if any.
    fn forget(&mut self, var_id: u64) {
        let Some(key) = self.bucket_of.remove(&var_id) else {
            return;
        };
        if let Some(bucket) = self.buckets.get_mut(&key) {
            bucket.retain(|e| e.var_id != var_id);
            if bucket.is_empty() {
                self.buckets.remove(&key);
            }
        }
    }

    /// Removes every entry that can no longer match. Drops only weak
    /// handles: nothing is freed but their allocations.
    fn prune(&mut self) {
        let bucket_of = &mut self.bucket_of;
        self.buckets.retain(|_, bucket| {
            bucket.retain(|e| {
                let live = e.is_live();
                if !live {
                    bucket_of.remove(&e.var_id);
                }
                live
            });
            !bucket.is_empty()
        });
    }
}

/// How many nodes of an operand's graph its bucket hash covers (in
/// depth-first preorder): enough to separate unrelated operands, bounded
/// so that a lookup costs no more than a comparison with a match.
const HASH_NODES: usize = 32;

/// The bucket of `(kind, operand)`: a hash of the first [`HASH_NODES`]
/// nodes of the operand's graph unfolded as a tree (depth-first, inputs in
/// order). Operands that [`same_value`] equates unfold alike, so they
/// share a bucket; the converse is not assumed.
fn bucket_key(kind: SizeKind, operand: &Node) -> u64 {
    let mut h = FxHasher::default();
    kind.hash(&mut h);
    let mut stack: SmallVec<[&Node; 8]> = smallvec::smallvec![operand];
    let mut budget = HASH_NODES;
    while let Some(n) = stack.pop() {
        if budget == 0 {
            break;
        }
        budget -= 1;
        n.op.hash(&mut h);
        if let Some(d) = n.leaf_data() {
            (d.ptr() as usize).hash(&mut h);
        }
        n.dtype.hash(&mut h);
        n.shape.hash(&mut h);
        n.inputs.len().hash(&mut h);
        stack.extend(n.inputs.iter().rev().map(|i| &**i));
    }
    h.finish()
}

/// True when `a` and `b` compute the same value: the same node, or the
/// same op, dtype and shape over operands that are the same in turn, and
/// data leaves holding the same data. Exact; linear in the graphs (each
/// pair of nodes is compared once) and without recursion.
pub(crate) fn same_value(a: &Arc<Node>, b: &Arc<Node>) -> bool {
    if Arc::ptr_eq(a, b) {
        return true;
    }
    let mut seen: FxHashSet<(*const Node, *const Node)> = FxHashSet::default();
    let mut stack: Vec<(&Node, &Node)> = vec![(a, b)];
    while let Some((x, y)) = stack.pop() {
        if std::ptr::eq(x, y) || !seen.insert((x, y)) {
            continue;
        }
        if !same_node(x, y) {
            return false;
        }
        stack.extend(x.inputs.iter().zip(&y.inputs).map(|(p, q)| (&**p, &**q)));
    }
    true
}

/// The node-local part of [`same_value`]: everything but the inputs.
fn same_node(x: &Node, y: &Node) -> bool {
    let same_data = match (x.leaf_data(), y.leaf_data()) {
        (Some(p), Some(q)) => p.ptr() == q.ptr(),
        (None, None) => true,
        _ => false,
    };
    same_data
        && x.op == y.op
        && x.dtype == y.dtype
        && x.shape == y.shape
        && x.inputs.len() == y.inputs.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ir::leaf::LeafData;
    use crate::ir::{CmpOp, Lit, Op};
    use crate::symint::SizeExpr;
    use smallvec::smallvec;

    fn node(op: Op, inputs: &[&Arc<Node>], dtype: DType, shape: &[i64]) -> Arc<Node> {
        Node::new(
            op,
            inputs.iter().map(|&n| n.clone()).collect(),
            SmallVec::new(),
            dtype,
            shape.iter().map(|&d| SizeExpr::constant(d)).collect(),
            false,
        )
    }

    /// A data leaf `f32[n]` holding fresh data.
    fn data(n: i64) -> Arc<Node> {
        let op = Op::Data {
            dtype: DType::F32,
            data: LeafData::new(Arc::new(vec![0.0f32; n as usize])),
        };
        node(op, &[], DType::F32, &[n])
    }

    /// `x > 0.5`, with its own scalar and broadcast.
    fn gt_half(x: &Arc<Node>) -> Arc<Node> {
        let n = x.shape[0].as_const().unwrap();
        let half = Op::Scalar {
            value: Lit(0.5),
            dtype: DType::F32,
        };
        let s = node(half, &[], DType::F32, &[]);
        let b = Op::Broadcast {
            shape: smallvec![SizeExpr::constant(n)],
            dims: vec![],
        };
        let b = node(b, &[&s], DType::F32, &[n]);
        node(Op::Compare(CmpOp::Gt), &[x, &b], DType::Bool, &[n])
    }

    #[test]
    fn equal_structure_over_equal_data_is_the_same_value() {
        let x = data(4);
        let (a, b) = (gt_half(&x), gt_half(&x));
        assert!(!Arc::ptr_eq(&a, &b) && same_value(&a, &b));
        assert_eq!(
            bucket_key(SizeKind::Nonzero, &a),
            bucket_key(SizeKind::Nonzero, &b)
        );
        // Another upload of the same numbers is another operand.
        assert!(!same_value(&gt_half(&x), &gt_half(&data(4))));
        // Another node over the same leaf: another op.
        let lt = node(
            Op::Compare(CmpOp::Lt),
            &[&x, &a.inputs[1]],
            DType::Bool,
            &[4],
        );
        assert!(!same_value(&a, &lt));
    }

    #[test]
    fn a_shared_graph_compares_in_linear_time() {
        // x1 = x0 + x0, x2 = x1 + x1, ..: 2^60 paths, 60 pairs.
        let chain = |x: &Arc<Node>| {
            let mut n = x.clone();
            for _ in 0..60 {
                n = node(
                    Op::Binary(crate::ir::BinaryOp::Add),
                    &[&n, &n],
                    DType::F32,
                    &[4],
                );
            }
            n
        };
        let x = data(4);
        assert!(same_value(&chain(&x), &chain(&x)));
    }

    /// [`size_var`] on a table of the test's own (whose variables tell
    /// nothing when they drop: only pruning removes entries).
    fn var(t: &mut Table, kind: SizeKind, op: &Arc<Node>) -> VarRef {
        let mut held = Held::default();
        t.var_for(kind, bucket_key(kind, op), op, (0, 4), None, &mut held)
    }

    #[test]
    fn one_variable_per_kind_and_operand() {
        let mut t = Table::default();
        let x = data(4);
        let m = gt_half(&x);
        let v = var(&mut t, SizeKind::Nonzero, &m);
        assert_eq!(var(&mut t, SizeKind::Nonzero, &m), v, "the same node");
        assert_eq!(
            var(&mut t, SizeKind::Nonzero, &gt_half(&x)),
            v,
            "an equal node"
        );
        assert_ne!(var(&mut t, SizeKind::Distinct, &m), v, "another kind");
        assert_ne!(
            var(&mut t, SizeKind::Nonzero, &gt_half(&data(4))),
            v,
            "other data"
        );
        // Once computed, a variable is not shared by new ops.
        v.mark_computed();
        let w = var(&mut t, SizeKind::Nonzero, &m);
        assert_ne!(w, v);
        assert_eq!(
            var(&mut t, SizeKind::Nonzero, &gt_half(&x)),
            w,
            "the new one is"
        );
        // An operand that died matches nothing, even if it is rebuilt.
        let v = var(&mut t, SizeKind::Distinct, &m);
        drop(m);
        assert_ne!(var(&mut t, SizeKind::Distinct, &gt_half(&x)), v);
    }

    #[test]
    fn the_table_does_not_grow_over_many_iterations() {
        let mut t = Table::default();
        // A training loop keeps some sizes alive longer than their
        // operands (results it holds), and drops others.
        let mut kept = Vec::new();
        for i in 0..10_000 {
            let v = var(&mut t, SizeKind::Nonzero, &gt_half(&data(4)));
            if i % 3 == 0 {
                kept.push(v);
            }
            if kept.len() > 10 {
                kept.remove(0);
            }
            assert!(
                t.len() <= 2 * MIN_PRUNE_AT,
                "{} entries at step {i}",
                t.len()
            );
        }
        t.prune();
        assert!(t.len() <= kept.len());
    }

    #[test]
    fn a_dropped_variable_leaves_the_global_table() {
        let m = gt_half(&data(4));
        let v = size_var(SizeKind::Nonzero, &m, 0, 4);
        let id = v.id();
        assert_eq!(size_var(SizeKind::Nonzero, &gt_half(&m.inputs[0]), 0, 4), v);
        assert!(TABLE.lock().bucket_of.contains_key(&id));
        drop(v);
        assert!(
            !TABLE.lock().bucket_of.contains_key(&id),
            "forgotten on drop"
        );
    }
}
