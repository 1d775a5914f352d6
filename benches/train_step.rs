//! One training step (forward, backward, Adam update, `mark_step`) of
//! `train_mlp` at batch 128, 784-512-512-10, and of `train_detector`, on the
//! default device (XLA when a PJRT plugin is installed). Reports the step
//! time and lazyxla's own share: the time outside the backend's execute
//! call (tracing, canonicalising, hashing, cache lookup, rebinding),
//! measured side by side in the same run.
//!
//! Run: `cargo bench --bench train_step`

#[allow(dead_code)]
#[path = "../examples/train_detector.rs"]
mod detector;

use criterion::{criterion_group, criterion_main, Criterion};
use lazyxla::nn::{self, Linear, Module, Relu, Sequential};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, metrics, Tensor};
use std::time::{Duration, Instant};

fn report_share(name: &str, total: Duration, execute: Duration) {
    let share = 1.0 - execute.as_secs_f64() / total.as_secs_f64();
    println!(
        "{name}: lazyxla's share of the step (outside execute) = {:.1}% (target <= 10%)",
        100.0 * share
    );
}

/// Runs `steps` steps and returns (wall time, time inside execute).
fn measure(steps: u64, mut step: impl FnMut()) -> (Duration, Duration) {
    let before = metrics::timer_total("ExecuteTime");
    let start = Instant::now();
    for _ in 0..steps {
        step();
    }
    (
        start.elapsed(),
        metrics::timer_total("ExecuteTime") - before,
    )
}

fn mlp_step(c: &mut Criterion) {
    let net = Sequential::new()
        .add(Linear::new(784, 512, 1))
        .add(Relu)
        .add(Linear::new(512, 512, 2))
        .add(Relu)
        .add(Linear::new(512, 10, 3));
    let mut opt = Adam::new(net.parameters(), 1e-3);
    let x = Tensor::randn(&[128, 784], 9);
    let y = Tensor::from_vec((0..128).map(|i| (i % 10) as i64).collect(), &[128]).unwrap();
    let mut step = || {
        opt.zero_grad();
        let loss = nn::cross_entropy(&net.forward(&x), &y);
        loss.backward();
        opt.step();
        mark_step().unwrap();
    };
    step(); // compile
    println!("mlp step on {}", lazyxla::Device::default().name());
    let (mut total, mut exec) = (Duration::ZERO, Duration::ZERO);
    c.bench_function("train_mlp_step_784_512_512_10_b128", |b| {
        b.iter_custom(|iters| {
            let (t, e) = measure(iters, &mut step);
            total += t;
            exec += e;
            t
        })
    });
    report_share("train_mlp", total, exec);
}

fn detector_step(c: &mut Criterion) {
    let model = detector::Detector::new(3);
    let mut opt = Adam::new(model.parameters(), 0.02);
    let images: Vec<_> = (0..16).map(detector::image).collect();
    let mut k = 0;
    let mut step = || {
        let img = &images[k % images.len()];
        k += 1;
        let _ = detector::train_step(&model, &mut opt, img);
        mark_step().unwrap();
    };
    step();
    let (mut total, mut exec) = (Duration::ZERO, Duration::ZERO);
    c.bench_function("train_detector_step", |b| {
        b.iter_custom(|iters| {
            let (t, e) = measure(iters, &mut step);
            total += t;
            exec += e;
            t
        })
    });
    report_share("train_detector", total, exec);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = mlp_step, detector_step
}
criterion_main!(benches);
