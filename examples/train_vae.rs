//! A convolutional VAE (`examples/models/vae.rs`: strided convolutions to
//! `mu` and `logvar`, the reparameterisation with noise drawn on the
//! device by `randn_like`, transposed convolutions back, summed binary
//! cross entropy plus KL divergence) trained with Adam on seeded synthetic
//! 28x28 images, batch 64. The epoch's last batch is smaller (1000 images:
//! 15 batches of 64 and one of 40): the batch dim is marked dynamic
//! (`mark_dynamic(0, 64)`), so every batch, the last included, runs one
//! training program. The loss per image is printed after each epoch.
//!
//! Run: `cargo run --release --example train_vae`

#[path = "models/vae.rs"]
pub mod vae;

use lazyxla::nn::Module;
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, metrics, no_grad, Tensor};
use vae::{Vae, VaeConfig, FULL, SIDE};

/// What a run reports.
pub struct Report {
    /// The mean training loss per image of each epoch.
    pub epoch_losses: Vec<f64>,
    /// The loss per image of held-out images before and after training.
    pub held_out: (f64, f64),
    /// The sizes of one epoch's batches.
    pub batch_sizes: Vec<usize>,
    /// Programs compiled for the training steps.
    pub train_compiles: u64,
}

/// The batch of images `from..from + len` of `data`, its batch dim marked
/// dynamic with bound `bound`.
fn batch(data: &[f32], from: usize, len: usize, bound: usize) -> lazyxla::Result<Tensor> {
    let px = SIDE * SIDE;
    Ok(
        Tensor::from_slice(&data[from * px..(from + len) * px], &[len, 1, SIDE, SIDE])?
            .mark_dynamic(0, bound),
    )
}

/// The loss per image of `x` (noise drawn, no gradient).
fn held_out_loss(model: &Vae, x: &Tensor, count: usize) -> lazyxla::Result<f64> {
    let l = no_grad(|| {
        let (r, mu, logvar) = model.forward_parts(x, None);
        vae::loss(&r, x, &mu, &logvar).item::<f32>()
    })?;
    Ok(l as f64 / count as f64)
}

/// Trains `cfg` for `epochs` epochs over `count` images in batches of
/// `batch_size`, printing a line per epoch when `verbose`.
pub fn run(
    cfg: VaeConfig,
    count: usize,
    batch_size: usize,
    epochs: usize,
    verbose: bool,
) -> lazyxla::Result<Report> {
    lazyxla::manual_seed(7);
    let data = vae::images(count, 1);
    let held = vae::images(200, 2);
    let held = Tensor::from_vec(held, &[200, 1, SIDE, SIDE])?;
    let model = Vae::new(cfg, 0);
    let mut opt = Adam::new(model.parameters(), 1e-3);
    mark_step()?;
    if verbose {
        println!(
            "train_vae on the {} backend: {} parameter tensors, {count} images, batch {batch_size}",
            lazyxla::Device::default().name(),
            model.parameters().len()
        );
    }
    let before = held_out_loss(&model, &held, 200)?;
    let mut report = Report {
        epoch_losses: Vec::new(),
        held_out: (before, before),
        batch_sizes: Vec::new(),
        train_compiles: 0,
    };
    for epoch in 1..=epochs {
        let (mut total, mut from) = (0.0f64, 0);
        let start = std::time::Instant::now();
        while from < count {
            let len = batch_size.min(count - from);
            let x = batch(&data, from, len, batch_size)?;
            let compiled = metrics::counter("UncachedCompile");
            opt.zero_grad();
            let (recon, mu, logvar) = model.forward_parts(&x, None);
            let loss = vae::loss(&recon, &x, &mu, &logvar);
            loss.backward();
            opt.step();
            mark_step()?;
            total += loss.item::<f32>()? as f64;
            report.train_compiles += metrics::counter("UncachedCompile") - compiled;
            if epoch == 1 {
                report.batch_sizes.push(len);
            }
            from += len;
        }
        report.epoch_losses.push(total / count as f64);
        if verbose {
            println!(
                "epoch {epoch}: {:.1}s, training loss per image {:.2}",
                start.elapsed().as_secs_f64(),
                total / count as f64
            );
        }
    }
    report.held_out.1 = held_out_loss(&model, &held, 200)?;
    Ok(report)
}

#[allow(dead_code)]
fn main() -> lazyxla::Result<()> {
    let r = run(FULL, 1000, 64, 5, true)?;
    println!(
        "held-out loss per image {:.2} -> {:.2}; training programs compiled: {} (batches of {:?})",
        r.held_out.0,
        r.held_out.1,
        r.train_compiles,
        r.batch_sizes
            .iter()
            .fold(std::collections::BTreeSet::new(), |mut s, b| {
                s.insert(*b);
                s
            })
    );
    println!("\n{}", metrics::report());
    Ok(())
}
