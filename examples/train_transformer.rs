//! A one-block transformer learns, for rows of tokens of different
//! lengths, to answer at every position with the largest token of its
//! row. Each step has a new longest length (60 lengths, 5 to 64): the
//! tokens are `[16, <=64]` through `mark_dynamic`, shorter rows are
//! masked with a key padding mask, and the loss counts real tokens only.
//! Padding must not leak: a padded 0 never wins, but a leaked score would
//! blur the answer. The step compiles once for all lengths.
//!
//! Run: `cargo run --release --example train_transformer`

#[path = "models/transformer.rs"]
mod transformer;

use lazyxla::nn::Module;
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, metrics, no_grad, DType, Tensor};
use transformer::{masked_cross_entropy, TinyTransformer};

const VOCAB: usize = 16;
const BATCH: usize = 16;
const MAX_LEN: usize = 64;

/// A seeded batch whose longest row has `len` tokens: tokens `[B, len]`
/// (0 after a row's end), its padding mask (`true` after the end),
/// targets (each row's largest token at every position) and the Bool
/// validity mask, all marked dynamic along the length (bound 64).
fn batch(len: usize, seed: u64) -> (Tensor, Tensor, Tensor, Tensor) {
    let mut s = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut next = move |n: usize| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 11) % n as u64) as usize
    };
    let (mut tokens, mut pad, mut targets) = (Vec::new(), Vec::new(), Vec::new());
    for row in 0..BATCH {
        let real = if row == 0 {
            len
        } else {
            len / 2 + next(len - len / 2) + 1
        }
        .min(len);
        let toks: Vec<i64> = (0..real).map(|_| 1 + next(VOCAB - 1) as i64).collect();
        let top = *toks.iter().max().unwrap();
        tokens.extend(toks.iter().copied().chain(std::iter::repeat(0)).take(len));
        pad.extend((0..len).map(|j| j >= real));
        targets.extend(std::iter::repeat_n(top, len));
    }
    let tokens = Tensor::from_vec(tokens, &[BATCH, len])
        .unwrap()
        .mark_dynamic(1, MAX_LEN);
    let pad = Tensor::from_vec(pad, &[BATCH, len])
        .unwrap()
        .mark_dynamic_as(1, &tokens, 1);
    let targets = Tensor::from_vec(targets, &[BATCH, len])
        .unwrap()
        .mark_dynamic_as(1, &tokens, 1);
    let valid = pad.logical_not();
    (tokens, pad, targets, valid)
}

/// The fraction of real positions answered correctly.
fn accuracy(net: &TinyTransformer, len: usize, seed: u64) -> lazyxla::Result<f32> {
    let (tokens, pad, targets, valid) = batch(len, seed);
    no_grad(|| {
        let right = net.logits(&tokens, Some(&pad)).argmax(2).eq(&targets);
        let right = right.logical_and(&valid).to_dtype(DType::F32).sum();
        (right / valid.to_dtype(DType::F32).sum()).item::<f32>()
    })
}

fn main() -> lazyxla::Result<()> {
    let net = TinyTransformer::new(VOCAB, 32, 4, 64, 0);
    let mut opt = Adam::new(net.parameters(), 3e-3);
    println!(
        "train_transformer on the {} backend",
        lazyxla::Device::default().name()
    );
    let lengths: Vec<usize> = (5..=MAX_LEN).collect();
    let steps = 4 * lengths.len() as u64;
    let bar = indicatif::ProgressBar::new(steps);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let (mut first, mut last) = (None, 0.0);
    for step in 0..steps {
        // Every length once per epoch, in a different order each epoch.
        let epoch = step as usize / lengths.len();
        let len = lengths[(step as usize * (7 + 2 * epoch)) % lengths.len()];
        let (tokens, pad, targets, valid) = batch(len, step);
        opt.zero_grad();
        let loss = masked_cross_entropy(&net.logits(&tokens, Some(&pad)), &targets, &valid);
        loss.backward();
        opt.step();
        mark_step()?;
        last = loss.item::<f32>()?;
        first.get_or_insert(last);
        bar.set_message(format!("length {len:2}, loss {last:.4}"));
        bar.inc(1);
    }
    bar.finish();
    let held_out: f32 = [9, 33, 64]
        .iter()
        .map(|&l| accuracy(&net, l, 1_000_000 + l as u64))
        .sum::<lazyxla::Result<f32>>()?
        / 3.0;
    println!(
        "loss {:.4} -> {last:.4}; held-out accuracy (lengths 9, 33, 64) {:.1}% (chance {:.1}%)",
        first.unwrap_or(last),
        100.0 * held_out,
        100.0 / (VOCAB - 1) as f32
    );
    println!(
        "{} lengths, {} compiles of the training step and the evaluation",
        lengths.len(),
        metrics::counter("UncachedCompile")
    );
    println!("\n{}", metrics::report());
    Ok(())
}
