//! Elementwise ops against hand-computed values: arithmetic with every
//! operand kind, broadcasting, PyTorch's dtype promotion, scalars, empty
//! tensors, unary functions, comparisons, logic, `where_cond`, `to_dtype`,
//! and the messages of misuse (after which the runtime stays usable).

mod common;

use common::{assert_close, assert_close64, panic_message};
use lazyxla::{mark_step, metrics, DType, Tensor};

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

fn i64s(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

backend_test! {
    fn arithmetic_methods_same_shape() {
        let a = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let b = f32s(&[0.5, -1.0, 2.0, 8.0], &[2, 2]);
        assert_eq!(a.add(&b).to_vec::<f32>().unwrap(), vec![1.5, 1.0, 5.0, 12.0]);
        assert_eq!(a.sub(&b).to_vec::<f32>().unwrap(), vec![0.5, 3.0, 1.0, -4.0]);
        assert_eq!(a.mul(&b).to_vec::<f32>().unwrap(), vec![0.5, -2.0, 6.0, 32.0]);
        assert_eq!(a.div(&b).to_vec::<f32>().unwrap(), vec![2.0, -2.0, 1.5, 0.5]);
        let s = a.add(&b);
        assert_eq!(s.dtype(), DType::F32);
        assert_eq!(s.concrete_shape().unwrap(), vec![2, 2]);
    }
}

backend_test! {
    fn std_ops_on_every_operand_combination() {
        let a = f32s(&[1.0, 2.0, 3.0], &[3]);
        let b = f32s(&[4.0, 5.0, 6.0], &[3]);
        assert_eq!((&a + &b).to_vec::<f32>().unwrap(), vec![5.0, 7.0, 9.0]);
        assert_eq!((&a - b.clone()).to_vec::<f32>().unwrap(), vec![-3.0, -3.0, -3.0]);
        assert_eq!((a.clone() * &b).to_vec::<f32>().unwrap(), vec![4.0, 10.0, 18.0]);
        assert_eq!((b.clone() / a.clone()).to_vec::<f32>().unwrap(), vec![4.0, 2.5, 2.0]);
        // f64 on either side.
        assert_eq!((&a + 1.5).to_vec::<f32>().unwrap(), vec![2.5, 3.5, 4.5]);
        assert_eq!((a.clone() - 1.0).to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0]);
        assert_eq!((&a * 2.0).to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
        assert_eq!((&a / 4.0).to_vec::<f32>().unwrap(), vec![0.25, 0.5, 0.75]);
        assert_eq!((10.0 + &a).to_vec::<f32>().unwrap(), vec![11.0, 12.0, 13.0]);
        assert_eq!((10.0 - &a).to_vec::<f32>().unwrap(), vec![9.0, 8.0, 7.0]);
        assert_eq!((3.0 * a.clone()).to_vec::<f32>().unwrap(), vec![3.0, 6.0, 9.0]);
        assert_eq!((1.0 - a.clone()).to_vec::<f32>().unwrap(), vec![0.0, -1.0, -2.0]);
        // i64 on either side.
        assert_eq!((&a + 2i64).to_vec::<f32>().unwrap(), vec![3.0, 4.0, 5.0]);
        assert_eq!((&a / 2i64).to_vec::<f32>().unwrap(), vec![0.5, 1.0, 1.5]);
        assert_eq!((2i64 * &a).to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
        assert_eq!((5i64 - &a).to_vec::<f32>().unwrap(), vec![4.0, 3.0, 2.0]);
        // Unary minus.
        assert_eq!((-&a).to_vec::<f32>().unwrap(), vec![-1.0, -2.0, -3.0]);
        assert_eq!((-a.clone()).to_vec::<f32>().unwrap(), vec![-1.0, -2.0, -3.0]);
        assert_eq!((-&i64s(&[3, -4], &[2])).to_vec::<i64>().unwrap(), vec![-3, 4]);
    }
}

backend_test! {
    fn scalar_methods() {
        let a = f32s(&[2.0, -4.0], &[2]);
        assert_eq!(a.add_scalar(1.0).to_vec::<f32>().unwrap(), vec![3.0, -3.0]);
        assert_eq!(a.sub_scalar(1.0).to_vec::<f32>().unwrap(), vec![1.0, -5.0]);
        assert_eq!(a.mul_scalar(-0.5).to_vec::<f32>().unwrap(), vec![-1.0, 2.0]);
        assert_eq!(a.div_scalar(4.0).to_vec::<f32>().unwrap(), vec![0.5, -1.0]);
        assert_eq!(a.rsub_scalar(1.0).to_vec::<f32>().unwrap(), vec![-1.0, 5.0]);
        assert_eq!(a.clamp(-1.0, 1.0).to_vec::<f32>().unwrap(), vec![1.0, -1.0]);
        // Division by zero follows IEEE.
        let z = f32s(&[1.0, -1.0], &[2]).div_scalar(0.0).to_vec::<f32>().unwrap();
        assert_eq!(z, vec![f32::INFINITY, f32::NEG_INFINITY]);
    }
}

backend_test! {
    fn broadcasting_right_aligned_and_size_one() {
        let m = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let row = f32s(&[10.0, 20.0, 30.0], &[3]);
        let col = f32s(&[100.0, 200.0], &[2, 1]);
        let r = &m + &row;
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 3]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
        // The broadcast operand may be on the left.
        assert_eq!((&row - &m).to_vec::<f32>().unwrap(), vec![9.0, 18.0, 27.0, 6.0, 15.0, 24.0]);
        assert_eq!((&m * &col).to_vec::<f32>().unwrap(), vec![100.0, 200.0, 300.0, 800.0, 1000.0, 1200.0]);
        // [2, 1] with [1, 3] stretches both.
        let outer = &col + &f32s(&[1.0, 2.0, 3.0], &[1, 3]);
        assert_eq!(outer.concrete_shape().unwrap(), vec![2, 3]);
        assert_eq!(outer.to_vec::<f32>().unwrap(), vec![101.0, 102.0, 103.0, 201.0, 202.0, 203.0]);
        // A rank-0 tensor broadcasts to anything.
        let s = Tensor::scalar(2.0f32);
        assert_eq!((&m / &s).to_vec::<f32>().unwrap(), vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0]);
        // Leading dims are added: [3] with [2, 1, 3] -> [2, 1, 3]; [2,1,1] with [3] -> [2,1,3].
        let t = f32s(&[1.0, 1.0], &[2, 1, 1]) + &row;
        assert_eq!(t.concrete_shape().unwrap(), vec![2, 1, 3]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![11.0, 21.0, 31.0, 11.0, 21.0, 31.0]);
    }
}

backend_test! {
    fn promotion_between_tensors() {
        let i = i64s(&[1, 2, 3], &[3]);
        let f = f32s(&[0.5, 0.5, 0.5], &[3]);
        let b = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
        let i32t = Tensor::from_vec(vec![10i32, 20, 30], &[3]).unwrap();
        let f64t = Tensor::from_vec(vec![0.25f64, 0.25, 0.25], &[3]).unwrap();

        // int + float -> float.
        let r = &i + &f;
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.5, 2.5, 3.5]);
        assert_eq!((&f + &i).dtype(), DType::F32);
        // bool + int -> int.
        let r = &b + &i32t;
        assert_eq!(r.dtype(), DType::I32);
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![11, 20, 31]);
        // i32 + i64 -> i64; f32 + f64 -> f64; i32 + f64 -> f64.
        assert_eq!((&i32t + &i).dtype(), DType::I64);
        assert_eq!((&i32t + &i).to_vec::<i64>().unwrap(), vec![11, 22, 33]);
        let r = &f + &f64t;
        assert_eq!(r.dtype(), DType::F64);
        assert_eq!(r.to_vec::<f64>().unwrap(), vec![0.75, 0.75, 0.75]);
        assert_eq!((&i32t * &f64t).to_vec::<f64>().unwrap(), vec![2.5, 5.0, 7.5]);
        // bool * float -> float.
        assert_eq!((&b * &f).to_vec::<f32>().unwrap(), vec![0.5, 0.0, 0.5]);
        // A rank-0 tensor does not widen a dimensioned tensor of its category...
        let r = &f + &Tensor::scalar(1.0f64);
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.5, 1.5, 1.5]);
        assert_eq!((&i32t + &Tensor::scalar(1i64)).dtype(), DType::I32);
        // ...but lifts the category, keeping its own dtype.
        let r = &i32t + &Tensor::scalar(0.5f64);
        assert_eq!(r.dtype(), DType::F64);
        assert_eq!(r.to_vec::<f64>().unwrap(), vec![10.5, 20.5, 30.5]);
        // Two rank-0 tensors promote as dimensioned ones do.
        let r = &Tensor::scalar(2i32) + &Tensor::scalar(0.5f64);
        assert_eq!(r.dtype(), DType::F64);
        assert_eq!(r.rank(), 0);
        assert_eq!(r.item::<f64>().unwrap(), 2.5);
    }
}

backend_test! {
    fn promotion_with_rust_numbers() {
        let f = f32s(&[1.0, 2.0], &[2]);
        let f64t = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
        let i = i64s(&[7, -7], &[2]);
        let i32t = Tensor::from_vec(vec![7i32, -7], &[2]).unwrap();
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();

        // An f64 does not widen a float tensor.
        assert_eq!((&f + 0.5).dtype(), DType::F32);
        assert_eq!((&f64t + 0.5).dtype(), DType::F64);
        // An i64 literal keeps an int tensor's dtype.
        let r = &i + 3i64;
        assert_eq!(r.dtype(), DType::I64);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![10, -4]);
        let r = &i32t * 2i64;
        assert_eq!(r.dtype(), DType::I32);
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![14, -14]);
        let r = 1i64 - &i32t;
        assert_eq!(r.dtype(), DType::I32);
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![-6, 8]);
        // A float number lifts an int tensor to the default float, F32.
        let r = &i + 0.5;
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![7.5, -6.5]);
        assert_eq!(i32t.mul_scalar(0.5).to_vec::<f32>().unwrap(), vec![3.5, -3.5]);
        // Integer division is true division (F32), as torch.div.
        let r = &i / 2i64;
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.5, -3.5]);
        assert_eq!(i.div(&i64s(&[2, 4], &[2])).to_vec::<f32>().unwrap(), vec![3.5, -1.75]);
        // bool + int number -> i64.
        let r = &b + 3i64;
        assert_eq!(r.dtype(), DType::I64);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![4, 3]);
        // bool * float number -> f32.
        let r = &b * 2.5;
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.5, 0.0]);
        // An integral f64 on an int tensor through the methods stays float
        // (the method takes f64), while `+ 3i64` stays int (see above).
        assert_eq!(i.add_scalar(1.0).dtype(), DType::F32);
    }
}

backend_test! {
    fn scalar_and_empty_operands() {
        // rank 0 with rank 0.
        let a = Tensor::scalar(3.0f32);
        let b = Tensor::scalar(4.0f32);
        let c = &a * &b + 1.0;
        assert_eq!(c.rank(), 0);
        assert_eq!(c.concrete_shape().unwrap(), Vec::<usize>::new());
        assert_eq!(c.item::<f32>().unwrap(), 13.0);
        // Empty tensors: elementwise ops give empty results of the right shape.
        let e = Tensor::zeros(&[0, 3], DType::F32);
        let r = (&e + &f32s(&[1.0, 2.0, 3.0], &[3])).exp();
        assert_eq!(r.concrete_shape().unwrap(), vec![0, 3]);
        assert!(r.to_vec::<f32>().unwrap().is_empty());
        let r = &f32s(&[], &[0]) * 2.0;
        assert_eq!(r.concrete_shape().unwrap(), vec![0]);
        assert!(r.to_vec::<f32>().unwrap().is_empty());
        // [0] broadcasts against [1] (size 1 stretches to 0).
        let r = &f32s(&[], &[0]) + &f32s(&[5.0], &[1]);
        assert_eq!(r.concrete_shape().unwrap(), vec![0]);
        assert!(r.gt_scalar(0.0).to_vec::<bool>().unwrap().is_empty());
    }
}

backend_test! {
    fn unary_functions() {
        let x = f32s(&[-2.0, -0.5, 0.0, 1.0, 2.0], &[5]);
        assert_eq!(x.neg().to_vec::<f32>().unwrap(), vec![2.0, 0.5, -0.0, -1.0, -2.0]);
        assert_eq!(x.abs().to_vec::<f32>().unwrap(), vec![2.0, 0.5, 0.0, 1.0, 2.0]);
        assert_eq!(x.relu().to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0, 1.0, 2.0]);
        assert_close(
            &x.exp().to_vec::<f32>().unwrap(),
            &[0.135_335_28, 0.606_530_66, 1.0, std::f32::consts::E, 7.389_056],
            1e-6,
        );
        assert_close(
            &x.sigmoid().to_vec::<f32>().unwrap(),
            &[0.119_202_92, 0.377_540_67, 0.5, 0.731_058_6, 0.880_797_1],
            1e-6,
        );
        assert_close(
            &x.tanh().to_vec::<f32>().unwrap(),
            &[-0.964_027_6, -0.462_117_16, 0.0, 0.761_594_2, 0.964_027_6],
            1e-6,
        );
        // Exact GELU: x/2 (1 + erf(x / sqrt 2)).
        assert_close(
            &x.gelu().to_vec::<f32>().unwrap(),
            &[-0.045_500_26, -0.154_268_5, 0.0, 0.841_344_7, 1.954_499_7],
            1e-5,
        );
        let p = f32s(&[1.0, 4.0, 9.0], &[3]);
        assert_eq!(p.sqrt().to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        assert_close(&p.log().to_vec::<f32>().unwrap(), &[0.0, 1.386_294_4, 2.197_224_6], 1e-6);
        assert_eq!(p.pow(2.0).to_vec::<f32>().unwrap(), vec![1.0, 16.0, 81.0]);
        assert_eq!(p.pow(0.5).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(p.pow(-1.0).to_vec::<f32>().unwrap(), vec![1.0, 0.25, 1.0 / 9.0]);
        // Out of the domain: NaN and -inf, as IEEE.
        let d = f32s(&[-1.0, 0.0], &[2]);
        let l = d.log().to_vec::<f32>().unwrap();
        assert!(l[0].is_nan() && l[1] == f32::NEG_INFINITY, "{l:?}");
        assert!(d.sqrt().to_vec::<f32>().unwrap()[0].is_nan());
        // F64 stays F64.
        let x64 = Tensor::from_vec(vec![1.0f64, -1.0], &[2]).unwrap();
        let e = x64.exp();
        assert_eq!(e.dtype(), DType::F64);
        assert_close64(&e.to_vec::<f64>().unwrap(), &[std::f64::consts::E, 1.0 / std::f64::consts::E], 1e-14);
    }
}

backend_test! {
    fn unary_functions_on_integers() {
        let i = i64s(&[-3, 0, 2], &[3]);
        // neg, abs, relu keep the integer dtype.
        assert_eq!(i.neg().dtype(), DType::I64);
        assert_eq!(i.neg().to_vec::<i64>().unwrap(), vec![3, 0, -2]);
        assert_eq!(i.abs().to_vec::<i64>().unwrap(), vec![3, 0, 2]);
        assert_eq!(i.relu().dtype(), DType::I64);
        assert_eq!(i.relu().to_vec::<i64>().unwrap(), vec![0, 0, 2]);
        // Float functions compute in the default float type.
        let e = i.exp();
        assert_eq!(e.dtype(), DType::F32);
        assert_close(&e.to_vec::<f32>().unwrap(), &[0.049_787_07, 1.0, 7.389_056], 1e-6);
        assert_eq!(i.sigmoid().dtype(), DType::F32);
        let p = i.pow(2.0);
        assert_eq!(p.dtype(), DType::F32);
        assert_eq!(p.to_vec::<f32>().unwrap(), vec![9.0, 0.0, 4.0]);
        assert_eq!(Tensor::from_vec(vec![4i32, 9], &[2]).unwrap().sqrt().to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    }
}

backend_test! {
    fn comparisons_with_tensors_and_scalars() {
        let a = f32s(&[1.0, 2.0, 3.0], &[3]);
        let b = f32s(&[3.0, 2.0, 1.0], &[3]);
        let t = |x: Tensor| {
            assert_eq!(x.dtype(), DType::Bool);
            x.to_vec::<bool>().unwrap()
        };
        assert_eq!(t(a.eq(&b)), vec![false, true, false]);
        assert_eq!(t(a.ne(&b)), vec![true, false, true]);
        assert_eq!(t(a.lt(&b)), vec![true, false, false]);
        assert_eq!(t(a.le(&b)), vec![true, true, false]);
        assert_eq!(t(a.gt(&b)), vec![false, false, true]);
        assert_eq!(t(a.ge(&b)), vec![false, true, true]);
        assert_eq!(t(a.eq_scalar(2.0)), vec![false, true, false]);
        assert_eq!(t(a.ne_scalar(2.0)), vec![true, false, true]);
        assert_eq!(t(a.lt_scalar(2.0)), vec![true, false, false]);
        assert_eq!(t(a.le_scalar(2.0)), vec![true, true, false]);
        assert_eq!(t(a.gt_scalar(2.0)), vec![false, false, true]);
        assert_eq!(t(a.ge_scalar(2.0)), vec![false, true, true]);
        // Broadcasting: [2, 1] against [3].
        let col = f32s(&[1.5, 2.5], &[2, 1]);
        let r = col.lt(&a);
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 3]);
        assert_eq!(t(r), vec![false, true, true, false, false, true]);
        // Mixed dtypes promote before comparing: int vs float tensor, int vs
        // a fractional number (not truncated to an int).
        let i = i64s(&[1, 2, 3], &[3]);
        assert_eq!(t(i.eq(&a)), vec![true, true, true]);
        assert_eq!(t(i.lt_scalar(2.5)), vec![true, true, false]);
        assert_eq!(t(i.gt_scalar(1.5)), vec![false, true, true]);
        assert_eq!(t(i.eq_scalar(2.0)), vec![false, true, false]);
        // A large integer is compared exactly on an i64 tensor.
        // (2^52 + 1 and 2^52 are equal in f32.)
        let big = i64s(&[(1 << 52) + 1], &[1]);
        assert_eq!(t(big.gt_scalar((1u64 << 52) as f64)), vec![true]);
        // Bools compare too.
        let p = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        let q = Tensor::from_vec(vec![true, true], &[2]).unwrap();
        assert_eq!(t(p.eq(&q)), vec![true, false]);
        // NaN is unequal to everything.
        let n = f32s(&[f32::NAN], &[1]);
        assert_eq!(t(n.eq(&n)), vec![false]);
        assert_eq!(t(n.ne(&n)), vec![true]);
    }
}

backend_test! {
    fn logical_ops() {
        let p = Tensor::from_vec(vec![true, true, false, false], &[4]).unwrap();
        let q = Tensor::from_vec(vec![true, false, true, false], &[4]).unwrap();
        assert_eq!(p.logical_and(&q).to_vec::<bool>().unwrap(), vec![true, false, false, false]);
        assert_eq!(p.logical_or(&q).to_vec::<bool>().unwrap(), vec![true, true, true, false]);
        assert_eq!(p.logical_not().to_vec::<bool>().unwrap(), vec![false, false, true, true]);
        // Non-bool operands: nonzero is true; the result is Bool.
        let x = f32s(&[0.0, -2.0, 0.5, 0.0], &[4]);
        let i = i64s(&[1, 0, 3, 0], &[4]);
        let r = x.logical_and(&i);
        assert_eq!(r.dtype(), DType::Bool);
        assert_eq!(r.to_vec::<bool>().unwrap(), vec![false, false, true, false]);
        assert_eq!(x.logical_or(&i).to_vec::<bool>().unwrap(), vec![true, true, true, false]);
        assert_eq!(i.logical_not().to_vec::<bool>().unwrap(), vec![false, true, false, true]);
        // Broadcasting.
        let one = Tensor::from_vec(vec![true], &[1]).unwrap();
        assert_eq!(q.logical_and(&one).to_vec::<bool>().unwrap(), vec![true, false, true, false]);
    }
}

backend_test! {
    fn where_cond_broadcasts_and_promotes() {
        let c = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
        let a = f32s(&[1.0, 2.0, 3.0], &[3]);
        let b = f32s(&[-1.0, -2.0, -3.0], &[3]);
        assert_eq!(c.where_cond(&a, &b).to_vec::<f32>().unwrap(), vec![1.0, -2.0, 3.0]);
        // A non-bool condition: nonzero is true.
        let ci = i64s(&[0, 5, 0], &[3]);
        assert_eq!(ci.where_cond(&a, &b).to_vec::<f32>().unwrap(), vec![-1.0, 2.0, -3.0]);
        // Condition [2, 1], branches [3] and rank 0 -> [2, 3].
        let c2 = Tensor::from_vec(vec![true, false], &[2, 1]).unwrap();
        let r = c2.where_cond(&a, &Tensor::scalar(0.0f32));
        assert_eq!(r.concrete_shape().unwrap(), vec![2, 3]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0]);
        // Branch dtypes promote: i64 and f32 -> f32.
        let r = c.where_cond(&i64s(&[10, 20, 30], &[3]), &b);
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![10.0, -2.0, 30.0]);
        // Int branches stay int.
        let r = c.where_cond(&i64s(&[1, 2, 3], &[3]), &i64s(&[7, 8, 9], &[3]));
        assert_eq!(r.dtype(), DType::I64);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 8, 3]);
    }
}

backend_test! {
    fn to_dtype_conversions() {
        let f = f32s(&[1.7, -1.7, 0.0, 2.0], &[4]);
        // Floats truncate toward zero.
        let i = f.to_dtype(DType::I64);
        assert_eq!(i.dtype(), DType::I64);
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, -1, 0, 2]);
        assert_eq!(f.to_dtype(DType::I32).to_vec::<i32>().unwrap(), vec![1, -1, 0, 2]);
        assert_eq!(f.to_dtype(DType::Bool).to_vec::<bool>().unwrap(), vec![true, true, false, true]);
        assert_close64(&f.to_dtype(DType::F64).to_vec::<f64>().unwrap(), &[1.7, -1.7, 0.0, 2.0], 1e-7);
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(b.to_dtype(DType::F32).to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
        assert_eq!(b.to_dtype(DType::I64).to_vec::<i64>().unwrap(), vec![1, 0]);
        assert_eq!(i64s(&[0, -3], &[2]).to_dtype(DType::Bool).to_vec::<bool>().unwrap(), vec![false, true]);
        // Same dtype: the same tensor, nothing recorded.
        assert_eq!(f.to_dtype(DType::F32).to_vec::<f32>().unwrap(), f.to_vec::<f32>().unwrap());
        // Empty and rank 0.
        assert!(Tensor::zeros(&[0], DType::F32).to_dtype(DType::I64).to_vec::<i64>().unwrap().is_empty());
        assert_eq!(Tensor::scalar(2.9f64).to_dtype(DType::I32).item::<i32>().unwrap(), 2);
    }
}

backend_test! {
    fn incompatible_shapes_panic_with_a_clear_message() {
        let a = f32s(&[1.0, 2.0, 3.0], &[3]);
        let b = f32s(&[1.0, 2.0], &[2]);
        let msg = panic_message(|| {
            let _ = &a + &b;
        });
        assert!(msg.starts_with("add"), "{msg}");
        assert!(msg.contains("[3]") && msg.contains("[2]"), "{msg}");
        assert!(msg.contains("broadcast"), "the message should tell how sizes must relate: {msg}");
        let m = f32s(&[0.0; 6], &[2, 3]);
        let msg = panic_message(|| {
            let _ = m.mul(&f32s(&[0.0; 4], &[2, 2]));
        });
        assert!(msg.starts_with("mul") && msg.contains("[2, 3]") && msg.contains("[2, 2]"), "{msg}");
        let msg = panic_message(|| {
            let _ = a.lt(&b);
        });
        assert!(msg.starts_with("lt") && msg.contains("[3]") && msg.contains("[2]"), "{msg}");
        let msg = panic_message(|| {
            let _ = Tensor::from_vec(vec![true, false], &[2]).unwrap().where_cond(&a, &a);
        });
        assert!(msg.contains("where_cond") && msg.contains("[2]") && msg.contains("[3]"), "{msg}");
    }
}

backend_test! {
    fn unsupported_dtypes_panic_with_a_clear_message() {
        let p = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        // Subtracting bools is an error in PyTorch too.
        let msg = panic_message(|| {
            let _ = &p - &p;
        });
        assert!(msg.starts_with("sub") && msg.contains("bool") && msg.contains("to_dtype"), "{msg}");
        assert!(msg.contains("[2]"), "the message should show the operand shape: {msg}");
        let msg = panic_message(|| {
            let _ = p.neg();
        });
        assert!(msg.starts_with("neg") && msg.contains("bool") && msg.contains("[2]") && msg.contains("to_dtype"), "{msg}");
    }
}

backend_test! {
    fn the_runtime_stays_usable_after_a_panic() {
        let a = f32s(&[1.0, 2.0, 3.0], &[3]);
        let computed = &a * 2.0;
        mark_step().unwrap();
        let pending = &a + 1.0;
        let msg = panic_message(|| {
            let bad = f32s(&[1.0, 2.0], &[2]);
            let partial = &bad * 3.0;
            let _ = &partial + &a;
        });
        assert!(msg.contains("add"), "{msg}");
        // Earlier tensors, computed or pending, still read correctly.
        assert_eq!(computed.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
        let later = &pending * &computed;
        mark_step().unwrap();
        assert_eq!(pending.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
        assert_eq!(later.to_vec::<f32>().unwrap(), vec![4.0, 12.0, 24.0]);
        assert!(metrics::counter("MarkStep") >= 2);
        // A panic inside a chain, caught with catch_unwind directly.
        let r = std::panic::catch_unwind(|| {
            let x = Tensor::ones(&[4], DType::F32);
            (&x + &Tensor::ones(&[5], DType::F32)).sum()
        });
        assert!(r.is_err());
        let y = (&a - 1.0).sum();
        mark_step().unwrap();
        assert_eq!(y.item::<f32>().unwrap(), 3.0);
    }
}

backend_test! {
    fn number_on_the_left_promotes_before_subtracting_or_dividing() {
        // 1 - bool tensor is an int subtraction in PyTorch (bool is
        // promoted first, never negated).
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        let r = 1i64 - &b;
        assert_eq!(r.dtype(), DType::I64);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 1]);
        let r = 0.5 - b.clone();
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![-0.5, 0.5]);
        assert_eq!(b.rsub_scalar(2.0).to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        // A number divided by a tensor: true division.
        let a = f32s(&[1.0, 4.0, -0.5], &[3]);
        assert_eq!((1.0 / &a).to_vec::<f32>().unwrap(), vec![1.0, 0.25, -2.0]);
        assert_eq!((2.0 / a.clone()).to_vec::<f32>().unwrap(), vec![2.0, 0.5, -4.0]);
        let i = i64s(&[2, 4], &[2]);
        let r = 1i64 / &i;
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![0.5, 0.25]);
        assert_eq!((3i64 - i.clone()).to_vec::<i64>().unwrap(), vec![1, -1]);
    }
}
