//! Zones lowered as masks, as the pass `ir::passes::zone_masks` decides
//! (`Program::masked_zones`; its docs list the uses that keep a zone
//! masked): the dim keeps the layout of the source `x` flattened (the
//! same bound `N`, the same static buffer), its real elements at the
//! positions where `x` is true and its padding where `x` is false.
//! `nonzero(x)` is then the coordinates of every position,
//! `masked_select(v, x)` is `v` flattened, an index by those coordinates
//! is the identity, and `s` is the mask's count.
//!
//! Invariant: a dim of a node is masked exactly when its size is a masked
//! variable; its lowered type is static at the bound, and its real
//! elements are where the variable's mask holds.

use super::emit::{Elt, Ty, V};
use super::Ctx;
use crate::ir::passes::zone_masks::var_id;
use crate::ir::Op;

/// A masked variable once its defining node is lowered: the mask of its
/// real positions (static i1 `[N]`) and, once asked, its count.
pub(super) struct MaskVar {
    mask: V,
    count: Option<V>,
}

impl Ctx<'_> {
    /// The masked variable that is dim `d` of node `i`'s shape, if any.
    pub(super) fn masked_dim(&self, i: usize, d: usize) -> Option<u64> {
        let v = var_id(&self.program.nodes[i].shape[d])?;
        self.program
            .masked_zones
            .binary_search(&v)
            .is_ok()
            .then_some(v)
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
        let xs = self.padded(x, None); // 0 in the padding (`operand_fills`)
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
        let ms = self.padded(mask, None); // false in the padding (`operand_fills`)
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
        let ms = self.padded(mask, None); // false in the padding (`operand_fills`)
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
