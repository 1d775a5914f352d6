//! Sorting: `argsort` as one stable multi-operand `stablehlo.sort`.
//!
//! The operands are the keys and an iota of their indices along the
//! dimension (plus, along a dynamic dimension, a padding flag that sorts
//! every padded position after the real ones, whatever it holds and in
//! either direction). The comparator orders as PyTorch and the reference
//! do: NaN larger than every number and equal to NaN, so last ascending
//! and first descending; equal keys by lower index, which makes the order
//! total (the sort is also `is_stable`). The result is the sorted iota.

use super::emit::{Builder, Elt, Ty, V};
use super::Ctx;
use crate::ir::CmpOp;

/// The comparator's "a sorts before b" for keys `va`, `vb` with indices
/// `ia`, `ib`.
fn before(b: &mut Builder, va: &V, vb: &V, ia: &V, ib: &V, descending: bool) -> V {
    let dir = if descending { CmpOp::Gt } else { CmpOp::Lt };
    let mut first = b.cmp(dir, va, vb);
    let mut tie = b.cmp(CmpOp::Eq, va, vb);
    if va.ty.elt.is_float() {
        let na = b.cmp(CmpOp::Ne, va, va);
        let nb = b.cmp(CmpOp::Ne, vb, vb);
        // NaN is the largest: a number before a NaN ascending, a NaN
        // before a number descending.
        let (x, y) = if descending { (&na, &nb) } else { (&nb, &na) };
        let not_y = b.un("not", y);
        let nan_order = b.bin("and", x, &not_y);
        first = b.bin("or", &first, &nan_order);
        let both = b.bin("and", &na, &nb);
        tie = b.bin("or", &tie, &both);
    }
    let lower = b.cmp(CmpOp::Lt, ia, ib);
    let by_index = b.bin("and", &tie, &lower);
    b.bin("or", &first, &by_index)
}

impl Ctx<'_> {
    /// The stable sorting permutation (I64) of `x` along `dim`.
    pub(super) fn argsort(&mut self, x: &V, dim: usize, descending: bool, ty: &Ty) -> V {
        let sizes = self.sizes_of(x);
        if x.ty.numel() == 0 {
            let z = self.b.splat(0.0, &ty.bound());
            return self.redyn(z, ty, &sizes);
        }
        let xs = self.padded(x, None);
        let idx = self.b.iota(&xs.ty.with_elt(Elt::I64), dim);
        // Along a dynamic dim, 1 at padded positions: they sort last.
        let pad = match &sizes[dim] {
            Some(n) => {
                let it = self.b.iota(&xs.ty.with_elt(Elt::I32), dim);
                let n = self.b.fill(n, &it.ty);
                let p = self.b.cmp(CmpOp::Ge, &it, &n);
                Some(self.b.convert(&p, Elt::I32))
            }
            None => None,
        };
        let e = xs.ty.elt;
        let mut args: Vec<&V> = Vec::new();
        let mut elts = Vec::new();
        if let Some(p) = &pad {
            args.push(p);
            elts.extend([Elt::I32, Elt::I32]);
        }
        args.extend([&xs, &idx]);
        elts.extend([e, e, Elt::I64, Elt::I64]);
        let tys: Vec<Ty> = args.iter().map(|a| a.ty.clone()).collect();
        let k = if pad.is_some() { 2 } else { 0 };
        let res = self.b.region_op(
            "sort",
            &args,
            &format!("dimension = {dim} : i64, is_stable = true"),
            &elts,
            &tys,
            |b, a| {
                let mut less = before(b, &a[k], &a[k + 1], &a[k + 2], &a[k + 3], descending);
                if k == 2 {
                    let plt = b.cmp(CmpOp::Lt, &a[0], &a[1]);
                    let peq = b.cmp(CmpOp::Eq, &a[0], &a[1]);
                    let real = b.bin("and", &peq, &less);
                    less = b.bin("or", &plt, &real);
                }
                vec![less]
            },
        );
        let perm = res[res.len() - 1].clone();
        self.redyn(perm, ty, &sizes)
    }
}
