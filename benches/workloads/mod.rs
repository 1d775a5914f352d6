//! The model workloads of `benches/models.rs` and `benches/lowering.rs`,
//! written as a user would, each the same step as its JAX twin in
//! `peers/jax_models.py`. A workload is a closure running step `i` on its
//! own seeded inputs (generated before the first step, so that host data
//! generation stays out of every timing, as on the JAX side) and returning
//! the loss it read.

#![allow(dead_code)]

#[allow(dead_code)]
#[path = "../../examples/models/resnet.rs"]
mod resnet;

#[allow(dead_code)]
#[path = "../../examples/models/transformer.rs"]
mod transformer;

mod big;
mod cpu;

pub use cpu::cpu_ms;

use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::{Adam, Optimizer, Sgd};
use lazyxla::{mark_step, Tensor};

/// A workload's step: runs step `i` (inputs `i`, `0..=steps`) and returns
/// what it read.
pub type Step = Box<dyn FnMut(usize) -> f64>;

/// The workload called `name`, with inputs for steps `0..=steps`.
pub fn workload(name: &str, steps: usize) -> Option<Step> {
    Some(match name {
        "topk" => topk(steps),
        "resnet" => resnet_step(steps),
        "transformer" => transformer_step(steps, false),
        "transformer_captured" => transformer_step(steps, true),
        "mlp" => mlp_step(steps, false),
        "mlp_bf16" => mlp_step(steps, true),
        "detect" => detect_step(steps, false),
        "detect_captured" => detect_step(steps, true),
        "zone" => zone_step(steps, false),
        "zone_captured" => zone_step(steps, true),
        "resnet50" => big::resnet50_step(steps, false),
        "resnet50_captured" => big::resnet50_step(steps, true),
        "gpt2_train" => big::gpt2_train_step(steps, false),
        "gpt2_train_captured" => big::gpt2_train_step(steps, true),
        _ => return None,
    })
}

/// The names [`workload`] knows.
pub const NAMES: &str = "topk, resnet, transformer, transformer_captured, mlp, mlp_bf16, detect, \
     detect_captured, zone, zone_captured, resnet50, resnet50_captured, gpt2_train, \
     gpt2_train_captured";

/// One SGD step (momentum 0.9) of the small ResNet (`examples/models`),
/// batch 32 of 3x32x32 images, 10 classes, the loss read.
fn resnet_step(steps: usize) -> Step {
    const BATCH: usize = 32;
    let net = resnet::SmallResNet::new(10, 0);
    let opt = Sgd::new(net.parameters(), 0.1).momentum(0.9);
    let data: Vec<(Vec<f32>, Vec<i64>)> = (0..=steps as u64)
        .map(|i| {
            let x = normal(i, BATCH * 3 * 32 * 32);
            let y = uniform(i + 7, BATCH)
                .iter()
                .map(|u| (u * 10.0) as i64)
                .collect();
            (x, y)
        })
        .collect();
    train_step(
        opt,
        move |x| nn::cross_entropy(&net.forward(&x[0]), &x[1]),
        move |i| {
            [
                Tensor::from_slice(&data[i].0, &[BATCH, 3, 32, 32]).unwrap(),
                Tensor::from_slice(&data[i].1, &[BATCH]).unwrap(),
            ]
        },
        false,
    )
}

/// `topk` of 100,000 scores, k = 1000, both results read.
const TOPK_N: usize = 100_000;
const TOPK_K: usize = 1000;

fn topk(steps: usize) -> Step {
    let data: Vec<Vec<f32>> = (0..=steps as u64).map(|i| uniform(i, TOPK_N)).collect();
    Box::new(move |i| {
        let x = Tensor::from_slice(&data[i], &[TOPK_N]).unwrap();
        let (v, idx) = x.topk(TOPK_K, 0, true);
        mark_step().unwrap();
        let v = v.to_vec::<f32>().unwrap();
        let idx = idx.to_vec::<i64>().unwrap();
        v[0] as f64 + idx[0] as f64
    })
}

/// One SGD step of the transformer block (`examples/models`): 16 rows of
/// a length that changes every step (16 to 64, `mark_dynamic`, bound 64),
/// vocabulary 1000, width 64, 4 heads, MLP 256; the mean cross-entropy
/// over the real tokens read. JAX pads by hand to 64 and masks.
///
/// With `captured`, the step in `lazyxla::capture`: one recording serves
/// every length, since a variant is keyed by the inputs' bounds.
fn transformer_step(steps: usize, captured: bool) -> Step {
    let (net, opt, data) = transformer_setup(steps);
    train_step(
        opt,
        move |x| transformer_loss(&net, &x[0], &x[1]),
        move |i| transformer_inputs(&data[i]),
        captured,
    )
}

const TB: usize = 16;
const TMAX: usize = 64;
const VOCAB: usize = 1000;

/// One step's tokens and targets, `TB` rows of the step's length.
type TransformerData = (usize, Vec<i64>, Vec<i64>);

/// The block, its optimizer and the inputs of steps `0..=steps`, whose
/// length changes every step (16 to 64).
fn transformer_setup(steps: usize) -> (transformer::TinyTransformer, Sgd, Vec<TransformerData>) {
    let net = transformer::TinyTransformer::new(VOCAB, 64, 4, 256, 0);
    let opt = Sgd::new(net.parameters(), 0.01);
    let data = (0..=steps as u64)
        .map(|i| {
            let len = TMAX / 4 + (uniform(i, 1)[0] * (TMAX - TMAX / 4 + 1) as f32) as usize;
            let len = len.min(TMAX);
            let tok = |s| {
                uniform(s, TB * len)
                    .iter()
                    .map(|u| (u * VOCAB as f32) as i64)
                    .collect()
            };
            (len, tok(i + 11), tok(i + 13))
        })
        .collect();
    (net, opt, data)
}

/// Tokens `[TB, <=TMAX]` and targets sharing their length.
fn transformer_inputs((len, tokens, targets): &TransformerData) -> [Tensor; 2] {
    let tokens = Tensor::from_slice(tokens, &[TB, *len])
        .unwrap()
        .mark_dynamic(1, TMAX);
    let targets = Tensor::from_slice(targets, &[TB, *len])
        .unwrap()
        .mark_dynamic_as(1, &tokens, 1);
    [tokens, targets]
}

/// The mean cross-entropy per token, as the JAX side: flattening
/// `[16, <=64, V]` to `[16*s, V]` would pack the rows (a gather each way).
fn transformer_loss(
    net: &transformer::TinyTransformer,
    tokens: &Tensor,
    targets: &Tensor,
) -> Tensor {
    net.forward(tokens)
        .log_softmax(2)
        .gather(2, &targets.unsqueeze(2))
        .neg()
        .mean()
}

/// One Adam step of a 784-512-512-10 MLP at batch 128 (`train_step`'s
/// workload), computing in f32 or, with `bf16`, in bfloat16 from f32
/// weights (mixed precision: the weights, gradients and Adam's state stay
/// f32, the loss is taken in f32).
fn mlp_step(steps: usize, bf16: bool) -> Step {
    use lazyxla::nn::{Relu, Sequential};
    use lazyxla::DType;
    const BATCH: usize = 128;
    let net = Sequential::new()
        .add(Linear::new(784, 512, 1))
        .add(Relu)
        .add(Linear::new(512, 512, 2))
        .add(Relu)
        .add(Linear::new(512, 10, 3));
    let opt = Adam::new(net.parameters(), 1e-3);
    let data: Vec<(Vec<f32>, Vec<i64>)> = (0..=steps as u64)
        .map(|i| {
            let y = uniform(i + 7, BATCH)
                .iter()
                .map(|u| (u * 10.0) as i64)
                .collect();
            (normal(i, BATCH * 784), y)
        })
        .collect();
    let forward = move |x: &Tensor| {
        if !bf16 {
            return net.forward(x);
        }
        let p: Vec<Tensor> = net
            .parameters()
            .iter()
            .map(|t| t.to_dtype(DType::BF16))
            .collect();
        let mut h = x.to_dtype(DType::BF16);
        for (i, pair) in p.chunks(2).enumerate() {
            h = h.matmul(&pair[0].transpose(0, 1)) + &pair[1];
            if i < 2 {
                h = h.relu();
            }
        }
        h.to_dtype(DType::F32)
    };
    train_step(
        opt,
        move |x| nn::cross_entropy(&forward(&x[0]), &x[1]),
        move |i| {
            [
                Tensor::from_slice(&data[i].0, &[BATCH, 784]).unwrap(),
                Tensor::from_slice(&data[i].1, &[BATCH]).unwrap(),
            ]
        },
        false,
    )
}

/// The detector of `examples/train_detector.rs` on 4096 anchors of 16
/// features, trained with SGD (lr 0.02): objectness on every anchor, and a
/// smooth-L1 box loss on the positives only (`gt` + `nonzero` +
/// `index_select`, about half the anchors, a different number every
/// step); the loss read. JAX's twin pads by hand: a mask and a masked mean.
/// With `captured`, the step in `lazyxla::capture`.
fn detect_step(steps: usize, captured: bool) -> Step {
    let (score, boxes, opt, data) = detect_setup(steps);
    train_step(
        opt,
        move |x| detect_loss(&score, &boxes, &x[0], &x[1], &x[2]),
        move |i| detect_inputs(&data[i]),
        captured,
    )
}

const ANCHORS: usize = 4096;
const FEATURES: usize = 16;

/// One step's host data: features, IoU with the ground truth, box deltas.
type DetectData = (Vec<f32>, Vec<f32>, Vec<f32>);

/// The detector's two heads, its optimizer and the inputs of steps
/// `0..=steps`.
fn detect_setup(steps: usize) -> (Linear, Linear, Sgd, Vec<DetectData>) {
    let score = Linear::new(FEATURES, 1, 3);
    let boxes = Linear::new(FEATURES, 4, 4);
    let mut params = score.parameters();
    params.extend(boxes.parameters());
    let opt = Sgd::new(params, 0.02);
    let data = (0..=steps as u64)
        .map(|i| {
            let f = normal(i, ANCHORS * FEATURES);
            let row = |a: usize| &f[a * FEATURES..(a + 1) * FEATURES];
            let iou = (0..ANCHORS)
                .map(|a| {
                    let r = row(a);
                    let q = 0.5 + 0.35 * (r[0] + 0.5 * r[1]).tanh();
                    if a == 0 {
                        1.0
                    } else {
                        q.clamp(0.0, 1.0)
                    }
                })
                .collect();
            let deltas = (0..ANCHORS)
                .flat_map(|a| {
                    let r = row(a);
                    (0..4).map(move |k| 0.5 * r[k + 2] - 0.25 * r[k + 7])
                })
                .collect();
            (f, iou, deltas)
        })
        .collect();
    (score, boxes, opt, data)
}

/// One step's inputs as tensors.
fn detect_inputs((f, iou, deltas): &DetectData) -> [Tensor; 3] {
    [
        Tensor::from_slice(f, &[ANCHORS, FEATURES]).unwrap(),
        Tensor::from_slice(iou, &[ANCHORS]).unwrap(),
        Tensor::from_slice(deltas, &[ANCHORS, 4]).unwrap(),
    ]
}

/// Objectness on every anchor plus smooth-L1 on the positives.
fn detect_loss(
    score: &Linear,
    boxes: &Linear,
    features: &Tensor,
    iou: &Tensor,
    deltas: &Tensor,
) -> Tensor {
    let logits = score.forward(features).squeeze(1);
    let labels = iou.gt_scalar(0.5);
    let cls = nn::binary_cross_entropy_with_logits(&logits, &labels);
    let positives = labels.nonzero().flatten();
    let pred = boxes.forward(&features.index_select(0, &positives));
    let target = deltas.index_select(0, &positives);
    &cls + &nn::smooth_l1_loss(&pred, &target)
}

/// A training step on step `i`'s inputs: take the loss, backward,
/// update, clear the gradients, read the loss. The loss is built in a function,
/// as `examples/train_detector.rs` builds it, so the step's intermediates
/// are dropped before the sync and are not computed as results. Lazily,
/// each step records and syncs with `mark_step`; with `captured`, the step
/// is recorded once with `lazyxla::capture` and replayed (JAX's twin is
/// the same jitted step either way).
fn train_step<O: Optimizer + 'static, const N: usize>(
    mut opt: O,
    loss: impl Fn(&[Tensor]) -> Tensor + 'static,
    inputs: impl Fn(usize) -> [Tensor; N] + 'static,
    captured: bool,
) -> Step {
    let mut step = move |x: &[Tensor]| {
        let loss = loss(x);
        loss.backward();
        opt.step();
        // Nothing reads the gradients after the update: cleared here,
        // they are not results of the step's program (as in the JAX
        // twins, whose step returns none), which saves their memory and
        // more (GPT-2 small: 2.8 GB peak against 4.1; README, "Memory").
        opt.zero_grad();
        vec![loss]
    };
    if captured {
        let mut step = lazyxla::capture(step);
        Box::new(move |i| {
            let out = step.run(&inputs(i)).unwrap();
            out[0].item::<f32>().unwrap() as f64
        })
    } else {
        Box::new(move |i| {
            let loss = step(&inputs(i)).remove(0);
            mark_step().unwrap();
            loss.item::<f32>().unwrap() as f64
        })
    }
}

/// The dynamic zone of issue 21: a 5x5 grid of 0/1 uploaded, the squared
/// coordinates of its nonzeros summed (`nonzero`, `pow`, `sum`) plus 2,
/// read every step; recorded lazily, or with `captured` captured once and
/// replayed. JAX's twin masks the coordinate grid by hand.
fn zone_step(steps: usize, captured: bool) -> Step {
    use lazyxla::DType;
    let data: Vec<Vec<f32>> = (0..=steps as u64)
        .map(|i| {
            uniform(i, 25)
                .iter()
                .map(|u| (*u < 0.4) as u8 as f32)
                .collect()
        })
        .collect();
    let zone = |x: &Tensor| x.nonzero().to_dtype(DType::F32).pow(2.0).sum() + 2.0;
    if captured {
        let mut step = lazyxla::capture(move |x: &[Tensor]| vec![zone(&x[0])]);
        return Box::new(move |i| {
            let x = Tensor::from_slice(&data[i], &[5, 5]).unwrap();
            let out = step.run(&[x]).unwrap();
            out[0].item::<f32>().unwrap() as f64
        });
    }
    Box::new(move |i| {
        let x = Tensor::from_slice(&data[i], &[5, 5]).unwrap();
        let total = zone(&x);
        mark_step().unwrap();
        total.item::<f32>().unwrap() as f64
    })
}

/// Seeded uniform floats in [0, 1).
pub fn uniform(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// Seeded standard normal floats (Box-Muller over [`uniform`]).
pub fn normal(seed: u64, n: usize) -> Vec<f32> {
    let u = uniform(seed, n + 1);
    (0..n)
        .map(|i| {
            let (a, b) = (u[i].max(1e-7) as f64, u[i + 1] as f64);
            ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
        })
        .collect()
}
