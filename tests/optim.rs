//! Optimizer checkpoints (state dicts), learning rates that change
//! without recompiling, schedulers and gradient clipping.

mod common;

use common::{assert_close, assert_close64};
use lazyxla::metrics::counter;
use lazyxla::nn::clip_grad_norm;
use lazyxla::optim::lr_scheduler::{CosineAnnealingLr, LinearWarmup, LrScheduler, StepLr};
use lazyxla::optim::{Adam, AdamW, Optimizer, Sgd};
use lazyxla::{capture, mark_step, Device, Error, Tensor};
use std::cell::RefCell;

const W0: [f32; 6] = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5];
const B0: [f32; 2] = [0.1, -0.2];

fn on_reference() -> bool {
    Device::default() == Device::reference()
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Sgd,
    Adam,
    AdamW,
}

fn optimizer(kind: Kind, params: Vec<Tensor>, lr: f64) -> Box<dyn Optimizer> {
    match kind {
        Kind::Sgd => Box::new(Sgd::new(params, lr).momentum(0.9).weight_decay(0.01)),
        Kind::Adam => Box::new(Adam::new(params, lr).weight_decay(0.01)),
        Kind::AdamW => Box::new(AdamW::new(params, lr).weight_decay(0.1)),
    }
}

fn params(w: &[f32], b: &[f32]) -> (Tensor, Tensor) {
    let w = Tensor::from_vec(w.to_vec(), &[2, 3])
        .unwrap()
        .requires_grad(true);
    let b = Tensor::from_vec(b.to_vec(), &[2, 1])
        .unwrap()
        .requires_grad(true);
    (w, b)
}

/// One training step of a small model with nonlinear gradients.
fn train_step(w: &Tensor, b: &Tensor, opt: &mut dyn Optimizer, s: usize) {
    let x = Tensor::from_vec(
        (0..6).map(|i| ((i + s) % 5) as f32 * 0.3 - 0.5).collect(),
        &[2, 3],
    )
    .unwrap();
    opt.zero_grad();
    let y = (&(w * &x) + b).tanh();
    (&y.square().sum() + &(w * w * w).sum()).backward();
    opt.step();
    mark_step().unwrap();
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn assert_resumed(got: &[f32], want: &[f32], what: &str) {
    if on_reference() {
        assert_eq!(got, want, "{what}: bit for bit on the reference backend");
    } else {
        assert_close(got, want, 1e-6);
    }
}

backend_test! {
    fn a_resumed_run_equals_the_uninterrupted_one() {
        for kind in [Kind::Sgd, Kind::Adam, Kind::AdamW] {
            // Uninterrupted: 10 steps, the rate lowered after step 3.
            let (w, b) = params(&W0, &B0);
            let mut opt = optimizer(kind, vec![w.clone(), b.clone()], 0.05);
            for s in 0..10 {
                if s == 3 {
                    opt.set_lr(0.02);
                }
                train_step(&w, &b, opt.as_mut(), s);
            }
            let (want_w, want_b) = (values(&w), values(&b));

            // 5 steps, then a checkpoint.
            let (w1, b1) = params(&W0, &B0);
            let mut first = optimizer(kind, vec![w1.clone(), b1.clone()], 0.05);
            for s in 0..5 {
                if s == 3 {
                    first.set_lr(0.02);
                }
                train_step(&w1, &b1, first.as_mut(), s);
            }
            let state = first.state_dict();
            let (saved_w, saved_b) = (values(&w1), values(&b1));
            let host = |state: &[(String, Tensor)]| -> Vec<(String, Vec<f64>)> {
                state
                    .iter()
                    .map(|(k, t)| {
                        let v = t.to_dtype(lazyxla::DType::F64).to_vec::<f64>().unwrap();
                        (k.clone(), v)
                    })
                    .collect()
            };
            let saved_state = host(&state);
            // The first optimizer goes on; the saved tensors do not move.
            for s in 5..7 {
                train_step(&w1, &b1, first.as_mut(), s);
            }
            assert_eq!(host(&state), saved_state, "{kind:?}: the state dict is a copy");
            if !matches!(kind, Kind::Sgd) {
                let step = state.iter().find(|(k, _)| k == "state.1.step").unwrap();
                assert_eq!(step.1.to_vec::<f32>().unwrap(), vec![5.0]);
            }

            // A fresh optimizer over fresh parameters holding the saved values.
            let (w2, b2) = params(&saved_w, &saved_b);
            let mut second = optimizer(kind, vec![w2.clone(), b2.clone()], 1.0);
            second.load_state_dict(&state).unwrap();
            assert_eq!(second.lr(), 0.02, "{kind:?}: the rate comes back");
            for s in 5..10 {
                train_step(&w2, &b2, second.as_mut(), s);
            }
            assert_resumed(&values(&w2), &want_w, &format!("{kind:?} weight"));
            assert_resumed(&values(&b2), &want_b, &format!("{kind:?} bias"));
        }
    }
}

backend_test! {
    fn a_bad_state_dict_is_an_error_naming_the_key_and_changes_nothing() {
        for kind in [Kind::Sgd, Kind::Adam, Kind::AdamW] {
            let (w, b) = params(&W0, &B0);
            let mut opt = optimizer(kind, vec![w.clone(), b.clone()], 0.05);
            train_step(&w, &b, opt.as_mut(), 0);
            let good = opt.state_dict();
            let before: Vec<Vec<f32>> = good.iter().map(|(_, t)| {
                values(&t.to_dtype(lazyxla::DType::F32))
            }).collect();
            let first_key = good[0].0.clone();

            // A fresh optimizer whose loads must fail.
            let (w2, b2) = params(&W0, &B0);
            let mut other = optimizer(kind, vec![w2.clone(), b2.clone()], 0.3);
            train_step(&w2, &b2, other.as_mut(), 1);
            let other_before: Vec<Vec<f32>> = other.state_dict().iter().map(|(_, t)| {
                values(&t.to_dtype(lazyxla::DType::F32))
            }).collect();

            let missing: Vec<_> = good[1..].to_vec();
            let mut wrong_shape = good.clone();
            wrong_shape[0].1 = Tensor::zeros(&[3, 2], lazyxla::DType::F32);
            let mut wrong_dtype = good.clone();
            wrong_dtype[0].1 = Tensor::zeros(&[2, 3], lazyxla::DType::F64);
            let mut lr_not_scalar = good.clone();
            lr_not_scalar.last_mut().unwrap().1 = Tensor::zeros(&[2], lazyxla::DType::F64);
            let mut extra = good.clone();
            extra.push(("state.7.exp_avg".into(), Tensor::zeros(&[1], lazyxla::DType::F32)));
            for (bad, key, what) in [
                (&missing, first_key.as_str(), "no"),
                (&wrong_shape, first_key.as_str(), "f32[3, 2]"),
                (&wrong_dtype, first_key.as_str(), "f64[2, 3]"),
                (&lr_not_scalar, "param_groups.0.lr", "scalar"),
                (&extra, "state.7.exp_avg", "unexpected"),
            ] {
                let err = other.load_state_dict(bad).unwrap_err();
                let msg = err.to_string();
                assert!(msg.contains(&format!("`{key}`")), "{kind:?}: {msg}");
                assert!(msg.contains(what), "{kind:?}: {msg}");
                if what.starts_with("f32") || what.starts_with("f64") {
                    assert!(msg.contains("f32[2, 3]"), "{kind:?}: both shapes: {msg}");
                }
                assert!(matches!(err, Error::InvalidArgument { .. } | Error::Shape { .. } | Error::DType { .. }));
            }
            assert_eq!(other.lr(), 0.3, "{kind:?}: nothing changed");
            let after: Vec<Vec<f32>> = other.state_dict().iter().map(|(_, t)| {
                values(&t.to_dtype(lazyxla::DType::F32))
            }).collect();
            assert_eq!(after, other_before, "{kind:?}: nothing changed");
            // The good one loads.
            other.load_state_dict(&good).unwrap();
            let loaded: Vec<Vec<f32>> = other.state_dict().iter().map(|(_, t)| {
                values(&t.to_dtype(lazyxla::DType::F32))
            }).collect();
            assert_eq!(loaded, before, "{kind:?}");
        }
    }
}

/// Host SGD over `(w·w·w).sum()` (grad 3w²) with rates `rates`.
fn host_sgd(w0: &[f64], rates: &[f64]) -> Vec<f64> {
    let mut p = w0.to_vec();
    for lr in rates {
        for x in &mut p {
            *x -= lr * 3.0 * *x * *x;
        }
    }
    p
}

backend_test! {
    fn a_new_rate_every_step_compiles_once() {
        for kind in [Kind::Sgd, Kind::Adam, Kind::AdamW] {
            lazyxla::metrics::reset();
            let (w, b) = params(&W0, &B0);
            let mut opt = optimizer(kind, vec![w.clone(), b.clone()], 0.05);
            for s in 0..20 {
                opt.set_lr(0.001 * (s + 1) as f64);
                // A loss of its own: the compile cache outlives a test.
                opt.zero_grad();
                (&(&w.tanh() * &w).sum() + &(&b * &b * &b).sum()).backward();
                opt.step();
                mark_step().unwrap();
            }
            assert_eq!(opt.lr(), 0.02);
            assert_eq!(counter("UncachedCompile"), 1, "{kind:?}: {}", lazyxla::metrics::report());
        }
        // The rate is read: plain SGD with a new rate each step.
        let w0 = [0.5f64, -0.25, 0.125];
        let w = Tensor::from_vec(w0.to_vec(), &[3]).unwrap().requires_grad(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.1);
        let rates: Vec<f64> = (0..20).map(|s| 0.01 + 0.005 * s as f64).collect();
        for lr in &rates {
            opt.set_lr(*lr);
            opt.zero_grad();
            (&w * &w * &w).sum().backward();
            opt.step();
            mark_step().unwrap();
        }
        assert_close64(&w.to_vec::<f64>().unwrap(), &host_sgd(&w0, &rates), 1e-12);
    }
}

backend_test! {
    fn a_captured_step_reads_the_rate_and_records_once() {
        let w0 = [0.5f32, -0.25, 0.125];
        let w = Tensor::from_vec(w0.to_vec(), &[3]).unwrap().requires_grad(true);
        let opt = RefCell::new(Sgd::new(vec![w.clone()], 0.1).momentum(0.5));
        let mut step = capture(|_: &[Tensor]| {
            let loss = (&w * &w * &w).sum();
            loss.backward();
            opt.borrow_mut().step();
            vec![loss]
        });
        let rates: Vec<f64> = (0..20).map(|s| 0.05 / (1 + s) as f64).collect();
        let (mut p, mut v) = (w0.map(f64::from), [0.0f64; 3]);
        for lr in &rates {
            opt.borrow_mut().set_lr(*lr);
            w.zero_grad(); // outside the step: every call sees no gradient
            step.run(&[]).unwrap();
            for k in 0..3 {
                v[k] = 0.5 * v[k] + 3.0 * p[k] * p[k];
                p[k] -= lr * v[k];
            }
        }
        assert_eq!(step.recordings(), 1);
        assert_eq!(counter("StepReplay"), 19);
        assert_eq!(counter("UncachedCompile"), 1, "{}", lazyxla::metrics::report());
        let want: Vec<f32> = p.iter().map(|&x| x as f32).collect();
        assert_close(&values(&w), &want, 1e-5);
    }
}

/// PyTorch's closed forms, written out again on the host.
fn torch_step_lr(lr0: f64, step_size: usize, gamma: f64, e: usize) -> f64 {
    lr0 * gamma.powf((e / step_size) as f64)
}
fn torch_cosine(lr0: f64, t_max: usize, eta_min: f64, e: usize) -> f64 {
    eta_min + (lr0 - eta_min) * (1.0 + (std::f64::consts::PI * e as f64 / t_max as f64).cos()) / 2.0
}
fn torch_linear(lr0: f64, start: f64, total: usize, e: usize) -> f64 {
    lr0 * (start + (1.0 - start) * e.min(total) as f64 / total as f64)
}

/// The rates `sched` sets over 20 steps, from epoch 0.
fn rates_of(opt: &mut Sgd, sched: &mut dyn LrScheduler) -> Vec<f64> {
    let mut out = vec![opt.lr()];
    for _ in 1..20 {
        sched.step(opt);
        assert_eq!(sched.lr(), opt.lr());
        out.push(opt.lr());
    }
    out
}

backend_test! {
    fn schedulers_follow_pytorch_closed_forms() {
        let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        let mut opt = Sgd::new(vec![w.clone()], 0.1);
        let mut s = StepLr::new(&mut opt, 3, 0.5).unwrap();
        let want: Vec<f64> = (0..20).map(|e| torch_step_lr(0.1, 3, 0.5, e)).collect();
        assert_eq!(rates_of(&mut opt, &mut s), want);

        let mut opt = Sgd::new(vec![w.clone()], 0.1);
        let mut s = CosineAnnealingLr::new(&mut opt, 20, 0.001).unwrap();
        let want: Vec<f64> = (0..20).map(|e| torch_cosine(0.1, 20, 0.001, e)).collect();
        assert_eq!(rates_of(&mut opt, &mut s), want);

        let mut opt = Sgd::new(vec![w.clone()], 0.1);
        let mut s = LinearWarmup::new(&mut opt, 0.1, 5).unwrap();
        let want: Vec<f64> = (0..20).map(|e| torch_linear(0.1, 0.1, 5, e)).collect();
        assert_eq!(rates_of(&mut opt, &mut s), want);

        // Warm-up, then cosine from its epoch 0 (SequentialLR, milestone 5).
        let mut opt = Sgd::new(vec![w.clone()], 0.1);
        let cosine = CosineAnnealingLr::new(&mut opt, 15, 0.0).unwrap();
        let mut s = LinearWarmup::followed_by(&mut opt, 0.1, 5, cosine).unwrap();
        let want: Vec<f64> = (0..20)
            .map(|e| if e < 5 { torch_linear(0.1, 0.1, 5, e) } else { torch_cosine(0.1, 15, 0.0, e - 5) })
            .collect();
        assert_eq!(rates_of(&mut opt, &mut s), want);

        // A resumed schedule (a fresh scheduler jumped to the saved epoch)
        // goes on exactly as the uninterrupted one.
        let mut opt2 = Sgd::new(vec![w.clone()], 0.1);
        let cosine = CosineAnnealingLr::new(&mut opt2, 15, 0.0).unwrap();
        let mut resumed = LinearWarmup::followed_by(&mut opt2, 0.1, 5, cosine).unwrap();
        resumed.set_epoch(7, &mut opt2);
        assert_eq!(opt2.lr(), want[7]);
        for want_rate in &want[8..] {
            resumed.step(&mut opt2);
            assert_eq!(opt2.lr(), *want_rate);
        }

        // Bad arguments are errors, not panics.
        assert!(StepLr::new(&mut opt, 0, 0.5).is_err());
        assert!(CosineAnnealingLr::new(&mut opt, 0, 0.0).is_err());
        assert!(LinearWarmup::new(&mut opt, 1.5, 3).is_err());
        assert!(LinearWarmup::new(&mut opt, f64::NAN, 3).is_err());
    }
}

backend_test! {
    fn a_cosine_scheduled_sgd_run_compiles_once_and_matches_the_host() {
        let w0 = [0.5f64, -0.25, 0.125, 1.0];
        let w = Tensor::from_vec(w0.to_vec(), &[4]).unwrap().requires_grad(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.2);
        let cosine = CosineAnnealingLr::new(&mut opt, 16, 0.01).unwrap();
        let mut sched = LinearWarmup::followed_by(&mut opt, 0.25, 4, cosine).unwrap();
        let mut rates = Vec::new();
        for _ in 0..20 {
            rates.push(opt.lr());
            opt.zero_grad();
            (&w * &w * &w).sum().backward();
            opt.step();
            mark_step().unwrap();
            sched.step(&mut opt);
        }
        let want_rates: Vec<f64> = (0..20)
            .map(|e| if e < 4 { torch_linear(0.2, 0.25, 4, e) } else { torch_cosine(0.2, 16, 0.01, e - 4) })
            .collect();
        assert_eq!(rates, want_rates);
        assert_close64(&w.to_vec::<f64>().unwrap(), &host_sgd(&w0, &rates), 1e-12);
        assert_eq!(counter("UncachedCompile"), 1, "{}", lazyxla::metrics::report());
    }
}

/// Host clip_grad_norm_: the total norm and the scaled gradients.
fn host_clip(grads: &[Vec<f64>], max_norm: f64) -> (f64, Vec<Vec<f64>>) {
    let total = grads.iter().flatten().map(|g| g * g).sum::<f64>().sqrt();
    let scale = (max_norm / (total + 1e-6)).min(1.0);
    (
        total,
        grads
            .iter()
            .map(|g| g.iter().map(|x| x * scale).collect())
            .collect(),
    )
}

backend_test! {
    fn clip_grad_norm_follows_pytorch_and_stays_lazy() {
        for max_norm in [1.0, 100.0] {
            lazyxla::metrics::reset();
            let (w, b) = params(&W0, &B0);
            let unused = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
            let x = Tensor::from_vec(vec![0.3f32, -0.6, 0.9, 1.2, -1.5, 0.4], &[2, 3]).unwrap();
            (&(&(&w * &x) + &b).square().sum() * 2.0).backward();
            let params = [w.clone(), b.clone(), unused.clone()];
            let total = clip_grad_norm(&params, max_norm);
            assert_eq!(counter("TransferFromDevice"), 0, "no host round trip");
            assert_eq!(counter("UncachedCompile"), 0, "nothing ran yet");
            // Host: grads of 2·sum((w·x + b)²).
            let (wh, bh, xh) = (W0.map(f64::from), B0.map(f64::from), [0.3, -0.6, 0.9, 1.2, -1.5, 0.4]);
            let mut gw = vec![0.0; 6];
            let mut gb = vec![0.0; 2];
            for i in 0..6 {
                let r = wh[i] * xh[i] + bh[i / 3];
                gw[i] = 4.0 * r * xh[i];
                gb[i / 3] += 4.0 * r;
            }
            let (want_total, want) = host_clip(&[gw, gb], max_norm);
            assert!(want_total > 1.0 && want_total < 100.0, "one case clips, the other not");
            let got_total = f64::from(total.item::<f32>().unwrap());
            assert!((got_total - want_total).abs() < 1e-5 * want_total, "{got_total} vs {want_total}");
            let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            assert_close(&values(&w.grad().unwrap()), &f(&want[0]), 1e-5);
            assert_close(&values(&b.grad().unwrap()), &f(&want[1]), 1e-5);
            assert!(unused.grad().is_none());
        }
        // No gradients at all: a zero norm.
        let p = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
        assert_eq!(clip_grad_norm(&[p], 1.0).item::<f32>().unwrap(), 0.0);
    }
}

backend_test! {
    fn clip_grad_norm_inside_a_captured_step_matches_eager() {
        let run = |captured: bool| -> (Vec<f32>, Vec<f32>) {
            let w = Tensor::from_vec(W0.to_vec(), &[6]).unwrap().requires_grad(true);
            let opt = RefCell::new(Sgd::new(vec![w.clone()], 0.1));
            let body = || {
                let loss = (&w * &w * &w).sum();
                loss.backward();
                let norm = clip_grad_norm(std::slice::from_ref(&w), 2.0);
                opt.borrow_mut().step();
                norm
            };
            let mut norms = Vec::new();
            if captured {
                let mut step = capture(|_: &[Tensor]| vec![body()]);
                for _ in 0..4 {
                    w.zero_grad();
                    norms.push(step.run(&[]).unwrap()[0].item::<f32>().unwrap());
                }
                assert_eq!(step.recordings(), 1);
            } else {
                for _ in 0..4 {
                    w.zero_grad();
                    let norm = body();
                    mark_step().unwrap();
                    norms.push(norm.item::<f32>().unwrap());
                }
            }
            (norms, values(&w))
        };
        let (eager_norms, eager_w) = run(false);
        let (norms, w) = run(true);
        assert!(eager_norms[0] > 2.0, "the first steps clip: {eager_norms:?}");
        assert_close(&norms, &eager_norms, 1e-6);
        assert_close(&w, &eager_w, 1e-6);
    }
}

backend_test! {
    fn a_warmup_then_cosine_sgd_run_equals_pytorchs() {
        // tests/fixtures/gen_checkpoint.py: PyTorch's SGD (momentum 0.9)
        // under LinearLR(0.1, 5) then CosineAnnealingLR(15, 0.001),
        // chained by SequentialLR, over 20 steps of an MSE loss.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sgd_schedule.safetensors");
        let f = lazyxla::safetensors::load(path).unwrap();
        let get = |n: &str| f.iter().find(|(k, _)| k == n).unwrap().1.clone();
        let model = lazyxla::nn::Linear::new(4, 3, 0);
        let start = [("weight".to_string(), get("weight0")), ("bias".into(), get("bias0"))];
        lazyxla::nn::load_state_dict(&model, &start, true).unwrap();
        use lazyxla::nn::Module;
        let mut opt = Sgd::new(model.parameters(), 0.1).momentum(0.9);
        let cosine = CosineAnnealingLr::new(&mut opt, 15, 0.001).unwrap();
        let mut sched = LinearWarmup::followed_by(&mut opt, 0.1, 5, cosine).unwrap();
        let (xs, ys) = (get("x").to_vec::<f32>().unwrap(), get("y").to_vec::<f32>().unwrap());
        let lrs = get("lrs").to_vec::<f64>().unwrap();
        let compiles = counter("UncachedCompile");
        for (step, want_lr) in lrs.iter().enumerate() {
            assert!((opt.lr() - want_lr).abs() <= 1e-15 * want_lr, "step {step}: {} vs {want_lr}", opt.lr());
            // Each step's batch uploaded, as a data loader gives it.
            let x = Tensor::from_vec(xs[step * 32..(step + 1) * 32].to_vec(), &[8, 4]).unwrap();
            let y = Tensor::from_vec(ys[step * 24..(step + 1) * 24].to_vec(), &[8, 3]).unwrap();
            opt.zero_grad();
            lazyxla::nn::mse_loss(&model.forward(&x), &y).backward();
            opt.step();
            sched.step(&mut opt);
            mark_step().unwrap();
        }
        assert!(counter("UncachedCompile") - compiles <= 1, "the rate changed the program");
        let params = model.parameters();
        assert_close(&params[0].to_vec::<f32>().unwrap(), &get("weight").to_vec::<f32>().unwrap(), 1e-5);
        assert_close(&params[1].to_vec::<f32>().unwrap(), &get("bias").to_vec::<f32>().unwrap(), 1e-5);
    }
}

backend_test! {
    /// Gradients cleared right after the update are no results of the
    /// step's program (README, "Memory"): it returns the parameters and
    /// the loss only, where clearing them before the next step returns
    /// the gradients too, which the compile log says; both orders train
    /// the same values.
    fn gradients_cleared_after_the_step_are_no_results() {
        let run = |clear_after: bool| {
            let (w, b) = params(&[0.1, -0.2, 0.3, 0.4, -0.5, 0.6], &[0.05, -0.05]);
            let mut opt = Sgd::new(vec![w.clone(), b.clone()], 0.1);
            let x = Tensor::from_vec(vec![0.5f32, -1.0, 0.25, 1.0, 0.0, -0.5], &[2, 3]).unwrap();
            let mut outputs = Vec::new();
            for _ in 0..3 {
                if !clear_after {
                    opt.zero_grad();
                }
                let loss = (&(&w * &x) + &b).tanh().square().sum();
                loss.backward();
                opt.step();
                if clear_after {
                    opt.zero_grad();
                }
                lazyxla::debug::clear_compile_cache();
                mark_step().unwrap();
                let entry = lazyxla::debug::compile_log().last().unwrap().clone();
                // The log says which results are gradients, and why.
                assert_eq!(entry.gradients, if clear_after { 0 } else { 2 });
                let line = entry.to_string();
                assert_eq!(line.contains("2 of them gradients kept alive: `zero_grad()` after"), !clear_after, "{line}");
                outputs.push(entry.outputs);
                assert_eq!(w.grad().is_some(), !clear_after);
                drop(loss);
            }
            (values(&w), values(&b), outputs)
        };
        let (w1, b1, cleared_first) = run(false);
        let (w2, b2, cleared_after) = run(true);
        // Two programs: XLA may fuse them differently.
        assert_close(&w1, &w2, 1e-6);
        assert_close(&b1, &b2, 1e-6);
        // w, b and the loss, and the two gradients when they are kept.
        assert_eq!(cleared_after, vec![3; 3]);
        assert_eq!(cleared_first, vec![5; 3]);
    }
}
