//! Window ops: `reduce_window` and `select_and_scatter` on static views.
//!
//! A dynamic dim takes a trivial window or (sums, products) one that
//! keeps its size, such as a scan; the static view's padding sits after
//! the real elements and is set to the reduction's identity, so a window
//! reading past the real elements reads what the reference reads there
//! (nothing), and the result gets the operand's real sizes back.

use super::emit::{arr, Elt, Ty, V};
use super::reduce::{arg_pick, pick_body};
use super::Ctx;
use crate::ir::{ArgKind, CmpOp, PadFill, Window, WindowKind};

/// The attributes every window op shares.
fn window_attrs(w: &Window) -> String {
    let as_i64 = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let pads: Vec<String> = w
        .padding
        .iter()
        .map(|(l, h)| format!("[{l}, {h}]"))
        .collect();
    format!(
        "window_dimensions = {}, window_strides = {}, padding = dense<[{}]> : tensor<{}x2xi64>",
        arr(&as_i64(&w.size)),
        arr(&as_i64(&w.stride)),
        pads.join(", "),
        w.rank()
    )
}

impl Ctx<'_> {
    /// `Op::ReduceWindow`.
    pub(super) fn reduce_window(&mut self, kind: WindowKind, x: &V, w: &Window, ty: &Ty) -> V {
        if x.ty.rank() == 0 {
            return x.clone();
        }
        let e = x.ty.elt;
        let identity = e.fill(PadFill::window_identity(kind));
        // Dynamic dims keep their size (see `ir::window`); the padding
        // holds the identity (`ir::passes::operand_fills`).
        let sizes = self.sizes_of(x);
        let xs = self.padded(x, None);
        let init = self.b.splat_lit(&identity, &Ty::scalar(e));
        let dil: Vec<i64> = w.dilation.iter().map(|&d| d as i64).collect();
        let attrs = format!(
            "{}, base_dilations = {}, window_dilations = {}",
            window_attrs(w),
            arr(&dil),
            arr(&vec![1; w.rank()])
        );
        let out = self
            .b
            .region_op(
                "reduce_window",
                &[&xs, &init],
                &attrs,
                &[e, e],
                &[ty.bound()],
                |b, a| {
                    vec![match kind {
                        WindowKind::Sum => b.bin("add", &a[0], &a[1]),
                        WindowKind::Product => b.bin("multiply", &a[0], &a[1]),
                        WindowKind::Max => pick_body(b, CmpOp::Gt, &a[0], &a[1]),
                        WindowKind::Min => pick_body(b, CmpOp::Lt, &a[0], &a[1]),
                    }]
                },
            )
            .remove(0);
        self.redyn(out, ty, &sizes)
    }

    /// `Op::SelectAndScatter`: the position each window selects comes
    /// from a `reduce_window` over (value, flat position) pairs in the
    /// total order of `arg_pick` (the first extremum, NaN first), then
    /// each window's source element is scatter-added there. XLA's own
    /// `select_and_scatter` visits a window in an order that is not
    /// row-major on CPU, so it breaks ties unlike PyTorch.
    ///
    /// Padding selects nothing: it holds the worst value at position
    /// `numel`, above every real one, so it loses even a tie, and a
    /// window of padding alone selects `numel`, out of range, which the
    /// scatter drops. Dynamic dims have trivial windows, so a padded
    /// position only meets padded source elements (set to 0).
    pub(super) fn select_and_scatter(
        &mut self,
        kind: ArgKind,
        x: &V,
        src: &V,
        w: &Window,
        ty: &Ty,
    ) -> V {
        if x.ty.rank() == 0 {
            return src.clone();
        }
        let e = x.ty.elt;
        let sizes = self.sizes_of(x);
        let dir = match kind {
            ArgKind::Max => CmpOp::Gt,
            ArgKind::Min => CmpOp::Lt,
        };
        let worst = e.fill(PadFill::worst(kind));
        // The operand's padding holds the worst value, the source's 0
        // (`ir::passes::operand_fills`).
        let xs = self.padded(x, None);
        let ss = self.padded(src, None);
        let n = xs.ty.numel();
        let flat = self.b.iota(&Ty::fixed(Elt::I64, &[n]), 0);
        let pos = self.b.reshape(&flat, xs.ty.with_elt(Elt::I64));
        let init_v = self.b.splat_lit(&worst, &Ty::scalar(e));
        let init_i = self.b.scalar(n as f64, Elt::I64);
        let attrs = format!(
            "{}, base_dilations = {}, window_dilations = {}",
            window_attrs(w),
            arr(&vec![1; w.rank()]),
            arr(&vec![1; w.rank()])
        );
        let float = e.is_float();
        let chosen = self.b.region_op(
            "reduce_window",
            &[&xs, &pos, &init_v, &init_i],
            &attrs,
            &[e, Elt::I64, e, Elt::I64],
            &[ss.ty.clone(), ss.ty.with_elt(Elt::I64)],
            |b, a| arg_pick(b, dir, float, a),
        );
        let m = ss.ty.numel();
        let dst = self.b.reshape(&chosen[1], Ty::fixed(Elt::I64, &[m, 1]));
        let upd = self.b.reshape(&ss, Ty::fixed(e, &[m]));
        let zeros = self.b.splat(0.0, &Ty::fixed(e, &[n]));
        let attrs = "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false";
        let out = self
            .b
            .region_op(
                "scatter",
                &[&zeros, &dst, &upd],
                attrs,
                &[e, e],
                std::slice::from_ref(&zeros.ty),
                |b, a| vec![b.bin("add", &a[0], &a[1])],
            )
            .remove(0);
        let out = self.b.reshape(&out, xs.ty.clone());
        self.redyn(out, ty, &sizes)
    }
}
