//! Sorting: `argsort` as one stable multi-operand `stablehlo.sort`, and
//! its first `k` (top-k) through XLA's TopK.
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

    /// The first `k` of `argsort(x, dim, descending)`, through XLA's TopK
    /// ([`Builder::top_k`]) on a key whose order is the sort's: the key
    /// maps NaN to the largest NaN (to the smallest one for the smallest
    /// `k`, after negating), -0 to +0 (PyTorch ties them), and padding to
    /// a key below every real one. TopK breaks ties by lower index, as
    /// the stable sort does. On the CPU plugin an F32 TopK is a partial
    /// sort: 100,000 scores take well under a millisecond where the full
    /// sort takes tens.
    pub(super) fn top_k(&mut self, x: &V, dim: usize, descending: bool, k: usize, ty: &Ty) -> V {
        let mut sizes = self.sizes_of(x);
        let along = sizes[dim].take();
        if k == 0 || x.ty.numel() == 0 {
            let z = self.b.splat(0.0, &ty.bound());
            return self.redyn(z, ty, &sizes);
        }
        let xs = self.padded(x, None);
        let mut key = self.top_k_key(&xs, descending);
        if let Some(n) = &along {
            let it = self.b.iota(&key.ty.with_elt(Elt::I32), dim);
            let n = self.b.fill(n, &it.ty);
            let pad = self.b.cmp(CmpOp::Ge, &it, &n);
            let least = self.b.splat_lit(&least_key(key.ty.elt), &key.ty);
            key = self.b.select(&pad, &least, &key);
        }
        let last = key.ty.rank() - 1;
        let mut perm: Vec<usize> = (0..=last).filter(|&d| d != dim).collect();
        perm.push(dim);
        if dim != last {
            key = self.b.transpose(&key, &perm);
        }
        let idx = self.b.top_k(&key, k);
        let mut idx = self.b.convert(&idx, Elt::I64);
        if dim != last {
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            idx = self.b.transpose(&idx, &inverse);
        }
        self.redyn(idx, ty, &sizes)
    }

    /// A key whose TopK order (largest first, see [`Builder::top_k`]) is
    /// the stable sort's order of `x`, `descending` or not.
    fn top_k_key(&mut self, x: &V, descending: bool) -> V {
        match x.ty.elt {
            Elt::I1 | Elt::U32 => {
                let wide = self.b.convert(x, Elt::I32);
                self.top_k_key(&wide, descending)
            }
            // Widening a half to f32 is exact and keeps its order.
            Elt::F16 | Elt::BF16 => {
                let wide = self.b.convert(x, Elt::F32);
                self.top_k_key(&wide, descending)
            }
            // Bitwise not reverses the order of two's complement integers
            // without overflowing.
            Elt::I32 | Elt::I64 if descending => x.clone(),
            Elt::I32 | Elt::I64 => self.b.un("not", x),
            Elt::F32 | Elt::F64 => {
                let e = x.ty.elt;
                let k = if descending {
                    x.clone()
                } else {
                    self.b.un("negate", x)
                };
                let zero = self.b.splat(0.0, &k.ty);
                let is_zero = self.b.cmp(CmpOp::Eq, &k, &zero);
                let k = self.b.select(&is_zero, &zero, &k);
                let is_nan = self.b.cmp(CmpOp::Ne, &k, &k);
                let nan = match (e, descending) {
                    (Elt::F32, true) => "0x7FC00000",
                    (Elt::F32, false) => "0xFFC00000",
                    (_, true) => "0x7FF8000000000000",
                    (_, false) => "0xFFF8000000000000",
                };
                let nan = self.b.splat_lit(nan, &k.ty);
                self.b.select(&is_nan, &nan, &k)
            }
        }
    }
}

/// The key TopK ranks below every key [`Ctx::top_k_key`] makes: the
/// negative NaN with every payload bit set for floats, the minimum for
/// integers.
fn least_key(e: Elt) -> String {
    match e {
        Elt::F16 | Elt::BF16 => "0xFFFF".into(),
        Elt::F32 => "0xFFFFFFFF".into(),
        Elt::F64 => "0xFFFFFFFFFFFFFFFF".into(),
        Elt::I1 | Elt::U32 | Elt::I32 | Elt::I64 => e.lowest(),
    }
}
