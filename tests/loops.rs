//! Device loops (`fori_loop`, `while_loop`): one `stablehlo.while` in the
//! step's program, checked on both backends (the reference interpreter
//! runs the loop on exact sizes and is the oracle).

mod common;

use common::{assert_close, panic_message};
use lazyxla::metrics::counter;
use lazyxla::nn::{Linear, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{capture, fori_loop, mark_step, no_grad, while_loop, DType, SymInt, Tensor};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

backend_test! {
    fn sums_and_products_over_a_static_count() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        // sum_{i<4} i * x and prod_{i<4} (x + i), one loop with two carries.
        let out = fori_loop(4, &[x.zeros_like(), x.ones_like()], |i, c| {
            let fi = i.to_dtype(DType::F32);
            vec![&c[0] + &(&x * &fi), &c[1] * &(&x + &fi)]
        });
        // The loop stays on the device: no unrolling in the program.
        let text = lazyxla::debug::stablehlo_text(&[&out[0], &out[1]]).unwrap();
        assert_eq!(text.matches("stablehlo.while").count(), 1);
        assert_eq!(text.matches("stablehlo.multiply").count(), 2, "{text}");
        mark_step().unwrap();
        assert_eq!(f32s(&out[0]), vec![6.0, 12.0, 18.0]);
        assert_eq!(f32s(&out[1]), vec![24.0, 120.0, 360.0]);
        // Integer carries, and a count of 0 (the initial values come back).
        let n = fori_loop(10usize, &[Tensor::scalar(0i64)], |i, c| vec![&c[0] + i]);
        assert_eq!(n[0].item::<i64>().unwrap(), 45);
        let none = fori_loop(0, std::slice::from_ref(&x), |_, c| vec![&c[0] * 2.0]);
        assert_eq!(f32s(&none[0]), vec![1.0, 2.0, 3.0]);
        let negative = fori_loop(-3i64, std::slice::from_ref(&x), |_, c| vec![&c[0] * 2.0]);
        assert_eq!(f32s(&negative[0]), vec![1.0, 2.0, 3.0]);
    }
}

backend_test! {
    fn a_while_loop_runs_as_many_times_as_the_data_says() {
        // Collatz: the number of steps to 1 depends on the start.
        let two = Tensor::scalar(2.0f64);
        let steps = |start: f64| {
            let out = while_loop(
                &[Tensor::scalar(start), Tensor::scalar(0i64)],
                |c| c[0].gt_scalar(1.0),
                |c| {
                    let even = c[0].remainder(&two).eq_scalar(0.0);
                    vec![even.where_cond(&(&c[0] * 0.5), &(&c[0] * 3.0 + 1.0)), &c[1] + 1]
                },
            );
            mark_step().unwrap();
            assert_eq!(out[0].item::<f64>().unwrap(), 1.0);
            out[1].item::<i64>().unwrap()
        };
        assert_eq!(steps(27.0), 111);
        assert_eq!(steps(6.0), 8);
        assert_eq!(steps(1.0), 0, "a false condition runs the body never");
        // One program for every start value: the start is data.
        assert_eq!(counter("UncachedCompile"), 1);
    }
}

backend_test! {
    fn a_carry_that_shrinks_until_a_condition_holds() {
        // Keep the elements above the mean until at most 2 remain: the
        // carry's size changes every iteration, within its bound.
        let x = Tensor::from_vec(vec![5.0f32, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 6.0], &[8]).unwrap();
        let v = x.masked_select(&x.gt_scalar(1.5)); // [<=8], 7 elements
        let out = while_loop(
            &[v, Tensor::scalar(0i64)],
            |c| c[0].ones_like().sum().gt_scalar(2.0),
            |c| {
                let mean = c[0].mean();
                vec![c[0].masked_select(&c[0].gt(&mean)), &c[1] + 1]
            },
        );
        assert_eq!(out[0].shape_string(), "[<=8]");
        mark_step().unwrap();
        // 7 values (mean 5.71) -> 9 7 8 6 (mean 7.5) -> 9 8.
        assert_eq!(f32s(&out[0]), vec![9.0, 8.0]);
        assert_eq!(out[0].size(0).materialize().unwrap(), 2);
        assert_eq!(out[1].item::<i64>().unwrap(), 2);
    }
}

backend_test! {
    fn a_carry_grows_every_iteration_within_its_bound() {
        // Append 10 * i for i in 0..5 to an empty list of bound 8.
        let empty = Tensor::zeros(&[0], DType::F32).mark_dynamic(0, 8);
        let out = fori_loop(5, &[empty], |i, c| {
            let x = (i.to_dtype(DType::F32) * 10.0).reshape(&[1]);
            vec![Tensor::cat(&[&c[0], &x], 0).with_bound(0, 8)]
        });
        assert_eq!(out[0].shape_string(), "[<=8]");
        let text = lazyxla::debug::ir_text(&[&out[0]]);
        assert!(text.contains("loop_result[0] b    # zone start"), "{text}");
        mark_step().unwrap();
        assert_eq!(f32s(&out[0]), vec![0.0, 10.0, 20.0, 30.0, 40.0]);
        assert_eq!(out[0].size(0).materialize().unwrap(), 5);
        // Later ops see the loop's size.
        let doubled = Tensor::cat(&[&out[0], &out[0]], 0);
        assert_eq!(doubled.shape_string(), "[<=16]");
        assert_eq!(doubled.sum().item::<f32>().unwrap(), 200.0);
    }
}

backend_test! {
    fn growing_past_the_bound_fails_the_step_and_changes_nothing() {
        let empty = Tensor::zeros(&[0], DType::F32).mark_dynamic(0, 3);
        let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        let before = w.clone();
        w.assign(&(&w + 1.0));
        let out = fori_loop(5, &[empty], |_, c| {
            vec![Tensor::cat(&[&c[0], &Tensor::ones(&[1], DType::F32)], 0).with_bound(0, 3)]
        });
        let sum = out[0].sum();
        let err = mark_step().unwrap_err().to_string();
        assert!(err.contains("with_bound") && err.contains("at most 3"), "{err}");
        assert_eq!(f32s(&before), vec![1.0], "the assigned tensor keeps its value");
        assert!(sum.item::<f32>().is_err());
        drop((out, sum));
        // The runtime goes on.
        assert_eq!(f32s(&(&w * 3.0)), vec![3.0]);
    }
}

backend_test! {
    fn nested_loops() {
        // sum_{i<3} sum_{j<4} (i * j + x): the inner body uses the outer
        // counter and a captured tensor.
        let x = Tensor::from_vec(vec![0.5f32, 1.0], &[2]).unwrap();
        let out = fori_loop(3, &[x.zeros_like()], |i, outer| {
            let fi = i.to_dtype(DType::F32);
            let inner = fori_loop(4, &[outer[0].clone()], |j, c| {
                vec![&c[0] + &(&x + &(&fi * &j.to_dtype(DType::F32)))]
            });
            vec![inner[0].clone()]
        });
        let text = lazyxla::debug::stablehlo_text(&[&out[0]]).unwrap();
        assert_eq!(text.matches("stablehlo.while").count(), 2);
        // 12 x + sum_i sum_j i j = 12 x + 3 * 6.
        assert_eq!(f32s(&out[0]), vec![24.0, 30.0]);
    }
}

backend_test! {
    fn a_loop_inside_a_dynamic_zone_keeps_the_zone_size() {
        let x = Tensor::from_vec(vec![3.0f32, 0.0, 1.0, 0.0, 2.0], &[5]).unwrap();
        let v = x.masked_select(&x.gt_scalar(0.0)); // [<=5], 3 elements
        let idx = x.nonzero().flatten(); // the same count
        let out = fori_loop(3, std::slice::from_ref(&v), |_, c| vec![&c[0] * &c[0] + 1.0]);
        // The body keeps the size, so the result has v's size: it meets
        // v and the indices without a check.
        assert_eq!(out[0].size(0).to_string(), v.size(0).to_string());
        let both = &out[0] + &v;
        let with_idx = &both + &idx.to_dtype(DType::F32);
        mark_step().unwrap();
        // 3 -> 10 -> 101 -> 10202; 1 -> 2 -> 5 -> 26; 2 -> 5 -> 26 -> 677.
        assert_eq!(f32s(&both), vec![10205.0, 27.0, 679.0]);
        assert_eq!(f32s(&with_idx), vec![10205.0, 29.0, 683.0]);
        // A dynamic carry whose size changes gets a new size after the loop.
        let out = while_loop(
            std::slice::from_ref(&idx),
            |c| c[0].ones_like().sum().gt_scalar(1.0),
            |c| vec![c[0].masked_select(&c[0].gt_scalar(0.0)) - 1],
        );
        assert_ne!(out[0].size(0).to_string(), "", "a size");
        assert_eq!(out[0].to_vec::<i64>().unwrap(), vec![1]);
    }
}

backend_test! {
    fn dynamic_trip_counts() {
        let x = Tensor::from_vec(vec![3.0f32, 0.0, 1.0, 0.0, 2.0], &[5]).unwrap();
        // A dynamic SymInt: as many iterations as there are nonzeros.
        let n: SymInt = x.nonzero().size(0);
        let out = fori_loop(&n, &[Tensor::scalar(1i64)], |_, c| vec![&c[0] * 2]);
        assert_eq!(out[0].item::<i64>().unwrap(), 8);
        // An integer scalar tensor.
        for k in [0i32, 1, 5] {
            let out = fori_loop(Tensor::scalar(k), &[Tensor::scalar(0i64)], |i, c| vec![&c[0] + i]);
            assert_eq!(out[0].item::<i64>().unwrap(), (0..k as i64).sum::<i64>());
        }
    }
}

backend_test! {
    fn what_the_body_returns_may_be_a_carry_a_capture_or_a_constant() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let y = Tensor::from_vec(vec![5.0f32, 6.0], &[2]).unwrap();
        let out = fori_loop(3, &[x.clone(), x.clone(), x.clone(), x.clone()], |_, c| {
            vec![c[1].clone(), c[0].clone(), y.clone(), Tensor::full(&[2], 7.0, DType::F32)]
        });
        assert_eq!(f32s(&out[0]), vec![1.0, 2.0]);
        assert_eq!(f32s(&out[2]), vec![5.0, 6.0]);
        assert_eq!(f32s(&out[3]), vec![7.0, 7.0]);
        // Results of smaller bounds are widened to the carry's: a static
        // `[2]` and a `[<=3]` selection into `[<=8]` carries.
        let wide = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap().mark_dynamic(0, 8);
        let z = Tensor::from_vec(vec![3.0f32, -1.0, 4.0], &[3]).unwrap();
        let out = fori_loop(2, &[wide.clone(), wide], |_, _| {
            vec![y.clone(), z.masked_select(&z.gt_scalar(0.0))]
        });
        assert_eq!(out[0].shape_string(), "[<=8]");
        assert_eq!(out[1].shape_string(), "[<=8]");
        mark_step().unwrap();
        assert_eq!(f32s(&out[0]), vec![5.0, 6.0]);
        assert_eq!(f32s(&out[1]), vec![3.0, 4.0]);
        assert_eq!(out[1].size(0).materialize().unwrap(), 2);
    }
}

backend_test! {
    fn nms_style_loop_over_static_masks_and_a_captured_matrix() {
        // Greedy suppression: box i is kept unless a kept box suppresses
        // it; a kept box suppresses every later box with overlap > 0.5.
        let n = 6usize;
        let iou: Vec<f32> = vec![
            1.0, 0.7, 0.1, 0.0, 0.6, 0.0, //
            0.7, 1.0, 0.2, 0.0, 0.0, 0.0, //
            0.1, 0.2, 1.0, 0.8, 0.0, 0.0, //
            0.0, 0.0, 0.8, 1.0, 0.0, 0.9, //
            0.6, 0.0, 0.0, 0.0, 1.0, 0.0, //
            0.0, 0.0, 0.0, 0.9, 0.0, 1.0,
        ];
        let iou = Tensor::from_vec(iou, &[n, n]).unwrap();
        let all = || SymInt::from(n as i64);
        let out = while_loop(
            &[
                Tensor::scalar(0i64),
                Tensor::full(&[n], 0.0, DType::Bool),
                Tensor::full(&[n], 0.0, DType::Bool),
            ],
            |c| c[0].lt_scalar(n as f64),
            |c| {
                let at = c[0].reshape(&[1]);
                let row = iou.index_select(0, &at).squeeze(0);
                let free = c[2].index_select(0, &at).squeeze(0).logical_not().expand(&[all()]);
                let me = Tensor::arange(n as i64).eq(&c[0].expand(&[all()]));
                let keep = c[1].logical_or(&me.logical_and(&free));
                let later = Tensor::arange(n as i64).gt(&c[0].expand(&[all()]));
                let hit = row.gt_scalar(0.5).logical_and(&later).logical_and(&free);
                vec![&c[0] + 1, keep, c[2].logical_or(&hit)]
            },
        );
        let kept = out[1].nonzero().flatten();
        assert_eq!(kept.to_vec::<i64>().unwrap(), vec![0, 2, 5]);
    }
}

backend_test! {
    fn loops_record_once_inside_a_captured_step() {
        let w = Tensor::from_vec(vec![0.5f32, -0.25], &[2]).unwrap();
        let mut step = capture(|x: &[Tensor]| {
            let out = fori_loop(3, &[x[0].clone()], |i, c| {
                vec![&(&c[0] * &w) + &i.to_dtype(DType::F32).expand(&[SymInt::from(2)])]
            });
            let n = while_loop(
                &[out[0].sum(), Tensor::scalar(0i64)],
                |c| c[0].lt_scalar(100.0),
                |c| vec![&c[0] * 2.0 + 1.0, &c[1] + 1],
            );
            vec![out[0].clone(), n[1].clone()]
        });
        for s in 0..5 {
            let x0 = s as f32;
            let x = Tensor::from_vec(vec![x0, 2.0 * x0], &[2]).unwrap();
            let out = step.run(&[x]).unwrap();
            // Three steps of c * w + i, elementwise.
            let want: Vec<f32> = [(x0, 0.5f32), (2.0 * x0, -0.25)]
                .iter()
                .map(|&(v, w)| ((v * w + 0.0) * w + 1.0) * w + 2.0)
                .collect();
            let got = f32s(&out[0]);
            assert_close(&got, &want, 1e-6);
            let (mut t, mut k) = (got.iter().sum::<f32>(), 0);
            while t < 100.0 {
                t = t * 2.0 + 1.0;
                k += 1;
            }
            assert_eq!(out[1].item::<i64>().unwrap(), k);
        }
        assert_eq!(step.recordings(), 1);
        assert_eq!(counter("StepReplay"), 4);
        assert_eq!(counter("UncachedCompile"), 1);
    }
}

backend_test! {
    fn a_training_step_with_a_loop_compiles_once() {
        // A tiny recurrent net: h = tanh(cell(x_t) + h) over a sequence
        // whose values change every step; the loop's body uses the
        // parameters, which get gradients through it.
        let cell = Linear::new(3, 3, 1);
        let readout = Linear::new(3, 1, 2);
        let mut params = cell.parameters();
        params.extend(readout.parameters());
        let mut opt = Sgd::new(params, 0.1);
        let mut losses = Vec::new();
        for s in 0..30 {
            // Three sequences in turn, each with its own target.
            let which = s % 3;
            let xs: Vec<f32> = (0..12).map(|k| ((k * 7 + which) % 11) as f32 / 11.0 - 0.5).collect();
            let xs = Tensor::from_vec(xs, &[4, 3]).unwrap();
            let target = Tensor::from_vec(vec![which as f32 * 0.5 - 0.5], &[1]).unwrap();
            let h = fori_loop(4, &[Tensor::zeros(&[3], DType::F32)], |t, h| {
                let x = xs.index_select(0, &t.reshape(&[1])).squeeze(0);
                vec![(&cell.forward(&x.unsqueeze(0)).squeeze(0) + &h[0]).tanh()]
            });
            let loss = (&readout.forward(&h[0].unsqueeze(0)).squeeze(0) - &target).square().sum();
            opt.zero_grad();
            loss.backward();
            if s == 0 {
                // The forward loop saves its carries; one reverse scan.
                let grads: Vec<Tensor> = cell.parameters().iter().map(|p| p.grad().unwrap()).collect();
                let ir = lazyxla::debug::ir_text(&grads.iter().collect::<Vec<_>>());
                // It also saves its body's matrix product per iteration.
                assert_eq!(ir.matches("= fori_loop[trip=4 saves carries saves nodes=").count(), 1, "{ir}");
                assert_eq!(ir.matches("= fori_loop").count(), 1, "{ir}");
                // The reverse loop scans the saved carries and products.
                assert_eq!(ir.matches("= scan[trip=4 reverse]").count(), 1, "{ir}");
            }
            opt.step();
            mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        assert_eq!(counter("UncachedCompile"), 1, "one program for every step");
        assert!(losses.iter().all(|l| l.is_finite()));
        let first: f32 = losses[..3].iter().sum();
        let last: f32 = losses[27..].iter().sum();
        assert!(last < first, "the loss falls: {losses:?}");
    }
}

backend_test! {
    fn misuse_is_a_clear_panic_and_the_runtime_stays_usable() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let dynamic = x.masked_select(&x.gt_scalar(0.0)); // [<=2]
        let msg = panic_message(|| {
            fori_loop(2, std::slice::from_ref(&x), |_, c| vec![c[0].clone(), c[0].clone()]);
        });
        assert!(msg.contains("fori_loop") && msg.contains("returned 2 carries, the loop has 1"), "{msg}");
        let msg = panic_message(|| {
            fori_loop(2, &[x.clone(), x.clone()], |_, c| vec![c[0].clone(), c[1].to_dtype(DType::F64)]);
        });
        assert!(msg.contains("fori_loop") && msg.contains("f64[2] for carry 1") && msg.contains("f32[2]"), "{msg}");
        let msg = panic_message(|| {
            fori_loop(2, std::slice::from_ref(&x), |_, c| vec![c[0].unsqueeze(0)]);
        });
        assert!(msg.contains("f32[1, 2] for carry 0") && msg.contains("rank"), "{msg}");
        let msg = panic_message(|| {
            fori_loop(2, std::slice::from_ref(&x), |_, c| vec![c[0].masked_select(&c[0].gt_scalar(1.0))]);
        });
        assert!(msg.contains("f32[<=2] for carry 0") && msg.contains("mark_dynamic(0, bound)"), "{msg}");
        let msg = panic_message(|| {
            fori_loop(2, std::slice::from_ref(&dynamic), |_, c| vec![Tensor::cat(&[&c[0], &c[0]], 0)]);
        });
        assert!(msg.contains("f32[<=4] for carry 0") && msg.contains("f32[<=2]") && msg.contains("bound 2"), "{msg}");
        let msg = panic_message(|| {
            while_loop(std::slice::from_ref(&x), |c| c[0].gt_scalar(0.0), |c| vec![c[0].clone()]);
        });
        assert!(msg.contains("while_loop") && msg.contains("bool scalar") && msg.contains("bool[2]"), "{msg}");
        // A value of a body used outside it.
        let msg = panic_message(|| {
            let mut leaked = None;
            fori_loop(2, std::slice::from_ref(&x), |_, c| {
                leaked = Some(&c[0] * 2.0);
                vec![c[0].clone()]
            });
            fori_loop(2, std::slice::from_ref(&x), |_, c| vec![&c[0] + leaked.as_ref().unwrap()]);
        });
        assert!(msg.contains("inside the body of a fori_loop is used outside it"), "{msg}");
        // Reading or syncing inside a body is an error (the body has not
        // run yet), and the loop can still be recorded.
        let out = fori_loop(2, std::slice::from_ref(&x), |_, c| {
            let err = c[0].to_vec::<f32>().unwrap_err().to_string();
            assert!(err.contains("inside the body of a fori_loop"), "{err}");
            let y = &c[0] * 2.0;
            let err = y.to_vec::<f32>().unwrap_err().to_string();
            assert!(err.contains("read, materialized or synced inside the body"), "{err}");
            let err = mark_step().unwrap_err().to_string();
            assert!(err.contains("inside the body of a fori_loop"), "{err}");
            vec![y]
        });
        assert_eq!(f32s(&out[0]), vec![4.0, 8.0]);
        // A panic inside the body unwinds cleanly too.
        let msg = panic_message(|| {
            fori_loop(2, std::slice::from_ref(&x), |_, c| vec![c[0].matmul(&c[0].unsqueeze(0))]);
        });
        assert!(msg.contains("matmul"), "{msg}");
        // Everything still works.
        let out = fori_loop(2, std::slice::from_ref(&x), |_, c| vec![&c[0] * 2.0]);
        assert_eq!(f32s(&out[0]), vec![4.0, 8.0]);
        mark_step().unwrap();
    }
}

backend_test! {
    fn backward_through_a_while_loop_says_what_to_use_instead() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true);
        let out = while_loop(
            &[x.clone(), Tensor::scalar(0i64)],
            |c| c[1].lt_scalar(3.0),
            |c| vec![&c[0] * 2.0, &c[1] + 1],
        );
        assert!(out[0].is_requires_grad());
        let loss = out[0].sum();
        let msg = panic_message(|| loss.backward());
        assert!(msg.contains("while_loop is not differentiable") && msg.contains("fori_loop with a static trip count"), "{msg}");
        let out = fori_loop(Tensor::scalar(2i64), std::slice::from_ref(&x), |_, c| vec![&c[0] * 2.0]);
        let msg = panic_message(|| out[0].sum().backward());
        assert!(msg.contains("fori_loop whose trip count is a tensor") && msg.contains("a static count or a size"), "{msg}");
        // Values still compute, and the loss without grad is fine.
        let y = no_grad(|| fori_loop(2, std::slice::from_ref(&x), |_, c| vec![&c[0] * 2.0]));
        assert_eq!(f32s(&y[0]), vec![4.0, 8.0]);
        assert_eq!(loss.item::<f32>().unwrap(), 24.0);
    }
}

backend_test! {
    fn backward_through_a_dynamic_carry_is_a_clear_error() {
        let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3]).unwrap().requires_grad(true);
        let v = x.masked_select(&x.gt_scalar(0.0));
        let out = fori_loop(2, &[v], |_, c| vec![&c[0] * 2.0]);
        let msg = panic_message(|| out[0].sum().backward());
        assert!(msg.contains("carry 0") && msg.contains("f32[<=3]") && msg.contains("dynamic"), "{msg}");
    }
}

#[test]
fn the_printer_shows_loop_bodies_as_nested_blocks() {
    let _g = common::lock();
    lazyxla::Device::reference().scoped(|| {
        let w = Tensor::from_vec(vec![0.5f32, 2.0], &[2]).unwrap();
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 3.0], &[3]).unwrap();
        let v = x.masked_select(&x.gt_scalar(0.0));
        let out = fori_loop(3, &[w.zeros_like(), v], |i, c| {
            let s = fori_loop(2, &[c[0].clone()], |_, d| vec![&d[0] * &w]);
            vec![
                &s[0] + &i.to_dtype(DType::F32),
                c[1].masked_select(&c[1].gt_scalar(1.0)),
            ]
        });
        let found = while_loop(
            &[Tensor::scalar(0i64)],
            |c| c[0].lt_scalar(10.0),
            |c| vec![&c[0] + 3],
        );
        insta::assert_snapshot!(
            "loops_nested_blocks",
            lazyxla::debug::ir_text(&[&out[0], &out[1], &found[0]])
        );
    });
}

backend_test! {
    fn a_captured_step_replays_a_loop_whose_carry_changes_size() {
        // Halve the positive elements while any is above 1: the carry
        // shrinks by a data-dependent amount in each iteration.
        let mut step = capture(|x: &[Tensor]| {
            let v = x[0].masked_select(&x[0].gt_scalar(0.0));
            let out = while_loop(
                &[v],
                |c| c[0].gt_scalar(1.0).any(),
                |c| vec![c[0].masked_select(&c[0].gt_scalar(1.5)) * 0.5],
            );
            vec![out[0].clone(), out[0].sum()]
        });
        let cases: [[f32; 4]; 4] = [
            [4.0, -1.0, 2.0, 8.0],
            [0.5, 3.0, 1.2, 2.0],
            [-2.0, -1.0, 0.5, 0.25],
            [16.0, 12.0, 10.0, 9.0],
        ];
        let mut sizes = Vec::new();
        for input in cases {
            let mut want: Vec<f32> = input.iter().copied().filter(|&v| v > 0.0).collect();
            while want.iter().any(|&v| v > 1.0) {
                want = want.iter().filter(|&&v| v > 1.5).map(|v| v * 0.5).collect();
            }
            sizes.push(want.len());
            let x = Tensor::from_vec(input.to_vec(), &[4]).unwrap();
            let out = step.run(&[x]).unwrap();
            assert_eq!(out[0].shape_string(), "[<=4]");
            assert_eq!(f32s(&out[0]), want.to_vec(), "{input:?}");
            assert_eq!(out[1].item::<f32>().unwrap(), want.iter().sum::<f32>());
            assert_eq!(out[0].size(0).materialize().unwrap(), want.len() as i64);
        }
        assert_eq!(sizes, vec![1, 0, 2, 1], "cases of several sizes");
        assert_eq!(step.recordings(), 1);
        assert_eq!(counter("UncachedCompile"), 1);
    }
}

/// An index out of range inside a body fails the step on the reference
/// backend (XLA clamps it), naming the loop and the op of its body.
#[test]
fn a_failure_inside_a_body_names_the_loop_and_the_op() {
    let _g = common::lock();
    lazyxla::Device::reference().scoped(|| {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let out = fori_loop(3, &[Tensor::scalar(0.0f32)], |i, c| {
            let at = (i * 2).reshape(&[1]);
            vec![&c[0] + &x.index_select(0, &at).squeeze(0)]
        });
        let err = mark_step().unwrap_err().to_string();
        assert!(
            err.contains("while computing a fori_loop")
                && err.contains("its body failed computing f32[1] from index_select")
                && err.contains("out of range"),
            "{err}"
        );
        drop(out);
        mark_step().unwrap();
    });
}

backend_test! {
    fn detach_and_no_grad_inside_a_body_stop_the_gradient_as_outside() {
        // The same steps looped and unrolled: the gradients agree, and
        // differ from those without the stops (so the stops count).
        let step = |a: &Tensor, b: &Tensor, stop: bool| -> (Tensor, Tensor) {
            let (sa, sb) = match stop {
                true => (a.detach(), b.detach()),
                false => (a.clone(), b.clone()),
            };
            let wave = match stop {
                true => no_grad(|| a.sin()),
                false => a.sin(),
            };
            (&(a * &(&sb * &sa)) + &wave, b + 1.0)
        };
        let grads = |stop: bool, looped: bool| -> Vec<f64> {
            let x = Tensor::from_vec(vec![0.3f64, -0.7, 0.2], &[3]).unwrap().requires_grad(true);
            let y = Tensor::from_vec(vec![0.5f64, 0.1, -0.4], &[3]).unwrap().requires_grad(true);
            let out = match looped {
                true => fori_loop(3, &[x.clone(), y.clone()], |_, c| {
                    let (a, b) = step(&c[0], &c[1], stop);
                    vec![a, b]
                })[0]
                    .clone(),
                false => {
                    let (mut a, mut b) = (x.clone(), y.clone());
                    for _ in 0..3 {
                        (a, b) = step(&a, &b, stop);
                    }
                    a
                }
            };
            out.sum().backward();
            mark_step().unwrap();
            let mut g = x.grad().unwrap().to_vec::<f64>().unwrap();
            g.extend(y.grad().map_or(vec![0.0; 3], |g| g.to_vec::<f64>().unwrap()));
            g
        };
        let (looped, unrolled) = (grads(true, true), grads(true, false));
        common::assert_close64(&looped, &unrolled, 1e-12);
        let free = grads(false, true);
        common::assert_close64(&free, &grads(false, false), 1e-12);
        assert!(looped.iter().zip(&free).any(|(a, b)| (a - b).abs() > 1e-3), "{looped:?} {free:?}");
    }
}

backend_test! {
    fn a_mark_step_on_another_thread_leaves_a_body_being_traced_alone() {
        // While this thread traces a body (its placeholders and values are
        // live tensors), another thread's `mark_step` computes its own
        // pending work and none of the body's.
        let device = lazyxla::Device::default();
        let (to_other, other_rx) = std::sync::mpsc::channel::<()>();
        let (to_body, body_rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            device.scoped(|| {
                let y = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap() * 3.0;
                other_rx.recv().unwrap();
                let synced = mark_step();
                to_body.send(()).unwrap();
                synced.map(|_| f32s(&y))
            })
        });
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let out = fori_loop(3, std::slice::from_ref(&x), |_, c| {
            let next = &c[0] * 2.0;
            to_other.send(()).unwrap();
            body_rx.recv().unwrap();
            vec![next]
        });
        assert_eq!(other.join().unwrap().unwrap(), vec![3.0, 6.0]);
        assert_eq!(f32s(&out[0]), vec![8.0, 16.0]);
    }
}
