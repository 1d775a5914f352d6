//! How lazyxla's host-side costs grow with the size of the graph: a
//! synthetic program of N nodes, N from 1,000 to 200,000, timed for
//! recording (building the lazy graph), tracing and keying (what a
//! repeated lazy step pays to find its compiled program), lowering to
//! StableHLO text, XLA's compile (up to `LAZYXLA_SCALING_COMPILE_MAX`
//! nodes, default 20,000: XLA's own time, for scale) and a captured
//! step's call once compiled, beside the same program executed directly
//! through the FFI, the two in alternating rounds: the median of the
//! rounds' differences is what lazyxla adds to a replay ("share"). It
//! must not grow with the number of nodes: a replay checks the inputs'
//! signature, gathers the parameters, runs the program and binds its
//! results, and never walks the graph. It grows with the program's
//! parameters and results (the stack's weights, gradients and updates:
//! one each per state tensor), each released or rebound per call.
//!
//! Two graph shapes:
//! - `chain`: one long elementwise chain on a `[64]` vector (mul, add,
//!   tanh in turn): the deepest graph for its size;
//! - `mlp`: a stack of `Linear(32, 32)` + ReLU layers, forward, backward
//!   and an SGD update, on a batch of 8: a model stacked deeper, with the
//!   fan-in and fan-out a real step has.
//!
//! Run: `cargo bench --bench scaling` (PJRT for compile and the captured
//! step; the other columns need no plugin). Prints
//! `RESULT scaling <shape> n=<nodes> record_ns=.. trace_ns=.. lower_ns=..`
//! (per node) `compile_ms=.. captured_call_us=.. direct_call_us=..
//! share_us=..`, then one Markdown table for `benches/README.md`.
//! `LAZYXLA_SCALING_SIZES=1000,5000` picks the sizes (approximate node
//! counts); `LAZYXLA_SCALING_SHAPES=mlp` one graph shape (`chain`, `mlp`);
//! `LAZYXLA_SCALING_REPLAYS=N` times each captured call N times (default
//! 21 for the chain, 11 for the stack), enough to profile it with `perf`.

use lazyxla::debug::Recorder;
use lazyxla::nn::{Linear, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{capture, debug, Device, Tensor};
use std::time::{Duration, Instant};

/// One measured size.
struct Row {
    shape: &'static str,
    nodes: usize,
    record: Duration,
    trace: Duration,
    lower: Duration,
    compile: Option<Duration>,
    replay: Option<Replay>,
}

/// What a captured call costs, beside the same program executed directly.
#[derive(Clone, Copy)]
struct Replay {
    /// A captured step's call (run and output read), the median.
    call: Duration,
    /// The program executed directly through the FFI, blocking, the median.
    direct: Duration,
    /// The median of each round's `call - direct` (a round runs one of
    /// each, back to back): steadier than the difference of the medians
    /// when the machine's load drifts during the measurement.
    share: Duration,
}

/// Times a captured step's call (`run`: run and output read) and the same
/// program executed directly through the FFI, in `rounds` alternating
/// rounds.
fn replay_costs(rounds: usize, recorder: &Recorder, run: &mut dyn FnMut()) -> Replay {
    run(); // compiles
    recorder.start();
    run();
    let last = recorder.last().pop().expect("a recorded execution");
    recorder.stop();
    let refs: Vec<_> = last.args.iter().map(|b| &**b).collect();
    let (mut calls, mut directs, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        run();
        let call = t.elapsed();
        let t = Instant::now();
        std::hint::black_box(last.exe.execute(&refs).unwrap());
        let direct = t.elapsed();
        calls.push(call);
        directs.push(direct);
        shares.push(call.as_secs_f64() - direct.as_secs_f64());
    }
    calls.sort();
    directs.sort();
    shares.sort_by(f64::total_cmp);
    Replay {
        call: calls[rounds / 2],
        direct: directs[rounds / 2],
        // A negative share (the direct run slower in most rounds) is noise.
        share: Duration::from_secs_f64(shares[rounds / 2].max(0.0)),
    }
}

/// Builds the chain's graph: about three nodes per `links`.
fn chain(x: &Tensor, links: usize) -> Tensor {
    let mut h = x.clone();
    for i in 0..links {
        h = match i % 3 {
            0 => &h * 1.0001,
            1 => &h + 0.001,
            _ => h.tanh(),
        };
    }
    h
}

/// A stack of `depth` layers and its optimizer.
struct Stack {
    layers: Vec<Linear>,
    opt: Sgd,
}

impl Stack {
    fn new(depth: usize) -> Stack {
        let layers: Vec<Linear> = (0..depth).map(|i| Linear::new(32, 32, i as u64)).collect();
        let params = layers.iter().flat_map(|l| l.parameters()).collect();
        Stack {
            layers,
            opt: Sgd::new(params, 1e-3),
        }
    }

    /// Records forward, backward and the update; returns the loss.
    fn step(&mut self, x: &Tensor) -> Tensor {
        self.opt.zero_grad();
        let mut h = x.clone();
        for l in &self.layers {
            h = l.forward(&h).relu();
        }
        let loss = h.square().mean();
        loss.backward();
        self.opt.step();
        loss
    }

    /// Everything the step left pending: the loss and the updated
    /// parameters.
    fn pending(&self, loss: &Tensor) -> Vec<Tensor> {
        let mut v = vec![loss.clone()];
        v.extend(self.layers.iter().flat_map(|l| l.parameters()));
        v
    }
}

/// Rounds of the captured and the direct call (`default` unless
/// `LAZYXLA_SCALING_REPLAYS` is set).
fn replays(default: usize) -> usize {
    std::env::var("LAZYXLA_SCALING_REPLAYS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
        .max(1)
}

fn compile_max() -> usize {
    std::env::var("LAZYXLA_SCALING_COMPILE_MAX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000)
}

/// The median of `rounds` timings of `f`.
fn median(rounds: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut v: Vec<Duration> = (0..rounds).map(|_| f()).collect();
    v.sort();
    v[rounds / 2]
}

fn measure_chain(target: usize, (device, recorder): (&Device, &Recorder)) -> Row {
    let links = target;
    let x = Tensor::from_vec(vec![0.5f32; 64], &[64]).unwrap();
    let record = median(3, || {
        let t = Instant::now();
        let y = chain(&x, links);
        let e = t.elapsed();
        drop(y);
        e
    });
    let y = chain(&x, links);
    let (trace, lower, nodes) = host(&[&y]);
    let (compile, replay) = if nodes <= compile_max() {
        let text = debug::stablehlo_text(&[&y]).unwrap();
        let t = Instant::now();
        debug::pjrt_compile_text(device, &text).unwrap();
        let compile = t.elapsed();
        let mut step = capture(|i: &[Tensor]| vec![chain(&i[0], links)]);
        let replay = replay_costs(replays(21), recorder, &mut || {
            let out = step.run(std::slice::from_ref(&x)).unwrap();
            out[0].to_vec::<f32>().unwrap();
        });
        (Some(compile), Some(replay))
    } else {
        (None, None)
    };
    Row {
        shape: "chain",
        nodes,
        record,
        trace,
        lower,
        compile,
        replay,
    }
}

fn measure_mlp(target: usize, (device, recorder): (&Device, &Recorder)) -> Row {
    // About 90 nodes a layer with backward and the update (counted below).
    let depth = (target / 90).max(1);
    let x = Tensor::from_vec(vec![0.1f32; 8 * 32], &[8, 32]).unwrap();
    let mut stack = Stack::new(depth);
    let record = median(3, || {
        let t = Instant::now();
        let loss = stack.step(&x);
        let e = t.elapsed();
        drop(loss);
        e
    });
    let loss = stack.step(&x);
    let pending = stack.pending(&loss);
    let refs: Vec<&Tensor> = pending.iter().collect();
    let (trace, lower, nodes) = host(&refs);
    let compile = if nodes <= compile_max() {
        let text = debug::stablehlo_text(&refs).unwrap();
        let t = Instant::now();
        debug::pjrt_compile_text(device, &text).unwrap();
        Some(t.elapsed())
    } else {
        None
    };
    drop(refs);
    drop((loss, pending));
    // The pending update is dropped unsynced; a fresh stack keeps the
    // captured step's first call from paying for it.
    let replay = compile.map(|_| {
        let mut stack = Stack::new(depth);
        let mut step = capture(|i: &[Tensor]| vec![stack.step(&i[0])]);
        replay_costs(replays(11), recorder, &mut || {
            let out = step.run(std::slice::from_ref(&x)).unwrap();
            out[0].to_vec::<f32>().unwrap();
        })
    });
    Row {
        shape: "mlp",
        nodes,
        record,
        trace,
        lower,
        compile,
        replay,
    }
}

/// Trace and lowering costs, the median of three.
fn host(roots: &[&Tensor]) -> (Duration, Duration, usize) {
    let runs: Vec<_> = (0..3).map(|_| debug::host_costs(roots).unwrap()).collect();
    let mut traces: Vec<_> = runs.iter().map(|r| r.0).collect();
    let mut lowers: Vec<_> = runs.iter().map(|r| r.1).collect();
    traces.sort();
    lowers.sort();
    (traces[1], lowers[1], runs[0].2)
}

/// Microseconds, or `-`.
fn us(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.0}", d.as_secs_f64() * 1e6))
}

fn per_node(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e9 / n as f64
}

fn main() {
    let (device, recorder) = Device::pjrt()
        .and_then(|d| debug::pjrt_recording(&d))
        .expect("the scaling benchmark compiles on a PJRT plugin");
    let sizes: Vec<usize> = std::env::var("LAZYXLA_SCALING_SIZES")
        .ok()
        .map(|s| s.split(',').map(|v| v.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| vec![1_000, 5_000, 20_000, 50_000, 100_000, 200_000]);
    let shapes = std::env::var("LAZYXLA_SCALING_SHAPES").unwrap_or_else(|_| "chain,mlp".into());
    let wants = |shape: &str| shapes.split(',').any(|s| s.trim() == shape);
    let mut rows = Vec::new();
    for &n in &sizes {
        // The chain's links are single nodes; its count is close to n.
        device.scoped(|| {
            if wants("chain") {
                rows.push(measure_chain(n, (&device, &recorder)));
            }
            if wants("mlp") {
                rows.push(measure_mlp(n, (&device, &recorder)));
            }
        });
    }
    for r in &rows {
        println!(
            "RESULT scaling {} n={} record_ns={:.0} trace_ns={:.0} lower_ns={:.0} compile_ms={} captured_call_us={} direct_call_us={} share_us={}",
            r.shape,
            r.nodes,
            per_node(r.record, r.nodes),
            per_node(r.trace, r.nodes),
            per_node(r.lower, r.nodes),
            r.compile
                .map_or("-".into(), |d| format!("{:.0}", d.as_secs_f64() * 1e3)),
            us(r.replay.map(|p| p.call)),
            us(r.replay.map(|p| p.direct)),
            us(r.replay.map(|p| p.share)),
        );
    }
    println!();
    println!("| graph | nodes | record ns/node | trace+key ns/node | lower ns/node | XLA compile | captured call | lazyxla's share of it |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} |",
            r.shape,
            r.nodes,
            per_node(r.record, r.nodes),
            per_node(r.trace, r.nodes),
            per_node(r.lower, r.nodes),
            r.compile
                .map_or("–".into(), |d| format!("{:.2} s", d.as_secs_f64())),
            r.replay
                .map_or("–".into(), |p| format!("{} µs", us(Some(p.call)))),
            r.replay
                .map_or("–".into(), |p| format!("{} µs", us(Some(p.share)))),
        );
    }
}
