//! The vision ops timed as `peers/torchvision_ops.py` times torchvision's
//! on the same data, so `peers/compare_vision.sh` runs both side by side.
//!
//! Run: `cargo bench --bench vision -- WORKLOAD [STEPS]` with WORKLOAD
//! - `nms`: 10,000 boxes (centres uniform in a 1000-pixel square, sides
//!   10 to 100 pixels), IoU threshold 0.5; upload, `nms`, the kept
//!   indices read.
//! - `roi_align`: Mask R-CNN's heads on a 128-pixel image pair: features
//!   `[2, 32, 32, 32]` (stride 4), 256 RoIs of which a mask keeps a
//!   varying number (`[<=256, 5]`), 7x7 bins (box head) and 14x14 bins
//!   (mask head), sampling ratio 2, not aligned; forward and the
//!   features' gradient, one program.
//!
//! Prints `RESULT <workload> lazyxla first_ms=<f> step_ms=<f> cpu_ms=<f>
//! check=<n>`: the first step (compile included), the median step after
//! warm-up, the process CPU time per timed step, and a value both sides
//! must print alike (the number of kept boxes; the number of RoIs). Host
//! data generation is excluded.

#[path = "workloads/cpu.rs"]
mod cpu;

use cpu::cpu_ms;
use lazyxla::{mark_step, vision, Tensor};
use std::time::Instant;

/// The xorshift generator of `peers/torchvision_ops.py`: `n` floats
/// `k / 2^24` in [0, 1).
fn uniform(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f64 / (1u64 << 24) as f64
        })
        .collect()
}

/// `n` boxes and scores of seed `seed`, as the Python side draws them.
fn detections(seed: u64, n: usize) -> (Vec<f32>, Vec<f32>) {
    let u = uniform(seed, 5 * n);
    let mut boxes = Vec::with_capacity(4 * n);
    let mut scores = Vec::with_capacity(n);
    for i in 0..n {
        let v = &u[5 * i..5 * i + 5];
        let (cx, cy) = (v[0] * 1000.0, v[1] * 1000.0);
        let (w, h) = (10.0 + v[2] * 90.0, 10.0 + v[3] * 90.0);
        boxes.extend([cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0].map(|c| c as f32));
        scores.push(v[4] as f32);
    }
    (boxes, scores)
}

const NMS_N: usize = 10_000;

fn nms(steps: usize) -> (f64, f64, f64, usize) {
    let data: Vec<_> = (0..=steps as u64).map(|i| detections(i, NMS_N)).collect();
    let mut kept = 0;
    let r = timed(steps, |i| {
        let b = Tensor::from_slice(&data[i].0, &[NMS_N, 4]).unwrap();
        let s = Tensor::from_slice(&data[i].1, &[NMS_N]).unwrap();
        let keep = vision::nms(&b, &s, 0.5).to_vec::<i64>().unwrap();
        if i == 0 {
            kept = keep.len();
        }
        keep.len() as f64
    });
    (r.0, r.1, r.2, kept)
}

const ROIS: usize = 256;

/// RoIs over a 128-pixel image, batch index alternating, and a mask
/// keeping about three quarters of them.
fn rois(seed: u64) -> (Vec<f32>, Vec<bool>) {
    let u = uniform(seed + 100, 5 * ROIS);
    let mut r = Vec::with_capacity(5 * ROIS);
    let mut keep = Vec::with_capacity(ROIS);
    for i in 0..ROIS {
        let v = &u[5 * i..5 * i + 5];
        let (x, y) = (v[0] * 112.0, v[1] * 112.0);
        let (w, h) = (4.0 + v[2] * 60.0, 4.0 + v[3] * 60.0);
        r.extend([(i % 2) as f64, x, y, x + w, y + h].map(|c| c as f32));
        keep.push(v[4] < 0.75);
    }
    (r, keep)
}

fn roi_align(steps: usize) -> (f64, f64, f64, usize) {
    let feats: Vec<Vec<f32>> = (0..=steps as u64)
        .map(|i| {
            uniform(i, 2 * 32 * 32 * 32)
                .iter()
                .map(|v| *v as f32)
                .collect()
        })
        .collect();
    let boxes: Vec<_> = (0..=steps as u64).map(rois).collect();
    let mut count = 0;
    let r = timed(steps, |i| {
        let x = Tensor::from_slice(&feats[i], &[2, 32, 32, 32])
            .unwrap()
            .requires_grad(true);
        let all = Tensor::from_slice(&boxes[i].0, &[ROIS, 5]).unwrap();
        let mask = Tensor::from_slice(&boxes[i].1, &[ROIS]).unwrap();
        let r = all.index_select(0, &mask.nonzero().squeeze(1));
        let boxes7 = vision::roi_align(&x, &r, (7, 7), 0.25, 2, false);
        let masks14 = vision::roi_align(&x, &r, (14, 14), 0.25, 2, false);
        let loss = &boxes7.square().mean() + &masks14.mean();
        loss.backward();
        let grad = x.grad().unwrap();
        mark_step().unwrap();
        if i == 0 {
            count = r.size(0).materialize().unwrap() as usize;
        }
        let g = grad.sum().item::<f32>().unwrap() as f64;
        loss.item::<f32>().unwrap() as f64 + g
    });
    (r.0, r.1, r.2, count)
}

/// The process's peak resident memory in MB.
fn max_rss_mb() -> f64 {
    // SAFETY: a zeroed rusage is a valid out-value for getrusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as f64 / 1024.0
}

/// Runs step 0 (first, compile included), three warm-up steps, then
/// `steps` timed steps over inputs 1..=steps: (first ms, median ms, CPU
/// ms per step).
fn timed(steps: usize, mut step: impl FnMut(usize) -> f64) -> (f64, f64, f64) {
    let t = Instant::now();
    std::hint::black_box(step(0));
    let first = t.elapsed().as_secs_f64() * 1e3;
    for i in 1..4 {
        std::hint::black_box(step(i % (steps + 1)));
    }
    let mut times = Vec::with_capacity(steps);
    let cpu = cpu_ms();
    for i in 0..steps {
        let t = Instant::now();
        std::hint::black_box(step(1 + i % steps));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = (cpu_ms() - cpu) / steps as f64;
    times.sort_by(f64::total_cmp);
    (first, times[times.len() / 2], cpu)
}

fn main() {
    // `cargo bench` passes `--bench`; the workload is the first other word.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let workload = args.first().map(String::as_str).unwrap_or("nms");
    let steps = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let rss = max_rss_mb();
    let (first, step, cpu, check) = match workload {
        "nms" => nms(steps),
        "roi_align" => roi_align(steps),
        other => {
            eprintln!("unknown workload {other}: use nms or roi_align");
            std::process::exit(2);
        }
    };
    println!(
        "RESULT {workload} lazyxla first_ms={first:.2} step_ms={step:.3} cpu_ms={cpu:.3} check={check} rss_growth_mb={:.0}",
        max_rss_mb() - rss
    );
}
