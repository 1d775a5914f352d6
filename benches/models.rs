//! Whole workloads of the model-ops issue, timed as `peers/jax_models.py`
//! times the same workloads in JAX, so `peers/compare.sh` can run both
//! side by side and print ratios.
//!
//! Run: `cargo bench --bench models -- WORKLOAD [STEPS]` with WORKLOAD
//! `topk`, `resnet`, `transformer`, `mlp` or `mlp_bf16` (the last two
//! lazyxla only: f32 against bf16 compute). Prints
//! `RESULT <workload> lazyxla first_ms=<f> step_ms=<f> cpu_ms=<f>`:
//! the first step (compile included), the median step after warm-up
//! (upload, step, results read), and the process CPU time per timed
//! step. Host data generation is excluded, as on the JAX side.

#[allow(dead_code)]
#[path = "../examples/models/resnet.rs"]
mod resnet;

#[allow(dead_code)]
#[path = "../examples/models/transformer.rs"]
mod transformer;

use lazyxla::nn::{self, Module};
use lazyxla::optim::{Adam, Optimizer, Sgd};
use lazyxla::{mark_step, Tensor};
use std::time::Instant;

/// One SGD step (momentum 0.9) of the small ResNet (`examples/models`),
/// batch 32 of 3x32x32 images, 10 classes, the loss read.
fn resnet_step(steps: usize) -> (f64, f64, f64) {
    const BATCH: usize = 32;
    let net = resnet::SmallResNet::new(10, 0);
    let mut opt = Sgd::new(net.parameters(), 0.1).momentum(0.9);
    let data: Vec<(Vec<f32>, Vec<i64>)> = (0..=steps as u64)
        .map(|i| {
            let x = normal(i, BATCH * 3 * 32 * 32);
            let y = uniform(i + 7, BATCH)
                .iter()
                .map(|u| (u * 10.0) as i64)
                .collect();
            (x, y)
        })
        .collect();
    timed(steps, |i| {
        let x = Tensor::from_vec(data[i].0.clone(), &[BATCH, 3, 32, 32]).unwrap();
        let y = Tensor::from_vec(data[i].1.clone(), &[BATCH]).unwrap();
        opt.zero_grad();
        let loss = nn::cross_entropy(&net.forward(&x), &y);
        loss.backward();
        opt.step();
        mark_step().unwrap();
        loss.item::<f32>().unwrap() as f64
    })
}

/// `topk` of 100,000 scores, k = 1000, both results read.
const TOPK_N: usize = 100_000;
const TOPK_K: usize = 1000;

fn topk(steps: usize) -> (f64, f64, f64) {
    let data: Vec<Vec<f32>> = (0..=steps as u64).map(|i| uniform(i, TOPK_N)).collect();
    timed(steps, |i| {
        let x = Tensor::from_vec(data[i].clone(), &[TOPK_N]).unwrap();
        let (v, idx) = x.topk(TOPK_K, 0, true);
        mark_step().unwrap();
        let v = v.to_vec::<f32>().unwrap();
        let idx = idx.to_vec::<i64>().unwrap();
        v[0] as f64 + idx[0] as f64
    })
}

/// Seeded uniform floats in [0, 1).
fn uniform(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// One SGD step of the transformer block (`examples/models`): 16 rows of
/// a length that changes every step (16 to 64, `mark_dynamic`, bound 64),
/// vocabulary 1000, width 64, 4 heads, MLP 256; the mean cross-entropy
/// over the real tokens read. JAX pads by hand to 64 and masks.
fn transformer_step(steps: usize) -> (f64, f64, f64) {
    const B: usize = 16;
    const T: usize = 64;
    const VOCAB: usize = 1000;
    let net = transformer::TinyTransformer::new(VOCAB, 64, 4, 256, 0);
    let mut opt = Sgd::new(net.parameters(), 0.01);
    let data: Vec<(usize, Vec<i64>, Vec<i64>)> = (0..=steps as u64)
        .map(|i| {
            let len = T / 4 + (uniform(i, 1)[0] * (T - T / 4 + 1) as f32) as usize;
            let len = len.min(T);
            let tok = |s| {
                uniform(s, B * len)
                    .iter()
                    .map(|u| (u * VOCAB as f32) as i64)
                    .collect()
            };
            (len, tok(i + 11), tok(i + 13))
        })
        .collect();
    timed(steps, |i| {
        let (len, tokens, targets) = &data[i];
        let tokens = Tensor::from_vec(tokens.clone(), &[B, *len])
            .unwrap()
            .mark_dynamic(1, T);
        let targets = Tensor::from_vec(targets.clone(), &[B, *len])
            .unwrap()
            .mark_dynamic_as(1, &tokens, 1);
        opt.zero_grad();
        // Per token, as the JAX side: flattening [16, <=64, V] to
        // [16*s, V] would pack the rows (a gather each way).
        let nll = net
            .forward(&tokens)
            .log_softmax(2)
            .gather(2, &targets.unsqueeze(2))
            .neg();
        let loss = nll.mean();
        drop(nll);
        loss.backward();
        opt.step();
        mark_step().unwrap();
        loss.item::<f32>().unwrap() as f64
    })
}

/// One Adam step of a 784-512-512-10 MLP at batch 128 (`train_step`'s
/// workload), computing in f32 or, with `bf16`, in bfloat16 from f32
/// weights (mixed precision: the weights, gradients and Adam's state stay
/// f32, the loss is taken in f32).
fn mlp_step(steps: usize, bf16: bool) -> (f64, f64, f64) {
    use lazyxla::nn::{Linear, Relu, Sequential};
    use lazyxla::DType;
    const BATCH: usize = 128;
    let net = Sequential::new()
        .add(Linear::new(784, 512, 1))
        .add(Relu)
        .add(Linear::new(512, 512, 2))
        .add(Relu)
        .add(Linear::new(512, 10, 3));
    let mut opt = Adam::new(net.parameters(), 1e-3);
    let data: Vec<(Vec<f32>, Vec<i64>)> = (0..=steps as u64)
        .map(|i| {
            let y = uniform(i + 7, BATCH)
                .iter()
                .map(|u| (u * 10.0) as i64)
                .collect();
            (normal(i, BATCH * 784), y)
        })
        .collect();
    let forward = |x: &Tensor| {
        if !bf16 {
            return net.forward(x);
        }
        let p: Vec<Tensor> = net
            .parameters()
            .iter()
            .map(|t| t.to_dtype(DType::BF16))
            .collect();
        let mut h = x.to_dtype(DType::BF16);
        for (i, pair) in p.chunks(2).enumerate() {
            h = h.matmul(&pair[0].transpose(0, 1)) + &pair[1];
            if i < 2 {
                h = h.relu();
            }
        }
        h.to_dtype(DType::F32)
    };
    timed(steps, |i| {
        let x = Tensor::from_vec(data[i].0.clone(), &[BATCH, 784]).unwrap();
        let y = Tensor::from_vec(data[i].1.clone(), &[BATCH]).unwrap();
        opt.zero_grad();
        let loss = nn::cross_entropy(&forward(&x), &y);
        loss.backward();
        opt.step();
        mark_step().unwrap();
        loss.item::<f32>().unwrap() as f64
    })
}

/// Seeded standard normal floats (Box-Muller over [`uniform`]).
fn normal(seed: u64, n: usize) -> Vec<f32> {
    let u = uniform(seed, n + 1);
    (0..n)
        .map(|i| {
            let (a, b) = (u[i].max(1e-7) as f64, u[i + 1] as f64);
            ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
        })
        .collect()
}

/// The process's CPU time (all threads) in milliseconds.
fn cpu_ms() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6
}

/// Runs step 0 (first, compile included), three warm-up steps, then
/// `steps` timed steps over inputs 1..=steps: (first ms, median ms, CPU
/// ms per step).
fn timed(steps: usize, mut step: impl FnMut(usize) -> f64) -> (f64, f64, f64) {
    let t = Instant::now();
    std::hint::black_box(step(0));
    let first = t.elapsed().as_secs_f64() * 1e3;
    for i in 1..4 {
        std::hint::black_box(step(i));
    }
    let mut times = Vec::with_capacity(steps);
    let cpu = cpu_ms();
    for i in 0..steps {
        let t = Instant::now();
        std::hint::black_box(step(1 + i % steps));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = (cpu_ms() - cpu) / steps as f64;
    times.sort_by(f64::total_cmp);
    (first, times[times.len() / 2], cpu)
}

fn main() {
    // `cargo bench` passes `--bench`; the workload is the first other word.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let workload = args.first().map(String::as_str).unwrap_or("topk");
    let steps = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(50);
    let (first, step, cpu) = match workload {
        "topk" => topk(steps),
        "resnet" => resnet_step(steps),
        "transformer" => transformer_step(steps),
        "mlp" => mlp_step(steps, false),
        "mlp_bf16" => mlp_step(steps, true),
        other => {
            eprintln!("unknown workload {other}: use topk, resnet, transformer, mlp, mlp_bf16");
            std::process::exit(2);
        }
    };
    println!("RESULT {workload} lazyxla first_ms={first:.2} step_ms={step:.3} cpu_ms={cpu:.3}");
}
