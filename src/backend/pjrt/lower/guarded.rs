//! Products that contract padding: one operand zeroed, the result checked.
//!
//! A product that contracts a dim with padding (a dynamic dim, or a zone
//! lowered as a mask) must keep the padding out of every real result.
//! Zeroing the padding of one operand does not do on its own: the other
//! operand's padding is unspecified (a masked zone's padding is the
//! source's unselected elements, the user's data, infinities and NaN
//! included), and `0 * inf` is NaN. Zeroing both writes a selected copy
//! of each; for the weight gradient of a layer applied to a zone of a
//! large input (the detector's box head: `[4096, 16]` features of which
//! the positives are the zone) that copy costs more than the product.
//!
//! So where the rule applies (`Dot::raw`, which the pass
//! `ir::passes::checked_dot` sets) the lowering zeroes the
//! padding of the smaller operand only, contracts it with the larger one
//! as it is, and checks that *fast* result. Every padding term of the
//! fast result is `0 * p`, with `p` an element of the raw operand's
//! padding: `±0` when `p` is finite, NaN when it is not, and a sum with a
//! NaN term is NaN. So a fast result whose elements are all finite saw
//! only finite padding and is exact (the terms `±0` add nothing; at most
//! a zero result's sign differs). Otherwise (a non-finite padding
//! element, or a non-finite real one, or an overflow) a `stablehlo.if`
//! computes the product again with both operands zeroed, as a product
//! without the rule does: the slow path runs only on non-finite data. A
//! kernel that skips zero terms gives the exact result directly.
//!
//! The rule applies to float products whose result has no padding (the
//! check would read the result's unspecified padding), which is no larger
//! than the raw operand (checking it costs less than the fill it saves),
//! and whose raw operand is large (`ir::passes::checked_dot`).

use super::emit::{Elt, Ty, V};
use super::Ctx;
use crate::ir::dot::Side;
use crate::ir::{Dot, PadFill};

impl Ctx<'_> {
    /// The product `dot_general(az, bz)` (attributes `attrs`) where the
    /// `raw` operand's static view still holds its padding, checked as the
    /// module docs say: when the fast result is not all finite, the
    /// product of `a` and `b` (sizes `sa`, `sb`) both zeroed along `dot`'s
    /// contracted dims.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn checked_dot(
        &mut self,
        raw: Side,
        (a, sa, az): (&V, &[Option<V>], &V),
        (b, sb, bz): (&V, &[Option<V>], &V),
        dot: &Dot,
        attrs: &str,
        ty: &Ty,
    ) -> V {
        let out = ty.bound();
        let fast = self.b.op("dot_general", &[az, bz], attrs, out.clone());
        let ok = self.all_finite(&fast);
        let r = self.b.open_if(&ok);
        self.b.yield_values(&[fast]);
        self.b.else_region();
        // Defined in the region: the zeroed copy is written only when the
        // slow path runs.
        let slow = match raw {
            Side::Lhs => {
                let a0 = self.padded_along(a, sa, PadFill::Zero, &dot.lhs_contract);
                self.b.op("dot_general", &[&a0, bz], attrs, out.clone())
            }
            Side::Rhs => {
                let b0 = self.padded_along(b, sb, PadFill::Zero, &dot.rhs_contract);
                self.b.op("dot_general", &[az, &b0], attrs, out.clone())
            }
        };
        self.b.yield_values(&[slow]);
        self.b.close_if(r, &ok, out)
    }

    /// An i1 scalar: every element of the static `x` is finite.
    fn all_finite(&mut self, x: &V) -> V {
        let fin = self.b.op("is_finite", &[x], "", x.ty.with_elt(Elt::I1));
        if x.ty.rank() == 0 {
            return fin;
        }
        let yes = self.b.scalar(1.0, Elt::I1);
        let dims: Vec<usize> = (0..x.ty.rank()).collect();
        self.b
            .reduce(&fin, &yes, &dims, |b, p, q| b.bin("and", p, q))
    }
}
