//! The ops lazyxla has, against PyTorch: each case of the fixtures in
//! `tests/fixtures` (written by `gen.py`, computed in float64 by PyTorch)
//! gives inputs, outputs and the input gradients of `sum(out * g)` for a
//! fixed random `g`; both backends must agree within
//! `|got - want| <= 1e-5 * (1 + |want|)` (integer outputs exactly).
//! Convolutions (stride, padding, dilation, groups, output padding),
//! pooling (ties in a max window, padding counted in averages, adaptive
//! pooling of divisible and non-divisible sizes), stable sorts with ties
//! and NaN, topk, cumulative sums and products, scatter and cross entropy.
//! The nn modules (normalisation, attention) and the small ResNet's
//! training step are checked by `tests/torch_fixtures_nn.rs`; the fixtures
//! of ops still being added by `tests/torch_fixtures_pending.rs.txt`.

mod common;

use common::fixtures::Fixture;
use lazyxla::nn;

backend_test! {
    fn conv1d() {
        let fx = Fixture::load("conv");
        for c in fx.cases("conv1d") {
            let (x, w, b) = (c.input("x"), c.input("weight"), c.maybe_input("bias"));
            let out = x.conv1d(
                &w,
                b.as_ref(),
                c.usize("stride"),
                c.usize("padding"),
                c.usize("dilation"),
                c.usize("groups"),
            );
            let mut inputs = vec![("x", &x), ("weight", &w)];
            inputs.extend(b.as_ref().map(|b| ("bias", b)));
            c.check_step(&[("out", &out)], &inputs);
        }
    }
}

backend_test! {
    fn conv2d() {
        let fx = Fixture::load("conv");
        for c in fx.cases("conv2d") {
            let (x, w, b) = (c.input("x"), c.input("weight"), c.maybe_input("bias"));
            let out = x.conv2d(
                &w,
                b.as_ref(),
                c.pair("stride"),
                c.pair("padding"),
                c.pair("dilation"),
                c.usize("groups"),
            );
            let mut inputs = vec![("x", &x), ("weight", &w)];
            inputs.extend(b.as_ref().map(|b| ("bias", b)));
            c.check_step(&[("out", &out)], &inputs);
        }
    }
}

backend_test! {
    fn conv_transpose2d() {
        let fx = Fixture::load("conv");
        for c in fx.cases("conv_transpose2d") {
            let (x, w, b) = (c.input("x"), c.input("weight"), c.maybe_input("bias"));
            let out = x.conv_transpose2d(
                &w,
                b.as_ref(),
                c.pair("stride"),
                c.pair("padding"),
                c.pair("output_padding"),
                c.pair("dilation"),
                c.usize("groups"),
            );
            let mut inputs = vec![("x", &x), ("weight", &w)];
            inputs.extend(b.as_ref().map(|b| ("bias", b)));
            c.check_step(&[("out", &out)], &inputs);
        }
    }
}

backend_test! {
    fn max_pool2d() {
        let fx = Fixture::load("window");
        for c in fx.cases("max_pool2d") {
            let x = c.input("x");
            let out = x.max_pool2d(c.pair("kernel"), c.pair("stride"), c.pair("padding"));
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn avg_pool2d() {
        let fx = Fixture::load("window");
        for c in fx.cases("avg_pool2d") {
            let x = c.input("x");
            let out = x.avg_pool2d(c.pair("kernel"), c.pair("stride"), c.pair("padding"));
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn adaptive_avg_pool2d() {
        let fx = Fixture::load("window");
        for c in fx.cases("adaptive_avg_pool2d") {
            let x = c.input("x");
            let out = x.adaptive_avg_pool2d(c.pair("output"));
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn sort() {
        let fx = Fixture::load("sort");
        for c in fx.cases("sort") {
            let x = c.input("x");
            let (values, indices) = x.sort(c.usize("dim"), c.flag("descending"));
            c.check_step(&[("values", &values), ("indices", &indices)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn argsort() {
        let fx = Fixture::load("sort");
        for c in fx.cases("argsort") {
            let out = c.tensor("x").argsort(c.usize("dim"), c.flag("descending"));
            c.check_step(&[("out", &out)], &[]);
        }
    }
}

backend_test! {
    fn topk() {
        let fx = Fixture::load("sort");
        for c in fx.cases("topk") {
            let x = c.input("x");
            let (values, indices) = x.topk(c.usize("k"), c.usize("dim"), c.flag("largest"));
            c.check_step(&[("values", &values), ("indices", &indices)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn cumsum() {
        let fx = Fixture::load("scan");
        for c in fx.cases("cumsum") {
            let x = c.input("x");
            let out = x.cumsum(c.usize("dim"));
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn cumprod() {
        let fx = Fixture::load("scan");
        for c in fx.cases("cumprod") {
            let x = c.input("x");
            let out = x.cumprod(c.usize("dim"));
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
    }
}

backend_test! {
    fn scatter() {
        let fx = Fixture::load("scatter");
        for c in fx.cases("scatter") {
            let (x, src) = (c.input("x"), c.input("src"));
            let out = x.scatter(c.usize("dim"), &c.tensor("index"), &src);
            c.check_step(&[("out", &out)], &[("x", &x), ("src", &src)]);
        }
    }
}

backend_test! {
    fn cross_entropy() {
        let fx = Fixture::load("loss");
        for c in fx.cases("cross_entropy") {
            let logits = c.input("logits");
            let out = nn::cross_entropy(&logits, &c.tensor("target"));
            c.check_step(&[("out", &out)], &[("logits", &logits)]);
        }
    }
}
