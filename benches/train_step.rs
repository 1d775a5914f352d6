//! One training step (forward, backward, Adam update, `mark_step`) of
//! `train_mlp` at batch 128, 784-512-512-10, and of `train_detector`, on the
//! default device (XLA when a PJRT plugin is installed). Reports the step
//! time and lazyxla's own share: the part of the step's wall time that the
//! step's executable, run alone through the FFI with the same arguments,
//! does not account for (recording, tracing, hashing, cache lookup,
//! rebinding, freeing, as far as they do not overlap the device's work).
//! Both are measured side by side in the same run. Each step is measured
//! twice: recorded lazily every iteration, and captured once with
//! `lazyxla::capture` and replayed.
//!
//! Run: `cargo bench --bench train_step`

#[allow(dead_code)]
#[path = "../examples/train_detector.rs"]
mod detector;

use criterion::{criterion_group, criterion_main, Criterion};
use lazyxla::debug::Recorder;
use lazyxla::nn::{self, Linear, Module, Relu, Sequential};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, Device, Tensor};
use std::time::{Duration, Instant};

/// Mean time per execution of the step's own executable, run directly
/// through the FFI: blocking (start, wait) and pipelined as `mark_step`
/// runs it (start, then wait for the previous execution) with the last
/// step's argument buffers, and pipelined and chained: each execution's
/// results that the next step reads (updated parameters, optimizer state)
/// fed back as its arguments, as consecutive training steps run. Only the
/// chained run has the steps' true dependency: without it XLA may overlap
/// two executions, which no training loop can do.
struct Alone {
    blocking: Duration,
    pipelined: Duration,
    chained: Duration,
}

fn executable_alone(recorder: &Recorder, run_step: &mut dyn FnMut(), steps: u32) -> Alone {
    use lazyxla::debug::pjrt_ffi::{Buffer, Event};
    recorder.start();
    run_step();
    run_step();
    let mut last = recorder.last();
    recorder.stop();
    assert_eq!(last.len(), 2, "two PJRT executions");
    let (second, first) = (last.pop().unwrap(), last.pop().unwrap());
    // Argument i of a step is result j of the previous one.
    let feed: Vec<Option<usize>> = second
        .arg_ids
        .iter()
        .map(|a| first.output_ids.iter().position(|o| o == a))
        .collect();
    let (exe, args) = (second.exe, second.args);
    lazyxla::Device::default().synchronize().unwrap();
    let refs: Vec<&Buffer> = args.iter().map(|b| &**b).collect();
    let start = Instant::now();
    for _ in 0..steps {
        exe.execute(&refs).unwrap();
    }
    let blocking = start.elapsed() / steps;
    let pipelined_run = |chain: bool| {
        let start = Instant::now();
        let mut in_flight: Option<Event> = None;
        let mut previous: Option<Vec<Buffer>> = None;
        for _ in 0..steps {
            let refs: Vec<&Buffer> = args
                .iter()
                .zip(&feed)
                .map(|(a, f)| match (f, &previous, chain) {
                    (Some(j), Some(prev), true) => &prev[*j],
                    _ => &**a,
                })
                .collect();
            let (out, done) = exe.execute_async(&refs).unwrap();
            drop(refs);
            if let Some(previous_done) = in_flight.replace(done) {
                previous_done.wait().unwrap();
            }
            // The results stay alive while the next execution reads them.
            previous = Some(out);
        }
        if let Some(done) = in_flight {
            done.wait().unwrap();
        }
        start.elapsed() / steps
    };
    let pipelined = pipelined_run(false);
    let chained = pipelined_run(true);
    Alone {
        blocking,
        pipelined,
        chained,
    }
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

/// Rounds per comparison: this shared 2-core machine swings single rounds
/// by ±20%, so the report gives medians and the range.
const ROUNDS: usize = 11;

/// Times the step and its executable alone, interleaved in rounds so that
/// machine noise hits both alike, and prints lazyxla's share: the part of
/// the step's wall time not explained by the executable.
fn report_share(name: &str, recorder: Option<&Recorder>, run_step: &mut dyn FnMut(), steps: u32) {
    let Some(recorder) = recorder else {
        println!("{name}: no PJRT plugin, so no executable to compare with");
        return;
    };
    // Per round, in microseconds: [step, chained, pipelined, blocking].
    let rounds: Vec<[f64; 4]> = (0..ROUNDS)
        .map(|_| {
            let step = step_time(run_step, steps);
            let a = executable_alone(recorder, run_step, steps);
            [step, a.chained, a.pipelined, a.blocking].map(|d| d.as_secs_f64() * 1e6)
        })
        .collect();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let time = |i: usize| median(rounds.iter().map(|r| r[i]).collect()).0;
    let share = |i: usize| {
        let (m, lo, hi) = median(rounds.iter().map(|r| 100.0 * (1.0 - r[i] / r[0])).collect());
        format!("{m:.1}% ({lo:.1}..{hi:.1})")
    };
    println!(
        "{name}: step {:.1} us; executable alone {:.1} us chained, {:.1} us pipelined, \
         {:.1} us blocking (medians of {ROUNDS} interleaved rounds); lazyxla's share of the step \
         (rounds' range) = {} against the chained executable, {} against the pipelined one, \
         {} against the blocking one (target <= 10%)",
        time(0),
        time(1),
        time(2),
        time(3),
        share(1),
        share(2),
        share(3),
    );
}

/// Runs `bench` on the default device wrapped so that its executions can
/// be recorded (with the recorder), or on the default device as it is
/// when that is not a PJRT device.
fn on_recording_device(bench: impl FnOnce(Option<&Recorder>)) {
    match lazyxla::debug::pjrt_recording(&Device::default()) {
        Ok((device, recorder)) => device.scoped(|| bench(Some(&recorder))),
        Err(_) => bench(None),
    }
}

fn mlp_step(c: &mut Criterion) {
    on_recording_device(|rec| mlp_step_on(c, rec));
}

fn mlp_step_on(c: &mut Criterion, rec: Option<&Recorder>) {
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
    report_share("train_mlp", rec, &mut step, 200);

    // The same step captured once and replayed.
    let mut captured = lazyxla::capture(|x: &[Tensor]| {
        opt.zero_grad();
        let loss = nn::cross_entropy(&net.forward(&x[0]), &x[1]);
        loss.backward();
        opt.step();
        vec![loss]
    });
    let inputs = [x.clone(), y.clone()];
    let mut step = || {
        let _ = captured.run(&inputs).unwrap();
    };
    step();
    step();
    c.bench_function("train_mlp_step_captured", |b| b.iter(&mut step));
    report_share("train_mlp captured", rec, &mut step, 200);
    assert!(captured.recordings() <= 2, "the captured step replays");
}

fn detector_step(c: &mut Criterion) {
    on_recording_device(|rec| detector_step_on(c, rec));
}

fn detector_step_on(c: &mut Criterion, rec: Option<&Recorder>) {
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
    report_share("train_detector", rec, &mut step, 2000);

    // The same step captured once and replayed with each image as inputs.
    let mut captured = lazyxla::capture(|x: &[Tensor]| {
        let (loss, positives) =
            detector::train_step(&model, &mut opt, &detector::Image::from_inputs(x));
        vec![loss, positives]
    });
    let inputs: Vec<[Tensor; 3]> = images.iter().map(detector::Image::inputs).collect();
    let mut step = || {
        let _ = captured.run(&inputs[k % inputs.len()]).unwrap();
        k += 1;
    };
    step();
    step();
    c.bench_function("train_detector_step_captured", |b| b.iter(&mut step));
    report_share("train_detector captured", rec, &mut step, 2000);
    assert!(captured.recordings() <= 2, "the captured step replays");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = mlp_step, detector_step
}
criterion_main!(benches);
