//! What data parallelism costs on one machine: a training step of an MLP
//! on a global batch of 512 rows, run by `DataParallel` on 1, 2 and 4
//! devices (one program launched on all of them, the gradients combined
//! by one `all_reduce`), against the same shards run one after another on
//! one device (the same per-shard step, launched N times, no collective).
//!
//! On the XLA CPU plugin the N devices share the machine's cores, so no
//! speed-up is expected: the ratio is the collective's overhead over N
//! launches (target: at most 1.2). Alternating rounds, medians; inputs
//! uploaded once, captured steps on both sides. Run on the PJRT plugin
//! when one loads, else the reference backend.
//!
//! `cargo bench --bench data_parallel` (`DP_ROUNDS=n` rounds, 15 when
//! unset; `DP_DEVICES=1,4` measures those device counts only).

use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::Sgd;
use lazyxla::parallel::DataParallel;
use lazyxla::{capture, Device, Tensor};
use std::time::Instant;

const BATCH: usize = 512;
const IN: usize = 128;
const HIDDEN: usize = 512;
const OUT: usize = 16;
const STEPS: usize = 10;

struct Mlp {
    layers: [Linear; 3],
}

impl Mlp {
    fn new() -> Mlp {
        Mlp {
            layers: [
                Linear::new(IN, HIDDEN, 1),
                Linear::new(HIDDEN, HIDDEN, 2),
                Linear::new(HIDDEN, OUT, 3),
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

fn batch() -> (Tensor, Tensor) {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 2000) as f32 / 1000.0 - 1.0
    };
    let x: Vec<f32> = (0..BATCH * IN).map(|_| next()).collect();
    let y: Vec<f32> = (0..BATCH * OUT).map(|_| next()).collect();
    (
        Tensor::from_vec(x, &[BATCH, IN]).unwrap(),
        Tensor::from_vec(y, &[BATCH, OUT]).unwrap(),
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

/// `STEPS` times the shards one after another; milliseconds per step.
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
fn measure(n: usize, rounds: usize) -> (f64, f64) {
    let (x, y) = batch();
    let rows = BATCH / n;

    // Data-parallel: one program on n devices.
    let dp = DataParallel::with_replicas(n).unwrap();
    let model = dp.scoped(Mlp::new);
    let params = model.parameters();
    let mut opt = dp.scoped(|| Sgd::new(params.clone(), 0.01));
    let shards = dp.shard(&[x.clone(), y.clone()]).unwrap();
    let mut dp_step = dp.train_step(&params, &mut opt, |b: &[Tensor]| {
        nn::mse_loss(&model.forward(&b[0]), &b[1])
    });

    // The n shards one after another on one device.
    let device = Device::default();
    let single = Mlp::new();
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

    // Warm up: compile and record both.
    dp_steps(&mut dp_step, &shards, dp.device());
    seq_steps(&mut seq_step, &parts, &device);
    let (mut t_dp, mut t_seq) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        t_dp.push(dp_steps(&mut dp_step, &shards, dp.device()));
        t_seq.push(seq_steps(&mut seq_step, &parts, &device));
    }
    (median(t_dp), median(t_seq))
}

fn main() {
    let rounds = std::env::var("DP_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let device = Device::default();
    println!(
        "data-parallel MLP step ({IN}-{HIDDEN}-{HIDDEN}-{OUT}, batch {BATCH}) on {}, {} devices",
        device.name(),
        lazyxla::devices().len()
    );
    println!("| devices | data-parallel ms/step | shards one after another, ms/step | ratio |");
    println!("|---|---|---|---|");
    // `DP_DEVICES=4` measures 4 devices only, `DP_DEVICES=1,4` two counts.
    let counts: Vec<usize> = std::env::var("DP_DEVICES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4]);
    for n in counts {
        if n > lazyxla::devices().len() {
            continue;
        }
        let (dp, seq) = measure(n, rounds);
        println!("| {n} | {dp:.3} | {seq:.3} | {:.2} |", dp / seq);
    }
}
