//! Shape ops along dynamic dims: slices, concatenation (appending in
//! place where a buffer allows, `backing`), reversal, reshapes and the
//! gathers a reshape falls back to (see the padding rules in the parent
//! module's docs).

use super::emit::{self, Elt, Ty, V};
use super::Ctx;
use crate::error::Result;
use crate::symint::SizeExpr;

impl Ctx<'_> {
    /// `ty.dims[dim]` elements of the padded `x` from `start` (clamped to
    /// the bound). Along a dynamic dim of real size `n` the result holds
    /// `n - start` clamped to `[0, ty.dims[dim]]` (what `redyn` clamps
    /// to), which is `Op::Slice`'s `max(0, min(n - start, len))`.
    pub(super) fn slice(&mut self, x: &V, dim: usize, start: usize, ty: &Ty) -> V {
        let mut sizes = self.sizes_of(x);
        let xs = self.padded(x, None);
        let from = (start as i64).min(x.ty.dims[dim]);
        let out = self.b.slice(&xs, dim, from, from + ty.dims[dim]);
        if let Some(n) = sizes[dim].take() {
            if ty.dynamic[dim] {
                let start = self.b.i32c(start as i64);
                sizes[dim] = Some(self.b.bin("subtract", &n, &start));
            }
        }
        self.redyn(out, ty, &sizes)
    }

    pub(super) fn concat(&mut self, ins: &[V], dim: usize, ty: &Ty) -> V {
        let mut sizes = self.sizes_of(&ins[0]);
        let parts: Vec<V> = ins.iter().map(|x| self.padded(x, None)).collect();
        if !ty.dynamic[dim] {
            // Empty parts are left out (see `empty_value`).
            let refs: Vec<&V> = parts.iter().filter(|p| p.ty.dims[dim] != 0).collect();
            let out = match refs.as_slice() {
                [] => self.b.splat(0.0, &ty.bound()),
                [one] => (*one).clone(),
                _ => self.b.concat(&refs, dim, ty.bound()),
            };
            return self.redyn(out, ty, &sizes);
        }
        if let Some((full, size)) = self.append_in_place(ins, &parts, dim) {
            let mut out = full.clone();
            if full.ty.dims[dim] > ty.dims[dim] {
                out = self.b.slice(&full, dim, 0, ty.dims[dim]);
                self.keep_backing(&full, &out);
            }
            sizes[dim] = Some(size);
            return self.redyn(out, ty, &sizes);
        }
        // Along a dynamic dim: write each part at the running real offset
        // into a buffer as long as the parts' bounds together, so that no
        // start is ever clamped (the result's bound may be smaller: its
        // size expression can simplify, as `min(1, n) + .. = n`); a part's
        // padding is overwritten by the next part.
        let total: i64 = parts.iter().map(|p| p.ty.dims[dim]).sum();
        let mut wide = ty.bound();
        wide.dims[dim] = wide.dims[dim].max(total);
        let zero = self.b.scalar(0.0, ty.elt);
        let mut out = self.b.fill(&zero, &wide);
        let mut offset = self.b.i32c(0);
        for (x, p) in ins.iter().zip(&parts) {
            let mut starts: Vec<V> = (0..ty.rank()).map(|_| self.b.i32c(0)).collect();
            starts[dim] = offset.clone();
            let mut args: Vec<&V> = vec![&out, p];
            args.extend(starts.iter());
            out = self.b.op("dynamic_update_slice", &args, "", wide.clone());
            let n = self.b.get_size(x, dim);
            offset = self.b.bin("add", &offset, &n);
        }
        if wide.dims[dim] > ty.dims[dim] {
            out = self.b.slice(&out, dim, 0, ty.dims[dim]);
        }
        sizes[dim] = Some(offset);
        self.redyn(out, ty, &sizes)
    }

    /// `x` reversed along `dims`. Reversing the static view moves the
    /// real elements of a dynamic dim `d` (size `n`, bound `N`) to
    /// `[N - n, N)`; padding the view with `N` more elements there and
    /// slicing `N` from `N - n` brings them back to the front.
    pub(super) fn reverse(&mut self, x: &V, dims: &[usize], ty: &Ty) -> V {
        let sizes = self.sizes_of(x);
        let xs = self.padded(x, None);
        let ds: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let mut out = self.b.op(
            "reverse",
            &[&xs],
            &format!("dimensions = {}", emit::arr(&ds)),
            xs.ty.clone(),
        );
        let shifted: Vec<usize> = dims.iter().copied().filter(|&d| ty.dynamic[d]).collect();
        if !shifted.is_empty() {
            let zero = self.b.scalar(0.0, ty.elt);
            for &d in &shifted {
                out = self.b.pad(&out, &zero, d, 0, ty.dims[d]);
            }
            let starts: Vec<V> = (0..ty.rank())
                .map(|d| match (&sizes[d], shifted.contains(&d)) {
                    (Some(n), true) => {
                        let bound = self.b.i32c(ty.dims[d]);
                        self.b.bin("subtract", &bound, n)
                    }
                    _ => self.b.i32c(0),
                })
                .collect();
            let mut args: Vec<&V> = vec![&out];
            args.extend(starts.iter());
            let attrs = format!("slice_sizes = {}", emit::arr(&ty.dims));
            out = self.b.op("dynamic_slice", &args, &attrs, ty.bound());
        }
        self.redyn(out, ty, &sizes)
    }

    pub(super) fn reshape(&mut self, x: &V, shape: &[SizeExpr], ty: &Ty) -> Result<V> {
        if !x.ty.is_dynamic() && !ty.is_dynamic() {
            return Ok(self.b.reshape(x, ty.clone()));
        }
        let out_sizes = self.expr_sizes(shape, ty)?;
        let major_only =
            |t: &Ty| t.dynamic.iter().skip(1).all(|&d| !d) && t.numel() == x.ty.numel();
        if major_only(&x.ty) && major_only(ty) {
            // The real elements are a prefix of the buffer in both shapes.
            let xs = self.padded(x, None);
            let out = self.b.reshape(&xs, ty.bound());
            return Ok(self.redyn(out, ty, &out_sizes));
        }
        // General case: each output position's row-major rank among the
        // real elements, mapped back to input coordinates, then a gather.
        // Static dims after the last dynamic one, alike in both shapes
        // (`[16, s, 1000] -> [16*s, 1000]`), travel whole: the ranks are
        // those of rows of `tail` elements, and the gather moves rows.
        let tail = common_static_tail(&x.ty, ty);
        let (xh, th) = (head_of(&x.ty, tail), head_of(ty, tail));
        let in_sizes: Vec<V> = (0..xh.rank()).map(|d| self.b.get_size(x, d)).collect();
        let o_sizes: Vec<V> = (0..th.rank())
            .map(|d| match &out_sizes[d] {
                Some(s) => s.clone(),
                None => self.b.i32c(th.dims[d]),
            })
            .collect();
        let shape32 = th.bound().with_elt(Elt::I32);
        let mut k = self.b.splat(0.0, &shape32);
        for (d, size) in o_sizes.iter().enumerate() {
            let it = self.b.iota(&shape32, d);
            let s = self.b.fill(size, &shape32);
            let km = self.b.bin("multiply", &k, &s);
            k = self.b.bin("add", &km, &it);
        }
        let one = self.b.i32c(1);
        let mut coords: Vec<V> = vec![k.clone(); xh.rank()];
        let mut rest = k;
        for d in (0..xh.rank()).rev() {
            let s = self.b.bin("maximum", &in_sizes[d], &one);
            let s = self.b.fill(&s, &shape32);
            coords[d] = self.b.bin("remainder", &rest, &s);
            rest = self.b.bin("divide", &rest, &s);
        }
        let xs = self.padded(x, None);
        let out = if tail == 1 {
            self.gather_points(&xs, &coords, &ty.bound())
        } else {
            let mut rows_ty = xh.bound();
            rows_ty.dims.push(tail);
            rows_ty.dynamic.push(false);
            let rows = self.b.reshape(&xs, rows_ty);
            let mut out_rows = th.bound().with_elt(x.ty.elt);
            out_rows.dims.push(tail);
            out_rows.dynamic.push(false);
            let got = self.gather_rows(&rows, &coords, &out_rows);
            self.b.reshape(&got, ty.bound())
        };
        Ok(self.redyn(out, ty, &out_sizes))
    }

    /// The coordinate tensors (one static shape, one element type) stacked
    /// along a new last dim: a gather's index vectors.
    pub(super) fn index_vectors(&mut self, coords: &[V]) -> V {
        let r = coords[0].ty.rank();
        let mut idx_ty = coords[0].ty.bound();
        idx_ty.dims.push(1);
        idx_ty.dynamic.push(false);
        let cols: Vec<V> = coords
            .iter()
            .map(|c| self.b.reshape(c, idx_ty.clone()))
            .collect();
        if cols.len() == 1 {
            return cols[0].clone();
        }
        idx_ty.dims[r] = cols.len() as i64;
        let refs: Vec<&V> = cols.iter().collect();
        self.b.concat(&refs, r, idx_ty)
    }

    /// `out[p, :] = x[coords[0][p], .., coords[r-1][p], :]` for a static
    /// `x` whose last dim is a row, as [`Ctx::gather_points`] gathers
    /// elements.
    pub(super) fn gather_rows(&mut self, x: &V, coords: &[V], out: &Ty) -> V {
        if x.ty.dims.contains(&0) {
            return self.b.splat(0.0, &out.bound().with_elt(x.ty.elt));
        }
        let r = coords[0].ty.rank();
        let idx = self.index_vectors(coords);
        let head: Vec<i64> = (0..coords.len() as i64).collect();
        let mut slice = vec![1i64; coords.len()];
        slice.push(*x.ty.dims.last().expect("a row dim"));
        let attrs = format!(
            "dimension_numbers = #stablehlo.gather<offset_dims = [{r}], collapsed_slice_dims = {}, start_index_map = {}, index_vector_dim = {r}>, slice_sizes = {}, indices_are_sorted = false",
            emit::list(&head),
            emit::list(&head),
            emit::arr(&slice)
        );
        self.b.op("gather", &[x, &idx], &attrs, out.bound())
    }

    /// `out[p] = x[coords[0][p], .., coords[r-1][p]]` for a static `x` and
    /// integer coordinate tensors (all of one element type) of the static
    /// shape `out` (out-of-range coordinates are clamped by XLA).
    pub(super) fn gather_points(&mut self, x: &V, coords: &[V], out: &Ty) -> V {
        if x.ty.dims.contains(&0) {
            // Nothing to read (and slices of size 1 from a size-0
            // dimension do not compile): every coordinate is out of range.
            return self.b.splat(0.0, &out.bound().with_elt(x.ty.elt));
        }
        let r = out.rank();
        let idx = self.index_vectors(coords);
        let all: Vec<i64> = (0..x.ty.rank() as i64).collect();
        let ones = vec![1i64; x.ty.rank()];
        let attrs = format!(
            "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = {}, start_index_map = {}, index_vector_dim = {r}>, slice_sizes = {}, indices_are_sorted = false",
            emit::list(&all),
            emit::list(&all),
            emit::arr(&ones)
        );
        self.b
            .op("gather", &[x, &idx], &attrs, out.bound().with_elt(x.ty.elt))
    }
}

/// The number of elements in the static dims after the last dynamic one
/// that both types share as whole trailing dims (a product of a suffix of
/// each), at least 1.
fn common_static_tail(a: &Ty, b: &Ty) -> i64 {
    let products = |t: &Ty| {
        let mut p = 1;
        let mut out = vec![1];
        for d in (0..t.rank()).rev() {
            if t.dynamic[d] {
                break;
            }
            p *= t.dims[d];
            out.push(p);
        }
        out
    };
    let (pa, pb) = (products(a), products(b));
    pa.into_iter()
        .filter(|p| *p > 0 && pb.contains(p))
        .max()
        .unwrap_or(1)
}

/// `t` without the trailing static dims whose product is `tail` (see
/// [`common_static_tail`]).
fn head_of(t: &Ty, tail: i64) -> Ty {
    let mut left = tail;
    let mut keep = t.rank();
    while left > 1 {
        keep -= 1;
        left /= t.dims[keep];
    }
    Ty {
        elt: t.elt,
        dims: t.dims[..keep].into(),
        dynamic: t.dynamic[..keep].into(),
    }
}
