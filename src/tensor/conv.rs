//! Convolutions: `conv1d`, `conv2d`, `conv_transpose2d` (PyTorch's
//! meaning and layout) over the one `Op::Convolution` primitive, and the
//! two convolutions its gradient is made of.
//!
//! A transposed convolution is the input gradient of a convolution: a
//! convolution of its input, dilated by the stride, with the flipped
//! weight whose in and out channels are swapped (per group). The weight
//! gradient is a convolution of the input with the output gradient, batch
//! and channels swapped (`batch_groups` carries the groups). The padding
//! of both follows JAX's `_conv_general_vjp_{lhs,rhs}_padding`.

use super::Tensor;
use crate::dtype::{result_type, Priority};
use crate::error::Error;
use crate::ir::conv::dilated;
use crate::ir::{Conv, Op};
use smallvec::SmallVec;

/// `e` with `op` as the op it names: the user called `op`, which the
/// convolution primitive implements.
#[track_caller]
fn renamed(e: Error, op: &'static str) -> Error {
    match e {
        Error::Shape { message, .. } => Error::Shape { op, message },
        Error::DType { message, .. } => Error::DType { op, message },
        Error::InvalidArgument { message, .. } => Error::InvalidArgument { op, message },
        Error::DynamicUnsupported { dim, shape, .. } => {
            Error::DynamicUnsupported { op, dim, shape }
        }
        other => other,
    }
}

#[track_caller]
fn fail(op: &'static str, message: String) -> ! {
    panic!("{}", Error::shape(op, message))
}

impl Tensor {
    /// Records the convolution primitive of `self` (input) and `w`
    /// (weight); a misuse panics with inference's message, naming `op`.
    #[track_caller]
    pub(crate) fn convolution(&self, w: &Tensor, conv: Conv, op: &'static str) -> Tensor {
        Tensor::try_apply(Op::Convolution(conv), &[self, w], SmallVec::new())
            .unwrap_or_else(|e| panic!("{}", renamed(e, op)))
    }

    /// 1-d convolution of `self` `[N, C, L]` (or unbatched `[C, L]`) with
    /// `weight` `[O, C / groups, K]`, plus `bias` `[O]`: PyTorch's
    /// `F.conv1d`. The batch may be dynamic.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 4]).unwrap();
    /// let w = Tensor::from_vec(vec![1.0f32, -1.0], &[1, 1, 2]).unwrap();
    /// let y = x.conv1d(&w, None, 1, 0, 1, 1);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![-1.0, -1.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn conv1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.conv1d(weight, bias, stride, padding, dilation, groups);
        }
        let conv = Conv::new(&[stride], &[padding], &[dilation], groups);
        self.conv_nd("conv1d", weight, bias, conv)
    }

    /// 2-d convolution of `self` `[N, C, H, W]` (or unbatched `[C, H, W]`)
    /// with `weight` `[O, C / groups, kH, kW]`, plus `bias` `[O]`:
    /// PyTorch's `F.conv2d`. `groups == C == O` is a depthwise
    /// convolution. The batch may be dynamic (`mark_dynamic(0, bound)`):
    /// one compiled program serves every batch size up to the bound.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((0..9).map(|v| v as f32).collect(), &[1, 1, 3, 3]).unwrap();
    /// let w = Tensor::from_vec(vec![1.0f32; 4], &[1, 1, 2, 2]).unwrap();
    /// let y = x.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1);
    /// assert_eq!(y.upper_bounds(), vec![1, 1, 2, 2]);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![8.0, 12.0, 20.0, 24.0]);
    /// ```
    #[track_caller]
    pub fn conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
    ) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.conv2d(weight, bias, stride, padding, dilation, groups);
        }
        let conv = Conv::new(
            &[stride.0, stride.1],
            &[padding.0, padding.1],
            &[dilation.0, dilation.1],
            groups,
        );
        self.conv_nd("conv2d", weight, bias, conv)
    }

    /// 2-d transposed convolution ("deconvolution") of `self` `[N, C, H,
    /// W]` (or unbatched) with `weight` `[C, O / groups, kH, kW]`, plus
    /// `bias` `[O]`: PyTorch's `F.conv_transpose2d`. The output is
    /// `(H - 1) * stride - 2 * padding + dilation * (kH - 1) +
    /// output_padding + 1` high (likewise wide); `output_padding` must be
    /// below the stride or the dilation. The batch may be dynamic.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 1, 1, 2]).unwrap();
    /// let w = Tensor::from_vec(vec![1.0f32, 10.0], &[1, 1, 1, 2]).unwrap();
    /// let y = x.conv_transpose2d(&w, None, (1, 2), (0, 0), (0, 0), (1, 1), 1);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 10.0, 2.0, 20.0]);
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        stride: (usize, usize),
        padding: (usize, usize),
        output_padding: (usize, usize),
        dilation: (usize, usize),
        groups: usize,
    ) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.conv_transpose2d(
                weight,
                bias,
                stride,
                padding,
                output_padding,
                dilation,
                groups,
            );
        }
        let conv = Conv::new(
            &[stride.0, stride.1],
            &[padding.0, padding.1],
            &[dilation.0, dilation.1],
            groups,
        );
        let extra = [output_padding.0, output_padding.1];
        self.conv_transpose_nd("conv_transpose2d", weight, bias, conv, &extra)
    }

    /// `self` and `weight` in their common dtype, and whether `self` was
    /// unbatched (then given a batch of 1).
    #[track_caller]
    fn conv_operands(&self, op: &'static str, weight: &Tensor, r: usize) -> (Tensor, Tensor, bool) {
        let dt = result_type(&[
            (self.dtype(), Priority::Dimensioned),
            (weight.dtype(), Priority::Dimensioned),
        ]);
        if !dt.is_float() {
            panic!(
                "{}",
                Error::dtype(
                    op,
                    format!(
                        "needs float operands, got input {}{} and weight {}{}; convert with to_dtype first",
                        self.dtype(),
                        self.shape_string(),
                        weight.dtype(),
                        weight.shape_string()
                    )
                )
            );
        }
        let unbatched = self.rank() == r + 1;
        let x = self.to_dtype(dt);
        let x = if unbatched { x.unsqueeze(0) } else { x };
        (x, weight.to_dtype(dt), unbatched)
    }

    #[track_caller]
    fn conv_nd(&self, op: &'static str, weight: &Tensor, bias: Option<&Tensor>, c: Conv) -> Tensor {
        let (x, w, unbatched) = self.conv_operands(op, weight, c.rank());
        let out_channels = w.upper_bounds().first().copied().unwrap_or(0);
        let y = x.convolution(&w, c, op);
        let y = y.add_channel_bias(op, bias, out_channels);
        if unbatched {
            y.squeeze(0)
        } else {
            y
        }
    }

    #[track_caller]
    fn conv_transpose_nd(
        &self,
        op: &'static str,
        weight: &Tensor,
        bias: Option<&Tensor>,
        c: Conv,
        output_padding: &[usize],
    ) -> Tensor {
        let r = c.rank();
        let (x, w, unbatched) = self.conv_operands(op, weight, r);
        let shapes = || format!("input {} and weight {}", x.shape_string(), w.shape_string());
        for (t, first) in [(&x, 1), (&w, 0)] {
            if let Some(dim) = (first..t.rank()).find(|&d| t.size(d).is_dynamic()) {
                let shape = t.shape_string();
                panic!("{}", Error::DynamicUnsupported { op, dim, shape });
            }
        }
        if x.rank() != r + 2 || w.rank() != r + 2 {
            fail(op, format!("needs a {}-d input [N, C, ..] (or {}-d unbatched) and a {}-d weight [C, O/groups, ..], got {}", r + 2, r + 1, r + 2, shapes()));
        }
        let (xs, ws) = (x.upper_bounds(), w.upper_bounds());
        let g = c.feature_groups;
        if g == 0 || ws[0] % g != 0 || xs[1] != ws[0] {
            fail(op, format!("the input's {} channels must equal the weight's dim 0 ({}), which groups {g} must divide ({}); the weight is [in, out/groups, ..]", xs[1], ws[0], shapes()));
        }
        let mut spatial = Vec::with_capacity(r);
        for s in 0..r {
            let (st, d, p, extra) = (
                c.stride[s],
                c.rhs_dilation[s],
                c.padding[s].0,
                output_padding[s],
            );
            if st == 0 || d == 0 || extra >= st.max(d) {
                fail(op, format!("spatial dim {s}: stride {st} and dilation {d} must be at least 1, and the output padding {extra} below one of them"));
            }
            let size = (xs[s + 2] as i64 - 1) * st as i64 - 2 * p
                + dilated(ws[s + 2] as i64, d)
                + extra as i64;
            if size < 1 || xs[s + 2] == 0 {
                fail(op, format!("spatial dim {s}: the output size (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1 = {size} is not positive ({}); use less padding", shapes()));
            }
            spatial.push(size as usize);
        }
        let y = x.conv_input_grad(&w, &c, &spatial, op);
        let y = y.add_channel_bias(op, bias, ws[1] * g);
        if unbatched {
            y.squeeze(0)
        } else {
            y
        }
    }

    /// `self` `[N, O, ..]` plus `bias` `[O]` on the channel dim.
    #[track_caller]
    fn add_channel_bias(&self, op: &'static str, bias: Option<&Tensor>, channels: usize) -> Tensor {
        let Some(b) = bias else {
            return self.clone();
        };
        if b.rank() != 1 || b.is_dynamic() || b.upper_bounds()[0] != channels {
            fail(
                op,
                format!(
                    "the bias must be [{channels}] (one value per output channel), got {}",
                    b.shape_string()
                ),
            );
        }
        let mut shape = vec![1i64; self.rank()];
        shape[1] = channels as i64;
        self + &b.to_dtype(self.dtype()).reshape(&shape)
    }

    /// `self` reversed along every dim from 2 (a kernel's spatial dims).
    #[track_caller]
    fn flip_spatial(&self) -> Tensor {
        let mut t = self.clone();
        for (d, &n) in self.upper_bounds().iter().enumerate().skip(2) {
            let iota = Op::Iota {
                dtype: crate::DType::I64,
                shape: smallvec::smallvec![crate::symint::SizeExpr::constant(n as i64)],
                dim: 0,
            };
            let iota = Tensor::try_apply_on(iota, &[], SmallVec::new(), self.device())
                .unwrap_or_else(|e| panic!("{e}"));
            t = t.index_select(d, &(n as i64 - 1 - &iota));
        }
        t
    }

    /// The transposed convolution of `self` (shaped as the output of the
    /// convolution `c` with weight `w`) back to an input of `spatial`
    /// sizes: the input gradient of `c` for the output gradient `self`.
    #[track_caller]
    pub(crate) fn conv_input_grad(
        &self,
        w: &Tensor,
        c: &Conv,
        spatial: &[usize],
        op: &'static str,
    ) -> Tensor {
        let (ws, gs) = (w.upper_bounds(), self.upper_bounds());
        let (o, i, r) = (ws[0], ws[1], c.rank());
        let kernel: Vec<i64> = ws[2..].iter().map(|&k| k as i64).collect();
        let groups = c.feature_groups.max(c.batch_groups);
        let shape = |head: &[usize]| -> Vec<i64> {
            head.iter()
                .map(|&d| d as i64)
                .chain(kernel.iter().copied())
                .collect()
        };
        // [O, I, K..] -> [G*I, O/G, K..], group-major, kernel flipped.
        let mut rhs = w.clone();
        if groups > 1 {
            rhs = rhs
                .reshape(&shape(&[groups, o / groups, i]))
                .transpose(0, 1);
            rhs = rhs.reshape(&shape(&[o / groups, groups * i]));
        }
        let rhs = rhs.transpose(0, 1).flip_spatial();
        let padding = (0..r)
            .map(|s| {
                let lhs = dilated(spatial[s] as i64, c.lhs_dilation[s]);
                let k = dilated(kernel[s], c.rhs_dilation[s]);
                let out = dilated(gs[s + 2] as i64, c.stride[s]);
                let before = k - c.padding[s].0 - 1;
                (before, lhs + k - 1 - out - before)
            })
            .collect();
        let t = Conv {
            stride: c.lhs_dilation.clone(),
            padding,
            lhs_dilation: c.stride.clone(),
            rhs_dilation: c.rhs_dilation.clone(),
            feature_groups: groups,
            batch_groups: 1,
        };
        let out = self.convolution(&rhs, t, op);
        if c.batch_groups == 1 {
            return out;
        }
        // [N/G, G*I, S..] -> [N/G, G, I, S..] -> [G, N/G, I, S..] -> [N, I, S..].
        let os = out.upper_bounds();
        let g = c.batch_groups;
        let rest: Vec<i64> = os[2..].iter().map(|&d| d as i64).collect();
        let split: Vec<i64> = [os[0], g, i]
            .iter()
            .map(|&d| d as i64)
            .chain(rest.iter().copied())
            .collect();
        let merged: Vec<i64> = [(g * os[0]) as i64, i as i64]
            .into_iter()
            .chain(rest)
            .collect();
        out.reshape(&split).transpose(0, 1).reshape(&merged)
    }

    /// The weight gradient of the convolution `c` of `x` with a weight of
    /// `kernel` sizes, for the output gradient `self`. A dynamic batch is
    /// padded with zeros, which add nothing.
    #[track_caller]
    pub(crate) fn conv_weight_grad(&self, x: &Tensor, kernel: &[usize], c: &Conv) -> Tensor {
        let (x, g) = (x.pad_to_bound(0.0), self.pad_to_bound(0.0));
        let plain = c.feature_groups == 1 && c.batch_groups == 1;
        if plain && c.stride.iter().all(|&s| s == 1) && c.lhs_dilation.iter().any(|&l| l > 1) {
            return g.weight_grad_over_dilated_input(&x, kernel, c);
        }
        let (xs, gs) = (x.upper_bounds(), g.upper_bounds());
        let padding = (0..c.rank())
            .map(|s| {
                let lo = c.padding[s].0;
                let lhs = dilated(xs[s + 2] as i64, c.lhs_dilation[s]);
                let k = dilated(kernel[s] as i64, c.rhs_dilation[s]);
                let out = dilated(gs[s + 2] as i64, c.stride[s]);
                (lo, out - lhs + k - lo - 1)
            })
            .collect();
        let t = Conv {
            stride: c.rhs_dilation.clone(),
            padding,
            lhs_dilation: c.lhs_dilation.clone(),
            rhs_dilation: c.stride.clone(),
            feature_groups: c.batch_groups,
            batch_groups: c.feature_groups,
        };
        x.transpose(0, 1)
            .convolution(&g.transpose(0, 1), t, "convolution")
            .transpose(0, 1)
    }

    /// [`Tensor::conv_weight_grad`] of a convolution with a dilated input
    /// (a transposed convolution), stride 1 and no groups, for the output
    /// gradient `self`: the output gradient slides over the input, whose
    /// dilation becomes the kernel's, and the result is flipped. The direct
    /// form dilates the input of the gradient's convolution, which XLA's CPU
    /// backend turns into a reversed window it runs as a naive loop (30% of
    /// the Mask R-CNN step for the mask head's 2x2 transposed convolution);
    /// this form runs in its convolution kernel.
    ///
    /// With `L` the input dilation, `D` the kernel dilation, `P` the low
    /// padding and `K` the kernel size, the gradient at kernel position
    /// `K - 1 - m` is `sum_j g[D m + L j + P - D (K - 1)] x[j]`.
    #[track_caller]
    fn weight_grad_over_dilated_input(&self, x: &Tensor, kernel: &[usize], c: &Conv) -> Tensor {
        let (xs, gs) = (x.upper_bounds(), self.upper_bounds());
        let r = c.rank();
        let padding = (0..r)
            .map(|s| {
                let (k, d) = (kernel[s] as i64, c.rhs_dilation[s] as i64);
                let lo = d * (k - 1) - c.padding[s].0;
                let len = (k - 1) * d + dilated(xs[s + 2] as i64, c.lhs_dilation[s]);
                (lo, len - gs[s + 2] as i64 - lo)
            })
            .collect();
        let t = Conv {
            stride: c.rhs_dilation.clone(),
            padding,
            lhs_dilation: vec![1; r],
            rhs_dilation: c.lhs_dilation.clone(),
            feature_groups: 1,
            batch_groups: 1,
        };
        self.transpose(0, 1)
            .convolution(&x.transpose(0, 1), t, "convolution")
            .flip_spatial()
    }

    /// The input gradient of the convolution `c` of `x` with `w`, for the
    /// output gradient `self` (zeros for an input without elements).
    #[track_caller]
    pub(crate) fn conv_input_grad_of(&self, x: &Tensor, w: &Tensor, c: &Conv) -> Tensor {
        let spatial = x.upper_bounds()[2..].to_vec();
        if spatial.contains(&0) {
            return x.zeros_like();
        }
        self.conv_input_grad(w, c, &spatial, "convolution")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{mark_step, no_grad, Device};

    /// The gradients of a convolution with batch groups (which only weight
    /// gradients of grouped convolutions make) against central
    /// differences, on the reference backend.
    #[test]
    fn batch_group_gradients_match_finite_differences() {
        Device::reference().scoped(|| {
            let conv = Conv {
                stride: vec![2],
                padding: vec![(1, 0)],
                lhs_dilation: vec![2],
                rhs_dilation: vec![1],
                feature_groups: 1,
                batch_groups: 2,
            };
            let xv: Vec<f64> = (0..24).map(|i| ((i * 7) % 11) as f64 / 4.0 - 1.0).collect();
            let wv: Vec<f64> = (0..16).map(|i| ((i * 5) % 9) as f64 / 4.0 - 1.0).collect();
            let loss = |x: &Tensor, w: &Tensor| {
                let y = x.convolution(w, conv.clone(), "test").flatten();
                let r = Tensor::arange(y.upper_bounds()[0] as i64).to_dtype(crate::DType::F64);
                (&y * &(r * 0.1 + 0.5)).sum()
            };
            let (xs, ws) = ([4usize, 2, 3], [4usize, 2, 2]);
            let x = Tensor::from_vec(xv.clone(), &xs)
                .unwrap()
                .requires_grad(true);
            let w = Tensor::from_vec(wv.clone(), &ws)
                .unwrap()
                .requires_grad(true);
            loss(&x, &w).backward();
            mark_step().unwrap();
            let numeric = |v: &[f64], at: &dyn Fn(Vec<f64>) -> f64| -> Vec<f64> {
                (0..v.len())
                    .map(|i| {
                        let (mut a, mut b) = (v.to_vec(), v.to_vec());
                        a[i] += 0.5;
                        b[i] -= 0.5;
                        at(a) - at(b)
                    })
                    .collect()
            };
            let eval = |x: Vec<f64>, w: Vec<f64>| {
                no_grad(|| {
                    let x = Tensor::from_vec(x, &xs).unwrap();
                    let w = Tensor::from_vec(w, &ws).unwrap();
                    loss(&x, &w).item::<f64>().unwrap()
                })
            };
            let dx = numeric(&xv, &|p| eval(p, wv.clone()));
            let dw = numeric(&wv, &|p| eval(xv.clone(), p));
            for (got, want) in [(x.grad(), dx), (w.grad(), dw)] {
                let got = got.unwrap().to_vec::<f64>().unwrap();
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-9, "{got:?} vs {want:?}");
                }
            }
        });
    }
}
