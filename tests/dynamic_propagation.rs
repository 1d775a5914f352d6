//! Dynamic dims flowing through every kind of op: elementwise (with
//! static size-1 broadcasting), reductions, matmul, transpose, reshape,
//! cat, softmax, where_cond, to_dtype, indexing, expand, arange_sym,
//! pad_to_bound; size materialisation counting; one compile over changing
//! sizes; and the errors of unprovable size equality.

mod common;

use common::{assert_close, panic_message};
use lazyxla::{mark_step, metrics, DType, SymInt, Tensor};

/// `[<=6]` holding [1, 3, 0.5, 4] (the positive values of six).
fn dyn_vec() -> Tensor {
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 0.5, -1.0, 4.0], &[6]).unwrap();
    x.masked_select(&x.gt_scalar(0.0))
}

/// `[<=6, 2]` holding rows [v, 2v] for v in [1, 3, 0.5, 4].
fn dyn_mat() -> Tensor {
    let v = dyn_vec();
    Tensor::stack(&[&v, &(&v * 2.0)], 1)
}

backend_test! {
    fn elementwise_keeps_the_dynamic_size() {
        let v = dyn_vec();
        let w = (&v * &v - 1.0).exp().log();
        assert_eq!(w.shape_string(), "[<=6]");
        assert_close(&w.to_vec::<f32>().unwrap(), &[0.0, 8.0, -0.75, 15.0], 1e-5);
        // Comparisons, logic, unary minus, scalars on either side.
        let m = v.gt_scalar(0.75).logical_and(&v.lt_scalar(3.5));
        assert_eq!(m.shape_string(), "[<=6]");
        assert_eq!(m.to_vec::<bool>().unwrap(), vec![true, true, false, false]);
        assert_eq!((10.0 - &v).to_vec::<f32>().unwrap(), vec![9.0, 7.0, 9.5, 6.0]);
        assert_eq!((-&v).to_vec::<f32>().unwrap(), vec![-1.0, -3.0, -0.5, -4.0]);
        // x * 2 + x on a nonzero result.
        let x = Tensor::from_vec(vec![0i64, 5, 0, 7], &[4]).unwrap().nonzero();
        let y = &x * 2 + &x;
        assert_eq!(y.shape_string(), "[<=4, 1]");
        assert_eq!(y.to_vec::<i64>().unwrap(), vec![3, 9]);
    }
}

backend_test! {
    fn dynamic_broadcasts_with_static_size_one() {
        let m = dyn_mat(); // [<=6, 2]
        let r = &m + &Tensor::from_vec(vec![10.0f32, 20.0], &[1, 2]).unwrap();
        assert_eq!(r.shape_string(), "[<=6, 2]");
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![11.0, 22.0, 13.0, 26.0, 10.5, 21.0, 14.0, 28.0]);
        let r = &m * &Tensor::from_vec(vec![1.0f32, -1.0], &[2]).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, -2.0, 3.0, -6.0, 0.5, -1.0, 4.0, -8.0]);
        // A [<=6, 1] column of the same zone broadcasts along dim 1.
        let v = dyn_vec();
        let col = v.unsqueeze(1);
        assert_eq!(col.shape_string(), "[<=6, 1]");
        let m2 = Tensor::stack(&[&v, &(&v * 2.0)], 1);
        let r = &m2 / &col;
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
        // An outer product of a dynamic vector with itself: [<=6, <=6].
        let outer = &v.unsqueeze(1) * &v.unsqueeze(0);
        assert_eq!(outer.shape_string(), "[<=6, <=6]");
        assert_eq!(outer.concrete_shape().unwrap(), vec![4, 4]);
        assert_eq!(outer.sum().item::<f32>().unwrap(), 8.5 * 8.5);
        // A static [3] and a dynamic [<=6] column: [<=6, 3].
        let r = &col + &Tensor::from_vec(vec![0.0f32, 1.0, 2.0], &[3]).unwrap();
        assert_eq!(r.shape_string(), "[<=6, 3]");
        assert_eq!(r.sum().item::<f32>().unwrap(), 3.0 * 8.5 + 4.0 * 3.0);
    }
}

backend_test! {
    fn unrelated_dynamic_sizes_are_checked_when_the_program_runs() {
        let a = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0, 0.0], &[5]).unwrap().nonzero();
        let b = Tensor::from_vec(vec![4.0f32, 0.0, 5.0, 0.0], &[4]).unwrap().nonzero();
        let c = &a + &b;
        assert_eq!(c.shape_string(), "[<=5, 1]", "the result takes the left operand's size");
        let e = c.to_vec::<i64>().unwrap_err().to_string();
        assert!(e.starts_with("add"), "{e}");
        assert!(e.contains("in [0, 5]") && e.contains("in [0, 4]"), "both size expressions with bounds: {e}");
        assert!(e.contains("they are 3 and 2") && e.contains("pad_to_bound"), "{e}");
        // Equal when the program runs: the check passes (two nonzero results
        // of the same input share their size: tests/size_identity.rs).
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
        let y = Tensor::from_vec(vec![0.0f32, 7.0, 2.0], &[3]).unwrap();
        let (p, q) = (x.nonzero(), y.nonzero());
        assert_eq!(p.lt(&q).to_vec::<bool>().unwrap(), vec![true, false]);
        // The other way out: pad both to their bounds.
        let r = &a.pad_to_bound(0.0).narrow(0, 0, 4) + &b.pad_to_bound(0.0);
        assert_eq!(r.shape_string(), "[4, 1]");
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 4, 3, 0]);
        // The runtime is fine afterwards.
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![0, 2, 3]);
        drop(c);
        mark_step().unwrap();
    }
}

backend_test! {
    fn reducing_a_dynamic_dim_gives_a_static_result() {
        let m = dyn_mat(); // rows [1,2], [3,6], [0.5,1], [4,8]
        let s0 = m.sum_dims(&[0], false);
        assert!(!s0.is_dynamic());
        assert_eq!(s0.shape_string(), "[2]");
        assert_eq!(s0.to_vec::<f32>().unwrap(), vec![8.5, 17.0]);
        let s1 = m.sum_dims(&[1], false);
        assert_eq!(s1.shape_string(), "[<=6]");
        assert_eq!(s1.to_vec::<f32>().unwrap(), vec![3.0, 9.0, 1.5, 12.0]);
        let k = m.sum_dims(&[1], true);
        assert_eq!(k.shape_string(), "[<=6, 1]");
        assert_eq!(k.concrete_shape().unwrap(), vec![4, 1]);
        assert_eq!(m.sum().shape_string(), "[]");
        assert_eq!(m.sum().item::<f32>().unwrap(), 25.5);
        // mean divides by the real size (4), not the bound (6).
        assert_eq!(m.mean_dims(&[0], false).to_vec::<f32>().unwrap(), vec![8.5 / 4.0, 17.0 / 4.0]);
        assert_eq!(m.mean().item::<f32>().unwrap(), 25.5 / 8.0);
        assert_eq!(m.mean_dims(&[0], true).shape_string(), "[1, 2]");
        // max/min/argmax/argmin over the dynamic dim see only real rows.
        let neg = -&m;
        assert_eq!(neg.max_dims(&[0], false).to_vec::<f32>().unwrap(), vec![-0.5, -1.0]);
        assert_eq!(m.min_dims(&[0], false).to_vec::<f32>().unwrap(), vec![0.5, 1.0]);
        assert_eq!(neg.max().item::<f32>().unwrap(), -0.5);
        let am = neg.argmax(0);
        assert!(!am.is_dynamic());
        assert_eq!(am.to_vec::<i64>().unwrap(), vec![2, 2]);
        assert_eq!(m.argmin(0).to_vec::<i64>().unwrap(), vec![2, 2]);
        assert_eq!(m.argmax(1).shape_string(), "[<=6]");
        assert_eq!(m.argmax(1).to_vec::<i64>().unwrap(), vec![1, 1, 1, 1]);
        // Integer sums of a nonzero result.
        let nz = Tensor::from_vec(vec![0.0f32, 1.0, 1.0], &[3]).unwrap().nonzero();
        assert_eq!(nz.sum().item::<i64>().unwrap(), 3);
    }
}

backend_test! {
    fn empty_dynamic_zone_reduces_to_identities() {
        let x = Tensor::from_vec(vec![-1.0f32, -2.0], &[2]).unwrap();
        let v = x.masked_select(&x.gt_scalar(0.0)); // no element
        assert_eq!(v.concrete_shape().unwrap(), vec![0]);
        assert!(v.to_vec::<f32>().unwrap().is_empty());
        assert_eq!(v.sum().item::<f32>().unwrap(), 0.0);
        assert!(v.mean().item::<f32>().unwrap().is_nan());
        assert_eq!(v.pad_to_bound(7.0).to_vec::<f32>().unwrap(), vec![7.0, 7.0]);
    }
}

backend_test! {
    fn matmul_with_dynamic_dims() {
        let m = dyn_mat(); // [<=6, 2]
        let w = Tensor::from_vec(vec![1.0f32, 0.0, 1.0, 0.0, 1.0, -1.0], &[2, 3]).unwrap();
        // Dynamic rows.
        let r = m.matmul(&w);
        assert_eq!(r.shape_string(), "[<=6, 3]");
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 2.0, -1.0, 3.0, 6.0, -3.0, 0.5, 1.0, -0.5, 4.0, 8.0, -4.0]);
        // Dynamic contracting dim: m^T m is static [2, 2].
        let g = m.transpose(0, 1).matmul(&m);
        assert!(!g.is_dynamic());
        assert_eq!(g.shape_string(), "[2, 2]");
        let ss = 1.0 + 9.0 + 0.25 + 16.0;
        assert_eq!(g.to_vec::<f32>().unwrap(), vec![ss, 2.0 * ss, 2.0 * ss, 4.0 * ss]);
        // 1-D dynamic dot product.
        let v = dyn_vec();
        let d = v.matmul(&v);
        assert_eq!(d.rank(), 0);
        assert_eq!(d.item::<f32>().unwrap(), ss);
        // Dynamic batch: [<=6, 1, 2] x [2, 3] -> [<=6, 1, 3].
        let b = m.unsqueeze(1).matmul(&w);
        assert_eq!(b.shape_string(), "[<=6, 1, 3]");
        assert_eq!(b.to_vec::<f32>().unwrap(), r.to_vec::<f32>().unwrap());
        // Dynamic columns on the right: [2, 2] x [2, <=6].
        let c = g.matmul(&m.transpose(0, 1));
        assert_eq!(c.shape_string(), "[2, <=6]");
        assert_eq!(c.concrete_shape().unwrap(), vec![2, 4]);
        // A contracting dim that cannot be proven equal: checked when the
        // program runs (4 rows against 1).
        let other = Tensor::from_vec(vec![1.0f32, 0.0], &[2]).unwrap().nonzero().to_dtype(DType::F32);
        let e = m.transpose(0, 1).matmul(&other).to_vec::<f32>().unwrap_err().to_string();
        assert!(e.starts_with("matmul") && e.contains("they are 4 and 1"), "{e}");
        // One that can never be equal (bounds 6 and 7): an error at once.
        let seven = Tensor::from_vec(vec![1.0f32; 7], &[7, 1]).unwrap();
        let msg = panic_message(|| {
            let _ = m.transpose(0, 1).matmul(&seven);
        });
        assert!(msg.starts_with("matmul") && msg.contains("[2, <=6]") && msg.contains("[7, 1]"), "{msg}");
    }
}

backend_test! {
    fn transpose_permute_reshape_flatten() {
        let m = dyn_mat(); // [<=6, 2]
        let t = m.transpose(0, 1);
        assert_eq!(t.shape_string(), "[2, <=6]");
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 0.5, 4.0, 2.0, 6.0, 1.0, 8.0]);
        let p = m.unsqueeze(0).permute(&[2, 1, 0]);
        assert_eq!(p.shape_string(), "[2, <=6, 1]");
        assert_eq!(p.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
        let f = m.flatten();
        assert_eq!(f.shape_string(), "[<=12]");
        assert_eq!(f.concrete_shape().unwrap(), vec![8]);
        assert_eq!(f.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 6.0, 0.5, 1.0, 4.0, 8.0]);
        let r = m.reshape(&[-1, 1]);
        assert_eq!(r.shape_string(), "[<=12, 1]");
        assert_eq!(r.concrete_shape().unwrap(), vec![8, 1]);
        // Back to the original: equal element counts as expressions.
        let back = f.reshape(&[-1, 2]);
        assert_eq!(back.shape_string(), "[<=6, 2]");
        assert_eq!((&back - &m).abs().sum().item::<f32>().unwrap(), 0.0);
        // An element count that is not provably a multiple: a clear error.
        let msg = panic_message(|| {
            let _ = m.reshape(&[3, -1]);
        });
        assert!(msg.starts_with("reshape") && msg.contains("[<=6, 2]") && msg.contains("multiple of 3"), "{msg}");
        let msg = panic_message(|| {
            let _ = m.reshape(&[4, 2]);
        });
        assert!(msg.starts_with("reshape") && msg.contains("[<=6, 2]") && msg.contains("[4, 2]"), "{msg}");
        // squeeze never removes a dynamic dim, even one whose real size is 1.
        let one = Tensor::from_vec(vec![0.0f32, 2.0], &[2]).unwrap().nonzero();
        assert_eq!(one.squeeze(0).shape_string(), "[<=2, 1]");
        assert_eq!(one.squeeze(1).shape_string(), "[<=2]");
    }
}

backend_test! {
    fn two_dynamic_dims_survive_size_one_reshapes() {
        let v = dyn_vec();
        let outer = &v.unsqueeze(1) * &v.unsqueeze(0); // [<=6, <=6]
        // Inserting or removing size-1 dims keeps both dynamic dims.
        let u = outer.unsqueeze(0);
        assert_eq!(u.shape_string(), "[1, <=6, <=6]");
        assert_eq!(u.squeeze(0).shape_string(), "[<=6, <=6]");
        let k = outer.sum_dims(&[1], true);
        assert_eq!(k.shape_string(), "[<=6, 1]");
        let k2 = outer.unsqueeze(2).sum_dims(&[2], true);
        assert_eq!(k2.shape_string(), "[<=6, <=6, 1]");
        assert_eq!(u.sum().item::<f32>().unwrap(), 8.5 * 8.5);
        assert_eq!(k2.concrete_shape().unwrap(), vec![4, 4, 1]);
        // Merging them is fine (one dynamic dim in the result).
        let f = outer.flatten();
        assert_eq!(f.shape_string(), "[<=36]");
        assert_eq!(f.concrete_shape().unwrap(), vec![16]);
        // Splitting a dynamic dim into two dynamic dims cannot be asked for
        // with reshape(&[i64]); reshaping [<=6, <=6] into [-1, 1] can.
        assert_eq!(outer.reshape(&[-1, 1]).shape_string(), "[<=36, 1]");
    }
}

backend_test! {
    fn cat_along_dynamic_and_static_dims() {
        let v = dyn_vec(); // 4 of <=6
        let x = Tensor::from_vec(vec![5.0f32, 0.0, 6.0], &[3]).unwrap();
        let w = x.masked_select(&x.ne_scalar(0.0)); // 2 of <=3
        let c = Tensor::cat(&[&v, &w], 0);
        assert_eq!(c.shape_string(), "[<=9]");
        assert_eq!(c.size(0).lower_bound(), 0);
        assert_eq!(c.size(0).materialize().unwrap(), 6);
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 0.5, 4.0, 5.0, 6.0]);
        // With a static piece: size s + 2.
        let s = Tensor::from_vec(vec![-1.0f32, -2.0], &[2]).unwrap();
        let c2 = Tensor::cat(&[&s, &v], 0);
        assert_eq!(c2.shape_string(), "[<=8]");
        assert_eq!(c2.size(0).lower_bound(), 2);
        assert_eq!(c2.to_vec::<f32>().unwrap(), vec![-1.0, -2.0, 1.0, 3.0, 0.5, 4.0]);
        // The same zone twice: 2s, and elementwise with another 2s works.
        let vv = Tensor::cat(&[&v, &v], 0);
        assert_eq!(vv.shape_string(), "[<=12]");
        let f = Tensor::stack(&[&v, &v], 0).flatten(); // [2 * s], the same s
        assert_eq!((&vv + &f).concrete_shape().unwrap(), vec![8]);
        // Along a static dim of dynamic tensors.
        let m = dyn_mat();
        let wide = Tensor::cat(&[&m, &(&m * 10.0)], 1);
        assert_eq!(wide.shape_string(), "[<=6, 4]");
        assert_eq!(wide.narrow(1, 2, 2).sum().item::<f32>().unwrap(), 255.0);
        // stack of dynamic tensors.
        assert_eq!(Tensor::stack(&[&v, &v], 0).shape_string(), "[2, <=6]");
        // Along a static dim, dynamic dims not proven equal are checked
        // when the program runs (4 and 2 here).
        let c3 = Tensor::cat(&[&v.unsqueeze(1), &w.unsqueeze(1)], 1);
        let e = c3.to_vec::<f32>().unwrap_err().to_string();
        assert!(e.starts_with("cat") && e.contains("in [0, 6]") && e.contains("in [0, 3]"), "{e}");
        assert!(e.contains("they are 4 and 2"), "{e}");
    }
}

backend_test! {
    fn softmax_where_cond_and_to_dtype_on_dynamic_tensors() {
        let m = dyn_mat();
        let s = m.softmax(1);
        assert_eq!(s.shape_string(), "[<=6, 2]");
        let sig = |d: f32| 1.0 / (1.0 + d.exp());
        // softmax([v, 2v]) = [sigmoid(-v), sigmoid(v)] = [1/(1+e^v), ..].
        let want: Vec<f32> = [1.0f32, 3.0, 0.5, 4.0].iter().flat_map(|&v| [sig(v), 1.0 - sig(v)]).collect();
        assert_close(&s.to_vec::<f32>().unwrap(), &want, 1e-6);
        let ls = m.log_softmax(-1);
        assert_close(&ls.exp().to_vec::<f32>().unwrap(), &want, 1e-6);
        // Along the dynamic dim: each column sums to one over the real rows.
        let s0 = m.softmax(0);
        assert_close(&s0.sum_dims(&[0], false).to_vec::<f32>().unwrap(), &[1.0, 1.0], 1e-6);
        // where_cond with a dynamic condition and a static scalar branch.
        let c = m.gt_scalar(2.5).where_cond(&m, &Tensor::scalar(0.0f32));
        assert_eq!(c.shape_string(), "[<=6, 2]");
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 3.0, 6.0, 0.0, 0.0, 4.0, 8.0]);
        // to_dtype keeps the dynamic size.
        let i = m.to_dtype(DType::I64);
        assert_eq!(i.shape_string(), "[<=6, 2]");
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2, 3, 6, 0, 1, 4, 8]);
        assert_eq!(i.to_dtype(DType::Bool).sum().item::<i64>().unwrap(), 7);
    }
}

backend_test! {
    fn indexing_with_a_dynamic_number_of_indices() {
        let table = Tensor::from_vec((0..8).map(|i| i as f32).collect::<Vec<_>>(), &[4, 2]).unwrap();
        let keys = Tensor::from_vec(vec![0i64, 3, 0, 1, 0], &[5]).unwrap();
        let idx = keys.nonzero().flatten(); // positions 1, 3 of <=5
        assert_eq!(idx.shape_string(), "[<=5]");
        let rows = table.index_select(0, &idx);
        assert_eq!(rows.shape_string(), "[<=5, 2]");
        assert_eq!(rows.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 6.0, 7.0]);
        // A dynamic input with static indices.
        let v = dyn_vec();
        let picked = v.unsqueeze(1).index_select(1, &Tensor::from_vec(vec![0i64, 0, 0], &[3]).unwrap());
        assert_eq!(picked.shape_string(), "[<=6, 3]");
        assert_eq!(picked.sum().item::<f32>().unwrap(), 3.0 * 8.5);
        // Gather with a dynamic index: out[i][j] = table[nz[i][j]][j].
        let mask = Tensor::from_vec(vec![false, true, false, false, true, true, false, false], &[4, 2]).unwrap();
        let nz = mask.nonzero(); // [[0,1],[2,0],[2,1]] of <=8
        assert_eq!(nz.shape_string(), "[<=8, 2]");
        let g = table.gather(0, &nz);
        assert_eq!(g.shape_string(), "[<=8, 2]");
        assert_eq!(g.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 4.0, 1.0, 4.0, 3.0]);
        // Gather along the static dim of a dynamic input.
        let m = dyn_mat();
        let first = m.gather(1, &Tensor::zeros(&[1, 1], DType::I64).expand(&[m.size(0), 1.into()]));
        assert_eq!(first.shape_string(), "[<=6, 1]");
        assert_eq!(first.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 0.5, 4.0]);
    }
}

backend_test! {
    fn expand_and_arange_sym_with_dynamic_sizes() {
        let v = dyn_vec();
        let n = v.size(0);
        let e = v.unsqueeze(1).expand(&[n.clone(), 3.into()]);
        assert_eq!(e.shape_string(), "[<=6, 3]");
        assert_eq!(e.sum().item::<f32>().unwrap(), 3.0 * 8.5);
        // A static tensor expanded to a dynamic size meets the zone.
        let ones = Tensor::ones(&[1], DType::F32).expand(std::slice::from_ref(&n));
        assert_eq!(ones.shape_string(), "[<=6]");
        assert_eq!((&ones + &v).to_vec::<f32>().unwrap(), vec![2.0, 4.0, 1.5, 5.0]);
        let e2 = Tensor::ones(&[2, 1], DType::I64).expand(&[SymInt::from(2), n.clone() * 2]);
        assert_eq!(e2.shape_string(), "[2, <=12]");
        assert_eq!(e2.sum().item::<i64>().unwrap(), 16);
        // arange_sym over a dynamic size.
        let r = Tensor::arange_sym(&n);
        assert!(r.is_dynamic());
        assert_eq!(r.shape_string(), "[<=6]");
        assert_eq!(r.dtype(), DType::I64);
        assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
        // It shares the zone's size: positions weigh the values.
        assert_eq!((&r * &v).sum().item::<f32>().unwrap(), 3.0 + 1.0 + 12.0);
        // Of a size expression: n - 1 (bounds clamp at zero).
        let r1 = Tensor::arange_sym(&(n.clone() - 1));
        assert_eq!(r1.size(0).upper_bound(), 5);
        assert_eq!(r1.to_vec::<i64>().unwrap(), vec![0, 1, 2]);
    }
}

backend_test! {
    fn pad_to_bound_ends_the_zone() {
        let v = dyn_vec();
        let p = v.pad_to_bound(-1.0);
        assert!(!p.is_dynamic());
        assert_eq!(p.shape_string(), "[6]");
        assert_eq!(p.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 0.5, 4.0, -1.0, -1.0]);
        let m = dyn_mat().pad_to_bound(0.0);
        assert_eq!(m.shape_string(), "[6, 2]");
        assert_eq!(m.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 6.0, 0.5, 1.0, 4.0, 8.0, 0.0, 0.0, 0.0, 0.0]);
        // Integer padding; static ops work afterwards.
        let nz = Tensor::from_vec(vec![0.0f32, 1.0], &[2]).unwrap().nonzero().pad_to_bound(-1.0);
        assert_eq!(nz.to_vec::<i64>().unwrap(), vec![1, -1]);
        assert_eq!(p.narrow(0, 4, 2).to_vec::<f32>().unwrap(), vec![-1.0, -1.0]);
        // A static tensor is returned as it is.
        let s = Tensor::ones(&[2], DType::F32);
        assert_eq!(s.pad_to_bound(5.0).to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
        // `narrow` along a dynamic dim has the size it asks for, checked
        // when the program runs.
        assert_eq!(v.narrow(0, 1, 2).to_vec::<f32>().unwrap(), vec![3.0, 0.5]);
        let err = v.narrow(0, 2, 3).to_vec::<f32>().unwrap_err().to_string();
        assert!(err.contains("narrow"), "{err}");
        let msg = panic_message(|| {
            let _ = v.narrow(0, 5, 2); // at most 6 - 5 = 1 element there
        });
        assert!(msg.contains("narrow") && msg.contains("never"), "{msg}");
    }
}

backend_test! {
    fn materializing_sizes_counts_once_and_caches() {
        let v = dyn_vec();
        let w = &v * 2.0;
        assert_eq!(metrics::counter("SizeMaterialization"), 0);
        assert_eq!(metrics::counter("ExecuteGraph"), 0);
        let n = w.size(0);
        assert_eq!(n.materialize().unwrap(), 4);
        assert_eq!(metrics::counter("SizeMaterialization"), 1);
        let after_first = metrics::report();
        let counters = |names: &[&str]| names.iter().map(|n| metrics::counter(n)).collect::<Vec<_>>();
        let names = ["SizeMaterialization", "ExecuteGraph", "UncachedCompile", "CachedCompile", "TransferFromDevice"];
        let before = counters(&names);
        // Asking again, through the same or another SymInt of the same size,
        // or through concrete_shape, runs and counts nothing.
        assert_eq!(n.materialize().unwrap(), 4);
        assert_eq!(v.size(0).materialize().unwrap(), 4);
        assert_eq!(w.concrete_shape().unwrap(), vec![4]);
        assert_eq!(counters(&names), before, "before:\n{after_first}\nafter:\n{}", metrics::report());
        // concrete_shape on a new zone counts once, then caches too.
        let m = Tensor::from_vec(vec![1.0f32, 0.0, 1.0, 1.0], &[2, 2]).unwrap().nonzero();
        assert_eq!(m.concrete_shape().unwrap(), vec![3, 2]);
        assert_eq!(metrics::counter("SizeMaterialization"), 2);
        let before = counters(&names);
        assert_eq!(m.concrete_shape().unwrap(), vec![3, 2]);
        assert_eq!(m.size(0).materialize().unwrap(), 3);
        assert_eq!(counters(&names), before);
        // Size arithmetic over materialised sizes needs nothing more.
        assert_eq!((m.size(0) * 2 + w.size(0)).materialize().unwrap(), 10);
        assert_eq!(counters(&names), before);
        // The tensors themselves still compute correctly.
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![2.0, 6.0, 1.0, 8.0]);
    }
}

backend_test! {
    fn to_vec_of_a_dynamic_tensor_gives_only_real_elements() {
        let m = dyn_mat();
        mark_step().unwrap();
        let v = m.to_vec::<f32>().unwrap();
        assert_eq!(v.len(), 8, "bound is 12 elements, real 8: {v:?}");
        assert_eq!(m.to_ndarray::<f32>().unwrap().shape(), &[4, 2]);
        assert_eq!(m.upper_bounds(), vec![6, 2]);
        assert_eq!(
            m.to_string(),
            "tensor([[1.0000, 2.0000],\n        [3.0000, 6.0000],\n        [0.5000, 1.0000],\n        [4.0000, 8.0000]], dtype=f32)"
        );
    }
}

backend_test! {
    fn a_loop_with_changing_nonzero_counts_compiles_once() {
        let mut seen = std::collections::BTreeSet::new();
        for step in 0..50usize {
            let host: Vec<f32> = (0..12).map(|i| if (i * 5 + step * 7) % 13 < step % 12 { 1.0 } else { 0.0 }).collect();
            let x = Tensor::from_vec(host.clone(), &[3, 4]).unwrap();
            let nz = x.nonzero();
            let score = (nz.to_dtype(DType::F32) * 0.5).sum_dims(&[1], false).exp().sum();
            let count = nz.sum_dims(&[1], false).ge_scalar(0.0).to_dtype(DType::I64).sum();
            mark_step().unwrap();
            let coords: Vec<(usize, usize)> = host.iter().enumerate().filter(|(_, &b)| b != 0.0).map(|(i, _)| (i / 4, i % 4)).collect();
            seen.insert(coords.len());
            let want: f32 = coords.iter().map(|&(r, c)| (0.5 * (r + c) as f32).exp()).sum();
            assert_close(&[score.item::<f32>().unwrap()], &[want], 1e-5);
            assert_eq!(count.item::<i64>().unwrap(), coords.len() as i64, "step {step}");
        }
        assert!(seen.len() > 5, "the count should change across steps: {seen:?}");
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        assert_eq!(metrics::counter("CachedCompile"), 49);
    }
}

backend_test! {
    fn mark_dynamic_inputs_flow_through_ops() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap().mark_dynamic(0, 8);
        assert_eq!(x.shape_string(), "[<=8, 2]");
        assert_eq!(x.size(0).lower_bound(), 0);
        let y = Tensor::from_vec(vec![1.0f32, 0.0, 1.0], &[3, 1]).unwrap().mark_dynamic_as(0, &x, 0);
        let r = (&x * &y).sum_dims(&[0], false);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![6.0, 8.0]);
        assert_eq!(x.size(0).materialize().unwrap(), 3);
        // Marking a dynamic dim again is refused, pointing at the way out.
        let msg = panic_message(|| {
            let _ = x.mark_dynamic(0, 10);
        });
        assert!(msg.contains("mark_dynamic") && msg.contains("[<=8, 2]"), "{msg}");
        // mark_dynamic on an unrelated tensor of another length.
        let msg = panic_message(|| {
            let z = Tensor::zeros(&[2, 1], DType::F32);
            let _ = z.mark_dynamic_as(0, &x, 0);
        });
        assert!(msg.contains("mark_dynamic_as") && msg.contains("2") && msg.contains("3"), "{msg}");
    }
}

backend_test! {
    fn a_flattened_dynamic_result_reads_its_shape_after_mark_step() {
        // The nonzero result itself is dropped: only `2*s` names its size.
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0], &[2, 2]).unwrap();
        let f = x.nonzero().flatten();
        mark_step().unwrap();
        assert_eq!(f.concrete_shape().unwrap(), vec![6]);
        assert_eq!(f.to_vec::<i64>().unwrap(), vec![0, 0, 1, 0, 1, 1]);
    }
}

backend_test! {
    fn a_flattened_dynamic_result_materializes_its_size_after_mark_step() {
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0], &[2, 2]).unwrap();
        let f = x.nonzero().flatten(); // [2*s]: no live tensor has [s]
        mark_step().unwrap();
        assert_eq!(f.size(0).materialize().unwrap(), 6);
        assert_eq!((&f + 1).to_vec::<i64>().unwrap(), vec![1, 1, 2, 1, 2, 2]);
    }
}

backend_test! {
    fn marking_a_second_dim_dynamic_keeps_the_first() {
        let x = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[3, 2]).unwrap();
        let y = x.mark_dynamic(0, 4).mark_dynamic(1, 5);
        assert_eq!(y.shape_string(), "[<=4, <=5]");
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(y.sum().item::<f32>().unwrap(), 15.0);
        assert_eq!((&y * 2.0).sum_dims(&[1], false).to_vec::<f32>().unwrap(), vec![2.0, 10.0, 18.0]);
    }
}
