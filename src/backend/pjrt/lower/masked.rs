//! Zones lowered as masks: a dynamic dim whose packed order nothing
//! observes keeps its source's layout.
//!
//! `nonzero(x)` and `masked_select(v, x)` give a dim of size `s`, the
//! number of true elements of `x`, whose real elements lie packed at its
//! front in order: a prefix sum and a scatter (`dynamic.rs`). When no use
//! of `s` depends on where its elements lie, the zone is lowered
//! *masked* instead: the dim keeps the layout of `x` flattened (the same
//! bound `N`, the same static buffer), its real elements at the positions
//! where `x` is true and its padding where `x` is false. `nonzero(x)` is
//! then the coordinates of every position, `masked_select(v, x)` is `v`
//! flattened, an index by those coordinates is the identity, and `s` is
//! the mask's count: no prefix sum, no scatter, forward or backward.
//!
//! The uses that keep a zone masked (`uses_ok`): elementwise ops,
//! broadcasts into it, transposes, reshapes that keep the dim's layout,
//! reductions and contractions over it (their padding fill reads the
//! mask, as it reads a prefix's size), `index_select` and `index_add`
//! indexed by it, `masked_scatter` back through the same mask, size
//! expressions of it. Anything that observes a position packs it: being a
//! program result (a read), an index into it, a slice, concat, reverse,
//! sort, scan, window or `argmax` along it, a loop carrying or capturing
//! it, a nested `nonzero`, an `iota` of its size, a guard that renames
//! it, or a dim that is an expression of it (`s + 1`) rather than `s`
//! itself.
//!
//! Invariant: a dim of a node is masked exactly when its size is a masked
//! variable; its lowered type is static at the bound, and its real
//! elements are where the variable's mask holds. The choice depends on the
//! program alone, so the compile cache, keyed by the program, keys it too.
//! `LAZYXLA_PJRT_ZONES=packed` packs every zone (read once per process,
//! for measurements, like `LAZYXLA_PJRT_PACK`).

use super::emit::{Elt, Ty, V};
use super::{same_padded_layout, Ctx};
use crate::ir::program::Program;
use crate::ir::{Family, Op};
use crate::symint::SizeExpr;
use std::collections::{HashMap, HashSet};

/// A masked variable once its defining node is lowered: the mask of its
/// real positions (static i1 `[N]`) and, once asked, its count.
pub(super) struct MaskVar {
    mask: V,
    count: Option<V>,
}

/// Whether this process packs every zone (see the module docs).
fn packed_only() -> bool {
    static PACKED: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var("LAZYXLA_PJRT_ZONES").as_deref() == Ok("packed"));
    *PACKED
}

/// The variable id of `e` when it is exactly one variable.
fn var_id(e: &SizeExpr) -> Option<u64> {
    e.as_var().map(|v| v.0.id)
}

/// The dims of `shape` whose size is exactly variable `v`.
fn dims_of(shape: &[SizeExpr], v: u64) -> Vec<usize> {
    (0..shape.len())
        .filter(|&d| var_id(&shape[d]) == Some(v))
        .collect()
}

/// The variables whose zones this program lowers masked, each with its
/// first defining node (`nonzero` or `masked_select`).
pub(super) fn masked_vars(program: &Program) -> HashMap<u64, usize> {
    let mut cand: HashMap<u64, usize> = HashMap::new();
    if packed_only() {
        return cand;
    }
    for (i, n) in program.nodes.iter().enumerate() {
        if matches!(n.op, Op::Nonzero | Op::MaskedSelect) {
            if let Some(v) = n.shape.first().and_then(var_id) {
                cand.entry(v).or_insert(i);
            }
        }
    }
    if cand.is_empty() {
        return cand;
    }
    let mut bad: HashSet<u64> = HashSet::new();
    for &o in &program.outputs {
        for e in program.nodes[o].shape.iter() {
            bad.extend(e.vars().iter().map(|v| v.0.id));
        }
    }
    for (i, n) in program.nodes.iter().enumerate() {
        let mut shapes: Vec<&[SizeExpr]> = vec![&n.shape];
        shapes.extend(n.inputs.iter().map(|&j| &program.nodes[j].shape[..]));
        let mut mentioned: Vec<u64> = Vec::new();
        for s in &shapes {
            for e in s.iter() {
                for v in e.vars() {
                    let id = v.0.id;
                    if !cand.contains_key(&id) {
                        continue;
                    }
                    if var_id(e) != Some(id) {
                        // An expression of the variable, not the variable.
                        bad.insert(id);
                    }
                    if !mentioned.contains(&id) {
                        mentioned.push(id);
                    }
                }
            }
        }
        for v in mentioned {
            if !uses_ok(program, i, v, &cand) {
                bad.insert(v);
            }
        }
    }
    cand.retain(|v, _| !bad.contains(v));
    cand
}

/// Whether node `i` uses the candidate variable `v` (in its shape or its
/// operands') without observing where the real elements lie. `false` is
/// always correct (the zone is packed), so an op of a family answers
/// `false` unless it is named here.
fn uses_ok(program: &Program, i: usize, v: u64, cand: &HashMap<u64, usize>) -> bool {
    let n = &program.nodes[i];
    let input = |k: usize| &program.nodes[n.inputs[k]].shape[..];
    match n.op.family() {
        // Position by position.
        Family::Elementwise => true,
        // Reductions and products over the zone read its mask as their
        // padding fill; an index along it observes positions.
        Family::Reduction => match &n.op {
            Op::Reduce { .. } => true,
            Op::ArgReduce { dim, .. } => !dims_of(input(0), v).contains(dim),
            _ => false,
        },
        Family::Contraction => matches!(n.op, Op::Dot(_)),
        // A size of the zone, not an iota over it.
        Family::Source { .. } => matches!(n.op, Op::SizeOf(_)),
        Family::Layout { .. } => match &n.op {
            Op::Transpose { .. } | Op::Sharding(_) | Op::ZeroPadding { .. } => true,
            Op::Broadcast { dims, .. } => dims_of(input(0), v)
                .iter()
                .all(|&k| var_id(&n.shape[dims[k]]) == Some(v)),
            Op::Reshape { shape } => {
                let from = input(0);
                let x = &program.nodes[n.inputs[0]];
                same_padded_layout(
                    from,
                    &super::node_ty(x.dtype, from),
                    shape,
                    &super::node_ty(n.dtype, shape),
                )
            }
            Op::Guard { shape, .. } => dims_of(input(0), v) == dims_of(shape, v),
            // Slice, concat, reverse and padding observe positions.
            _ => false,
        },
        Family::Indexing => match &n.op {
            Op::IndexSelect { dim } => !dims_of(input(0), v).contains(dim),
            Op::IndexAdd { .. } => dims_of(input(0), v).is_empty(),
            Op::MaskedScatter => {
                // Back through the mask that made the source.
                let src = dims_of(input(2), v) == [0];
                let def = &program.nodes[cand[&v]];
                src && matches!(def.op, Op::MaskedSelect)
                    && def.inputs[1] == n.inputs[1]
                    && dims_of(input(0), v).is_empty()
                    && dims_of(input(1), v).is_empty()
            }
            // Gather, scatter and sort observe positions.
            _ => false,
        },
        // A nested `nonzero` of an unmasked operand starts a zone of its
        // own; one of the zone (or `unique`) packs it.
        Family::Dynamic => {
            matches!(n.op, Op::Nonzero | Op::MaskedSelect)
                && n.inputs.iter().all(|&j| {
                    program.nodes[j]
                        .shape
                        .iter()
                        .all(|e| !e.vars().iter().any(|w| w.0.id == v))
                })
        }
        Family::Window | Family::Collective | Family::Loop { .. } => false,
    }
}

impl Ctx<'_> {
    /// The masked variable that is dim `d` of node `i`'s shape, if any.
    pub(super) fn masked_dim(&self, i: usize, d: usize) -> Option<u64> {
        let v = var_id(&self.program.nodes[i].shape[d])?;
        self.masked.contains_key(&v).then_some(v)
    }

    /// The mask (static i1 `[N]`) of the masked variable `v`, whose
    /// defining node is lowered before any value of its zone.
    pub(super) fn zone_mask(&self, v: u64) -> V {
        self.masks[&v].mask.clone()
    }

    /// The count of the masked variable `v`, emitted once.
    pub(super) fn masked_count(&mut self, v: u64) -> Option<V> {
        let mv = self.masks.get(&v)?;
        if let Some(c) = &mv.count {
            return Some(c.clone());
        }
        let m = mv.mask.clone();
        // Summed in f32 where every partial sum is exact (below 2^24):
        // XLA hands a float sum to its fast reduction kernel, where an
        // integer one becomes a tree of window reductions.
        let c = if m.ty.numel() < 1 << 24 {
            let mf = self.b.convert(&m, Elt::F32);
            let c = self.b.sum_all(&mf);
            self.b.convert(&c, Elt::I32)
        } else {
            let mi = self.b.convert(&m, Elt::I32);
            self.b.sum_all(&mi)
        };
        self.masks.get_mut(&v)?.count = Some(c.clone());
        Some(c)
    }

    /// The first definer of a variable sets its mask; a later one (the
    /// same source, so the same mask) reuses it.
    fn define_mask(&mut self, v: u64, mask: V) {
        self.masks.entry(v).or_insert(MaskVar { mask, count: None });
    }

    /// `nonzero(x)` of a masked zone: the coordinates of every position
    /// of `x`'s bound, row-major, real where `x` is nonzero.
    pub(super) fn masked_nonzero(&mut self, v: u64, x: &V, ty: &Ty) -> V {
        let xs = self.padded(x, Some(0.0));
        let n = xs.ty.numel();
        let flat = self.b.reshape(&xs, Ty::fixed(xs.ty.elt, &[n]));
        let zero = self.b.splat(0.0, &flat.ty);
        let keep = self.b.cmp(crate::ir::CmpOp::Ne, &flat, &zero);
        self.define_mask(v, keep);
        if x.ty.rank() == 0 {
            return self.b.splat(0.0, ty);
        }
        let col = Ty::fixed(Elt::I64, &[n, 1]);
        let cols: Vec<V> = (0..x.ty.rank())
            .map(|d| {
                let it = self.b.iota(&xs.ty.with_elt(Elt::I64), d);
                self.b.reshape(&it, col.clone())
            })
            .collect();
        let refs: Vec<&V> = cols.iter().collect();
        self.b.concat(&refs, 1, ty.clone())
    }

    /// `masked_select(x, mask)` of a masked zone: `x` flattened.
    pub(super) fn masked_select_masked(&mut self, v: u64, x: &V, mask: &V, ty: &Ty) -> V {
        let xs = self.padded(x, None);
        let ms = self.padded(mask, Some(0.0));
        let n = ms.ty.numel();
        let mf = self.b.reshape(&ms, Ty::fixed(Elt::I1, &[n]));
        self.define_mask(v, mf);
        // Always a value of its own, even where flattening changes
        // nothing (a 1-D `x`): what the lowering records of a value's
        // padding is keyed by its SSA name, and the zone's masked extents
        // must not become `x`'s (a `max` of `x` would then skip every
        // unselected position). XLA drops the reshape.
        self.b.op("reshape", &[&xs], "", ty.clone())
    }

    /// `masked_scatter(base, mask, src)` where `src` is a masked zone of
    /// the same mask: `src` already lies at the mask's positions.
    pub(super) fn masked_scatter_masked(&mut self, base: &V, mask: &V, src: &V, ty: &Ty) -> V {
        let sizes = self.sizes_of(base);
        let bs = self.padded(base, None);
        let ms = self.padded(mask, Some(0.0));
        let g = self.b.reshape(src, bs.ty.clone());
        let out = self.b.select(&ms, &g, &bs);
        self.redyn(out, ty, &sizes)
    }

    /// True when node `i` is the flattened `nonzero` of a 1-D tensor in a
    /// masked zone: every position's own index, so indexing by it is the
    /// identity (as indexing by a count is a prefix).
    pub(super) fn mask_positions(&self, i: usize) -> bool {
        let n = &self.program.nodes[i];
        if n.shape.len() != 1 || self.masked_dim(i, 0).is_none() {
            return false;
        }
        let Op::Reshape { .. } = n.op else {
            return false;
        };
        let j = self.unfilled(n.inputs[0]);
        let nz = &self.program.nodes[j];
        matches!(nz.op, Op::Nonzero) && self.program.nodes[nz.inputs[0]].shape.len() == 1
    }
}
