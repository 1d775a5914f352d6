//! Box geometry shared by the vision ops: areas and pairwise
//! intersection over union, with torchvision's arithmetic.

use super::check_boxes;
use crate::tensor::Tensor;

/// The pairwise intersection over union of two sets of boxes in
/// `(x1, y1, x2, y2)` form, as torchvision's `box_iou`: `a: [N, 4]` and
/// `b: [M, 4]` give `[N, M]`. The intersection's width and height are
/// clamped at 0; `union = (area_a + area_b) - inter`; a pair of empty
/// boxes gives `0 / 0 = NaN`, as torchvision. Either set may be dynamic
/// (`[<=N, 4]`, from `nonzero` or `nms`): the result has their sizes.
/// The gradient flows to both sets of boxes.
///
/// ```
/// use lazyxla::{vision, Tensor};
/// let a = Tensor::from_vec(vec![0.0f32, 0.0, 2.0, 2.0], &[1, 4]).unwrap();
/// let b = Tensor::from_vec(vec![1.0f32, 0.0, 3.0, 2.0, 5.0, 5.0, 6.0, 6.0], &[2, 4]).unwrap();
/// let iou = vision::box_iou(&a, &b);
/// assert_eq!(iou.upper_bounds(), vec![1, 2]);
/// assert_eq!(iou.to_vec::<f32>().unwrap(), vec![2.0 / 6.0, 0.0]);
/// ```
#[track_caller]
pub fn box_iou(a: &Tensor, b: &Tensor) -> Tensor {
    check_boxes("box_iou", "boxes1", a);
    check_boxes("box_iou", "boxes2", b);
    if a.dtype() != b.dtype() {
        panic!(
            "box_iou: boxes1 is {}{} but boxes2 is {}{}; convert one with to_dtype",
            a.dtype(),
            a.shape_string(),
            b.dtype(),
            b.shape_string()
        );
    }
    a.device()
        .scoped(|| pairwise_iou(&Corners::of(a).column(), &Corners::of(b).row()))
}

/// The four coordinates of a set of boxes `[N, 4]`, each `[N]`, and the
/// area `(x2 - x1) * (y2 - y1)`.
pub(super) struct Corners {
    pub x1: Tensor,
    pub y1: Tensor,
    pub x2: Tensor,
    pub y2: Tensor,
    pub area: Tensor,
}

impl Corners {
    #[track_caller]
    pub fn of(boxes: &Tensor) -> Corners {
        let c = |k: usize| boxes.narrow(1, k, 1).squeeze(1);
        let (x1, y1, x2, y2) = (c(0), c(1), c(2), c(3));
        let area = &(&x2 - &x1) * &(&y2 - &y1);
        Corners {
            x1,
            y1,
            x2,
            y2,
            area,
        }
    }

    /// Each coordinate as a column `[N, 1]` (the rows of a pairwise result).
    #[track_caller]
    pub fn column(&self) -> Corners {
        self.map(|t| t.unsqueeze(1))
    }

    /// Each coordinate as a row `[1, N]` (the columns of a pairwise result).
    #[track_caller]
    pub fn row(&self) -> Corners {
        self.map(|t| t.unsqueeze(0))
    }

    #[track_caller]
    pub fn map(&self, f: impl Fn(&Tensor) -> Tensor) -> Corners {
        Corners {
            x1: f(&self.x1),
            y1: f(&self.y1),
            x2: f(&self.x2),
            y2: f(&self.y2),
            area: f(&self.area),
        }
    }
}

/// The IoU of `a` and `b` broadcast against each other, in torchvision's
/// order of operations (its `box_iou` and its CPU `nms` kernel compute
/// the same float values): `w = max(min(x2) - max(x1), 0)`, `h` alike,
/// `inter = w * h`, `inter / ((area_a + area_b) - inter)`.
#[track_caller]
pub(super) fn pairwise_iou(a: &Corners, b: &Corners) -> Tensor {
    let w = (&a.x2.minimum(&b.x2) - &a.x1.maximum(&b.x1)).clamp_min(0.0);
    let h = (&a.y2.minimum(&b.y2) - &a.y1.maximum(&b.y1)).clamp_min(0.0);
    let inter = &w * &h;
    let union = &(&a.area + &b.area) - &inter;
    &inter / &union
}
