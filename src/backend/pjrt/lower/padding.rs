//! What the lowering knows of each value's padding: one record per value,
//! which every padding fill consults.
//!
//! Each dim of a lowered value has an *extent*, where its real elements
//! lie: all of the dim (static), a prefix (a dynamic dim: its size is
//! the bounded type's, `get_dimension_size`), or the positions where a
//! zone's mask holds (a masked dim, `masked.rs`: static type, bound `N`).
//! The padding is every position outside the extents. What is known of
//! the padding's *content* is a small lattice per value:
//!
//! ```text
//! unspecified            anything, infinities and NaN included (the default)
//!   ^
//! F along dims D         every position that is padding along a dim of D holds
//!                        the fill F (0, 1, the lowest or the highest value)
//! ```
//!
//! Invariant: a record holds for the value at run time. Extents come from
//! the node's shape (a dim is masked exactly when its size is a masked
//! variable); "F along D" is recorded only where the lowering writes it:
//! an `Op::FillPadding` node (`fill.rs`), which the passes
//! `ir::passes::operand_fills` and `shared_fill` put before every op that
//! reads padding. A fill (`Ctx::padded_along`) builds its mask from the
//! extents and writes nothing where the content already is what it would
//! write. Values are keyed by SSA name; a widened copy of a value (a half
//! converted to f32, which keeps 0, 1 and the infinities) copies its
//! record with [`Ctx::same_padding`].

use super::emit::{Builder, Elt, V};
use super::Ctx;
use crate::ir::PadFill;

/// The padding record of one value (see the module docs).
#[derive(Clone, Default)]
pub(super) struct Padding {
    /// Masked dims, each with its zone's variable.
    masked: Vec<(usize, u64)>,
    /// The fill the padding is known to hold, and along which dims.
    filled: Option<(PadFill, Vec<usize>)>,
}

impl Ctx<'_> {
    /// Records the extents of node `i`'s value `v` (its masked dims).
    pub(super) fn note_extents(&mut self, i: usize, v: &V) {
        let masked: Vec<(usize, u64)> = (0..v.ty.rank())
            .filter_map(|d| self.masked_dim(i, d).map(|m| (d, m)))
            .collect();
        if !masked.is_empty() {
            self.pads.entry(v.name).or_default().masked = masked;
        }
    }

    /// Gives `to`, a widened copy of `from` (a float converted to a
    /// wider float, which keeps every fill), `from`'s record.
    pub(super) fn same_padding(&mut self, from: &V, to: &V) {
        if let Some(p) = self.pads.get(&from.name) {
            let p = p.clone();
            self.pads.insert(to.name, p);
        }
    }

    /// Records that `v`'s padding holds `fill` along `dims`.
    pub(super) fn note_fill(&mut self, v: &V, fill: PadFill, dims: &[usize]) {
        self.pads.entry(v.name).or_default().filled = Some((fill, dims.to_vec()));
    }

    /// True when dim `d` of `x` has padding (it is dynamic or masked).
    pub(super) fn is_padded(&self, x: &V, d: usize) -> bool {
        x.ty.dynamic[d]
            || self
                .pads
                .get(&x.name)
                .is_some_and(|p| p.masked.iter().any(|m| m.0 == d))
    }

    /// True when `x`'s padding is known to hold `fill` along every dim of
    /// `dims` (a dim without padding counts).
    pub(super) fn fill_known(&self, x: &V, dims: &[usize], fill: PadFill) -> bool {
        let padded: Vec<usize> = dims
            .iter()
            .copied()
            .filter(|&d| self.is_padded(x, d))
            .collect();
        padded.is_empty()
            || self.pads.get(&x.name).is_some_and(|p| {
                p.filled.as_ref().is_some_and(|(f, along)| {
                    *f == fill && padded.iter().all(|d| along.contains(d))
                })
            })
    }

    /// True when some dim of `dims` of `x` is a zone lowered as a mask.
    pub(super) fn masks_zone_along(&self, x: &V, dims: &[usize]) -> bool {
        self.pads
            .get(&x.name)
            .is_some_and(|p| p.masked.iter().any(|m| dims.contains(&m.0)))
    }

    /// As [`Ctx::and_masked_dims`] over `dims`, as a mask of all ones (in
    /// `bits`, an integer type) where an element of `x` is real, for
    /// [`Builder::select_fill_bitwise`].
    ///
    /// XLA's CPU backend emits a select whose predicate is the same along
    /// a row as a branch per row, mispredicted about half the time when
    /// the predicate is a zone's mask (data): 40 µs of the detector's
    /// 150 µs program (`benches/README.md`, "Current
    /// figures"). An `and` with the mask widened to all ones is no
    /// branch, but LLVM sees through `negate(convert(mask))` and makes it
    /// a select again, so each zone's widened mask passes an optimization
    /// barrier: XLA materialises it (an integer of the value's width per
    /// element of the zone's source) and the kernels read it as data.
    pub(super) fn zone_keep_along(
        &mut self,
        x: &V,
        dims: &[usize],
        prefix: Option<V>,
        bits: Elt,
    ) -> V {
        let prefix = prefix.map(|m| self.b.all_ones_where(&m, bits));
        let keep = self.and_zone_masks(
            x,
            |d| dims.contains(&d),
            prefix,
            bits,
            |b, m| {
                let k = b.all_ones_where(m, bits);
                b.optimization_barrier(&k)
            },
        );
        keep.unwrap_or_else(|| self.b.splat(-1.0, &x.ty.bound().with_elt(bits)))
    }

    /// `mask` (of `x`'s bound shape, or none) and'ed with the mask of each
    /// masked dim of `x` that `along` selects.
    pub(super) fn and_masked_dims(
        &mut self,
        x: &V,
        along: impl Fn(usize) -> bool,
        mask: Option<V>,
    ) -> Option<V> {
        self.and_zone_masks(x, along, mask, Elt::I1, |_, m| m.clone())
    }

    /// `init` (of `x`'s bound shape in `elt`, or none) and'ed with each
    /// masked dim of `x` that `along` selects: its zone's mask made an
    /// `elt` tensor by `widen`, broadcast along the dim.
    fn and_zone_masks(
        &mut self,
        x: &V,
        along: impl Fn(usize) -> bool,
        init: Option<V>,
        elt: Elt,
        widen: impl Fn(&mut Builder, &V) -> V,
    ) -> Option<V> {
        let masked = self.pads.get(&x.name).map(|p| p.masked.clone());
        let shape = x.ty.bound().with_elt(elt);
        let mut acc = init;
        for (d, v) in masked.unwrap_or_default() {
            if !along(d) {
                continue;
            }
            let m1 = self.zone_mask(v);
            let m1 = widen(&mut self.b, &m1);
            let m = self.b.broadcast_in_dim(&m1, &[d as i64], shape.clone());
            acc = Some(match acc {
                None => m,
                Some(prev) => self.b.bin("and", &prev, &m),
            });
        }
        acc
    }
}
