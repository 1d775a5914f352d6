//! Non-maximum suppression (torchvision's `nms` and `batched_nms`): the
//! greedy algorithm of torchvision's CPU kernel, run on the device as one
//! `while_loop`.
//!
//! The boxes are sorted once by decreasing score (stably: equal scores
//! keep the lower index first, as torchvision's `sort(stable=True)`).
//! The loop carries two static `[N]` masks over the sorted positions,
//! `alive` (neither kept nor suppressed) and `kept`; each iteration keeps
//! the first alive position and suppresses the alive boxes whose IoU with
//! it is above the threshold, so it runs once per kept box and holds
//! `O(N)` memory. The kept indices are the sorted order selected by
//! `kept`: `[<=N]`, a dynamic zone start like `nonzero`.
//!
//! The IoU is the boxes' dtype, compared as float64 as the kernel does: for
//! f32 boxes the threshold is rounded down to the largest float32 not above
//! it, so an IoU of exactly `fl32(0.3)` is suppressed at 0.3, as in
//! torchvision. `batched_nms` is the same loop where a box only clears
//! boxes of its own class (no coordinate offsets, so no rounding from
//! them).

use super::boxes::{pairwise_iou, Corners};
use super::{check_boxes, misuse};
use crate::dtype::DType;
use crate::tensor::Tensor;

/// torchvision's `nms`: the indices (I64) of the boxes that greedy
/// non-maximum suppression keeps, by decreasing score. `boxes: [N, 4]`
/// are `(x1, y1, x2, y2)`, `scores: [N]` of the same float dtype (F32 or
/// F64). A box is suppressed when its IoU with a kept box of higher score
/// is strictly above `iou_threshold`; equal scores keep the lower index
/// first.
///
/// The IoU is computed in the boxes' dtype as torchvision's CPU kernel
/// computes it, and compared with the threshold as a float64 (as the
/// kernel compares a float with a double), so the kept set is
/// torchvision's also for IoUs exactly at the threshold.
///
/// The result is `[<=N]` (a dynamic zone start, like `nonzero`). The
/// boxes may be dynamic (`[<=N, 4]` with `[<=N]` scores of the same size):
/// padding is never kept. It runs on the device as one loop, one
/// iteration per kept box; no gradient flows through it (its result is
/// indices).
///
/// ```
/// use lazyxla::{vision, Tensor};
/// let boxes = Tensor::from_vec(
///     vec![0.0f32, 0.0, 2.0, 2.0, 0.1, 0.0, 2.1, 2.0, 5.0, 5.0, 6.0, 6.0],
///     &[3, 4],
/// ).unwrap();
/// let scores = Tensor::from_vec(vec![0.8f32, 0.9, 0.3], &[3]).unwrap();
/// let keep = vision::nms(&boxes, &scores, 0.5);
/// assert_eq!(keep.shape_string(), "[<=3]");
/// assert_eq!(keep.to_vec::<i64>().unwrap(), vec![1, 2]);
/// ```
#[track_caller]
pub fn nms(boxes: &Tensor, scores: &Tensor, iou_threshold: f64) -> Tensor {
    let scores = check_scores("nms", boxes, scores);
    boxes
        .device()
        .scoped(|| greedy(boxes, &scores, None, iou_threshold))
}

/// torchvision's `batched_nms`: [`nms`] within each class independently
/// (`classes: [N]`, integers; boxes of different classes never suppress
/// each other), the kept indices of all classes by decreasing score
/// (equal scores: lower index first). `[<=N]`, like [`nms`].
///
/// ```
/// use lazyxla::{vision, Tensor};
/// let boxes = Tensor::from_vec(vec![0.0f32, 0.0, 2.0, 2.0, 0.0, 0.0, 2.0, 2.0], &[2, 4]).unwrap();
/// let scores = Tensor::from_vec(vec![0.9f32, 0.8], &[2]).unwrap();
/// let same = Tensor::from_vec(vec![3i64, 3], &[2]).unwrap();
/// let other = Tensor::from_vec(vec![3i64, 4], &[2]).unwrap();
/// assert_eq!(vision::batched_nms(&boxes, &scores, &same, 0.5).to_vec::<i64>().unwrap(), vec![0]);
/// assert_eq!(vision::batched_nms(&boxes, &scores, &other, 0.5).to_vec::<i64>().unwrap(), vec![0, 1]);
/// ```
#[track_caller]
pub fn batched_nms(
    boxes: &Tensor,
    scores: &Tensor,
    classes: &Tensor,
    iou_threshold: f64,
) -> Tensor {
    let op = "batched_nms";
    let scores = check_scores(op, boxes, scores);
    if classes.rank() != 1 || !classes.dtype().is_int() {
        misuse(
            op,
            format!(
                "classes must be [N] integers, got {}{}",
                classes.dtype(),
                classes.shape_string()
            ),
        );
    }
    let classes = same_length(op, "classes", boxes, classes);
    boxes
        .device()
        .scoped(|| greedy(boxes, &scores, Some(&classes), iou_threshold))
}

/// `scores` checked against `boxes` (see [`same_length`]).
#[track_caller]
fn check_scores(op: &'static str, boxes: &Tensor, scores: &Tensor) -> Tensor {
    check_boxes(op, "boxes", boxes);
    if !matches!(boxes.dtype(), DType::F32 | DType::F64) {
        misuse(
            op,
            format!(
                "boxes must be f32 or f64 (torchvision's CPU kernel), got {}{}; convert with to_dtype(DType::F32)",
                boxes.dtype(),
                boxes.shape_string()
            ),
        );
    }
    if scores.rank() != 1 || scores.dtype() != boxes.dtype() {
        misuse(
            op,
            format!(
                "scores must be [N] of the boxes' dtype, got {}{} for boxes {}{}",
                scores.dtype(),
                scores.shape_string(),
                boxes.dtype(),
                boxes.shape_string()
            ),
        );
    }
    same_length(op, "scores", boxes, scores)
}

/// `v: [N]` given the boxes' `N`: an error now when the sizes are proven
/// different, else checked equal when the program runs (`expand`).
#[track_caller]
fn same_length(op: &'static str, name: &str, boxes: &Tensor, v: &Tensor) -> Tensor {
    let n = boxes.size(0);
    if n.sym_eq(v.size(0)).as_static() == Some(false) {
        misuse(
            op,
            format!(
                "{name} {} and boxes {} must have one length",
                v.shape_string(),
                boxes.shape_string()
            ),
        );
    }
    v.expand(&[n])
}

/// The threshold as a value `t'` of `dtype` such that, for every `x` of
/// that dtype, `x > t'` exactly when `x > threshold` in float64: the
/// largest float32 at most the threshold (float64: itself).
#[track_caller]
fn threshold_in(dtype: DType, threshold: f64) -> f64 {
    if dtype != DType::F32 || threshold.is_nan() {
        return threshold;
    }
    let t = threshold as f32; // round to nearest
    let below = if f64::from(t) > threshold {
        f32::from_bits(if t > 0.0 {
            t.to_bits() - 1
        } else if t == 0.0 {
            0x8000_0001 // the negative float closest to zero
        } else {
            t.to_bits() + 1
        })
    } else {
        t
    };
    f64::from(below)
}

/// Greedy NMS over `boxes` (`[<=N, 4]`) by `scores`, within classes when
/// given: the kept indices by decreasing score.
#[track_caller]
fn greedy(boxes: &Tensor, scores: &Tensor, classes: Option<&Tensor>, threshold: f64) -> Tensor {
    let threshold = threshold_in(boxes.dtype(), threshold);
    // Indices carry no gradient (torchvision's nms has none either).
    let (boxes, scores) = (&boxes.detach(), &scores.detach());
    let order = scores.argsort(0, true); // stable; padding sorts last
    let bound = boxes.upper_bounds()[0];
    // Static views at the bound, in score order: the boxes' corners and
    // areas (padding zeros), the classes, which positions are real.
    let sorted = Corners::of(&boxes.index_select(0, &order)).map(|t| t.pad_to_bound(0.0));
    let classes = classes.map(|c| c.index_select(0, &order).pad_to_bound(0.0));
    let order = order.pad_to_bound(0.0);
    let real = Tensor::ones_sym(&[boxes.size(0)], DType::Bool).pad_to_bound(0.0);
    if bound == 0 {
        return order.masked_select(&real); // no boxes: `[<=0]`
    }
    let positions = Tensor::arange(bound as i64);
    // The first alive position (the highest score left), `bound` if none.
    let first_of = |alive: &Tensor, positions: &Tensor| {
        alive
            .where_cond(positions, &Tensor::full(&[], bound as f64, DType::I64))
            .min()
    };
    // Carries: the first alive position, alive, kept. The corners,
    // positions and classes are the same every iteration: the loop reads
    // them from outside.
    let init = [
        first_of(&real, &positions),
        real,
        Tensor::zeros(&[bound], DType::Bool),
    ];
    let end = crate::while_loop(
        &init,
        |c| c[0].lt_scalar(bound as f64),
        |c| {
            let (first, alive, kept) = (&c[0], &c[1], &c[2]);
            let at = first.reshape(&[1]);
            let chosen = sorted.map(|t| t.index_select(0, &at));
            let mut over = pairwise_iou(&chosen, &sorted).gt_scalar(threshold);
            if let Some(classes) = &classes {
                over = over.logical_and(&classes.eq(&classes.index_select(0, &at)));
            }
            let is_first = positions.eq(first);
            let alive = alive.logical_and(&over.logical_or(&is_first).logical_not());
            vec![
                first_of(&alive, &positions),
                alive,
                kept.logical_or(&is_first),
            ]
        },
    );
    order.masked_select(&end[2])
}
