//! `set_float32_matmul_precision`: PyTorch's levels for `f32` matrix
//! products. "highest" (the default) asks XLA for `f32` products
//! (`precision_config` `HIGHEST`), "high" for `HIGH`, "medium" for XLA's
//! default, the device's fastest; half products and convolutions keep the
//! default. The level is part of a program's key: a new level compiles
//! once, an earlier one is found again. A binary of its own: the level is
//! process-wide.

mod common;

use lazyxla::{metrics, DType, Tensor};

fn operands() -> (Tensor, Tensor) {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let b = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.25, 1.5, -0.5], &[3, 2]).unwrap();
    (a, b)
}

/// The `precision_config` of each `dot_general` in `text`, in order (""
/// for none).
fn dot_precisions(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("stablehlo.dot_general"))
        .map(|l| {
            ["HIGHEST", "HIGH", "DEFAULT"]
                .into_iter()
                .find(|p| l.contains(&format!("precision {p}>")))
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[test]
fn each_level_lowers_f32_products_with_its_precision_and_is_part_of_the_key() {
    let _g = common::lock();
    assert_eq!(lazyxla::float32_matmul_precision(), "highest");
    let (a, b) = operands();
    let want = vec![9.0f32, -2.0, 21.0, -5.75];
    let level_text = |level: &str| {
        lazyxla::set_float32_matmul_precision(level).unwrap();
        lazyxla::debug::stablehlo_text(&[&a.matmul(&b)]).unwrap()
    };
    assert_eq!(dot_precisions(&level_text("highest")), ["HIGHEST"]);
    assert_eq!(dot_precisions(&level_text("high")), ["HIGH"]);
    assert_eq!(dot_precisions(&level_text("medium")), [""]);

    // A bf16 product is widened to f32 to accumulate and keeps XLA's
    // default, at every level.
    lazyxla::set_float32_matmul_precision("highest").unwrap();
    let (ha, hb) = (a.to_dtype(DType::BF16), b.to_dtype(DType::BF16));
    let half = lazyxla::debug::stablehlo_text(&[&ha.matmul(&hb)]).unwrap();
    assert_eq!(dot_precisions(&half), [""]);

    let Some(d) = common::pjrt_device() else {
        return;
    };
    d.scoped(|| {
        let (a, b) = operands();
        let compiles = || metrics::counter("UncachedCompile");
        let run = |level: &str| {
            lazyxla::set_float32_matmul_precision(level).unwrap();
            a.matmul(&b).to_vec::<f32>().unwrap()
        };
        let before = compiles();
        // A CPU computes every level in f32.
        assert_eq!(run("highest"), want);
        assert_eq!(compiles(), before + 1);
        assert_eq!(run("medium"), want);
        assert_eq!(compiles(), before + 2, "a new level compiles anew");
        assert_eq!(run("highest"), want);
        assert_eq!(
            compiles(),
            before + 2,
            "an earlier level's program is found again"
        );
    });
    lazyxla::set_float32_matmul_precision("highest").unwrap();
}

#[test]
fn an_unknown_level_is_refused_with_the_known_ones_and_changes_nothing() {
    let _g = common::lock();
    let before = lazyxla::float32_matmul_precision();
    let e = lazyxla::set_float32_matmul_precision("tf32").unwrap_err();
    let msg = e.to_string();
    for part in ["\"tf32\"", "\"highest\"", "\"high\"", "\"medium\""] {
        assert!(msg.contains(part), "{msg}");
    }
    assert_eq!(lazyxla::float32_matmul_precision(), before);
}
