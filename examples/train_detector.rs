//! A small detection-style model (the Mask R-CNN pattern): every step,
//! anchors are scored, positives are picked with `gt(threshold)` and
//! `nonzero`, a box-regression loss (`smooth_l1_loss`) is computed only on
//! the selected boxes, and the model is trained. The number of positives
//! changes every step; the whole run compiles the step program once.
//!
//! Run: `cargo run --release --example train_detector`

use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, metrics, Tensor};

/// Anchors per image and features per anchor.
pub const ANCHORS: usize = 64;
pub const FEATURES: usize = 16;

/// One synthetic image: anchor features, which anchors overlap an object
/// (their "IoU" with the ground truth) and the box deltas to regress.
pub struct Image {
    pub features: Tensor,
    pub iou: Tensor,
    pub deltas: Tensor,
}

impl Image {
    /// The image as the inputs of a captured step (`lazyxla::capture`).
    pub fn inputs(&self) -> [Tensor; 3] {
        [self.features.clone(), self.iou.clone(), self.deltas.clone()]
    }

    /// The image back from a captured step's inputs (see [`Image::inputs`]).
    pub fn from_inputs(x: &[Tensor]) -> Image {
        Image {
            features: x[0].clone(),
            iou: x[1].clone(),
            deltas: x[2].clone(),
        }
    }
}

/// A seeded image; IoU and deltas are fixed functions of the features,
/// so the model can learn them. Between 1 and ~30 anchors are positive.
pub fn image(seed: u64) -> Image {
    let mut g = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5);
    let mut feats = Vec::with_capacity(ANCHORS * FEATURES);
    let mut iou = Vec::with_capacity(ANCHORS);
    let mut deltas = Vec::with_capacity(ANCHORS * 4);
    for a in 0..ANCHORS {
        let row: Vec<f32> = (0..FEATURES).map(|_| g.normal()).collect();
        let quality = 0.5 + 0.35 * (row[0] + 0.5 * row[1]).tanh() + if a == 0 { 0.3 } else { 0.0 };
        iou.push(quality.clamp(0.0, 1.0));
        for k in 0..4 {
            deltas.push(0.5 * row[k + 2] - 0.25 * row[(k + 7) % FEATURES]);
        }
        feats.extend(row);
    }
    Image {
        features: Tensor::from_vec(feats, &[ANCHORS, FEATURES]).unwrap(),
        iou: Tensor::from_vec(iou, &[ANCHORS]).unwrap(),
        deltas: Tensor::from_vec(deltas, &[ANCHORS, 4]).unwrap(),
    }
}

/// An objectness head and a box-regression head on anchor features.
pub struct Detector {
    pub score: Linear,
    pub boxes: Linear,
}

impl Detector {
    pub fn new(seed: u64) -> Detector {
        Detector {
            score: Linear::new(FEATURES, 1, seed),
            boxes: Linear::new(FEATURES, 4, seed + 1),
        }
    }

    pub fn parameters(&self) -> Vec<Tensor> {
        let mut p = self.score.parameters();
        p.extend(self.boxes.parameters());
        p
    }
}

/// Records one training step and returns (loss, number of positives).
/// Nothing runs until the caller's `mark_step()`.
pub fn train_step(model: &Detector, opt: &mut impl Optimizer, img: &Image) -> (Tensor, Tensor) {
    opt.zero_grad();
    let logits = model.score.forward(&img.features).squeeze(1); // [64]
    let labels = img.iou.gt_scalar(0.5); // positives: data-dependent
    let cls_loss = nn::binary_cross_entropy_with_logits(&logits, &labels);
    let positives = labels.nonzero().flatten(); // [<=64] anchor indices
    let pred = model
        .boxes
        .forward(&img.features.index_select(0, &positives)); // [<=64, 4]
    let target = img.deltas.index_select(0, &positives); // [<=64, 4]
    let reg_loss = nn::smooth_l1_loss(&pred, &target);
    let loss = &cls_loss + &reg_loss;
    loss.backward();
    opt.step();
    (loss, positives)
}

#[allow(dead_code)]
fn main() -> lazyxla::Result<()> {
    let steps = 200;
    let model = Detector::new(3);
    let mut opt = Adam::new(model.parameters(), 0.02);
    println!(
        "train_detector on the {} backend",
        lazyxla::Device::default().name()
    );
    let bar = indicatif::ProgressBar::new(steps);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let mut first = None;
    let mut last = 0.0;
    for step in 0..steps {
        let img = image(step % 50);
        let (loss, positives) = train_step(&model, &mut opt, &img);
        mark_step()?;
        last = loss.item::<f32>()?;
        first.get_or_insert(last);
        bar.set_message(format!(
            "loss {last:.4}  positives {:>2}",
            positives.size(0).materialize()?
        ));
        bar.inc(1);
    }
    bar.finish();
    println!("loss {:.4} -> {last:.4}", first.unwrap_or(last));
    println!("\n{}", metrics::report());
    Ok(())
}

/// A tiny seeded generator for the synthetic data (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f32 {
        let (u, v) = (self.next().max(1e-12), self.next());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
}
