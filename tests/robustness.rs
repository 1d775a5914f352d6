//! Bad and extreme inputs: precise float sums, NaN semantics, shapes too
//! large to exist, a dynamic bound of 0, and the messages users get. Every
//! case runs on both backends; none may abort the process, and the runtime
//! stays usable after each error.

mod common;

use common::panic_message;
use lazyxla::{mark_step, DType, Tensor};

/// A tensor computes after the failures above: nothing was lost.
fn still_usable() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    assert_eq!((&x * 2.0).sum().item::<f32>().unwrap(), 12.0);
    mark_step().unwrap();
}

backend_test! {
    fn float_sums_are_as_precise_as_pairwise_summation() {
        // 1.0, then 10^7 values of 1e-8: exactly 1.1. A naive f32 loop
        // stays at 1.0 (each 1e-8 is below half an ulp of 1.0).
        let n = 10_000_000;
        let mut v = vec![1e-8f32; n + 1];
        v[0] = 1.0;
        let x = Tensor::from_vec(v, &[n + 1]).unwrap();
        let s = x.sum().item::<f32>().unwrap();
        assert!((s - 1.1).abs() < 1e-5, "sum {s}, want 1.1");

        // The mean of 10^7 uniform values, against an f64 sum on the host.
        let u = Tensor::rand(&[n], 7);
        let host: f64 = u.to_vec::<f32>().unwrap().iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let m = u.mean().item::<f32>().unwrap() as f64;
        assert!(((m - host) / host).abs() < 1e-5, "mean {m}, want {host}");

        // The same along one dim of a matrix.
        let rows = Tensor::from_vec(vec![1e-8f32; 2 * 4_000_000], &[2, 4_000_000]).unwrap();
        let r = rows.sum_dims(&[1], false).to_vec::<f32>().unwrap();
        for x in r {
            assert!((x - 0.04).abs() < 1e-7, "row sum {x}, want 0.04");
        }
    }
}

backend_test! {
    fn argmax_and_argmin_pick_the_first_nan_as_pytorch() {
        let nan = f32::NAN;
        let x = Tensor::from_vec(vec![1.0f32, nan, f32::INFINITY, f32::NEG_INFINITY, 0.0], &[5]).unwrap();
        assert_eq!(x.argmax(0).item::<i64>().unwrap(), 1);
        assert_eq!(x.argmin(0).item::<i64>().unwrap(), 1);
        assert!(x.max().item::<f32>().unwrap().is_nan());
        assert!(x.min().item::<f32>().unwrap().is_nan());

        // Wherever the NaNs are, the first one wins; without one, the
        // first extremum.
        let y = Tensor::from_vec(
            vec![
                nan, 5.0, nan, 1.0, // NaN first
                2.0, 7.0, 7.0, nan, // NaN last
                3.0, 9.0, 9.0, -1.0, // no NaN: first max, last min
                f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY,
            ],
            &[4, 4],
        )
        .unwrap();
        assert_eq!(y.argmax(1).to_vec::<i64>().unwrap(), vec![0, 3, 1, 0]);
        assert_eq!(y.argmin(1).to_vec::<i64>().unwrap(), vec![0, 3, 3, 0]);
        assert_eq!(y.argmax(0).to_vec::<i64>().unwrap(), vec![0, 2, 0, 1]);

        // The same inside a dynamic zone: padding never wins.
        let z = Tensor::from_vec(vec![-3.0f32, nan, -1.0, -2.0], &[4]).unwrap();
        let sel = z.masked_select(&z.ne_scalar(-1.0));
        assert_eq!(sel.argmax(0).item::<i64>().unwrap(), 1);
        let neg = Tensor::from_vec(vec![-3.0f32, -5.0, -4.0], &[3]).unwrap().mark_dynamic(0, 8);
        assert_eq!(neg.argmax(0).item::<i64>().unwrap(), 0);
        assert_eq!(neg.argmin(0).item::<i64>().unwrap(), 1);
    }
}

backend_test! {
    fn shapes_too_large_to_exist_are_errors_not_aborts() {
        // 2^64 elements: no backend can represent the count.
        let msg = panic_message(|| {
            let _ = Tensor::zeros(&[1 << 62, 4], DType::F32);
        });
        assert!(msg.contains("too large") && msg.contains("zeros") || msg.contains("broadcast"), "{msg}");
        // A size above i64::MAX does not wrap into a negative one.
        let msg = panic_message(|| {
            let _ = Tensor::ones(&[usize::MAX], DType::F32);
        });
        assert!(msg.contains("too large"), "{msg}");
        // A dynamic bound above XLA's i32 sizes.
        let x = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap();
        let e = x.try_mark_dynamic(0, 1 << 40).unwrap_err().to_string();
        assert!(e.contains("bound") && e.contains("2147483647"), "{e}");
        // from_vec with an overflowing shape says so instead of a wrapped count.
        let e = Tensor::from_vec(vec![1.0f32; 4], &[1 << 40, 1 << 40]).unwrap_err().to_string();
        assert!(e.contains("more elements than a 64-bit count"), "{e}");
        let msg = panic_message(|| {
            let _ = Tensor::rand(&[1 << 62, 8], 0);
        });
        assert!(msg.contains("rand"), "{msg}");
        still_usable();
    }
}

backend_test! {
    fn a_result_too_large_for_memory_is_an_error_that_names_the_tensor() {
        // 2^46 f32 (256 TiB): representable, but no machine holds it.
        let big = Tensor::zeros(&[1 << 46], DType::F32);
        let small = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap() * 3.0;
        let e = mark_step().unwrap_err().to_string();
        assert!(e.to_lowercase().contains("memory") || e.contains("allocate"), "{e}");
        // The message names the tensor that blocks the step, and it keeps
        // failing while that tensor is alive.
        assert!(e.contains("f32[70368744177664] from broadcast"), "{e}");
        let again = mark_step().unwrap_err().to_string();
        assert!(again.contains("f32[70368744177664] from broadcast"), "{again}");
        // Nothing was lost: the other pending tensor computes once the
        // culprit is gone.
        drop(big);
        assert_eq!(small.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
        still_usable();
    }
}

backend_test! {
    fn a_dynamic_dimension_with_bound_zero_is_an_empty_static_one() {
        let x = Tensor::from_vec(Vec::<f32>::new(), &[0]).unwrap().mark_dynamic(0, 0);
        assert_eq!(x.sum().item::<f32>().unwrap(), 0.0);
        assert_eq!(x.to_vec::<f32>().unwrap(), Vec::<f32>::new());
        let y = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap().mark_dynamic(0, 0);
        assert_eq!(y.sum_dims(&[0], false).to_vec::<f32>().unwrap(), vec![0.0; 3]);
        still_usable();
    }
}

backend_test! {
    fn reshape_errors_say_how_to_fix_the_shape() {
        let x = Tensor::zeros(&[2, 3], DType::F32);
        let msg = panic_message(|| {
            let _ = x.reshape(&[4, 2]);
        });
        assert!(msg.contains("6 elements") && msg.contains("8 elements") && msg.contains("-1"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.reshape(&[4, -1]);
        });
        assert!(msg.contains("not a multiple of 4"), "{msg}");
    }
}
