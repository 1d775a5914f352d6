//! Device loops (`fori_loop`, `while_loop`) on both backends.

mod common;

use lazyxla::{fori_loop, mark_step, while_loop, DType, Tensor};

backend_test! {
    fn fori_sum_of_a_static_count() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let out = fori_loop(4, &[x.zeros_like()], |i, c| {
            vec![&c[0] + &(&x * &i.to_dtype(DType::F32))]
        });
        println!("{}", lazyxla::debug::ir_text(&[&out[0]]));
        println!("{}", lazyxla::debug::stablehlo_text(&[&out[0]]).unwrap());
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![6.0, 12.0, 18.0]);
    }
}

backend_test! {
    fn collatz_steps() {
        let two = Tensor::scalar(2.0f64);
        let out = while_loop(
            &[Tensor::scalar(27.0f64), Tensor::scalar(0i64)],
            |c| c[0].gt_scalar(1.0),
            |c| {
                let even = c[0].remainder(&two).eq_scalar(0.0);
                vec![even.where_cond(&(&c[0] * 0.5), &(&c[0] * 3.0 + 1.0)), &c[1] + 1]
            },
        );
        println!("{}", lazyxla::debug::ir_text(&[&out[1]]));
        assert_eq!(out[1].item::<i64>().unwrap(), 111);
        assert_eq!(out[0].item::<f64>().unwrap(), 1.0);
    }
}

backend_test! {
    fn growing_carry() {
        let empty = Tensor::zeros(&[0], DType::F32).mark_dynamic(0, 8);
        let out = fori_loop(5, &[empty], |i, c| {
            let x = (i.to_dtype(DType::F32) * 10.0).reshape(&[1]);
            vec![Tensor::cat(&[&c[0], &x], 0).with_bound(0, 8)]
        });
        println!("{}", lazyxla::debug::ir_text(&[&out[0]]));
        println!("{}", lazyxla::debug::stablehlo_text(&[&out[0]]).unwrap());
        assert_eq!(out[0].shape_string(), "[<=8]");
        mark_step().unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.0, 10.0, 20.0, 30.0, 40.0]);
        assert_eq!(out[0].size(0).materialize().unwrap(), 5);
    }
}

backend_test! {
    fn gradient_smoke() {
        let x = Tensor::from_vec(vec![0.5f64, -1.0, 2.0], &[3]).unwrap().requires_grad(true);
        let w = Tensor::from_vec(vec![0.3f64, 0.2, -0.1], &[3]).unwrap().requires_grad(true);
        let out = fori_loop(3, std::slice::from_ref(&x), |_, c| vec![&(&c[0] * &w) + &c[0].sin()]);
        let loss = out[0].sum();
        loss.backward();
        mark_step().unwrap();
        println!("x grad {:?}", x.grad().unwrap().to_vec::<f64>().unwrap());
        println!("w grad {:?}", w.grad().unwrap().to_vec::<f64>().unwrap());
        // By hand: c' = c*w + sin c; dc'/dc = w + cos c.
        let (xs, ws) = ([0.5f64, -1.0, 2.0], [0.3f64, 0.2, -0.1]);
        for i in 0..3 {
            let (mut c, mut dc, mut dw) = (xs[i], 1.0, 0.0);
            for _ in 0..3 {
                let next = c * ws[i] + c.sin();
                dw = dw * (ws[i] + c.cos()) + c;
                dc *= ws[i] + c.cos();
                c = next;
            }
            let gx = x.grad().unwrap().to_vec::<f64>().unwrap()[i];
            let gw = w.grad().unwrap().to_vec::<f64>().unwrap()[i];
            assert!((gx - dc).abs() < 1e-9, "{gx} vs {dc}");
            assert!((gw - dw).abs() < 1e-9, "{gw} vs {dw}");
        }
    }
}
