//! Reductions, arg-reductions and matrix products, on static views with
//! the padding set to a value that cannot change the result.

use super::emit::{push_list, Builder, Elt, Ty, V};
use super::Ctx;
use crate::ir::dot::Side;
use crate::ir::program::MatmulPrecision;
use crate::ir::CmpOp;
use crate::ir::{ArgKind, Dot, PadFill, ReduceKind};

/// NaN-propagating max/min combiner for reduction bodies (symmetric in its
/// operands, since XLA may apply it in either order). Not XLA's `maximum`:
/// the 0.11.2 CPU plugin's fast reduction kernel drops NaN with it (the
/// max of `[NaN, NaN]` comes out `-inf`).
pub(super) fn pick_body(b: &mut Builder, dir: CmpOp, p: &V, q: &V) -> V {
    let better = b.cmp(dir, p, q);
    let take = if p.ty.elt.is_float() {
        let nan = b.cmp(CmpOp::Ne, p, p);
        b.bin("or", &nan, &better)
    } else {
        better
    };
    b.select(&take, p, q)
}

/// The better of two (value, index) pairs, `a = [va, ia, vb, ib]`, in
/// the total order (is NaN, value by `dir`, lower index): the first NaN
/// wins, then the first extremum. Any combination order gives the same
/// pair, so XLA may reduce in any order.
pub(super) fn arg_pick(b: &mut Builder, dir: CmpOp, float: bool, a: &[V]) -> Vec<V> {
    let (va, ia, vb, ib) = (&a[0], &a[1], &a[2], &a[3]);
    let better = b.cmp(dir, va, vb);
    let tie = b.cmp(CmpOp::Eq, va, vb);
    let first = b.cmp(CmpOp::Lt, ia, ib);
    let tie_first = b.bin("and", &tie, &first);
    let mut take = b.bin("or", &better, &tie_first);
    if float {
        // NaN first, then the numeric order; among NaNs the lower index.
        let a_nan = b.cmp(CmpOp::Ne, va, va);
        let b_nan = b.cmp(CmpOp::Ne, vb, vb);
        let both = b.bin("and", &a_nan, &b_nan);
        let nan_first = b.bin("and", &both, &first);
        let not_b_nan = b.un("not", &b_nan);
        let only_a = b.bin("and", &a_nan, &not_b_nan);
        let numbers = b.bin("and", &take, &not_b_nan);
        let t = b.bin("or", &only_a, &nan_first);
        take = b.bin("or", &t, &numbers);
    }
    vec![b.select(&take, va, vb), b.select(&take, ia, ib)]
}

impl Ctx<'_> {
    pub(super) fn reduce(&mut self, kind: ReduceKind, x: &V, dims: &[usize], ty: &Ty) -> V {
        if dims.is_empty() {
            return x.clone();
        }
        let e = x.ty.elt;
        let identity = e.fill(PadFill::identity(kind));
        let sizes = self.sizes_of(x);
        // The reduced dims' padding holds the identity
        // (`ir::passes::operand_fills`); the others' reaches only the
        // result's padding.
        let xs = self.padded(x, None);
        let init = self.b.splat_lit(&identity, &Ty::scalar(e));
        let out = self.b.reduce(&xs, &init, dims, |b, p, q| match kind {
            ReduceKind::Sum => b.bin("add", p, q),
            ReduceKind::Max => pick_body(b, CmpOp::Gt, p, q),
            ReduceKind::Min => pick_body(b, CmpOp::Lt, p, q),
            ReduceKind::Prod => b.bin("multiply", p, q),
        });
        let kept: Vec<Option<V>> = (0..x.ty.rank())
            .filter(|d| !dims.contains(d))
            .map(|d| sizes[d].clone())
            .collect();
        self.redyn(out, ty, &kept)
    }

    /// The first index of the extremum along `dim`, as the reference and
    /// PyTorch: the first NaN wins over every number. The reduction runs
    /// over (value, index) pairs ordered by (is NaN, value, lower index),
    /// a total order, so XLA may combine them in any order.
    pub(super) fn arg_reduce(&mut self, kind: ArgKind, x: &V, dim: usize, ty: &Ty) -> V {
        let e = x.ty.elt;
        let sizes = self.sizes_of(x);
        let dir = match kind {
            ArgKind::Max => CmpOp::Gt,
            ArgKind::Min => CmpOp::Lt,
        };
        let worst = e.fill(PadFill::worst(kind));
        let kept: Vec<Option<V>> = (0..x.ty.rank())
            .filter(|&d| d != dim)
            .map(|d| sizes[d].clone())
            .collect();
        if x.ty.dims[dim] == 0 {
            let z = self.b.splat(0.0, &ty.bound());
            return self.redyn(z, ty, &kept);
        }
        // Padding never wins: it holds the worst value
        // (`ir::passes::operand_fills`) at indices above every real one,
        // so it loses even a tie.
        let xs = self.padded(x, None);
        let idx = self.b.iota(&xs.ty.with_elt(Elt::I64), dim);
        let init_v = self.b.splat_lit(&worst, &Ty::scalar(e));
        let init_i = self.b.scalar(0.0, Elt::I64);
        let out_v = ty.bound().with_elt(e);
        let out_i = ty.bound();
        let float = e.is_float();
        let res = self.b.region_op(
            "reduce",
            &[&xs, &idx, &init_v, &init_i],
            &format!("dimensions = array<i64: {dim}>"),
            &[e, Elt::I64, e, Elt::I64],
            &[out_v, out_i],
            |b, a| arg_pick(b, dir, float, a),
        );
        self.redyn(res[1].clone(), ty, &kept)
    }

    /// `dot_general` with `dot`'s dims (batch dims leading in both
    /// operands and the result). The padding of every dynamic contracted
    /// dim is zero in both operands (`ir::passes::operand_fills`): zero
    /// in one alone would not do, as the other's unspecified padding may
    /// hold infinities or NaNs, and `0 * inf` is NaN; or, where the
    /// product has a `raw` operand (`guarded`), in the smaller operand
    /// alone, the result checked. Padding along free and batch dims only
    /// reaches the result's padding, so it is left as it is.
    /// `precision` is the `precision_config` level of both operands
    /// ([`Ctx::product_precision`]), none for XLA's default.
    pub(super) fn dot(&mut self, a: &V, b: &V, dot: &Dot, ty: &Ty, precision: Option<&str>) -> V {
        let sa = self.sizes_of(a);
        let sb = self.sizes_of(b);
        let raw = dot.raw;
        let az = self.padded(a, None);
        let bz = self.padded(b, None);
        let attrs = dot_attrs(dot, precision);
        let wide = self.dot_through_backing((a, &sa, &az), (b, &sb, &bz), dot, raw, ty);
        let (az, bz, out_ty) = match &wide {
            Some(w) => (w.az.clone(), w.bz.clone(), w.out.clone()),
            None => (az, bz, ty.bound()),
        };
        let raw_value = wide.and_then(|w| w.raw_value);
        let mut out = match raw {
            None => self
                .b
                .op("dot_general", &[&az, &bz], &attrs, out_ty.clone()),
            Some(side) => {
                let (a, b) = match (&raw_value, side) {
                    (Some(v), Side::Lhs) => (v, b),
                    (Some(v), Side::Rhs) => (a, v),
                    (None, _) => (a, b),
                };
                self.checked_dot(side, (a, &sa, &az), (b, &sb, &bz), dot, &attrs, &out_ty)
            }
        };
        for d in 0..ty.rank() {
            if out.ty.dims[d] > ty.dims[d] {
                out = self.b.slice(&out, d, 0, ty.dims[d]);
            }
        }
        // The result's dims in order: batch and lhs free dims (sizes from
        // the lhs), then rhs free dims (from the rhs).
        let mut sizes: Vec<Option<V>> = sa[..dot.batch].to_vec();
        sizes.extend(dot.lhs_free(a.ty.rank()).into_iter().map(|d| sa[d].clone()));
        sizes.extend(dot.rhs_free(b.ty.rank()).into_iter().map(|d| sb[d].clone()));
        self.redyn(out, ty, &sizes)
    }

    /// The `precision_config` level of a product whose result is of
    /// element type `elt` (before half operands are widened): the
    /// program's `set_float32_matmul_precision` level for an `f32`
    /// product; none (XLA's default) for "medium" and for other types. A
    /// half product widened to `f32` keeps the default, so a GPU runs it
    /// on its fast units as before.
    pub(super) fn product_precision(&self, elt: Elt) -> Option<&'static str> {
        match (elt, self.matmul_precision) {
            (Elt::F32, MatmulPrecision::Highest) => Some("HIGHEST"),
            (Elt::F32, MatmulPrecision::High) => Some("HIGH"),
            _ => None,
        }
    }
}

/// A `dot_general`'s attributes: its dimension numbers and, when given,
/// the `precision_config` level of both operands.
fn dot_attrs(dot: &Dot, precision: Option<&str>) -> String {
    type Dims = smallvec::SmallVec<[i64; 6]>;
    let batch: Dims = (0..dot.batch as i64).collect();
    let lhs: Dims = dot.lhs_contract.iter().map(|&d| d as i64).collect();
    let rhs: Dims = dot.rhs_contract.iter().map(|&d| d as i64).collect();
    let mut fields: smallvec::SmallVec<[(&str, &[i64]); 4]> = smallvec::SmallVec::new();
    if !batch.is_empty() {
        fields.push(("lhs_batching_dimensions = ", &batch));
        fields.push(("rhs_batching_dimensions = ", &batch));
    }
    if !lhs.is_empty() {
        fields.push(("lhs_contracting_dimensions = ", &lhs));
        fields.push(("rhs_contracting_dimensions = ", &rhs));
    }
    let mut attrs = String::with_capacity(160);
    attrs.push_str("dot_dimension_numbers = #stablehlo.dot<");
    for (k, (name, dims)) in fields.iter().enumerate() {
        if k > 0 {
            attrs.push_str(", ");
        }
        attrs.push_str(name);
        push_list(&mut attrs, dims);
    }
    attrs.push('>');
    if let Some(level) = precision {
        for part in [
            ", precision_config = [#stablehlo<precision ",
            level,
            ">, #stablehlo<precision ",
            level,
            ">]",
        ] {
            attrs.push_str(part);
        }
    }
    attrs
}
