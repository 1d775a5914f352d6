//! A classifier on a synthetic, seeded data set: three Gaussian blobs in 8
//! dimensions, an 8-32-3 MLP, Adam. Loss falls; accuracy is printed.
//! With `--bf16` the forward pass computes in bfloat16 (weights, their
//! gradients and Adam's state stay f32: mixed precision).
//!
//! Run: `cargo run --release --example train_mlp [-- --bf16]`

use lazyxla::nn::{self, Linear, Module, Relu, Sequential};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, metrics, no_grad, DType, Tensor};

pub const DIM: usize = 8;
pub const CLASSES: usize = 3;
pub const BATCH: usize = 64;

/// A seeded batch: points around one of three centres, and their class.
pub fn batch(seed: u64) -> (Tensor, Tensor) {
    let mut state = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut x = Vec::with_capacity(BATCH * DIM);
    let mut y = Vec::with_capacity(BATCH);
    for _ in 0..BATCH {
        let class = (next() * CLASSES as f64) as usize % CLASSES;
        for d in 0..DIM {
            let centre = if d % CLASSES == class { 2.0 } else { 0.0 };
            x.push((centre + (next() - 0.5) * 2.0) as f32);
        }
        y.push(class as i64);
    }
    (
        Tensor::from_vec(x, &[BATCH, DIM]).unwrap(),
        Tensor::from_vec(y, &[BATCH]).unwrap(),
    )
}

pub fn model() -> Sequential {
    Sequential::new()
        .add(Linear::new(DIM, 32, 1))
        .add(Relu)
        .add(Linear::new(32, CLASSES, 2))
}

/// Records one step; returns the loss (runs at the caller's `mark_step`).
pub fn train_step(net: &Sequential, opt: &mut impl Optimizer, x: &Tensor, y: &Tensor) -> Tensor {
    opt.zero_grad();
    let loss = nn::cross_entropy(&net.forward(x), y);
    loss.backward();
    opt.step();
    loss
}

/// The MLP's forward with its f32 weights cast to bf16, computing in bf16;
/// the logits come back as f32 (the loss in f32, as autocast does).
pub fn forward_bf16(net: &Sequential, x: &Tensor) -> Tensor {
    let p: Vec<Tensor> = net
        .parameters()
        .iter()
        .map(|t| t.to_dtype(DType::BF16))
        .collect();
    let h = (x.to_dtype(DType::BF16).matmul(&p[0].transpose(0, 1)) + &p[1]).relu();
    (h.matmul(&p[2].transpose(0, 1)) + &p[3]).to_dtype(DType::F32)
}

/// The fraction of correctly classified points of a batch.
pub fn accuracy(net: &Sequential, x: &Tensor, y: &Tensor) -> f32 {
    no_grad(|| {
        net.forward(x)
            .argmax(1)
            .eq(y)
            .to_dtype(DType::F32)
            .mean()
            .item::<f32>()
            .unwrap()
    })
}

#[allow(dead_code)]
fn main() -> lazyxla::Result<()> {
    let steps = 150;
    let bf16 = std::env::args().any(|a| a == "--bf16");
    let net = model();
    let mut opt = Adam::new(net.parameters(), 0.01);
    println!(
        "train_mlp on the {} backend{}",
        lazyxla::Device::default().name(),
        if bf16 { ", computing in bf16" } else { "" }
    );
    let bar = indicatif::ProgressBar::new(steps);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let (mut first, mut last) = (None, 0.0);
    for step in 0..steps {
        let (x, y) = batch(step);
        let loss = if bf16 {
            opt.zero_grad();
            let loss = nn::cross_entropy(&forward_bf16(&net, &x), &y);
            loss.backward();
            opt.step();
            loss
        } else {
            train_step(&net, &mut opt, &x, &y)
        };
        mark_step()?;
        last = loss.item::<f32>()?;
        first.get_or_insert(last);
        bar.set_message(format!("loss {last:.4}"));
        bar.inc(1);
    }
    bar.finish();
    let (x, y) = batch(10_000);
    println!(
        "loss {:.4} -> {last:.4}, held-out accuracy {:.1}%",
        first.unwrap_or(last),
        100.0 * accuracy(&net, &x, &y)
    );
    println!("\n{}", metrics::report());
    Ok(())
}
