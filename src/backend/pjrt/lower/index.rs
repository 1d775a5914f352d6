//! Indexing ops: `index_select`, `gather`, `index_add`, `scatter` (add or
//! overwrite).
//!
//! Operands are used through static views. Gathers read only real
//! positions for in-range indices; XLA clamps an out-of-range index into
//! the bound (the reference reports an error instead). Scatters drop the
//! padded part of a dynamic index or source by pointing it out of range,
//! which XLA skips; out-of-range and negative indices are skipped too.

use super::emit::{list, Elt, Ty, V};
use super::Ctx;
use crate::ir::{PadFill, ScatterMode};

/// `[0, r)` without `dim`.
fn others(r: usize, dim: usize) -> Vec<i64> {
    (0..r).filter(|&d| d != dim).map(|d| d as i64).collect()
}

impl Ctx<'_> {
    pub(super) fn index_select(&mut self, x: &V, idx: &V, dim: usize, ty: &Ty) -> V {
        let mut sizes = self.sizes_of(x);
        sizes[dim] = idx.ty.dynamic[0].then(|| self.b.get_size(idx, 0));
        if x.ty.dims.contains(&0) {
            // Nothing to read: every index is out of range (a gather of
            // slices of size 1 from a size-0 dimension does not compile).
            let z = self.b.splat(0.0, &ty.bound());
            return self.redyn(z, ty, &sizes);
        }
        let xs = self.padded(x, None);
        let is = self.padded(idx, None);
        let k = is.ty.dims[0];
        let is = self.b.reshape(&is, Ty::fixed(is.ty.elt, &[k, 1]));
        let r = xs.ty.rank();
        let mut slice = xs.ty.dims.clone();
        slice[dim] = 1;
        let attrs = format!(
            "dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = [{dim}], start_index_map = [{dim}], index_vector_dim = 1>, slice_sizes = {}, indices_are_sorted = false",
            list(&others(r, dim)),
            super::emit::arr(&slice)
        );
        let out = self.b.op("gather", &[&xs, &is], &attrs, ty.bound());
        self.redyn(out, ty, &sizes)
    }

    /// Node `i`, or the node whose padding it zeroes (`Op::FillPadding`):
    /// the same elements, for a question about them.
    pub(super) fn unfilled(&self, i: usize) -> usize {
        match self.program.nodes[i].op {
            crate::ir::Op::FillPadding { .. } => self.program.nodes[i].inputs[0],
            _ => i,
        }
    }

    /// True when node `i` is a 1-D count `0, 1, .., n-1` (`arange`): as
    /// an index it selects (or adds into) a prefix, which needs no gather
    /// or scatter (the dynamic `Embedding` keeps its real rows this way).
    /// So is every position's own index in a masked zone
    /// ([`Ctx::mask_positions`]): its real positions index themselves.
    /// A fill of its padding (`Op::FillPadding`) changes no element.
    pub(super) fn counting(&self, i: usize) -> bool {
        let i = self.unfilled(i);
        let n = &self.program.nodes[i];
        (matches!(&n.op, crate::ir::Op::Iota { dim: 0, .. }) && n.shape.len() == 1)
            || self.mask_positions(i)
    }

    /// `index_select` of the first `n` positions along `dim` (`idx` counts
    /// `0..n`): a slice of the bound, given `n` as its size. Falls back
    /// to the gather when the index's bound exceeds `x`'s (XLA's gather
    /// would clamp those indices).
    pub(super) fn prefix_select(&mut self, x: &V, idx: &V, dim: usize, ty: &Ty) -> V {
        let k = idx.ty.dims[0];
        if k > x.ty.dims[dim] {
            return self.index_select(x, idx, dim, ty);
        }
        let mut sizes = self.sizes_of(x);
        sizes[dim] = idx.ty.dynamic[0].then(|| self.b.get_size(idx, 0));
        let xs = self.padded(x, None);
        let out = self.b.slice(&xs, dim, 0, k);
        self.redyn(out, ty, &sizes)
    }

    /// `index_add` of `src` at the first `n` positions along `dim` (`idx`
    /// counts `0..n`): `src` with its padding along `dim` zeroed, padded
    /// with zeros to the base's bound, added. Padding of `src` along other
    /// dims lands in the base's padding, as with the scatter. Falls back
    /// to the scatter when `src`'s bound along `dim` exceeds the base's.
    pub(super) fn prefix_add(&mut self, base: &V, idx: &V, src: &V, dim: usize, ty: &Ty) -> V {
        let (k, m) = (src.ty.dims[dim], base.ty.dims[dim]);
        if k > m || idx.ty.dims[0] != k {
            return self.index_add(base, idx, src, dim, ty);
        }
        let sizes = self.sizes_of(base);
        let bs = self.padded(base, None);
        let mut src_sizes = self.sizes_of(src);
        // Positions past the index's count take nothing.
        src_sizes[dim] = match (idx.ty.dynamic[0], src_sizes[dim].clone()) {
            (true, _) => Some(self.b.get_size(idx, 0)),
            (false, s) => s,
        };
        let ss = self.padded_along(src, &src_sizes, PadFill::Zero, &[dim]);
        let z = self.b.scalar(0.0, ss.ty.elt);
        let ss = if k < m {
            self.b.pad(&ss, &z, dim, 0, m - k)
        } else {
            ss
        };
        let out = self.b.bin("add", &bs, &ss);
        self.redyn(out, ty, &sizes)
    }

    /// Full coordinates (i64) of every position of the static `idx_s`, with
    /// `idx_s` itself along `dim`.
    fn coords(&mut self, idx_s: &V, dim: usize) -> Vec<V> {
        let t = idx_s.ty.with_elt(Elt::I64);
        let idx64 = self.b.convert(idx_s, Elt::I64);
        (0..t.rank())
            .map(|d| {
                if d == dim {
                    idx64.clone()
                } else {
                    self.b.iota(&t, d)
                }
            })
            .collect()
    }

    pub(super) fn gather(&mut self, x: &V, idx: &V, dim: usize, ty: &Ty) -> V {
        let sizes = self.sizes_of(idx);
        let xs = self.padded(x, None);
        let is = self.padded(idx, None);
        let coords = self.coords(&is, dim);
        let out = self.gather_points(&xs, &coords, &ty.bound());
        self.redyn(out, ty, &sizes)
    }

    /// The static `idx` with positions outside `idx`'s real sizes replaced
    /// by `oob` (an out-of-range index), as i64.
    fn drop_padding(&mut self, idx: &V, oob: i64) -> V {
        let mask = self.valid_mask(idx);
        let is = self.padded(idx, None);
        let is = self.b.convert(&is, Elt::I64);
        match mask {
            Some(m) => {
                let o = self.b.splat(oob as f64, &is.ty);
                self.b.select(&m, &is, &o)
            }
            None => is,
        }
    }

    pub(super) fn index_add(&mut self, base: &V, idx: &V, src: &V, dim: usize, ty: &Ty) -> V {
        let sizes = self.sizes_of(base);
        let bs = self.padded(base, None);
        let is = self.drop_padding(idx, bs.ty.dims[dim]);
        let k = is.ty.dims[0];
        let is = self.b.reshape(&is, Ty::fixed(Elt::I64, &[k, 1]));
        let ss = self.padded(src, None);
        let r = bs.ty.rank();
        let window = others(r, dim);
        let uw = if window.is_empty() {
            String::new()
        } else {
            format!("update_window_dims = {}, ", list(&window))
        };
        let attrs = format!(
            "scatter_dimension_numbers = #stablehlo.scatter<{uw}inserted_window_dims = [{dim}], scatter_dims_to_operand_dims = [{dim}], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false"
        );
        let out = self.scatter_op(&bs, &is, &ss, &attrs, ScatterMode::Add);
        self.redyn(out, ty, &sizes)
    }

    /// PyTorch's `scatter_add` or `scatter` along `dim`. With `Overwrite`
    /// and duplicate indices XLA keeps one of the updates, unspecified which.
    pub(super) fn scatter(
        &mut self,
        base: &V,
        idx: &V,
        src: &V,
        dim: usize,
        mode: ScatterMode,
        ty: &Ty,
    ) -> V {
        let sizes = self.sizes_of(base);
        let bs = self.padded(base, None);
        let is = self.drop_padding(idx, bs.ty.dims[dim]);
        let r = bs.ty.rank();
        // A coordinate past the base's bound in any dim makes XLA skip
        // the update, as for the padded positions set out of range above.
        let coords = self.coords(&is, dim);
        let mut it = is.ty.clone();
        it.dims.push(1);
        it.dynamic.push(false);
        let cols: Vec<V> = coords
            .iter()
            .map(|c| self.b.reshape(c, it.clone()))
            .collect();
        let mut all = it.clone();
        all.dims[r] = r as i64;
        let refs: Vec<&V> = cols.iter().collect();
        let indices = if r == 1 {
            cols[0].clone()
        } else {
            self.b.concat(&refs, r, all)
        };
        let ss = self.padded(src, None);
        let dims: Vec<i64> = (0..r as i64).collect();
        let attrs = format!(
            "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = {}, scatter_dims_to_operand_dims = {}, index_vector_dim = {r}>, indices_are_sorted = false, unique_indices = false",
            list(&dims),
            list(&dims)
        );
        let out = self.scatter_op(&bs, &indices, &ss, &attrs, mode);
        self.redyn(out, ty, &sizes)
    }

    fn scatter_op(&mut self, base: &V, indices: &V, upd: &V, attrs: &str, mode: ScatterMode) -> V {
        let e = base.ty.elt;
        self.b
            .region_op(
                "scatter",
                &[base, indices, upd],
                attrs,
                &[e, e],
                std::slice::from_ref(&base.ty),
                |b, a| match mode {
                    ScatterMode::Add => vec![b.bin("add", &a[0], &a[1])],
                    ScatterMode::Overwrite => vec![a[1].clone()],
                },
            )
            .remove(0)
    }
}
