//! The differential generator's device-loop step (see `differential.rs`):
//! `fori_loop` and `while_loop` over a pool operand, with static carries,
//! a data-dependent trip count, a carry that shrinks and one that grows
//! (sometimes past its bound, which fails the step alike on both
//! backends), and loops whose bodies are drawn from a small op set over
//! a static or a dynamic carry. Values that decide a size or a trip count
//! are snapped.

use super::{snapped, threshold};
use lazyxla::{fori_loop, scan, while_loop, DType, Tensor};

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

/// A `fori_loop` of 3 iterations whose body applies `ops` to the carry in
/// turn: the operand itself, or (`dynamic`) its snapped-positive elements,
/// a carry whose size may change in every iteration. Each op: 0 tanh, 1
/// sine, 2 halving, 3 plus the counter, 4 times the captured mean, 5 a
/// softmax, 6 a reversal, 7 a cumulative sum; on a dynamic carry, 8..12
/// keep the elements above a snapped threshold (it shrinks), else they
/// square their tanh (a bare square, nine times over, raised the carry
/// to the 512th power, which grew tanh's ulp past the tolerance).
pub fn looped_body(x: &Tensor, dynamic: bool, ops: &[u8]) -> Tensor {
    let init = match dynamic {
        true => {
            let v = x.flatten();
            v.masked_select(&snapped(&v).gt_scalar(threshold(-3.0)))
        }
        false => x.clone(),
    };
    let mean = x.mean();
    let out = fori_loop(3, std::slice::from_ref(&init), |i, c| {
        let mut v = c[0].clone();
        let fi = i.to_dtype(DType::F32);
        for &op in ops {
            v = match op {
                0 => v.tanh(),
                // sin of a bounded argument: sin turns an argument's
                // relative rounding into an absolute error in its result,
                // which the loop's products (`4`, `9`) can grow past the
                // tolerance (sin(300) differed by 1e-4 between XLA and libm).
                1 => (&v.tanh() * 3.0).sin(),
                2 => &v * 0.5,
                3 => &v + &fi,
                4 => &v * &mean,
                5 => v.softmax(v.rank() - 1),
                6 => v.flip(&[0]),
                7 => v.cumsum(0),
                _ if v.is_dynamic() => {
                    let t = threshold(op as f64 - 10.0);
                    v.masked_select(&snapped(&v).gt_scalar(t))
                }
                _ => v.tanh().square(),
            };
        }
        vec![v]
    });
    out[0].clone()
}

/// A `scan` over the float `x`: `k % 3` picks the body (0 a running
/// tanh recurrence, 1 a running sum that also stacks the counter, 2 a
/// running product with a captured mean), `k / 3` the rows: those of `x`
/// (a static count, or the dynamic one of a dynamic `x`), or its
/// snapped-positive elements, a dynamic count, with the stacked outputs
/// cut to their first half by `slice_sym`.
pub fn scanned(x: &Tensor, k: u8) -> Tensor {
    let xs = match k / 3 {
        0 => match x.rank() == 2 && !x.size(1).is_dynamic() {
            true => x.clone(),
            false => x.flatten().unsqueeze(1),
        },
        _ => {
            let v = x.flatten();
            v.masked_select(&snapped(&v).gt_scalar(threshold(-1.0)))
                .unsqueeze(1)
        }
    };
    let n = xs.size(0);
    let cols = xs.upper_bounds()[1];
    let mean = x.mean();
    let init = Tensor::zeros(&[cols], DType::F32);
    let (fin, ys) = scan(&n, &[init], std::slice::from_ref(&xs), |i, c, r| {
        let fi = i.to_dtype(DType::F32);
        let h = match k % 3 {
            0 => (&(&c[0] * 0.5) + &r[0]).tanh(),
            1 => &(&c[0] + &r[0]) + &fi,
            _ => &(&c[0] * &mean) + &(&r[0] * 0.5),
        };
        (vec![h.clone()], vec![&h * 2.0])
    });
    let half = n.div_floor(2);
    let head = ys[0].slice_sym(0, 0, &half);
    &head.sum() + &fin[0].sum()
}
