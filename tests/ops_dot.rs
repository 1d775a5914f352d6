//! `matmul` of a batch and a plain matrix (either side) as one dot without
//! broadcasting the matrix: values and gradients against host loops, with
//! a dynamic sequence dim (`mark_dynamic`, `masked_select`), a dynamic
//! contracted dim, and the recorded program checked for the absence of the
//! matrix's broadcast and of a batched weight-gradient product.

mod common;

use common::assert_close;
use lazyxla::nn::{Linear, Module};
use lazyxla::{mark_step, Tensor};

/// Deterministic values in [-1.5, 1.5].
fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + seed * 5) % 13) as f32 * 0.25 - 1.5)
        .collect()
}

/// `y = x . w` for x `[b, t, k]`, w `[k, n]`, and the gradients of
/// `0.5 * sum(y^2)`: `dx = y . w^T`, `dw = sum over (b, t) of x^T y`.
fn host_right(
    x: &[f32],
    w: &[f32],
    (b, t, k, n): (usize, usize, usize, usize),
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut y = vec![0.0; b * t * n];
    for r in 0..b * t {
        for j in 0..n {
            y[r * n + j] = (0..k).map(|p| x[r * k + p] * w[p * n + j]).sum();
        }
    }
    let mut dx = vec![0.0; b * t * k];
    for r in 0..b * t {
        for p in 0..k {
            dx[r * k + p] = (0..n).map(|j| y[r * n + j] * w[p * n + j]).sum();
        }
    }
    let mut dw = vec![0.0; k * n];
    for p in 0..k {
        for j in 0..n {
            dw[p * n + j] = (0..b * t).map(|r| x[r * k + p] * y[r * n + j]).sum();
        }
    }
    (y, dx, dw)
}

/// Runs `0.5 * sum(y^2)` backward, syncs, and returns the gradients of
/// `leaves`.
fn grads_of_half_square(y: &Tensor, leaves: &[&Tensor]) -> Vec<Vec<f32>> {
    (y.square().sum() * 0.5).backward();
    mark_step().unwrap();
    leaves
        .iter()
        .map(|l| l.grad().expect("a gradient").to_vec::<f32>().unwrap())
        .collect()
}

backend_test! {
    fn batch_times_matrix_with_dynamic_sequence() {
        let (b, k, n) = (2, 3, 4);
        let wv = data(k * n, 1);
        let w = Tensor::from_vec(wv.clone(), &[k, n]).unwrap().requires_grad(true);
        // Several lengths under one bound: one program.
        for (step, t) in [3usize, 1, 5].into_iter().enumerate() {
            let xv = data(b * t * k, 2 + step);
            let x = Tensor::from_vec(xv.clone(), &[b, t, k]).unwrap().mark_dynamic(1, 6).requires_grad(true);
            let y = x.matmul(&w);
            assert_eq!(y.shape_string(), "[2, <=6, 4]");
            let g = grads_of_half_square(&y, &[&x, &w]);
            let (hy, hdx, hdw) = host_right(&xv, &wv, (b, t, k, n));
            assert_eq!(y.concrete_shape().unwrap(), vec![b, t, n]);
            assert_close(&y.to_vec::<f32>().unwrap(), &hy, 1e-5);
            assert_close(&g[0], &hdx, 1e-5);
            assert_close(&g[1], &hdw, 1e-5);
            w.zero_grad();
        }
        // A vector on the right is a [k, 1] matrix: the same path.
        let x = Tensor::from_vec(data(b * 2 * k, 9), &[b, 2, k]).unwrap().mark_dynamic(1, 6);
        let v = Tensor::from_vec(wv[..k].to_vec(), &[k]).unwrap();
        let (hy, _, _) = host_right(&data(b * 2 * k, 9), &wv[..k], (b, 2, k, 1));
        let y = x.matmul(&v);
        assert_eq!(y.shape_string(), "[2, <=6]");
        assert_close(&y.to_vec::<f32>().unwrap(), &hy, 1e-5);
    }
}

backend_test! {
    fn batch_times_matrix_with_sequence_from_masked_select() {
        let (b, t, k, n) = (2, 5, 3, 2);
        let xv = data(b * t * k, 3);
        let wv = data(k * n, 4);
        let x = Tensor::from_vec(xv.clone(), &[b, t, k]).unwrap().requires_grad(true);
        let w = Tensor::from_vec(wv.clone(), &[k, n]).unwrap().requires_grad(true);
        let keep = [true, false, true, true, false];
        let mask = Tensor::from_vec(keep.to_vec(), &[t]).unwrap();
        let rows = Tensor::arange(t as i64).masked_select(&mask); // [<=5]
        let xs = x.index_select(1, &rows);
        let y = xs.matmul(&w);
        assert_eq!(y.shape_string(), "[2, <=5, 2]");
        let g = grads_of_half_square(&y, &[&x, &w]);
        // The host sees the kept rows only.
        let kept: Vec<usize> = (0..t).filter(|&i| keep[i]).collect();
        let xk: Vec<f32> = (0..b)
            .flat_map(|bi| kept.iter().flat_map(move |&i| (0..k).map(move |p| (bi, i, p))))
            .map(|(bi, i, p)| xv[(bi * t + i) * k + p])
            .collect();
        let (hy, hdx, hdw) = host_right(&xk, &wv, (b, kept.len(), k, n));
        assert_close(&y.to_vec::<f32>().unwrap(), &hy, 1e-5);
        assert_close(&g[1], &hdw, 1e-5);
        // Rows not kept get no gradient.
        let mut want_dx = vec![0.0; b * t * k];
        for bi in 0..b {
            for (j, &i) in kept.iter().enumerate() {
                for p in 0..k {
                    want_dx[(bi * t + i) * k + p] = hdx[(bi * kept.len() + j) * k + p];
                }
            }
        }
        assert_close(&g[0], &want_dx, 1e-5);
    }
}

backend_test! {
    fn batch_times_matrix_with_dynamic_contracted_dim() {
        // The contracted k comes from a mask over 4 columns (3 kept), and
        // the sequence is dynamic too.
        let (b, t, k, n) = (2, 3, 4, 2);
        let xv = data(b * t * k, 5);
        let wv = data(k * n, 6);
        let x = Tensor::from_vec(xv.clone(), &[b, t, k]).unwrap().mark_dynamic(1, 4).requires_grad(true);
        let w = Tensor::from_vec(wv.clone(), &[k, n]).unwrap().requires_grad(true);
        let keep = [true, true, false, true];
        let cols = Tensor::arange(k as i64).masked_select(&Tensor::from_vec(keep.to_vec(), &[k]).unwrap());
        let (xs, ws) = (x.index_select(2, &cols), w.index_select(0, &cols));
        assert_eq!(xs.shape_string(), "[2, <=4, <=4]");
        let y = xs.matmul(&ws);
        assert_eq!(y.shape_string(), "[2, <=4, 2]");
        let g = grads_of_half_square(&y, &[&x, &w]);
        // Zeroing the dropped column of x and row of w is the same product.
        let xz: Vec<f32> = xv.iter().enumerate().map(|(i, &v)| if keep[i % k] { v } else { 0.0 }).collect();
        let wz: Vec<f32> = wv.iter().enumerate().map(|(i, &v)| if keep[i / n] { v } else { 0.0 }).collect();
        let (hy, hdx, hdw) = host_right(&xz, &wz, (b, t, k, n));
        assert_close(&y.to_vec::<f32>().unwrap(), &hy, 1e-5);
        let drop_x: Vec<f32> = hdx.iter().enumerate().map(|(i, &v)| if keep[i % k] { v } else { 0.0 }).collect();
        let drop_w: Vec<f32> = hdw.iter().enumerate().map(|(i, &v)| if keep[i / n] { v } else { 0.0 }).collect();
        assert_close(&g[0], &drop_x, 1e-5);
        assert_close(&g[1], &drop_w, 1e-5);
    }
}

backend_test! {
    fn matrix_times_batch_on_the_left() {
        // w [m, k] . x [b, k, t] -> [b, m, t], t dynamic.
        let (b, m, k) = (2, 3, 4);
        let wv = data(m * k, 7);
        let w = Tensor::from_vec(wv.clone(), &[m, k]).unwrap().requires_grad(true);
        for (step, t) in [2usize, 5].into_iter().enumerate() {
            let xv = data(b * k * t, 8 + step);
            let x = Tensor::from_vec(xv.clone(), &[b, k, t]).unwrap().mark_dynamic(2, 6).requires_grad(true);
            let y = w.matmul(&x);
            assert_eq!(y.shape_string(), "[2, 3, <=6]");
            let g = grads_of_half_square(&y, &[&w, &x]);
            let mut hy = vec![0.0f32; b * m * t];
            for bi in 0..b {
                for i in 0..m {
                    for j in 0..t {
                        hy[(bi * m + i) * t + j] = (0..k).map(|p| wv[i * k + p] * xv[(bi * k + p) * t + j]).sum();
                    }
                }
            }
            let mut hdw = vec![0.0f32; m * k];
            for i in 0..m {
                for p in 0..k {
                    hdw[i * k + p] = (0..b)
                        .flat_map(|bi| (0..t).map(move |j| (bi, j)))
                        .map(|(bi, j)| hy[(bi * m + i) * t + j] * xv[(bi * k + p) * t + j])
                        .sum();
                }
            }
            let mut hdx = vec![0.0f32; b * k * t];
            for bi in 0..b {
                for p in 0..k {
                    for j in 0..t {
                        hdx[(bi * k + p) * t + j] = (0..m).map(|i| wv[i * k + p] * hy[(bi * m + i) * t + j]).sum();
                    }
                }
            }
            assert_close(&y.to_vec::<f32>().unwrap(), &hy, 1e-5);
            assert_close(&g[0], &hdw, 1e-5);
            assert_close(&g[1], &hdx, 1e-5);
            w.zero_grad();
        }
    }
}

backend_test! {
    fn linear_on_a_batch_neither_broadcasts_nor_batches_its_weight() {
        // Linear(4 -> 5) on x [3, <=6, 4]: the weight [5, 4] must meet the
        // batch in one dot without batch dims, and its gradient must be one
        // dot contracting (batch, sequence), not a batched product reduced
        // afterwards.
        let lin = Linear::new(4, 5, 0);
        let x = Tensor::from_vec(data(3 * 2 * 4, 1), &[3, 2, 4]).unwrap().mark_dynamic(1, 6).requires_grad(true);
        let loss = lin.forward(&x).square().sum();
        loss.backward();
        let (dw, dx) = (lin.weight.grad().expect("a gradient"), x.grad().expect("a gradient"));
        let ir = lazyxla::debug::ir_text(&[&loss, &dw, &dx]);
        let lines: Vec<&str> = ir.lines().collect();
        let dots: Vec<&str> = lines.iter().copied().filter(|l| l.contains("= dot_general")).collect();
        // Forward [3, s, 4] . [4, 5]; input gradient [3, s, 5] . [4, 5]
        // over the 5s; weight gradient [3, s, 4] . [3, s, 5] over (3, s).
        assert_eq!(dots.len(), 3, "{ir}");
        assert!(dots.iter().all(|l| l.contains("batch=0")), "{ir}");
        assert!(dots.iter().any(|l| l.contains("dot_general[batch=0 contract=[2]x[0]]")), "{ir}");
        assert!(dots.iter().any(|l| l.contains("dot_general[batch=0 contract=[2]x[1]]")), "{ir}");
        assert!(
            dots.iter().any(|l| l.contains("f32[4, 5] = dot_general[batch=0 contract=[0, 1]x[0, 1]]")),
            "{ir}"
        );
        // Nothing of the weight's shape is broadcast to the batch.
        for l in &lines {
            if l.contains("= broadcast") {
                assert!(!l.contains(", 4, 5] =") && !l.contains(", 5, 4] ="), "{l}\n{ir}");
            }
        }
        // The lowered program has no batched dot either.
        let hlo = lazyxla::debug::stablehlo_text(&[&loss, &dw, &dx]).unwrap();
        assert_eq!(hlo.matches("dot_general").count(), 3, "{hlo}");
        assert!(!hlo.contains("batching_dimensions"), "{hlo}");
        mark_step().unwrap();
        assert_eq!(dw.concrete_shape().unwrap(), vec![5, 4]);
        assert_eq!(dx.concrete_shape().unwrap(), vec![3, 2, 4]);
    }
}

backend_test! {
    fn a_gradient_feeding_several_contractions_is_zero_padded_once() {
        // Linear(4 -> 5, bias) on x [3, <=6, 4] (3 of 6 real): the output
        // gradient g [3, s, 5] feeds the weight's gradient (contracting
        // batch and s), the bias's (a sum over them) and the input's; x
        // feeds the forward product and the weight's gradient. Each such
        // value's padding is zeroed once where it is defined, not once per
        // consumer, and the gradients are exact with padding in play.
        let lin = Linear::new(4, 5, 0);
        let xv = data(3 * 3 * 4, 2);
        let x = Tensor::from_vec(xv.clone(), &[3, 3, 4]).unwrap().mark_dynamic(1, 6).requires_grad(true);
        let loss = lin.forward(&x).square().sum();
        loss.backward();
        let (dw, db, dx) = (
            lin.weight.grad().expect("a gradient"),
            lin.bias.as_ref().unwrap().grad().expect("a gradient"),
            x.grad().expect("a gradient"),
        );
        // The lowering is the same whichever backend runs it.
        let hlo = lazyxla::debug::stablehlo_text(&[&loss, &dw, &db, &dx]).unwrap();
        // [3, 6, 5] selects: the loss's sum of y^2, and g's one fill
        // (two before: the weight's and the bias's gradients each).
        let selects = hlo
            .lines()
            .filter(|l| l.contains("stablehlo.select") && l.ends_with("-> tensor<3x6x5xf32>"))
            .count();
        assert_eq!(selects, 2, "{hlo}");
        // The zeroed g is written once for its three consumers: a barrier
        // keeps XLA from copying its producer into each one's fusion.
        let barriers = hlo
            .lines()
            .filter(|l| l.contains("stablehlo.optimization_barrier") && l.ends_with("-> tensor<3x6x5xf32>"))
            .count();
        assert_eq!(barriers, 1, "{hlo}");
        mark_step().unwrap();
        let w = lin.weight.to_vec::<f32>().unwrap();
        let bias = lin.bias.as_ref().unwrap().to_vec::<f32>().unwrap();
        // Host: y = x w^T + b, g = 2y.
        let rows = 9;
        let mut g = vec![0.0f32; rows * 5];
        for r in 0..rows {
            for j in 0..5 {
                let y: f32 = bias[j] + (0..4).map(|p| xv[r * 4 + p] * w[j * 4 + p]).sum::<f32>();
                g[r * 5 + j] = 2.0 * y;
            }
        }
        let hdw: Vec<f32> = (0..5 * 4)
            .map(|i| (0..rows).map(|r| g[r * 5 + i / 4] * xv[r * 4 + i % 4]).sum())
            .collect();
        let hdb: Vec<f32> = (0..5).map(|j| (0..rows).map(|r| g[r * 5 + j]).sum()).collect();
        let hdx: Vec<f32> = (0..rows * 4)
            .map(|i| (0..5).map(|j| g[(i / 4) * 5 + j] * w[j * 4 + i % 4]).sum())
            .collect();
        assert_close(&dw.to_vec::<f32>().unwrap(), &hdw, 1e-5);
        assert_close(&db.to_vec::<f32>().unwrap(), &hdb, 1e-5);
        assert_close(&dx.to_vec::<f32>().unwrap(), &hdx, 1e-5);
    }
}

backend_test! {
    fn a_weight_gradient_is_one_dot_in_the_weights_layout() {
        // Linear(4 -> 5) on x [<=6, 4] (3 of 6 real): the weight's gradient
        // [5, 4] is g^T x, one dot whose result has the weight's layout,
        // not x^T g [4, 5] transposed (XLA's CPU backend runs a transposed
        // dot as a generic loop instead of its matrix kernel).
        let lin = Linear::new(4, 5, 0);
        let xv = data(3 * 4, 3);
        let x = Tensor::from_vec(xv.clone(), &[3, 4]).unwrap().mark_dynamic(0, 6);
        let loss = lin.forward(&x).square().sum();
        loss.backward();
        let dw = lin.weight.grad().expect("a gradient");
        let hlo = lazyxla::debug::stablehlo_text(&[&loss, &dw]).unwrap();
        // (The forward product's transposed weight is folded into its dot
        // by XLA; a transposed product is not.)
        let transposes = hlo.lines().filter(|l| l.contains("stablehlo.transpose"));
        assert!(transposes.clone().all(|l| !l.ends_with("-> tensor<5x4xf32>")), "{hlo}");
        assert_eq!(transposes.count(), 1, "{hlo}");
        let dots: Vec<&str> = hlo.lines().filter(|l| l.contains("dot_general")).collect();
        assert_eq!(dots.len(), 2, "{hlo}");
        assert!(dots.iter().any(|l| l.ends_with("-> tensor<5x4xf32>")), "{hlo}");
        mark_step().unwrap();
        let w = lin.weight.to_vec::<f32>().unwrap();
        let bias = lin.bias.as_ref().unwrap().to_vec::<f32>().unwrap();
        // Host: y = x w^T + b, g = 2y, dw = g^T x.
        let mut g = [0.0f32; 3 * 5];
        for r in 0..3 {
            for j in 0..5 {
                let y: f32 = bias[j] + (0..4).map(|p| xv[r * 4 + p] * w[j * 4 + p]).sum::<f32>();
                g[r * 5 + j] = 2.0 * y;
            }
        }
        let hdw: Vec<f32> = (0..5 * 4)
            .map(|i| (0..3).map(|r| g[r * 5 + i / 4] * xv[r * 4 + i % 4]).sum())
            .collect();
        assert_eq!(dw.concrete_shape().unwrap(), vec![5, 4]);
        assert_close(&dw.to_vec::<f32>().unwrap(), &hdw, 1e-5);
    }
}
