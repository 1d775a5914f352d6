//! The Mask R-CNN example's training step (`examples/models/mask_rcnn.rs`,
//! small configuration): 30 steps with a different number of objects,
//! proposals, positives and negatives every step compile the step's
//! program once, and the losses fall; the detections it makes have the
//! shapes and bounds the API promises.

mod common;

#[path = "../examples/models/mask_rcnn.rs"]
#[allow(dead_code)]
mod mask_rcnn;
#[path = "../examples/models/resnet.rs"]
#[allow(dead_code)]
mod resnet;
#[path = "../examples/models/shapes.rs"]
#[allow(dead_code)]
mod shapes;

use lazyxla::nn::Module;
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, no_grad};
use mask_rcnn::{Config, Keys, MaskRcnn};

const BATCH: usize = 2;

backend_test! {
    fn thirty_training_steps_compile_once_and_the_losses_fall() {
        let cfg = Config::small();
        let model = MaskRcnn::new(cfg.clone(), 1);
        let mut opt = Sgd::new(model.parameters(), 0.02).momentum(0.9);
        mark_step().unwrap();
        let before = metrics::counter("UncachedCompile");
        let mut totals = Vec::new();
        let mut positives = std::collections::BTreeSet::new();
        for step in 0..30u64 {
            let batch = shapes::batch(cfg.image, cfg.max_objects, step * BATCH as u64, BATCH);
            let keys: Vec<Keys> = (0..BATCH).map(|b| Keys::new(&cfg, step, b)).collect();
            opt.zero_grad();
            let losses = model.losses(&batch, &keys);
            let total = losses.total();
            total.backward();
            opt.step();
            mark_step().unwrap();
            let t = total.item::<f32>().unwrap();
            assert!(t.is_finite(), "step {step}: loss {t}");
            totals.push(t);
            positives.extend(losses.positives.to_vec::<i64>().unwrap());
        }
        assert_eq!(
            metrics::counter("UncachedCompile") - before,
            1,
            "the training step compiles once over 30 steps"
        );
        assert!(positives.len() > 1, "the number of positive RoIs changes: {positives:?}");
        let mean = |v: &[f32]| v.iter().sum::<f32>() / v.len() as f32;
        let (first, last) = (mean(&totals[..5]), mean(&totals[25..]));
        assert!(last < 0.8 * first, "losses fall: first five {first}, last five {last} ({totals:?})");

        // Inference: detections are dynamic, bounded by `detections`.
        model.train(false);
        let batch = shapes::batch(cfg.image, cfg.max_objects, 500, BATCH);
        let dets = no_grad(|| model.detect(&batch.images));
        mark_step().unwrap();
        for d in &dets {
            assert_eq!(d.boxes.upper_bounds(), vec![cfg.detections, 4]);
            assert_eq!(d.masks.upper_bounds(), vec![cfg.detections, 28, 28]);
            let n = d.scores.concrete_shape().unwrap()[0];
            assert_eq!(d.labels.to_vec::<i64>().unwrap().len(), n);
            assert!(d.labels.to_vec::<i64>().unwrap().iter().all(|&c| (1..=cfg.classes as i64).contains(&c)));
        }
    }
}
