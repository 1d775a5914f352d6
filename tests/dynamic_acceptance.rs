//! The acceptance cases of issue 3, written as a user would: dynamic
//! zones started by `nonzero`, `masked_select`, `unique` and
//! `mark_dynamic`, sizes printed with bounds, real values, one compile
//! per structure, and clear errors.

mod common;

use common::Lcg;
use common::{assert_close, panic_message};
use lazyxla::{mark_step, metrics, DType, Tensor};

backend_test! {
    fn nonzero_sizes_print_bounds_and_arithmetic_follows() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 0.0, 1.0, 3.0], &[5]).unwrap();
        let b = a.nonzero();
        assert_eq!(b.dtype(), DType::I64);
        assert_eq!(b.size(0).to_string(), "<=5");
        assert_eq!(b.size(1).to_string(), "1");
        assert!(b.is_dynamic());
        assert_eq!(b.upper_bounds(), vec![5, 1]);
        let d = &b * 2 + 1;
        assert_eq!(d.dtype(), DType::I64);
        assert_eq!(d.size(0).to_string(), "<=5");
        let v = d.to_ndarray::<i64>().unwrap();
        assert_eq!(v.shape(), &[4, 1]);
        assert_eq!(d.to_vec::<i64>().unwrap(), vec![1, 3, 7, 9]);
        assert_eq!(d.size(0).materialize().unwrap(), 4);
        assert_eq!(b.concrete_shape().unwrap(), vec![4, 1]);
    }
}

backend_test! {
    fn masked_select_keeps_the_selected_values() {
        let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 0.0, 3.0, 4.0], &[6]).unwrap();
        let y = x.masked_select(&x.ge_scalar(2.0));
        assert_eq!(y.size(0).to_string(), "<=6");
        assert_eq!(y.dtype(), DType::F32);
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
        assert_eq!(y.size(0).materialize().unwrap(), 3);
    }
}

backend_test! {
    fn nonzero_of_a_matrix_broadcasts_with_static_size_one_dims() {
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 3.0, 5.0, 0.0, 6.0], &[1, 6]).unwrap();
        let nz = x.nonzero();
        assert_eq!(nz.shape_string(), "[<=6, 2]");
        assert_eq!(nz.upper_bounds(), vec![6, 2]);
        assert_eq!(nz.to_vec::<i64>().unwrap(), vec![0, 0, 0, 2, 0, 3, 0, 5]);
        assert_eq!(nz.concrete_shape().unwrap(), vec![4, 2]);
        let ones = Tensor::ones(&[1, 2], DType::I64);
        let r = &nz + &ones;
        assert_eq!(r.shape_string(), "[<=6, 2]");
        assert_eq!(r.to_ndarray::<i64>().unwrap().shape(), &[4, 2]);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 1, 1, 3, 1, 4, 1, 6]);
        // 4 rows against 2: checked when the program runs.
        let e = (&nz + &Tensor::ones(&[2, 2], DType::I64)).to_vec::<i64>().unwrap_err().to_string();
        assert!(e.starts_with("add") && e.contains("they are 2 and 4"), "{e}");
        assert!(e.contains("pad_to_bound"), "the message should give the way out: {e}");
        // 7 rows can never fit the bound 6: an error at once.
        let msg = panic_message(|| {
            let _ = &nz + &Tensor::ones(&[7, 2], DType::I64);
        });
        assert!(msg.starts_with("add"), "{msg}");
        assert!(msg.contains("[<=6, 2]") && msg.contains("[7, 2]"), "{msg}");
        assert!(msg.contains("pad_to_bound(fill)"), "the message should give the way out: {msg}");
        // The runtime is fine afterwards.
        assert_eq!(r.sum().item::<i64>().unwrap(), 18);
    }
}

backend_test! {
    fn seed_example_compiles_once_over_thirty_inputs() {
        let mut g = Lcg(12345);
        for step in 0..30 {
            let bits: Vec<f32> = (0..25).map(|_| (g.next() % 2) as f32).collect();
            let t1 = Tensor::from_vec(bits.clone(), &[5, 5]).unwrap();
            let t2 = t1.nonzero();
            let t3 = t2.pow(2.0);
            let t4 = t3.sum();
            let t5 = &t4 + 2.0;
            assert!(t2.is_dynamic() && t3.is_dynamic(), "step {step}");
            assert!(!t4.is_dynamic() && !t5.is_dynamic(), "step {step}");
            assert_eq!(t2.size(0).to_string(), "<=25");
            assert_eq!(t3.shape_string(), "[<=25, 2]");
            mark_step().unwrap();
            let want: f32 = bits
                .iter()
                .enumerate()
                .filter(|(_, &b)| b != 0.0)
                .map(|(i, _)| ((i / 5) * (i / 5) + (i % 5) * (i % 5)) as f32)
                .sum::<f32>()
                + 2.0;
            assert_eq!(t5.item::<f32>().unwrap(), want, "step {step}");
            let count = bits.iter().filter(|&&b| b != 0.0).count();
            assert_eq!(t2.to_vec::<i64>().unwrap().len(), 2 * count, "step {step}");
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        assert_eq!(metrics::counter("CachedCompile"), 29, "{}", metrics::report());
    }
}

backend_test! {
    fn unique_with_counts() {
        let x = Tensor::from_vec(vec![3i64, 1, 3, 2, 1], &[5]).unwrap();
        let u = x.unique();
        assert_eq!(u.size(0).to_string(), "<=5");
        assert_eq!(u.dtype(), DType::I64);
        assert_eq!(u.to_vec::<i64>().unwrap(), vec![1, 2, 3]);
        let (v, c) = x.unique_with_counts();
        assert_eq!(c.dtype(), DType::I64);
        assert_eq!(v.to_vec::<i64>().unwrap(), vec![1, 2, 3]);
        assert_eq!(c.to_vec::<i64>().unwrap(), vec![2, 1, 2]);
        // Values and counts share one size: they combine elementwise.
        let weighted = (&v * &c).sum();
        assert_eq!(weighted.item::<i64>().unwrap(), 2 + 2 + 6);
        // Floats and matrices too (flattened).
        let f = Tensor::from_vec(vec![0.5f32, -1.0, 0.5, 0.5], &[2, 2]).unwrap();
        let (fv, fc) = f.unique_with_counts();
        assert_eq!(fv.size(0).to_string(), "<=4");
        assert_eq!(fv.to_vec::<f32>().unwrap(), vec![-1.0, 0.5]);
        assert_eq!(fc.to_vec::<i64>().unwrap(), vec![1, 3]);
    }
}

backend_test! {
    fn variable_length_batches_compile_once() {
        let mut g = Lcg(99);
        let mut lengths: Vec<usize> = (0..18).map(|_| 1 + (g.next() % 64) as usize).collect();
        lengths.push(1);
        lengths.push(64);
        for (step, &len) in lengths.iter().enumerate() {
            let host: Vec<f32> = (0..len * 3).map(|i| ((i * 7 + step) % 11) as f32 - 5.0).collect();
            let x = Tensor::from_vec(host.clone(), &[len, 3]).unwrap().mark_dynamic(0, 64);
            assert_eq!(x.size(0).to_string(), "<=64");
            let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).unwrap();
            let y = (&x * &w + 1.0).relu().sum_dims(&[1], false); // [<=64]
            let total = y.sum();
            mark_step().unwrap();
            let rows: Vec<f32> = host
                .chunks(3)
                .map(|r| {
                    r.iter()
                        .zip([0.5f32, -1.0, 2.0])
                        .map(|(a, b)| (a * b + 1.0).max(0.0))
                        .sum::<f32>()
                })
                .collect();
            assert_close(&y.to_vec::<f32>().unwrap(), &rows, 1e-6);
            assert_close(&[total.item::<f32>().unwrap()], &[rows.iter().sum()], 1e-5);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        // Length 65 is above the bound: a clear error, never a truncation.
        let long = Tensor::from_vec(vec![0.0f32; 65 * 3], &[65, 3]).unwrap();
        let e = long.try_mark_dynamic(0, 64).unwrap_err().to_string();
        assert!(e.contains("mark_dynamic") && e.contains("dimension 0") && e.contains("65") && e.contains("64"), "{e}");
        let msg = panic_message(|| {
            let _ = long.mark_dynamic(0, 64);
        });
        assert_eq!(msg, e);
    }
}

backend_test! {
    fn size_arithmetic_on_two_nonzero_results() {
        let mut host = vec![0.0f32; 100];
        host[37] = 1.0;
        let x = Tensor::from_vec(host, &[10, 10]).unwrap();
        let a = x.nonzero(); // [<=100, 2], one row
        let b = x.gt_scalar(0.5).nonzero(); // another zone, same values
        let s = a.size(0) + a.size(1);
        assert_eq!(s.to_string(), "<=102");
        assert_eq!(s.upper_bound(), 102);
        assert_eq!(s.lower_bound(), 2);
        assert_eq!(s.materialize().unwrap(), 3);
        let t = a.size(0) + b.size(1);
        assert_eq!(t.to_string(), "<=102");
        assert_eq!(t.materialize().unwrap(), 3);
        let u = a.size(0) + b.size(0);
        assert_eq!(u.to_string(), "<=200");
        assert_eq!(u.materialize().unwrap(), 2);
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![3, 7]);
    }
}

backend_test! {
    fn a_zone_whose_order_nothing_observes_is_lowered_as_a_mask() {
        // The detector's box loss in small: rows picked by `nonzero`, a
        // product and a mean over them, and its gradient. Nothing reads
        // the rows, so XLA computes them in place under the mask: no
        // prefix sum, no scatter. Reading the selection packs it.
        let fv = [1.0f32, 2.0, -1.0, 0.5, 3.0, -2.0, 0.0, 1.5, -0.5, 4.0];
        let wv = [0.5f32, -1.0, 2.0, 0.25];
        let w = Tensor::from_vec(wv.to_vec(), &[2, 2]).unwrap().requires_grad(true);
        let f = Tensor::from_vec(fv.to_vec(), &[5, 2]).unwrap();
        let rows_of = |f: &Tensor| {
            let keep = f.sum_dims(&[1], false).gt_scalar(0.25);
            f.index_select(0, &keep.nonzero().flatten())
        };
        let loss = rows_of(&f).matmul(&w).square().mean();
        loss.backward();
        let g = w.grad().expect("a gradient");
        let masked = lazyxla::debug::stablehlo_text(&[&loss, &g]).unwrap();
        assert!(!masked.contains("scatter"), "{masked}");
        assert!(!masked.contains("reduce_window"), "{masked}");
        mark_step().unwrap();
        let rows = rows_of(&f);
        let packed = lazyxla::debug::stablehlo_text(&[&rows]).unwrap();
        assert!(packed.contains("scatter"), "{packed}");
        // Rows whose sum exceeds 0.25: 0, 2, 3 and 4.
        let kept: Vec<[f32; 2]> = fv
            .chunks(2)
            .map(|r| [r[0], r[1]])
            .filter(|r| r[0] + r[1] > 0.25)
            .collect();
        assert_eq!(kept.len(), 4);
        let n = (kept.len() * 2) as f32;
        let (mut want, mut grad) = (0.0f32, [0.0f32; 4]);
        for r in &kept {
            for j in 0..2 {
                let y = r[0] * wv[j] + r[1] * wv[2 + j];
                want += y * y / n;
                grad[j] += 2.0 * y * r[0] / n;
                grad[2 + j] += 2.0 * y * r[1] / n;
            }
        }
        assert_close(&loss.to_vec::<f32>().unwrap(), &[want], 1e-5);
        assert_close(&g.to_vec::<f32>().unwrap(), &grad, 1e-5);
        let flat: Vec<f32> = kept.iter().flatten().copied().collect();
        assert_eq!(rows.to_vec::<f32>().unwrap(), flat);
    }
}

/// `got` equals `want` elementwise: the same value (infinities included),
/// both NaN, or within `tol` (absolute + relative).
fn assert_same(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "element {i}: got {g}, want {w} (got {got:?})");
    }
}

backend_test! {
    fn a_weight_gradient_over_a_zone_ignores_what_the_unselected_rows_hold() {
        // A layer applied to the rows a zone selects, as the detector's box
        // head: its weight gradient contracts the zone, and the rows left
        // out (the zone's padding when it is lowered as a mask) may hold
        // anything. Large enough that the product zeroes only the gradient
        // side and checks its result (lower/guarded.rs): infinities and NaN
        // outside the zone must not reach it, inside they must.
        const ROWS: usize = 512;
        const F: usize = 8;
        let wv: Vec<f32> = (0..F * 2).map(|k| 0.25 * (k as f32) - 1.5).collect();
        let score: Vec<f32> = (0..ROWS).map(|i| (i % 3 == 0) as u8 as f32).collect();
        let base: Vec<f32> = (0..ROWS * F)
            .map(|k| ((k / F * 7 + k % F * 3) % 11) as f32 * 0.1 - 0.5)
            .collect();
        // (loss, weight gradient) on `f`, and the program's text.
        let run = |f: &[f32]| {
            let w = Tensor::from_vec(wv.clone(), &[F, 2]).unwrap().requires_grad(true);
            let x = Tensor::from_vec(f.to_vec(), &[ROWS, F]).unwrap();
            let s = Tensor::from_vec(score.clone(), &[ROWS]).unwrap();
            // The rows dropped before the step: a live one is a result,
            // which packs the zone.
            let loss = {
                let rows = x.index_select(0, &s.gt_scalar(0.5).nonzero().flatten());
                rows.matmul(&w).square().mean()
            };
            loss.backward();
            let g = w.grad().expect("a gradient");
            let text = lazyxla::debug::stablehlo_text(&[&loss, &g]).unwrap();
            mark_step().unwrap();
            (loss.to_vec::<f32>().unwrap(), g.to_vec::<f32>().unwrap(), text)
        };
        // The same in f32 on the host, over the selected rows only.
        let want = |f: &[f32]| {
            let kept: Vec<&[f32]> = (0..ROWS)
                .filter(|&i| score[i] > 0.5)
                .map(|i| &f[i * F..(i + 1) * F])
                .collect();
            let n = (kept.len() * 2) as f32;
            let (mut loss, mut grad) = (0.0f32, vec![0.0f32; F * 2]);
            for r in &kept {
                for j in 0..2 {
                    let y: f32 = (0..F).map(|k| r[k] * wv[k * 2 + j]).sum();
                    loss += y * y / n;
                    for k in 0..F {
                        grad[k * 2 + j] += 2.0 * y * r[k] / n;
                    }
                }
            }
            (vec![loss], grad)
        };
        let (loss, g, text) = run(&base);
        assert!(text.contains("stablehlo.if"), "{text}");
        let (wl, wg) = want(&base);
        assert_same(&loss, &wl, 1e-4);
        assert_same(&g, &wg, 1e-4);
        // Infinities and NaN in rows the zone leaves out: the same result.
        let mut poisoned = base.clone();
        for i in (0..ROWS).filter(|i| i % 3 != 0) {
            poisoned[i * F + i % F] = [f32::INFINITY, f32::NAN, f32::NEG_INFINITY][i % 3];
        }
        let (loss, g, _) = run(&poisoned);
        assert_same(&loss, &wl, 1e-4);
        assert_same(&g, &wg, 1e-4);
        assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
        // An infinity in a selected row reaches the loss and the gradient.
        poisoned[3 * F + 4] = f32::INFINITY;
        let (loss, g, _) = run(&poisoned);
        let (wl, wg) = want(&poisoned);
        assert!(!wg.iter().all(|v| v.is_finite()));
        assert_same(&loss, &wl, 1e-4);
        assert_same(&g, &wg, 1e-4);
    }
}

/// Sums, maxima and minima over the rows a zone selects, by column, of a
/// `[12, 3]` tensor of `T` whose other rows hold `extremes`: the program
/// text (it must not pack the zone) and the three results.
fn zone_reductions<T: lazyxla::Element + Copy>(
    base: &[T],
    extremes: [T; 3],
) -> (String, Vec<T>, Vec<T>, Vec<T>) {
    let mut data = base.to_vec();
    for i in (0..12).filter(|i| i % 3 != 0) {
        for j in 0..3 {
            data[i * 3 + j] = extremes[(i + j) % 3];
        }
    }
    let x = Tensor::from_vec(data, &[12, 3]).unwrap();
    let score: Vec<f32> = (0..12).map(|i| (i % 3 == 0) as u8 as f32).collect();
    let keep = Tensor::from_vec(score, &[12]).unwrap().gt_scalar(0.5);
    let (s, hi, lo) = {
        let rows = x.index_select(0, &keep.nonzero().flatten());
        (
            // An integer sum is i64, as in PyTorch.
            rows.sum_dims(&[0], false).to_dtype(rows.dtype()),
            rows.max_dims(&[0], false),
            rows.min_dims(&[0], false),
        )
    };
    let text = lazyxla::debug::stablehlo_text(&[&s, &hi, &lo]).unwrap();
    mark_step().unwrap();
    let read = |t: &Tensor| t.to_vec::<T>().unwrap();
    (text, read(&s), read(&hi), read(&lo))
}

backend_test! {
    fn reductions_over_a_zone_lowered_as_a_mask_ignore_the_rows_it_leaves_out() {
        // The zone's padding is the rows the mask leaves out, holding the
        // user's data; the fill that replaces it (0 for a sum, the lowest
        // value for a max, the highest for a min) is written through the
        // mask's bits, for floats and integers of both widths alike.
        let base: Vec<f64> = (0..36).map(|k| ((k * 7) % 11) as f64 - 5.0).collect();
        let kept = |col: usize| -> Vec<f64> { (0..12).step_by(3).map(|i| base[i * 3 + col]).collect() };
        let fold = |f: fn(f64, f64) -> f64, init: f64| -> Vec<f64> {
            (0..3).map(|j| kept(j).into_iter().fold(init, f)).collect()
        };
        let (sum, max, min) = (
            fold(|a, b| a + b, 0.0),
            fold(f64::max, f64::NEG_INFINITY),
            fold(f64::min, f64::INFINITY),
        );
        let as_f32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
        let b32 = as_f32(&base);
        let (text, s, hi, lo) =
            zone_reductions(&b32, [f32::INFINITY, f32::NAN, f32::NEG_INFINITY]);
        assert!(!text.contains("scatter"), "{text}");
        assert!(text.contains("stablehlo.bitcast_convert"), "{text}");
        assert_eq!((s, hi, lo), (as_f32(&sum), as_f32(&max), as_f32(&min)));
        let (_, s, hi, lo) = zone_reductions(&base, [f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
        assert_eq!((s, hi, lo), (sum.clone(), max.clone(), min.clone()));
        let as_i = |v: &[f64]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
        let bi: Vec<i64> = as_i(&base);
        let (_, s, hi, lo) = zone_reductions(&bi, [i64::MAX, i64::MIN, 1 << 40]);
        assert_eq!((s, hi, lo), (as_i(&sum), as_i(&max), as_i(&min)));
        let b32i: Vec<i32> = bi.iter().map(|&x| x as i32).collect();
        let (_, s, hi, lo) = zone_reductions(&b32i, [i32::MAX, i32::MIN, -7]);
        let as_i32 = |v: &[f64]| v.iter().map(|&x| x as i32).collect::<Vec<_>>();
        assert_eq!((s, hi, lo), (as_i32(&sum), as_i32(&max), as_i32(&min)));
    }
}
