//! Convolution: `stablehlo.convolution` in PyTorch's layout on static
//! views; a dynamic batch keeps its size (each batch element is computed
//! on its own, so padding rows only produce padding rows).

use super::emit::{arr, Ty, V};
use super::Ctx;
use crate::ir::Conv;

impl Ctx<'_> {
    pub(super) fn convolution(&mut self, x: &V, w: &V, c: &Conv, ty: &Ty) -> V {
        let batch = self.sizes_of(x).swap_remove(0);
        let xs = self.padded(x, None);
        let ws = self.padded(w, None);
        let r = c.rank();
        let spatial: Vec<String> = (0..r).map(|s| s.to_string()).collect();
        let sp = spatial.join(", ");
        let pads: Vec<String> = c
            .padding
            .iter()
            .map(|(lo, hi)| format!("[{lo}, {hi}]"))
            .collect();
        let ints = |v: &[usize]| arr(&v.iter().map(|&d| d as i64).collect::<Vec<_>>());
        let attrs = format!(
            "batch_group_count = {} : i64, dimension_numbers = #stablehlo.conv<[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]>, feature_group_count = {} : i64, lhs_dilation = {}, padding = dense<[{}]> : tensor<{r}x2xi64>, rhs_dilation = {}, window_strides = {}",
            c.batch_groups,
            c.feature_groups,
            ints(&c.lhs_dilation),
            pads.join(", "),
            ints(&c.rhs_dilation),
            ints(&c.stride),
        );
        let out = self.b.op("convolution", &[&xs, &ws], &attrs, ty.bound());
        let mut sizes = vec![None; ty.rank()];
        sizes[0] = batch;
        self.redyn(out, ty, &sizes)
    }
}
