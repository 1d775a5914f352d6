//! Training steps over a 4-device mesh (`lazyxla::sharding`) against the
//! same steps on one device, on both backends: a tensor-parallel MLP
//! (Megatron column then row, on a 2x2 data x model mesh), a 2-layer
//! transformer with its attention and MLP split the same way, and FSDP
//! (`parallel::fully_shard`), whose per-device bytes are a quarter of
//! the parameters' and Adam moments' (`Device::memory_stats`).
//!
//! Acceptance: equal to one device within 1e-5, one compile for the
//! sharded steps, nothing read back between them.

mod common;

use common::{assert_close, Lcg};
use lazyxla::nn::{self, LayerNorm, Linear, Module};
use lazyxla::optim::{Adam, Optimizer, Sgd};
use lazyxla::parallel::fully_shard;
use lazyxla::sharding::Mesh;
use lazyxla::{mark_step, metrics, Tensor};

const D: usize = 16;
const HEADS: usize = 2;
const T: usize = 4;
const B: usize = 8;

fn host(seed: u64, shape: &[usize]) -> Tensor {
    let mut g = Lcg(seed);
    let n = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| (g.next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// `Linear` split Megatron-style: column-parallel (`weight [out, in]`
/// and bias split along `out`) or row-parallel (`weight` along `in`,
/// bias whole).
fn split_linear(l: &Linear, mesh: &Mesh, column: bool) {
    match column {
        true => {
            l.weight
                .mark_sharding(mesh, &[Some("model"), None])
                .unwrap();
            if let Some(b) = &l.bias {
                b.mark_sharding(mesh, &[Some("model")]).unwrap();
            }
        }
        false => {
            l.weight
                .mark_sharding(mesh, &[None, Some("model")])
                .unwrap();
        }
    }
}

/// A two-layer perceptron `D -> 4D -> D`.
struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn new(seed: u64) -> Mlp {
        Mlp {
            fc1: Linear::new(D, 4 * D, seed),
            fc2: Linear::new(4 * D, D, seed + 1),
        }
    }

    fn megatron(&self, mesh: &Mesh) {
        split_linear(&self.fc1, mesh, true);
        split_linear(&self.fc2, mesh, false);
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.fc2.forward(&self.fc1.forward(x).gelu())
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![("fc1".into(), &self.fc1), ("fc2".into(), &self.fc2)]
    }
}

/// Multi-head self-attention over `[B, T, D]`.
struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
}

impl Attention {
    fn new(seed: u64) -> Attention {
        Attention {
            q: Linear::new(D, D, seed),
            k: Linear::new(D, D, seed + 1),
            v: Linear::new(D, D, seed + 2),
            o: Linear::new(D, D, seed + 3),
        }
    }

    /// Heads split over "model": q, k, v column-parallel, o row-parallel.
    fn megatron(&self, mesh: &Mesh) {
        for l in [&self.q, &self.k, &self.v] {
            split_linear(l, mesh, true);
        }
        split_linear(&self.o, mesh, false);
    }
}

impl Module for Attention {
    fn forward(&self, x: &Tensor) -> Tensor {
        let dh = D / HEADS;
        let heads = |t: Tensor| {
            t.reshape(&[B as i64, T as i64, HEADS as i64, dh as i64])
                .permute(&[0, 2, 1, 3])
        };
        let (q, k, v) = (
            heads(self.q.forward(x)),
            heads(self.k.forward(x)),
            heads(self.v.forward(x)),
        );
        let scores = q.matmul(&k.transpose(2, 3)) * (1.0 / (dh as f64).sqrt());
        let y = scores.softmax(3).matmul(&v);
        let y = y
            .permute(&[0, 2, 1, 3])
            .reshape(&[B as i64, T as i64, D as i64]);
        self.o.forward(&y)
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("q".into(), &self.q),
            ("k".into(), &self.k),
            ("v".into(), &self.v),
            ("o".into(), &self.o),
        ]
    }
}

/// A pre-norm transformer block.
struct Block {
    ln1: LayerNorm,
    attn: Attention,
    ln2: LayerNorm,
    mlp: Mlp,
}

impl Module for Block {
    fn forward(&self, x: &Tensor) -> Tensor {
        let x = x + &self.attn.forward(&self.ln1.forward(x));
        &x + &self.mlp.forward(&self.ln2.forward(&x))
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("ln1".into(), &self.ln1),
            ("attn".into(), &self.attn),
            ("ln2".into(), &self.ln2),
            ("mlp".into(), &self.mlp),
        ]
    }
}

/// Two blocks.
struct Transformer {
    blocks: Vec<Block>,
}

impl Transformer {
    fn new() -> Transformer {
        Transformer {
            blocks: (0..2)
                .map(|i| Block {
                    ln1: LayerNorm::new(D),
                    attn: Attention::new(100 + 10 * i),
                    ln2: LayerNorm::new(D),
                    mlp: Mlp::new(200 + 10 * i),
                })
                .collect(),
        }
    }
}

impl Module for Transformer {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.blocks.iter().fold(x.clone(), |x, b| b.forward(&x))
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        self.blocks
            .iter()
            .enumerate()
            .map(|(i, b)| (i.to_string(), b as &dyn Module))
            .collect()
    }
}

/// The batch of step `k`: inputs and targets of `shape`, split by rows
/// over "data" on a mesh.
fn batch(k: u64, shape: &[usize], mesh: Option<&Mesh>) -> (Tensor, Tensor) {
    let (x, y) = (host(10 + k, shape), host(20 + k, shape));
    match mesh {
        None => (x, y),
        Some(m) => {
            let mut spec = vec![None; shape.len()];
            spec[0] = Some("data");
            (
                x.mark_sharding(m, &spec).unwrap(),
                y.mark_sharding(m, &spec).unwrap(),
            )
        }
    }
}

/// Three steps of `opt` on `model` with batches of `shape`; the losses,
/// and the parameters after them. Counts the sharded steps' compiles.
fn train_with(
    model: &impl Module,
    opt: &mut impl Optimizer,
    shape: &[usize],
    mesh: Option<&Mesh>,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    metrics::reset();
    let mut losses = Vec::new();
    for k in 0..3 {
        let (x, y) = batch(k, shape, mesh);
        opt.zero_grad();
        let loss = nn::mse_loss(&model.forward(&x), &y);
        loss.backward();
        opt.step();
        mark_step().unwrap();
        losses.push(loss);
    }
    if mesh.is_some() {
        assert_eq!(
            metrics::counter("UncachedCompile"),
            1,
            "{}",
            metrics::report()
        );
        assert_eq!(metrics::counter("TransferFromDevice"), 0);
        // Every step writes each parameter's update into its old pieces
        // (XLA only: the reference backend donates nothing).
        let params = model.parameters().len() as u64;
        let donated = metrics::counter("DonatedBuffer");
        match on_pjrt(mesh) {
            true => assert!(donated >= 3 * params, "{donated} of {params} parameters"),
            false => assert_eq!(donated, 0),
        }
    }
    let losses = losses.iter().map(|l| l.item::<f32>().unwrap()).collect();
    let values = model
        .parameters()
        .iter()
        .map(|p| p.to_vec::<f32>().unwrap())
        .collect();
    (losses, values)
}

fn on_pjrt(mesh: Option<&Mesh>) -> bool {
    mesh.is_some_and(|m| m.device().name().starts_with("pjrt"))
}

/// [`train_with`] Adam.
fn train(model: &impl Module, shape: &[usize], mesh: Option<&Mesh>) -> (Vec<f32>, Vec<Vec<f32>>) {
    let mut opt = Adam::new(model.parameters(), 0.01);
    train_with(model, &mut opt, shape, mesh)
}

fn assert_same(got: &(Vec<f32>, Vec<Vec<f32>>), want: &(Vec<f32>, Vec<Vec<f32>>)) {
    assert_close(&got.0, &want.0, 1e-5);
    for (g, w) in got.1.iter().zip(&want.1) {
        assert_close(g, w, 1e-5);
    }
}

fn mesh_2x2() -> Mesh {
    Mesh::new(&lazyxla::devices(), &[2, 2], &["data", "model"]).unwrap()
}

backend_test! {
    /// Batch over "data", the MLP Megatron-split over "model".
    fn tensor_parallel_mlp_step_equals_one_device() {
        let want = train(&Mlp::new(1), &[B, D], None);
        let mesh = mesh_2x2();
        let model = mesh.scoped(|| Mlp::new(1));
        model.megatron(&mesh);
        assert_eq!(model.fc1.weight.sharding().unwrap().tiles(), &[2, 1]);
        let got = train(&model, &[B, D], Some(&mesh));
        assert_same(&got, &want);
    }
}

backend_test! {
    /// Two blocks, attention heads and MLP split over "model", the
    /// batch over "data".
    fn transformer_step_equals_one_device() {
        // SGD with momentum: the key bias's gradient is zero up to
        // rounding (softmax ignores a shift per query), which Adam's
        // normalized update would turn into steps of noise.
        let sgd = |m: &Transformer| Sgd::new(m.parameters(), 0.05).momentum(0.9);
        let one = Transformer::new();
        let want = train_with(&one, &mut sgd(&one), &[B, T, D], None);
        let mesh = mesh_2x2();
        let model = mesh.scoped(Transformer::new);
        for b in &model.blocks {
            b.attn.megatron(&mesh);
            b.mlp.megatron(&mesh);
        }
        let mut opt = mesh.scoped(|| sgd(&model));
        let got = train_with(&model, &mut opt, &[B, T, D], Some(&mesh));
        assert_same(&got, &want);
    }
}

/// The bytes the live tensors hold on each device of `mesh`.
fn bytes_per_device(mesh: &Mesh) -> Vec<usize> {
    mesh.devices()
        .iter()
        .map(|d| d.memory_stats().live_bytes)
        .collect()
}

backend_test! {
    /// FSDP over 4 devices: the step equals one device's, and each
    /// device holds a quarter of every parameter and Adam moment: the
    /// same step with whole parameters holds 3/4 of their bytes more on
    /// every device.
    fn fsdp_step_equals_one_device_and_divides_memory() {
        let want = train(&Mlp::new(3), &[B, D], None);
        let mesh = Mesh::new(&lazyxla::devices(), &[4], &["data"]).unwrap();
        let run = |shard: bool| {
            let model = mesh.scoped(|| Mlp::new(3));
            if shard {
                fully_shard(&model, &mesh, "data").unwrap();
            }
            let mut opt = Adam::new(model.parameters(), 0.01);
            let got = train_with(&model, &mut opt, &[B, D], Some(&mesh));
            // The gradients are dropped: what is left is the
            // parameters, the moments and what both runs share.
            opt.zero_grad();
            let bytes = bytes_per_device(&mesh);
            let tiles: Vec<usize> = model
                .parameters()
                .iter()
                .map(|p| p.sharding().map_or(1, |s| s.tiles()[0]))
                .collect();
            let numel: usize = model
                .parameters()
                .iter()
                .map(|p| p.upper_bounds().iter().product::<usize>())
                .sum();
            (got, bytes, tiles, numel)
        };
        let (whole, whole_bytes, _, _) = run(false);
        assert_same(&whole, &want);
        let (sharded, bytes, tiles, numel) = run(true);
        assert_same(&sharded, &want);
        // Every parameter stayed split over the 4 devices.
        assert!(tiles.iter().all(|&t| t == 4), "{tiles:?}");
        // Parameters and the two moments, 4 bytes an element (the
        // reference keeps the same pieces as XLA).
        let state = 3 * 4 * numel;
        assert!(bytes.iter().all(|&b| b == bytes[0]), "{bytes:?}");
        for (w, s) in whole_bytes.iter().zip(&bytes) {
            assert_eq!(w - s, state - state / 4, "whole {whole_bytes:?}, sharded {bytes:?}");
        }
    }
}
