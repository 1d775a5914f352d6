//! The differential generator's vision step (see `differential.rs`):
//! boxes built from a snapped per-row key of a pool operand, so that
//! every coordinate is a small binary fraction and the decisions inside
//! the ops (a sample inside the map or not, an adaptive grid's size, the
//! sort by score, an IoU above the threshold) are exact on both backends.

use super::snapped;
use lazyxla::{vision, DType, Tensor};

/// One value per row of `x` (a scalar as one row): integers in [-8, 8]
/// (NaN stays NaN), as F32.
fn key(x: &Tensor) -> Tensor {
    let x = x.to_dtype(DType::F32);
    let k = match x.rank() {
        0 => x.unsqueeze(0),
        1 => x,
        _ => x.flatten().unsqueeze(1).sum_dims(&[1], false),
    };
    snapped(&k).clamp(-8.0, 8.0)
}

/// `[n, 4]` boxes (x1 < x2, y1 < y2 for a number key) from a key `[n]`.
fn boxes(k: &Tensor) -> Tensor {
    let x1 = k * 0.5;
    let y1 = k * 0.25 - 1.0;
    let x2 = &x1 + &(k.abs() * 0.25 + 1.5);
    let y2 = &y1 + 2.0;
    Tensor::stack(&[&x1, &y1, &x2, &y2], 1)
}

/// `box_iou`, `roi_align` (fixed or adaptive grid, aligned or not), or
/// `nms`/`batched_nms` (scores: the key, so ties are common), on boxes
/// from `x`'s rows; the result is 1-D or 2-D.
pub fn vision(x: &Tensor, kind: u8) -> Tensor {
    let k = key(x);
    let b = boxes(&k);
    match kind % 3 {
        2 => {
            let scores = &k * -0.5;
            if kind & 4 == 0 {
                vision::nms(&b, &scores, 0.25)
            } else {
                let classes = (&k.abs() - &(&k.abs() * 0.5).floor() * 2.0).to_dtype(DType::I64);
                vision::batched_nms(&b, &scores, &classes, 0.25)
            }
        }
        0 => {
            let fixed =
                Tensor::from_vec(vec![0.0f32, -1.0, 2.0, 1.0, -2.0, 0.0, 0.5, 0.5], &[2, 4])
                    .unwrap();
            if kind & 2 == 0 {
                vision::box_iou(&b, &fixed)
            } else {
                vision::box_iou(&fixed, &b)
            }
        }
        _ => {
            let feats = (Tensor::arange(2 * 2 * 5 * 6).to_dtype(DType::F32) * 0.25 - 3.0)
                .reshape(&[2, 2, 5, 6]);
            let batch = (&k.abs() - &(&k.abs() * 0.5).floor() * 2.0).unsqueeze(1); // key mod 2
            let rois = Tensor::cat(&[&batch, &(&b * 2.0)], 1);
            let sampling = if kind & 2 == 0 { 2 } else { 0 };
            let out = vision::roi_align(&feats, &rois, (2, 3), 0.5, sampling, kind & 4 != 0);
            out.reshape_sym(&[out.size(0), 12i64.into()])
        }
    }
}
