//! Gradient checks of every differentiable op against central finite
//! differences in f64, one body per backend (so PJRT gradients are checked
//! against the same numbers as the reference backend's).

mod common;

use common::assert_close64;
use lazyxla::{fori_loop, mark_step, no_grad, DType, Tensor};

/// Checks d(sum(w * f(x)))/dx against finite differences, for a fixed
/// pseudo-random weighting `w` (so a wrong sign or permutation shows).
fn check(name: &str, x: &[f64], shape: &[usize], f: impl Fn(&Tensor) -> Tensor) {
    let xt = Tensor::from_vec(x.to_vec(), shape)
        .unwrap()
        .requires_grad(true);
    let y = f(&xt).to_dtype(DType::F64).flatten();
    // Weights 0.5, 0.6, .. built in the graph from y's own (maybe dynamic)
    // length, so they line up with a dynamic y too.
    let w = Tensor::arange_sym(&y.size(0)).to_dtype(DType::F64) * 0.1 + 0.5;
    let weigh = |y: &Tensor| -> f64 {
        let v = y.to_dtype(DType::F64).to_vec::<f64>().unwrap();
        v.iter()
            .enumerate()
            .map(|(i, a)| a * (0.5 + 0.1 * i as f64))
            .sum()
    };
    let loss = (&y * &w).sum();
    loss.backward();
    mark_step().unwrap();
    let got = xt
        .grad()
        .unwrap_or_else(|| panic!("{name}: no gradient"))
        .to_vec::<f64>()
        .unwrap();
    let eps = 1e-6;
    let numeric: Vec<f64> = (0..x.len())
        .map(|i| {
            let mut p = x.to_vec();
            let mut m = x.to_vec();
            p[i] += eps;
            m[i] -= eps;
            let (fp, fm) = no_grad(|| {
                (
                    weigh(&f(&Tensor::from_vec(p, shape).unwrap())),
                    weigh(&f(&Tensor::from_vec(m, shape).unwrap())),
                )
            });
            (fp - fm) / (2.0 * eps)
        })
        .collect();
    println!("{name}: analytic {got:?} numeric {numeric:?}");
    assert_close64(&got, &numeric, 1e-5);
}

const X: [f64; 6] = [0.3, -1.2, 2.1, 0.7, -0.4, 1.6];
const POS: [f64; 6] = [0.3, 1.2, 2.1, 0.7, 0.4, 1.6];

backend_test! {
    fn unary_ops() {
        check("neg", &X, &[2, 3], |x| x.neg());
        check("abs", &X, &[2, 3], |x| x.abs());
        check("exp", &X, &[2, 3], |x| x.exp());
        check("log", &POS, &[2, 3], |x| x.log());
        check("sqrt", &POS, &[2, 3], |x| x.sqrt());
        check("rsqrt", &POS, &[2, 3], |x| x.rsqrt());
        check("tanh", &X, &[2, 3], |x| x.tanh());
        check("sigmoid", &X, &[2, 3], |x| x.sigmoid());
        check("erf", &X, &[2, 3], |x| x.erf());
        check("sin", &X, &[2, 3], |x| x.sin());
        check("cos", &X, &[2, 3], |x| x.cos());
        check("gelu", &X, &[2, 3], |x| x.gelu());
        check("relu", &X, &[2, 3], |x| x.relu());
        check("pow", &POS, &[2, 3], |x| x.pow(2.5));
        check("square", &X, &[2, 3], |x| x.square());
    }
}

backend_test! {
    fn binary_ops_and_broadcasting() {
        let c = || Tensor::from_vec(vec![0.5f64, -1.5, 2.0], &[3]).unwrap();
        check("add", &X, &[2, 3], |x| x + &c());
        check("sub", &X, &[2, 3], |x| &c() - x);
        check("mul", &X, &[2, 3], |x| x * &c());
        check("div", &X, &[2, 3], |x| &c() / &(x.abs() + 1.0));
        check("div_by", &X, &[2, 3], |x| x / &c());
        check("mul_self", &X, &[2, 3], |x| x * x);
        check("maximum", &X, &[2, 3], |x| x.maximum(&c()));
        check("minimum", &X, &[2, 3], |x| x.minimum(&c()));
        check("pow_tensor", &POS, &[2, 3], |x| x.pow_tensor(&x.sin()));
        check("broadcast_row", &X[..3], &[3], |x| &Tensor::ones(&[2, 3], DType::F64) * x);
        check("broadcast_col", &X[..2], &[2, 1], |x| x * &Tensor::ones(&[2, 3], DType::F64));
        check("where", &X, &[2, 3], |x| x.gt_scalar(0.0).where_cond(&(x * 3.0), &x.exp()));
        check("scalars", &X, &[2, 3], |x| (x * 2.0 + 1.0) / 4.0 - 0.5);
    }
}

backend_test! {
    fn shape_ops() {
        check("reshape", &X, &[2, 3], |x| x.reshape(&[3, 2]) * &Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap());
        check("transpose", &X, &[2, 3], |x| x.transpose(0, 1).matmul(&Tensor::from_vec(vec![1.0f64, -2.0], &[2]).unwrap()));
        check("permute", &X, &[1, 2, 3], |x| x.permute(&[2, 0, 1]).exp());
        check("narrow", &X, &[2, 3], |x| x.narrow(1, 1, 2).exp());
        check("cat", &X, &[2, 3], |x| Tensor::cat(&[x, &x.exp(), x], 1));
        check("stack", &X, &[2, 3], |x| Tensor::stack(&[x, &x.sin()], 0));
        check("unsqueeze_squeeze", &X, &[2, 3], |x| x.unsqueeze(1).exp().squeeze(1));
        check("expand", &X[..3], &[1, 3], |x| x.expand(&[2.into(), 3.into()]).sin());
    }
}

backend_test! {
    fn reductions_and_linalg() {
        check("sum", &X, &[2, 3], |x| x.sum());
        check("sum_dims", &X, &[2, 3], |x| x.sum_dims(&[1], false));
        check("sum_keepdim", &X, &[2, 3], |x| x.sum_dims(&[0], true) * x);
        check("mean", &X, &[2, 3], |x| x.mean());
        check("mean_dims", &X, &[2, 3], |x| x.mean_dims(&[0], false));
        check("max", &X, &[2, 3], |x| x.max());
        check("max_dims", &X, &[2, 3], |x| x.max_dims(&[1], false));
        check("min_dims", &X, &[2, 3], |x| x.min_dims(&[0], true));
        check("softmax", &X, &[2, 3], |x| x.softmax(-1));
        check("log_softmax", &X, &[2, 3], |x| x.log_softmax(0));
        let m = || Tensor::from_vec(vec![0.2f64, -0.3, 0.5, 1.0, 0.1, -0.7], &[3, 2]).unwrap();
        check("matmul_left", &X, &[2, 3], |x| x.matmul(&m()));
        check("matmul_right", &X, &[3, 2], |x| m().transpose(0, 1).matmul(x));
        check("matmul_vec", &X[..3], &[3], |x| m().transpose(0, 1).matmul(x));
        check("matmul_batched", &X, &[2, 1, 3], |x| x.matmul(&m()));
    }
}

backend_test! {
    fn indexing_and_dynamic_zones() {
        let idx = || Tensor::from_vec(vec![2i64, 0, 2], &[3]).unwrap();
        check("index_select", &X, &[2, 3], |x| x.index_select(1, &idx()));
        let gidx = || Tensor::from_vec(vec![1i64, 0, 0, 1, 1, 0], &[2, 3]).unwrap();
        let mask = || Tensor::from_vec(vec![true, false, true, true, false, true], &[2, 3]).unwrap();
        check("gather", &X, &[2, 3], |x| x.gather(0, &gidx()));
        check("index_add_src", &X, &[2, 3], |x| Tensor::zeros(&[2, 3], DType::F64).index_add(1, &idx(), x));
        check("scatter_add_src", &X, &[2, 3], |x| Tensor::zeros(&[2, 3], DType::F64).scatter_add(0, &gidx(), x));
        check("scatter_src", &X, &[2, 3], |x| Tensor::ones(&[3, 3], DType::F64).scatter(0, &Tensor::from_vec(vec![2i64, 0, 1, 0, 1, 2], &[2, 3]).unwrap(), x));
        check("scatter_base", &X, &[2, 3], |x| x.scatter(1, &Tensor::from_vec(vec![2i64, 0], &[2, 1]).unwrap(), &Tensor::zeros(&[2, 1], DType::F64)).exp());
        check("sort", &X, &[2, 3], |x| x.sort(1, true).0);
        check("topk", &X, &[2, 3], |x| x.topk(1, 0, false).0.exp());
        check("sort_dynamic", &X, &[2, 3], |x| x.masked_select(&mask()).sort(0, false).0);
        check("topk_dynamic", &X, &[2, 3], |x| x.masked_select(&mask()).topk(2, 0, true).0.square());
        // Dynamic: gradients go back through masked_select, nonzero-indexed
        // selects, reductions over dynamic dims and pad_to_bound.
        check("masked_select", &X, &[2, 3], |x| x.masked_select(&mask()).exp());
        check("masked_select_mean", &X, &[2, 3], |x| x.masked_select(&x.gt_scalar(0.0)).mean());
        check("nonzero_index", &X, &[6], |x| {
            let rows = mask().flatten().nonzero().flatten();
            x.index_select(0, &rows).square()
        });
        check("dynamic_matmul", &X, &[2, 3], |x| {
            let sel = x.masked_select(&mask()); // [<=6]
            let m = sel.unsqueeze(1).matmul(&sel.unsqueeze(0)); // [<=6, <=6]
            m.sum_dims(&[1], false)
        });
        check("pad_to_bound", &X, &[2, 3], |x| x.masked_select(&mask()).pad_to_bound(0.0).exp());
        check("cat_dynamic", &X, &[2, 3], |x| {
            let s = x.masked_select(&mask());
            Tensor::cat(&[&s, &s.exp()], 0)
        });
        // Slices of a `[<=6]` selection (4 real): clamped, past the end
        // (nothing), and a checked narrow.
        check("slice_dynamic", &X, &[2, 3], |x| x.masked_select(&mask()).slice(0, 1..3).exp());
        check("slice_dynamic_clamped", &X, &[2, 3], |x| x.masked_select(&mask()).slice(0, 2..).square());
        check("slice_dynamic_empty", &X, &[2, 3], |x| {
            let s = x.masked_select(&mask());
            Tensor::cat(&[&s.slice(0, 5..), &s.slice(0, ..1)], 0)
        });
        check("narrow_dynamic", &X, &[2, 3], |x| x.masked_select(&mask()).narrow(0, 1, 2).exp());
    }
}

backend_test! {
    fn convolutions() {
        // x as [1, 2, 1, 3] images or [2, 3] signals; weights fixed, then
        // the weight as the variable (x fixed).
        let w = || Tensor::from_vec(vec![0.5f64, -1.0, 2.0, 0.25], &[2, 1, 1, 2]).unwrap();
        let img = |x: &Tensor| x.reshape(&[1, 2, 1, 3]);
        check("conv2d_groups", &X, &[2, 3], |x| img(x).conv2d(&w(), None, (1, 2), (0, 1), (1, 1), 2));
        check("conv2d_weight", &X, &[1, 2, 1, 3], |w| {
            Tensor::from_vec(X.to_vec(), &[1, 2, 1, 3]).unwrap().conv2d(w, None, (1, 1), (0, 2), (1, 2), 1)
        });
        check("conv1d_bias", &X[..2], &[2], |b| {
            let x = Tensor::from_vec(X.to_vec(), &[1, 2, 3]).unwrap();
            x.conv1d(&w().reshape(&[2, 1, 2]), Some(b), 1, 1, 1, 2)
        });
        check("conv_transpose2d", &X, &[2, 3], |x| {
            img(x).conv_transpose2d(&w(), None, (1, 2), (0, 1), (0, 1), (1, 1), 2)
        });
        // Through a dynamic zone: the rows a mask keeps, as a dynamic batch.
        let keep = || Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
        check("conv1d_dynamic_batch", &X, &[3, 2], |x| {
            let rows = keep().nonzero().flatten();
            x.index_select(0, &rows).unsqueeze(1).conv1d(&w().reshape(&[2, 1, 2]), None, 1, 1, 1, 1)
        });
    }
}

backend_test! {
    fn gradients_accumulate_and_reset() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true);
        (&w * 3.0).sum().backward();
        (&w * &w).sum().backward();
        mark_step().unwrap();
        assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![5.0, 7.0]);
        w.zero_grad();
        assert!(w.grad().is_none());
        let y = no_grad(|| &w * 2.0);
        assert!(!y.is_requires_grad());
        let msg = common::panic_message(|| y.sum().backward());
        assert!(msg.contains("requires grad"), "{msg}");
        let msg = common::panic_message(|| (&w * 2.0).backward());
        assert!(msg.contains("scalar"), "{msg}");
        // Integer results carry no gradient, and say so by being cut off.
        let nz = w.gt_scalar(1.5).nonzero();
        assert!(!nz.is_requires_grad());
    }
}

backend_test! {
    fn composite_layers_and_losses() {
        use lazyxla::nn::{self, LayerNorm, Module};
        check("remainder", &POS, &[2, 3], |x| x.remainder(&Tensor::from_vec(vec![0.5f64, 0.9, 1.3], &[3]).unwrap()));
        check("clamp", &X, &[2, 3], |x| x.clamp(-1.0, 1.0));
        check("layer_norm", &X, &[2, 3], |x| {
            let ln = LayerNorm::new(3);
            ln.forward(&x.to_dtype(DType::F32)).to_dtype(DType::F64) * 0.0 + {
                // The same formula in f64 for a tight check.
                let mean = x.mean_dims(&[-1], true);
                let c = x - &mean;
                &c * &(c.square().mean_dims(&[-1], true) + 1e-5).rsqrt()
            }
        });
        let t = || Tensor::from_vec(vec![0.2f64, -0.1, 1.5, 0.3, 0.0, 2.0], &[2, 3]).unwrap();
        check("mse", &X, &[2, 3], |x| nn::mse_loss(x, &t()));
        check("smooth_l1", &X, &[2, 3], |x| nn::smooth_l1_loss(x, &t()));
        let labels = || Tensor::from_vec(vec![1.0f64, 0.0, 1.0, 0.0, 0.0, 1.0], &[2, 3]).unwrap();
        check("bce_with_logits", &X, &[2, 3], |x| nn::binary_cross_entropy_with_logits(x, &labels()));
        let cls = || Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
        check("cross_entropy", &X, &[2, 3], |x| nn::cross_entropy(x, &cls()));
        let ids = || Tensor::from_vec(vec![1i64, 1, 0], &[3]).unwrap();
        check("embedding_rows", &X, &[2, 3], |x| x.index_select(0, &ids()));
    }
}

backend_test! {
    fn window_ops() {
        // Distinct values: finite differences never cross a tie.
        let x12: Vec<f64> = (0..12).map(|i| ((i * 7) % 12) as f64 * 0.37 - 1.9).collect();
        check("max_pool2d", &x12, &[1, 1, 3, 4], |x| x.max_pool2d((2, 2), (1, 2), (1, 1)));
        check("max_pool2d chw", &x12, &[2, 2, 3], |x| x.max_pool2d((2, 1), (1, 1), (0, 0)));
        check("avg_pool2d", &x12, &[1, 1, 3, 4], |x| x.avg_pool2d((3, 2), (2, 1), (1, 1)));
        check("adaptive_avg_pool2d", &x12, &[1, 1, 3, 4], |x| x.adaptive_avg_pool2d((2, 3)));
        check("cumsum", &X, &[2, 3], |x| x.cumsum(1));
        check("cumsum dim 0", &X, &[2, 3], |x| x.cumsum(0));
        check("cumprod", &X, &[2, 3], |x| x.cumprod(1));
        check("cumprod dim 0", &POS, &[3, 2], |x| x.cumprod(0));
        // Through a dynamic zone: scans along a `[<=6]` selection.
        check("cumsum of masked_select", &X, &[6], |x| x.masked_select(&x.gt_scalar(0.0)).cumsum(0));
        check("cumprod of masked_select", &X, &[6], |x| x.masked_select(&x.lt_scalar(1.0)).cumprod(0));
    }
}

backend_test! {
    fn a_value_read_before_backward_keeps_its_graph() {
        // PyTorch: reading a value never cuts the gradient graph.
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true);
        let y = &x * 2.0;
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        (y.sum() + x.sum()).backward();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 3.0]);

        // The loss read first, then its backward; and after a mark_step.
        let w = Tensor::from_vec(vec![3.0f32, -1.0], &[2]).unwrap().requires_grad(true);
        let loss = (&w * &w).sum();
        assert_eq!(loss.item::<f32>().unwrap(), 10.0);
        loss.backward();
        assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![6.0, -2.0]);
        w.zero_grad();
        let h = (&w * &w).exp();
        let loss = h.sum();
        mark_step().unwrap();
        loss.backward();
        let want = [6.0 * 9f32.exp(), -2.0 * 1f32.exp()];
        let got = w.grad().unwrap().to_vec::<f32>().unwrap();
        for (g, e) in got.iter().zip(want) {
            assert!((g - e).abs() <= 1e-4 * e.abs(), "{got:?} vs {want:?}");
        }
    }
}

backend_test! {
    fn a_training_loop_keeps_no_graph_past_its_backward() {
        // Backward, update, then the sync: the synced loss holds its value
        // only, not the step's graph (as PyTorch frees it in backward).
        let w = Tensor::from_vec(vec![0.5f32; 4], &[4]).unwrap().requires_grad(true);
        for _ in 0..3 {
            let loss = (&w * &w).sum();
            loss.backward();
            let g = w.grad().unwrap();
            no_grad(|| w.assign(&(&w - &(&g * 0.1))));
            drop(g);
            w.zero_grad();
            mark_step().unwrap();
            loss.item::<f32>().unwrap();
            assert!(!lazyxla::debug::keeps_grad_history(&loss), "the loss kept its graph");
        }
        // Without a backward first, the read keeps the graph for one.
        let loss = (&w * &w).sum();
        loss.item::<f32>().unwrap();
        assert!(lazyxla::debug::keeps_grad_history(&loss));
        loss.backward();
        assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap().len(), 4);
    }
}

backend_test! {
    fn model_ops() {
        check("log1p", &POS, &[2, 3], |x| x.log1p());
        check("expm1", &X, &[2, 3], |x| x.expm1());
        check("ceil_round", &X, &[2, 3], |x| x * &x.ceil() + x.round());
        check("silu", &X, &[2, 3], |x| x.silu());
        check("leaky_relu", &X, &[2, 3], |x| x.leaky_relu(0.2));
        check("elu", &X, &[2, 3], |x| x.elu(1.3));
        check("softplus", &[0.3, -1.2, 21.0, 0.7, -30.0, 1.6], &[2, 3], |x| x.softplus());
        check("clamp_min_max", &X, &[2, 3], |x| x.clamp_min(-0.5).clamp_max(1.0));
        let lo = || Tensor::from_vec(vec![0.0f64, -2.0, 1.0], &[3]).unwrap();
        check("clamp_tensor", &X, &[2, 3], |x| x.clamp_tensor(&lo(), &(lo() + 1.5)));
        check("clamp_tensor_bound", &[0.5, -1.0, 0.0], &[3], |lo| {
            Tensor::from_vec(X.to_vec(), &[2, 3]).unwrap().clamp_tensor(lo, &Tensor::scalar(1.0f64))
        });
        check("logsumexp", &X, &[2, 3], |x| x.logsumexp(1, false));
        check("var", &X, &[2, 3], |x| x.var(0, true));
        check("std", &X, &[2, 3], |x| x.std(-1, false));
        check("prod", &X, &[2, 3], |x| x.prod());
        check("prod_one_zero", &[0.3, 0.0, 2.1, 0.7, -0.4, 1.6], &[6], |x| x.prod());
        check("prod_two_zeros", &[0.3, 0.0, 2.1, 0.0, -0.4, 1.6], &[6], |x| x.prod());
        let m = || Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
        check("masked_fill", &X, &[2, 3], |x| x.masked_fill(&m(), 2.0).exp());
        check("tril_triu", &X, &[2, 3], |x| x.tril(0) + x.triu(1).exp());
        check("pad", &X, &[2, 3], |x| x.pad(&[(1, 0), (2, 1)], 0.5).exp());
        check("repeat", &X, &[2, 3], |x| x.repeat(&[2, 1, 2]).sin());
        check("split_chunk", &X, &[2, 3], |x| &x.split(2, 1)[1].exp() + &x.chunk(2, 0)[0].sum());
        check("flip", &X, &[2, 3], |x| x.flip(&[0, 1]).exp());
        check("roll", &X, &[2, 3], |x| x.roll(-4, 1).exp());
        check("upsample_nearest2d", &X, &[1, 1, 2, 3], |x| x.upsample_nearest2d((3, 5)).exp());
        check("upsample_bilinear2d", &X, &[1, 1, 2, 3], |x| x.upsample_bilinear2d((3, 4), false).exp());
        check("upsample_bilinear2d aligned", &X, &[1, 2, 1, 3], |x| x.upsample_bilinear2d((2, 5), true).exp());
        // Through a dynamic zone: a `[<=6]` selection.
        let sel = |x: &Tensor| x.masked_select(&x.gt_scalar(-1.0));
        check("prod of masked_select", &X, &[6], |x| sel(x).prod());
        check("logsumexp of masked_select", &X, &[6], |x| sel(x).logsumexp(0, false));
        check("var of masked_select", &X, &[6], |x| sel(x).var(0, false));
        check("flip of masked_select", &X, &[6], |x| sel(x).flip(&[0]).exp());
        check("roll of masked_select", &X, &[6], |x| sel(x).roll(2, 0).exp());
        check("pad of masked_select", &X, &[6], |x| sel(x).pad(&[(1, 2)], 0.0).exp());
    }
}

backend_test! {
    fn device_loops() {
        // The carry of a static-count loop, with the counter in the body.
        check("fori_loop carry", &X, &[2, 3], |x| {
            let out = fori_loop(3, std::slice::from_ref(x), |i, c| {
                vec![(&c[0] * 0.8).sin() + &c[0] * &(i.to_dtype(DType::F64) * 0.1)]
            });
            out[0].clone()
        });
        // A body that uses a captured parameter: the gradient with
        // respect to the parameter sums over the iterations.
        check("fori_loop captured parameter", &X, &[2, 3], |w| {
            let h0 = Tensor::from_vec(vec![0.1f64, -0.2, 0.3, 0.4, -0.5, 0.6], &[2, 3]).unwrap();
            let out = fori_loop(4, &[h0], |_, c| vec![(&c[0] * w).tanh() + w * 0.5]);
            out[0].clone()
        });
        // A recurrent cell: two carries (one feeds the other), a matmul
        // with the parameter and a row of a captured sequence per step.
        check("fori_loop recurrent cell", &X[..4], &[2, 2], |w| {
            let xs = Tensor::from_vec(vec![0.5f64, -1.0, 0.25, 2.0, -0.5, 1.0], &[3, 2]).unwrap();
            let h0 = Tensor::from_vec(vec![0.3f64, -0.1], &[1, 2]).unwrap();
            let out = fori_loop(3, &[h0, Tensor::zeros(&[1, 2], DType::F64)], |t, c| {
                let x = xs.index_select(0, &t.reshape(&[1]));
                let h = (&c[0].matmul(w) + &x).tanh();
                vec![h.clone(), &c[1] + &(&h * &h)]
            });
            &out[0] + &out[1]
        });
        // Nested loops: the inner body uses the outer carry's value.
        check("nested fori_loop", &POS, &[2, 3], |x| {
            let out = fori_loop(2, std::slice::from_ref(x), |_, c| {
                let inner = fori_loop(3, std::slice::from_ref(&c[0]), |_, d| {
                    vec![(&d[0] * &c[0]).sqrt() + 0.1]
                });
                vec![inner[0].clone()]
            });
            out[0].clone()
        });
        // An inner loop whose operands need no gradient when it is
        // recorded (the outer carry starts constant) but do when the outer
        // body is differentiated.
        check("nested fori_loop, constant inner operands", &X, &[2, 3], |w| {
            let h0 = Tensor::from_vec(vec![0.1f64, -0.2, 0.3, 0.4, -0.5, 0.6], &[2, 3]).unwrap();
            let out = fori_loop(2, &[h0], |_, c| {
                let inner = fori_loop(2, std::slice::from_ref(&c[0]), |_, d| {
                    vec![(&d[0] * 1.5).sin() + 0.5]
                });
                vec![&inner[0] * w]
            });
            out[0].clone()
        });
        // Bool and integer carries next to the float one (saved too).
        check("fori_loop with bool and int carries", &X, &[2, 3], |x| {
            let mask = Tensor::from_vec(vec![true, false, true, false, false, true], &[2, 3]).unwrap();
            let out = fori_loop(3, &[x.clone(), mask, Tensor::scalar(1i64)], |_, c| {
                let k = c[2].to_dtype(DType::F64);
                let x = c[1].where_cond(&(&c[0] * &k), &c[0].sin());
                vec![x, c[1].logical_not(), &c[2] + 1]
            });
            out[0].clone()
        });
        // After a dynamic zone: the loop carries a reduction of a
        // `[<=6]` selection.
        check("fori_loop after masked_select", &X, &[6], |x| {
            let s = x.masked_select(&x.gt_scalar(-1.0)).sum();
            let out = fori_loop(3, &[s], |_, c| vec![c[0].sin() * 2.0]);
            out[0].clone()
        });
    }
}
