//! The lowering of `Op::FillPadding`: a value's padding along some dims
//! set to a value that cannot change the result of the op that reads it
//! (the passes `ir::passes::operand_fills` and `shared_fill` decide which
//! and where).
//!
//! A fill with one reader is a select that XLA fuses into that reader. A
//! shared fill passes an `optimization_barrier`, so XLA writes it once and
//! every reader reads that buffer. Without it XLA's CPU fusion judged the
//! select cheap and copied the whole producer chain into each reader's
//! fusion (the transformer's vocabulary-sized gradient was computed three
//! times, and the expensive `exp` before it split into a fusion of its
//! own; `benches/README.md`, "Current figures").

use super::emit::V;
use super::Ctx;
use crate::ir::PadFill;

impl Ctx<'_> {
    /// `v` with its padding along `dims` set to `fill`, still dynamic, and
    /// recorded as such (`padding`); written once for several readers
    /// when `shared`.
    pub(super) fn fill_padding(&mut self, v: V, dims: &[usize], fill: PadFill, shared: bool) -> V {
        let sizes = self.sizes_of(&v);
        let mut filled = self.padded_along(&v, &sizes, fill, dims);
        if shared {
            filled = self.b.optimization_barrier(&filled);
        }
        let ty = v.ty.clone();
        let out = self.redyn(filled, &ty, &sizes);
        self.note_fill(&out, fill, dims);
        out
    }

    /// `x` (with run-time sizes `sizes`) as a static tensor of its bound
    /// shape whose padding along `dims` holds `fill`; padding along other
    /// dims is left unspecified: an op that combines elements only along
    /// `dims` (a reduction, a contraction) carries it into the padding of
    /// its result alone, so filling it would be work for nothing (a
    /// select over the whole tensor).
    pub(super) fn padded_along(
        &mut self,
        x: &V,
        sizes: &[Option<V>],
        fill: PadFill,
        dims: &[usize],
    ) -> V {
        let along: Vec<Option<V>> = (0..sizes.len())
            .map(|d| {
                if dims.contains(&d) {
                    sizes[d].clone()
                } else {
                    None
                }
            })
            .collect();
        let s = self.padded(x, None);
        if self.fill_known(x, dims, fill) {
            return s;
        }
        let lit = x.ty.elt.fill(fill);
        let prefix = self.mask_from_sizes(&x.ty, &along);
        // A zone's mask is data, where a select costs a mispredicted
        // branch per row (see `zone_keep_along`); a prefix of sizes is one
        // run of true, where the select's branch is well predicted.
        if let (true, Some(bits)) = (self.masks_zone_along(x, dims), s.ty.elt.bits_twin()) {
            let keep = self.zone_keep_along(x, dims, prefix, bits);
            return self.b.select_fill_bitwise(&keep, &s, &lit);
        }
        match self.and_masked_dims(x, |d| dims.contains(&d), prefix) {
            Some(mask) => {
                let f = self.b.splat_lit(&lit, &s.ty);
                self.b.select(&mask, &s, &f)
            }
            None => s,
        }
    }
}
