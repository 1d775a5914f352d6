//! Training loops: forward, backward and update compile into one program
//! per step structure, and the models learn.

mod common;

#[allow(dead_code)]
#[path = "../examples/train_detector.rs"]
mod detector;
#[allow(dead_code)]
#[path = "../examples/train_mlp.rs"]
mod mlp;
#[allow(dead_code)]
#[path = "../examples/variable_batch.rs"]
mod varbatch;

use common::{assert_close, assert_close64};
use lazyxla::nn::{self, Dropout, Embedding, LayerNorm, Linear, Module};
use lazyxla::optim::{Adam, AdamW, Optimizer, Sgd};
use lazyxla::{mark_step, metrics, DType, Tensor};

fn mean(v: &[f32]) -> f32 {
    v.iter().sum::<f32>() / v.len() as f32
}

backend_test! {
    fn detector_learns_and_compiles_the_step_once() {
        let model = detector::Detector::new(3);
        let mut opt = Adam::new(model.parameters(), 0.02);
        let mut losses = Vec::new();
        let mut positives = std::collections::BTreeSet::new();
        for step in 0..30 {
            let img = detector::image(step % 10);
            let (loss, pos) = detector::train_step(&model, &mut opt, &img);
            mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
            positives.insert(pos.size(0).materialize().unwrap());
        }
        assert!(positives.len() > 3, "the number of positives should vary: {positives:?}");
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        assert!(mean(&losses[25..]) < 0.6 * mean(&losses[..5]), "loss did not fall: {losses:?}");
    }
}

backend_test! {
    fn variable_batches_through_mark_dynamic_compile_once() {
        let net = varbatch::model();
        let mut opt = Sgd::new(net.parameters(), 0.1).momentum(0.9);
        let mut losses = Vec::new();
        for step in 0..30 {
            let (x, y) = varbatch::batch(varbatch::length(step), step);
            let loss = varbatch::train_step(&net, &mut opt, &x, &y);
            mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        assert!(mean(&losses[25..]) < 0.5 * mean(&losses[..5]), "loss did not fall: {losses:?}");
    }
}

backend_test! {
    fn mlp_classifier_learns() {
        let net = mlp::model();
        let mut opt = Adam::new(net.parameters(), 0.01);
        let mut losses = Vec::new();
        for step in 0..40 {
            let (x, y) = mlp::batch(step);
            let loss = mlp::train_step(&net, &mut opt, &x, &y);
            mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        assert!(losses[39] < 0.5 * losses[0], "{losses:?}");
        let (x, y) = mlp::batch(999);
        assert!(mlp::accuracy(&net, &x, &y) > 0.9);
    }
}

backend_test! {
    fn pytorch_xla_dynamic_model_case_compiles_once() {
        // A 2 -> 10 -> 1 MLP with every weight and bias 0.01, fed
        // nonzero(x) of a 5x2 0/1 input whose number of ones varies, with
        // a BCE-with-logits loss, for 10 iterations.
        let fc1 = Linear::from_tensors(Tensor::full(&[10, 2], 0.01, DType::F32), Some(Tensor::full(&[10], 0.01, DType::F32)));
        let fc2 = Linear::from_tensors(Tensor::full(&[1, 10], 0.01, DType::F32), Some(Tensor::full(&[1], 0.01, DType::F32)));
        let mut params = fc1.parameters();
        params.extend(fc2.parameters());
        let mut opt = Sgd::new(params, 0.01);
        mark_step().unwrap(); // materialise the constant-filled weights
        metrics::reset();
        for i in 0..10u64 {
            let ones: Vec<f32> = (0..10).map(|k| ((k * 7 + i * 3) % 5 < 2 + i % 3) as u8 as f32).collect();
            let x = Tensor::from_vec(ones, &[5, 2]).unwrap().nonzero().to_dtype(DType::F32);
            opt.zero_grad();
            let out = fc2.forward(&fc1.forward(&x).relu());
            let loss = nn::binary_cross_entropy_with_logits(&out, &out.ones_like());
            loss.backward();
            opt.step();
            mark_step().unwrap();
            assert!(loss.item::<f32>().unwrap().is_finite());
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
    }
}

backend_test! {
    fn sgd_momentum_and_weight_decay_follow_pytorch() {
        let w = Tensor::from_vec(vec![1.0f64, -2.0], &[2]).unwrap().requires_grad(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.1).momentum(0.9).weight_decay(0.5);
        let (mut p, mut v) = ([1.0f64, -2.0], [0.0f64; 2]);
        for _ in 0..3 {
            opt.zero_grad();
            (&w * &w).sum().backward(); // grad 2w
            opt.step();
            mark_step().unwrap();
            for k in 0..2 {
                let g = 2.0 * p[k] + 0.5 * p[k];
                v[k] = 0.9 * v[k] + g;
                p[k] -= 0.1 * v[k];
            }
        }
        assert_close64(&w.to_vec::<f64>().unwrap(), &p, 1e-12);
    }
}

backend_test! {
    fn adam_and_adamw_follow_pytorch() {
        for decoupled in [false, true] {
            let w = Tensor::from_vec(vec![1.0f64, -2.0, 0.5], &[3]).unwrap().requires_grad(true);
            let mut opt: Box<dyn Optimizer> = if decoupled {
                Box::new(AdamW::new(vec![w.clone()], 0.1).weight_decay(0.1))
            } else {
                Box::new(Adam::new(vec![w.clone()], 0.1).weight_decay(0.1))
            };
            let mut p = [1.0f64, -2.0, 0.5];
            let (mut m, mut v) = ([0.0f64; 3], [0.0f64; 3]);
            for t in 1..=4 {
                opt.zero_grad();
                (&w * &w * &w).sum().backward(); // grad 3w²
                opt.step();
                mark_step().unwrap();
                for k in 0..3 {
                    let mut g = 3.0 * p[k] * p[k];
                    if decoupled {
                        p[k] *= 1.0 - 0.1 * 0.1;
                    } else {
                        g += 0.1 * p[k];
                    }
                    m[k] = 0.9 * m[k] + 0.1 * g;
                    v[k] = 0.999 * v[k] + 0.001 * g * g;
                    let mh = m[k] / (1.0 - 0.9f64.powi(t));
                    let vh = v[k] / (1.0 - 0.999f64.powi(t));
                    p[k] -= 0.1 * mh / (vh.sqrt() + 1e-8);
                }
            }
            assert_close64(&w.to_vec::<f64>().unwrap(), &p, 1e-9);
        }
        // Every step of an optimizer loop is the same program.
        assert_eq!(metrics::counter("UncachedCompile"), 2, "{}", metrics::report());
    }
}

backend_test! {
    fn layers_match_pytorch_definitions() {
        let lin = Linear::new(4, 3, 7);
        let w = lin.weight.to_vec::<f32>().unwrap();
        assert!(w.iter().all(|v| v.abs() <= 0.5), "init bound is 1/sqrt(4)");
        assert!(w.iter().any(|v| v.abs() > 0.2), "init is not degenerate");
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 4]).unwrap();
        let y = lin.forward(&x).to_vec::<f32>().unwrap();
        let b = lin.bias.as_ref().unwrap().to_vec::<f32>().unwrap();
        let want: Vec<f32> = (0..3).map(|o| (0..4).map(|i| w[o * 4 + i] * (i + 1) as f32).sum::<f32>() + b[o]).collect();
        assert_close(&y, &want, 1e-5);

        let ln = LayerNorm::new(4);
        let out = ln.forward(&x).to_vec::<f32>().unwrap();
        let (mu, var) = (2.5f32, 1.25f32);
        let want: Vec<f32> = (1..=4).map(|v| (v as f32 - mu) / (var + 1e-5).sqrt()).collect();
        assert_close(&out, &want, 1e-5);

        let emb = Embedding::new(5, 2, 1);
        let table = emb.weight.to_vec::<f32>().unwrap();
        let idx = Tensor::from_vec(vec![4i64, 0, 4], &[3]).unwrap();
        let rows = emb.forward(&idx).to_vec::<f32>().unwrap();
        assert_eq!(rows, vec![table[8], table[9], table[0], table[1], table[8], table[9]]);
    }
}

backend_test! {
    fn dropout_is_seeded_scaled_and_in_graph() {
        let x = Tensor::ones(&[1000], DType::F32);
        let d = Dropout::new(0.25, 42);
        let a = d.forward(&x).to_vec::<f32>().unwrap();
        let kept = a.iter().filter(|&&v| v != 0.0).count();
        assert!((700..800).contains(&kept), "kept {kept} of 1000 at p=0.25");
        assert!(a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
        let b = d.forward(&x).to_vec::<f32>().unwrap();
        assert_ne!(a, b, "each call draws a new mask");
        // Reads without mark_step build no chain of seed updates: one program.
        let c = d.forward(&x).to_vec::<f32>().unwrap();
        assert_ne!(b, c);
        assert_eq!(lazyxla::metrics::counter("UncachedCompile"), 1);
        // Same seed, same masks: reproducible across runs and backends.
        let d2 = Dropout::new(0.25, 42);
        assert_eq!(d2.forward(&x).to_vec::<f32>().unwrap(), a);
        d2.train(false);
        assert_eq!(d2.forward(&x).to_vec::<f32>().unwrap(), vec![1.0; 1000]);
        // The draws of a seed are fixed numbers: this pins the generator.
        let first: Vec<usize> = a.iter().take(16).map(|&v| (v != 0.0) as usize).collect();
        insta::assert_debug_snapshot!("dropout_mask_seed_42", first);
    }
}

backend_test! {
    fn losses_match_hand_computed_values() {
        let p = Tensor::from_vec(vec![0.5f32, 2.0, -1.0], &[3]).unwrap();
        let t = Tensor::from_vec(vec![0.0f32, 0.5, -1.0], &[3]).unwrap();
        assert_close(&[nn::mse_loss(&p, &t).item::<f32>().unwrap()], &[(0.25 + 2.25) / 3.0], 1e-6);
        // |d| = 0.5 (quadratic: 0.125), 1.5 (linear: 1.0), 0.
        assert_close(&[nn::smooth_l1_loss(&p, &t).item::<f32>().unwrap()], &[(0.125 + 1.0) / 3.0], 1e-6);
        let logits = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]).unwrap();
        let cls = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
        let lse0 = (1f32.exp() + 2f32.exp() + 3f32.exp()).ln();
        let want = ((lse0 - 3.0) + 3f32.ln()) / 2.0;
        assert_close(&[nn::cross_entropy(&logits, &cls).item::<f32>().unwrap()], &[want], 1e-6);
        let z = Tensor::from_vec(vec![0.0f32, 2.0, -3.0], &[3]).unwrap();
        let y = Tensor::from_vec(vec![1.0f32, 0.0, 1.0], &[3]).unwrap();
        let bce = |x: f32, y: f32| -(y * (1.0 / (1.0 + (-x).exp())).ln() + (1.0 - y) * (1.0 - 1.0 / (1.0 + (-x).exp())).ln());
        let want = (bce(0.0, 1.0) + bce(2.0, 0.0) + bce(-3.0, 1.0)) / 3.0;
        assert_close(&[nn::binary_cross_entropy_with_logits(&z, &y).item::<f32>().unwrap()], &[want], 1e-6);
    }
}
