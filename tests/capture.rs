//! Captured steps (`lazyxla::capture`): recorded once, replayed with new
//! inputs, with the same results as the eager step followed by `mark_step`.

mod common;

#[allow(dead_code)]
#[path = "../examples/train_detector.rs"]
mod detector;

use common::assert_close;
use lazyxla::metrics::counter;
use lazyxla::nn::{Dropout, Module};
use lazyxla::optim::Adam;
use lazyxla::{capture, mark_step, DType, Tensor};

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

backend_test! {
    fn captured_training_matches_eager_training_and_compiles_once() {
        let steps = 12;
        // Eager: record every step, then mark_step.
        let model = detector::Detector::new(3);
        let mut opt = Adam::new(model.parameters(), 0.02);
        let mut eager = Vec::new();
        for s in 0..steps {
            let (loss, positives) = detector::train_step(&model, &mut opt, &detector::image(s));
            mark_step().unwrap();
            eager.push((loss.item::<f32>().unwrap(), positives.to_vec::<i64>().unwrap()));
        }
        let eager_params: Vec<Vec<f32>> = model.parameters().iter().map(values).collect();

        // Captured: the same step, recorded and then replayed.
        let model = detector::Detector::new(3);
        let mut opt = Adam::new(model.parameters(), 0.02);
        let mut step = capture(|x: &[Tensor]| {
            let (loss, positives) =
                detector::train_step(&model, &mut opt, &detector::Image::from_inputs(x));
            vec![loss, positives]
        });
        for (s, (loss, positives)) in eager.iter().enumerate() {
            let out = step.run(&detector::image(s as u64).inputs()).unwrap();
            assert_close(&[out[0].item::<f32>().unwrap()], &[*loss], 1e-5);
            assert_eq!(&out[1].to_vec::<i64>().unwrap(), positives, "step {s}");
            assert_eq!(out[1].size(0).materialize().unwrap() as usize, positives.len());
        }
        // The first call records with no gradients yet, the second with
        // them; every later call replays.
        assert_eq!(step.recordings(), 2);
        assert_eq!(counter("StepReplay"), steps - 2);
        assert_eq!(counter("UncachedCompile"), 1, "eager and captured steps share one program");
        drop(step);
        for (p, want) in model.parameters().iter().zip(&eager_params) {
            assert_close(&values(p), want, 1e-5);
        }
    }
}

backend_test! {
    fn dynamic_inputs_replay_with_their_own_sizes() {
        let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).unwrap();
        let mut step = capture(|x: &[Tensor]| {
            let y = &x[0] * &w; // [<=8, 3]
            vec![y.clone(), y.sum_dims(&[1], false)]
        });
        for n in [3usize, 8, 1, 5] {
            let data: Vec<f32> = (0..n * 3).map(|i| i as f32).collect();
            let x = Tensor::from_vec(data.clone(), &[n, 3]).unwrap().mark_dynamic(0, 8);
            let out = step.run(std::slice::from_ref(&x)).unwrap();
            assert_eq!(out[0].size(0).to_string(), "<=8");
            assert_eq!(out[0].concrete_shape().unwrap(), vec![n, 3]);
            // The result keeps the input's size, so they meet in ops.
            let back = (&out[0] - &x * &w).abs().sum();
            assert_eq!(back.item::<f32>().unwrap(), 0.0);
            let want: Vec<f32> = data.chunks(3).map(|r| 0.5 * r[0] - r[1] + 2.0 * r[2]).collect();
            assert_close(&values(&out[1]), &want, 1e-6);
        }
        assert_eq!(step.recordings(), 1);
        assert_eq!(counter("StepReplay"), 3);
    }
}

backend_test! {
    fn data_dependent_sizes_are_fresh_on_every_replay() {
        let mut step = capture(|x: &[Tensor]| {
            let idx = x[0].gt_scalar(0.0).nonzero(); // [<=6, 1]
            let vals = x[0].masked_select(&x[0].gt_scalar(0.0)); // [<=6]
            let sq = idx.to_dtype(DType::F32).pow(2.0);
            vec![idx, sq, vals]
        });
        for data in [vec![1.0f32, -1.0, 2.0, 0.0, 3.0, -2.0], vec![-1.0; 6], vec![5.0; 6]] {
            let x = Tensor::from_vec(data.clone(), &[6]).unwrap();
            let out = step.run(&[x]).unwrap();
            let want_idx: Vec<i64> = (0..6).filter(|&i| data[i as usize] > 0.0).collect();
            assert_eq!(out[0].to_vec::<i64>().unwrap(), want_idx);
            let want_sq: Vec<f32> = want_idx.iter().map(|&i| (i * i) as f32).collect();
            assert_eq!(values(&out[1]), want_sq);
            // idx and sq share their size variable, as in the eager graph.
            let both = (&out[0].to_dtype(DType::F32) + &out[1]).sum();
            assert_eq!(both.item::<f32>().unwrap(), want_sq.iter().sum::<f32>() + want_idx.iter().sum::<i64>() as f32);
            let want_vals: Vec<f32> = data.iter().copied().filter(|&v| v > 0.0).collect();
            assert_eq!(values(&out[2]), want_vals);
        }
        assert_eq!(step.recordings(), 1);
    }
}

backend_test! {
    fn sizes_a_caller_holds_keep_their_values_across_replays() {
        // A replay names the sizes it computes with the memory of the
        // variables two replays before, once nothing holds those: sizes
        // the caller kept, and pending work on old results, must keep
        // their values.
        let mut step = capture(|x: &[Tensor]| {
            let idx = x[0].gt_scalar(0.0).nonzero(); // [<=6, 1]
            let sq = idx.to_dtype(DType::F32).pow(2.0);
            vec![idx, sq]
        });
        let positives = |n: usize| (0..6).map(|i| if i < n { 1.0f32 } else { -1.0 }).collect();
        let squares = |n: usize| (0..n).map(|i| (i * i) as f32).sum::<f32>();
        let mut held = Vec::new();
        let mut pending = Vec::new();
        for k in 0..16 {
            let n = (k * 5) % 7;
            let out = step.run(&[Tensor::from_vec(positives(n), &[6]).unwrap()]).unwrap();
            assert_eq!(out[0].size(0).materialize().unwrap(), n as i64, "call {k}");
            assert_eq!(out[1].sum().item::<f32>().unwrap(), squares(n), "call {k}");
            match k % 4 {
                0 => held.push((out[0].size(0), n as i64)),
                1 => held.push((out[1].size(0) * 2 + 1, 2 * n as i64 + 1)),
                2 => pending.push(((&out[1] + 1.0).sum(), squares(n) + n as f32)),
                _ => {}
            }
        }
        for (size, want) in held {
            assert_eq!(size.materialize().unwrap(), want);
        }
        for (sum, want) in pending {
            assert_eq!(sum.item::<f32>().unwrap(), want);
        }
        assert!(counter("InPlaceResult") > 0, "results were written in place");
        assert_eq!(step.recordings(), 1);
    }
}

backend_test! {
    fn a_new_input_signature_records_again_and_old_ones_still_replay() {
        let mut step = capture(|x: &[Tensor]| vec![(&x[0] * 2.0).sum()]);
        let run = |step: &mut lazyxla::CapturedStep<_>, n: usize| {
            let x = Tensor::ones(&[n], DType::F32);
            step.run(&[x]).unwrap()[0].item::<f32>().unwrap()
        };
        assert_eq!(run(&mut step, 3), 6.0);
        assert_eq!(run(&mut step, 4), 8.0);
        assert_eq!(run(&mut step, 3), 6.0);
        assert_eq!(run(&mut step, 4), 8.0);
        assert_eq!(step.recordings(), 2);
        assert_eq!(counter("StepReplay"), 2);
    }
}

backend_test! {
    fn state_changed_between_calls_is_read_by_the_replay() {
        let w = Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap();
        let mut step = capture(|x: &[Tensor]| {
            w.assign(&(&w + &x[0]));
            vec![]
        });
        let one = || Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        step.run(&[one()]).unwrap();
        assert_eq!(values(&w), vec![2.0, 3.0]);
        // Changed outside the step, and still pending when the step runs.
        w.assign(&(&w * 10.0));
        step.run(&[one()]).unwrap();
        assert_eq!(values(&w), vec![21.0, 32.0]);
        assert_eq!(step.recordings(), 1);
    }
}

backend_test! {
    fn values_held_across_a_replay_keep_what_they_were() {
        // A replay moves new buffers into the state and gradients it
        // updates in place, but only where nothing else shares them.
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true);
        let mut step = capture(|x: &[Tensor]| {
            w.zero_grad();
            let loss = (&w * &x[0]).sum();
            loss.backward();
            let g = w.grad().unwrap();
            lazyxla::no_grad(|| w.assign(&(&w - &g)));
            vec![loss]
        });
        let x = Tensor::from_vec(vec![1.0f32, 3.0], &[2]).unwrap();
        for _ in 0..3 {
            step.run(std::slice::from_ref(&x)).unwrap();
        }
        assert_eq!(values(&w), vec![-2.0, -7.0]);
        // Held by the caller: the gradient itself, a copy of the weight
        // still pending, and another handle of the weight.
        let old_grad = w.grad().unwrap();
        let pending = &w * 1.0;
        let alias = w.clone();
        let x2 = Tensor::from_vec(vec![2.0f32, 1.0], &[2]).unwrap();
        step.run(std::slice::from_ref(&x2)).unwrap();
        assert_eq!(values(&old_grad), vec![1.0, 3.0], "a held gradient keeps its value");
        assert_eq!(values(&pending), vec![-2.0, -7.0], "pending work reads the old weight");
        assert_eq!(values(&alias), vec![-4.0, -8.0], "a handle of the weight sees the update");
        assert_eq!(values(&w.grad().unwrap()), vec![2.0, 1.0]);
        // Nothing holds them now: the next replay updates them in place.
        drop((old_grad, pending, alias));
        step.run(&[x2]).unwrap();
        assert_eq!(values(&w), vec![-6.0, -9.0]);
        assert_eq!(values(&w.grad().unwrap()), vec![2.0, 1.0]);
        assert_eq!(step.recordings(), 2);
    }
}

backend_test! {
    fn returned_tensors_are_reused_only_once_dropped() {
        // A replay moves a result into the tensor it returned in the same
        // place last time, when nothing else holds that tensor. Values a
        // caller holds, or that pending work reads, never change.
        let mut step = capture(|x: &[Tensor]| {
            let pos = x[0].masked_select(&x[0].gt_scalar(0.0)); // [<=4]
            vec![&pos * 2.0, pos.sum()]
        });
        let mut run = |v: [f32; 4]| step.run(&[Tensor::from_vec(v.to_vec(), &[4]).unwrap()]).unwrap();
        drop(run([1.0, -1.0, 2.0, 3.0])); // recorded
        drop(run([1.0, -1.0, 2.0, 3.0])); // replayed into new tensors
        assert_eq!(counter("InPlaceResult"), 0);
        let held = run([4.0, -1.0, -1.0, -1.0]); // into the dropped ones
        assert_eq!(counter("InPlaceResult"), 2);
        assert_eq!(held[0].size(0).materialize().unwrap(), 1);
        let next = run([1.0, 1.0, 1.0, -1.0]);
        assert_eq!(counter("InPlaceResult"), 2, "held tensors are not reused");
        assert_eq!(values(&held[0]), vec![8.0]);
        assert_eq!(values(&held[1]), vec![4.0]);
        assert_eq!(values(&next[0]), vec![2.0, 2.0, 2.0]);
        let pending = &next[0] + 1.0;
        drop(next);
        let last = run([-1.0, -1.0, -1.0, 5.0]);
        assert_eq!(counter("InPlaceResult"), 3, "only the sum was free to reuse");
        assert_eq!(values(&pending), vec![3.0, 3.0, 3.0]);
        assert_eq!(values(&last[0]), vec![10.0]);
        assert_eq!(values(&last[1]), vec![5.0]);
        drop(last);
        let empty = run([-1.0; 4]);
        assert_eq!(empty[0].size(0).materialize().unwrap(), 0);
        assert_eq!(values(&empty[1]), vec![0.0]);
        assert_eq!(counter("InPlaceResult"), 5);
        assert_eq!(step.recordings(), 1);
    }
}

backend_test! {
    fn a_returned_tensor_that_got_a_gradient_is_not_reused() {
        // A gradient stays with the tensor it was computed for, even after
        // `set_requires_grad(false)`; a replay must not hand that tensor,
        // gradient and all, back as a new result.
        let mut step = capture(|x: &[Tensor]| vec![(&x[0] * 2.0).sum()]);
        let run = |step: &mut lazyxla::CapturedStep<_>, v: f32| {
            step.run(&[Tensor::full(&[3], v as f64, DType::F32)]).unwrap().remove(0)
        };
        drop(run(&mut step, 1.0)); // recorded
        drop(run(&mut step, 1.0)); // replayed into a new tensor, kept
        let out = run(&mut step, 2.0); // into the kept one
        assert_eq!(counter("InPlaceResult"), 1);
        out.set_requires_grad(true);
        (&out * 3.0).backward();
        mark_step().unwrap(); // computes the gradient and releases its graph
        out.set_requires_grad(false);
        assert!(out.grad().is_some());
        drop(out);
        let next = run(&mut step, 3.0);
        assert_eq!(counter("InPlaceResult"), 1, "a tensor with a gradient is not reused");
        assert_eq!(next.item::<f32>().unwrap(), 18.0);
        assert!(next.grad().is_none());
        drop(next);
        assert_eq!(run(&mut step, 4.0).item::<f32>().unwrap(), 24.0);
        assert_eq!(counter("InPlaceResult"), 2, "a dropped tensor without one is");
    }
}

backend_test! {
    fn only_the_signature_that_ran_last_keeps_its_returned_tensors() {
        let mut step = capture(|x: &[Tensor]| vec![(&x[0] * 2.0).sum()]);
        let mut run = |n: usize| {
            let out = step.run(&[Tensor::ones(&[n], DType::F32)]).unwrap();
            assert_eq!(out[0].item::<f32>().unwrap(), 2.0 * n as f32);
        };
        for n in [3, 4, 3, 4] {
            run(n); // two recordings, then a replay of each into new tensors
        }
        assert_eq!(counter("InPlaceResult"), 0);
        run(4);
        assert_eq!(counter("InPlaceResult"), 1);
        run(3); // its tensor was released when the other signature ran
        assert_eq!(counter("InPlaceResult"), 1);
        run(3);
        assert_eq!(counter("InPlaceResult"), 2);
    }
}

backend_test! {
    fn gradients_cleared_before_each_call_replay() {
        // The gradient is absent at every call, so every replay creates it.
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true);
        let mut step = capture(|x: &[Tensor]| {
            let loss = (&w * &x[0]).sum();
            loss.backward();
            vec![loss]
        });
        for k in 0..4 {
            w.zero_grad();
            let x = Tensor::from_vec(vec![k as f32, 1.0], &[2]).unwrap();
            step.run(&[x]).unwrap();
            assert_eq!(values(&w.grad().unwrap()), vec![k as f32, 1.0]);
        }
        assert_eq!(step.recordings(), 1);
    }
}

backend_test! {
    fn dropout_draws_a_new_mask_on_every_replay() {
        let drop = Dropout::new(0.5, 7);
        let mut step = capture(|x: &[Tensor]| vec![drop.forward(&x[0])]);
        let x = Tensor::ones(&[64], DType::F32);
        let masks: Vec<Vec<f32>> = (0..3).map(|_| values(&step.run(std::slice::from_ref(&x)).unwrap()[0])).collect();
        assert_ne!(masks[1], masks[2]);
        assert_ne!(masks[0], masks[1]);
        assert_eq!(step.recordings(), 1);
    }
}

backend_test! {
    fn reading_inside_the_step_is_an_error_and_loses_nothing() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let mut step = capture(|x: &[Tensor]| {
            let s = (&x[0] + &w).sum();
            let _ = s.item::<f32>();
            vec![s]
        });
        let x = Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap();
        let err = step.run(std::slice::from_ref(&x)).unwrap_err().to_string();
        assert!(err.contains("read a value"), "{err}");
        assert_eq!(values(&(&x + &w)), vec![2.0, 3.0]);
    }
}

backend_test! {
    fn a_tensor_that_escapes_the_step_is_an_error() {
        let kept = std::cell::RefCell::new(Vec::new());
        let mut step = capture(|x: &[Tensor]| {
            kept.borrow_mut().push(&x[0] * 3.0);
            vec![]
        });
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let err = step.run(&[x]).unwrap_err().to_string();
        assert!(err.contains("neither returned nor a gradient"), "{err}");
        // The escaped tensor is still valid, computed by the next sync.
        assert_eq!(values(&kept.borrow()[0]), vec![3.0, 6.0]);
    }
}

backend_test! {
    fn assigning_to_an_input_is_an_error() {
        let mut step = capture(|x: &[Tensor]| {
            x[0].assign(&(&x[0] + 1.0));
            vec![]
        });
        let x = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        let err = step.run(std::slice::from_ref(&x)).unwrap_err().to_string();
        assert!(err.contains("assigned to its input"), "{err}");
        assert_eq!(values(&x), vec![2.0]);
    }
}

backend_test! {
    fn a_replayed_loop_never_reads_back_from_the_device() {
        let w = Tensor::from_vec(vec![0.0f32; 4], &[4]).unwrap();
        let x = Tensor::ones(&[4], DType::F32);
        let mut step = capture(|x: &[Tensor]| {
            w.assign(&(&w + &x[0]));
            vec![w.sum()]
        });
        for _ in 0..5 {
            step.run(std::slice::from_ref(&x)).unwrap();
        }
        assert_eq!(counter("TransferFromDevice"), 0);
        assert_eq!(values(&w), vec![5.0; 4]);
    }
}
