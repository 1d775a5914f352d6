//! `lazyxla::vision` on both backends: hand cases, scalar oracles written
//! from torchvision's documented algorithms (RoIAlign's sampling, greedy
//! NMS) on random cases, dynamic inputs, one compile over changing sizes,
//! finite-difference gradients and misuse errors. (The comparison with
//! torchvision itself is `torch_fixtures_vision.rs`.)

mod common;

use common::{assert_close, assert_close64, panic_message, Lcg};
use lazyxla::{mark_step, metrics, no_grad, vision, DType, Tensor};

// ---------------------------------------------------------------------------
// Scalar oracles
// ---------------------------------------------------------------------------

/// RoIAlign of one channel-major image set, one sample at a time, as
/// torchvision's CPU kernel defines it (f64).
#[allow(clippy::too_many_arguments)]
fn roi_align_naive(
    x: &[f64],
    (n, c, h, w): (usize, usize, usize, usize),
    rois: &[[f64; 5]],
    (oh, ow): (usize, usize),
    scale: f64,
    sampling: i64,
    aligned: bool,
) -> Vec<f64> {
    let mut out = Vec::new();
    let off = if aligned { 0.5 } else { 0.0 };
    for r in rois {
        let b = r[0] as i64;
        let (x1, y1) = (r[1] * scale - off, r[2] * scale - off);
        let (mut rw, mut rh) = (r[3] * scale - off - x1, r[4] * scale - off - y1);
        if !aligned {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / oh as f64, rw / ow as f64);
        let gh = if sampling > 0 {
            sampling
        } else {
            bh.ceil() as i64
        };
        let gw = if sampling > 0 {
            sampling
        } else {
            bw.ceil() as i64
        };
        let count = (gh * gw).max(1) as f64;
        // One bilinear sample of channel `ch` (0 outside [-1, H] x [-1, W]).
        let sample = |ch: usize, y: f64, xx: f64| -> f64 {
            if !(y >= -1.0 && y <= h as f64 && xx >= -1.0 && xx <= w as f64) {
                return 0.0;
            }
            let axis = |v: f64, len: usize| -> (usize, usize, f64) {
                let v = v.max(0.0);
                let lo = v.floor() as usize;
                if lo >= len - 1 {
                    (len - 1, len - 1, 0.0)
                } else {
                    (lo, lo + 1, v - lo as f64)
                }
            };
            let (ylo, yhi, ly) = axis(y, h);
            let (xlo, xhi, lx) = axis(xx, w);
            let at = |i: usize, j: usize| x[((b as usize * c + ch) * h + i) * w + j];
            (1.0 - ly) * (1.0 - lx) * at(ylo, xlo)
                + (1.0 - ly) * lx * at(ylo, xhi)
                + ly * (1.0 - lx) * at(yhi, xlo)
                + ly * lx * at(yhi, xhi)
        };
        for ch in 0..c {
            for ph in 0..oh {
                for pw in 0..ow {
                    let mut acc = 0.0;
                    if (0..n as i64).contains(&b) {
                        for iy in 0..gh.max(0) {
                            let y = y1 + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                            for ix in 0..gw.max(0) {
                                let xx = x1 + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                                acc += sample(ch, y, xx);
                            }
                        }
                    }
                    out.push(acc / count);
                }
            }
        }
    }
    out
}

/// Random RoIs over an `h x w` map at `scale`: partly outside, every
/// image, widths from a fraction of a pixel to most of the map.
fn random_rois(g: &mut Lcg, k: usize, n: usize, h: usize, w: usize, scale: f64) -> Vec<[f64; 5]> {
    (0..k)
        .map(|i| {
            let mut f = || g.floats(1)[0] as f64;
            let x1 = (-3.0 + f() * (w as f64 + 3.0)) / scale;
            let y1 = (-3.0 + f() * (h as f64 + 3.0)) / scale;
            let bw = (0.3 + f() * w as f64 * 0.8) / scale;
            let bh = (0.3 + f() * h as f64 * 0.8) / scale;
            [(i % n) as f64, x1, y1, x1 + bw, y1 + bh]
        })
        .collect()
}

fn rois_tensor(rois: &[[f64; 5]], dtype: DType) -> Tensor {
    let flat: Vec<f64> = rois.iter().flatten().copied().collect();
    Tensor::from_vec(flat, &[rois.len(), 5])
        .unwrap()
        .to_dtype(dtype)
}

// ---------------------------------------------------------------------------
// box_iou
// ---------------------------------------------------------------------------

backend_test! {
    fn box_iou_values() {
        let a = Tensor::from_vec(vec![0.0f32, 0.0, 2.0, 2.0, 1.0, 1.0, 3.0, 3.0], &[2, 4]).unwrap();
        let b = Tensor::from_vec(
            vec![0.0f32, 0.0, 2.0, 2.0, 2.0, 0.0, 4.0, 2.0, 5.0, 5.0, 6.0, 6.0],
            &[3, 4],
        )
        .unwrap();
        let iou = vision::box_iou(&a, &b);
        assert_eq!(iou.upper_bounds(), vec![2, 3]);
        // Identical; touching (no area); disjoint. Then a shifted box.
        assert_close(
            &iou.to_vec::<f32>().unwrap(),
            &[1.0, 0.0, 0.0, 1.0 / 7.0, 1.0 / 7.0, 0.0],
            1e-7,
        );
    }
}

backend_test! {
    /// Boxes selected by `nonzero` (`[<=5, 4]`): IoU against a static set
    /// is `[<=5, 2]`, its padding rows never reach a reduction.
    fn box_iou_dynamic() {
        let boxes = Tensor::from_vec(
            vec![
                0.0f32, 0.0, 2.0, 2.0, 9.0, 9.0, 9.5, 9.5, 1.0, 0.0, 3.0, 2.0, 0.0, 0.0, 1.0, 1.0,
                7.0, 7.0, 8.0, 8.0,
            ],
            &[5, 4],
        )
        .unwrap();
        let scores = Tensor::from_vec(vec![0.9f32, 0.1, 0.8, 0.7, 0.05], &[5]).unwrap();
        let picked = boxes.index_select(0, &scores.gt_scalar(0.5).nonzero().squeeze(1));
        let other = Tensor::from_vec(vec![0.0f32, 0.0, 2.0, 2.0, 0.0, 0.0, 4.0, 4.0], &[2, 4]).unwrap();
        let iou = vision::box_iou(&picked, &other);
        assert_eq!(iou.shape_string(), "[<=5, 2]");
        let best = iou.max_dims(&[0], false); // ends the zone
        assert_eq!(iou.concrete_shape().unwrap(), vec![3, 2]);
        assert_close(
            &iou.to_vec::<f32>().unwrap(),
            &[1.0, 0.25, 2.0 / 6.0, 0.25, 0.25, 1.0 / 16.0],
            1e-7,
        );
        assert_close(&best.to_vec::<f32>().unwrap(), &[1.0, 0.25], 1e-7);
    }
}

// ---------------------------------------------------------------------------
// roi_align
// ---------------------------------------------------------------------------

backend_test! {
    fn roi_align_hand_values() {
        let x = Tensor::from_vec((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]).unwrap();
        // The whole image, aligned: bins average 2x2 pixels.
        let whole = Tensor::from_vec(vec![0.0f32, 0.0, 0.0, 4.0, 4.0], &[1, 5]).unwrap();
        let y = vision::roi_align(&x, &whole, (2, 2), 1.0, 2, true);
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.5, 4.5, 10.5, 12.5]);
        // One sample per bin at the bin's centre, not aligned: (1, 1),
        // (1, 3), (3, 1), (3, 3); the last row and column clamp.
        let y = vision::roi_align(&x, &whole, (2, 2), 1.0, 1, false);
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![5.0, 7.0, 13.0, 15.0]);
        // Half a pixel to the left of the image: a sample at x = -0.5
        // reads column 0; one at x < -1 reads 0.
        let left = Tensor::from_vec(vec![0.0f32, -1.0, 0.0, 0.0, 1.0, 0.0, -3.0, 0.0, -2.0, 1.0], &[2, 5]).unwrap();
        let y = vision::roi_align(&x, &left, (1, 1), 1.0, 1, false);
        // RoI 1: x from -1 to 0 (width 1), y 0..1: sample (0.5, -0.5) ->
        // rows 0 and 1 at column 0: 0 * 0.5 + 4 * 0.5 = 2.
        // RoI 2: x -3..-2, sample at x = -2.5: outside, 0.
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 0.0]);
        // A batch index past the batch gives zeros.
        let far = Tensor::from_vec(vec![3.0f32, 0.0, 0.0, 4.0, 4.0], &[1, 5]).unwrap();
        let y = vision::roi_align(&x, &far, (1, 1), 1.0, 2, false);
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0]);
    }
}

backend_test! {
    /// Random cases (both sampling modes, both alignments, scales, several
    /// images) against the scalar oracle.
    fn roi_align_matches_the_scalar_oracle() {
        let mut g = Lcg(11);
        let dims = (2, 3, 7, 9);
        let numel = dims.0 * dims.1 * dims.2 * dims.3;
        let data: Vec<f64> = g.floats(numel).iter().map(|v| (*v as f64 - 0.5) * 4.0).collect();
        let x = Tensor::from_vec(data.clone(), &[dims.0, dims.1, dims.2, dims.3]).unwrap();
        for (i, &(out, scale, sampling, aligned)) in [
            ((2, 3), 1.0, 2, false),
            ((3, 2), 0.5, 0, true),
            ((2, 2), 0.25, -1, false),
            ((4, 4), 1.0, 3, true),
            ((1, 5), 0.5, 0, false),
        ]
        .iter()
        .enumerate()
        {
            let rois = random_rois(&mut g, 9, dims.0, dims.2, dims.3, scale);
            let want = roi_align_naive(&data, dims, &rois, out, scale, sampling, aligned);
            let got = vision::roi_align(&x, &rois_tensor(&rois, DType::F64), out, scale, sampling, aligned);
            assert_eq!(got.upper_bounds(), vec![9, 3, out.0, out.1], "case {i}");
            assert_close64(&got.to_vec::<f64>().unwrap(), &want, 1e-9);
        }
    }
}

backend_test! {
    /// The gradient with respect to the features against central finite
    /// differences (f64), adaptive and fixed grids; the RoIs get none.
    fn roi_align_gradient() {
        let mut g = Lcg(5);
        let shape = [2usize, 2, 5, 6];
        let numel: usize = shape.iter().product();
        let x0: Vec<f64> = g.floats(numel).iter().map(|v| *v as f64 * 2.0 - 1.0).collect();
        for (sampling, aligned) in [(2, false), (0, true)] {
            let rois_v = random_rois(&mut g, 4, 2, 5, 6, 1.0);
            let rois = rois_tensor(&rois_v, DType::F64).requires_grad(true);
            let f = |x: &Tensor| vision::roi_align(x, &rois, (2, 3), 1.0, sampling, aligned);
            let weights: Vec<f64> = (0..4 * 2 * 2 * 3).map(|i| 0.5 + 0.1 * i as f64).collect();
            let w = Tensor::from_vec(weights.clone(), &[4, 2, 2, 3]).unwrap();
            let x = Tensor::from_vec(x0.clone(), &shape).unwrap().requires_grad(true);
            (&f(&x) * &w).sum().backward();
            mark_step().unwrap();
            let got = x.grad().expect("features get a gradient").to_vec::<f64>().unwrap();
            assert!(rois.grad().is_none(), "torchvision gives the boxes no gradient");
            let loss = |v: Vec<f64>| -> f64 {
                let y = no_grad(|| f(&Tensor::from_vec(v, &shape).unwrap()));
                y.to_vec::<f64>().unwrap().iter().zip(&weights).map(|(a, b)| a * b).sum()
            };
            let eps = 1e-6;
            let numeric: Vec<f64> = (0..numel)
                .map(|i| {
                    let (mut p, mut m) = (x0.clone(), x0.clone());
                    p[i] += eps;
                    m[i] -= eps;
                    (loss(p) - loss(m)) / (2.0 * eps)
                })
                .collect();
            assert_close64(&got, &numeric, 1e-6);
            assert!(got.iter().any(|v| *v != 0.0));
        }
    }
}

backend_test! {
    /// RoIs from `nonzero` (`[<=8, 5]`): the result is `[<=8, C, oh, ow]`,
    /// the real rows only, and the features' gradient counts no padding;
    /// four different numbers of RoIs compile one program.
    fn roi_align_dynamic_rois_compile_once() {
        let mut g = Lcg(3);
        let dims = (2, 2, 6, 6);
        let data: Vec<f32> = g.floats(2 * 2 * 6 * 6);
        let data64: Vec<f64> = data.iter().map(|v| *v as f64).collect();
        let all = random_rois(&mut g, 8, 2, 6, 6, 1.0);
        let all_t = rois_tensor(&all, DType::F32);
        mark_step().unwrap(); // all_t becomes data, as the later steps see it
        let compiles_before = metrics::counter("UncachedCompile");
        for (step, keep) in [
            vec![true, false, true, true, false, false, true, false],
            vec![false; 8],
            vec![true; 8],
            vec![false, true, false, false, false, false, false, true],
        ]
        .into_iter()
        .enumerate()
        {
            let x = Tensor::from_vec(data.clone(), &[2, 2, 6, 6]).unwrap().requires_grad(true);
            let mask = Tensor::from_vec(keep.clone(), &[8]).unwrap();
            let rois = all_t.index_select(0, &mask.nonzero().squeeze(1));
            let out = vision::roi_align(&x, &rois, (2, 2), 1.0, 2, false);
            assert_eq!(out.shape_string(), "[<=8, 2, 2, 2]");
            out.sum().backward();
            let grad = x.grad().unwrap();
            mark_step().unwrap();
            let kept: Vec<[f64; 5]> = all.iter().zip(&keep).filter(|(_, k)| **k).map(|(r, _)| *r).collect();
            let want = roi_align_naive(&data64, dims, &kept, (2, 2), 1.0, 2, false);
            let got: Vec<f64> = out.to_vec::<f32>().unwrap().iter().map(|v| *v as f64).collect();
            assert_close64(&got, &want, 1e-5);
            // d(sum)/dx of the real RoIs only: the oracle's sum over
            // unit images.
            let gsum: f64 = grad.to_vec::<f32>().unwrap().iter().map(|v| *v as f64).sum();
            let ones = vec![1.0; data64.len()];
            let want_sum: f64 = roi_align_naive(&ones, dims, &kept, (2, 2), 1.0, 2, false).iter().sum();
            assert!((gsum - want_sum).abs() < 1e-4, "step {step}: gradient mass {gsum} vs {want_sum}");
        }
        assert_eq!(
            metrics::counter("UncachedCompile") - compiles_before,
            1,
            "{}",
            metrics::report()
        );
    }
}

backend_test! {
    fn roi_align_misuse() {
        let x = Tensor::zeros(&[1, 2, 4, 4], DType::F32);
        let rois = Tensor::zeros(&[3, 5], DType::F32);
        let m = panic_message(|| {
            vision::roi_align(&x.flatten(), &rois, (2, 2), 1.0, 2, false);
        });
        assert!(m.contains("roi_align") && m.contains("[N, C, H, W]") && m.contains("[32]"), "{m}");
        let m = panic_message(|| {
            vision::roi_align(&x, &Tensor::zeros(&[3, 4], DType::F32), (2, 2), 1.0, 2, false);
        });
        assert!(m.contains("roi_align") && m.contains("[K, 5]") && m.contains("[3, 4]"), "{m}");
        let dynamic = rois.index_select(0, &Tensor::ones(&[3], DType::F32).nonzero().squeeze(1));
        let m = panic_message(|| {
            vision::roi_align(&x, &dynamic.narrow(1, 0, 4), (2, 2), 1.0, 2, false);
        });
        assert!(m.contains("[<=3, 4]"), "{m}");
        let m = panic_message(|| {
            vision::roi_align(&x, &rois.to_dtype(DType::F64), (2, 2), 1.0, 2, false);
        });
        assert!(m.contains("roi_align") && m.contains("f64") && m.contains("to_dtype"), "{m}");
        let m = panic_message(|| {
            vision::roi_align(&x.to_dtype(DType::I64), &rois, (2, 2), 1.0, 2, false);
        });
        assert!(m.contains("roi_align") && m.contains("floats"), "{m}");
        let m = panic_message(|| {
            vision::roi_align(&x, &rois, (0, 2), 1.0, 2, false);
        });
        assert!(m.contains("roi_align") && m.contains("(0, 2)"), "{m}");
        let dyn_x = x.index_select(0, &Tensor::ones(&[1], DType::F32).nonzero().squeeze(1));
        let m = panic_message(|| {
            vision::roi_align(&dyn_x, &rois, (2, 2), 1.0, 2, false);
        });
        assert!(m.contains("roi_align") && m.contains("[<=1, 2, 4, 4]") && m.contains("pad_to_bound"), "{m}");
        // The runtime is still usable.
        assert_eq!(vision::roi_align(&x, &rois, (1, 1), 1.0, 1, true).to_vec::<f32>().unwrap(), vec![0.0; 6]);
    }
}

backend_test! {
    fn box_iou_misuse() {
        let a = Tensor::zeros(&[2, 4], DType::F32);
        let m = panic_message(|| {
            vision::box_iou(&a, &Tensor::zeros(&[2, 5], DType::F32));
        });
        assert!(m.contains("box_iou") && m.contains("[N, 4]") && m.contains("[2, 5]"), "{m}");
        let m = panic_message(|| {
            vision::box_iou(&a.flatten(), &a);
        });
        assert!(m.contains("box_iou") && m.contains("[8]"), "{m}");
        let m = panic_message(|| {
            vision::box_iou(&a, &a.to_dtype(DType::I64));
        });
        assert!(m.contains("box_iou") && m.contains("floats"), "{m}");
        let m = panic_message(|| {
            vision::box_iou(&a, &a.to_dtype(DType::F64));
        });
        assert!(m.contains("box_iou") && m.contains("f64"), "{m}");
    }
}

// ---------------------------------------------------------------------------
// nms, batched_nms
// ---------------------------------------------------------------------------

/// Greedy NMS as torchvision's CPU kernel defines it: a stable sort by
/// decreasing score, float32 IoUs compared with the float64 threshold,
/// within classes when given.
fn nms_naive(boxes: &[[f32; 4]], scores: &[f32], classes: Option<&[i64]>, thr: f64) -> Vec<i64> {
    let n = boxes.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scores[b].partial_cmp(&scores[a]).unwrap());
    let area = |b: &[f32; 4]| (b[2] - b[0]) * (b[3] - b[1]);
    let mut suppressed = vec![false; n];
    let mut keep = Vec::new();
    for (p, &i) in order.iter().enumerate() {
        if suppressed[i] {
            continue;
        }
        keep.push(i as i64);
        for &j in &order[p + 1..] {
            if suppressed[j] || classes.is_some_and(|c| c[i] != c[j]) {
                continue;
            }
            let (a, b) = (&boxes[i], &boxes[j]);
            let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
            let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
            let inter = w * h;
            let iou = inter / (area(a) + area(b) - inter);
            if iou as f64 > thr {
                suppressed[j] = true;
            }
        }
    }
    keep
}

/// `n` random boxes in a `size`-wide square and their scores; scores on a
/// coarse grid, so that ties occur.
fn random_detections(g: &mut Lcg, n: usize, size: f32) -> (Vec<[f32; 4]>, Vec<f32>) {
    let boxes = (0..n)
        .map(|_| {
            let v = g.floats(4);
            let (x, y) = (v[0] * size, v[1] * size);
            [
                x,
                y,
                x + 1.0 + v[2] * size * 0.4,
                y + 1.0 + v[3] * size * 0.4,
            ]
        })
        .collect();
    let scores = (0..n).map(|_| (g.next() % 20) as f32 / 20.0).collect();
    (boxes, scores)
}

fn boxes_tensor(boxes: &[[f32; 4]]) -> Tensor {
    Tensor::from_vec(boxes.iter().flatten().copied().collect(), &[boxes.len(), 4]).unwrap()
}

backend_test! {
    fn nms_hand_cases() {
        // IoU exactly 0.5 is kept at threshold 0.5; 0.8 is not.
        let boxes = boxes_tensor(&[[0.0, 0.0, 3.0, 1.0], [1.0, 0.0, 4.0, 1.0], [0.0, 0.0, 3.0, 1.25]]);
        let scores = Tensor::from_vec(vec![0.9f32, 0.8, 0.7], &[3]).unwrap();
        let keep = vision::nms(&boxes, &scores, 0.5);
        assert_eq!(keep.shape_string(), "[<=3]");
        assert_eq!(keep.dtype(), DType::I64);
        assert_eq!(keep.to_vec::<i64>().unwrap(), vec![0, 1]);
        // Equal scores: the lower index wins.
        let same = boxes_tensor(&[[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]);
        let tied = Tensor::from_vec(vec![0.5f32, 0.7, 0.7], &[3]).unwrap();
        assert_eq!(vision::nms(&same, &tied, 0.5).to_vec::<i64>().unwrap(), vec![1]);
        // The float32 IoU 3/10 lies above the float64 threshold 0.3.
        let b = boxes_tensor(&[[0.0, 0.0, 5.0, 1.0], [2.0, 0.0, 10.0, 1.0]]);
        let s = Tensor::from_vec(vec![0.9f32, 0.8], &[2]).unwrap();
        assert_eq!(vision::nms(&b, &s, 0.3).to_vec::<i64>().unwrap(), vec![0]);
        assert_eq!(vision::nms(&b, &s, 0.30000002).to_vec::<i64>().unwrap(), vec![0, 1]);
        // f64 boxes compare in f64: 3/10 is not above 0.3.
        let b64 = b.to_dtype(DType::F64);
        let s64 = s.to_dtype(DType::F64);
        assert_eq!(vision::nms(&b64, &s64, 0.3).to_vec::<i64>().unwrap(), vec![0, 1]);
        // Boxes that require grad (an RPN's regressed proposals): the
        // indices carry none, the kept boxes' rows get theirs.
        let p = boxes.requires_grad(true);
        let keep = vision::nms(&p, &scores, 0.5);
        (p.index_select(0, &keep) * 2.0).sum().backward();
        let g = p.grad().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(g, [vec![2.0; 8], vec![0.0; 4]].concat());
        // No boxes.
        let none = vision::nms(&Tensor::zeros(&[0, 4], DType::F32), &Tensor::zeros(&[0], DType::F32), 0.5);
        assert_eq!(none.to_vec::<i64>().unwrap(), Vec::<i64>::new());
    }
}

backend_test! {
    /// Random detections (with tied scores) against the scalar greedy
    /// NMS, several thresholds, with and without classes.
    fn nms_matches_the_scalar_oracle() {
        let mut g = Lcg(17);
        for (n, thr) in [(30, 0.5), (64, 0.3), (50, 0.7), (12, 0.0)] {
            let (b, s) = random_detections(&mut g, n, 20.0);
            let (bt, st) = (boxes_tensor(&b), Tensor::from_vec(s.clone(), &[n]).unwrap());
            assert_eq!(vision::nms(&bt, &st, thr).to_vec::<i64>().unwrap(), nms_naive(&b, &s, None, thr), "n={n} thr={thr}");
            let classes: Vec<i64> = (0..n).map(|_| (g.next() % 3) as i64 + 10).collect();
            let ct = Tensor::from_vec(classes.clone(), &[n]).unwrap();
            assert_eq!(
                vision::batched_nms(&bt, &st, &ct, thr).to_vec::<i64>().unwrap(),
                nms_naive(&b, &s, Some(&classes), thr),
                "batched n={n} thr={thr}"
            );
        }
    }
}

backend_test! {
    /// Boxes and scores from one mask (`[<=40, 4]`, `[<=40]`, one size):
    /// the kept indices are positions among the selected boxes, padding
    /// is never kept, and several selections compile once.
    fn nms_dynamic_inputs_compile_once() {
        let mut g = Lcg(23);
        let (b, s) = random_detections(&mut g, 40, 15.0);
        let bt = boxes_tensor(&b);
        let st = Tensor::from_vec(s.clone(), &[40]).unwrap();
        let compiles_before = metrics::counter("UncachedCompile");
        for step in 0..4 {
            let pick: Vec<bool> = (0..40).map(|i| (i * 7 + step * 3) % 5 < 2 + step % 3).collect();
            let mask = Tensor::from_vec(pick.clone(), &[40]).unwrap();
            let rows = mask.nonzero().squeeze(1);
            let (boxes, scores) = (bt.index_select(0, &rows), st.masked_select(&mask));
            let keep = vision::nms(&boxes, &scores, 0.4);
            assert_eq!(keep.shape_string(), "[<=40]");
            let kept_boxes = boxes.index_select(0, &keep);
            mark_step().unwrap();
            let sub_b: Vec<[f32; 4]> = b.iter().zip(&pick).filter(|(_, p)| **p).map(|(x, _)| *x).collect();
            let sub_s: Vec<f32> = s.iter().zip(&pick).filter(|(_, p)| **p).map(|(x, _)| *x).collect();
            let want = nms_naive(&sub_b, &sub_s, None, 0.4);
            assert_eq!(keep.to_vec::<i64>().unwrap(), want, "step {step}");
            let want_boxes: Vec<f32> = want.iter().flat_map(|&i| sub_b[i as usize]).collect();
            assert_eq!(kept_boxes.to_vec::<f32>().unwrap(), want_boxes);
        }
        assert_eq!(metrics::counter("UncachedCompile") - compiles_before, 1, "{}", metrics::report());
    }
}

backend_test! {
    fn nms_misuse() {
        let boxes = Tensor::zeros(&[3, 4], DType::F32);
        let scores = Tensor::zeros(&[3], DType::F32);
        let m = panic_message(|| {
            vision::nms(&Tensor::zeros(&[3, 5], DType::F32), &scores, 0.5);
        });
        assert!(m.contains("nms") && m.contains("[N, 4]") && m.contains("[3, 5]"), "{m}");
        let m = panic_message(|| {
            vision::nms(&boxes, &Tensor::zeros(&[4], DType::F32), 0.5);
        });
        assert!(m.contains("nms") && m.contains("[4]") && m.contains("[3, 4]"), "{m}");
        let m = panic_message(|| {
            vision::nms(&boxes, &scores.unsqueeze(1), 0.5);
        });
        assert!(m.contains("nms") && m.contains("[3, 1]"), "{m}");
        let m = panic_message(|| {
            vision::nms(&boxes, &scores.to_dtype(DType::F64), 0.5);
        });
        assert!(m.contains("nms") && m.contains("f64"), "{m}");
        let dynamic = boxes.index_select(0, &Tensor::ones(&[3], DType::F32).nonzero().squeeze(1));
        let m = panic_message(|| {
            vision::nms(&dynamic.narrow(1, 0, 3), &scores, 0.5);
        });
        assert!(m.contains("nms") && m.contains("[<=3, 3]"), "{m}");
        let m = panic_message(|| {
            vision::batched_nms(&boxes, &scores, &scores, 0.5);
        });
        assert!(m.contains("batched_nms") && m.contains("classes") && m.contains("f32[3]"), "{m}");
        let m = panic_message(|| {
            vision::batched_nms(&boxes, &scores, &Tensor::zeros(&[2], DType::I64), 0.5);
        });
        assert!(m.contains("batched_nms") && m.contains("[2]"), "{m}");
        // Empty boxes (IoU 0 / 0) never suppress, as in torchvision.
        assert_eq!(vision::nms(&boxes, &scores, 0.5).to_vec::<i64>().unwrap(), vec![0, 1, 2]);
    }
}
