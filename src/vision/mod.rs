//! Detection ops with torchvision's meaning (`torchvision.ops`):
//! [`box_iou`], [`roi_align`], [`nms`] and [`batched_nms`].
//!
//! They are compositions of the tensor API (no primitive of their own),
//! so they run on every backend, record lazily into the step's program
//! and take dynamic inputs: boxes `[<=N, 4]` and RoIs `[<=K, 5]` from
//! `nonzero`, `masked_select` or an earlier `nms`, whose padding never
//! reaches a result or a gradient. `nms` starts a dynamic zone like
//! `nonzero`: its kept indices are `[<=N]`.
//!
//! `box_iou` computes in torchvision's order of operations (the same float
//! values as its `box_iou` and its CPU NMS kernel). Being compositions,
//! the ops get both backends, dynamic inputs, gradients and the
//! differential generator from the primitives they use.
//!
//! **A detector's step is one program** (`examples/models/mask_rcnn.rs`, a
//! small Mask R-CNN; `tests/mask_rcnn.rs`). Each data-dependent count of
//! torchvision's code is a dynamic size with a static bound: the objects of
//! an image (`mark_dynamic` targets sharing one variable), the proposals
//! (`nms(..).slice(0, ..post)`, Python's `keep[:post]`), and the sampled
//! anchors and RoIs: torchvision's `randperm(n)[:cap]` over the positives
//! is a sort of random keys (host data, a new draw every step) that puts
//! the positives first, `slice(0, ..cap)` and a `masked_select` of the
//! positives among them; the negatives fill `batch - positives`, a
//! `scalar_sym` of that difference compared with a rank. Ground-truth masks
//! enter `roi_align` as their static bound (`pad_to_bound`). So 30 steps
//! with different counts compile the training step once, and its loss
//! falls, on both backends.
//!
//! ```
//! use lazyxla::{vision, Tensor};
//! let boxes = Tensor::from_vec(
//!     vec![0.0f32, 0.0, 2.0, 2.0, 0.0, 0.0, 2.0, 2.1, 5.0, 5.0, 6.0, 6.0],
//!     &[3, 4],
//! ).unwrap();
//! let iou = vision::box_iou(&boxes, &boxes);
//! assert_eq!(iou.upper_bounds(), vec![3, 3]);
//! ```

mod boxes;
mod nms;
mod roi_align;

pub use boxes::box_iou;
pub use nms::{batched_nms, nms};
pub use roi_align::roi_align;

use crate::error::Error;
use crate::tensor::Tensor;

/// Panics with a misuse: the op, what is wrong, the shapes with bounds.
#[track_caller]
fn misuse(op: &'static str, message: String) -> ! {
    panic!("{}", Error::shape(op, message))
}

/// Panics unless `boxes` is a float `[N, 4]` (N may be dynamic).
#[track_caller]
fn check_boxes(op: &'static str, name: &str, boxes: &Tensor) {
    let shape = boxes.shape_string();
    if boxes.rank() != 2 || boxes.size(1).as_static() != Some(4) {
        misuse(
            op,
            format!("{name} must be [N, 4] boxes (x1, y1, x2, y2), got shape {shape}"),
        );
    }
    if !boxes.dtype().is_float() {
        misuse(
            op,
            format!(
                "{name} must hold floats, got {}{shape}; convert with to_dtype(DType::F32)",
                boxes.dtype()
            ),
        );
    }
}

/// The static `(N, C, H, W)` of a float NCHW `input`.
#[track_caller]
fn image_dims(op: &'static str, input: &Tensor) -> (usize, usize, usize, usize) {
    let shape = input.shape_string();
    if input.rank() != 4 {
        misuse(
            op,
            format!("input must be [N, C, H, W] features, got shape {shape}"),
        );
    }
    if !input.dtype().is_float() {
        misuse(
            op,
            format!(
                "input must hold floats, got {}{shape}; convert with to_dtype(DType::F32)",
                input.dtype()
            ),
        );
    }
    let dims: Vec<usize> = (0..4)
        .map(|d| match input.size(d).as_static() {
            Some(v) => v as usize,
            None => panic!(
                "{}",
                Error::DynamicUnsupported {
                    op,
                    dim: d,
                    shape: shape.clone()
                }
            ),
        })
        .collect();
    if dims[2] == 0 || dims[3] == 0 {
        misuse(op, format!("input has an empty image (shape {shape})"));
    }
    (dims[0], dims[1], dims[2], dims[3])
}

/// Panics unless `rois` is `[K, 5]` (K may be dynamic) of `input`'s dtype.
#[track_caller]
fn rois_dims(op: &'static str, input: &Tensor, rois: &Tensor) {
    let shape = rois.shape_string();
    if rois.rank() != 2 || rois.size(1).as_static() != Some(5) {
        misuse(
            op,
            format!(
                "rois must be [K, 5] (batch index, x1, y1, x2, y2), got shape {shape}; \
                 prepend the batch index column with Tensor::cat(&[&idx, &boxes], 1)"
            ),
        );
    }
    if rois.dtype() != input.dtype() {
        misuse(
            op,
            format!(
                "rois is {}{shape} but input is {}{}; they must have one dtype (rois.to_dtype(input.dtype()))",
                rois.dtype(),
                input.dtype(),
                input.shape_string()
            ),
        );
    }
}
