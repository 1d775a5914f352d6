//! Sizes that recording cannot prove equal are checked when the program
//! runs (issue 19): ported PyTorch/XLA code runs as written, a failed
//! check is an `Err` naming the op and both sizes, and it changes nothing.

mod common;

use common::{assert_close, panic_message};
use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{capture, mark_step, metrics, DType, Tensor};

/// `n` values, the first `ones` of them 1 and the rest 0, spread by a
/// stride so the positions change with `shift`.
fn ones_among(n: usize, ones: usize, shift: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; n];
    for k in 0..ones {
        v[(k * 3 + shift) % n] = 1.0;
    }
    v
}

fn err_text(e: lazyxla::Error) -> String {
    e.to_string()
}

backend_test! {
    fn different_masks_of_equal_counts_meet_and_unequal_counts_fail_at_the_read() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[6]).unwrap();
        let b = Tensor::from_vec(vec![10.0f32, 20.0, 30.0, 40.0, 50.0, 60.0], &[6]).unwrap();
        let m1 = a.gt_scalar(3.0); // 3 true
        let m2 = b.lt_scalar(35.0); // 3 true
        let d = &a.masked_select(&m1) - &b.masked_select(&m2);
        assert_eq!(d.to_vec::<f32>().unwrap(), vec![4.0 - 10.0, 5.0 - 20.0, 6.0 - 30.0]);
        // Counts 3 and 2: the check fails when the program runs.
        let m3 = b.lt_scalar(25.0);
        let bad = &a.masked_select(&m1) - &b.masked_select(&m3);
        let e = err_text(bad.to_vec::<f32>().unwrap_err());
        assert!(e.contains("sub:") && e.contains("must be equal"), "{e}");
        assert!(e.contains("they are 3 and 2"), "{e}");
        assert!(e.contains("in [0, 6]"), "the message gives the bounds: {e}");
        // Nothing was lost: the operands still read, and the failing
        // result fails the same way again.
        assert_eq!(a.masked_select(&m1).to_vec::<f32>().unwrap(), vec![4.0, 5.0, 6.0]);
        assert!(bad.to_vec::<f32>().is_err());
    }
}

backend_test! {
    fn proven_unequal_sizes_are_an_error_at_once() {
        let x = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap().mark_dynamic(0, 4);
        let y = Tensor::from_vec(vec![1.0f32; 10], &[10]).unwrap();
        let msg = panic_message(|| {
            let _ = &x + &y;
        });
        assert!(msg.contains("add"), "{msg}");
        // A static mismatch is the usual broadcast error.
        let z = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap();
        let msg = panic_message(|| {
            let _ = &y + &z;
        });
        assert!(msg.contains("cannot broadcast"), "{msg}");
    }
}

backend_test! {
    fn tokens_and_a_separately_marked_mask_meet_and_compile_once() {
        for len in 1..=20usize {
            let tokens: Vec<f32> = (0..2 * len).map(|i| i as f32).collect();
            let mask: Vec<f32> = (0..2 * len).map(|i| (i % 3 != 0) as u8 as f32).collect();
            let t = Tensor::from_vec(tokens.clone(), &[2, len]).unwrap().mark_dynamic(1, 64);
            let m = Tensor::from_vec(mask.clone(), &[2, len]).unwrap().mark_dynamic(1, 64);
            let s = (&t * &m).sum();
            let want: f32 = tokens.iter().zip(&mask).map(|(a, b)| a * b).sum();
            assert_close(&[s.item::<f32>().unwrap()], &[want], 1e-5);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1);
    }
}

backend_test! {
    fn a_negative_computed_size_is_an_error_at_the_read() {
        let x = Tensor::from_vec(vec![0.0f32, 1.0, 0.0], &[3]).unwrap();
        let n = x.nonzero().size(0); // 1 when it runs
        let r = Tensor::arange_sym(&(n.clone() - 2));
        let e = err_text(r.to_vec::<i64>().unwrap_err());
        assert!(e.contains("arange_sym") && e.contains("must not be negative"), "{e}");
        assert!(e.contains("it is -1"), "{e}");
        // The sized constructors check the same way.
        let z = Tensor::zeros_sym(&[n.clone() - 3, 2.into()], DType::F32);
        let e = err_text(z.to_vec::<f32>().unwrap_err());
        assert!(e.contains("zeros_sym") && e.contains("it is -2"), "{e}");
        // Non-negative: the range as usual.
        let ok = Tensor::arange_sym(&(n + 1));
        assert_eq!(ok.to_vec::<i64>().unwrap(), vec![0, 1]);
    }
}

backend_test! {
    fn a_dynamic_count_that_must_divide_is_checked() {
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0, 0.0, 4.0], &[6]).unwrap();
        let v = x.masked_select(&x.ne_scalar(0.0)); // 4 elements
        let r = v.reshape(&[-1, 2]);
        assert_eq!(r.size(1).as_static(), Some(2));
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        let odd = x.masked_select(&x.gt_scalar(1.5)); // 3 elements
        let e = err_text(odd.reshape(&[-1, 2]).to_vec::<f32>().unwrap_err());
        assert!(e.contains("reshape") && e.contains("multiple of 2"), "{e}");
    }
}

// PyTorch/XLA's `test_dynamic_shape_models.py`, as written there: a
// 2→10→1 network on `nonzero(x)` trained against targets from
// `nonzero(y)`, whose counts are equal when the program runs.
backend_test! {
    fn the_pytorch_xla_model_test_trains_and_a_count_mismatch_changes_nothing() {
        let l1 = Linear::new(2, 10, 1);
        let l2 = Linear::new(10, 1, 2);
        let params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
        let mut opt = Sgd::new(params.clone(), 0.05);
        let step = |opt: &mut Sgd, k: usize, extra: usize, shift: usize| {
            opt.zero_grad();
            let x = Tensor::from_vec(ones_among(16, k, shift), &[8, 2]).unwrap();
            let y = Tensor::from_vec(ones_among(24, k + extra, shift + 1), &[24]).unwrap();
            let features = x.nonzero().to_dtype(DType::F32) * 0.25;
            let logits = l2.forward(&l1.forward(&features).relu()).squeeze(1);
            let target = y.nonzero().squeeze(1).remainder(&Tensor::scalar(2i64)).to_dtype(DType::F32);
            let loss = nn::binary_cross_entropy_with_logits(&logits, &target);
            loss.backward();
            opt.step();
            mark_step()
        };
        for it in 0..10 {
            step(&mut opt, 3 + it % 5, 0, it).unwrap();
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        let before: Vec<Vec<f32>> = params.iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
        // Five points, six targets: the step fails and changes nothing.
        let e = err_text(step(&mut opt, 5, 1, 0).unwrap_err());
        assert!(e.contains("must be equal") && e.contains("they are 5 and 6"), "{e}");
        let after: Vec<Vec<f32>> = params.iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
        assert_eq!(before, after, "a failed check leaves the weights as they were");
        // The next step runs, with the program compiled before.
        step(&mut opt, 4, 0, 2).unwrap();
        assert_ne!(params[0].to_vec::<f32>().unwrap(), before[0]);
        assert_eq!(metrics::counter("UncachedCompile"), 1);
    }
}

backend_test! {
    fn a_failed_check_in_a_captured_step_is_an_error_and_the_next_replay_works() {
        let w = Tensor::from_vec(vec![2.0f32], &[1]).unwrap();
        let mut step = capture(|x: &[Tensor]| {
            let a = x[0].masked_select(&x[0].gt_scalar(0.0));
            let b = x[1].masked_select(&x[1].gt_scalar(0.0));
            vec![(&(&a * &w) - &b).sum()]
        });
        let run = |step: &mut lazyxla::CapturedStep<_>, xs: Vec<f32>, ys: Vec<f32>| {
            let x = Tensor::from_vec(xs, &[4]).unwrap();
            let y = Tensor::from_vec(ys, &[4]).unwrap();
            step.run(&[x, y]).map(|r| r[0].item::<f32>().unwrap())
        };
        assert_eq!(run(&mut step, vec![1.0, 0.0, 2.0, 0.0], vec![0.0, 1.0, 1.0, 0.0]).unwrap(), 4.0);
        assert_eq!(run(&mut step, vec![3.0, 0.0, 0.0, 0.0], vec![0.0, 0.0, 0.0, 5.0]).unwrap(), 1.0);
        let e = err_text(run(&mut step, vec![1.0, 1.0, 0.0, 0.0], vec![1.0, 0.0, 0.0, 0.0]).unwrap_err());
        assert!(e.contains("they are 2 and 1"), "{e}");
        assert_eq!(run(&mut step, vec![0.0, 0.0, 1.0, 1.0], vec![1.0, 0.0, 1.0, 0.0]).unwrap(), 2.0);
        assert_eq!(step.recordings(), 1);
    }
}
