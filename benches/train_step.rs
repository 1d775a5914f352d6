//! One training step (forward, backward, Adam update, `mark_step`) of
//! `train_mlp` at batch 128, 784-512-512-10, and of `train_detector`, on the
//! default device (XLA when a PJRT plugin is installed). Reports the step
//! time and lazyxla's own share: the part of the step's wall time that the
//! step's executable, run alone through the FFI with the same buffers,
//! does not account for (recording, tracing, hashing, cache lookup,
//! rebinding, freeing, as far as they do not overlap the device's work).
//! Both are measured side by side in the same run.
//!
//! Run: `cargo bench --bench train_step`

#[allow(dead_code)]
#[path = "../examples/train_detector.rs"]
mod detector;

use criterion::{criterion_group, criterion_main, Criterion};
use lazyxla::nn::{self, Linear, Module, Relu, Sequential};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, Tensor};
use std::time::{Duration, Instant};

/// Mean time per execution of the step's own executable, run directly
/// through the FFI with the last step's argument buffers: blocking
/// (start, wait) and pipelined as `mark_step` runs it (start, then wait
/// for the previous execution).
fn executable_alone(run_step: &mut dyn FnMut(), steps: u32) -> (Duration, Duration) {
    use lazyxla::debug::pjrt_ffi::Buffer;
    lazyxla::debug::pjrt_record_last(true);
    run_step();
    let (exe, args) = lazyxla::debug::pjrt_last_execution().expect("a PJRT execution");
    lazyxla::debug::pjrt_record_last(false);
    lazyxla::Device::default().synchronize().unwrap();
    let refs: Vec<&Buffer> = args.iter().map(|b| &**b).collect();
    let start = Instant::now();
    for _ in 0..steps {
        exe.execute(&refs).unwrap();
    }
    let blocking = start.elapsed() / steps;
    let start = Instant::now();
    let mut in_flight = None;
    for _ in 0..steps {
        let started = exe.execute_async(&refs).unwrap();
        if let Some((_, done)) = in_flight.replace(started) {
            done.wait().unwrap();
        }
    }
    if let Some((_, done)) = in_flight {
        done.wait().unwrap();
    }
    (blocking, start.elapsed() / steps)
}

/// Mean wall time per step over `steps` steps, waiting for the last one.
fn step_time(run_step: &mut dyn FnMut(), steps: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..steps {
        run_step();
    }
    lazyxla::Device::default().synchronize().unwrap();
    start.elapsed() / steps
}

/// Times the step and its executable alone, interleaved in rounds so that
/// machine noise hits both alike, and prints lazyxla's share: the part of
/// the step's wall time not explained by the executable.
fn report_share(name: &str, run_step: &mut dyn FnMut(), steps: u32) {
    if lazyxla::Device::default().name() == "reference" {
        println!("{name}: no PJRT plugin, so no executable to compare with");
        return;
    }
    // Per round: (step, pipelined, blocking) in microseconds.
    let rounds: Vec<(f64, f64, f64)> = (0..7)
        .map(|_| {
            let step = step_time(run_step, steps);
            let (blocking, pipelined) = executable_alone(run_step, steps);
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            (us(step), us(pipelined), us(blocking))
        })
        .collect();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let share = |exe: fn(&(f64, f64, f64)) -> f64| {
        median(
            rounds
                .iter()
                .map(|r| 100.0 * (1.0 - exe(r) / r.0))
                .collect(),
        )
    };
    let (step, _, _) = median(rounds.iter().map(|r| r.0).collect());
    let (pipelined, _, _) = median(rounds.iter().map(|r| r.1).collect());
    let (blocking, _, _) = median(rounds.iter().map(|r| r.2).collect());
    let (sp, sp_lo, sp_hi) = share(|r| r.1);
    let (sb, sb_lo, sb_hi) = share(|r| r.2);
    println!(
        "{name}: step {step:.1} us; executable alone {pipelined:.1} us pipelined, \
         {blocking:.1} us blocking (medians of 7 interleaved rounds); lazyxla's share \
         of the step = {sp:.1}% (rounds {sp_lo:.1}..{sp_hi:.1}) against the pipelined \
         executable, {sb:.1}% ({sb_lo:.1}..{sb_hi:.1}) against the blocking one \
         (target <= 10%)"
    );
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
    c.bench_function("train_mlp_step_784_512_512_10_b128", |b| b.iter(&mut step));
    report_share("train_mlp", &mut step, 200);
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
    c.bench_function("train_detector_step", |b| b.iter(&mut step));
    report_share("train_detector", &mut step, 2000);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = mlp_step, detector_step
}
criterion_main!(benches);
