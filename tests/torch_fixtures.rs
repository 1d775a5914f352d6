//! The ops lazyxla has, against PyTorch: each case of the fixtures in
//! `tests/fixtures` (written by `gen.py`, computed in float64 by PyTorch)
//! gives inputs, outputs and the input gradients of `sum(out * g)` for a
//! fixed random `g`; both backends must agree within
//! `|got - want| <= 1e-5 * (1 + |want|)` (integer outputs exactly).
//! Convolutions (stride, padding, dilation, groups, output padding),
//! pooling (ties in a max window, padding counted in averages, adaptive
//! pooling of divisible and non-divisible sizes), stable sorts with ties
//! and NaN, topk, cumulative sums and products, scatter and cross entropy.
//! The small ResNet's training step (forward in train mode, cross entropy,
//! backward, SGD with momentum and weight decay) is one compiled program
//! whose logits, loss, parameter gradients, updated parameters and running
//! statistics equal PyTorch's within 1e-4, with BatchNorm written from
//! today's ops. The fixtures of ops still being added are checked by
//! `tests/torch_fixtures_pending.rs.txt`.

mod common;

use common::fixtures::{Fixture, Tol};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, nn, no_grad, Tensor};
use std::collections::BTreeMap;

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

/// The ResNet of `resnet.safetensors` written with the ops lazyxla has
/// (BatchNorm as a composition, in train mode), over parameters and
/// buffers held by PyTorch's `state_dict` names.
struct FunctionalResNet {
    params: BTreeMap<String, Tensor>,
    buffers: BTreeMap<String, Tensor>,
}

impl FunctionalResNet {
    fn p(&self, name: &str) -> &Tensor {
        &self.params[name]
    }

    fn conv(&self, x: &Tensor, name: &str, stride: usize, padding: usize) -> Tensor {
        let w = self.p(&format!("{name}.weight"));
        x.conv2d(w, None, (stride, stride), (padding, padding), (1, 1), 1)
    }

    /// BatchNorm2d in train mode (eps 1e-5, momentum 0.1): normalises by
    /// the batch statistics and moves the running ones, with the unbiased
    /// variance, outside autograd.
    fn bn(&self, x: &Tensor, name: &str) -> Tensor {
        let mean = x.mean_dims(&[0, 2, 3], true);
        let centered = x - &mean;
        let var = centered.square().mean_dims(&[0, 2, 3], true);
        let y = &centered / &(&var + 1e-5).sqrt();
        let channel = |t: &Tensor| t.reshape(&[1, -1, 1, 1]);
        let y = &(&y * &channel(self.p(&format!("{name}.weight"))))
            + &channel(self.p(&format!("{name}.bias")));
        let shape = x.upper_bounds();
        let n = (shape[0] * shape[2] * shape[3]) as f64;
        let (rm, rv) = (
            &self.buffers[&format!("{name}.running_mean")],
            &self.buffers[&format!("{name}.running_var")],
        );
        no_grad(|| {
            let batch_mean = mean.detach().reshape(&[-1]);
            let batch_var = var.detach().reshape(&[-1]) * (n / (n - 1.0));
            rm.assign(&(&(rm * 0.9) + &(batch_mean * 0.1)));
            rv.assign(&(&(rv * 0.9) + &(batch_var * 0.1)));
        });
        y
    }

    fn block(&self, x: &Tensor, name: &str, stride: usize, downsample: bool) -> Tensor {
        let y = self
            .bn(
                &self.conv(x, &format!("{name}.conv1"), stride, 1),
                &format!("{name}.bn1"),
            )
            .relu();
        let y = self.bn(
            &self.conv(&y, &format!("{name}.conv2"), 1, 1),
            &format!("{name}.bn2"),
        );
        let skip = if downsample {
            let d = self.conv(x, &format!("{name}.downsample.0"), stride, 0);
            self.bn(&d, &format!("{name}.downsample.1"))
        } else {
            x.clone()
        };
        (&y + &skip).relu()
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let x = self.bn(&self.conv(x, "conv1", 1, 1), "bn1").relu();
        let x = self.block(&x, "layer1.0", 1, false);
        let x = self.block(&x, "layer2.0", 2, true);
        let pooled = x.adaptive_avg_pool2d((1, 1)).reshape(&[-1, 16]);
        &pooled.matmul(&self.p("fc.weight").transpose(0, 1)) + self.p("fc.bias")
    }
}

/// A `key=value` number of the `resnet` metadata.
fn hyper(fx: &Fixture, key: &str) -> f64 {
    fx.meta("resnet")
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in the resnet metadata"))
        .parse()
        .unwrap()
}

backend_test! {
    fn resnet_training_step_with_functional_batch_norm() {
        const TOL: Tol = Tol::Scaled(1e-4);
        let fx = Fixture::load("resnet");
        let load = |prefix: &str, grad: bool| -> BTreeMap<String, Tensor> {
            fx.names_under(prefix)
                .into_iter()
                .filter(|n| !n.ends_with("num_batches_tracked"))
                .map(|n| {
                    let t = fx.tensor(&format!("{prefix}{n}"));
                    (n, if grad { t.requires_grad(true) } else { t })
                })
                .collect()
        };
        let net = FunctionalResNet { params: load("param/", true), buffers: load("buffer/", false) };
        let names: Vec<String> = net.params.keys().cloned().collect();
        let params: Vec<Tensor> = net.params.values().cloned().collect();
        let mut opt = Sgd::new(params.clone(), hyper(&fx, "lr"))
            .momentum(hyper(&fx, "momentum"))
            .weight_decay(hyper(&fx, "weight_decay"));
        mark_step().unwrap();
        metrics::reset();

        let logits = net.forward(&fx.tensor("x"));
        let loss = nn::cross_entropy(&logits, &fx.tensor("labels"));
        loss.backward();
        let grads: Vec<Tensor> = params.iter().map(|p| p.grad().expect("a gradient")).collect();
        opt.step();
        mark_step().unwrap();
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());

        fx.check("logits", &logits, TOL);
        fx.check("loss", &loss, TOL);
        for ((name, p), g) in names.iter().zip(&params).zip(&grads) {
            fx.check(&format!("grad/{name}"), g, TOL);
            fx.check(&format!("param_after/{name}"), p, TOL);
        }
        for (name, b) in &net.buffers {
            fx.check(&format!("buffer_after/{name}"), b, TOL);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "reading compiles nothing");
    }
}
