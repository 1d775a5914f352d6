//! nn modules against host computations: normalisation layers (with
//! BatchNorm's running statistics as device state), attention, dynamic
//! Embedding lookups, and the Module tree (named parameters and buffers,
//! train/eval switching).

// The host references index several arrays by channel, as the formulas do.
#![allow(clippy::needless_range_loop)]

mod common;

use common::{assert_close, assert_close64, panic_message, Lcg};
use lazyxla::nn::{
    self, BatchNorm2d, Conv2d, Dropout, Embedding, GroupNorm, Linear, Module, MultiheadAttention,
    RmsNorm, Sequential,
};
use lazyxla::{capture, mark_step, metrics, DType, Tensor};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// `n` values in `[-1, 1)`.
fn signed(rng: &mut Lcg, n: usize) -> Vec<f32> {
    rng.floats(n).into_iter().map(|v| 2.0 * v - 1.0).collect()
}

fn signed64(rng: &mut Lcg, n: usize) -> Vec<f64> {
    signed(rng, n).into_iter().map(f64::from).collect()
}

/// Central finite differences of `f` at `x`.
fn fd_grad(f: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    let h = 1e-6;
    (0..x.len())
        .map(|i| {
            let (mut a, mut b) = (x.to_vec(), x.to_vec());
            a[i] += h;
            b[i] -= h;
            (f(&a) - f(&b)) / (2.0 * h)
        })
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

// ---------------------------------------------------------------- BatchNorm

/// Training-mode batch norm of `x: [n, c, hw]` on the host: the output,
/// the batch mean and the biased variance per channel, and the gradients
/// of `sum(y * r)` with respect to x, weight and bias (weight `w`).
struct HostBn {
    y: Vec<f32>,
    mean: Vec<f32>,
    var: Vec<f32>,
    dx: Vec<f32>,
    dw: Vec<f32>,
    db: Vec<f32>,
}

fn host_bn(x: &[f32], r: &[f32], w: &[f32], n: usize, c: usize, hw: usize) -> HostBn {
    let m = (n * hw) as f64;
    let at = |i: usize, ch: usize, p: usize| (i * c + ch) * hw + p;
    let mut out = HostBn {
        y: vec![0.0; x.len()],
        mean: vec![0.0; c],
        var: vec![0.0; c],
        dx: vec![0.0; x.len()],
        dw: vec![0.0; c],
        db: vec![0.0; c],
    };
    for ch in 0..c {
        let idx: Vec<usize> = (0..n)
            .flat_map(|i| (0..hw).map(move |p| at(i, ch, p)))
            .collect();
        let mean = idx.iter().map(|&k| x[k] as f64).sum::<f64>() / m;
        let var = idx
            .iter()
            .map(|&k| (x[k] as f64 - mean).powi(2))
            .sum::<f64>()
            / m;
        let sd = (var + 1e-5).sqrt();
        let xhat = |k: usize| (x[k] as f64 - mean) / sd;
        let mr = idx.iter().map(|&k| r[k] as f64).sum::<f64>() / m;
        let mrx = idx.iter().map(|&k| r[k] as f64 * xhat(k)).sum::<f64>() / m;
        for &k in &idx {
            out.y[k] = (xhat(k) * w[ch] as f64) as f32;
            out.dx[k] = (w[ch] as f64 / sd * (r[k] as f64 - mr - xhat(k) * mrx)) as f32;
        }
        out.mean[ch] = mean as f32;
        out.var[ch] = var as f32;
        out.dw[ch] = (mrx * m) as f32;
        out.db[ch] = (mr * m) as f32;
    }
    out
}

/// Runs three training steps of `bn` on batches of the given sizes
/// (dynamic when `bound` is set) and checks outputs, gradients and the
/// running statistics against the host after each.
fn bn_steps(
    bn: &BatchNorm2d,
    batches: &[usize],
    bound: Option<usize>,
    c: usize,
    hw: (usize, usize),
) {
    let mut rng = Lcg(7);
    let (mut rm, mut rv) = (vec![0.0f32; c], vec![1.0f32; c]);
    let w = f32s(&bn.weight);
    for (step, &n) in batches.iter().enumerate() {
        let shape = [n, c, hw.0, hw.1];
        let len = n * c * hw.0 * hw.1;
        let xs: Vec<f32> = signed(&mut rng, len)
            .iter()
            .map(|v| 3.0 * v + step as f32)
            .collect();
        let rs = signed(&mut rng, len);
        let (mut x, mut r) = (
            Tensor::from_vec(xs.clone(), &shape).unwrap(),
            Tensor::from_vec(rs.clone(), &shape).unwrap(),
        );
        if let Some(b) = bound {
            x = x.mark_dynamic(0, b);
            r = r.mark_dynamic_as(0, &x, 0);
        }
        let x = x.requires_grad(true);
        bn.weight.zero_grad();
        bn.bias.zero_grad();
        let y = bn.forward(&x);
        (&y * &r).sum().backward();
        mark_step().unwrap();
        let want = host_bn(&xs, &rs, &w, n, c, hw.0 * hw.1);
        assert_close(&f32s(&y), &want.y, 1e-4);
        assert_close(&f32s(&x.grad().unwrap()), &want.dx, 1e-4);
        assert_close(&f32s(&bn.weight.grad().unwrap()), &want.dw, 1e-4);
        assert_close(&f32s(&bn.bias.grad().unwrap()), &want.db, 1e-4);
        let count = (n * hw.0 * hw.1) as f32;
        for ch in 0..c {
            rm[ch] = 0.9 * rm[ch] + 0.1 * want.mean[ch];
            rv[ch] = 0.9 * rv[ch] + 0.1 * want.var[ch] * count / (count - 1.0);
        }
        assert_close(&f32s(&bn.running_mean), &rm, 1e-5);
        assert_close(&f32s(&bn.running_var), &rv, 1e-5);
        assert_eq!(
            bn.num_batches_tracked.item::<i64>().unwrap(),
            step as i64 + 1
        );
    }
    // The steps shared one program.
    assert_eq!(
        metrics::counter("UncachedCompile"),
        1,
        "{}",
        metrics::report()
    );
    // Evaluation: the running statistics, and no update.
    bn.train(false);
    let xs = signed(&mut rng, 2 * c * hw.0 * hw.1);
    let y = bn.forward(&Tensor::from_vec(xs.clone(), &[2, c, hw.0, hw.1]).unwrap());
    let per = hw.0 * hw.1;
    let want: Vec<f32> = xs
        .iter()
        .enumerate()
        .map(|(k, v)| {
            let ch = (k / per) % c;
            (v - rm[ch]) / (rv[ch] + 1e-5).sqrt() * w[ch]
        })
        .collect();
    assert_close(&f32s(&y), &want, 1e-5);
    mark_step().unwrap();
    assert_eq!(
        bn.num_batches_tracked.item::<i64>().unwrap(),
        batches.len() as i64
    );
    for (name, t) in bn.named_buffers() {
        assert!(
            !t.is_requires_grad() && t.grad().is_none(),
            "{name} must not require grad"
        );
    }
}

backend_test! {
    fn batchnorm_trains_on_batch_stats_and_updates_running_stats() {
        let bn = BatchNorm2d::new(3);
        bn.weight.assign(&Tensor::from_vec(vec![1.5f32, -0.5, 2.0], &[3]).unwrap());
        mark_step().unwrap();
        metrics::reset();
        bn_steps(&bn, &[2, 2, 2], None, 3, (2, 3));
    }
}

backend_test! {
    fn batchnorm_dynamic_batch_uses_the_real_count_and_compiles_once() {
        let bn = BatchNorm2d::new(2);
        bn_steps(&bn, &[3, 5, 2], Some(8), 2, (2, 2));
    }
}

backend_test! {
    fn batchnorm_in_a_captured_step_replays_its_state_updates() {
        let bn = BatchNorm2d::new(4);
        let mut step = capture(|x: &[Tensor]| vec![bn.forward(&x[0]).square().sum()]);
        let mut rng = Lcg(3);
        let (mut rm, mut rv) = (vec![0.0f32; 4], vec![1.0f32; 4]);
        for n in [3usize, 6, 4, 5] {
            let xs = signed(&mut rng, n * 4 * 2);
            let x = Tensor::from_vec(xs.clone(), &[n, 4, 1, 2]).unwrap().mark_dynamic(0, 6);
            step.run(&[x]).unwrap();
            let want = host_bn(&xs, &xs, &[1.0; 4], n, 4, 2);
            let count = (2 * n) as f32;
            for ch in 0..4 {
                rm[ch] = 0.9 * rm[ch] + 0.1 * want.mean[ch];
                rv[ch] = 0.9 * rv[ch] + 0.1 * want.var[ch] * count / (count - 1.0);
            }
        }
        assert_eq!(step.recordings(), 1);
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        drop(step);
        assert_close(&f32s(&bn.running_mean), &rm, 1e-5);
        assert_close(&f32s(&bn.running_var), &rv, 1e-5);
        assert_eq!(bn.num_batches_tracked.item::<i64>().unwrap(), 4);
    }
}

backend_test! {
    fn batchnorm_rejects_bad_inputs_clearly() {
        let bn = BatchNorm2d::new(3);
        let msg = panic_message(|| {
            bn.forward(&Tensor::ones(&[2, 4, 2, 2], DType::F32));
        });
        assert!(msg.contains("BatchNorm2d") && msg.contains("C = 3") && msg.contains("[2, 4, 2, 2]"), "{msg}");
        let msg = panic_message(|| {
            bn.forward(&Tensor::ones(&[2, 3], DType::F32));
        });
        assert!(msg.contains("[N, C, H, W]"), "{msg}");
        let msg = panic_message(|| {
            bn.forward(&Tensor::ones(&[1, 3, 1, 1], DType::F32));
        });
        assert!(msg.contains("more than 1 value per channel"), "{msg}");
        // A dynamic batch of one 1x1 image: the program checks the count,
        // the step fails and changes nothing.
        mark_step().unwrap();
        let x = Tensor::ones(&[1, 3, 1, 1], DType::F32).mark_dynamic(0, 4);
        let y = bn.forward(&x);
        let err = mark_step().unwrap_err().to_string();
        assert!(err.contains("more than 1 value per channel"), "{err}");
        drop(y);
        assert_eq!(bn.num_batches_tracked.item::<i64>().unwrap(), 0);
        assert_eq!(f32s(&bn.running_var), vec![1.0; 3]);
    }
}

// ------------------------------------------------------- GroupNorm, RmsNorm

/// Group norm of `x: [n, c, hw]` with weight `w` and bias `b` (f64).
fn host_gn(
    x: &[f64],
    w: &[f64],
    b: &[f64],
    n: usize,
    c: usize,
    hw: usize,
    groups: usize,
) -> Vec<f64> {
    let per = c / groups * hw;
    let mut y = vec![0.0; x.len()];
    for i in 0..n {
        for g in 0..groups {
            let start = (i * c + g * (c / groups)) * hw;
            let xs = &x[start..start + per];
            let mean = xs.iter().sum::<f64>() / per as f64;
            let var = xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / per as f64;
            for k in 0..per {
                let ch = g * (c / groups) + k / hw;
                y[start + k] = (xs[k] - mean) / (var + 1e-5).sqrt() * w[ch] + b[ch];
            }
        }
    }
    y
}

backend_test! {
    fn groupnorm_matches_the_host_on_a_dynamic_batch() {
        let (c, hw, groups) = (6, 2, 3);
        let gn = GroupNorm::new(groups, c);
        let mut rng = Lcg(11);
        let (w, b) = (signed64(&mut rng, c), signed64(&mut rng, c));
        gn.weight.assign(&Tensor::from_vec(w.iter().map(|&v| v as f32).collect(), &[c]).unwrap());
        gn.bias.assign(&Tensor::from_vec(b.iter().map(|&v| v as f32).collect(), &[c]).unwrap());
        mark_step().unwrap();
        let (w, b) = (f32s(&gn.weight).into_iter().map(f64::from).collect::<Vec<_>>(), f32s(&gn.bias).into_iter().map(f64::from).collect::<Vec<_>>());
        metrics::reset();
        for n in [3usize, 4, 1, 2] {
            let xs = signed64(&mut rng, n * c * hw);
            let rs = signed64(&mut rng, n * c * hw);
            let x = Tensor::from_vec(xs.clone(), &[n, c, 1, hw]).unwrap().mark_dynamic(0, 4).requires_grad(true);
            let r = Tensor::from_vec(rs.clone(), &[n, c, 1, hw]).unwrap().mark_dynamic_as(0, &x, 0);
            gn.weight.zero_grad();
            gn.bias.zero_grad();
            let y = gn.forward(&x);
            assert_eq!(y.dtype(), DType::F64);
            (&y * &r).sum().backward();
            mark_step().unwrap();
            assert_close64(&f64s(&y), &host_gn(&xs, &w, &b, n, c, hw, groups), 1e-9);
            let dx = fd_grad(|x| dot(&host_gn(x, &w, &b, n, c, hw, groups), &rs), &xs);
            assert_close64(&f64s(&x.grad().unwrap()), &dx, 1e-6);
            let dw = fd_grad(|w| dot(&host_gn(&xs, w, &b, n, c, hw, groups), &rs), &w);
            assert_close64(&f64s(&gn.weight.grad().unwrap().to_dtype(DType::F64)), &dw, 1e-4);
        }
        // One program for the steps, one for reading the F32 weight gradient as F64.
        assert_eq!(metrics::counter("UncachedCompile"), 2, "{}", metrics::report());
        let msg = panic_message(|| {
            GroupNorm::new(4, 6);
        });
        assert!(msg.contains("GroupNorm") && msg.contains("divisible"), "{msg}");
    }
}

/// RMS norm over rows of `d` values.
fn host_rms(x: &[f64], w: &[f64], d: usize, eps: f64) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
            row.iter()
                .zip(w)
                .map(move |(v, w)| v / (ms + eps).sqrt() * w)
                .collect::<Vec<_>>()
        })
        .collect()
}

backend_test! {
    fn rmsnorm_matches_the_host_with_pytorch_default_eps() {
        let d = 5;
        let norm = RmsNorm::new(d);
        let mut rng = Lcg(5);
        let w = signed64(&mut rng, d);
        norm.weight.assign(&Tensor::from_vec(w.iter().map(|&v| v as f32).collect(), &[d]).unwrap());
        mark_step().unwrap();
        let w: Vec<f64> = f32s(&norm.weight).into_iter().map(f64::from).collect();
        for n in [2usize, 4] {
            let xs = signed64(&mut rng, n * 3 * d);
            let rs = signed64(&mut rng, n * 3 * d);
            let x = Tensor::from_vec(xs.clone(), &[n, 3, d]).unwrap().mark_dynamic(0, 6).requires_grad(true);
            let r = Tensor::from_vec(rs.clone(), &[n, 3, d]).unwrap().mark_dynamic_as(0, &x, 0);
            norm.weight.zero_grad();
            let y = norm.forward(&x);
            (&y * &r).sum().backward();
            mark_step().unwrap();
            // eps None: torch.finfo(float64).eps for an F64 input.
            assert_close64(&f64s(&y), &host_rms(&xs, &w, d, f64::EPSILON), 1e-12);
            let dx = fd_grad(|x| dot(&host_rms(x, &w, d, f64::EPSILON), &rs), &xs);
            assert_close64(&f64s(&x.grad().unwrap()), &dx, 1e-6);
            let dw = fd_grad(|w| dot(&host_rms(&xs, w, d, f64::EPSILON), &rs), &w);
            assert_close64(&f64s(&norm.weight.grad().unwrap().to_dtype(DType::F64)), &dw, 1e-4);
        }
        // F32: torch.finfo(float32).eps, which matters for tiny inputs.
        let tiny = Tensor::from_vec(vec![1e-4f32; d], &[1, d]).unwrap();
        let want = host_rms(&[1e-4; 5], &w, d, f32::EPSILON as f64);
        assert_close(&f32s(&norm.forward(&tiny)), &want.iter().map(|&v| v as f32).collect::<Vec<_>>(), 1e-5);
        let mut explicit = RmsNorm::new(d);
        explicit.eps = Some(1e-2);
        let want = host_rms(&[1e-4; 5], &[1.0; 5], d, 1e-2);
        assert_close(&f32s(&explicit.forward(&tiny)), &want.iter().map(|&v| v as f32).collect::<Vec<_>>(), 1e-6);
        let msg = panic_message(|| {
            norm.forward(&Tensor::ones(&[2, 4], DType::F32));
        });
        assert!(msg.contains("RmsNorm") && msg.contains("[2, 4]"), "{msg}");
    }
}

// ---------------------------------------------------------------- Attention

/// `softmax(q kᵀ / sqrt(e) + bias) v` per batch on the host, with `keep`
/// deciding which keys each query sees (a query that sees none gets
/// zeros). Layouts: q `[b, l, e]`, k `[b, s, e]`, v `[b, s, ev]`.
fn host_attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (b, l, s, e, ev): (usize, usize, usize, usize, usize),
    keep: &dyn Fn(usize, usize, usize) -> bool,
    bias: &dyn Fn(usize, usize, usize) -> f64,
) -> Vec<f64> {
    let mut out = vec![0.0; b * l * ev];
    for bi in 0..b {
        for i in 0..l {
            let scores: Vec<Option<f64>> = (0..s)
                .map(|j| {
                    keep(bi, i, j).then(|| {
                        let qk: f64 = (0..e)
                            .map(|t| q[(bi * l + i) * e + t] * k[(bi * s + j) * e + t])
                            .sum();
                        qk / (e as f64).sqrt() + bias(bi, i, j)
                    })
                })
                .collect();
            let max = scores
                .iter()
                .flatten()
                .cloned()
                .fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                continue;
            }
            let ex: Vec<f64> = scores
                .iter()
                .map(|s| s.map_or(0.0, |s| (s - max).exp()))
                .collect();
            let total: f64 = ex.iter().sum();
            for j in 0..s {
                for t in 0..ev {
                    out[(bi * l + i) * ev + t] += ex[j] / total * v[(bi * s + j) * ev + t];
                }
            }
        }
    }
    out
}

backend_test! {
    fn sdpa_masks_match_the_host_with_gradients() {
        let (b, l, s, e, ev) = (2, 3, 5, 4, 3);
        let mut rng = Lcg(21);
        let (qs, ks, vs) = (signed64(&mut rng, b * l * e), signed64(&mut rng, b * s * e), signed64(&mut rng, b * s * ev));
        let rs = signed64(&mut rng, b * l * ev);
        // Bool [l, s]: query 2 sees no key (zeros); additive [b, l, s].
        let keep_of = |i: usize, j: usize| i != 2 && !(i + j).is_multiple_of(3);
        let keep: Vec<bool> = (0..l * s).map(|x| keep_of(x / s, x % s)).collect();
        let add = signed64(&mut rng, b * l * s);
        let dims = (b, l, s, e, ev);
        type Case<'a> = (Option<Tensor>, bool, Box<dyn Fn(usize, usize, usize) -> bool + 'a>, Box<dyn Fn(usize, usize, usize) -> f64 + 'a>);
        let cases: Vec<Case> = vec![
            (None, false, Box::new(|_, _, _| true), Box::new(|_, _, _| 0.0)),
            (Some(Tensor::from_vec(keep.clone(), &[l, s]).unwrap()), false, Box::new(move |_, i, j| keep_of(i, j)), Box::new(|_, _, _| 0.0)),
            (Some(Tensor::from_vec(add.clone(), &[b, l, s]).unwrap()), false, Box::new(|_, _, _| true), Box::new(|bi, i, j| add[(bi * l + i) * s + j])),
            (None, true, Box::new(|_, i, j| j <= i), Box::new(|_, _, _| 0.0)),
        ];
        for (mask, causal, keep, bias) in &cases {
            let q = Tensor::from_vec(qs.clone(), &[b, l, e]).unwrap().requires_grad(true);
            let k = Tensor::from_vec(ks.clone(), &[b, s, e]).unwrap().requires_grad(true);
            let v = Tensor::from_vec(vs.clone(), &[b, s, ev]).unwrap().requires_grad(true);
            let out = nn::scaled_dot_product_attention(&q, &k, &v, mask.as_ref(), *causal);
            (&out * &Tensor::from_vec(rs.clone(), &[b, l, ev]).unwrap()).sum().backward();
            mark_step().unwrap();
            let f = |q: &[f64], k: &[f64], v: &[f64]| host_attention(q, k, v, dims, keep, bias);
            assert_close64(&f64s(&out), &f(&qs, &ks, &vs), 1e-12);
            assert!(f64s(&q.grad().unwrap()).iter().all(|g| g.is_finite()));
            assert_close64(&f64s(&q.grad().unwrap()), &fd_grad(|x| dot(&f(x, &ks, &vs), &rs), &qs), 1e-6);
            assert_close64(&f64s(&k.grad().unwrap()), &fd_grad(|x| dot(&f(&qs, x, &vs), &rs), &ks), 1e-6);
            assert_close64(&f64s(&v.grad().unwrap()), &fd_grad(|x| dot(&f(&qs, &ks, x), &rs), &vs), 1e-6);
        }
        let q = Tensor::from_vec(qs.clone(), &[b, l, e]).unwrap();
        let msg = panic_message(|| {
            nn::scaled_dot_product_attention(&q, &q, &q, Some(&Tensor::ones(&[l, l], DType::I64)), false);
        });
        assert!(msg.contains("scaled_dot_product_attention") && msg.contains("Bool or float"), "{msg}");
        let msg = panic_message(|| {
            nn::scaled_dot_product_attention(&q, &q, &q, Some(&Tensor::ones(&[l, l], DType::Bool)), true);
        });
        assert!(msg.contains("is_causal"), "{msg}");
    }
}

backend_test! {
    fn sdpa_on_a_dynamic_length_compiles_once_and_ignores_padding() {
        let (b, h, e) = (2, 2, 4);
        let mut rng = Lcg(33);
        for t in [5usize, 17, 9] {
            let (qs, ks, vs) = (signed64(&mut rng, b * h * t * e), signed64(&mut rng, b * h * t * e), signed64(&mut rng, b * h * t * e));
            let q = Tensor::from_vec(qs.clone(), &[b, h, t, e]).unwrap().mark_dynamic(2, 64);
            let k = Tensor::from_vec(ks.clone(), &[b, h, t, e]).unwrap().mark_dynamic_as(2, &q, 2);
            let v = Tensor::from_vec(vs.clone(), &[b, h, t, e]).unwrap().mark_dynamic_as(2, &q, 2);
            // Keys past each batch's length are padding: [b, 1, 1, <=64].
            let lens = [t - 2, t];
            let valid: Vec<bool> = (0..b * t).map(|x| x % t < lens[x / t]).collect();
            let mask = Tensor::from_vec(valid, &[b, 1, 1, t]).unwrap().mark_dynamic_as(3, &q, 2);
            let causal = nn::scaled_dot_product_attention(&q, &k, &v, None, true);
            let padded = nn::scaled_dot_product_attention(&q, &k, &v, Some(&mask), false);
            assert_eq!(causal.shape_string(), "[2, 2, <=64, 4]");
            mark_step().unwrap();
            let dims = (b * h, t, t, e, e);
            let want = host_attention(&qs, &ks, &vs, dims, &|_, i, j| j <= i, &|_, _, _| 0.0);
            assert_close64(&f64s(&causal), &want, 1e-12);
            let want = host_attention(&qs, &ks, &vs, dims, &|bh, _, j| j < lens[bh / h], &|_, _, _| 0.0);
            assert_close64(&f64s(&padded), &want, 1e-12);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
    }
}

/// `x [rows, in] · wᵀ + bias` with `w: [out, in]`.
fn host_linear(x: &[f64], w: &[f64], bias: &[f64], inn: usize) -> Vec<f64> {
    let out = bias.len();
    x.chunks(inn)
        .flat_map(|row| (0..out).map(move |o| dot(row, &w[o * inn..(o + 1) * inn]) + bias[o]))
        .collect()
}

backend_test! {
    fn multihead_attention_matches_the_host_with_masks() {
        let (b, l, s, e, h) = (2, 3, 4, 6, 2);
        let d = e / h;
        let mha = MultiheadAttention::new(e, h, 9);
        let w: Vec<f64> = f32s(&mha.in_proj_weight).into_iter().map(f64::from).collect();
        let bound = (6.0 / (4 * e) as f64).sqrt();
        assert!(w.iter().all(|v| v.abs() <= bound) && w.iter().any(|v| v.abs() > bound / 2.0), "xavier-uniform");
        assert_eq!(f32s(&mha.in_proj_bias), vec![0.0; 3 * e]);
        assert_eq!(f32s(mha.out_proj.bias.as_ref().unwrap()), vec![0.0; e]);
        let wo: Vec<f64> = f32s(&mha.out_proj.weight).into_iter().map(f64::from).collect();
        assert!(wo.iter().all(|v| v.abs() <= 1.0 / (e as f64).sqrt()), "Linear's default init");

        let mut rng = Lcg(17);
        let (qs, ks, vs) = (signed64(&mut rng, b * l * e), signed64(&mut rng, b * s * e), signed64(&mut rng, b * s * e));
        // Batch 0 ignores key 3, batch 1 keys 0 and 1; attn_mask hides key 2 from query 0.
        let pad = [false, false, false, true, true, true, false, false];
        let hide = |i: usize, j: usize| i == 0 && j == 2;
        let f32v = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
        let q = Tensor::from_vec(f32v(&qs), &[b, l, e]).unwrap();
        let k = Tensor::from_vec(f32v(&ks), &[b, s, e]).unwrap();
        let v = Tensor::from_vec(f32v(&vs), &[b, s, e]).unwrap();
        let kpm = Tensor::from_vec(pad.to_vec(), &[b, s]).unwrap();
        let am = Tensor::from_vec((0..l * s).map(|x| hide(x / s, x % s)).collect::<Vec<_>>(), &[l, s]).unwrap();
        let y = mha.forward_qkv(&q, &k, &v, Some(&kpm), Some(&am));
        assert_eq!(y.upper_bounds(), vec![b, l, e]);

        // The host: project, split heads, attend, merge, project.
        let zero = vec![0.0; e];
        let proj = |x: &[f64], i: usize| host_linear(x, &w[i * e * e..(i + 1) * e * e], &zero, e);
        let heads = |x: Vec<f64>, t: usize| -> Vec<f64> {
            // [b, t, h, d] -> [b, h, t, d]
            let mut out = vec![0.0; x.len()];
            for bi in 0..b { for ti in 0..t { for hi in 0..h { for di in 0..d {
                out[((bi * h + hi) * t + ti) * d + di] = x[((bi * t + ti) * h + hi) * d + di];
            }}}}
            out
        };
        let (qh, kh, vh) = (heads(proj(&qs, 0), l), heads(proj(&ks, 1), s), heads(proj(&vs, 2), s));
        let att = host_attention(&qh, &kh, &vh, (b * h, l, s, d, d), &|bh, i, j| !pad[(bh / h) * s + j] && !hide(i, j), &|_, _, _| 0.0);
        let mut merged = vec![0.0; b * l * e];
        for bi in 0..b { for ti in 0..l { for hi in 0..h { for di in 0..d {
            merged[((bi * l + ti) * h + hi) * d + di] = att[((bi * h + hi) * l + ti) * d + di];
        }}}}
        let want = host_linear(&merged, &wo, &zero, e);
        assert_close(&f32s(&y), &want.iter().map(|&v| v as f32).collect::<Vec<_>>(), 1e-5);

        // Self-attention over a dynamic length, and gradients for every parameter.
        let x = Tensor::randn(&[b, 5, e], 3).mark_dynamic(1, 16);
        let y = mha.forward(&x);
        assert_eq!(y.shape_string(), "[2, <=16, 6]");
        y.square().sum().backward();
        assert_eq!(y.concrete_shape().unwrap(), vec![b, 5, e]);
        for (name, p) in mha.named_parameters() {
            let g = p.grad().unwrap_or_else(|| panic!("{name} has no gradient"));
            assert!(f32s(&g).iter().all(|v| v.is_finite()), "{name}");
        }
        let msg = panic_message(|| {
            MultiheadAttention::new(6, 4, 0);
        });
        assert!(msg.contains("divisible by num_heads"), "{msg}");
        let msg = panic_message(|| {
            mha.forward(&Tensor::ones(&[2, 3, 4], DType::F32));
        });
        assert!(msg.contains("MultiheadAttention") && msg.contains("[2, 3, 4]"), "{msg}");
    }
}

// ---------------------------------------------------------------- Embedding

backend_test! {
    fn embedding_takes_dynamic_index_batches() {
        let (num, dim) = (7, 3);
        let emb = Embedding::new(num, dim, 4);
        let table = f32s(&emb.weight);
        let mut rng = Lcg(8);
        for t in [3usize, 6] {
            let ids: Vec<i64> = (0..2 * t).map(|_| (rng.next() % num as u64) as i64).collect();
            let rs = signed(&mut rng, 2 * t * dim);
            let x = Tensor::from_vec(ids.clone(), &[2, t]).unwrap().mark_dynamic(1, 8);
            let r = Tensor::from_vec(rs.clone(), &[2, t, dim]).unwrap().mark_dynamic_as(1, &x, 1);
            emb.weight.zero_grad();
            let y = emb.forward(&x);
            assert_eq!(y.shape_string(), "[2, <=8, 3]");
            (&y * &r).sum().backward();
            mark_step().unwrap();
            let want: Vec<f32> = ids.iter().flat_map(|&i| table[i as usize * dim..][..dim].to_vec()).collect();
            assert_eq!(f32s(&y), want);
            let mut grad = vec![0.0f32; num * dim];
            for (p, &i) in ids.iter().enumerate() {
                for c in 0..dim {
                    grad[i as usize * dim + c] += rs[p * dim + c];
                }
            }
            assert_close(&f32s(&emb.weight.grad().unwrap()), &grad, 1e-6);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        // Two dynamic dims (rows [1, 3, 5] plus columns [0, 1]), static
        // rank 3, and a scalar index.
        let v = Tensor::from_vec(vec![1i64, 2, 3, 4, 5], &[5]).unwrap();
        let rows = v.masked_select(&v.remainder(&Tensor::scalar(2i64)).eq_scalar(1.0));
        let cols = v.masked_select(&v.le_scalar(2.0)) - 1;
        let x = &rows.unsqueeze(1) + &cols.unsqueeze(0);
        let y = emb.forward(&x);
        assert_eq!(y.shape_string(), "[<=5, <=5, 3]");
        assert_eq!(y.concrete_shape().unwrap(), vec![3, 2, 3]);
        assert_eq!(f32s(&y), table[dim..7 * dim].to_vec());
        let y = emb.forward(&Tensor::from_vec(vec![6i64, 0], &[1, 2, 1]).unwrap());
        assert_eq!(y.upper_bounds(), vec![1, 2, 1, 3]);
        assert_eq!(f32s(&emb.forward(&Tensor::scalar(2i64))), table[6..9].to_vec());
        let msg = panic_message(|| {
            emb.forward(&Tensor::ones(&[2], DType::F32));
        });
        assert!(msg.contains("Embedding") && msg.contains("integers"), "{msg}");
    }
}

// ------------------------------------------------------------- Module tree

struct Block {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    drop: Dropout,
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.drop.forward(&self.bn1.forward(&self.conv1.forward(x)))
    }
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("conv1".into(), &self.conv1),
            ("bn1".into(), &self.bn1),
            ("drop".into(), &self.drop),
        ]
    }
}

struct Net {
    stem: Sequential,
    layer1: Sequential,
    fc: Linear,
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.layer1.forward(&self.stem.forward(x));
        self.fc.forward(&h.mean_dims(&[2, 3], false))
    }
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("stem".into(), &self.stem),
            ("layer1".into(), &self.layer1),
            ("fc".into(), &self.fc),
        ]
    }
}

fn names(named: Vec<(String, Tensor)>) -> Vec<String> {
    named.into_iter().map(|(n, _)| n).collect()
}

backend_test! {
    fn named_parameters_and_buffers_follow_pytorch_names() {
        let block = |seed| Block {
            conv1: Conv2d::new(2, 2, (3, 3), seed).padding((1, 1)).bias(false),
            bn1: BatchNorm2d::new(2),
            drop: Dropout::new(0.5, seed),
        };
        let net = Net {
            stem: Sequential::new().add(Conv2d::new(1, 2, (1, 1), 0)).add(BatchNorm2d::new(2)),
            layer1: Sequential::new().add(block(1)).add(block(2)),
            fc: Linear::new(2, 3, 0),
        };
        assert_eq!(names(net.named_parameters()), [
            "stem.0.weight", "stem.0.bias", "stem.1.weight", "stem.1.bias",
            "layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
            "layer1.1.conv1.weight", "layer1.1.bn1.weight", "layer1.1.bn1.bias",
            "fc.weight", "fc.bias",
        ]);
        assert_eq!(names(net.named_buffers()), [
            "stem.1.running_mean", "stem.1.running_var", "stem.1.num_batches_tracked",
            "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var", "layer1.0.bn1.num_batches_tracked",
            "layer1.1.bn1.running_mean", "layer1.1.bn1.running_var", "layer1.1.bn1.num_batches_tracked",
        ]);
        assert_eq!(net.parameters().len(), 12);
        let p = net.parameters();
        assert_eq!(p[4].upper_bounds(), vec![2, 2, 3, 3]);
        assert_eq!(net.named_buffers()[2].1.dtype(), DType::I64);

        // train(false) reaches every BatchNorm and Dropout: the output is
        // deterministic and the running statistics stay as they are.
        let x = Tensor::randn(&[2, 1, 4, 4], 5);
        net.train(false);
        let a = f32s(&net.forward(&x));
        let b = f32s(&net.forward(&x));
        assert_eq!(a, b);
        mark_step().unwrap();
        for (name, t) in net.named_buffers() {
            if name.ends_with("num_batches_tracked") {
                assert_eq!(t.item::<i64>().unwrap(), 0, "{name}");
            }
        }
        // Back to training: statistics update, dropout draws masks.
        net.train(true);
        let c = net.forward(&x);
        mark_step().unwrap();
        assert_ne!(f32s(&c), a);
        for (name, t) in net.named_buffers() {
            if name.ends_with("num_batches_tracked") {
                assert_eq!(t.item::<i64>().unwrap(), 1, "{name}");
            }
        }

        // A tied weight is listed once, under its first name.
        struct Tied {
            emb: Embedding,
            head: Linear,
        }
        impl Module for Tied {
            fn forward(&self, x: &Tensor) -> Tensor {
                self.head.forward(&self.emb.forward(x))
            }
            fn named_children(&self) -> Vec<(String, &dyn Module)> {
                vec![("emb".into(), &self.emb), ("head".into(), &self.head)]
            }
        }
        let emb = Embedding::new(5, 4, 0);
        let head = Linear::from_tensors(emb.weight.clone(), None);
        let tied = Tied { emb, head };
        assert_eq!(names(tied.named_parameters()), ["emb.weight"]);
        assert_eq!(tied.forward(&Tensor::from_vec(vec![1i64], &[1]).unwrap()).upper_bounds(), vec![1, 5]);

        // MultiheadAttention inside a model.
        let seq = Sequential::new().add(MultiheadAttention::new(4, 2, 0)).add(nn::RmsNorm::new(4)).add(nn::GroupNorm::new(1, 4));
        assert_eq!(names(seq.named_parameters()), [
            "0.in_proj_weight", "0.in_proj_bias", "0.out_proj.weight", "0.out_proj.bias",
            "1.weight", "2.weight", "2.bias",
        ]);
    }
}
