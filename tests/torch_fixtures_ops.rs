//! The composed tensor ops against PyTorch (reductions, masks and
//! triangles, one-hot, shape ops, elementwise ops, upsampling), on both
//! backends. (The convolutions, pooling, sorting and scans are in
//! `torch_fixtures.rs`; the nn modules and the ResNet step in
//! `torch_fixtures_nn.rs`.)
//!
//! Each case of the fixtures in `tests/fixtures` (written by `gen.py`,
//! computed in float64 by PyTorch) gives inputs, outputs and the input
//! gradients of `sum(out * g)` for a fixed random `g`; both backends must
//! agree within `|got - want| <= 1e-5 * (1 + |want|)` (integer and bool
//! outputs exactly).

mod common;

use common::fixtures::{Case, Fixture};
use lazyxla::Tensor;

/// Checks a case whose one input `x` gives one output `out`.
fn check_unary(c: &Case, f: impl Fn(&Tensor) -> Tensor) {
    let x = c.input("x");
    let out = f(&x);
    c.check_step(&[("out", &out)], &[("x", &x)]);
}

/// Checks a case whose input `x` gives a list `out.0`, `out.1`, ...; the
/// number of parts must be PyTorch's.
fn check_parts(c: &Case, x: &Tensor, parts: &[Tensor]) {
    let n = (0..).take_while(|i| c.has(&format!("out.{i}"))).count();
    assert_eq!(parts.len(), n, "case {}: number of parts", c.name);
    let names: Vec<String> = (0..n).map(|i| format!("out.{i}")).collect();
    let outputs: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(parts).collect();
    c.check_step(&outputs, &[("x", x)]);
}

// ---------------------------------------------------------------------------
// Reductions (reduce.safetensors)
// ---------------------------------------------------------------------------

backend_test! {
    fn logsumexp() {
        let fx = Fixture::load("reduce");
        for c in fx.cases("logsumexp") {
            check_unary(&c, |x| x.logsumexp(c.usize("dim"), c.flag("keepdim")));
        }
    }
}

backend_test! {
    fn var_and_std() {
        let fx = Fixture::load("reduce");
        for c in fx.cases("var") {
            check_unary(&c, |x| x.var(c.usize("dim"), c.flag("keepdim")));
        }
        for c in fx.cases("std") {
            check_unary(&c, |x| x.std(c.usize("dim"), c.flag("keepdim")));
        }
    }
}

backend_test! {
    fn prod_any_all() {
        let fx = Fixture::load("reduce");
        for c in fx.cases("prod") {
            check_unary(&c, |x| x.prod());
        }
        for c in fx.cases("any") {
            check_unary(&c, |x| x.any());
        }
        for c in fx.cases("all") {
            check_unary(&c, |x| x.all());
        }
    }
}

// ---------------------------------------------------------------------------
// Masks, triangles, one-hot (index.safetensors)
// ---------------------------------------------------------------------------

backend_test! {
    fn masked_fill() {
        let fx = Fixture::load("index");
        for c in fx.cases("masked_fill") {
            check_unary(&c, |x| x.masked_fill(&c.tensor("mask"), c.f64("value")));
        }
    }
}

backend_test! {
    fn tril_triu() {
        let fx = Fixture::load("index");
        for c in fx.cases("tril") {
            check_unary(&c, |x| x.tril(c.int("k")));
        }
        for c in fx.cases("triu") {
            check_unary(&c, |x| x.triu(c.int("k")));
        }
    }
}

backend_test! {
    fn one_hot() {
        let fx = Fixture::load("index");
        for c in fx.cases("one_hot") {
            check_unary(&c, |x| x.one_hot(c.usize("num_classes")));
        }
    }
}

// ---------------------------------------------------------------------------
// Shape ops (shape.safetensors)
// ---------------------------------------------------------------------------

backend_test! {
    fn pad() {
        let fx = Fixture::load("shape");
        for c in fx.cases("pad") {
            let pairs: Vec<(usize, usize)> =
                c.usizes("pads").chunks(2).map(|p| (p[0], p[1])).collect();
            check_unary(&c, |x| x.pad(&pairs, c.f64("value")));
        }
    }
}

backend_test! {
    fn split_and_chunk() {
        let fx = Fixture::load("shape");
        for c in fx.cases("split") {
            let x = c.input("x");
            check_parts(&c, &x, &x.split(c.usize("size"), c.usize("dim")));
        }
        for c in fx.cases("chunk") {
            let x = c.input("x");
            check_parts(&c, &x, &x.chunk(c.usize("n"), c.usize("dim")));
        }
    }
}

backend_test! {
    fn repeat_flip_roll() {
        let fx = Fixture::load("shape");
        for c in fx.cases("repeat") {
            check_unary(&c, |x| x.repeat(&c.usizes("repeats")));
        }
        for c in fx.cases("flip") {
            check_unary(&c, |x| x.flip(&c.usizes("dims")));
        }
        for c in fx.cases("roll") {
            check_unary(&c, |x| x.roll(c.int("shift"), c.usize("dim")));
        }
    }
}

// ---------------------------------------------------------------------------
// Elementwise (elementwise.safetensors)
// ---------------------------------------------------------------------------

/// A tensor method without arguments.
type Unary = fn(&Tensor) -> Tensor;

/// Unary ops without arguments, by fixture op name.
const UNARY: &[(&str, Unary)] = &[
    ("silu", Tensor::silu),
    ("softplus", Tensor::softplus),
    ("log1p", Tensor::log1p),
    ("expm1", Tensor::expm1),
    ("ceil", Tensor::ceil),
    ("round", Tensor::round),
    ("isnan", Tensor::isnan),
    ("isfinite", Tensor::isfinite),
];

backend_test! {
    fn unary() {
        let fx = Fixture::load("elementwise");
        for (op, f) in UNARY {
            for c in fx.cases(op) {
                check_unary(&c, f);
            }
        }
        for c in fx.cases("leaky_relu") {
            check_unary(&c, |x| x.leaky_relu(c.f64("slope")));
        }
        for c in fx.cases("elu") {
            check_unary(&c, |x| x.elu(c.f64("alpha")));
        }
    }
}

backend_test! {
    fn clamps() {
        let fx = Fixture::load("elementwise");
        for c in fx.cases("clamp_min") {
            check_unary(&c, |x| x.clamp_min(c.f64("min")));
        }
        for c in fx.cases("clamp_max") {
            check_unary(&c, |x| x.clamp_max(c.f64("max")));
        }
        for c in fx.cases("clamp_tensor") {
            let (x, lo, hi) = (c.input("x"), c.input("lo"), c.input("hi"));
            let out = x.clamp_tensor(&lo, &hi);
            c.check_step(&[("out", &out)], &[("x", &x), ("lo", &lo), ("hi", &hi)]);
        }
    }
}

// ---------------------------------------------------------------------------
// Upsampling (upsample.safetensors)
// ---------------------------------------------------------------------------

backend_test! {
    fn upsample() {
        let fx = Fixture::load("upsample");
        for c in fx.cases("upsample_nearest2d") {
            check_unary(&c, |x| x.upsample_nearest2d(c.pair("size")));
        }
        for c in fx.cases("upsample_bilinear2d") {
            check_unary(&c, |x| x.upsample_bilinear2d(c.pair("size"), c.flag("align_corners")));
        }
    }
}
