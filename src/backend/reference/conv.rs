//! The reference convolution: a direct loop nest, written for clarity (the
//! oracle for XLA's `convolution`), accumulating in f64.

use super::kernels::Num;
use crate::ir::Conv;
use ndarray::{ArrayD, IxDyn};

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Every multi-index below `shape`, row-major.
fn positions(shape: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let total: usize = shape.iter().product();
    let st = strides(shape);
    (0..total).map(move |k| (0..shape.len()).map(|d| k / st[d] % shape[d]).collect())
}

/// `x [N, C, S..]` convolved with `w [O, C/groups, K..]` (see `ir::conv`).
/// Output position `p`, kernel position `k` read the dilated, padded
/// input at `j = p * stride + k * rhs_dilation - pad_low`, which is a real
/// element `j / lhs_dilation` when it lands on one, and zero otherwise.
pub(crate) fn convolution<T: Num>(x: &ArrayD<T>, w: &ArrayD<T>, c: &Conv) -> ArrayD<T> {
    let r = c.rank();
    let (xs, ws) = (x.shape(), w.shape());
    let (o_total, i_per) = (ws[0], ws[1]);
    let batch = xs[0] / c.batch_groups;
    let out_sp: Vec<usize> = (0..r)
        .map(|s| {
            c.out_size(s, xs[s + 2] as i64, ws[s + 2] as i64)
                .unwrap_or(0) as usize
        })
        .collect();
    let mut out_shape = vec![batch, o_total];
    out_shape.extend(&out_sp);
    let x = x.as_standard_layout();
    let w = w.as_standard_layout();
    let (xv, wv) = (
        x.as_slice().expect("standard layout"),
        w.as_slice().expect("standard layout"),
    );
    let (xst, wst) = (strides(xs), strides(ws));
    let kernel: Vec<usize> = ws[2..].to_vec();
    let per_feature_group = (o_total / c.feature_groups).max(1);
    let per_batch_group = (o_total / c.batch_groups).max(1);
    let mut out = Vec::with_capacity(out_shape.iter().product());
    for b in 0..batch {
        for o in 0..o_total {
            // The input channels and batch element this output channel sees.
            let c0 = o / per_feature_group * i_per;
            let n = o / per_batch_group * batch + b;
            for p in positions(&out_sp) {
                let mut acc = 0.0f64;
                for k in positions(&kernel) {
                    // The input offset of this kernel tap, if it is real.
                    let mut offset = n * xst[0];
                    let mut real = true;
                    for s in 0..r {
                        let j =
                            (p[s] * c.stride[s] + k[s] * c.rhs_dilation[s]) as i64 - c.padding[s].0;
                        let ld = c.lhs_dilation[s] as i64;
                        if j < 0 || j % ld != 0 || j / ld >= xs[s + 2] as i64 {
                            real = false;
                            break;
                        }
                        offset += (j / ld) as usize * xst[s + 2];
                    }
                    if !real {
                        continue;
                    }
                    let w_off: usize =
                        o * wst[0] + (0..r).map(|s| k[s] * wst[s + 2]).sum::<usize>();
                    for i in 0..i_per {
                        let a = xv[offset + (c0 + i) * xst[1]];
                        let b = wv[w_off + i * wst[1]];
                        acc += a.to_f64() * b.to_f64();
                    }
                }
                out.push(T::from_f64(acc));
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(&out_shape), out).expect("shape matches")
}
