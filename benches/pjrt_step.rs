//! One step on PJRT two ways: through lazyxla (trace, canonicalise, cache
//! lookup, execute) and by calling the same compiled executable directly
//! through the FFI with the same arguments (copies of lazyxla's argument
//! buffers, made once: lazyxla owns its buffers). The ratio is lazyxla's
//! overhead per step (target: 1.10x). Two lazyxla figures are reported:
//! the whole step (recording the ops, then `mark_step`) and the sync alone
//! (trace, canonicalise, cache lookup, execute, rebind) with the ops
//! recorded outside the timed region.
//!
//! `mark_step` starts a program and waits only for the previous one, so
//! the host prepares step k+1 while the device runs step k. The direct
//! call is timed both ways: blocking (execute, wait) and pipelined like
//! lazyxla (start, then wait for the previous execution). The ratios use
//! the pipelined call, the one that is the same work as a lazyxla step.
//!
//! A third lazyxla figure is the step wrapped in `lazyxla::capture`:
//! recorded once, then replayed (bind inputs, execute, rebind results)
//! without recording or tracing.
//!
//! Cases: a 2-layer MLP forward (batch 128, 784-512-10) and the
//! dynamic-zone example (t1 5x5 of 0/1, t2 = t1.nonzero(),
//! t3 = t2.pow(2.0), t4 = t3.sum(), t5 = t4 + 2.0). A third group,
//! `masked_select/N`, times the device-side packing; run it with
//! `LAZYXLA_PJRT_PACK=doubling|window|sort` to compare the strategies.
//! `topk/100000` times `topk(10)` of 100,000 scores.
//!
//! Needs a PJRT plugin (see `Device::pjrt`); without one it prints a skip.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use lazyxla::debug::Recorder;
use lazyxla::{mark_step, DType, Device, Tensor};
use std::time::{Duration, Instant};

/// Runs `step` once through lazyxla to compile and record it, then
/// returns closures that run the recorded executable directly: blocking,
/// and pipelined (start this execution, then wait for the previous one).
fn direct_of(step: &dyn Fn(), recorder: &Recorder) -> (impl Fn(), impl Fn()) {
    use lazyxla::debug::pjrt_ffi::{Buffer, Event};
    use std::cell::RefCell;
    recorder.start();
    step();
    let last = recorder.last().pop().expect("a recorded execution");
    let (exe, args) = (last.exe, last.args);
    recorder.stop();
    let (exe2, args2) = (exe.clone(), args.clone());
    let blocking = move || {
        let refs: Vec<&Buffer> = args.iter().map(|b| &**b).collect();
        black_box(exe.execute(&refs).unwrap());
    };
    let in_flight: RefCell<Option<(Vec<Buffer>, Event)>> = RefCell::new(None);
    let pipelined = move || {
        let refs: Vec<&Buffer> = args2.iter().map(|b| &**b).collect();
        let started = exe2.execute_async(&refs).unwrap();
        if let Some((out, done)) = in_flight.replace(Some(started)) {
            done.wait().unwrap();
            black_box(out);
        }
    };
    (blocking, pipelined)
}

/// Rounds of the side-by-side comparison in [`compare`].
const ROUNDS: usize = 25;

/// The middle value (of an odd count; the upper middle otherwise).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Mean time per call of `f` over about `budget`.
fn mean(f: &dyn Fn(), budget: Duration) -> Duration {
    for _ in 0..20 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < budget {
        f();
        n += 1;
    }
    start.elapsed() / n
}

/// Mean time of `mark_step()` alone (trace, canonicalise, key, cache
/// lookup, execute, rebind) over about `budget`, the ops of each step
/// recorded by `record` outside the timed region.
fn mean_sync(record: &dyn Fn() -> Vec<Tensor>, budget: Duration) -> Duration {
    for _ in 0..20 {
        let t = record();
        mark_step().unwrap();
        black_box(t);
    }
    let (start, mut timed, mut n) = (Instant::now(), Duration::ZERO, 0u32);
    while start.elapsed() < budget {
        let t = record();
        let s = Instant::now();
        mark_step().unwrap();
        timed += s.elapsed();
        black_box(t);
        n += 1;
    }
    timed / n
}

/// Compares a step (`record` the ops, then `mark_step`) with the direct
/// FFI call: the whole step, the sync alone, and the same step captured
/// once with `lazyxla::capture` and replayed.
fn compare(
    c: &mut Criterion,
    (device, recorder): (&Device, &Recorder),
    name: &str,
    record: &dyn Fn() -> Vec<Tensor>,
) {
    device.scoped(|| {
        let step = || {
            let t = record();
            mark_step().unwrap();
            black_box(t);
        };
        let (direct, pipelined) = direct_of(&step, recorder);
        let captured = std::cell::RefCell::new(lazyxla::capture(|_: &[Tensor]| record()));
        let replay = || {
            black_box(captured.borrow_mut().run(&[]).unwrap());
        };
        let mut g = c.benchmark_group(name);
        g.bench_function("lazyxla", |b| b.iter(step));
        g.bench_function("lazyxla_captured", |b| b.iter(replay));
        g.bench_function("direct_ffi_blocking", |b| b.iter(&direct));
        g.bench_function("direct_ffi_pipelined", |b| b.iter(&pipelined));
        g.finish();
        // Side by side in short alternating rounds, so that machine noise
        // hits all five alike. Each ratio is the median of the rounds'
        // ratios: a round that a neighbour's load slowed moves a mean, not
        // a median (on a shared 2-core machine, means of a few long rounds
        // swung by +-0.03 between runs).
        let budget = Duration::from_millis(100);
        let mut us: [Vec<f64>; 5] = Default::default();
        for _ in 0..ROUNDS {
            let round = [
                mean(&step, budget),
                mean_sync(record, budget),
                mean(&replay, budget),
                mean(&direct, budget),
                mean(&pipelined, budget),
            ];
            for (times, t) in us.iter_mut().zip(round) {
                times.push(t.as_secs_f64() * 1e6);
            }
        }
        let ratio = |k: usize, base: usize| {
            median(us[k].iter().zip(&us[base]).map(|(a, b)| a / b).collect())
        };
        let [l, s, r, d, p] = us.clone().map(median);
        println!(
            "RATIO {name}: whole step (record ops + sync) {l:.1} us = {:.3}x; sync only (trace, canonicalise, cache lookup, execute) {s:.1} us = {:.3}x; captured step replayed {r:.1} us = {:.3}x; direct FFI pipelined {p:.1} us, blocking {d:.1} us (whole step = {:.3}x blocking); medians of {ROUNDS} alternating rounds",
            ratio(0, 4),
            ratio(1, 4),
            ratio(2, 4),
            ratio(0, 3),
        );
        assert_eq!(captured.borrow().recordings(), 1, "the captured step replays");
    });
}

fn seeded(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

/// Device data: uploaded once, outside the timed steps.
fn param(v: Vec<f32>, shape: &[usize]) -> Tensor {
    let t = Tensor::from_vec(v, shape).unwrap();
    let t = &t + 0.0;
    mark_step().unwrap();
    t
}

fn benches(c: &mut Criterion) {
    // The steps run on a device that can record its executions, so the
    // direct calls run exactly what lazyxla ran.
    let (device, recorder) = match Device::pjrt().and_then(|d| lazyxla::debug::pjrt_recording(&d)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("SKIPPED: no PJRT plugin: {e}");
            return;
        }
    };
    let (x, w1, b1, w2, b2) = device.scoped(|| {
        (
            param(seeded(128 * 784, 1), &[128, 784]),
            param(seeded(784 * 512, 2), &[784, 512]),
            param(seeded(512, 3), &[512]),
            param(seeded(512 * 10, 4), &[512, 10]),
            param(seeded(10, 5), &[10]),
        )
    });
    let mlp = || {
        let h = (x.matmul(&w1) + &b1).relu();
        vec![h.matmul(&w2) + &b2]
    };
    compare(c, (&device, &recorder), "mlp_784_512_10_b128", &mlp);

    let t1 = device.scoped(|| {
        let v: Vec<f32> = (0..25).map(|i| ((i * 7) % 3 == 0) as u8 as f32).collect();
        param(v, &[5, 5])
    });
    let zone = || {
        let t2 = t1.nonzero();
        let t3 = t2.to_dtype(DType::F32).pow(2.0);
        let t4 = t3.sum();
        let t5 = &t4 + 2.0;
        vec![t2, t3, t4, t5]
    };
    compare(c, (&device, &recorder), "dynamic_zone_5x5", &zone);

    let mut g = c.benchmark_group("masked_select");
    for n in [1_000usize, 10_000, 100_000] {
        let x = device.scoped(|| param(seeded(n, 7), &[n]));
        let step = || {
            let s = x.masked_select(&x.gt_scalar(0.0)).sum();
            mark_step().unwrap();
            black_box(s);
        };
        device.scoped(|| {
            let (direct, _) = direct_of(&step, &recorder);
            g.bench_function(format!("{n}"), |b| b.iter(&direct));
        });
    }
    g.finish();

    // The 10 largest of 100,000 scores (one stable stablehlo.sort, a slice
    // and a gather): the compiled executable alone, and the whole lazyxla
    // step (record, sync, execute).
    let mut g = c.benchmark_group("topk");
    let n = 100_000usize;
    let scores = device.scoped(|| param(seeded(n, 11), &[n]));
    let step = || {
        let (v, i) = scores.topk(10, 0, true);
        mark_step().unwrap();
        black_box((v, i));
    };
    device.scoped(|| {
        let (direct, _) = direct_of(&step, &recorder);
        g.bench_function(format!("{n}/direct"), |b| b.iter(&direct));
        g.bench_function(format!("{n}/lazyxla"), |b| b.iter(step));
    });
    g.finish();
}

criterion_group! {
    name = pjrt_step;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(pjrt_step);
