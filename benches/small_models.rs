//! The training steps of the GCN and VAE ports (`examples/train_gcn.rs`,
//! `examples/train_vae.rs`) at their examples' sizes, timed as
//! `peers/gcn_vae_torch.py` times the same steps in PyTorch eager (2
//! threads, the same data from the same generators).
//!
//! Run: `cargo bench --bench small_models -- WORKLOAD [STEPS]`, WORKLOAD
//! one of
//! - `gcn`: a 2-layer GCN step on the Cora-sized synthetic graph (2708
//!   nodes, 1433 features, 10,556 directed edges) with feature dropout,
//!   edge dropout (a dynamic edge count) and Adam;
//! - `vae`: a convolutional VAE step (32 and 64 channels, 20 latent
//!   dims) on a batch of 64 28x28 images marked dynamic (bound 64), as
//!   the example marks it for its smaller last batch, with Adam;
//! - `vae_static`: the same without `mark_dynamic` (lazyxla only: the
//!   cost of the dynamic batch).
//!
//! Prints `RESULT <workload> lazyxla first_ms=<f> step_ms=<f>
//! cpu_ms=<f> compile_ms=<f> compiles=<n>`: the first step (compile
//! included, the runtime started before it), the median step after
//! three warm-up steps (upload of the step's inputs, the step, the loss
//! read), the process CPU time per timed step, the first step's time in
//! XLA's compiler, and the programs compiled in the whole run; `data=`
//! is a checksum of the generated data, which the PyTorch side prints
//! too (equal: both sides train on the same data).

#[path = "../examples/models/gcn.rs"]
mod gcn;
#[path = "../examples/models/vae.rs"]
mod vae;

#[path = "workloads/cpu.rs"]
mod cpu;

use cpu::cpu_ms;
use lazyxla::nn::Module;
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, metrics, Tensor};
use std::time::Instant;

/// Step 0 (first, compile included), three warm-up steps, then `steps`
/// timed steps: (first ms, median ms, CPU ms per step, compile ms).
fn timed(steps: usize, mut step: impl FnMut(usize) -> f32) -> (f64, f64, f64, f64) {
    std::hint::black_box(lazyxla::devices());
    let compiled = || metrics::timer_total("CompileTime").as_secs_f64() * 1e3;
    let before = compiled();
    let t = Instant::now();
    assert!(step(0).is_finite());
    let first = t.elapsed().as_secs_f64() * 1e3;
    let compile = compiled() - before;
    for i in 1..4 {
        std::hint::black_box(step(i));
    }
    let mut times = Vec::with_capacity(steps);
    let cpu = cpu_ms();
    for i in 0..steps {
        let t = Instant::now();
        std::hint::black_box(step(4 + i));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = (cpu_ms() - cpu) / steps as f64;
    times.sort_by(f64::total_cmp);
    (first, times[times.len() / 2], cpu, compile)
}

/// A checksum of the graph: its edges weighted by position, its active
/// features and its training nodes.
fn graph_check(g: &gcn::Graph) -> u64 {
    let e = g.edge_index.len() / 2;
    let edges = (0..e).fold(0u64, |h, i| {
        let pair = (g.edge_index[i] * g.spec.nodes as i64 + g.edge_index[e + i]) as u64;
        (h + (i as u64 + 1) * pair) % 1_000_000_007
    });
    let active = g.features.iter().filter(|&&v| v != 0.0).count() as u64;
    edges + active + g.train.iter().sum::<i64>() as u64
}

/// The GCN step: the graph and labels are device data made once.
fn gcn_step(check: &mut String) -> impl FnMut(usize) -> f32 {
    let spec = gcn::CORA;
    lazyxla::manual_seed(42);
    let g = gcn::synthetic_graph(spec, 2024);
    *check = graph_check(&g).to_string();
    let x = Tensor::from_slice(&g.features, &[spec.nodes, spec.features]).unwrap();
    let edges = Tensor::from_slice(&g.edge_index, &[2, g.edge_index.len() / 2]).unwrap();
    let labels: Vec<i64> = g.train.iter().map(|&i| g.labels[i as usize]).collect();
    let train = Tensor::from_slice(&g.train, &[g.train.len()]).unwrap();
    let train_y = Tensor::from_vec(labels, &[g.train.len()]).unwrap();
    let model = gcn::Gcn::new(spec, gcn::HIDDEN, 0.5, 0.2);
    let mut opt = Adam::new(model.parameters(), 0.01).weight_decay(5e-4);
    mark_step().unwrap();
    move |_| {
        opt.zero_grad();
        let out = model.forward_many(&[x.clone(), edges.clone()]).remove(0);
        let loss = gcn::loss(&out, &train, &train_y);
        loss.backward();
        opt.step();
        mark_step().unwrap();
        loss.item::<f32>().unwrap()
    }
}

/// The VAE step over 8 batches of 64 images, each uploaded in its step.
fn vae_step(dynamic: bool, check: &mut String) -> impl FnMut(usize) -> f32 {
    const BATCH: usize = 64;
    let data = vae::images(8 * BATCH, 1);
    *check = format!("{:.3}", data.iter().map(|&v| v as f64).sum::<f64>());
    lazyxla::manual_seed(7);
    let model = vae::Vae::new(vae::FULL, 0);
    let mut opt = Adam::new(model.parameters(), 1e-3);
    mark_step().unwrap();
    let px = vae::SIDE * vae::SIDE;
    move |i| {
        let k = i % 8;
        let x = Tensor::from_slice(
            &data[k * BATCH * px..(k + 1) * BATCH * px],
            &[BATCH, 1, vae::SIDE, vae::SIDE],
        )
        .unwrap();
        let x = if dynamic { x.mark_dynamic(0, BATCH) } else { x };
        opt.zero_grad();
        let (recon, mu, logvar) = model.forward_parts(&x, None);
        let loss = vae::loss(&recon, &x, &mu, &logvar);
        loss.backward();
        opt.step();
        mark_step().unwrap();
        loss.item::<f32>().unwrap()
    }
}

fn main() {
    // `cargo bench` passes `--bench`; the workload is the first other word.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let workload = args.first().map(String::as_str).unwrap_or("gcn");
    let steps = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30);
    let mut check = String::new();
    let (first, step, cpu, compile) = match workload {
        "gcn" => timed(steps, gcn_step(&mut check)),
        "vae" => timed(steps, vae_step(true, &mut check)),
        "vae_static" => timed(steps, vae_step(false, &mut check)),
        other => {
            eprintln!("unknown workload {other}: use gcn, vae or vae_static");
            std::process::exit(2);
        }
    };
    println!(
        "RESULT {workload} lazyxla first_ms={first:.2} step_ms={step:.3} cpu_ms={cpu:.3} compile_ms={compile:.2} compiles={} data={check}",
        metrics::counter("UncachedCompile")
    );
}
