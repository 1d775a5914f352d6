//! The detector of `train_detector` trained data-parallel on 4 devices:
//! every step splits the image's 64 anchors across the devices (16
//! each), each device picks ITS positives (`gt` + `nonzero`: a different
//! number on every device and every step) and computes its part of the
//! loss, and one `all_reduce` combines the gradients, all in one compiled
//! program that runs on the 4 devices at once. Parameters and Adam's
//! moments live on every device and never leave them.
//!
//! The same steps run on one device with the whole image alongside, to
//! show that the two trainings agree, and that the 4 replicas hold the
//! same parameters. A process has one CPU device unless it asks
//! for more, so `main` asks for 4 first (`lazyxla::set_cpu_device_count`);
//! on the XLA CPU plugin they share the machine's cores: this shows the
//! path that spreads a step over several GPUs, not a speed-up.
//!
//! Run: `cargo run --release --example data_parallel`

#[path = "train_detector.rs"]
#[allow(dead_code)]
mod detector;

use detector::{image, Detector, Image};
use lazyxla::nn::Module;
use lazyxla::optim::Adam;
use lazyxla::parallel::{self, DataParallel, GradientAverage, ReduceOp};
use lazyxla::{mark_step, metrics, DType, Tensor};

/// This replica's part of the detector's loss, normalized by the counts
/// over ALL replicas (an `all_reduce` each), so that the replicas' losses
/// and gradients add up to the whole image's (`GradientAverage::Sum`):
/// the classification loss is a mean over every anchor, the box loss a
/// mean over every positive anchor's 4 deltas, as in `train_detector`.
fn replica_loss(model: &Detector, part: &[Tensor]) -> Tensor {
    let img = Image::from_inputs(part);
    let logits = model.score.forward(&img.features).squeeze(1); // [16]
    let labels = img.iou.gt_scalar(0.5);
    let t = labels.to_dtype(DType::F32);
    let bce = &(&logits.relu() - &(&logits * &t)) + &(logits.abs().neg().exp() + 1.0).log();
    let anchors = t.ones_like().sum().all_reduce(ReduceOp::Sum);

    let positives = labels.nonzero().flatten(); // [<=16]: this replica's
    let pred = model
        .boxes
        .forward(&img.features.index_select(0, &positives));
    let target = img.deltas.index_select(0, &positives);
    let d = (&pred - &target).abs();
    let huber = d
        .lt_scalar(1.0)
        .where_cond(&(d.square() * 0.5), &(&d - 0.5));
    let deltas = (t.sum() * 4.0).all_reduce(ReduceOp::Sum);

    bce.sum() / anchors + huber.sum() / deltas.maximum(&deltas.ones_like())
}

fn main() -> lazyxla::Result<()> {
    lazyxla::set_cpu_device_count(4)?;
    let steps = 200;
    let dp = DataParallel::with_replicas(4)?.average(GradientAverage::Sum);
    println!(
        "data_parallel: {} replicas on {}",
        dp.replicas(),
        dp.device().name()
    );

    // The model and its optimizer on every device (the same values).
    let model = dp.scoped(|| Detector::new(3));
    let params = model.parameters();
    let mut opt = dp.scoped(|| Adam::new(params.clone(), 0.02));
    // The same training on one device, whole images.
    let single = Detector::new(3);
    let mut single_opt = Adam::new(single.parameters(), 0.02);

    let mut step = dp.train_step(&params, &mut opt, |part: &[Tensor]| {
        replica_loss(&model, part)
    });
    for k in 0..steps {
        let img = image(k % 50);
        let loss = step.run(&img.inputs())?;
        let (single_loss, _) = detector::train_step(&single, &mut single_opt, &img);
        mark_step()?;
        if k % 40 == 0 || k == steps - 1 {
            println!(
                "step {k:>3}: loss {:.5} on 4 devices, {:.5} on one",
                loss.item::<f32>()?,
                single_loss.item::<f32>()?
            );
        }
    }
    drop(step);

    // Every replica holds the same parameters, equal to one device's.
    let mut between_replicas = 0.0f32;
    let mut to_single = 0.0f32;
    for (p, q) in params.iter().zip(single.parameters()) {
        let replicas = parallel::replica_values::<f32>(p)?;
        let one = q.to_vec::<f32>()?;
        for r in &replicas {
            for ((a, b), c) in r.iter().zip(&replicas[0]).zip(&one) {
                between_replicas = between_replicas.max((a - b).abs());
                to_single = to_single.max((a - c).abs());
            }
        }
    }
    println!(
        "the {} replicas hold identical parameters: {} (largest difference {between_replicas})",
        dp.replicas(),
        if between_replicas == 0.0 { "yes" } else { "NO" }
    );
    println!("largest difference to the one-device training: {to_single:.2e}");
    println!(
        "compiled programs: {} (the data-parallel step and the one-device step); steps run: {}",
        metrics::counter("UncachedCompile"),
        metrics::counter("ExecuteGraph")
    );
    Ok(())
}
