//! Data-dependent ops on the device: `nonzero`, `masked_select`, `unique`,
//! `unique_counts`, and `masked_scatter` (their inverse).
//!
//! All of them are built on one primitive, [`Ctx::pack`]: keep the
//! elements of 1-D arrays where a mask holds, moved to the front in order.
//! An inclusive prefix sum of the mask gives each kept element its
//! destination, and a scatter moves it there (the destination of a dropped
//! element is N, out of range, so the scatter skips it). The prefix sum is
//! computed by doubling (log2(N) shifted adds) below 4096 elements and by
//! one `reduce_window` from there on, the faster of the two at each size
//! on the XLA CPU plugin; a stable sort on the negated mask (PyTorch/XLA's
//! way) is 3x to 13x slower (`benches/README.md`, "Current figures").
//! `LAZYXLA_PJRT_PACK=doubling|window|sort` forces one strategy, for measurements; it is read once, when the first
//! program is lowered, so every program the compile cache holds was
//! lowered with the same one (the cache needs no key for it).
//! `benches/README.md` has the numbers.

use super::emit::{Elt, Ty, V};
use super::Ctx;
use crate::ir::CmpOp;

/// How `pack` moves the kept elements (see the module docs).
#[derive(Copy, Clone, PartialEq, Eq)]
enum Packing {
    /// Doubling below [`WINDOW_FROM`] elements, `reduce_window` from there.
    Auto,
    Doubling,
    Window,
    Sort,
}

/// The size from which one `reduce_window` beats doubling (measured).
const WINDOW_FROM: i64 = 4096;

/// The strategy of this process (see the module docs).
fn packing() -> Packing {
    static CHOSEN: std::sync::LazyLock<Packing> =
        std::sync::LazyLock::new(|| match std::env::var("LAZYXLA_PJRT_PACK").as_deref() {
            Ok("doubling") => Packing::Doubling,
            Ok("window") => Packing::Window,
            Ok("sort") => Packing::Sort,
            _ => Packing::Auto,
        });
    *CHOSEN
}

impl Ctx<'_> {
    /// `x` flattened to a static 1-D array of its bound element count.
    fn flat(&mut self, x: &V) -> V {
        let n = x.ty.numel();
        self.b.reshape(x, Ty::fixed(x.ty.elt, &[n]))
    }

    /// Inclusive prefix sum of a static 1-D i32 array.
    fn prefix_sum(&mut self, x: &V, how: Packing) -> V {
        let n = x.ty.dims[0];
        if how == Packing::Window || (how == Packing::Auto && n >= WINDOW_FROM) {
            let z = self.b.i32c(0);
            let attrs = format!(
                "window_dimensions = array<i64: {n}>, padding = dense<[[{}, 0]]> : tensor<1x2xi64>",
                n - 1
            );
            return self
                .b
                .region_op(
                    "reduce_window",
                    &[x, &z],
                    &attrs,
                    &[Elt::I32, Elt::I32],
                    std::slice::from_ref(&x.ty),
                    |b, a| vec![b.bin("add", &a[0], &a[1])],
                )
                .remove(0);
        }
        let zero = self.b.i32c(0);
        let mut acc = x.clone();
        let mut k = 1;
        while k < n {
            let head = self.b.slice(&acc, 0, 0, n - k);
            let shifted = self.b.pad(&head, &zero, 0, k, 0);
            acc = self.b.bin("add", &acc, &shifted);
            k *= 2;
        }
        acc
    }

    /// Moves the elements of each static 1-D array in `values` where the
    /// static `keep` mask holds to the front, in order. Returns the packed
    /// arrays (past the count each position of an array of `init`'s type
    /// holds `init`; otherwise it is unspecified) and the count as an i32 scalar.
    pub(super) fn pack(&mut self, values: &[V], keep: &V, init: Option<&V>) -> (Vec<V>, V) {
        let n = keep.ty.dims[0];
        let ki = self.b.convert(keep, Elt::I32);
        let count = self.b.sum_all(&ki);
        let how = packing();
        if how == Packing::Sort && init.is_none() {
            // Stable sort on 1 - keep: kept elements first, in order.
            let one = self.b.splat(1.0, &ki.ty);
            let key = self.b.bin("subtract", &one, &ki);
            let mut args: Vec<&V> = vec![&key];
            args.extend(values.iter());
            let mut elts = Vec::new();
            for a in &args {
                elts.push(a.ty.elt);
                elts.push(a.ty.elt);
            }
            let tys: Vec<Ty> = args.iter().map(|a| a.ty.clone()).collect();
            let res = self.b.region_op(
                "sort",
                &args,
                "dimension = 0 : i64, is_stable = true",
                &elts,
                &tys,
                |b, a| vec![b.cmp(CmpOp::Lt, &a[0], &a[1])],
            );
            return (res[1..].to_vec(), count);
        }
        let cs = self.prefix_sum(&ki, how);
        let one = self.b.splat(1.0, &cs.ty);
        let pos = self.b.bin("subtract", &cs, &one);
        let out = self.b.splat(n as f64, &cs.ty);
        let dst = self.b.select(keep, &pos, &out);
        let dst = self.b.reshape(&dst, Ty::fixed(Elt::I32, &[n, 1]));
        let packed = values
            .iter()
            .map(|v| {
                let base = match init {
                    Some(i) if i.ty.elt == v.ty.elt => self.b.fill(i, &v.ty),
                    _ => self.b.splat(0.0, &v.ty),
                };
                self.scatter_replace(&base, &dst, v)
            })
            .collect();
        (packed, count)
    }

    /// `base[dst[i]] = upd[i]` for a static 1-D `base`; out-of-range
    /// destinations are skipped.
    fn scatter_replace(&mut self, base: &V, dst: &V, upd: &V) -> V {
        let attrs = "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false";
        let e = base.ty.elt;
        self.b
            .region_op(
                "scatter",
                &[base, dst, upd],
                attrs,
                &[e, e],
                std::slice::from_ref(&base.ty),
                |_, a| vec![a[1].clone()],
            )
            .remove(0)
    }

    /// The number of real elements of `x`, as an i32 scalar.
    fn real_numel(&mut self, x: &V) -> V {
        let mut n = self.b.i32c(1);
        for d in 0..x.ty.rank() {
            let s = self.b.get_size(x, d);
            n = self.b.bin("multiply", &n, &s);
        }
        n
    }

    pub(super) fn nonzero(&mut self, x: &V, ty: &Ty) -> V {
        let n = x.ty.numel();
        if n == 0 || !ty.dynamic[0] {
            return self.b.splat(0.0, ty);
        }
        // Its padding holds 0 (`ir::passes::operand_fills`).
        let xs = self.padded(x, None);
        let flat = self.flat(&xs);
        let zero = self.b.splat(0.0, &flat.ty);
        let keep = self.b.cmp(CmpOp::Ne, &flat, &zero);
        let coords: Vec<V> = (0..x.ty.rank())
            .map(|d| {
                let it = self.b.iota(&xs.ty.with_elt(Elt::I64), d);
                self.flat(&it)
            })
            .collect();
        let (packed, count) = if coords.is_empty() {
            // A scalar: [<=1, 0].
            let ki = self.b.convert(&keep, Elt::I32);
            let c = self.b.sum_all(&ki);
            (Vec::new(), c)
        } else {
            self.pack(&coords, &keep, None)
        };
        let out = if packed.is_empty() {
            self.b.splat(0.0, &ty.bound())
        } else {
            let col = Ty::fixed(Elt::I64, &[n, 1]);
            let cols: Vec<V> = packed
                .iter()
                .map(|c| self.b.reshape(c, col.clone()))
                .collect();
            let refs: Vec<&V> = cols.iter().collect();
            self.b.concat(&refs, 1, ty.bound())
        };
        self.redyn(out, ty, &[Some(count), None])
    }

    pub(super) fn masked_select(&mut self, x: &V, mask: &V, ty: &Ty) -> V {
        if !ty.dynamic[0] {
            return self.b.splat(0.0, ty);
        }
        let xs = self.padded(x, None);
        let ms = self.padded(mask, None); // false in the padding (`operand_fills`)
        let xf = self.flat(&xs);
        let mf = self.flat(&ms);
        let (packed, count) = self.pack(&[xf], &mf, None);
        self.redyn(packed[0].clone(), ty, &[Some(count), None])
    }

    /// The elements of `x` sorted as the reference's `unique` sorts them
    /// (real values ascending, NaNs after them in their original order,
    /// padding last), and the mask of the first element of each group of
    /// equal values among the real ones (every NaN is its own group).
    fn sorted_groups(&mut self, x: &V) -> (V, V) {
        let mask = self.valid_mask(x);
        let xs = self.padded(x, None);
        let v = self.flat(&xs);
        let n = v.ty.dims[0];
        let i32t = v.ty.with_elt(Elt::I32);
        // rank: 0 real number, 1 NaN, 2 padding.
        let mut rank = self.b.splat(0.0, &i32t);
        if v.ty.elt.is_float() {
            let nan = self.b.cmp(CmpOp::Ne, &v, &v);
            let one = self.b.splat(1.0, &i32t);
            rank = self.b.select(&nan, &one, &rank);
        }
        if let Some(m) = mask {
            let mf = self.flat(&m);
            let two = self.b.splat(2.0, &i32t);
            rank = self.b.select(&mf, &rank, &two);
        }
        let e = v.ty.elt;
        let res = self.b.region_op(
            "sort",
            &[&rank, &v],
            "dimension = 0 : i64, is_stable = true",
            &[Elt::I32, Elt::I32, e, e],
            &[i32t.clone(), v.ty.clone()],
            |b, a| {
                let (ra, rb, va, vb) = (&a[0], &a[1], &a[2], &a[3]);
                let rlt = b.cmp(CmpOp::Lt, ra, rb);
                let req = b.cmp(CmpOp::Eq, ra, rb);
                let z = b.i32c(0);
                let real = b.cmp(CmpOp::Eq, ra, &z);
                let vlt = b.cmp(CmpOp::Lt, va, vb);
                let both = b.bin("and", &req, &real);
                let both = b.bin("and", &both, &vlt);
                vec![b.bin("or", &rlt, &both)]
            },
        );
        let (sr, sv) = (res[0].clone(), res[1].clone());
        let two = self.b.splat(2.0, &i32t);
        let real = self.b.cmp(CmpOp::Lt, &sr, &two);
        if n == 0 {
            return (sv, real);
        }
        let head = self.b.slice(&sv, 0, 0, n - 1);
        let any = self.b.scalar(0.0, e);
        let prev = self.b.pad(&head, &any, 0, 1, 0);
        let differs = self.b.cmp(CmpOp::Ne, &sv, &prev);
        let it = self.b.iota(&i32t, 0);
        let z = self.b.splat(0.0, &i32t);
        let first = self.b.cmp(CmpOp::Eq, &it, &z);
        let starts = self.b.bin("or", &first, &differs);
        let keep = self.b.bin("and", &starts, &real);
        (sv, keep)
    }

    pub(super) fn unique(&mut self, x: &V, ty: &Ty) -> V {
        if !ty.dynamic[0] {
            // A bound of 0 or exactly 1 element: the data itself.
            let xs = self.padded(x, None);
            let f = self.flat(&xs);
            return self.b.reshape(&f, ty.bound());
        }
        let (sv, keep) = self.sorted_groups(x);
        let (packed, count) = self.pack(&[sv], &keep, None);
        self.redyn(packed[0].clone(), ty, &[Some(count)])
    }

    /// Occurrences of each unique value: the distance between the starts
    /// of consecutive groups in the sorted elements (NaN counts 0, as NaN
    /// equals nothing in the reference's count).
    pub(super) fn unique_counts(&mut self, x: &V, u: &V, ty: &Ty) -> V {
        let total = self.real_numel(x);
        if !ty.dynamic[0] {
            // At most one element (the bound is 0 or 1): it occurs once,
            // unless it is NaN.
            let xs = self.padded(x, None);
            let f = self.flat(&xs);
            let f = self.b.reshape(&f, ty.bound().with_elt(f.ty.elt));
            let t = self.b.convert(&total, Elt::I64);
            let t = self.b.fill(&t, ty);
            let nan = self.b.cmp(CmpOp::Ne, &f, &f);
            let zero = self.b.splat(0.0, ty);
            return self.b.select(&nan, &zero, &t);
        }
        let (sv, keep) = self.sorted_groups(x);
        let n = sv.ty.dims[0];
        let pos = self.b.iota(&sv.ty.with_elt(Elt::I32), 0);
        // Positions past the count hold the total, so the last group's
        // end is the total too.
        let (packed, _) = self.pack(&[pos, sv], &keep, Some(&total));
        let starts = &packed[0];
        let tail = self.b.slice(starts, 0, 1, n);
        let t1 = self.b.reshape(&total, Ty::fixed(Elt::I32, &[1]));
        let next = self.b.concat(&[&tail, &t1], 0, starts.ty.clone());
        let c = self.b.bin("subtract", &next, starts);
        let vals = &packed[1];
        let nan = self.b.cmp(CmpOp::Ne, vals, vals);
        let zero = self.b.splat(0.0, &c.ty);
        let c = self.b.select(&nan, &zero, &c);
        let c = self.b.convert(&c, Elt::I64);
        let size = self.b.get_size(u, 0);
        self.redyn(c, ty, &[Some(size)])
    }

    /// `base` with its k-th true mask position (row-major) set to
    /// `src[k]`. On XLA a source shorter than the mask's count repeats its
    /// last element (the gather index is clamped), where the reference
    /// reports an error.
    pub(super) fn masked_scatter(&mut self, base: &V, mask: &V, src: &V, ty: &Ty) -> V {
        let sizes = self.sizes_of(base);
        let bs = self.padded(base, None);
        let s = src.ty.dims[0];
        if s == 0 || bs.ty.numel() == 0 {
            return self.redyn(bs, ty, &sizes);
        }
        let ms = self.padded(mask, None); // false in the padding (`operand_fills`)
        let mf = self.flat(&ms);
        let ki = self.b.convert(&mf, Elt::I32);
        let cs = self.prefix_sum(&ki, Packing::Auto);
        let one = self.b.splat(1.0, &cs.ty);
        let idx = self.b.bin("subtract", &cs, &one);
        let ss = self.padded(src, None);
        let g = self.gather_points(&ss, &[idx], &cs.ty.with_elt(ss.ty.elt));
        let g = self.b.reshape(&g, bs.ty.clone());
        let out = self.b.select(&ms, &g, &bs);
        self.redyn(out, ty, &sizes)
    }
}
