//! `scan` (per-step rows in, stacked rows out, as `jax.lax.scan`),
//! differentiable, over static and dynamic lengths; gradients through a
//! `fori_loop` whose trip count is a size; `slice_sym`. Checked on both
//! backends against the same recurrence unrolled op by op.

mod common;

use common::{assert_close, panic_message};
use lazyxla::metrics::counter;
use lazyxla::{fori_loop, mark_step, scan, DType, SymInt, Tensor};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn seq(n: usize, k: usize, salt: usize) -> Vec<f32> {
    (0..n * k)
        .map(|j| ((j * 7 + salt * 3) % 13) as f32 / 13.0 - 0.5)
        .collect()
}

/// `h_t = tanh(h_{t-1} W + x_t)`, `y_t = 2 h_t`, unrolled on the host side
/// of the graph (one op per step): the oracle for the scans below.
fn unrolled(w: &Tensor, h0: &Tensor, xs: &Tensor, n: usize) -> (Tensor, Vec<Tensor>) {
    let mut h = h0.clone();
    let mut ys = Vec::new();
    for t in 0..n {
        h = (&h.unsqueeze(0).matmul(w).squeeze(0) + &xs.narrow(0, t, 1).squeeze(0)).tanh();
        ys.push(&h * 2.0);
    }
    (h, ys)
}

backend_test! {
    fn scan_threads_carries_and_stacks_rows() {
        let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
        // Two carries (a running sum and a step count), two outputs.
        let (c, ys) = scan(3, &[Tensor::zeros(&[2], DType::F32), Tensor::scalar(0i64)], &[xs], |i, c, x| {
            let s = &c[0] + &x[0];
            (vec![s.clone(), &c[1] + 1], vec![s, i.clone()])
        });
        let text = lazyxla::debug::stablehlo_text(&[&c[0], &ys[0], &ys[1]]).unwrap();
        assert_eq!(text.matches("stablehlo.while").count(), 1, "one device loop: {text}");
        mark_step().unwrap();
        assert_eq!(f32s(&c[0]), vec![9.0, 12.0]);
        assert_eq!(c[1].item::<i64>().unwrap(), 3);
        assert_eq!(ys[0].shape_string(), "[3, 2]");
        assert_eq!(f32s(&ys[0]), vec![1.0, 2.0, 4.0, 6.0, 9.0, 12.0]);
        assert_eq!(ys[1].to_vec::<i64>().unwrap(), vec![0, 1, 2]);
        // No scanned values, and a count of 0: the carries come back and
        // the stacks are empty.
        let (c, ys) = scan(0, &[Tensor::scalar(5.0f32)], &[], |_, c, _| {
            (vec![&c[0] + 1.0], vec![c[0].unsqueeze(0)])
        });
        assert_eq!(c[0].item::<f32>().unwrap(), 5.0);
        assert_eq!(ys[0].shape_string(), "[0, 1]");
        assert!(f32s(&ys[0]).is_empty());
    }
}

backend_test! {
    fn scan_gradients_match_the_unrolled_recurrence() {
        let (n, k) = (5usize, 3usize);
        let make = || {
            let w = Tensor::from_vec(seq(k, k, 1), &[k, k]).unwrap().requires_grad(true);
            let h0 = Tensor::from_vec(seq(1, k, 2), &[k]).unwrap().requires_grad(true);
            let xs = Tensor::from_vec(seq(n, k, 3), &[n, k]).unwrap().requires_grad(true);
            (w, h0, xs)
        };
        let (w, h0, xs) = make();
        let (h, ys) = scan(n, std::slice::from_ref(&h0), std::slice::from_ref(&xs), |_, c, x| {
            let h = (&c[0].unsqueeze(0).matmul(&w).squeeze(0) + &x[0]).tanh();
            (vec![h.clone()], vec![&h * 2.0])
        });
        let loss = &(&ys[0] * &ys[0]).sum() + &h[0].sum();
        loss.backward();
        let (w2, h02, xs2) = make();
        let (h2, ys2) = unrolled(&w2, &h02, &xs2, n);
        let refs: Vec<&Tensor> = ys2.iter().collect();
        let ys2 = Tensor::stack(&refs, 0);
        let loss2 = &(&ys2 * &ys2).sum() + &h2.sum();
        loss2.backward();
        mark_step().unwrap();
        assert_close(&f32s(&ys[0]), &f32s(&ys2), 1e-5);
        assert_close(&f32s(&h[0]), &f32s(&h2), 1e-5);
        for (a, b, name) in [(&w, &w2, "w"), (&h0, &h02, "h0"), (&xs, &xs2, "xs")] {
            let (ga, gb) = (f32s(&a.grad().unwrap()), f32s(&b.grad().unwrap()));
            assert!(gb.iter().any(|g| g.abs() > 1e-3), "{name}: a gradient that is not zero");
            assert_close(&ga, &gb, 1e-4);
        }
    }
}

backend_test! {
    fn a_scan_over_a_dynamic_length_runs_the_real_steps_and_compiles_once() {
        let k = 2usize;
        let w = Tensor::from_vec(seq(k, k, 4), &[k, k]).unwrap().requires_grad(true);
        for (round, n) in [3usize, 6, 1].into_iter().enumerate() {
            let before = counter("UncachedCompile");
            let data = seq(n, k, 5);
            let xs = Tensor::from_vec(data.clone(), &[n, k]).unwrap().mark_dynamic(0, 8);
            let len = xs.size(0);
            assert!(len.is_dynamic());
            let (h, ys) = scan(&len, &[Tensor::zeros(&[k], DType::F32)], std::slice::from_ref(&xs), |_, c, x| {
                let h = (&c[0].unsqueeze(0).matmul(&w).squeeze(0) + &x[0]).tanh();
                (vec![h.clone()], vec![h])
            });
            assert_eq!(ys[0].shape_string(), "[<=8, 2]");
            let loss = (&ys[0] * &ys[0]).sum();
            w.zero_grad();
            loss.backward();
            let gw = w.grad().unwrap();
            mark_step().unwrap();
            // One program for the forward and gradient of every length.
            let want = if round == 0 { 1 } else { 0 };
            assert_eq!(counter("UncachedCompile") - before, want, "round {round}");
            // The oracle: the same steps unrolled on static sizes.
            let w2 = Tensor::from_vec(f32s(&w), &[k, k]).unwrap().requires_grad(true);
            let xs2 = Tensor::from_vec(data, &[n, k]).unwrap();
            let (h2, ys2) = unrolled(&w2, &Tensor::zeros(&[k], DType::F32), &xs2, n);
            let refs: Vec<&Tensor> = ys2.iter().collect();
            let ys2 = &Tensor::stack(&refs, 0) * 0.5;
            (&ys2 * &ys2).sum().backward();
            assert_eq!(ys[0].size(0).materialize().unwrap(), n as i64, "the real rows only");
            assert_close(&f32s(&ys[0]), &f32s(&ys2), 1e-5);
            assert_close(&f32s(&h[0]), &f32s(&(&h2 * 1.0)), 1e-5);
            assert_close(&f32s(&gw), &f32s(&w2.grad().unwrap()), 1e-4);
        }
    }
}

backend_test! {
    fn gradients_through_a_fori_loop_whose_count_is_a_size() {
        // A carry multiplied by w once per real element: d/dw w^n = n w^(n-1).
        let w = Tensor::scalar(1.5f32).requires_grad(true);
        for n in [0usize, 1, 4] {
            let x = Tensor::zeros(&[n], DType::F32).mark_dynamic(0, 6);
            let out = fori_loop(x.size(0), &[Tensor::scalar(1.0f32)], |_, c| vec![&c[0] * &w]);
            w.zero_grad();
            out[0].backward();
            mark_step().unwrap();
            let want = if n == 0 { 0.0 } else { n as f32 * 1.5f32.powi(n as i32 - 1) };
            assert_close(&[w.grad().unwrap().item::<f32>().unwrap()], &[want], 1e-5);
            assert_close(&[out[0].item::<f32>().unwrap()], &[1.5f32.powi(n as i32)], 1e-5);
        }
    }
}

backend_test! {
    fn scan_misuse_is_a_clear_panic() {
        let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let msg = panic_message(|| {
            scan(Tensor::scalar(3i64), &[], std::slice::from_ref(&xs), |_, _, x| (vec![], vec![x[0].clone()]));
        });
        assert!(msg.contains("scan") && msg.contains("the count is a tensor"), "{msg}");
        let msg = panic_message(|| {
            scan(2, &[], &[Tensor::scalar(1.0f32)], |_, _, x| (vec![], vec![x[0].clone()]));
        });
        assert!(msg.contains("scanned value 0 is f32[]"), "{msg}");
        let msg = panic_message(|| {
            scan(-1i64, &[], std::slice::from_ref(&xs), |_, _, x| (vec![], vec![x[0].clone()]));
        });
        assert!(msg.contains("must not be negative"), "{msg}");
        let dynamic = xs.masked_select(&xs.gt_scalar(1.5));
        let msg = panic_message(|| {
            scan(3, &[], std::slice::from_ref(&xs), |_, _, _| (vec![], vec![dynamic.clone()]));
        });
        assert!(msg.contains("stacked output needs static sizes"), "{msg}");
        // A static count that does not match the rows.
        let msg = panic_message(|| {
            scan(2, &[], std::slice::from_ref(&xs), |_, _, x| (vec![], vec![x[0].clone()]));
        });
        assert!(msg.contains("scan") && msg.contains("sizes 3 and 2 do not match"), "{msg}");
        // The runtime stays usable.
        let (_, ys) = scan(3, &[], std::slice::from_ref(&xs), |_, _, x| (vec![], vec![&x[0] * 2.0]));
        assert_eq!(f32s(&ys[0]), vec![2.0, 4.0, 6.0]);
    }
}

backend_test! {
    fn slice_sym_takes_a_prefix_of_a_size_and_its_gradient_flows() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap().requires_grad(true);
        for (n, want) in [(2usize, vec![1.0f32, 2.0, 3.0, 4.0]), (0, vec![]), (3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])] {
            // n as a size known only when the program runs.
            let lengths = Tensor::zeros(&[n], DType::F32).mark_dynamic(0, 4);
            let k: SymInt = lengths.size(0);
            let head = x.slice_sym(0, 0, &k);
            assert_eq!(head.shape_string(), "[<=3, 2]");
            x.zero_grad();
            (&head * &head).sum().backward();
            mark_step().unwrap();
            assert_eq!(f32s(&head), want);
            let g: Vec<f32> = f32s(&x.grad().unwrap());
            let expect: Vec<f32> = (0..6).map(|j| if j < 2 * n { 2.0 * (j + 1) as f32 } else { 0.0 }).collect();
            assert_eq!(g, expect);
        }
        // x[a:b] with both bounds sizes, clamped as Python clamps.
        let a = Tensor::zeros(&[1], DType::F32).mark_dynamic(0, 4).size(0);
        let b = Tensor::zeros(&[5], DType::F32).mark_dynamic(0, 8).size(0);
        assert_eq!(f32s(&x.detach().slice_sym(0, &a, &b)), vec![3.0, 4.0, 5.0, 6.0]);
        assert_eq!(f32s(&x.detach().slice_sym(1, &b, &a)), Vec::<f32>::new());
        assert_eq!(f32s(&x.detach().slice_sym(-1, -1, 2)), vec![2.0, 4.0, 6.0]);
    }
}
