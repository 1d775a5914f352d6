//! The Mask R-CNN training step of `examples/models/mask_rcnn.rs`
//! (128-pixel images, batch 2, 64 RoIs per image, SGD), timed as
//! `peers/torch_mask_rcnn.py` times torchvision's `MaskRCNN` configured to
//! the same sizes in PyTorch eager, on the same batches: this side writes
//! them to a safetensors file the PyTorch side reads.
//!
//! Run: `cargo bench --bench mask_rcnn -- [STEPS [DATA]]`, or both sides in
//! alternating rounds with `benches/peers/compare_mask_rcnn.sh`. Prints
//! `RESULT mask_rcnn lazyxla first_ms=<f> step_ms=<f> cpu_ms=<f>
//! compiles=<n>`: the first step (compile included), the median step
//! after two warm-up steps (upload, step, the loss read), the process CPU
//! time per timed step, and the programs compiled over the whole run.

#[allow(dead_code)]
#[path = "../examples/models/mask_rcnn.rs"]
mod mask_rcnn;
#[allow(dead_code)]
#[path = "../examples/models/resnet.rs"]
mod resnet;
#[allow(dead_code)]
#[path = "../examples/models/shapes.rs"]
mod shapes;

#[path = "workloads/cpu.rs"]
mod cpu;

use cpu::cpu_ms;
use lazyxla::nn::Module;
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, Tensor};
use mask_rcnn::{Config, Keys, MaskRcnn};
use std::time::Instant;

const BATCH: usize = 2;

fn main() {
    // `cargo bench` passes `--bench`; the arguments are the other words.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let steps: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(50);
    let cfg = Config::example();
    let samples: Vec<Vec<shapes::Sample>> = (0..steps as u64 + 2)
        .map(|i| {
            (0..BATCH as u64)
                .map(|b| shapes::sample(cfg.image, cfg.max_objects, i * BATCH as u64 + b))
                .collect()
        })
        .collect();
    if let Some(path) = args.get(1) {
        write_data(path, &samples, cfg.image);
    }
    let model = MaskRcnn::new(cfg.clone(), 0);
    let mut opt = Sgd::new(model.parameters(), 0.02)
        .momentum(0.9)
        .weight_decay(1e-4);
    mark_step().unwrap();
    let compiles = metrics::counter("UncachedCompile");
    let (mut first, mut times) = (0.0, Vec::new());
    let mut cpu0 = 0.0;
    for (i, batch) in samples.iter().enumerate() {
        if i == 2 {
            cpu0 = cpu_ms();
        }
        let t = Instant::now();
        let images: Vec<f32> = batch.iter().flat_map(|s| s.image.clone()).collect();
        let b = shapes::Batch {
            images: Tensor::from_vec(images, &[BATCH, 3, cfg.image, cfg.image]).unwrap(),
            targets: batch
                .iter()
                .map(|s| shapes::targets(s, cfg.image, cfg.max_objects))
                .collect(),
        };
        let keys: Vec<Keys> = (0..BATCH).map(|k| Keys::new(&cfg, i as u64, k)).collect();
        opt.zero_grad();
        let loss = model.losses(&b, &keys).total();
        loss.backward();
        opt.step();
        mark_step().unwrap();
        std::hint::black_box(loss.item::<f32>().unwrap());
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if i == 0 {
            first = ms;
        } else if i >= 2 {
            times.push(ms);
        }
    }
    let cpu = (cpu_ms() - cpu0) / times.len() as f64;
    times.sort_by(f64::total_cmp);
    println!(
        "RESULT mask_rcnn lazyxla first_ms={first:.2} step_ms={:.3} cpu_ms={cpu:.3} compiles={}",
        times[times.len() / 2],
        metrics::counter("UncachedCompile") - compiles
    );
}

/// The batches as `step{i}.images` `[2, 3, S, S]` and, per image,
/// `step{i}.image{b}.boxes`, `.labels` and `.masks` (PyTorch's target
/// layout), for the PyTorch side.
fn write_data(path: &str, samples: &[Vec<shapes::Sample>], size: usize) {
    let mut named = Vec::new();
    for (i, batch) in samples.iter().enumerate() {
        let images: Vec<f32> = batch.iter().flat_map(|s| s.image.clone()).collect();
        named.push((
            format!("step{i}.images"),
            Tensor::from_vec(images, &[batch.len(), 3, size, size]).unwrap(),
        ));
        for (b, s) in batch.iter().enumerate() {
            let g = s.boxes.len();
            let key = |k: &str| format!("step{i}.image{b}.{k}");
            named.push((
                key("boxes"),
                Tensor::from_vec(s.boxes.concat(), &[g, 4]).unwrap(),
            ));
            named.push((key("labels"), Tensor::from_slice(&s.labels, &[g]).unwrap()));
            named.push((
                key("masks"),
                Tensor::from_slice(&s.masks, &[g, size, size]).unwrap(),
            ));
        }
    }
    lazyxla::safetensors::save(path, &named).unwrap();
}
