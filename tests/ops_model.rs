//! Model ops against host computations, one body per backend: clamps and
//! activations, rounding and float classes; `logsumexp`, `var`, `std`,
//! `prod`, `any`, `all`; `masked_fill`, `tril`, `triu`, `one_hot`;
//! `pad`, `split`, `chunk`, `repeat`, `flip`, `roll`; nearest and
//! bilinear upsampling. Values and gradients, on static inputs and on
//! dynamic ones (from `masked_select` or `mark_dynamic`, whose padding
//! must never reach a result), and the errors of misuse.

mod common;

use common::panic_message;
use lazyxla::{mark_step, metrics, DType, Tensor};

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn grad(x: &Tensor) -> Vec<f32> {
    x.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

/// Weights 1, 2, .. for a tensor of `n` elements, so a gradient that
/// lands on the wrong element shows.
fn ramp(n: usize, shape: &[usize]) -> Tensor {
    f32s(&(1..=n).map(|i| i as f32).collect::<Vec<_>>(), shape)
}

/// `got` equals `want` elementwise: the same value (infinities
/// included), both NaN, or within `tol` (absolute + relative).
fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "got {got:?}, want {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(
            ok,
            "element {i}: got {g}, want {w} (got {got:?}, want {want:?})"
        );
    }
}

const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;

backend_test! {
    fn pointwise_values_match_host() {
        let v = [-30.0f32, -2.5, -1.0, -0.0, 0.0, 0.5, 1.5, 2.5, 20.0, 25.0, NAN, INF, -INF];
        let x = f32s(&v, &[v.len()]);
        let host = |f: &dyn Fn(f64) -> f64| -> Vec<f32> { v.iter().map(|&a| f(a as f64) as f32).collect() };
        let sig = |a: f64| 1.0 / (1.0 + (-a).exp());
        let clamp_lo = |a: f64| if a < 0.0 { 0.0 } else { a };
        assert_close(&vals(&x.clamp_min(0.0)), &host(&clamp_lo), 0.0);
        assert_close(&vals(&x.clamp_max(1.0)), &host(&|a| if a > 1.0 { 1.0 } else { a }), 0.0);
        assert!(vals(&x.clamp_min(f64::NAN)).iter().all(|a| a.is_nan()));
        assert_close(&vals(&x.silu()), &host(&|a| a * sig(a)), 1e-6);
        assert_close(&vals(&x.leaky_relu(0.1)), &host(&|a| if a > 0.0 { a } else { a * 0.1 }), 1e-6);
        assert_close(&vals(&x.elu(1.5)), &host(&|a| if a > 0.0 { a } else { 1.5 * a.exp_m1() }), 1e-6);
        assert_close(&vals(&x.softplus()), &host(&|a| if a > 20.0 { a } else { a.exp().ln_1p() }), 1e-6);
        assert_close(&vals(&x.log1p()), &host(&f64::ln_1p), 1e-6);
        assert_close(&vals(&x.expm1()), &host(&f64::exp_m1), 1e-6);
        assert_close(&vals(&x.ceil()), &host(&f64::ceil), 0.0);
        assert_close(&vals(&x.round()), &host(&f64::round_ties_even), 0.0);
        let nan: Vec<bool> = v.iter().map(|a| a.is_nan()).collect();
        let finite: Vec<bool> = v.iter().map(|a| a.is_finite()).collect();
        assert_eq!(x.isnan().to_vec::<bool>().unwrap(), nan);
        assert_eq!(x.isfinite().to_vec::<bool>().unwrap(), finite);
        // Tiny arguments keep their precision (1 + 1e-10 is 1 in f32).
        let tiny = f32s(&[1e-10, -3e-9], &[2]);
        assert_close(&vals(&tiny.log1p()), &[1e-10, -3e-9], 1e-5);
        assert_close(&vals(&tiny.expm1()), &[1e-10, -3e-9], 1e-5);
        // Integers: rounding keeps them, classification is constant,
        // clamps and activations compute in F32.
        let i = Tensor::from_vec(vec![-2i64, 0, 3], &[3]).unwrap();
        assert_eq!(i.round().to_vec::<i64>().unwrap(), vec![-2, 0, 3]);
        assert_eq!(i.ceil().dtype(), DType::I64);
        assert_eq!(i.isnan().to_vec::<bool>().unwrap(), vec![false; 3]);
        assert_eq!(i.isfinite().to_vec::<bool>().unwrap(), vec![true; 3]);
        assert_eq!(vals(&i.clamp_min(-1.0)), vec![-1.0, 0.0, 3.0]);
        assert_eq!(vals(&i.leaky_relu(0.5)), vec![-1.0, 0.0, 3.0]);
        let d = Tensor::from_vec(vec![0.5f64, 1.5, -0.5], &[3]).unwrap();
        assert_eq!(d.round().to_vec::<f64>().unwrap(), vec![0.0, 2.0, -0.0]);
        assert_eq!(d.clamp_max(0.0).dtype(), DType::F64);
    }
}

backend_test! {
    fn clamp_tensor_broadcasts_and_propagates_nan() {
        let x = f32s(&[-2.0, 0.5, 3.0, 1.0, NAN, 7.0], &[2, 3]);
        let lo = f32s(&[0.0, 1.0, NAN], &[3]);
        let hi = f32s(&[2.0, 5.0], &[2, 1]);
        let y = x.clamp_tensor(&lo, &hi);
        assert_eq!(y.upper_bounds(), vec![2, 3]);
        assert_close(&vals(&y), &[0.0, 1.0, NAN, 1.0, NAN, NAN], 0.0);
        // lo > hi: hi wins, as min(max(x, lo), hi).
        let z = f32s(&[0.0, 9.0], &[2]).clamp_tensor(&Tensor::scalar(4.0f32), &Tensor::scalar(3.0f32));
        assert_eq!(vals(&z), vec![3.0, 3.0]);
        // Integers stay integers; a bool clamp is refused.
        let i = Tensor::from_vec(vec![-5i64, 5], &[2]).unwrap();
        let c = i.clamp_tensor(&Tensor::scalar(-1i64), &Tensor::scalar(2i64));
        assert_eq!(c.to_vec::<i64>().unwrap(), vec![-1, 2]);
        let b = Tensor::from_vec(vec![true], &[1]).unwrap();
        let msg = panic_message(|| { b.clamp_tensor(&b, &b); });
        assert!(msg.contains("clamp_tensor") && msg.contains("bool"), "{msg}");
    }
}

backend_test! {
    fn pointwise_gradients_match_host() {
        let v = [-3.0f32, -1.0, 0.0, 0.5, 1.0, 2.0, 25.0, 100.0];
        let n = v.len();
        let w = ramp(n, &[n]);
        let run = |f: &dyn Fn(&Tensor) -> Tensor, d: &dyn Fn(f64) -> f64, name: &str| {
            let x = f32s(&v, &[n]).requires_grad(true);
            (&f(&x) * &w).sum().backward();
            mark_step().unwrap();
            let want: Vec<f32> = v.iter().enumerate().map(|(i, &a)| (d(a as f64) * (i + 1) as f64) as f32).collect();
            let got = grad(&x);
            assert!(got.iter().all(|g| g.is_finite()), "{name}: {got:?}");
            assert_close(&got, &want, 1e-5);
        };
        let sig = |a: f64| 1.0 / (1.0 + (-a).exp());
        // A clamp passes the gradient at its bound, as PyTorch.
        run(&|x| x.clamp_min(0.5), &|a| (a >= 0.5) as u8 as f64, "clamp_min");
        run(&|x| x.clamp_max(1.0), &|a| (a <= 1.0) as u8 as f64, "clamp_max");
        run(&|x| x.silu(), &|a| sig(a) * (1.0 + a * (1.0 - sig(a))), "silu");
        run(&|x| x.leaky_relu(0.2), &|a| if a > 0.0 { 1.0 } else { 0.2 }, "leaky_relu");
        run(&|x| x.elu(0.7), &|a| if a > 0.0 { 1.0 } else { 0.7 * a.exp() }, "elu");
        run(&|x| x.softplus(), &|a| if a > 20.0 { 1.0 } else { sig(a) }, "softplus");
        run(&|x| (x + 4.0).log1p(), &|a| 1.0 / (5.0 + a), "log1p");
        run(&|x| (x * 0.1).expm1(), &|a| 0.1 * (0.1 * a).exp(), "expm1");
        run(&|x| x.ceil() + x.round(), &|_| 0.0, "rounding");
        // Tensor bounds take the gradient where they clamp.
        let x = f32s(&[-2.0, 0.5, 3.0, 1.0], &[4]).requires_grad(true);
        let lo = f32s(&[0.0, 0.5, 0.0, 0.0], &[4]).requires_grad(true);
        let hi = Tensor::scalar(2.0f32).requires_grad(true);
        (&x.clamp_tensor(&lo, &hi) * &ramp(4, &[4])).sum().backward();
        mark_step().unwrap();
        assert_eq!(grad(&x), vec![0.0, 2.0, 0.0, 4.0]);
        assert_eq!(grad(&lo), vec![1.0, 0.0, 0.0, 0.0]);
        assert_eq!(grad(&hi), vec![3.0]);
    }
}

/// The host logsumexp of a lane, PyTorch's way (no shift by an infinite
/// maximum).
fn lse(lane: &[f32]) -> f32 {
    let m = lane.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
    let m = if m.is_infinite() { 0.0 } else { m };
    ((lane.iter().map(|&a| (a as f64 - m).exp()).sum::<f64>()).ln() + m) as f32
}

/// The host unbiased variance of a lane.
fn var(lane: &[f32]) -> f32 {
    let n = lane.len() as f64;
    let mean = lane.iter().map(|&a| a as f64).sum::<f64>() / n;
    (lane.iter().map(|&a| (a as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0)) as f32
}

/// Rows and columns of a row-major `[r, c]` matrix.
fn rows(v: &[f32], c: usize) -> Vec<Vec<f32>> {
    v.chunks(c).map(|r| r.to_vec()).collect()
}
fn cols(v: &[f32], c: usize) -> Vec<Vec<f32>> {
    (0..c)
        .map(|j| v.iter().skip(j).step_by(c).copied().collect())
        .collect()
}

backend_test! {
    fn reductions_match_host() {
        let v = [1.0f32, 2.0, 3.0, 4.0, 1000.0, 1001.0, 999.0, 0.5, -INF, -INF, -INF, -INF, INF, 1.0, -2.0, 0.0];
        let x = f32s(&v, &[4, 4]);
        let by_row: Vec<f32> = rows(&v, 4).iter().map(|r| lse(r)).collect();
        let by_col: Vec<f32> = cols(&v, 4).iter().map(|c| lse(c)).collect();
        assert_close(&vals(&x.logsumexp(1, false)), &by_row, 1e-6);
        assert_close(&vals(&x.logsumexp(-2, false)), &by_col, 1e-6);
        assert_eq!(x.logsumexp(1, true).upper_bounds(), vec![4, 1]);
        assert_close(&vals(&Tensor::zeros(&[2, 0], DType::F32).logsumexp(1, false)), &[-INF, -INF], 0.0);
        assert_close(&vals(&Tensor::scalar(3.0f32).logsumexp(0, false)), &[3.0], 0.0);
        let i = Tensor::from_vec(vec![0i64, 0], &[2]).unwrap();
        assert_close(&vals(&i.logsumexp(0, false)), &[2f32.ln()], 1e-6);

        let m: Vec<f32> = (0..12).map(|k| ((k * 5) % 7) as f32 * 0.5 - 1.0).collect();
        let y = f32s(&m, &[3, 4]);
        let want: Vec<f32> = rows(&m, 4).iter().map(|r| var(r)).collect();
        assert_close(&vals(&y.var(1, false)), &want, 1e-5);
        assert_close(&vals(&y.std(-1, true)), &want.iter().map(|a| a.sqrt()).collect::<Vec<_>>(), 1e-5);
        assert_eq!(y.std(-1, true).upper_bounds(), vec![3, 1]);
        let want: Vec<f32> = cols(&m, 4).iter().map(|c| var(c)).collect();
        assert_close(&vals(&y.var(0, false)), &want, 1e-5);
        // One element (or none): 0/0.
        assert!(vals(&y.narrow(0, 0, 1).var(0, false)).iter().all(|a| a.is_nan()));
        assert!(vals(&Tensor::zeros(&[0], DType::F32).std(0, false))[0].is_nan());
        let msg = panic_message(|| { i.var(0, false); });
        assert!(msg.contains("var") && msg.contains("float"), "{msg}");

        assert_close(&vals(&f32s(&[1.5, -2.0, 4.0], &[3]).prod()), &[-12.0], 0.0);
        let p = Tensor::from_vec(vec![3i32, -2, 5], &[3]).unwrap().prod();
        assert_eq!((p.dtype(), p.item::<i64>().unwrap()), (DType::I64, -30));
        assert_eq!(Tensor::from_vec(vec![true, true], &[2]).unwrap().prod().item::<i64>().unwrap(), 1);
        assert_eq!(Tensor::zeros(&[0, 3], DType::F32).prod().item::<f32>().unwrap(), 1.0);

        let b = |t: &Tensor| t.item::<bool>().unwrap();
        let z = f32s(&[0.0, -0.0, NAN], &[3]);
        assert!(b(&z.any()) && !b(&z.all()));
        assert!(!b(&z.narrow(0, 0, 2).any()) && b(&z.narrow(0, 2, 1).all()));
        let e = Tensor::zeros(&[0], DType::I64);
        assert!(!b(&e.any()) && b(&e.all()));
        let t = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert!(b(&t.any()) && !b(&t.all()) && t.all().dtype() == DType::Bool);
    }
}

backend_test! {
    fn reduction_gradients_match_host() {
        let v = [0.5f32, -1.0, 2.0, 0.0, 1.5, 3.0];
        let x = f32s(&v, &[2, 3]).requires_grad(true);
        (&x.logsumexp(1, false) * &f32s(&[1.0, 2.0], &[2])).sum().backward();
        mark_step().unwrap();
        let want: Vec<f32> = rows(&v, 3)
            .iter()
            .enumerate()
            .flat_map(|(r, lane)| {
                let l = lse(lane);
                lane.iter().map(move |&a| (r + 1) as f32 * (a - l).exp()).collect::<Vec<_>>()
            })
            .collect();
        assert_close(&grad(&x), &want, 1e-5);

        let x = f32s(&v, &[2, 3]).requires_grad(true);
        (x.var(0, false).sum() + x.std(1, false).sum()).backward();
        mark_step().unwrap();
        let mut want = vec![0.0f32; 6];
        for (j, c) in cols(&v, 3).iter().enumerate() {
            let mean = (c[0] + c[1]) / 2.0;
            for (i, &a) in c.iter().enumerate() {
                want[i * 3 + j] += 2.0 * (a - mean); // n - 1 = 1
            }
        }
        for (i, r) in rows(&v, 3).iter().enumerate() {
            let mean = r.iter().sum::<f32>() / 3.0;
            for (j, &a) in r.iter().enumerate() {
                want[i * 3 + j] += (a - mean) / (2.0 * var(r).sqrt());
            }
        }
        assert_close(&grad(&x), &want, 1e-5);

        // prod: the product of the others, with zero, one and two zeros.
        for (input, want) in [
            (vec![2.0f32, 4.0, 3.0], vec![12.0f32, 6.0, 8.0]),
            (vec![2.0, 0.0, 3.0], vec![0.0, 6.0, 0.0]),
            (vec![0.0, 5.0, 0.0], vec![0.0, 0.0, 0.0]),
        ] {
            let x = f32s(&input, &[3]).requires_grad(true);
            (x.prod() * 2.0).backward();
            mark_step().unwrap();
            assert_close(&grad(&x), &want.iter().map(|g| g * 2.0).collect::<Vec<_>>(), 1e-6);
        }
    }
}

backend_test! {
    fn reductions_over_dynamic_dims_never_read_padding() {
        // 5 real of at most 8 selected; `mark_dynamic` rows, 3 of at most 6.
        let v = [2.0f32, -1.0, 0.5, 3.0, -2.0, 1.5, -0.5, 4.0];
        let keep: Vec<f32> = v.iter().copied().filter(|&a| a > 0.0).collect();
        let x = f32s(&v, &[8]).requires_grad(true);
        let s = x.masked_select(&x.gt_scalar(0.0));
        assert_eq!(s.size(0).to_string(), "<=8");
        let b = |t: &Tensor| t.item::<bool>().unwrap();
        assert_close(&vals(&s.logsumexp(0, false)), &[lse(&keep)], 1e-6);
        assert_close(&vals(&s.var(0, false)), &[var(&keep)], 1e-5);
        assert_close(&vals(&s.prod()), &[keep.iter().product()], 1e-6);
        assert!(b(&s.all()) && b(&s.gt_scalar(3.5).any()) && !b(&s.gt_scalar(4.5).any()));
        (s.prod() + s.var(0, false) + s.logsumexp(0, true).sum()).backward();
        mark_step().unwrap();
        let p: f32 = keep.iter().product();
        let k = keep.len() as f32;
        let mean = keep.iter().sum::<f32>() / k;
        let l = lse(&keep);
        let want: Vec<f32> = v
            .iter()
            .map(|&a| if a > 0.0 { p / a + 2.0 * (a - mean) / (k - 1.0) + (a - l).exp() } else { 0.0 })
            .collect();
        assert_close(&grad(&x), &want, 1e-5);

        let m = [1.0f32, 0.0, 2.0, 3.0, 0.5, 1.0];
        let y = f32s(&m, &[3, 2]).mark_dynamic(0, 6);
        assert_close(&vals(&y.logsumexp(0, false)), &cols(&m, 2).iter().map(|c| lse(c)).collect::<Vec<_>>(), 1e-6);
        assert_close(&vals(&y.var(0, true)), &cols(&m, 2).iter().map(|c| var(c)).collect::<Vec<_>>(), 1e-5);
        assert_eq!(y.var(0, true).size(0).as_static(), Some(1));
        let per_row = y.logsumexp(1, false);
        assert_eq!(per_row.size(0).to_string(), "<=6");
        assert_close(&vals(&per_row), &rows(&m, 2).iter().map(|r| lse(r)).collect::<Vec<_>>(), 1e-6);
        assert_close(&vals(&y.std(1, false)), &rows(&m, 2).iter().map(|r| var(r).sqrt()).collect::<Vec<_>>(), 1e-5);
        assert_close(&vals(&y.add_scalar(1.0).prod()), &[2.0 * 3.0 * 4.0 * 1.5 * 2.0], 1e-6);
        assert!(b(&y.add_scalar(1.0).all()) && !b(&y.all()) && b(&y.any()));
        // One real element: the variance is NaN, as a static one's.
        let one = f32s(&[5.0, -1.0], &[2]);
        let sel = one.masked_select(&one.gt_scalar(0.0));
        assert!(vals(&sel.var(0, false))[0].is_nan());
    }
}

backend_test! {
    fn masked_fill_tril_triu_one_hot() {
        let x = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).requires_grad(true);
        let m = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
        let y = x.masked_fill(&m, -9.0);
        (&y * &ramp(6, &[2, 3])).sum().backward();
        mark_step().unwrap();
        assert_eq!(vals(&y), vec![-9.0, 2.0, -9.0, -9.0, 5.0, -9.0]);
        assert_eq!(grad(&x), vec![0.0, 2.0, 0.0, 0.0, 5.0, 0.0]);
        let col = Tensor::from_vec(vec![false, true], &[2, 1]).unwrap();
        assert_eq!(&vals(&x.masked_fill(&col, f64::INFINITY))[3..], &[INF; 3]);
        let i = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
        let mi = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(i.masked_fill(&mi, 7.9).to_vec::<i64>().unwrap(), vec![7, 2]);
        let msg = panic_message(|| { x.masked_fill(&x, 0.0); });
        assert!(msg.contains("masked_fill") && msg.contains("bool"), "{msg}");
        let msg = panic_message(|| { x.masked_fill(&Tensor::from_vec(vec![true; 12], &[2, 2, 3]).unwrap(), 0.0); });
        assert!(msg.contains("masked_fill") && msg.contains("[2, 2, 3]"), "{msg}");
        let msg = panic_message(|| { x.narrow(0, 0, 1).masked_fill(&col, 0.0); });
        assert!(msg.contains("masked_fill") && msg.contains("broadcast"), "{msg}");

        // Triangles of a batch of 3 x 4 matrices, every diagonal offset.
        let t: Vec<i64> = (1..=24).collect();
        let tt = Tensor::from_vec(t.clone(), &[2, 3, 4]).unwrap();
        for k in -3..=4i64 {
            let keep = |p: usize, upper: bool| {
                let (r, c) = ((p / 4) % 3, p % 4);
                let off = c as i64 - r as i64;
                if upper { off >= k } else { off <= k }
            };
            let host = |upper| t.iter().enumerate().map(|(p, &a)| if keep(p, upper) { a } else { 0 }).collect::<Vec<_>>();
            assert_eq!(tt.tril(k).to_vec::<i64>().unwrap(), host(false), "tril({k})");
            assert_eq!(tt.triu(k).to_vec::<i64>().unwrap(), host(true), "triu({k})");
        }
        // Dynamic rows: the masks follow the real sizes.
        let d = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).mark_dynamic(0, 5);
        assert_eq!(vals(&d.tril(0)), vec![1.0, 0.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(vals(&d.triu(0)), vec![1.0, 2.0, 0.0, 4.0, 0.0, 0.0]);
        assert_eq!(d.triu(0).size(0).to_string(), "<=5");
        let msg = panic_message(|| { i.tril(0); });
        assert!(msg.contains("tril") && msg.contains("2 dims"), "{msg}");

        let c = Tensor::from_vec(vec![0i64, 2, 1, 5, -1], &[5]).unwrap();
        let oh = c.one_hot(3);
        assert_eq!((oh.dtype(), oh.upper_bounds()), (DType::I64, vec![5, 3]));
        assert_eq!(oh.to_vec::<i64>().unwrap(), vec![1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        let sel = c.masked_select(&c.ge_scalar(1.0)).one_hot(3);
        assert_eq!(sel.size(0).to_string(), "<=5");
        assert_eq!(sel.to_vec::<i64>().unwrap(), vec![0, 0, 1, 0, 1, 0, 0, 0, 0]);
        assert_eq!(Tensor::scalar(1i64).one_hot(2).to_vec::<i64>().unwrap(), vec![0, 1]);
        let msg = panic_message(|| { x.one_hot(3); });
        assert!(msg.contains("one_hot") && msg.contains("i64"), "{msg}");
    }
}

backend_test! {
    fn pad_split_chunk_repeat() {
        let x = Tensor::from_vec((1..=6).collect::<Vec<i64>>(), &[2, 3]).unwrap();
        let p = x.pad(&[(1, 2), (0, 1)], 9.0);
        assert_eq!(p.upper_bounds(), vec![5, 4]);
        assert_eq!(p.to_vec::<i64>().unwrap(), vec![9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9, 9, 9, 9]);
        assert_eq!(x.pad(&[(0, 1)], 0.0).to_vec::<i64>().unwrap(), vec![1, 2, 3, 4, 5, 6, 0, 0, 0]);
        let msg = panic_message(|| { x.pad(&[(0, 0); 3], 0.0); });
        assert!(msg.contains("pad") && msg.contains("rank 2"), "{msg}");
        // Padding a dynamic dim: the real elements between the fills.
        let f = f32s(&[3.0, -1.0, 2.0, 5.0], &[4]).requires_grad(true);
        let s = f.masked_select(&f.gt_scalar(0.0)); // 3 of <=4
        let ps = s.pad(&[(2, 1)], -7.0);
        assert_eq!(ps.size(0).to_string(), "<=7");
        (&ps * &ps).sum().backward();
        mark_step().unwrap();
        assert_eq!(vals(&ps), vec![-7.0, -7.0, 3.0, 2.0, 5.0, -7.0]);
        assert_eq!(grad(&f), vec![6.0, 0.0, 4.0, 10.0]);

        let y = Tensor::from_vec((0..10).collect::<Vec<i64>>(), &[5, 2]).unwrap();
        let sizes = |parts: &[Tensor]| parts.iter().map(|t| t.upper_bounds()[0]).collect::<Vec<_>>();
        assert_eq!(sizes(&y.split(2, 0)), vec![2, 2, 1]);
        assert_eq!(y.split(2, 0)[2].to_vec::<i64>().unwrap(), vec![8, 9]);
        assert_eq!(sizes(&y.split(5, 0)), vec![5]);
        assert_eq!(sizes(&y.split(7, 0)), vec![5]);
        assert_eq!(y.split(1, 1)[1].to_vec::<i64>().unwrap(), vec![1, 3, 5, 7, 9]);
        assert_eq!(sizes(&y.chunk(3, 0)), vec![2, 2, 1]);
        assert_eq!(sizes(&y.chunk(4, 0)), vec![2, 2, 1]);
        assert_eq!(sizes(&y.chunk(5, 0)), vec![1; 5]);
        let e = Tensor::zeros(&[0, 2], DType::F32);
        assert_eq!(sizes(&e.split(3, 0)), vec![0]);
        assert_eq!(sizes(&e.split(0, 0)), vec![0]);
        assert_eq!(sizes(&e.chunk(3, 0)), vec![0, 0, 0]);
        let msg = panic_message(|| { y.split(0, 0); });
        assert!(msg.contains("split") && msg.contains("positive"), "{msg}");
        let msg = panic_message(|| { y.chunk(0, 1); });
        assert!(msg.contains("chunk") && msg.contains("positive"), "{msg}");
        let dy = y.mark_dynamic(0, 6);
        for op in ["split", "chunk"] {
            let msg = panic_message(|| { if op == "split" { dy.split(2, 0); } else { dy.chunk(2, 0); } });
            assert!(msg.contains(op) && msg.contains("pad_to_bound(fill)") && msg.contains("<=6"), "{msg}");
        }
        // Along a static dim the pieces keep the dynamic rows.
        let halves = dy.chunk(2, 1);
        assert_eq!(halves[1].size(0).to_string(), "<=6");
        assert_eq!(halves[1].to_vec::<i64>().unwrap(), vec![1, 3, 5, 7, 9]);

        let r = x.repeat(&[2, 1, 2]);
        assert_eq!(r.upper_bounds(), vec![2, 2, 6]);
        let row = |a: &[i64]| [a, a].concat();
        let once = [row(&[1, 2, 3]), row(&[4, 5, 6])].concat();
        assert_eq!(r.to_vec::<i64>().unwrap(), [once.clone(), once].concat());
        assert_eq!(x.repeat(&[1, 0]).upper_bounds(), vec![2, 0]);
        let msg = panic_message(|| { x.repeat(&[2]); });
        assert!(msg.contains("repeat") && msg.contains("rank 2"), "{msg}");
        // Dynamic: copies of the real elements only; the gradient sums them.
        let g = f32s(&[1.0, -1.0, 2.0], &[3]).requires_grad(true);
        let sel = g.masked_select(&g.gt_scalar(0.0)); // [1, 2] of <=3
        let rep = sel.unsqueeze(1).repeat(&[3, 2]);
        assert_eq!(rep.shape_string(), "[<=9, 2]");
        (&rep * &rep).sum().backward();
        mark_step().unwrap();
        assert_eq!(vals(&rep), vec![1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);
        assert_eq!(sel.repeat(&[0]).concrete_shape().unwrap(), vec![0]);
        assert_eq!(grad(&g), vec![12.0, 0.0, 24.0]);
    }
}

backend_test! {
    fn flip_and_roll() {
        let t: Vec<i64> = (0..24).collect();
        let x = Tensor::from_vec(t.clone(), &[2, 3, 4]).unwrap();
        let host: Vec<i64> = (0..24).map(|p| {
            let (a, b, c) = (p / 12, (p / 4) % 3, p % 4);
            t[(1 - a) * 12 + b * 4 + (3 - c)]
        }).collect();
        assert_eq!(x.flip(&[2, 0]).to_vec::<i64>().unwrap(), host);
        assert_eq!(x.flip(&[]).to_vec::<i64>().unwrap(), t);
        let msg = panic_message(|| { x.flip(&[1, 1]); });
        assert!(msg.contains("flip") && msg.contains("more than once"), "{msg}");
        let msg = panic_message(|| { x.flip(&[3]); });
        assert!(msg.contains("flip") && msg.contains("out of range"), "{msg}");
        let v: Vec<i64> = (0..5).collect();
        let r = Tensor::from_vec(v.clone(), &[5]).unwrap();
        for shift in [-7i64, -5, -1, 0, 1, 3, 5, 12, i64::MIN, i64::MAX] {
            let want: Vec<i64> = (0..5).map(|i| v[(i - shift.rem_euclid(5) + 5) as usize % 5]).collect();
            assert_eq!(r.roll(shift, 0).to_vec::<i64>().unwrap(), want, "roll {shift}");
        }
        assert_eq!(&x.roll(1, -1).to_vec::<i64>().unwrap()[..4], &[3, 0, 1, 2]);

        // Dynamic: only the real elements reverse and roll, along a
        // selection and along `mark_dynamic` rows of a matrix.
        let f = f32s(&[4.0, -1.0, 2.0, 7.0, -3.0, 1.0], &[6]).requires_grad(true);
        let s = f.masked_select(&f.gt_scalar(0.0)); // [4, 2, 7, 1] of <=6
        assert_eq!(vals(&s.flip(&[0])), vec![1.0, 7.0, 2.0, 4.0]);
        for shift in [-9i64, -1, 0, 1, 2, 4, 6, i64::MIN] {
            let k = shift.rem_euclid(4) as usize;
            let want: Vec<f32> = (0..4).map(|i| [4.0, 2.0, 7.0, 1.0][(i + 4 - k) % 4]).collect();
            assert_eq!(vals(&s.roll(shift, 0)), want, "dynamic roll {shift}");
        }
        let w = ramp(4, &[4]);
        (&s.flip(&[0]) * &w).sum().backward();
        (&s.roll(1, 0) * &(&w * 10.0)).sum().backward();
        mark_step().unwrap();
        // flip: element i gets w[3 - i]; roll 1: element i lands at i + 1.
        assert_eq!(grad(&f), vec![4.0 + 20.0, 0.0, 3.0 + 30.0, 2.0 + 40.0, 0.0, 1.0 + 10.0]);
        let m = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).mark_dynamic(0, 5);
        assert_eq!(vals(&m.flip(&[0, 1])), vec![6.0, 5.0, 4.0, 3.0, 2.0, 1.0]);
        assert_eq!(m.flip(&[0]).shape_string(), "[<=5, 2]");
        assert_eq!(vals(&m.roll(-1, 0)), vec![3.0, 4.0, 5.0, 6.0, 1.0, 2.0]);
        assert_eq!(vals(&m.roll(1, 1)), vec![2.0, 1.0, 4.0, 3.0, 6.0, 5.0]);
        let text = lazyxla::debug::ir_text(&[&m.flip(&[1])]);
        assert!(text.contains("reverse[dims=[1]]"), "{text}");
    }
}

/// PyTorch's nearest source rows for `n_out` of `n_in` (the ratio in f32).
fn host_nearest(n_in: usize, n_out: usize) -> Vec<(usize, usize, f32)> {
    (0..n_out)
        .map(|i| {
            let s = if n_out == n_in {
                i
            } else if n_out == 2 * n_in {
                i / 2
            } else {
                (((i as f32) * (n_in as f32 / n_out as f32)).floor() as usize).min(n_in - 1)
            };
            (s, s, 0.0)
        })
        .collect()
}

/// PyTorch's bilinear taps: (first, second, second's weight).
fn host_linear(n_in: usize, n_out: usize, align: bool) -> Vec<(usize, usize, f32)> {
    (0..n_out)
        .map(|i| {
            let src = if align {
                if n_out > 1 {
                    i as f64 * (n_in - 1) as f64 / (n_out - 1) as f64
                } else {
                    0.0
                }
            } else {
                ((i as f64 + 0.5) * n_in as f64 / n_out as f64 - 0.5).max(0.0)
            };
            let i0 = src.floor() as usize;
            let i1 = if i0 < n_in - 1 { i0 + 1 } else { i0 };
            (i0, i1, (src - i0 as f64).clamp(0.0, 1.0) as f32)
        })
        .collect()
}

/// A separable resize of `[planes, h, w]` by row and column taps, and
/// the gradient of `sum(out * g)` with respect to the input.
fn host_resize(
    x: &[f32],
    (planes, h, w): (usize, usize, usize),
    rt: &[(usize, usize, f32)],
    ct: &[(usize, usize, f32)],
    g: &[f32],
) -> (Vec<f32>, Vec<f32>) {
    let (oh, ow) = (rt.len(), ct.len());
    let mut out = vec![0.0f32; planes * oh * ow];
    let mut dx = vec![0.0f32; x.len()];
    for p in 0..planes {
        for (i, &(r0, r1, wr)) in rt.iter().enumerate() {
            for (j, &(c0, c1, wc)) in ct.iter().enumerate() {
                let o = p * oh * ow + i * ow + j;
                for (r, a) in [(r0, 1.0 - wr), (r1, wr)] {
                    for (c, b) in [(c0, 1.0 - wc), (c1, wc)] {
                        let k = p * h * w + r * w + c;
                        out[o] += a * b * x[k];
                        dx[k] += a * b * g[o];
                    }
                }
            }
        }
    }
    (out, dx)
}

backend_test! {
    fn upsampling_matches_pytorch_formulas() {
        let (n, c, h, w) = (2usize, 2usize, 3usize, 4usize);
        let v: Vec<f32> = (0..n * c * h * w).map(|k| ((k * 7) % 11) as f32 - 5.0).collect();
        let cases: [(usize, usize); 5] = [(6, 8), (5, 7), (2, 3), (1, 1), (3, 4)];
        for (oh, ow) in cases {
            let g = ramp(n * c * oh * ow, &[n, c, oh, ow]);
            let gv = vals(&g);
            let x = f32s(&v, &[n, c, h, w]).requires_grad(true);
            let y = x.upsample_nearest2d((oh, ow));
            (&y * &g).sum().backward();
            mark_step().unwrap();
            let (want, dx) = host_resize(&v, (n * c, h, w), &host_nearest(h, oh), &host_nearest(w, ow), &gv);
            assert_eq!(y.upper_bounds(), vec![n, c, oh, ow]);
            assert_close(&vals(&y), &want, 0.0);
            assert_close(&grad(&x), &dx, 1e-6);
            for align in [false, true] {
                let x = f32s(&v, &[n, c, h, w]).requires_grad(true);
                let y = x.upsample_bilinear2d((oh, ow), align);
                (&y * &g).sum().backward();
                mark_step().unwrap();
                let (want, dx) = host_resize(&v, (n * c, h, w), &host_linear(h, oh, align), &host_linear(w, ow, align), &gv);
                assert_close(&vals(&y), &want, 1e-5);
                assert_close(&grad(&x), &dx, 1e-5);
            }
        }
        let i = Tensor::from_vec(vec![1i64, 2], &[1, 1, 1, 2]).unwrap();
        assert_eq!(i.upsample_nearest2d((2, 3)).to_vec::<i64>().unwrap(), vec![1, 1, 2, 1, 1, 2]);
        let msg = panic_message(|| { i.upsample_bilinear2d((2, 2), false); });
        assert!(msg.contains("upsample_bilinear2d") && msg.contains("float"), "{msg}");
        let msg = panic_message(|| { f32s(&[1.0; 4], &[1, 2, 2]).upsample_nearest2d((4, 4)); });
        assert!(msg.contains("4-D") && msg.contains("[1, 2, 2]"), "{msg}");
        let msg = panic_message(|| { f32s(&[1.0; 4], &[1, 1, 2, 2]).upsample_nearest2d((0, 4)); });
        assert!(msg.contains("positive"), "{msg}");
        let dh = f32s(&[1.0; 4], &[1, 1, 2, 2]).mark_dynamic(2, 4);
        let msg = panic_message(|| { dh.upsample_bilinear2d((4, 4), true); });
        assert!(msg.contains("upsample_bilinear2d") && msg.contains("pad_to_bound(fill)") && msg.contains("<=4"), "{msg}");
    }
}

backend_test! {
    fn upsampling_a_dynamic_batch_compiles_once() {
        let mut compiles = Vec::new();
        for n in [2usize, 3, 1, 2] {
            let v: Vec<f32> = (0..n * 2 * 2 * 3).map(|k| (k % 5) as f32 * 0.5).collect();
            let x = f32s(&v, &[n, 2, 2, 3]).mark_dynamic(0, 3).requires_grad(true);
            let near = x.upsample_nearest2d((4, 6)); // integer factors: a broadcast
            let odd = x.upsample_nearest2d((3, 4)); // gathers
            let lin = x.upsample_bilinear2d((3, 5), false);
            assert_eq!(lin.shape_string(), "[<=3, 2, 3, 5]");
            (near.sum() + odd.sum() * 2.0 + lin.sum() * 3.0).backward();
            mark_step().unwrap();
            let planes = (n * 2, 2, 3);
            let ones = |k: usize| vec![1.0f32; n * 2 * k];
            let (a, da) = host_resize(&v, planes, &host_nearest(2, 4), &host_nearest(3, 6), &ones(24));
            let (b, db) = host_resize(&v, planes, &host_nearest(2, 3), &host_nearest(3, 4), &ones(12));
            let (c, dc) = host_resize(&v, planes, &host_linear(2, 3, false), &host_linear(3, 5, false), &ones(15));
            assert_close(&vals(&near), &a, 0.0);
            assert_close(&vals(&odd), &b, 0.0);
            assert_close(&vals(&lin), &c, 1e-6);
            let want: Vec<f32> = (0..v.len()).map(|k| da[k] + 2.0 * db[k] + 3.0 * dc[k]).collect();
            assert_close(&grad(&x), &want, 1e-5);
            compiles.push(metrics::counter("UncachedCompile"));
        }
        assert_eq!(compiles[0], compiles[3], "{compiles:?}: {}", metrics::report());
    }
}
