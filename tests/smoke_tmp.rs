use lazyxla::*;

#[test]
fn smoke() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 0.0, 1.0, 3.0], &[5]).unwrap();
    let b = a.nonzero();
    println!("{}", debug::ir_text(&[&b]));
    assert_eq!(b.size(0).to_string(), "<=5");
    assert_eq!(b.size(1).to_string(), "1");
    let d = &b * 2 + 1;
    println!("{}", debug::ir_text(&[&d]));
    assert_eq!(d.to_vec::<i64>().unwrap(), vec![1, 3, 7, 9]);
    assert_eq!(d.size(0).materialize().unwrap(), 4);
    let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 0.0, 3.0, 4.0], &[6]).unwrap();
    assert_eq!(x.masked_select(&x.ge_scalar(2.0)).to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
    let u = Tensor::from_vec(vec![3i64, 1, 3, 2, 1], &[5]).unwrap();
    let (v, c) = u.unique_with_counts();
    assert_eq!(v.to_vec::<i64>().unwrap(), vec![1, 2, 3]);
    assert_eq!(c.to_vec::<i64>().unwrap(), vec![2, 1, 2]);
    let m = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let s = m.matmul(&m).softmax(-1).sum_dims(&[1], false);
    println!("{s}");
    let t2 = Tensor::rand(&[5, 5], 1).gt_scalar(0.5).to_dtype(DType::F32);
    let t5 = t2.nonzero().to_dtype(DType::F32).pow(2.0).sum() + 2.0;
    println!("{}", debug::ir_text(&[&t5]));
    println!("{t5}");
    mark_step().unwrap();
    println!("{}", metrics::report());
}
