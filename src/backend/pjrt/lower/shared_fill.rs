//! The lowering of `Op::ZeroPadding`: a value's padding zeroed once for
//! its several consumers (the decision is `ir::passes::shared_fill`'s).
//!
//! The zeroed value passes through an `optimization_barrier`, so XLA
//! writes it once and every consumer reads that buffer. Without it XLA's
//! CPU fusion judged the select cheap and copied the whole producer
//! chain into each consumer's fusion (the transformer's vocabulary-sized
//! gradient was computed three times, and the expensive `exp` before it
//! split into a fusion of its own; `benches/README.md`, "Current
//! figures").

use super::emit::{Elt, V};
use super::Ctx;

impl Ctx<'_> {
    /// `v` with its padding zeroed along `dims`, still dynamic, and
    /// recorded as such (`padding`).
    pub(super) fn zero_padding_once(&mut self, v: V, dims: &[usize]) -> V {
        if v.ty.elt == Elt::I1 {
            return v;
        }
        let sizes = self.sizes_of(&v);
        let zero = v.ty.elt.literal(0.0);
        let filled = self.padded_along(&v, &sizes, &zero, dims);
        let filled = self.b.optimization_barrier(&filled);
        let ty = v.ty.clone();
        let out = self.redyn(filled, &ty, &sizes);
        self.note_zero(&out, dims);
        out
    }
}
