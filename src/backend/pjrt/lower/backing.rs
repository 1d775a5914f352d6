//! Values at the front of a longer buffer, and appends written in place.
//!
//! A bucketed parameter arrives in a buffer longer than its bound
//! (`runtime::buckets`: bucket `L`, buffer `L + 1`) and is read through a
//! static slice; a bucketed result leaves in such a buffer. The lowering
//! remembers, per value, the static buffer whose leading elements along
//! every dim are the value's padded view: its *backing*. A static slice
//! from 0 and a `set_dimension_size` keep the positions of the real
//! elements, so they pass the backing on; anything that computes new
//! elements does not.
//!
//! Three uses:
//! - **Append in place.** A `cat` along a dynamic dim whose first part is
//!   backed by a buffer with room for every later part at its bound
//!   writes those parts into that buffer with `dynamic_update_slice`
//!   after the first part's real length, instead of copying every part
//!   into a fresh zero-filled buffer. The first part's elements never
//!   move. A key-value cache that grows by one position a step then
//!   costs one small write, and no copy at all when the buffer is the
//!   donated parameter aliased to the result (`runtime::donation`,
//!   "extension" pairs), where XLA updates it in place.
//! - **Products.** XLA's CPU dot reads a static slice of a longer buffer
//!   as a copy. A product whose operand is backed by a buffer longer only
//!   along dims the product keeps (free dims) reads the buffer and slices
//!   its small result; longer only along contracted dims, and left raw by
//!   the checked-product rule (`guarded`), it reads the buffer and the
//!   other operand gets that many more zeros. A decode step's attention
//!   then reads the cache where the append wrote it.
//! - **Results.** A result whose bucket's buffer is longer than its bound
//!   is returned as its backing when that has the buffer's shape (its
//!   padding is never read) rather than padded into a new buffer.
//!
//! Invariant: a recorded backing `w` of `v` holds, at each real position
//! of `v`, `v`'s element; `w` is static and at least as long as `v`'s
//! bound along every dim.

use super::emit::{Ty, V};
use super::Ctx;
use crate::ir::dot::Side;
use crate::ir::Dot;

/// The operands of a product read through their backings
/// ([`Ctx::dot_through_backing`]).
pub(super) struct WideDot {
    /// The static views to multiply.
    pub az: V,
    pub bz: V,
    /// The raw operand as a bounded value of its view's shape, for the
    /// checked product's slow path (its sizes are the operand's).
    pub raw_value: Option<V>,
    /// The product's result type at the wider views' shape.
    pub out: Ty,
}

impl Ctx<'_> {
    /// The static buffer backing `v`, if known.
    pub(super) fn backing(&self, v: &V) -> Option<V> {
        self.backing.get(&v.name).cloned()
    }

    /// Records that `to` keeps the positions of `from`'s real elements (a
    /// static slice from 0, or a change of dynamic sizes): `from`'s
    /// backing, or `from` itself when it is static, backs `to`.
    pub(super) fn keep_backing(&mut self, from: &V, to: &V) {
        let w = match self.backing.get(&from.name) {
            Some(w) => w.clone(),
            None if !from.ty.is_dynamic() => from.clone(),
            None => return,
        };
        self.backing.insert(to.name, w);
    }

    /// `ins` concatenated along the dynamic `dim` in the buffer backing
    /// `ins[0]`, as a static value of that buffer's shape, and the real
    /// size along `dim`; `None` when that buffer lacks room for every
    /// later part at its bound (an update must never be clamped) or
    /// differs in another dim or in type.
    pub(super) fn append_in_place(&mut self, ins: &[V], parts: &[V], dim: usize) -> Option<(V, V)> {
        let first = ins.first()?;
        let w = self.backing(first)?;
        let need: i64 = parts.iter().map(|p| p.ty.dims[dim]).sum();
        let fits = w.ty.elt == first.ty.elt
            && w.ty.rank() == first.ty.rank()
            && w.ty.dims[dim] >= need
            && (0..w.ty.rank()).all(|d| d == dim || w.ty.dims[d] == first.ty.dims[d]);
        if !fits {
            return None;
        }
        let mut out = w;
        let mut offset = self.b.get_size(first, dim);
        for (x, p) in ins.iter().zip(parts).skip(1) {
            let mut starts: Vec<V> = (0..out.ty.rank()).map(|_| self.b.i32c(0)).collect();
            starts[dim] = offset.clone();
            let mut args: Vec<&V> = vec![&out, p];
            args.extend(starts.iter());
            let ty = out.ty.clone();
            out = self.b.op("dynamic_update_slice", &args, "", ty);
            let n = self.b.get_size(x, dim);
            offset = self.b.bin("add", &offset, &n);
        }
        // The appended buffer is one value for all its readers: else XLA
        // fuses the update into each (the result, the step's own reads)
        // and keeps a copy of the old buffer for every one of them.
        Some((self.b.optimization_barrier(&out), offset))
    }

    /// The buffer returned for a result `s` (static at its bound) whose
    /// bucket's buffer has dims `want`: its backing when that has them.
    pub(super) fn result_from_backing(&self, v: &V, s: &V, want: &[usize]) -> Option<V> {
        let w = self.backing(v).or_else(|| self.backing(s))?;
        let same = w.ty.elt == s.ty.elt
            && w.ty.rank() == want.len()
            && w.ty.dims.iter().zip(want).all(|(&a, &b)| a == b as i64);
        same.then_some(w)
    }

    /// The dims along which `x`'s backing is longer than its bound, when
    /// it has one of its type and rank, no shorter anywhere, and `x` has
    /// no zone lowered as a mask (whose padding is not a suffix).
    fn longer_dims(&self, x: &V) -> Option<(V, Vec<usize>)> {
        let w = self.backing(x)?;
        let all: Vec<usize> = (0..x.ty.rank()).collect();
        if w.ty.elt != x.ty.elt || w.ty.rank() != x.ty.rank() || self.masks_zone_along(x, &all) {
            return None;
        }
        let mut longer = Vec::new();
        for d in 0..x.ty.rank() {
            match w.ty.dims[d].cmp(&x.ty.dims[d]) {
                std::cmp::Ordering::Less => return None,
                std::cmp::Ordering::Greater => longer.push(d),
                std::cmp::Ordering::Equal => {}
            }
        }
        (!longer.is_empty()).then_some((w, longer))
    }

    /// The views of a product of `a` and `b` (their static views `az`,
    /// `bz`; `raw` the side the checked-product rule leaves unfilled) that
    /// read an operand through its backing (module docs); `None` when no
    /// operand gains.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dot_through_backing(
        &mut self,
        (a, sa, az): (&V, &[Option<V>], &V),
        (b, sb, bz): (&V, &[Option<V>], &V),
        dot: &Dot,
        raw: Option<Side>,
        ty: &Ty,
    ) -> Option<WideDot> {
        let mut wide = WideDot {
            az: az.clone(),
            bz: bz.clone(),
            raw_value: None,
            out: ty.bound(),
        };
        let mut gained = false;
        let lhs_free = dot.lhs_free(a.ty.rank());
        let rhs_free = dot.rhs_free(b.ty.rank());
        for side in [Side::Lhs, Side::Rhs] {
            let (x, contract, free, first) = match side {
                Side::Lhs => (a, &dot.lhs_contract, &lhs_free, dot.batch),
                Side::Rhs => (b, &dot.rhs_contract, &rhs_free, dot.batch + lhs_free.len()),
            };
            let Some((w, longer)) = self.longer_dims(x) else {
                continue;
            };
            if raw != Some(side)
                && !contract.iter().any(|&d| self.is_padded(x, d))
                && longer.iter().all(|d| free.contains(d))
            {
                // Longer along kept dims: a longer result, sliced after.
                for &d in &longer {
                    let at = first + free.iter().position(|&f| f == d).expect("a free dim");
                    wide.out.dims[at] = w.ty.dims[d];
                }
                match side {
                    Side::Lhs => wide.az = w,
                    Side::Rhs => wide.bz = w,
                }
                gained = true;
            } else if raw == Some(side) && longer.iter().all(|d| contract.contains(d)) {
                // Longer along contracted dims, its padding left raw: the
                // other operand's zeros run that much further.
                let (sizes, other, other_contract) = match side {
                    Side::Lhs => (sa, &mut wide.bz, &dot.rhs_contract),
                    Side::Rhs => (sb, &mut wide.az, &dot.lhs_contract),
                };
                for &d in &longer {
                    let k = contract
                        .iter()
                        .position(|&c| c == d)
                        .expect("a contracted dim");
                    let od = other_contract[k];
                    let extra = w.ty.dims[d] - other.ty.dims[od];
                    let zero = self.b.scalar(0.0, other.ty.elt);
                    *other = self.b.pad(other, &zero, od, 0, extra);
                }
                let mut value = w.clone();
                for (d, s) in sizes.iter().enumerate() {
                    if let Some(s) = s {
                        value = self.b.set_size(&value, d, s, true);
                    }
                }
                match side {
                    Side::Lhs => wide.az = w,
                    Side::Rhs => wide.bz = w,
                }
                wide.raw_value = Some(value);
                gained = true;
            }
        }
        gained.then_some(wide)
    }
}
