//! Creating tensors, reading them back, and metadata: every constructor,
//! every element type, empty and rank-0 shapes, `Display`, and the errors of
//! misuse. Metadata never runs anything.

mod common;

use common::panic_message;
use lazyxla::{metrics, DType, SymInt, Tensor};
use ndarray::{ArrayD, IxDyn};

backend_test! {
    fn from_vec_and_from_slice_for_every_element_type() {
        let f = Tensor::from_vec(vec![1.5f32, -2.0, 3.25, 0.0, 5.0, 6.0], &[2, 3]).unwrap();
        assert_eq!(f.dtype(), DType::F32);
        assert_eq!(f.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 3.25, 0.0, 5.0, 6.0]);
        let d = Tensor::from_vec(vec![0.1f64, 1e300], &[2]).unwrap();
        assert_eq!(d.dtype(), DType::F64);
        assert_eq!(d.to_vec::<f64>().unwrap(), vec![0.1, 1e300]);
        let i = Tensor::from_vec(vec![i32::MIN, i32::MAX], &[2, 1]).unwrap();
        assert_eq!(i.dtype(), DType::I32);
        assert_eq!(i.to_vec::<i32>().unwrap(), vec![i32::MIN, i32::MAX]);
        let l = Tensor::from_slice(&[i64::MIN, 0, i64::MAX], &[3]).unwrap();
        assert_eq!(l.dtype(), DType::I64);
        assert_eq!(l.to_vec::<i64>().unwrap(), vec![i64::MIN, 0, i64::MAX]);
        let b = Tensor::from_slice(&[true, false, true, true], &[2, 2]).unwrap();
        assert_eq!(b.dtype(), DType::Bool);
        assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, false, true, true]);
        // Empty and rank 0.
        let e = Tensor::from_vec(Vec::<f32>::new(), &[0, 4]).unwrap();
        assert_eq!(e.concrete_shape().unwrap(), vec![0, 4]);
        assert!(e.to_vec::<f32>().unwrap().is_empty());
        let s = Tensor::from_vec(vec![9i64], &[]).unwrap();
        assert_eq!(s.rank(), 0);
        assert_eq!(s.item::<i64>().unwrap(), 9);
    }
}

backend_test! {
    fn from_vec_rejects_a_wrong_length() {
        let e = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[2, 2]).unwrap_err().to_string();
        assert!(e.starts_with("from_vec") && e.contains("3 elements") && e.contains("[2, 2]") && e.contains("4 elements"), "{e}");
        let e = Tensor::from_slice(&[1i64], &[0]).unwrap_err().to_string();
        assert!(e.contains("1 elements") && e.contains("[0]"), "{e}");
    }
}

backend_test! {
    fn scalar_constructor() {
        let s = Tensor::scalar(2.5f64);
        assert_eq!(s.dtype(), DType::F64);
        assert_eq!(s.rank(), 0);
        assert!(s.sizes().is_empty());
        assert_eq!(s.concrete_shape().unwrap(), Vec::<usize>::new());
        assert_eq!(s.item::<f64>().unwrap(), 2.5);
        assert!(Tensor::scalar(true).item::<bool>().unwrap());
        assert_eq!(Tensor::scalar(-3i32).item::<i32>().unwrap(), -3);
        assert_eq!(Tensor::scalar(7i64).to_vec::<i64>().unwrap(), vec![7]);
    }
}

backend_test! {
    fn zeros_ones_full() {
        let z = Tensor::zeros(&[2, 3], DType::F32);
        assert_eq!(z.dtype(), DType::F32);
        assert_eq!(z.concrete_shape().unwrap(), vec![2, 3]);
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 6]);
        assert_eq!(Tensor::ones(&[2], DType::I64).to_vec::<i64>().unwrap(), vec![1, 1]);
        assert_eq!(Tensor::ones(&[1], DType::Bool).to_vec::<bool>().unwrap(), vec![true]);
        assert_eq!(Tensor::zeros(&[2], DType::Bool).to_vec::<bool>().unwrap(), vec![false, false]);
        let f = Tensor::full(&[3], -1.5, DType::F64);
        assert_eq!(f.dtype(), DType::F64);
        assert_eq!(f.to_vec::<f64>().unwrap(), vec![-1.5; 3]);
        // A fractional value truncates into an integer dtype.
        assert_eq!(Tensor::full(&[2], 2.9, DType::I32).to_vec::<i32>().unwrap(), vec![2, 2]);
        // Rank 0 and empty.
        let s = Tensor::full(&[], 4.0, DType::F32);
        assert_eq!(s.rank(), 0);
        assert_eq!(s.item::<f32>().unwrap(), 4.0);
        let e = Tensor::ones(&[3, 0], DType::F32);
        assert_eq!(e.concrete_shape().unwrap(), vec![3, 0]);
        assert!(e.to_vec::<f32>().unwrap().is_empty());
        // _like variants keep shape and dtype.
        let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
        assert_eq!(i.zeros_like().to_vec::<i32>().unwrap(), vec![0, 0, 0]);
        assert_eq!(i.ones_like().to_vec::<i32>().unwrap(), vec![1, 1, 1]);
        assert_eq!(i.full_like(5.0).to_vec::<i32>().unwrap(), vec![5, 5, 5]);
    }
}

backend_test! {
    fn arange_and_arange_sym() {
        let a = Tensor::arange(5);
        assert_eq!(a.dtype(), DType::I64);
        assert!(!a.is_dynamic());
        assert_eq!(a.size(0).to_string(), "5");
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(Tensor::arange(1).to_vec::<i64>().unwrap(), vec![0]);
        let e = Tensor::arange(0);
        assert_eq!(e.concrete_shape().unwrap(), vec![0]);
        assert!(e.to_vec::<i64>().unwrap().is_empty());
        // A negative end gives an empty range, not an error.
        assert_eq!(Tensor::arange(-3).concrete_shape().unwrap(), vec![0]);
        // arange_sym of a static size is static.
        let s = Tensor::arange_sym(&SymInt::from(3));
        assert!(!s.is_dynamic());
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![0, 1, 2]);
        // Of an expression of static sizes.
        let t = Tensor::zeros(&[2, 3], DType::F32);
        let n = t.size(0) * t.size(1) - 1;
        assert_eq!(Tensor::arange_sym(&n).to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 4]);
        // Usable in arithmetic with floats.
        assert_eq!((Tensor::arange(3) * 0.5).to_vec::<f32>().unwrap(), vec![0.0, 0.5, 1.0]);
    }
}

backend_test! {
    fn rand_and_randn_are_seeded() {
        let a = Tensor::rand(&[4, 5], 7);
        let b = Tensor::rand(&[4, 5], 7);
        let c = Tensor::rand(&[4, 5], 8);
        assert_eq!(a.dtype(), DType::F32);
        assert_eq!(a.concrete_shape().unwrap(), vec![4, 5]);
        let (va, vb, vc) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap(), c.to_vec::<f32>().unwrap());
        assert_eq!(va, vb);
        assert_ne!(va, vc);
        assert!(va.iter().all(|&x| (0.0..1.0).contains(&x)), "{va:?}");
        // Not all the same value.
        assert!(va.iter().any(|&x| x != va[0]));
        let n = Tensor::randn(&[2000], 3);
        assert_eq!(n.dtype(), DType::F32);
        let v = n.to_vec::<f32>().unwrap();
        assert_eq!(v, Tensor::randn(&[2000], 3).to_vec::<f32>().unwrap());
        assert_ne!(v, Tensor::randn(&[2000], 4).to_vec::<f32>().unwrap());
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / 2000.0;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / 2000.0;
        assert!(mean.abs() < 0.1, "mean {mean}");
        assert!((var - 1.0).abs() < 0.15, "variance {var}");
        assert!(v.iter().any(|&x| x < -1.0) && v.iter().any(|&x| x > 1.0));
        // Empty.
        assert!(Tensor::rand(&[0], 1).to_vec::<f32>().unwrap().is_empty());
    }
}

backend_test! {
    fn ndarray_round_trip() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1i64, 2, 3, 4, 5, 6]).unwrap();
        let t = Tensor::from(a.clone());
        assert_eq!(t.dtype(), DType::I64);
        assert_eq!(t.concrete_shape().unwrap(), vec![2, 3]);
        assert_eq!(t.to_ndarray::<i64>().unwrap(), a);
        // A non-standard layout (a transposed view) is taken in logical order.
        let tr = a.clone().reversed_axes();
        let t = Tensor::from(tr.clone());
        assert_eq!(t.concrete_shape().unwrap(), vec![3, 2]);
        assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 4, 2, 5, 3, 6]);
        assert_eq!(t.to_ndarray::<i64>().unwrap(), tr);
        // Results of ops come back with their shape.
        let r = (Tensor::from(a.mapv(|x| x as f32)) * 2.0).to_ndarray::<f32>().unwrap();
        assert_eq!(r.shape(), &[2, 3]);
        assert_eq!(r[[1, 2]], 12.0);
        // Rank 0 and empty.
        let s = Tensor::from(ArrayD::from_elem(IxDyn(&[]), true));
        assert_eq!(s.rank(), 0);
        assert!(s.item::<bool>().unwrap());
        let e = Tensor::from(ArrayD::<f64>::zeros(IxDyn(&[0, 2])));
        assert_eq!(e.to_ndarray::<f64>().unwrap().shape(), &[0, 2]);
    }
}

backend_test! {
    fn reading_with_the_wrong_type_or_count_is_an_error() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let e = t.to_vec::<i64>().unwrap_err().to_string();
        assert!(e.contains("f32") && e.contains("i64") && e.contains("to_dtype"), "{e}");
        let e = t.to_ndarray::<f64>().unwrap_err().to_string();
        assert!(e.contains("f32") && e.contains("f64"), "{e}");
        let e = t.item::<f32>().unwrap_err().to_string();
        assert!(e.starts_with("item") && e.contains("2 elements") && e.contains("[2]"), "{e}");
        let e = Tensor::zeros(&[0], DType::F32).item::<f32>().unwrap_err().to_string();
        assert!(e.contains("0 elements"), "{e}");
        // A one-element tensor of any rank has an item.
        assert_eq!(Tensor::ones(&[1, 1], DType::F32).item::<f32>().unwrap(), 1.0);
        // The tensor is still fine after the errors.
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    }
}

backend_test! {
    fn display_prints_values() {
        let i = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).unwrap();
        assert_eq!(i.to_string(), "tensor([[1, 2],\n        [3, 4]], dtype=i64)");
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(b.to_string(), "tensor([ true, false], dtype=bool)");
        assert_eq!(Tensor::scalar(3i32).to_string(), "tensor(3, dtype=i32)");
        let f = Tensor::from_vec(vec![1.0f32, -2.5], &[2]).unwrap();
        assert_eq!(f.to_string(), "tensor([ 1.0000, -2.5000], dtype=f32)");
        // One format per tensor: whole numbers, scientific when magnitudes
        // span too much, and PyTorch's summary past 1000 elements.
        let w = Tensor::from_vec(vec![1.0f32, -20.0, f32::NAN], &[3]).unwrap();
        assert_eq!(w.to_string(), "tensor([  1., -20.,  nan], dtype=f32)");
        let e = Tensor::from_vec(vec![1e-5f64, 2.0], &[2]).unwrap();
        assert_eq!(e.to_string(), "tensor([1.0000e-05, 2.0000e+00], dtype=f64)");
        let big = Tensor::arange(2000).reshape(&[2, 20, 50]);
        let s = big.to_string();
        assert!(s.starts_with("tensor([[[   0,    1,    2, ...,   47,   48,   49],\n"), "{s}");
        assert!(s.contains("         ...,\n") && s.contains("\n\n        [[1000, "), "{s}");
        assert!(s.ends_with("[1950, 1951, 1952, ..., 1997, 1998, 1999]]], dtype=i64)"), "{s}");
        // Display forces the computation.
        let p = &i * 2i64;
        assert_eq!(format!("{p}"), "tensor([[2, 4],\n        [6, 8]], dtype=i64)");
        assert_eq!(Tensor::zeros(&[0], DType::F32).to_string(), "tensor([], dtype=f32)");
    }
}

backend_test! {
    fn metadata_never_runs_anything() {
        let a = Tensor::from_vec(vec![1.0f32; 6], &[2, 3]).unwrap();
        let p = (&a * 2.0).unsqueeze(0).to_dtype(DType::F64);
        assert_eq!(p.dtype(), DType::F64);
        assert_eq!(p.rank(), 3);
        assert_eq!(p.size(0).as_static(), Some(1));
        assert_eq!(p.size(-1).as_static(), Some(3));
        assert_eq!(p.size(1usize).to_string(), "2");
        assert_eq!(p.sizes().iter().map(|s| s.as_static().unwrap()).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(p.upper_bounds(), vec![1, 2, 3]);
        assert!(!p.is_dynamic());
        assert!(!p.size(0).is_dynamic());
        assert_eq!(p.shape_string(), "[1, 2, 3]");
        assert_eq!(metrics::counter("ExecuteGraph"), 0);
        assert_eq!(metrics::counter("UncachedCompile"), 0);
        // Static concrete_shape runs nothing either.
        assert_eq!(p.concrete_shape().unwrap(), vec![1, 2, 3]);
        assert_eq!(metrics::counter("ExecuteGraph"), 0);
        assert_eq!(metrics::counter("SizeMaterialization"), 0);
        // Scalars.
        let s = Tensor::scalar(1.0f32);
        assert_eq!((s.rank(), s.upper_bounds()), (0, vec![]));
    }
}

backend_test! {
    fn out_of_range_dims_panic_with_a_clear_message() {
        let t = Tensor::zeros(&[2, 3], DType::F32);
        let msg = panic_message(|| {
            let _ = t.size(2);
        });
        assert!(
            msg.starts_with("size") && msg.contains("dimension 2") && msg.contains("rank 2") && msg.contains("[2, 3]") && msg.contains("negative"),
            "{msg}"
        );
        let msg = panic_message(|| {
            let _ = t.size(-3);
        });
        assert!(msg.contains("dimension -3") && msg.contains("[2, 3]"), "{msg}");
        assert_eq!(t.size(-2).as_static(), Some(2));
        let msg = panic_message(|| {
            let _ = Tensor::scalar(1i64).size(0);
        });
        assert!(msg.contains("rank 0") && msg.contains("[]"), "{msg}");
        // The tensor is still usable.
        assert_eq!(t.sum().item::<f32>().unwrap(), 0.0);
    }
}

backend_test! {
    fn tensors_on_the_default_device() {
        let t = Tensor::zeros(&[1], DType::F32);
        let dev = lazyxla::Device::default();
        assert_eq!(t.device().name(), dev.name());
        let moved = t.to_device(&dev).unwrap();
        assert_eq!(moved.to_vec::<f32>().unwrap(), vec![0.0]);
    }
}
