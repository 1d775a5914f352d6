//! Shape and indexing ops against hand-computed values: reshape (one -1),
//! flatten, permute, transpose, unsqueeze, squeeze, expand, cat, stack,
//! narrow, index_select, gather, select, unbind; negative dims, empty tensors, and the
//! messages of misuse.

mod common;

use common::panic_message;
use lazyxla::{DType, SymInt, Tensor};

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

fn i64s(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

/// 0..n as f32 in `shape`.
fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f32s(&(0..n).map(|i| i as f32).collect::<Vec<_>>(), shape)
}

fn sizes(t: &Tensor) -> Vec<usize> {
    t.concrete_shape().unwrap()
}

backend_test! {
    fn reshape_and_flatten() {
        let x = iota(&[2, 3]);
        let r = x.reshape(&[3, 2]);
        assert_eq!(sizes(&r), vec![3, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(sizes(&x.reshape(&[-1, 2])), vec![3, 2]);
        assert_eq!(sizes(&x.reshape(&[1, -1, 1])), vec![1, 6, 1]);
        assert_eq!(sizes(&x.reshape(&[6])), vec![6]);
        let f = iota(&[2, 2, 2]).flatten();
        assert_eq!(sizes(&f), vec![8]);
        assert_eq!(f.to_vec::<f32>().unwrap(), (0..8).map(|i| i as f32).collect::<Vec<_>>());
        // Rank 0 <-> [1].
        let s = Tensor::scalar(7i64);
        assert_eq!(sizes(&s.flatten()), vec![1]);
        assert_eq!(sizes(&s.reshape(&[1, 1])), vec![1, 1]);
        assert_eq!(i64s(&[7], &[1]).reshape(&[]).rank(), 0);
        // Empty: -1 next to a nonzero size.
        let e = Tensor::zeros(&[0, 4], DType::F32);
        assert_eq!(sizes(&e.reshape(&[-1, 2])), vec![0, 2]);
        assert_eq!(sizes(&e.flatten()), vec![0]);
    }
}

backend_test! {
    fn reshape_misuse_panics_with_a_clear_message() {
        let x = iota(&[2, 3]);
        let msg = panic_message(|| {
            let _ = x.reshape(&[-1, -1]);
        });
        assert!(msg.contains("reshape") && msg.contains("one -1") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.reshape(&[4, 2]);
        });
        assert!(msg.contains("reshape") && msg.contains("[2, 3]") && msg.contains("[4, 2]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.reshape(&[-1, 4]);
        });
        assert!(msg.contains("reshape") && msg.contains("[2, 3]") && msg.contains("multiple of 4"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.reshape(&[-2, 3]);
        });
        assert!(msg.contains("reshape") && msg.contains("[2, 3]"), "{msg}");
    }
}

backend_test! {
    fn permute_and_transpose() {
        let x = iota(&[2, 3]);
        let t = x.transpose(0, 1);
        assert_eq!(sizes(&t), vec![3, 2]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert_eq!(x.transpose(-1, -2).to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
        assert_eq!(x.transpose(1, 1).to_vec::<f32>().unwrap(), x.to_vec::<f32>().unwrap());
        // [2, 3, 2] permuted to [2, 2, 3] with (0, 2, 1).
        let y = iota(&[2, 3, 2]);
        let p = y.permute(&[0, 2, 1]);
        assert_eq!(sizes(&p), vec![2, 2, 3]);
        assert_eq!(
            p.to_vec::<f32>().unwrap(),
            vec![0.0, 2.0, 4.0, 1.0, 3.0, 5.0, 6.0, 8.0, 10.0, 7.0, 9.0, 11.0]
        );
        // Negative entries; (2, 0, 1) moves the last dim first.
        let q = y.permute(&[-1, 0, 1]);
        assert_eq!(sizes(&q), vec![2, 2, 3]);
        assert_eq!(q.to_vec::<f32>().unwrap(), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
        // Empty.
        assert_eq!(sizes(&Tensor::zeros(&[0, 2], DType::F32).transpose(0, 1)), vec![2, 0]);
    }
}

backend_test! {
    fn permute_misuse_panics_with_a_clear_message() {
        let x = iota(&[2, 3]);
        let msg = panic_message(|| {
            let _ = x.permute(&[0]);
        });
        assert!(msg.starts_with("permute") && msg.contains("rank 2") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.permute(&[1, 1]);
        });
        assert!(msg.starts_with("permute") && msg.contains("[1, 1]") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.permute(&[0, 2]);
        });
        assert!(msg.starts_with("permute") && msg.contains("dimension 2") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.transpose(0, -3);
        });
        assert!(msg.starts_with("transpose") && msg.contains("-3") && msg.contains("[2, 3]"), "{msg}");
    }
}

backend_test! {
    fn unsqueeze_and_squeeze() {
        let x = f32s(&[1.0, 2.0, 3.0], &[3]);
        assert_eq!(sizes(&x.unsqueeze(0)), vec![1, 3]);
        assert_eq!(sizes(&x.unsqueeze(1)), vec![3, 1]);
        assert_eq!(sizes(&x.unsqueeze(-1)), vec![3, 1]);
        assert_eq!(sizes(&x.unsqueeze(-2)), vec![1, 3]);
        assert_eq!(x.unsqueeze(1).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(sizes(&Tensor::scalar(1.0f32).unsqueeze(0)), vec![1]);
        let y = Tensor::zeros(&[1, 3, 1], DType::F32);
        assert_eq!(sizes(&y.squeeze(0)), vec![3, 1]);
        assert_eq!(sizes(&y.squeeze(-1)), vec![1, 3]);
        // A dim whose size is not 1 stays.
        assert_eq!(sizes(&y.squeeze(1)), vec![1, 3, 1]);
        assert_eq!(x.unsqueeze(0).squeeze(0).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        let msg = panic_message(|| {
            let _ = x.unsqueeze(2);
        });
        assert!(msg.starts_with("unsqueeze") && msg.contains("dimension 2") && msg.contains("[3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.squeeze(-2);
        });
        assert!(msg.starts_with("squeeze") && msg.contains("-2") && msg.contains("[3]"), "{msg}");
    }
}

backend_test! {
    fn expand_repeats_size_one_dims() {
        let c = f32s(&[1.0, 2.0], &[2, 1]);
        let e = c.expand(&[2.into(), 3.into()]);
        assert_eq!(sizes(&e), vec![2, 3]);
        assert_eq!(e.to_vec::<f32>().unwrap(), vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        // -1 keeps a dim; new leading dims.
        let e = c.expand(&[SymInt::from(2), SymInt::from(-1), SymInt::from(2)]);
        assert_eq!(sizes(&e), vec![2, 2, 2]);
        let e = c.expand(&[SymInt::from(2), SymInt::from(2), SymInt::from(-1)]);
        assert_eq!(sizes(&e), vec![2, 2, 1]);
        assert_eq!(e.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 1.0, 2.0]);
        // To size 0.
        assert_eq!(sizes(&c.expand(&[2.into(), 0.into()])), vec![2, 0]);
        let msg = panic_message(|| {
            let _ = c.expand(&[3.into(), 3.into()]);
        });
        assert!(msg.starts_with("expand") && msg.contains("[2, 1]") && msg.contains("2 and 3"), "{msg}");
        // -1 only keeps an existing dim; other negative sizes are invalid.
        let msg = panic_message(|| {
            let _ = c.expand(&[SymInt::from(-1), SymInt::from(2), SymInt::from(1)]);
        });
        assert!(msg.starts_with("expand") && msg.contains("-1") && msg.contains("[2, 1]"), "{msg}");
        let msg = panic_message(|| {
            let _ = c.expand(&[SymInt::from(2), SymInt::from(-2)]);
        });
        assert!(msg.starts_with("expand") && msg.contains("-2") && msg.contains("[2, 1]"), "{msg}");
        let msg = panic_message(|| {
            let _ = c.expand(&[3.into()]);
        });
        assert!(msg.starts_with("expand") && msg.contains("rank 2") && msg.contains("[2, 1]"), "{msg}");
    }
}

backend_test! {
    fn cat_along_each_dim() {
        let a = iota(&[2, 2]);
        let b = f32s(&[10.0, 11.0], &[1, 2]);
        let r = Tensor::cat(&[&a, &b], 0);
        assert_eq!(sizes(&r), vec![3, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0, 10.0, 11.0]);
        let c = f32s(&[7.0, 8.0], &[2, 1]);
        let r = Tensor::cat(&[&a, &c, &a], -1);
        assert_eq!(sizes(&r), vec![2, 5]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 7.0, 0.0, 1.0, 2.0, 3.0, 8.0, 2.0, 3.0]);
        // Dtypes promote; empty pieces are fine; one tensor is itself.
        let r = Tensor::cat(&[&i64s(&[1, 2], &[2]), &f32s(&[0.5], &[1]), &f32s(&[], &[0])], 0);
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 0.5]);
        assert_eq!(Tensor::cat(&[&a], 1).to_vec::<f32>().unwrap(), a.to_vec::<f32>().unwrap());
    }
}

backend_test! {
    fn cat_misuse_panics_with_a_clear_message() {
        let a = iota(&[2, 2]);
        let msg = panic_message(|| {
            let _ = Tensor::cat(&[&a, &iota(&[3, 3])], 0);
        });
        assert!(msg.starts_with("cat") && msg.contains("[2, 2]") && msg.contains("[3, 3]"), "{msg}");
        assert!(msg.contains("must be equal"), "the message should say how to fix it: {msg}");
        let msg = panic_message(|| {
            let _ = Tensor::cat(&[&a, &iota(&[2])], 0);
        });
        assert!(msg.starts_with("cat") && msg.contains("rank") && msg.contains("[2]"), "{msg}");
        let msg = panic_message(|| {
            let _ = Tensor::cat(&[], 0);
        });
        assert!(msg.starts_with("cat") && msg.contains("at least one"), "{msg}");
        let msg = panic_message(|| {
            let _ = Tensor::cat(&[&a, &a], 2);
        });
        assert!(msg.starts_with("cat") && msg.contains("dimension 2") && msg.contains("[2, 2]"), "{msg}");
    }
}

backend_test! {
    fn stack_along_new_dims() {
        let a = f32s(&[1.0, 2.0], &[2]);
        let b = f32s(&[3.0, 4.0], &[2]);
        let r = Tensor::stack(&[&a, &b], 0);
        assert_eq!(sizes(&r), vec![2, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        let r = Tensor::stack(&[&a, &b, &a], 1);
        assert_eq!(sizes(&r), vec![2, 3]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 1.0, 2.0, 4.0, 2.0]);
        assert_eq!(Tensor::stack(&[&a, &b], -1).to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
        // Scalars stack into a vector.
        let s = Tensor::stack(&[&Tensor::scalar(1i64), &Tensor::scalar(2i64)], 0);
        assert_eq!(sizes(&s), vec![2]);
        assert_eq!(s.to_vec::<i64>().unwrap(), vec![1, 2]);
        let msg = panic_message(|| {
            let _ = Tensor::stack(&[&a, &f32s(&[1.0, 2.0, 3.0], &[3])], 0);
        });
        assert!(msg.contains("stack") && msg.contains("[2]") && msg.contains("[3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = Tensor::stack(&[&a, &b], 2);
        });
        assert!(msg.starts_with("stack") && msg.contains("dimension 2"), "{msg}");
    }
}

backend_test! {
    fn slice_clamps_as_python_and_keeps_real_elements() {
        let x = iota(&[3, 4]);
        assert_eq!(x.slice(1, 1..3).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 5.0, 6.0, 9.0, 10.0]);
        assert_eq!(sizes(&x.slice(0, 2..10)), vec![1, 4]);
        assert_eq!(sizes(&x.slice(0, 5..)), vec![0, 4]);
        let (from, to) = (3, 1);
        assert_eq!(sizes(&x.slice(1, from..to)), vec![3, 0]);
        assert_eq!(x.slice(-1, ..=0).to_vec::<f32>().unwrap(), vec![0.0, 4.0, 8.0]);
        // Along a dynamic dim: the real elements in the range, never
        // padding, with the bound of the range.
        let v = f32s(&[5.0, -1.0, 7.0, 8.0, -2.0, 9.0], &[6]);
        let kept = v.masked_select(&v.gt_scalar(0.0)); // [<=6]: 5, 7, 8, 9
        let head = kept.slice(0, ..3);
        assert_eq!(head.size(0).to_string(), "<=3");
        assert_eq!(head.to_vec::<f32>().unwrap(), vec![5.0, 7.0, 8.0]);
        assert_eq!(kept.slice(0, 2..5).to_vec::<f32>().unwrap(), vec![8.0, 9.0]);
        assert_eq!(kept.slice(0, 4..).to_vec::<f32>().unwrap(), Vec::<f32>::new());
        assert_eq!(kept.slice(0, 7..).size(0).as_static(), Some(0));
        let rows = Tensor::stack(&[&kept, &kept.neg()], 1).slice(0, 1..); // [<=5, 2]
        assert_eq!(rows.sum_dims(&[1], false).to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0]);
        assert_eq!(rows.to_vec::<f32>().unwrap(), vec![7.0, -7.0, 8.0, -8.0, 9.0, -9.0]);
        // `narrow` along a dynamic dim has its static size, checked.
        let n = kept.narrow(0, 1, 3);
        assert_eq!(n.size(0).as_static(), Some(3));
        assert_eq!(n.to_vec::<f32>().unwrap(), vec![7.0, 8.0, 9.0]);
        assert!(kept.narrow(0, 2, 3).to_vec::<f32>().is_err());
    }
}

backend_test! {
    fn a_dynamic_slice_compiles_once_over_sizes() {
        let mut got = Vec::new();
        for n in 0..6usize {
            let x = f32s(&(0..6).map(|i| if i < n { i as f32 + 1.0 } else { 0.0 }).collect::<Vec<_>>(), &[6]);
            let top = x.masked_select(&x.gt_scalar(0.0)).slice(0, ..3).sum();
            lazyxla::mark_step().unwrap();
            got.push(top.item::<f32>().unwrap());
        }
        assert_eq!(got, vec![0.0, 1.0, 3.0, 6.0, 6.0, 6.0]);
        assert_eq!(lazyxla::metrics::counter("UncachedCompile"), 1);
    }
}

backend_test! {
    fn narrow_slices_a_range() {
        let x = iota(&[3, 4]);
        let r = x.narrow(1, 1, 2);
        assert_eq!(sizes(&r), vec![3, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 5.0, 6.0, 9.0, 10.0]);
        let r = x.narrow(-2, 2, 1);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![8.0, 9.0, 10.0, 11.0]);
        assert_eq!(sizes(&x.narrow(0, 3, 0)), vec![0, 4]);
        let msg = panic_message(|| {
            let _ = x.narrow(1, 3, 2);
        });
        assert!(msg.starts_with("narrow") && msg.contains("[3, 4]") && msg.contains("start 3"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.narrow(2, 0, 1);
        });
        assert!(msg.starts_with("narrow") && msg.contains("dimension 2") && msg.contains("[3, 4]"), "{msg}");
    }
}

backend_test! {
    fn index_select_along_each_dim() {
        let x = iota(&[3, 2]);
        let idx = i64s(&[2, 0, 2], &[3]);
        let r = x.index_select(0, &idx);
        assert_eq!(sizes(&r), vec![3, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![4.0, 5.0, 0.0, 1.0, 4.0, 5.0]);
        let r = x.index_select(-1, &Tensor::from_vec(vec![1i32], &[1]).unwrap());
        assert_eq!(sizes(&r), vec![3, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 5.0]);
        // No indices: an empty selection.
        assert_eq!(sizes(&x.index_select(0, &i64s(&[], &[0]))), vec![0, 2]);
        let msg = panic_message(|| {
            let _ = x.index_select(0, &i64s(&[0, 1], &[1, 2]));
        });
        assert!(msg.starts_with("index_select") && msg.contains("1-D") && msg.contains("[1, 2]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.index_select(0, &f32s(&[0.0], &[1]));
        });
        assert!(msg.starts_with("index_select") && msg.contains("f32") && msg.contains("i64"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.index_select(2, &idx);
        });
        assert!(msg.starts_with("index_select") && msg.contains("dimension 2") && msg.contains("[3, 2]"), "{msg}");
    }
}

backend_test! {
    fn gather_along_each_dim() {
        // torch.gather([[1, 2], [3, 4]], 1, [[0, 0], [1, 0]]) = [[1, 1], [4, 3]]
        let x = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let idx = i64s(&[0, 0, 1, 0], &[2, 2]);
        let r = x.gather(1, &idx);
        assert_eq!(sizes(&r), vec![2, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 1.0, 4.0, 3.0]);
        // Along dim 0: out[i][j] = x[idx[i][j]][j].
        let r = x.gather(0, &i64s(&[1, 0, 0, 0, 1, 1], &[3, 2]));
        assert_eq!(sizes(&r), vec![3, 2]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![3.0, 2.0, 1.0, 2.0, 3.0, 4.0]);
        // Fewer indices along dim than the input's size.
        let r = x.gather(-1, &i64s(&[1, 0], &[2, 1]));
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
        // Outside dim the index may be smaller than the input, as in torch:
        // gather([[1, 2], [3, 4]], 1, [[1]]) = [[2]]; along dim 0 with a
        // [1, 1] index: [[3]].
        let r = x.gather(1, &i64s(&[1], &[1, 1]));
        assert_eq!(sizes(&r), vec![1, 1]);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.0]);
        assert_eq!(x.gather(0, &i64s(&[1], &[1, 1])).to_vec::<f32>().unwrap(), vec![3.0]);
        let msg = panic_message(|| {
            let _ = x.gather(1, &i64s(&[0, 1], &[2]));
        });
        assert!(msg.starts_with("gather") && msg.contains("rank") && msg.contains("[2]") && msg.contains("[2, 2]"), "{msg}");
        let msg = panic_message(|| {
            let _ = x.gather(1, &i64s(&[0, 0, 0], &[3, 1]));
        });
        assert!(msg.starts_with("gather") && msg.contains("[3, 1]") && msg.contains("[2, 2]"), "{msg}");
    }
}

backend_test! {
    fn every_dim_argument_rejects_out_of_range_dims() {
        let x = iota(&[2, 3]);
        let idx = i64s(&[0], &[1]);
        let idx2 = i64s(&[0, 0], &[1, 2]);
        type Case<'a> = (&'a str, Box<dyn Fn(i64) + 'a>);
        let cases: Vec<Case> = vec![
            ("size", Box::new(|d| drop(x.size(d)))),
            ("sum_dims", Box::new(|d| drop(x.sum_dims(&[d], false)))),
            ("mean_dims", Box::new(|d| drop(x.mean_dims(&[d], true)))),
            ("max_dims", Box::new(|d| drop(x.max_dims(&[d], false)))),
            ("min_dims", Box::new(|d| drop(x.min_dims(&[d], false)))),
            ("argmax", Box::new(|d| drop(x.argmax(d)))),
            ("argmin", Box::new(|d| drop(x.argmin(d)))),
            ("softmax", Box::new(|d| drop(x.softmax(d)))),
            ("log_softmax", Box::new(|d| drop(x.log_softmax(d)))),
            ("transpose", Box::new(|d| drop(x.transpose(0, d)))),
            ("permute", Box::new(|d| drop(x.permute(&[d, if d == -2 { 1 } else { 0 }])))),
            ("squeeze", Box::new(|d| drop(x.squeeze(d)))),
            ("narrow", Box::new(|d| drop(x.narrow(d, 0, 1)))),
            ("index_select", Box::new(|d| drop(x.index_select(d, &idx)))),
            ("gather", Box::new(|d| drop(x.gather(d, &idx2)))),
            ("cat", Box::new(|d| drop(Tensor::cat(&[&x, &x], d)))),
            ("mark_dynamic", Box::new(|d| drop(x.mark_dynamic(d, 4)))),
        ];
        for (op, f) in &cases {
            for d in [2i64, -3, 100] {
                let msg = panic_message(|| f(d));
                assert!(
                    msg.starts_with(op) && msg.contains(&format!("dimension {d} ")) && msg.contains("rank 2") && msg.contains("[2, 3]"),
                    "{op}({d}): {msg}"
                );
            }
            // In range, negative counting from the end: no panic.
            f(-1);
            f(-2);
        }
        // Ops that insert a dim accept 0..=rank.
        for (op, f) in [
            ("unsqueeze", Box::new(|d: i64| drop(x.unsqueeze(d))) as Box<dyn Fn(i64)>),
            ("stack", Box::new(|d: i64| drop(Tensor::stack(&[&x, &x], d)))),
        ] {
            for d in [3i64, -4] {
                let msg = panic_message(|| f(d));
                assert!(
                    msg.starts_with(op) && msg.contains(&format!("dimension {d} ")) && msg.contains("[2, 3]") && msg.contains("0..=2"),
                    "{op}({d}): {msg}"
                );
            }
            f(2);
            f(-3);
        }
        // The tensor is still usable.
        assert_eq!(x.sum().item::<f32>().unwrap(), 15.0);
    }
}

backend_test! {
    fn index_select_of_a_count_is_a_prefix_without_gather_or_scatter() {
        // base [3, 6, 2] indexed along dim 1 by arange(s), s = 4 of at most
        // 6 (the dynamic Embedding's way of keeping its real rows): the
        // prefix, and backwards the gradient added into the prefix only.
        let bv: Vec<f32> = (0..36).map(|i| i as f32 * 0.5 - 4.0).collect();
        let base = Tensor::from_vec(bv.clone(), &[3, 6, 2]).unwrap().requires_grad(true);
        let len = Tensor::from_vec(vec![1i64; 4], &[4]).unwrap().mark_dynamic(0, 6);
        let idx = Tensor::arange_sym(&len.size(0));
        let y = base.index_select(1, &idx);
        assert_eq!(y.size(1).to_string(), "<=6");
        let loss = (&y * &y).sum();
        loss.backward();
        let g = base.grad().expect("a gradient");
        let hlo = lazyxla::debug::stablehlo_text(&[&y, &loss, &g]).unwrap();
        assert!(!hlo.contains("stablehlo.gather") && !hlo.contains("stablehlo.scatter"), "{hlo}");
        lazyxla::mark_step().unwrap();
        let want_y: Vec<f32> = (0..3).flat_map(|i| bv[i * 12..i * 12 + 8].to_vec()).collect();
        assert_eq!(y.to_vec::<f32>().unwrap(), want_y);
        let want_g: Vec<f32> = (0..36).map(|k| if k % 12 < 8 { 2.0 * bv[k] } else { 0.0 }).collect();
        assert_eq!(g.to_vec::<f32>().unwrap(), want_g);
    }
}

backend_test! {
    fn select_and_unbind() {
        let x = iota(&[2, 3, 2]);
        assert_eq!(sizes(&x.select(1, 2)), vec![2, 2]);
        assert_eq!(x.select(1, 2).to_vec::<f32>().unwrap(), [4.0, 5.0, 10.0, 11.0]);
        assert_eq!(x.select(0, -1).to_vec::<f32>().unwrap(), (6..12).map(|i| i as f32).collect::<Vec<_>>());
        assert_eq!(x.select(-1, 0).to_vec::<f32>().unwrap(), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let parts = x.unbind(2);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].to_vec::<f32>().unwrap(), [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
        // Gradients flow back into the selected slice only.
        let w = iota(&[2, 3]).requires_grad(true);
        (&w.select(1, 1) * 3.0).sum().backward();
        assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), [0.0, 3.0, 0.0, 0.0, 3.0, 0.0]);
        // Along a dynamic dim: from the front (checked when the program
        // runs) and from the real end.
        let rows = iota(&[5, 2]);
        let keep = i64s(&[1, 0, 1, 1, 0], &[5]).ne_scalar(0.0).nonzero().flatten(); // 3 of 5
        let kept = rows.index_select(0, &keep);
        assert_eq!(kept.select(0, 1).to_vec::<f32>().unwrap(), [4.0, 5.0]);
        assert_eq!(kept.select(0, -1).to_vec::<f32>().unwrap(), [6.0, 7.0]);
        assert_eq!(kept.select(0, -3).to_vec::<f32>().unwrap(), [0.0, 1.0]);
        assert!(kept.select(0, 3).to_vec::<f32>().is_err(), "only 3 real rows");
        assert!(kept.select(0, -4).to_vec::<f32>().is_err(), "only 3 real rows");
        let cols = kept.unbind(1);
        assert_eq!(cols[0].shape_string(), "[<=5]");
        assert_eq!(cols[0].to_vec::<f32>().unwrap(), [0.0, 4.0, 6.0]);
        let msg = panic_message(|| {
            x.select(1, 3);
        });
        assert!(msg.contains("select") && msg.contains("out of range"), "{msg}");
        let msg = panic_message(|| {
            kept.unbind(0);
        });
        assert!(msg.contains("unbind") && msg.contains("pad_to_bound"), "{msg}");
    }
}
