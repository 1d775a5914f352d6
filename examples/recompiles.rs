//! Three traps that make a training loop compile more than once, and
//! what lazyxla says about each: a learning rate written as a number, a
//! last batch of another size, and a read before `mark_step`.
//!
//! ```sh
//! LAZYXLA_DEBUG=1 cargo run --release --example recompiles
//! ```
//!
//! With `LAZYXLA_DEBUG=1` every compile's cause is printed as it happens,
//! and a summary at exit; without it the same entries come from
//! `lazyxla::debug::compile_log()`, printed at the end.

use lazyxla::nn::{self, Linear, Module};
use lazyxla::{debug, mark_step, no_grad, Tensor};

fn main() -> lazyxla::Result<()> {
    let model = Linear::new(4, 1, 0);
    let batches = [8usize, 8, 8, 5];
    for (step, &rows) in batches.iter().enumerate() {
        let x = Tensor::from_vec(vec![0.5f32; rows * 4], &[rows, 4])?;
        let y = Tensor::from_vec(vec![1.0f32; rows], &[rows, 1])?;
        let loss = nn::mse_loss(&model.forward(&x), &y);
        loss.backward();
        // A learning rate that decays, written as a number: every value is
        // another program (an optimizer's `set_lr` changes it without one).
        let lr = 0.1 / (1.0 + step as f64);
        no_grad(|| {
            for p in model.parameters() {
                let g = p.grad().expect("a gradient");
                p.assign(&(&p - &(&g * lr)));
                p.zero_grad();
            }
        });
        // Read before the step's `mark_step`: this runs a program of its
        // own (with the update, which shares its graph).
        println!("step {step}: loss {:.4}", loss.item::<f32>()?);
        mark_step()?;
    }
    println!("\nlazyxla::debug::compile_log():");
    for entry in debug::compile_log() {
        println!("  {entry}");
    }
    Ok(())
}
