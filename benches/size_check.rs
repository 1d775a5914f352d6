//! What a run-time size check costs: the detection loss
//! `pred.masked_select(&m) - tgt.masked_select(&m2)`, summed and read
//! every step, two ways that run the same device work:
//!
//! - without a check: the difference pairs `pred` and `tgt` selected by
//!   the same mask `m` (one size variable: nothing to check), and `tgt`
//!   selected by `m2` is summed on the side;
//! - with a check: the difference pairs `pred` by `m` with `tgt` by `m2`
//!   (the same mask built separately: two size variables, checked equal
//!   when the program runs), and `tgt` by `m` is summed on the side.
//!
//! The number of positives changes every step (one compile each way).
//! Alternating rounds on the same inputs; the ratio of medians is the
//! check's cost (target: within 3%). Run on the PJRT plugin when one
//! loads, else the reference backend.

use lazyxla::{Device, Tensor};
use std::time::Instant;

const N: usize = 4096;
const ROUNDS: usize = 201;
const STEPS: usize = 20;
const INPUTS: usize = 200;

fn inputs(step: usize) -> (Tensor, Tensor, Tensor) {
    let mut s = step as u64 * 0x9e37_79b9 + 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 1000) as f32 / 1000.0
    };
    let pred: Vec<f32> = (0..N).map(|_| next()).collect();
    let tgt: Vec<f32> = (0..N).map(|_| next()).collect();
    let score: Vec<f32> = (0..N).map(|_| next()).collect();
    (
        Tensor::from_vec(pred, &[N]).unwrap(),
        Tensor::from_vec(tgt, &[N]).unwrap(),
        Tensor::from_vec(score, &[N]).unwrap(),
    )
}

/// One step: the loss, read. `checked` pairs the selections by the two
/// masks (see the module docs).
fn step(data: &(Tensor, Tensor, Tensor), checked: bool) -> f32 {
    let (pred, tgt, score) = data;
    let m = score.gt_scalar(0.7);
    let m2 = m.to_dtype(lazyxla::DType::I32).ne_scalar(0.0);
    let (paired, aside) = if checked { (&m2, &m) } else { (&m, &m2) };
    let d = &pred.masked_select(&m) - &tgt.masked_select(paired);
    let side = tgt.masked_select(aside).sum();
    ((&d * &d).sum() + side * 0.0).item::<f32>().unwrap()
}

fn main() {
    let device = Device::default();
    println!("size check cost on {}", device.name());
    let data: Vec<_> = (0..INPUTS).map(inputs).collect();
    // Warm up (compile both programs) and check they agree.
    for d in data.iter().take(3) {
        let (a, b) = (step(d, false), step(d, true));
        assert!((a - b).abs() <= 1e-3 * a.abs().max(1.0), "{a} vs {b}");
    }
    // `SIZE_CHECK_ONLY=plain|checked` runs one way only, for counting
    // instructions with `perf stat` (load-independent, unlike time).
    if let Ok(only) = std::env::var("SIZE_CHECK_ONLY") {
        let flag = only == "checked";
        for _ in 0..20 {
            for d in &data {
                std::hint::black_box(step(d, flag));
            }
        }
        return;
    }
    // Short alternating rounds, compared in pairs: the ratio of each
    // round's two times cancels the machine's slow drifts (other
    // processes, frequency), and the median of the ratios drops bursts.
    let mut plain = Vec::new();
    let mut checked = Vec::new();
    let mut ratios = Vec::new();
    for r in 0..ROUNDS {
        let mut pair = [0.0; 2];
        for flag in [r % 2 == 0, r % 2 != 0] {
            let t = Instant::now();
            for d in data.iter().skip((r * STEPS) % data.len()).take(STEPS) {
                std::hint::black_box(step(d, flag));
            }
            pair[flag as usize] = t.elapsed().as_secs_f64() * 1e6 / STEPS as f64;
        }
        plain.push(pair[0]);
        checked.push(pair[1]);
        ratios.push(pair[1] / pair[0]);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, c, ratio) = (median(plain), median(checked), median(ratios));
    println!(
        "RATIO detection_loss_{N}: without a check {p:.1} us, with a check {c:.1} us; with/without {ratio:.3}x (median of {ROUNDS} paired rounds of {STEPS} steps)"
    );
}
