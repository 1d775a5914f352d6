//! A small Mask R-CNN trained on seeded synthetic shapes (squares, disks,
//! triangles on noise; one to four objects per image). Every step has a
//! different number of objects, proposals, positive and negative anchors
//! and RoIs, and the step still compiles once: the counts are dynamic
//! sizes with static bounds. Held-out recall at IoU 0.5 and mask IoU are
//! printed before and during training.
//!
//! Run: `cargo run --release --example train_mask_rcnn [-- STEPS] [--small]`

#[path = "models/mask_rcnn.rs"]
mod mask_rcnn;
#[path = "models/resnet.rs"]
#[allow(dead_code)]
mod resnet;
#[path = "models/shapes.rs"]
mod shapes;

use lazyxla::nn::Module;
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, no_grad};
use mask_rcnn::{Config, Keys, MaskRcnn};

const BATCH: usize = 2;
const HELD_OUT: u64 = 1_000_000;

fn main() -> lazyxla::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps: u64 = args.iter().find_map(|s| s.parse().ok()).unwrap_or(600);
    // `--small`: 64-pixel images and a narrower model (the test's), for a
    // quick run on the reference backend.
    let cfg = if args.iter().any(|a| a == "--small") {
        Config::small()
    } else {
        Config::example()
    };
    let model = MaskRcnn::new(cfg.clone(), 0);
    let mut opt = Sgd::new(model.parameters(), 0.02)
        .momentum(0.9)
        .weight_decay(1e-4);
    println!(
        "train_mask_rcnn on the {} backend: {} parameters, {}x{} images, batch {BATCH}",
        lazyxla::Device::default().name(),
        model
            .parameters()
            .iter()
            .map(|p| p.upper_bounds().iter().product::<usize>())
            .sum::<usize>(),
        cfg.image,
        cfg.image,
    );
    let report = |what: &str| -> lazyxla::Result<()> {
        let (recall, mask_iou) = evaluate(&model, 24)?;
        println!(
            "{what}: held-out recall@0.5 {:.1}%, mask IoU {:.3}",
            100.0 * recall,
            mask_iou
        );
        Ok(())
    };
    report("before training")?;
    let bar = indicatif::ProgressBar::new(steps);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let mut first: Option<[f32; 5]> = None;
    let mut avg = [0.0f32; 5];
    for step in 0..steps {
        let batch = shapes::batch(cfg.image, cfg.max_objects, step * BATCH as u64, BATCH);
        let keys: Vec<Keys> = (0..BATCH).map(|b| Keys::new(&cfg, step, b)).collect();
        opt.zero_grad();
        let losses = model.losses(&batch, &keys);
        losses.total().backward();
        opt.step();
        mark_step()?;
        let now = [
            losses.objectness.item::<f32>()?,
            losses.rpn_box.item::<f32>()?,
            losses.classifier.item::<f32>()?,
            losses.box_reg.item::<f32>()?,
            losses.mask.item::<f32>()?,
        ];
        for (a, v) in avg.iter_mut().zip(now) {
            *a = if step == 0 { v } else { 0.9 * *a + 0.1 * v };
        }
        first.get_or_insert(now);
        let positives = losses.positives.to_vec::<i64>()?;
        bar.set_message(format!(
            "loss {:.3} (rpn {:.3} + {:.3}, cls {:.3}, box {:.3}, mask {:.3}), positive RoIs {positives:?}",
            avg.iter().sum::<f32>(),
            avg[0],
            avg[1],
            avg[2],
            avg[3],
            avg[4]
        ));
        bar.inc(1);
        if (step + 1) % 200 == 0 && step + 1 < steps {
            bar.suspend(|| report(&format!("step {}", step + 1)))?;
        }
    }
    bar.finish();
    let first = first.unwrap_or(avg);
    println!(
        "losses (smoothed) {:.3} -> {:.3}",
        first.iter().sum::<f32>(),
        avg.iter().sum::<f32>()
    );
    report("after training")?;
    println!("\n{}", metrics::report());
    Ok(())
}

/// Recall at IoU 0.5 (an object is found when a detection of its class
/// with score >= 0.5 overlaps it at IoU >= 0.5) and the mean mask IoU of
/// the found objects (the detection's 28x28 mask pasted into its box,
/// thresholded at 0.5, against the object's mask) over `images` held-out
/// images.
fn evaluate(model: &MaskRcnn, images: u64) -> lazyxla::Result<(f64, f64)> {
    let cfg = &model.cfg;
    model.train(false);
    let result = no_grad(|| -> lazyxla::Result<(f64, f64)> {
        let (mut objects, mut found, mut iou_sum) = (0usize, 0usize, 0.0f64);
        for first in (0..images).step_by(BATCH) {
            let batch = shapes::batch(cfg.image, cfg.max_objects, HELD_OUT + first, BATCH);
            let samples: Vec<shapes::Sample> = (0..BATCH as u64)
                .map(|i| shapes::sample(cfg.image, cfg.max_objects, HELD_OUT + first + i))
                .collect();
            let dets = model.detect(&batch.images);
            mark_step()?; // one program for every detection of the batch
            for (s, d) in samples.iter().zip(&dets) {
                let boxes = d.boxes.to_vec::<f32>()?;
                let scores = d.scores.to_vec::<f32>()?;
                let labels = d.labels.to_vec::<i64>()?;
                let masks = d.masks.to_vec::<f32>()?;
                for (g, gt) in s.boxes.iter().enumerate() {
                    objects += 1;
                    let best = (0..scores.len())
                        .filter(|&i| scores[i] >= 0.5 && labels[i] == s.labels[g])
                        .map(|i| {
                            let b = [
                                boxes[4 * i],
                                boxes[4 * i + 1],
                                boxes[4 * i + 2],
                                boxes[4 * i + 3],
                            ];
                            (i, shapes::iou(gt, &b))
                        })
                        .filter(|&(_, iou)| iou >= 0.5)
                        .max_by(|a, b| a.1.total_cmp(&b.1));
                    if let Some((i, _)) = best {
                        found += 1;
                        let b = &boxes[4 * i..4 * i + 4];
                        let m = &masks[28 * 28 * i..28 * 28 * (i + 1)];
                        let gt_mask =
                            &s.masks[g * cfg.image * cfg.image..(g + 1) * cfg.image * cfg.image];
                        iou_sum += mask_iou(m, b, gt_mask, cfg.image);
                    }
                }
            }
        }
        Ok((
            found as f64 / objects.max(1) as f64,
            iou_sum / found.max(1) as f64,
        ))
    });
    model.train(true);
    result
}

/// IoU of a 28x28 mask pasted into `bx` (nearest sample, > 0.5) with an
/// image mask.
fn mask_iou(m: &[f32], bx: &[f32], gt: &[f32], size: usize) -> f64 {
    let (mut inter, mut union) = (0usize, 0usize);
    for y in 0..size {
        for x in 0..size {
            let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
            let inside = px >= bx[0] && px < bx[2] && py >= bx[1] && py < bx[3];
            let pred = inside && {
                let u = (((px - bx[0]) / (bx[2] - bx[0]).max(1e-3)) * 28.0) as usize;
                let v = (((py - bx[1]) / (bx[3] - bx[1]).max(1e-3)) * 28.0) as usize;
                m[v.min(27) * 28 + u.min(27)] > 0.5
            };
            let truth = gt[y * size + x] > 0.5;
            inter += (pred && truth) as usize;
            union += (pred || truth) as usize;
        }
    }
    inter as f64 / union.max(1) as f64
}
