//! Batches of varying size fed through `mark_dynamic`: the step program is
//! compiled for the bound (64) once, whatever each batch's length.
//!
//! Run: `cargo run --release --example variable_batch`

use lazyxla::nn::{self, Linear, Module, Sequential, Tanh};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, Tensor};

pub const BOUND: usize = 64;

/// A seeded regression batch of `n` rows: y = sin(x0) + x1 / 2.
pub fn batch(n: usize, seed: u64) -> (Tensor, Tensor) {
    let mut s = seed.wrapping_add(0x9e37) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) as f64 / (1u64 << 53) as f64) as f32 * 2.0 - 1.0
    };
    let mut x = Vec::with_capacity(n * 2);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = (next(), next());
        x.extend([a, b]);
        y.push(a.sin() + b / 2.0);
    }
    let x = Tensor::from_vec(x, &[n, 2]).unwrap().mark_dynamic(0, BOUND);
    let y = Tensor::from_vec(y, &[n, 1])
        .unwrap()
        .mark_dynamic_as(0, &x, 0);
    (x, y)
}

pub fn model() -> Sequential {
    Sequential::new()
        .add(Linear::new(2, 16, 5))
        .add(Tanh)
        .add(Linear::new(16, 1, 6))
}

/// The batch length of step `k`, between 1 and 64.
pub fn length(k: u64) -> usize {
    1 + ((k * 37 + 11) % BOUND as u64) as usize
}

/// Records one step and returns the loss.
pub fn train_step(net: &Sequential, opt: &mut impl Optimizer, x: &Tensor, y: &Tensor) -> Tensor {
    opt.zero_grad();
    let loss = nn::mse_loss(&net.forward(x), y);
    loss.backward();
    opt.step();
    loss
}

#[allow(dead_code)]
fn main() -> lazyxla::Result<()> {
    let steps = 200;
    let net = model();
    let mut opt = Sgd::new(net.parameters(), 0.1).momentum(0.9);
    println!(
        "variable_batch on the {} backend",
        lazyxla::Device::default().name()
    );
    let bar = indicatif::ProgressBar::new(steps);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let (mut first, mut last) = (None, 0.0);
    for step in 0..steps {
        let n = length(step);
        let (x, y) = batch(n, step);
        let loss = train_step(&net, &mut opt, &x, &y);
        mark_step()?;
        last = loss.item::<f32>()?;
        first.get_or_insert(last);
        bar.set_message(format!(
            "batch {n:>2} (shape {}), loss {last:.4}",
            x.shape_string()
        ));
        bar.inc(1);
    }
    bar.finish();
    println!("loss {:.4} -> {last:.4}", first.unwrap_or(last));
    println!("\n{}", metrics::report());
    Ok(())
}
