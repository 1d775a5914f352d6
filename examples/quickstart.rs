//! An eager-style loop with `mark_step()`: every step scores a batch,
//! keeps the positive scores (a data-dependent number of them), and
//! updates a running estimate. The number of positives changes every step,
//! yet the step compiles once.
//!
//! Run: `cargo run --release --example quickstart`

use lazyxla::{mark_step, metrics, Device, Tensor};

fn main() -> lazyxla::Result<()> {
    let device = Device::default();
    println!("lazyxla quickstart on the {} backend", device.name());

    let w = Tensor::randn(&[8, 4], 7);
    let mut running = Tensor::scalar(0.0f32); // data, so step 0 has the same structure as the rest
    for step in 0..10 {
        let x = Tensor::randn(&[16, 8], 100 + step);
        let scores = x.matmul(&w).tanh(); // [16, 4]
        let positive = scores.masked_select(&scores.gt_scalar(0.25)); // [<=64]
        let mean_pos = positive.mean(); // reduction ends the dynamic zone
        running = &running * 0.9 + &mean_pos * 0.1;
        mark_step()?; // one compiled program per step; the same one every step
        println!(
            "step {step}: {:>2} of {} scores above 0.25 (shape {}), their mean {:.4}, running {:.4}",
            positive.size(0).materialize()?,
            positive.size(0).upper_bound(),
            positive.shape_string(),
            mean_pos.item::<f32>()?,
            running.item::<f32>()?,
        );
    }
    println!("\n{}", metrics::report());
    Ok(())
}
