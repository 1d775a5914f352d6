//! What data parallelism costs on one machine: a training step of an MLP
//! on one global batch, run by `DataParallel` on 1, 2 and 4 devices (one
//! program launched on all of them, the gradients combined by one
//! `all_reduce`), against the same shards run one after another on one
//! device (the same per-shard step, launched N times, no collective).
//! Also the same step with the gradients packed into one vector for one
//! `all_reduce` in the IR (`DataParallel::packed`; by default each
//! gradient gets its own and XLA combines them into one all-reduce), and
//! with no collective at all (each replica training alone: what the
//! reduction costs on top of the launch).
//! Two sizes: `small` (16-64-64-4, batch 64: launches and the collective
//! dominate) and `large` (128-512-512-16, batch 512: compute dominates).
//!
//! On the XLA CPU plugin the N devices share the machine's cores, so no
//! speed-up is expected: the ratio is the collective's overhead over N
//! launches (target: at most 1.2). Alternating rounds, medians; inputs
//! uploaded once, captured steps on both sides. Run on the PJRT plugin
//! when one loads, else the reference backend.
//!
//! `cargo bench --bench data_parallel` (`DP_ROUNDS=n` rounds, 15 when
//! unset; `DP_DEVICES=1,4` measures those device counts only).

#[path = "workloads/uniform.rs"]
mod uniform;

use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::Sgd;
use lazyxla::parallel::DataParallel;
use lazyxla::{capture, Device, Tensor};
use std::time::Instant;

const STEPS: usize = 10;

/// A workload: the MLP's widths and the global batch.
#[derive(Clone, Copy)]
struct Size {
    name: &'static str,
    batch: usize,
    input: usize,
    hidden: usize,
    out: usize,
}

const SIZES: [Size; 2] = [
    Size {
        name: "small",
        batch: 64,
        input: 16,
        hidden: 64,
        out: 4,
    },
    Size {
        name: "large",
        batch: 512,
        input: 128,
        hidden: 512,
        out: 16,
    },
];

struct Mlp {
    layers: [Linear; 3],
}

impl Mlp {
    fn new(s: Size) -> Mlp {
        Mlp {
            layers: [
                Linear::new(s.input, s.hidden, 1),
                Linear::new(s.hidden, s.hidden, 2),
                Linear::new(s.hidden, s.out, 3),
            ],
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.layers[0].forward(x).tanh();
        let h = self.layers[1].forward(&h).tanh();
        self.layers[2].forward(&h)
    }

    fn parameters(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(|l| l.parameters()).collect()
    }
}

fn batch(size: Size) -> (Tensor, Tensor) {
    let Size {
        batch, input, out, ..
    } = size;
    let mut next = uniform::uniform();
    let x: Vec<f32> = (0..batch * input).map(|_| next()).collect();
    let y: Vec<f32> = (0..batch * out).map(|_| next()).collect();
    (
        Tensor::from_vec(x, &[batch, input]).unwrap(),
        Tensor::from_vec(y, &[batch, out]).unwrap(),
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `STEPS` data-parallel steps; milliseconds per step.
fn dp_steps(step: &mut lazyxla::parallel::TrainStep<'_>, shards: &[Tensor], d: &Device) -> f64 {
    let t = Instant::now();
    for _ in 0..STEPS {
        step.run(shards).unwrap();
    }
    d.synchronize().unwrap();
    t.elapsed().as_secs_f64() * 1e3 / STEPS as f64
}

/// `STEPS` times the shards one after another (or once each, on the
/// device holding them); milliseconds per step.
fn seq_steps<F>(step: &mut lazyxla::CapturedStep<F>, parts: &[[Tensor; 2]], d: &Device) -> f64
where
    F: FnMut(&[Tensor]) -> Vec<Tensor>,
{
    let t = Instant::now();
    for _ in 0..STEPS {
        for p in parts {
            step.run(p).unwrap();
        }
    }
    d.synchronize().unwrap();
    t.elapsed().as_secs_f64() * 1e3 / STEPS as f64
}

/// Milliseconds per step, median over `rounds` rounds of `STEPS` steps,
/// of `n` replicas against `n` shards one after another on one device.
fn measure(size: Size, n: usize, rounds: usize) -> [f64; 4] {
    let (x, y) = batch(size);
    let rows = size.batch / n;

    // Data-parallel: one program on n devices.
    let dp = DataParallel::with_replicas(n).unwrap();
    let model = dp.scoped(|| Mlp::new(size));
    let params = model.parameters();
    let mut opt = dp.scoped(|| Sgd::new(params.clone(), 0.01));
    let shards = dp.shard(&[x.clone(), y.clone()]).unwrap();
    let mut dp_step = dp.train_step(&params, &mut opt, |b: &[Tensor]| {
        nn::mse_loss(&model.forward(&b[0]), &b[1])
    });

    // The same with every gradient packed into one vector in the IR.
    let packed_dp = DataParallel::with_replicas(n).unwrap().packed(true);
    let model_packed = packed_dp.scoped(|| Mlp::new(size));
    let params_packed = model_packed.parameters();
    let mut opt_packed = packed_dp.scoped(|| Sgd::new(params_packed.clone(), 0.01));
    let mut packed_step =
        packed_dp.train_step(&params_packed, &mut opt_packed, |b: &[Tensor]| {
            nn::mse_loss(&model_packed.forward(&b[0]), &b[1])
        });

    // The same per-replica step on the n devices at once, without the
    // collective (each replica trains alone): isolates the all_reduce.
    let alone = dp.scoped(|| Mlp::new(size));
    let mut alone_opt = dp.scoped(|| Sgd::new(alone.parameters(), 0.01));
    let mut alone_step = capture(|b: &[Tensor]| {
        use lazyxla::optim::Optimizer;
        alone_opt.zero_grad();
        let loss = nn::mse_loss(&alone.forward(&b[0]), &b[1]);
        loss.backward();
        alone_opt.step();
        vec![loss]
    });

    // The n shards one after another on one device.
    let device = Device::default();
    let single = Mlp::new(size);
    let mut single_opt = Sgd::new(single.parameters(), 0.01);
    let parts: Vec<[Tensor; 2]> = (0..n)
        .map(|k| [x.narrow(0, k * rows, rows), y.narrow(0, k * rows, rows)])
        .collect();
    lazyxla::mark_step().unwrap();
    let mut seq_step = capture(|b: &[Tensor]| {
        use lazyxla::optim::Optimizer;
        single_opt.zero_grad();
        let loss = nn::mse_loss(&single.forward(&b[0]), &b[1]);
        loss.backward();
        single_opt.step();
        vec![loss]
    });

    // Warm up: compile and record all three.
    let replicated = [[shards[0].clone(), shards[1].clone()]];
    dp_steps(&mut dp_step, &shards, dp.device());
    dp_steps(&mut packed_step, &shards, dp.device());
    dp.scoped(|| seq_steps(&mut alone_step, &replicated, dp.device()));
    seq_steps(&mut seq_step, &parts, &device);
    let (mut t_dp, mut t_packed, mut t_alone, mut t_seq) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        t_dp.push(dp_steps(&mut dp_step, &shards, dp.device()));
        t_packed.push(dp_steps(&mut packed_step, &shards, dp.device()));
        t_alone.push(dp.scoped(|| seq_steps(&mut alone_step, &replicated, dp.device())));
        t_seq.push(seq_steps(&mut seq_step, &parts, &device));
    }
    [t_dp, t_packed, t_alone, t_seq].map(median)
}

fn main() {
    let rounds = std::env::var("DP_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    // `DP_DEVICES=4` measures 4 devices only, `DP_DEVICES=1,4` two counts.
    let counts: Vec<usize> = std::env::var("DP_DEVICES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4]);
    let most = counts.iter().copied().max().unwrap_or(1);
    lazyxla::set_cpu_device_count(most).expect("the device count");
    println!(
        "data-parallel MLP steps on {} ({} devices)",
        Device::default().name(),
        lazyxla::devices().len()
    );
    println!("ms per step (medians); the ratios are to the shards one after another on one device");
    println!("| workload | devices | data-parallel | packed | no all_reduce | shards one after another | ratio | ratio packed |");
    println!("|---|---|---|---|---|---|---|---|");
    for size in SIZES {
        for &n in &counts {
            if n > lazyxla::devices().len() {
                continue;
            }
            let [dp, packed, alone, seq] = measure(size, n, rounds);
            println!(
                "| {} {}-{}-{}-{} x{} | {n} | {dp:.3} | {packed:.3} | {alone:.3} | {seq:.3} | {:.2} | {:.2} |",
                size.name,
                size.input,
                size.hidden,
                size.hidden,
                size.out,
                size.batch,
                dp / seq,
                packed / seq
            );
        }
    }
}
