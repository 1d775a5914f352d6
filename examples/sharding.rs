//! Sharding over a device mesh (`lazyxla::sharding`): one SPMD program
//! per step that XLA's partitioner splits over 4 devices.
//!
//! 1. Tensor parallelism, Megatron-style, on a 2x2 `data x model` mesh:
//!    a transformer block whose attention heads (q, k, v column-parallel,
//!    the output projection row-parallel) and MLP (column then row) are
//!    split over "model", and whose batch is split over "data".
//! 2. FSDP (`parallel::fully_shard`) on a 4-device "data" axis: every
//!    parameter and Adam moment split four ways, with the bytes each
//!    device holds (`Device::memory_stats`).
//! 3. The time of a compute-heavy MLP step sharded over 4 devices against
//!    the same step on one device. On the CPU plugin the 4 devices share
//!    the machine's cores, so this measures the overhead of the
//!    partitioned program, not a speed-up.
//!
//! Every sharded step is checked against the same step on one device.
//!
//! Run: `cargo run --release --example sharding`

use lazyxla::nn::{self, LayerNorm, Linear, Module};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::parallel::fully_shard;
use lazyxla::sharding::Mesh;
use lazyxla::{mark_step, metrics, Device, Tensor};
use std::time::Instant;

const B: usize = 8;
const T: usize = 8;
const D: usize = 32;
const HEADS: usize = 4;

/// A pre-norm transformer block.
struct Block {
    ln1: LayerNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ln2: LayerNorm,
    fc1: Linear,
    fc2: Linear,
}

impl Block {
    fn new() -> Block {
        Block {
            ln1: LayerNorm::new(D),
            q: Linear::new(D, D, 1),
            k: Linear::new(D, D, 2),
            v: Linear::new(D, D, 3),
            o: Linear::new(D, D, 4),
            ln2: LayerNorm::new(D),
            fc1: Linear::new(D, 4 * D, 5),
            fc2: Linear::new(4 * D, D, 6),
        }
    }

    /// Megatron: column-parallel q, k, v and fc1 (weights `[out, in]`
    /// split along `out`, with their biases), row-parallel o and fc2
    /// (split along `in`). Each device of the "model" axis then holds
    /// half of the heads and half of the MLP's hidden units.
    fn tensor_parallel(&self, mesh: &Mesh) -> lazyxla::Result<()> {
        for l in [&self.q, &self.k, &self.v, &self.fc1] {
            l.weight.mark_sharding(mesh, &[Some("model"), None])?;
            if let Some(b) = &l.bias {
                b.mark_sharding(mesh, &[Some("model")])?;
            }
        }
        for l in [&self.o, &self.fc2] {
            l.weight.mark_sharding(mesh, &[None, Some("model")])?;
        }
        Ok(())
    }

    fn attention(&self, x: &Tensor) -> Tensor {
        let dh = (D / HEADS) as i64;
        let heads = |t: Tensor| {
            t.reshape(&[B as i64, T as i64, HEADS as i64, dh])
                .permute(&[0, 2, 1, 3])
        };
        let (q, k, v) = (
            heads(self.q.forward(x)),
            heads(self.k.forward(x)),
            heads(self.v.forward(x)),
        );
        let scores = q.matmul(&k.transpose(2, 3)) * (1.0 / (dh as f64).sqrt());
        let y = scores.softmax(3).matmul(&v).permute(&[0, 2, 1, 3]);
        self.o.forward(&y.reshape(&[B as i64, T as i64, D as i64]))
    }
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Tensor {
        let x = x + &self.attention(&self.ln1.forward(x));
        let h = self.fc1.forward(&self.ln2.forward(&x)).gelu();
        &x + &self.fc2.forward(&h)
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        let all: [(&str, &dyn Module); 8] = [
            ("ln1", &self.ln1),
            ("q", &self.q),
            ("k", &self.k),
            ("v", &self.v),
            ("o", &self.o),
            ("ln2", &self.ln2),
            ("fc1", &self.fc1),
            ("fc2", &self.fc2),
        ];
        all.into_iter().map(|(n, m)| (n.to_string(), m)).collect()
    }
}

/// Deterministic values in [-1, 1).
fn data(seed: u64, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect();
    Tensor::from_vec(v, shape).expect("length matches")
}

/// `steps` Adam steps of `model` on regression batches of `shape` (split
/// by rows over "data" on a mesh); the last loss.
fn train(
    model: &impl Module,
    opt: &mut impl Optimizer,
    shape: &[usize],
    mesh: Option<&Mesh>,
    steps: u64,
) -> lazyxla::Result<f32> {
    let mut last = None;
    for k in 0..steps {
        let (mut x, mut y) = (data(2 * k, shape), data(2 * k + 1, shape));
        if let Some(m) = mesh {
            let mut spec = vec![None; shape.len()];
            spec[0] = Some("data");
            x = x.mark_sharding(m, &spec)?;
            y = y.mark_sharding(m, &spec)?;
        }
        opt.zero_grad();
        let loss = nn::mse_loss(&model.forward(&x), &y);
        loss.backward();
        opt.step();
        mark_step()?;
        last = Some(loss);
    }
    last.map_or(Ok(f32::NAN), |l| l.item::<f32>())
}

fn tensor_parallel(devices: &[Device]) -> lazyxla::Result<()> {
    let mesh = Mesh::new(devices, &[2, 2], &["data", "model"])?;
    let one = Block::new();
    let want = train(
        &one,
        &mut Adam::new(one.parameters(), 1e-3),
        &[B, T, D],
        None,
        5,
    )?;
    let block = mesh.scoped(Block::new);
    block.tensor_parallel(&mesh)?;
    let mut opt = Adam::new(block.parameters(), 1e-3);
    metrics::reset();
    let got = train(&block, &mut opt, &[B, T, D], Some(&mesh), 5)?;
    println!(
        "tensor parallel ({mesh:?}): loss after 5 steps {got:.6} (one device: {want:.6}), {} compile(s), fc1.weight split {}",
        metrics::counter("UncachedCompile"),
        block.fc1.weight.sharding().map(|s| s.to_string()).unwrap_or_default()
    );
    Ok(())
}

/// A compute-heavy MLP: `W -> 4W -> W`, batch `4W`.
struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc2.forward(&self.fc1.forward(x).gelu())
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![("fc1".into(), &self.fc1), ("fc2".into(), &self.fc2)]
    }
}

fn fsdp_and_timing(devices: &[Device]) -> lazyxla::Result<()> {
    const W: usize = 256;
    let mlp = || Mlp {
        fc1: Linear::new(W, 4 * W, 7),
        fc2: Linear::new(4 * W, W, 8),
    };
    let steps = 20;
    // The loss, the time of a step, and the bytes on each device with
    // the parameters, their gradients and Adam's moments alive.
    let time = |model: &Mlp, mesh: Option<&Mesh>| -> lazyxla::Result<(f32, f64, Vec<usize>)> {
        let mut opt = Adam::new(model.parameters(), 1e-3);
        train(model, &mut opt, &[4 * W, W], mesh, 2)?; // compile and warm up
        let start = Instant::now();
        let loss = train(model, &mut opt, &[4 * W, W], mesh, steps)?;
        let ms = start.elapsed().as_secs_f64() * 1e3 / steps as f64;
        let bytes = match mesh {
            Some(m) => m
                .devices()
                .iter()
                .map(|d| d.memory_stats().live_bytes)
                .collect(),
            None => vec![model.fc1.weight.device().memory_stats().live_bytes],
        };
        Ok((loss, ms, bytes))
    };
    let (want, one_ms, one_bytes) = time(&mlp(), None)?;
    let mesh = Mesh::new(devices, &[4], &["data"])?;
    let model = mesh.scoped(mlp);
    fully_shard(&model, &mesh, "data")?;
    let (got, sharded_ms, bytes) = time(&model, Some(&mesh))?;
    let params: usize = model
        .parameters()
        .iter()
        .map(|p| p.upper_bounds().iter().product::<usize>() * 4)
        .sum();
    println!(
        "fsdp ({mesh:?}): loss {got:.6} (one device: {want:.6}); parameters {params} bytes; live bytes (parameters, gradients, Adam moments) per device {bytes:?}, on one device {one_bytes:?}"
    );
    println!(
        "step time, MLP {W}->{}->{W} on a batch of {}: one device {one_ms:.2} ms, FSDP over 4 devices {sharded_ms:.2} ms ({:.2}x)",
        4 * W,
        4 * W,
        sharded_ms / one_ms
    );
    Ok(())
}

fn main() -> lazyxla::Result<()> {
    lazyxla::set_cpu_device_count(4)?;
    let devices = lazyxla::devices();
    println!("sharding: {} devices ({})", devices.len(), devices[0]);
    tensor_parallel(&devices)?;
    fsdp_and_timing(&devices)?;
    Ok(())
}
