//! The differential generator's device-loop step (see `differential.rs`):
//! `fori_loop` and `while_loop` over a pool operand, with static carries,
//! a data-dependent trip count, a carry that shrinks and one that grows
//! (sometimes past its bound, which fails the step alike on both
//! backends). Values that decide a size or a trip count are snapped.

use super::{snapped, threshold};
use lazyxla::{fori_loop, while_loop, DType, Tensor};

/// A loop over the float `x`; `k` picks the kind.
pub fn looped(x: &Tensor, k: u8) -> Tensor {
    match k % 4 {
        // A static count, the operand captured, the counter used.
        0 => {
            let out = fori_loop(3, std::slice::from_ref(x), |i, c| {
                vec![&(&c[0] * 0.5) + &(x * &i.to_dtype(DType::F32))]
            });
            out[0].clone()
        }
        // As many halvings as the snapped sum allows, at most 4.
        1 => {
            let out = while_loop(
                &[x.clone(), Tensor::scalar(0i64)],
                |c| {
                    let big = snapped(&c[0]).sum().gt_scalar(threshold(0.0));
                    c[1].lt_scalar(4.0).logical_and(&big)
                },
                |c| vec![&(&c[0] * 0.5) - 0.25, &c[1] + 1],
            );
            &out[0] + &out[1].to_dtype(DType::F32)
        }
        // A dynamic carry that keeps its positive (snapped) elements,
        // doubled, twice: its size changes in each iteration.
        2 => {
            let v = x.flatten();
            let v = v.masked_select(&snapped(&v).gt_scalar(threshold(-2.0)));
            let out = while_loop(
                &[v, Tensor::scalar(0i64)],
                |c| c[1].lt_scalar(2.0),
                |c| {
                    let keep = snapped(&c[0]).gt_scalar(threshold(-1.0));
                    vec![&c[0].masked_select(&keep) * 2.0, &c[1] + 1]
                },
            );
            out[0].clone()
        }
        // A list of rows that grows by one per iteration, three times,
        // within a bound of 2 or 3 rows: a bound of 2 fails the step.
        _ => {
            let x2 = match x.rank() {
                2 => x.pad_to_bound(0.0),
                _ => x.flatten().pad_to_bound(0.0).unsqueeze(0),
            };
            let cols = x2.upper_bounds()[1];
            let bound = 2 + (k as usize / 4) % 2;
            let empty = Tensor::from_vec(Vec::<f32>::new(), &[0, cols])
                .unwrap()
                .mark_dynamic(0, bound);
            let row = x2.sum_dims(&[0], true);
            let out = fori_loop(3, &[empty], |i, c| {
                let r = &row * &i.to_dtype(DType::F32);
                vec![Tensor::cat(&[&c[0], &r], 0).with_bound(0, bound)]
            });
            out[0].clone()
        }
    }
}
