//! The bigger workloads: torchvision's ResNet-50 and GPT-2 small
//! training, each the same step as its twins in
//! `peers/jax_big_models.py` (JAX) and `peers/torch_big_models.py`
//! (PyTorch eager); `peers/compare_big.sh` runs the three side by side.

#[path = "../../examples/models/resnet50.rs"]
mod resnet50;

#[path = "../../examples/models/gpt2.rs"]
mod gpt2;

use super::{normal, train_step, uniform, Step};
use lazyxla::nn::{self, Module};
use lazyxla::optim::{AdamW, Sgd};
use lazyxla::{mark_step, Tensor};

/// One SGD step (lr 0.01, momentum 0.9) of ResNet-50 in training mode on
/// 8 images of 3x112x112, 1000 classes, the mean cross-entropy read.
pub fn resnet50_step(steps: usize, captured: bool) -> Step {
    const BATCH: usize = 8;
    const SIDE: usize = 112;
    const CLASSES: usize = 1000;
    let net = resnet50::ResNet50::new(CLASSES, 0);
    let opt = Sgd::new(net.parameters(), 0.01).momentum(0.9);
    let data: Vec<(Vec<f32>, Vec<i64>)> = (0..=steps.max(3) as u64)
        .map(|i| {
            let y = uniform(i + 7, BATCH)
                .iter()
                .map(|u| ((u * CLASSES as f32) as i64).min(CLASSES as i64 - 1))
                .collect();
            (normal(i, BATCH * 3 * SIDE * SIDE), y)
        })
        .collect();
    train_step(
        opt,
        move |x| nn::cross_entropy(&net.forward(&x[0]), &x[1]),
        move |i| {
            [
                Tensor::from_slice(&data[i].0, &[BATCH, 3, SIDE, SIDE]).unwrap(),
                Tensor::from_slice(&data[i].1, &[BATCH]).unwrap(),
            ]
        },
        captured,
    )
}

/// GPT-2 small's rows and the longest sequence.
const GPT2_BATCH: usize = 4;
const GPT2_MAX: usize = 128;

/// Step `i`'s sequence length, 32 to 128, as on the peers' side.
fn gpt2_len(i: usize) -> usize {
    32 + (i * 37) % 97
}

/// Step `i`'s tokens and next-token targets, `[4, len]` each.
fn gpt2_data(i: usize, vocab: usize) -> (usize, Vec<i64>, Vec<i64>) {
    let len = gpt2_len(i);
    let token = |b: usize, j: usize| ((1000 + 7919 * (i * 131 + b * 17 + j)) % vocab) as i64;
    let mut inputs = Vec::with_capacity(GPT2_BATCH * len);
    let mut targets = Vec::with_capacity(GPT2_BATCH * len);
    for b in 0..GPT2_BATCH {
        inputs.extend((0..len).map(|j| token(b, j)));
        targets.extend((1..=len).map(|j| token(b, j)));
    }
    (len, inputs, targets)
}

/// One AdamW step (lr 1e-4, weight decay 0.01) of a randomly initialised
/// GPT-2 small on 4 sequences whose length changes every step (32 to 128,
/// `mark_dynamic` with bound 128: one program for every length), the
/// mean cross-entropy over the real tokens read. JAX pads to 128 by hand.
pub fn gpt2_train_step(steps: usize, captured: bool) -> Step {
    let config = gpt2::Config::gpt2_small();
    let vocab = config.vocab_size;
    let net = gpt2::Gpt2::random(config, 0);
    // The initial weights are computed before the first step.
    mark_step().unwrap();
    let opt = AdamW::new(net.parameters(), 1e-4).weight_decay(0.01);
    let data: Vec<_> = (0..=steps.max(3)).map(|i| gpt2_data(i, vocab)).collect();
    train_step(
        opt,
        // Cross-entropy over `[4, <=128, V]` as it is: flattening the
        // dynamic length into rows would pack them (a gather each way).
        move |x| {
            net.logits(&x[0])
                .log_softmax(2)
                .gather(2, &x[1].unsqueeze(2))
                .neg()
                .mean()
        },
        move |i| {
            let (len, inputs, targets) = &data[i];
            let inputs = Tensor::from_slice(inputs, &[GPT2_BATCH, *len])
                .unwrap()
                .mark_dynamic(1, GPT2_MAX);
            let targets = Tensor::from_slice(targets, &[GPT2_BATCH, *len])
                .unwrap()
                .mark_dynamic_as(1, &inputs, 1);
            [inputs, targets]
        },
        captured,
    )
}
