//! Reductions, matmul and softmax against hand-computed values, including
//! keepdim, negative dims, integer and bool inputs, empty tensors, the
//! `torch.matmul` cases (1-D, batched, broadcasting) and misuse messages.

mod common;

use common::{assert_close, panic_message};
use lazyxla::{DType, Tensor};

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

fn i64s(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

/// [[1, 2, 3], [4, 5, 6]]
fn m23() -> Tensor {
    f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
}

backend_test! {
    fn sum_all_and_over_dims() {
        let m = m23();
        let s = m.sum();
        assert_eq!(s.rank(), 0);
        assert_eq!(s.dtype(), DType::F32);
        assert_eq!(s.item::<f32>().unwrap(), 21.0);
        let s0 = m.sum_dims(&[0], false);
        assert_eq!(s0.concrete_shape().unwrap(), vec![3]);
        assert_eq!(s0.to_vec::<f32>().unwrap(), vec![5.0, 7.0, 9.0]);
        let s1 = m.sum_dims(&[1], true);
        assert_eq!(s1.concrete_shape().unwrap(), vec![2, 1]);
        assert_eq!(s1.to_vec::<f32>().unwrap(), vec![6.0, 15.0]);
        // Negative dims, and several dims at once in any order.
        assert_eq!(m.sum_dims(&[-1], false).to_vec::<f32>().unwrap(), vec![6.0, 15.0]);
        let both = m.sum_dims(&[1, 0], true);
        assert_eq!(both.concrete_shape().unwrap(), vec![1, 1]);
        assert_eq!(both.to_vec::<f32>().unwrap(), vec![21.0]);
        // A 3-D middle dim.
        let t = f32s(&(0..12).map(|i| i as f32).collect::<Vec<_>>(), &[2, 3, 2]);
        let r = t.sum_dims(&[1], false);
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![6.0, 9.0, 24.0, 27.0]);
        // An empty list of dims reduces nothing.
        assert_eq!(m.sum_dims::<usize>(&[], false).to_vec::<f32>().unwrap(), m.to_vec::<f32>().unwrap());
    }
}

backend_test! {
    fn sum_of_ints_bools_scalars_and_empty() {
        let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
        let s = i.sum();
        assert_eq!(s.dtype(), DType::I64);
        assert_eq!(s.item::<i64>().unwrap(), 6);
        let l = i64s(&[5, -7], &[2]).sum();
        assert_eq!(l.dtype(), DType::I64);
        assert_eq!(l.item::<i64>().unwrap(), -2);
        let b = Tensor::from_vec(vec![true, false, true, true], &[2, 2]).unwrap();
        assert_eq!(b.sum().dtype(), DType::I64);
        assert_eq!(b.sum().item::<i64>().unwrap(), 3);
        assert_eq!(b.sum_dims(&[0], false).to_vec::<i64>().unwrap(), vec![2, 1]);
        // Rank 0: the value itself.
        assert_eq!(Tensor::scalar(2.5f32).sum().item::<f32>().unwrap(), 2.5);
        // Empty: the identity.
        assert_eq!(Tensor::zeros(&[0], DType::F32).sum().item::<f32>().unwrap(), 0.0);
        let e = Tensor::zeros(&[0, 3], DType::F32).sum_dims(&[0], false);
        assert_eq!(e.concrete_shape().unwrap(), vec![3]);
        assert_eq!(e.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0]);
        let e = Tensor::zeros(&[0, 3], DType::F32).sum_dims(&[1], false);
        assert_eq!(e.concrete_shape().unwrap(), vec![0]);
    }
}

backend_test! {
    fn mean_all_and_over_dims() {
        let m = m23();
        assert_eq!(m.mean().item::<f32>().unwrap(), 3.5);
        assert_eq!(m.mean_dims(&[0], false).to_vec::<f32>().unwrap(), vec![2.5, 3.5, 4.5]);
        let r = m.mean_dims(&[-1], true);
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.0, 5.0]);
        // Integers give F32.
        let i = i64s(&[1, 2, 3, 5], &[4]);
        assert_eq!(i.mean().dtype(), DType::F32);
        assert_eq!(i.mean().item::<f32>().unwrap(), 2.75);
        // F64 stays F64.
        let d = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap().mean();
        assert_eq!(d.dtype(), DType::F64);
        assert_eq!(d.item::<f64>().unwrap(), 1.5);
        // The mean of nothing is NaN, as in PyTorch.
        assert!(Tensor::zeros(&[0], DType::F32).mean().item::<f32>().unwrap().is_nan());
    }
}

backend_test! {
    fn max_and_min() {
        let m = f32s(&[3.0, -1.0, 7.0, 0.0, 9.0, -4.0], &[2, 3]);
        assert_eq!(m.max().item::<f32>().unwrap(), 9.0);
        assert_eq!(m.min().item::<f32>().unwrap(), -4.0);
        assert_eq!(m.max_dims(&[0], false).to_vec::<f32>().unwrap(), vec![3.0, 9.0, 7.0]);
        assert_eq!(m.min_dims(&[1], false).to_vec::<f32>().unwrap(), vec![-1.0, -4.0]);
        let k = m.max_dims(&[-1], true);
        assert_eq!(k.concrete_shape().unwrap(), vec![2, 1]);
        assert_eq!(k.to_vec::<f32>().unwrap(), vec![7.0, 9.0]);
        assert_eq!(m.min_dims(&[0, 1], false).item::<f32>().unwrap(), -4.0);
        // Integers keep their dtype; all-negative values are handled.
        let i = i64s(&[-5, -2, -9], &[3]);
        assert_eq!(i.max().dtype(), DType::I64);
        assert_eq!(i.max().item::<i64>().unwrap(), -2);
        assert_eq!(i.min().item::<i64>().unwrap(), -9);
        // NaN propagates.
        assert!(f32s(&[1.0, f32::NAN, 2.0], &[3]).max().item::<f32>().unwrap().is_nan());
        // Over an empty dim with other dims left: an empty result.
        let e = Tensor::zeros(&[0, 3], DType::F32).max_dims(&[1], false);
        assert_eq!(e.concrete_shape().unwrap(), vec![0]);
    }
}

backend_test! {
    fn max_of_nothing_panics() {
        // PyTorch: "max(): Expected reduction dim to be specified for input.numel() == 0".
        let e = Tensor::zeros(&[0, 3], DType::F32);
        let msg = panic_message(|| {
            let _ = e.max();
        });
        assert!(msg.contains("max") && msg.contains("[0, 3]") && msg.contains("no elements"), "{msg}");
        let msg = panic_message(|| {
            let _ = e.min_dims(&[0], false);
        });
        assert!(msg.contains("min") && msg.contains("[0, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = e.argmax(0);
        });
        assert!(msg.contains("argmax") && msg.contains("[0, 3]"), "{msg}");
    }
}

backend_test! {
    fn argmax_and_argmin() {
        let m = f32s(&[3.0, 9.0, 9.0, 0.0, -2.0, 5.0], &[2, 3]);
        let a = m.argmax(1);
        assert_eq!(a.dtype(), DType::I64);
        assert_eq!(a.concrete_shape().unwrap(), vec![2]);
        // Ties give the first index.
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![1, 2]);
        assert_eq!(m.argmin(1).to_vec::<i64>().unwrap(), vec![0, 1]);
        assert_eq!(m.argmax(0).to_vec::<i64>().unwrap(), vec![0, 0, 0]);
        assert_eq!(m.argmin(-2).to_vec::<i64>().unwrap(), vec![1, 1, 1]);
        let i = i64s(&[4, -1, 4, -1], &[4]);
        let r = i.argmin(0);
        assert_eq!(r.rank(), 0);
        assert_eq!(r.item::<i64>().unwrap(), 1);
        assert_eq!(i.argmax(0).item::<i64>().unwrap(), 0);
    }
}

backend_test! {
    fn reductions_reject_bad_dims() {
        let m = m23();
        let msg = panic_message(|| {
            let _ = m.sum_dims(&[2], false);
        });
        assert!(msg.contains("sum_dims") && msg.contains("dimension 2") && msg.contains("rank 2") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = m.mean_dims(&[-3], false);
        });
        assert!(msg.contains("mean_dims") && msg.contains("-3") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = m.max_dims(&[1, -1], false);
        });
        assert!(msg.contains("max_dims") && msg.contains("repeat") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = m.argmax(5);
        });
        assert!(msg.contains("argmax") && msg.contains("dimension 5") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = Tensor::scalar(1.0f32).argmin(0);
        });
        assert!(msg.contains("argmin") && msg.contains("rank 0"), "{msg}");
    }
}

backend_test! {
    fn matmul_two_dimensional() {
        let a = m23();
        let b = f32s(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2]);
        let c = a.matmul(&b);
        assert_eq!(c.concrete_shape().unwrap(), vec![2, 2]);
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![4.0, 5.0, 10.0, 11.0]);
        // Integer matmul stays integer.
        let i = i64s(&[1, 2, 3, 4], &[2, 2]);
        let r = i.matmul(&i);
        assert_eq!(r.dtype(), DType::I64);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![7, 10, 15, 22]);
        // Mixed dtypes promote.
        let r = i.matmul(&f32s(&[0.5, 0.5], &[2, 1]));
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.5, 3.5]);
        // An empty contraction gives zeros.
        let z = Tensor::ones(&[2, 0], DType::F32).matmul(&Tensor::ones(&[0, 3], DType::F32));
        assert_eq!(z.concrete_shape().unwrap(), vec![2, 3]);
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    }
}

backend_test! {
    fn matmul_with_vectors() {
        let v = f32s(&[1.0, 2.0, 3.0], &[3]);
        let w = f32s(&[4.0, 5.0, 6.0], &[3]);
        // 1-D x 1-D: a dot product of rank 0.
        let d = v.matmul(&w);
        assert_eq!(d.rank(), 0);
        assert_eq!(d.item::<f32>().unwrap(), 32.0);
        // 2-D x 1-D: [2].
        let r = m23().matmul(&v);
        assert_eq!(r.concrete_shape().unwrap(), vec![2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![14.0, 32.0]);
        // 1-D x 2-D: [2] x [2, 3] -> [3].
        let r = f32s(&[1.0, -1.0], &[2]).matmul(&m23());
        assert_eq!(r.concrete_shape().unwrap(), vec![3]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![-3.0, -3.0, -3.0]);
        // 1-D x 3-D: [3] x [2, 3, 1] -> [2, 1].
        let b = f32s(&[1.0, 1.0, 1.0, 0.0, 1.0, 0.0], &[2, 3, 1]);
        let r = v.matmul(&b);
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![6.0, 2.0]);
        // 3-D x 1-D: [2, 1, 3] x [3] -> [2, 1].
        let a = f32s(&[1.0, 0.0, 0.0, 0.0, 0.0, 1.0], &[2, 1, 3]);
        let r = a.matmul(&w);
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![4.0, 6.0]);
    }
}

backend_test! {
    fn matmul_batched_and_broadcast() {
        // [2, 2, 2] x [2, 2, 1]: one product per batch.
        let a = f32s(&[1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 1.0, 0.0], &[2, 2, 2]);
        let b = f32s(&[1.0, 1.0, 2.0, 3.0], &[2, 2, 1]);
        let r = a.matmul(&b);
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 2, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.0, 7.0, 3.0, 2.0]);
        // [2, 2, 2] x [2, 1]: the matrix broadcasts over the batch.
        let r = a.matmul(&f32s(&[1.0, -1.0], &[2, 1]));
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 2, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![-1.0, -1.0, -1.0, 1.0]);
        // [2, 1, 1, 2] x [3, 2, 1] -> [2, 3, 1, 1]: batch dims broadcast both ways.
        let x = f32s(&[1.0, 0.0, 0.0, 1.0], &[2, 1, 1, 2]);
        let y = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2, 1]);
        let r = x.matmul(&y);
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 3, 1, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    }
}

backend_test! {
    fn matmul_misuse_panics_with_shapes() {
        let msg = panic_message(|| {
            let _ = m23().matmul(&m23());
        });
        assert!(msg.contains("matmul") && msg.contains("[2, 3]") && msg.contains("3 and 2"), "{msg}");
        let msg = panic_message(|| {
            let _ = f32s(&[1.0, 2.0], &[2]).matmul(&f32s(&[1.0, 2.0, 3.0], &[3]));
        });
        assert!(msg.contains("matmul") && msg.contains("[2]") && msg.contains("[3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = Tensor::scalar(1.0f32).matmul(&m23());
        });
        assert!(msg.contains("matmul") && msg.contains("[]") && msg.contains("mul"), "{msg}");
        // Batch dims that do not broadcast.
        let msg = panic_message(|| {
            let _ = Tensor::ones(&[2, 2, 2], DType::F32).matmul(&Tensor::ones(&[3, 2, 2], DType::F32));
        });
        assert!(msg.contains("matmul") && msg.contains("[2, 2, 2]") && msg.contains("[3, 2, 2]"), "{msg}");
    }
}

backend_test! {
    fn softmax_and_log_softmax() {
        let x = f32s(&[1.0, 2.0, 3.0, 1.0, 1.0, 1.0], &[2, 3]);
        let s = x.softmax(1);
        assert_eq!(s.concrete_shape().unwrap(), vec![2, 3]);
        let third = 1.0 / 3.0;
        assert_close(
            &s.to_vec::<f32>().unwrap(),
            &[0.090_030_57, 0.244_728_48, 0.665_240_94, third, third, third],
            1e-6,
        );
        assert_close(&x.softmax(-1).to_vec::<f32>().unwrap(), &s.to_vec::<f32>().unwrap(), 0.0);
        // Along dim 0: columns [1, 1], [2, 1], [3, 1].
        let s0 = x.softmax(0).to_vec::<f32>().unwrap();
        let (a, b) = (0.731_058_6, 0.268_941_43);
        assert_close(&s0, &[0.5, a, 0.880_797_1, 0.5, b, 0.119_202_92], 1e-6);
        let l = x.log_softmax(1);
        let ln3 = -(3.0f32.ln());
        assert_close(
            &l.to_vec::<f32>().unwrap(),
            &[-2.407_606, -1.407_606, -0.407_606, ln3, ln3, ln3],
            1e-5,
        );
        // Stable for large values.
        let big = f32s(&[1000.0, 1000.0], &[2]);
        assert_eq!(big.softmax(0).to_vec::<f32>().unwrap(), vec![0.5, 0.5]);
        assert_close(&big.log_softmax(0).to_vec::<f32>().unwrap(), &[-(2.0f32.ln()); 2], 1e-6);
        // Integers give F32.
        let i = i64s(&[0, 0], &[2]).softmax(0);
        assert_eq!(i.dtype(), DType::F32);
        assert_eq!(i.to_vec::<f32>().unwrap(), vec![0.5, 0.5]);
        // Empty along the softmax dim: an empty result, no error.
        let e = Tensor::zeros(&[0, 3], DType::F32);
        assert_eq!(e.softmax(0).concrete_shape().unwrap(), vec![0, 3]);
        assert_eq!(e.log_softmax(0).concrete_shape().unwrap(), vec![0, 3]);
        let msg = panic_message(|| {
            let _ = x.softmax(2);
        });
        assert!(msg.contains("softmax") && msg.contains("dimension 2") && msg.contains("[2, 3]"), "{msg}");
    }
}

backend_test! {
    fn a_static_matrix_times_a_batch_from_a_dynamic_zone() {
        // The broadcast of `m` to the batch `[<=4, 2, 3]` names a size
        // that only the other operand's graph defines (it was a trace
        // error: "size variable .. is neither computed nor defined").
        let v = f32s(&[1.0, -1.0, 2.0, 3.0], &[4]);
        let sel = v.masked_select(&v.gt_scalar(0.0)); // [<=4], 3 real
        let batch = sel.reshape(&[-1, 1, 1]).expand(&[sel.size(0), 3.into(), 2.into()]);
        let m = f32s(&[1.0, 0.0, 1.0, 0.0, 1.0, 1.0], &[2, 3]);
        let y = m.matmul(&batch); // [<=4, 2, 2]
        let want: Vec<f32> = [1.0f32, 2.0, 3.0].iter().flat_map(|&s| [2.0 * s, 2.0 * s, 2.0 * s, 2.0 * s]).collect();
        assert_eq!(y.to_vec::<f32>().unwrap(), want);
    }
}
