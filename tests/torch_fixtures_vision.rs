//! `lazyxla::vision` against torchvision, on both backends: the cases of
//! `tests/fixtures/vision.safetensors` (written by `gen_vision.py`).
//!
//! `box_iou` and `roi_align` were computed in float64 from the stored
//! float32 inputs (values within `1e-5 * (1 + |want|)`, gradients with
//! respect to the features included); `nms` and `batched_nms` in float32,
//! whose kept indices must be equal, ties and IoUs exactly at the
//! threshold included.

mod common;

use common::fixtures::Fixture;
use lazyxla::{vision, Tensor};

backend_test! {
    fn box_iou() {
        let fx = Fixture::load("vision");
        for c in fx.cases("box_iou") {
            let (a, b) = (c.input("a"), c.input("b"));
            let out = vision::box_iou(&a, &b);
            c.check_step(&[("out", &out)], &[("a", &a), ("b", &b)]);
        }
    }
}

backend_test! {
    fn roi_align() {
        let fx = Fixture::load("vision");
        for c in fx.cases("roi_align") {
            let (x, rois) = (c.input("x"), c.tensor("rois"));
            let out = vision::roi_align(
                &x,
                &rois,
                c.pair("output"),
                c.f64("spatial_scale"),
                c.int("sampling_ratio"),
                c.flag("aligned"),
            );
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
    }
}

backend_test! {
    /// The same cases with the RoIs behind a dynamic zone (`[<=K, 5]`
    /// with padding rows of garbage coordinates): the same values and
    /// gradients, padding never counted.
    fn roi_align_dynamic_rois() {
        let fx = Fixture::load("vision");
        for c in fx.cases("roi_align") {
            let x = c.input("x");
            let rois = c.tensor("rois");
            let k = rois.upper_bounds()[0];
            // Rows of huge coordinates in every other slot, then dropped
            // with a mask: the real rows come back in order, behind a
            // dynamic size.
            let junk = Tensor::full(&[k, 5], 1.0e6, lazyxla::DType::F32);
            let both = Tensor::stack(&[&rois, &junk], 1).reshape(&[(2 * k) as i64, 5]);
            let keep: Vec<bool> = (0..2 * k).map(|i| i % 2 == 0).collect();
            let mask = Tensor::from_vec(keep, &[2 * k]).unwrap();
            let rows = mask.nonzero().squeeze(1);
            let dynamic = both.index_select(0, &rows);
            assert!(dynamic.is_dynamic());
            let out = vision::roi_align(
                &x,
                &dynamic,
                c.pair("output"),
                c.f64("spatial_scale"),
                c.int("sampling_ratio"),
                c.flag("aligned"),
            );
            assert_eq!(out.size(0).to_string(), format!("<={}", 2 * k));
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn nms() {
        let fx = Fixture::load("vision");
        for c in fx.cases("nms") {
            let keep = vision::nms(&c.tensor("boxes"), &c.tensor("scores"), c.f64("iou"));
            c.check("keep", &keep);
        }
    }
}

backend_test! {
    fn batched_nms() {
        let fx = Fixture::load("vision");
        for c in fx.cases("batched_nms") {
            let keep = vision::batched_nms(
                &c.tensor("boxes"),
                &c.tensor("scores"),
                &c.tensor("classes"),
                c.f64("iou"),
            );
            c.check("keep", &keep);
        }
    }
}
