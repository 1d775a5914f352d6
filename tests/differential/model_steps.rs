//! The differential generator's model-op steps (see `differential.rs`):
//! each builds one op family on a pool operand, keeping values that decide
//! a result away from the points where the backends may differ by an ulp.

use super::{snapped, threshold};
use lazyxla::{DType, Tensor};

/// A pointwise model op on the float `x`. Ops that decide on a value
/// (clamps, rounding) see thresholds offset by 0.3 from the values exact
/// arithmetic produces, as comparisons do ([`threshold`]); softplus's
/// switch at 20 is continuous, so an ulp there changes nothing.
pub fn pointwise(x: &Tensor, k: u8) -> Tensor {
    match k {
        0 => x.clamp_min(threshold(0.0)),
        1 => x.clamp_max(threshold(1.0)),
        2 => x.clamp_tensor(&Tensor::scalar(threshold(-1.0) as f32), &(x.abs() + 1.3)),
        3 => x.silu(),
        4 => x.leaky_relu(0.25),
        5 => x.elu(0.5),
        6 => x.softplus(),
        7 => (x.abs() * 0.5).log1p(),
        8 => (x * 0.25).expm1(),
        9 => x.add_scalar(0.3).ceil(),
        10 => x.add_scalar(0.3).round(),
        11 => {
            // Integers (snapped) decide: NaN from log of a negative, -inf at 0.
            let l = snapped(x).log();
            l.isnan().logical_or(&l.isfinite())
        }
        _ => {
            // -inf from log of a snapped 0, +inf from an overflowing exp.
            let s = snapped(x);
            s.log().isinf().logical_or(&(&s * 40.0).exp().isinf())
        }
    }
}

/// A reduction of the float `x` along dim `d` (when it has one): the
/// Bool ones see the snapped copy.
pub fn stats(x: &Tensor, k: u8, d: u8) -> Tensor {
    let d = d as usize % x.rank().max(1);
    match k % 6 {
        0 => x.logsumexp(d, k >= 6),
        1 => x.var(d, k >= 6),
        2 => x.std(d, k >= 6),
        3 => x.prod(),
        4 => snapped(x).any(),
        _ => snapped(x).all(),
    }
}

/// A rearrangement or mask of `x` (any dtype), keeping the rank at most
/// 2; `v` picks the dim, shift, diagonal, fill, piece or index.
pub fn rearranged(x: &Tensor, k: u8, v: i8) -> Tensor {
    let r = x.rank();
    let d = v.unsigned_abs() as usize % r.max(1);
    match k {
        0 => x.flip(&[d]),
        1 => x.roll(v as i64, d),
        2 => x.pad(&[(1, 0), (0, 2)][..r.min(2)], v as f64),
        3 => {
            let mut reps = vec![1; r];
            reps[d] = 2 + (v as usize % 2);
            x.repeat(&reps)
        }
        4 => x.tril(v as i64),
        5 => x.triu(v as i64),
        6 => {
            let m = x.to_dtype(DType::F32).gt_scalar(threshold(v as f64));
            x.masked_fill(&m, v as f64)
        }
        7 => {
            // Panics along a dynamic dim (a fallback step runs instead).
            let pieces = if v % 2 == 0 {
                x.split(1 + v.unsigned_abs() as usize % 2, d)
            } else {
                x.chunk(2, d)
            };
            pieces[v.unsigned_abs() as usize % pieces.len()].clone()
        }
        9 => {
            // `[r, c]` to `[r * c, 1]` (a dynamic r gives a dynamic count).
            x.unsqueeze(r).flatten_dims(0, r.saturating_sub(1))
        }
        10 => {
            // A row (or element) from the front or the end; past a dynamic
            // dim's real size both backends fail the step alike.
            let picked = x.select(0, v as i64 % 3);
            if picked.rank() == 0 {
                picked.unsqueeze(0)
            } else {
                picked
            }
        }
        _ => {
            let ids = match x.dtype() {
                DType::F32 | DType::F64 => snapped(x).to_dtype(DType::I64),
                _ => x.to_dtype(DType::I64),
            };
            ids.flatten().one_hot(3)
        }
    }
}

/// Upsampling of `x` seen as NCHW as in `pooled`; the result is 2-D
/// again: `[H', W']`, or `[batch, H' * W']` for a dynamic batch.
pub fn upsampled(x: &Tensor, k: u8) -> Tensor {
    let (x4, batch) = match (x.rank(), x.is_dynamic()) {
        (2, false) => (x.unsqueeze(0).unsqueeze(0), false),
        (2, true) => (x.unsqueeze(1).unsqueeze(1), true),
        (1, false) => (x.unsqueeze(0).unsqueeze(0).unsqueeze(0), false),
        (1, true) => (x.unsqueeze(1).unsqueeze(1).unsqueeze(1), true),
        _ => panic!("upsampled: 1-D or 2-D operands only"),
    };
    let b = x4.upper_bounds();
    let (h, w) = (b[2], b[3]);
    let y = match k {
        0 => x4.upsample_nearest2d((2 * h, 2 * w)),
        1 => x4.upsample_nearest2d((h + 1, 2 * w + 1)),
        2 => x4.upsample_bilinear2d((h + 1, 2 * w), false),
        _ => x4.upsample_bilinear2d((2 * h, w + 2), true),
    };
    let out = y.upper_bounds();
    if batch {
        y.reshape_sym(&[y.size(0), ((out[2] * out[3]) as i64).into()])
    } else {
        y.squeeze(0).squeeze(0)
    }
}

/// `x` ([r, c], a vector as a column) against its transpose: `x . x^T`
/// (r free: dynamic free dims), `x^T . x` (r contracted), a batch of two
/// times `x` (`[2, c, r] . [r, c]`, the matrix not broadcast) or `x^T`
/// times a batch (`[c, r] . [2, r, c]`), the batch summed away; a dynamic
/// r is then contracted. Panics on a scalar, which falls back to a unary
/// step.
pub fn matmuls(x: &Tensor, k: u8) -> Tensor {
    let x = if x.rank() == 1 {
        x.unsqueeze(1)
    } else {
        x.clone()
    };
    let xt = x.transpose(0, 1);
    let batch = |t: &Tensor| Tensor::cat(&[&t.unsqueeze(0), &(t * 0.5).unsqueeze(0)], 0);
    match k {
        0 => x.matmul(&xt),
        1 => xt.matmul(&x),
        2 => batch(&xt).matmul(&x).sum_dims(&[0], false),
        _ => xt.matmul(&batch(&x)).sum_dims(&[0], false),
    }
}

/// A loss of the float `x` against a target made from `y` (the same rows)
/// as `nll_loss` and `binary_cross_entropy` compose them, each reduction
/// (`k % 3`): `nll_loss` of `x`'s log-softmax rows at classes from the
/// snapped `y` (rows whose snapped sum is negative ignored, PyTorch's
/// -100), or `binary_cross_entropy` of probabilities kept inside
/// (0.04, 0.96) (never at the clamp of the log) against `y`'s sigmoid or
/// its snapped sign.
pub fn losses(x: &Tensor, y: &Tensor, k: u8) -> Tensor {
    use lazyxla::nn::{binary_cross_entropy, nll_loss, Reduction};
    let reduction = [Reduction::Mean, Reduction::Sum, Reduction::None][k as usize % 3];
    // Over no classes no target is valid (PyTorch raises; the reference
    // fails its gather and XLA clamps it, as for any index out of range):
    // such an `x` gets the binary cross-entropy instead.
    let no_classes = x.rank() == 2 && x.upper_bounds()[1] == 0;
    match (k / 3) % 3 {
        0 if !no_classes => {
            assert!(x.rank() == 2 && !x.size(1).is_dynamic(), "rows of classes");
            let classes = x.upper_bounds()[1] as f64;
            let key = snapped(&y.sum_dims(&[1], false));
            let class = key
                .abs()
                .remainder(&Tensor::scalar(classes as f32))
                .to_dtype(DType::I64);
            let ignored = key.lt_scalar(threshold(-1.0));
            let target = ignored.where_cond(&class.full_like(-100.0), &class);
            nll_loss(&x.log_softmax(1), &target, reduction)
        }
        0 | 1 => {
            let p = &(&x.tanh() * 3.0).sigmoid() * 0.92 + 0.04;
            binary_cross_entropy(&p, &y.sigmoid(), reduction)
        }
        _ => {
            let p = &(&x.tanh() * 3.0).sigmoid() * 0.92 + 0.04;
            let t = snapped(y).gt_scalar(threshold(0.0)).to_dtype(DType::F32);
            binary_cross_entropy(&p, &t, reduction)
        }
    }
}
