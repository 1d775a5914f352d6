//! A small ResNet (BasicBlocks with batch norm, torchvision's layout) on a
//! seeded synthetic image set of four patterns: SGD with momentum, batch
//! 32. The step compiles once; batch-norm running statistics are updated
//! inside it. Held-out accuracy (evaluation mode: running statistics) is
//! printed as it rises.
//!
//! Run: `cargo run --release --example train_cnn`

#[path = "models/resnet.rs"]
mod resnet;

use lazyxla::nn::{self, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, no_grad, DType};
use resnet::{batch, SmallResNet, CLASSES};

const BATCH: usize = 32;
const STEPS: u64 = 150;

fn main() -> lazyxla::Result<()> {
    let net = SmallResNet::new(CLASSES, 0);
    let mut opt = Sgd::new(net.parameters(), 0.05).momentum(0.9);
    println!(
        "train_cnn on the {} backend: {} parameters",
        lazyxla::Device::default().name(),
        net.named_parameters().len()
    );
    let (test_x, test_y) = batch(256, 1_000_000);
    let accuracy = || -> lazyxla::Result<f32> {
        net.train(false);
        let acc = no_grad(|| {
            net.forward(&test_x)
                .argmax(1)
                .eq(&test_y)
                .to_dtype(DType::F32)
                .mean()
                .item::<f32>()
        });
        net.train(true);
        acc
    };
    println!(
        "held-out accuracy before training: {:.1}%",
        100.0 * accuracy()?
    );
    let bar = indicatif::ProgressBar::new(STEPS);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let (mut first, mut last) = (None, 0.0);
    for step in 0..STEPS {
        let (x, y) = batch(BATCH, step);
        opt.zero_grad();
        let loss = nn::cross_entropy(&net.forward(&x), &y);
        loss.backward();
        opt.step();
        mark_step()?;
        last = loss.item::<f32>()?;
        first.get_or_insert(last);
        bar.set_message(format!("loss {last:.4}"));
        bar.inc(1);
        if (step + 1) % 50 == 0 {
            bar.println(format!(
                "step {:3}: loss {last:.4}, held-out accuracy {:.1}%",
                step + 1,
                100.0 * accuracy()?
            ));
        }
    }
    bar.finish();
    println!(
        "loss {:.4} -> {last:.4}, held-out accuracy {:.1}%",
        first.unwrap_or(last),
        100.0 * accuracy()?
    );
    println!("\n{}", metrics::report());
    Ok(())
}
