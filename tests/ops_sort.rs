//! Sorting and scattering against host computations: `sort`, `argsort`,
//! `topk` (stable ties, NaN largest, both directions, dims 0 and 1,
//! dynamic inputs from `masked_select`, gradients) and `scatter` /
//! `scatter_add`.

mod common;

use common::panic_message;
use lazyxla::{mark_step, DType, Error, Tensor};

/// PyTorch's stable order: NaN largest (equal to NaN), ties by index.
fn host_argsort(v: &[f64], descending: bool) -> Vec<i64> {
    let order = |a: f64, b: f64| {
        a.partial_cmp(&b)
            .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
    };
    let mut p: Vec<usize> = (0..v.len()).collect();
    if descending {
        p.sort_by(|&i, &j| order(v[j], v[i]));
    } else {
        p.sort_by(|&i, &j| order(v[i], v[j]));
    }
    p.into_iter().map(|i| i as i64).collect()
}

/// Lanes of a row-major `[rows, cols]` matrix along `dim`.
fn lanes(v: &[f64], rows: usize, cols: usize, dim: usize) -> Vec<Vec<f64>> {
    if dim == 0 {
        (0..cols)
            .map(|c| (0..rows).map(|r| v[r * cols + c]).collect())
            .collect()
    } else {
        v.chunks(cols).map(|c| c.to_vec()).collect()
    }
}

/// The host argsort of a `[rows, cols]` matrix along `dim`, row-major.
fn host_argsort_2d(v: &[f64], rows: usize, cols: usize, dim: usize, desc: bool) -> Vec<i64> {
    let per_lane: Vec<Vec<i64>> = lanes(v, rows, cols, dim)
        .iter()
        .map(|l| host_argsort(l, desc))
        .collect();
    let mut out = vec![0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            out[r * cols + c] = if dim == 0 {
                per_lane[c][r]
            } else {
                per_lane[r][c]
            };
        }
    }
    out
}

/// Equal as bits, NaN equal to NaN.
fn same(got: &[f32], want: &[f64]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(&g, &w)| (g.is_nan() && w.is_nan()) || g == w as f32)
}

fn f32s(v: &[f64], shape: &[usize]) -> Tensor {
    let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    Tensor::from_vec(v, shape).unwrap()
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
/// Ties, NaNs, infinities and signed zeros (which compare equal).
const V: [f64; 10] = [3.0, NAN, 1.0, 3.0, -INF, NAN, 0.0, -0.0, INF, 1.0];

backend_test! {
    fn sort_1d_is_stable_with_nan_largest() {
        let x = f32s(&V, &[10]);
        for desc in [false, true] {
            let want = host_argsort(&V, desc);
            let (v, i) = x.sort(0, desc);
            assert_eq!(i.dtype(), DType::I64);
            assert_eq!(i.to_vec::<i64>().unwrap(), want, "descending {desc}");
            let vals: Vec<f64> = want.iter().map(|&k| V[k as usize]).collect();
            assert!(same(&v.to_vec::<f32>().unwrap(), &vals), "{:?}", v.to_vec::<f32>());
            assert_eq!(x.argsort(0, desc).to_vec::<i64>().unwrap(), want);
            assert_eq!(x.argsort(-1, desc).to_vec::<i64>().unwrap(), want);
        }
        // Ascending: NaNs last, in their order; descending: first.
        assert_eq!(&x.argsort(0, false).to_vec::<i64>().unwrap()[8..], &[1, 5]);
        assert_eq!(&x.argsort(0, true).to_vec::<i64>().unwrap()[..2], &[1, 5]);
    }
}

backend_test! {
    fn sort_2d_along_both_dims_and_dtypes() {
        let v: Vec<f64> = vec![2.0, 1.0, 2.0, NAN, 1.0, 1.0, 0.5, 2.0, NAN, 1.0, 2.0, 0.5];
        let x = f32s(&v, &[3, 4]);
        let x64 = Tensor::from_vec(v.clone(), &[3, 4]).unwrap();
        for dim in [0usize, 1] {
            for desc in [false, true] {
                let want = host_argsort_2d(&v, 3, 4, dim, desc);
                let (vals, idx) = x.sort(dim, desc);
                assert_eq!(idx.concrete_shape().unwrap(), vec![3, 4]);
                assert_eq!(idx.to_vec::<i64>().unwrap(), want, "dim {dim} descending {desc}");
                assert_eq!(x64.argsort(dim, desc).to_vec::<i64>().unwrap(), want);
                let gathered: Vec<f64> = (0..12)
                    .map(|p| {
                        let (r, c) = (p / 4, p % 4);
                        let k = want[p] as usize;
                        if dim == 0 { v[k * 4 + c] } else { v[r * 4 + k] }
                    })
                    .collect();
                assert!(same(&vals.to_vec::<f32>().unwrap(), &gathered));
            }
        }
        // Integers and bools sort too (false < true).
        let iv = Tensor::from_vec(vec![3i64, -1, 3, 0, -1], &[5]).unwrap();
        assert_eq!(iv.argsort(0, false).to_vec::<i64>().unwrap(), vec![1, 4, 3, 0, 2]);
        assert_eq!(iv.sort(0, true).0.to_vec::<i64>().unwrap(), vec![3, 3, 0, -1, -1]);
        let i32v = Tensor::from_vec(vec![5i32, 2, 5], &[3]).unwrap();
        assert_eq!(i32v.sort(0, true).1.to_vec::<i64>().unwrap(), vec![0, 2, 1]);
        let b = Tensor::from_vec(vec![true, false, true, false], &[4]).unwrap();
        assert_eq!(b.argsort(0, false).to_vec::<i64>().unwrap(), vec![1, 3, 0, 2]);
        assert_eq!(b.sort(0, true).0.to_vec::<bool>().unwrap(), vec![true, true, false, false]);
        // Empty and single-element dims.
        let e = Tensor::zeros(&[0, 3], DType::F32);
        assert_eq!(e.argsort(0, false).concrete_shape().unwrap(), vec![0, 3]);
        assert_eq!(e.sort(1, true).0.concrete_shape().unwrap(), vec![0, 3]);
        let one = f32s(&[4.0, 5.0], &[1, 2]);
        assert_eq!(one.argsort(0, true).to_vec::<i64>().unwrap(), vec![0, 0]);
    }
}

backend_test! {
    fn topk_static() {
        let x = f32s(&V, &[10]);
        for (largest, k) in [(true, 4), (false, 4), (true, 10), (false, 0)] {
            let want: Vec<i64> = host_argsort(&V, largest)[..k].to_vec();
            let (v, i) = x.topk(k, 0, largest);
            assert_eq!(v.concrete_shape().unwrap(), vec![k]);
            assert_eq!(i.to_vec::<i64>().unwrap(), want, "largest {largest} k {k}");
            let vals: Vec<f64> = want.iter().map(|&j| V[j as usize]).collect();
            assert!(same(&v.to_vec::<f32>().unwrap(), &vals));
        }
        let m: Vec<f64> = vec![1.0, 4.0, 4.0, 2.0, 0.0, 3.0, 3.0, 9.0];
        let x = f32s(&m, &[2, 4]);
        let (v, i) = x.topk(2, 1, true);
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2, 3, 1]);
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![4.0, 4.0, 9.0, 3.0]);
        let (v, i) = x.topk(1, 0, false);
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 1, 1, 0]);
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 3.0, 2.0]);
        let msg = panic_message(|| {
            let _ = x.topk(5, 1, true);
        });
        assert!(msg.contains("topk") && msg.contains("k = 5") && msg.contains("[2, 4]"), "{msg}");
    }
}

backend_test! {
    fn topk_orders_as_the_stable_sort_for_every_dtype() {
        // -0 ties +0 (lower index first), NaN is the largest both ways,
        // infinities: topk agrees with the first k of argsort.
        let v = [0.0, -0.0, f64::NAN, 1.5, f64::NEG_INFINITY, -0.0, f64::INFINITY, f64::NAN, -2.0];
        let n = v.len();
        let f64s = Tensor::from_vec(v.to_vec(), &[n]).unwrap();
        for x in [f32s(&v, &[n]), f64s] {
            for largest in [true, false] {
                for k in [1, 3, 5, n] {
                    let (_, i) = x.topk(k, 0, largest);
                    let want = host_argsort(&v, largest)[..k].to_vec();
                    assert_eq!(i.to_vec::<i64>().unwrap(), want, "{:?} largest {largest} k {k}", x.dtype());
                }
            }
        }
        let ints = [3i64, i64::MIN, -1, 3, i64::MAX, 0, -1];
        let as_f64: Vec<f64> = ints.iter().map(|&a| a as f64).collect();
        let x64 = Tensor::from_vec(ints.to_vec(), &[7]).unwrap();
        let x32 = x64.to_dtype(DType::I32);
        for largest in [true, false] {
            let want = host_argsort(&as_f64, largest)[..4].to_vec();
            assert_eq!(x64.topk(4, 0, largest).1.to_vec::<i64>().unwrap(), want);
            // i64::MIN and i64::MAX wrap to 0 and -1 in I32.
            let wrapped: Vec<f64> = ints.iter().map(|&a| a as i32 as f64).collect();
            let want = host_argsort(&wrapped, largest)[..4].to_vec();
            assert_eq!(x32.topk(4, 0, largest).1.to_vec::<i64>().unwrap(), want);
        }
        let b = Tensor::from_vec(vec![false, true, false, true], &[4]).unwrap();
        assert_eq!(b.topk(3, 0, true).1.to_vec::<i64>().unwrap(), vec![1, 3, 0]);
        assert_eq!(b.topk(3, 0, false).1.to_vec::<i64>().unwrap(), vec![0, 2, 1]);
    }
}

/// `[-1, 2, NaN, 2, 5, -3, 0.5, NaN]` with a mask keeping all but `5` and
/// `-3`: six real elements in a `[<=8]` tensor.
fn dynamic_input() -> (Vec<f64>, Tensor) {
    let all = [-1.0, 2.0, NAN, 2.0, 5.0, -3.0, 0.5, NAN];
    let keep = [true, true, true, true, false, false, true, true];
    let x = f32s(&all, &[8]);
    let m = Tensor::from_vec(keep.to_vec(), &[8]).unwrap();
    let real: Vec<f64> = all
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(v, _)| *v)
        .collect();
    (real, x.masked_select(&m))
}

backend_test! {
    fn sort_of_a_dynamic_input_never_shows_padding() {
        let (real, s) = dynamic_input();
        for desc in [false, true] {
            let want = host_argsort(&real, desc);
            let (v, i) = s.sort(0, desc);
            assert_eq!(v.size(0).to_string(), "<=8");
            assert_eq!(i.to_vec::<i64>().unwrap(), want, "descending {desc}");
            let vals: Vec<f64> = want.iter().map(|&k| real[k as usize]).collect();
            // On XLA the padding of `s` holds 0, between the real values:
            // it would show here if it were sorted in.
            assert!(same(&v.to_vec::<f32>().unwrap(), &vals));
        }
        // 2-D: [<=8, 2] along the dynamic dim 0 and the static dim 1.
        let m = Tensor::stack(&[&s, &s.neg()], 1);
        let flat: Vec<f64> = real.iter().flat_map(|&a| [a, -a]).collect();
        let rows = real.len();
        for dim in [0usize, 1] {
            for desc in [false, true] {
                let want = host_argsort_2d(&flat, rows, 2, dim, desc);
                let (v, i) = m.sort(dim, desc);
                assert_eq!(i.concrete_shape().unwrap(), vec![rows, 2]);
                assert_eq!(i.to_vec::<i64>().unwrap(), want, "dim {dim} descending {desc}");
                assert_eq!(v.to_vec::<f32>().unwrap().len(), rows * 2);
            }
        }
        // Integer keys in a dynamic zone.
        let ints = s.to_dtype(DType::I64);
        let ireal: Vec<f64> = real.iter().map(|&v| if v.is_nan() { 0.0 } else { v.trunc() }).collect();
        assert_eq!(ints.argsort(0, true).to_vec::<i64>().unwrap(), host_argsort(&ireal, true));
        mark_step().unwrap();
    }
}

backend_test! {
    fn topk_of_a_dynamic_input_is_static_and_checked() {
        let (real, s) = dynamic_input();
        for largest in [true, false] {
            let want: Vec<i64> = host_argsort(&real, largest)[..4].to_vec();
            let (v, i) = s.topk(4, 0, largest);
            // Exactly k results: the size is static.
            assert_eq!(v.size(0).as_static(), Some(4));
            assert_eq!(i.to_vec::<i64>().unwrap(), want, "largest {largest}");
            let vals: Vec<f64> = want.iter().map(|&k| real[k as usize]).collect();
            assert!(same(&v.to_vec::<f32>().unwrap(), &vals));
        }
        // Along the dynamic dim of a 2-D input, and along its static dim.
        let m = Tensor::stack(&[&s, &(&s * 2.0)], 1); // [<=8, 2]
        let (v, i) = m.topk(2, 0, false);
        assert_eq!(v.concrete_shape().unwrap(), vec![2, 2]);
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 0, 4, 4]);
        assert_eq!(v.to_vec::<f32>().unwrap(), vec![-1.0, -2.0, 0.5, 1.0]);
        let (v, i) = m.topk(1, 1, true);
        assert_eq!(v.size(0).to_string(), "<=8");
        assert_eq!(v.concrete_shape().unwrap(), vec![6, 1]);
        assert_eq!(i.to_vec::<i64>().unwrap().len(), 6);
        // Two dynamic dims ([<=8, <=8], outer product of the six real
        // values): k along one, the other keeps its size.
        let finite = s.masked_select(&s.eq(&s)); // NaN-free, [<=8]
        let fin: Vec<f64> = real.iter().copied().filter(|v| !v.is_nan()).collect();
        let outer = finite.unsqueeze(1).matmul(&finite.unsqueeze(0));
        let (v, i) = outer.topk(2, 0, true);
        assert_eq!(v.size(1).to_string(), "<=8");
        assert_eq!(v.concrete_shape().unwrap(), vec![2, fin.len()]);
        let idx = i.to_vec::<i64>().unwrap();
        for c in 0..fin.len() {
            let col: Vec<f64> = fin.iter().map(|r| r * fin[c]).collect();
            let want = &host_argsort(&col, true)[..2];
            assert_eq!(&[idx[c], idx[fin.len() + c]], want, "column {c}");
        }
        // Fewer real elements than k: the step fails, naming topk; the
        // runtime stays usable.
        let (v, _) = s.topk(7, 0, true);
        let err = v.to_vec::<f32>().unwrap_err();
        assert!(matches!(err, Error::SizeCheckFailed { .. }), "{err}");
        assert!(err.to_string().contains("topk"), "{err}");
        drop(v);
        // Above the bound: an error at once.
        let msg = panic_message(|| {
            let _ = s.topk(9, 0, true);
        });
        assert!(msg.contains("topk") && msg.contains("k = 9") && msg.contains("<=8"), "{msg}");
        // k = 0 needs no element.
        assert_eq!(s.topk(0, 0, true).0.concrete_shape().unwrap(), vec![0]);
        mark_step().unwrap();
    }
}

backend_test! {
    fn sort_and_topk_gradients_scatter_back() {
        let xs = [0.3, -1.2, 2.1, 0.7, -0.4, 1.6];
        let w = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[6]);
        let x = f32s(&xs, &[6]).requires_grad(true);
        let (v, _) = x.sort(0, true);
        (&v * &w).sum().backward();
        // Sorted descending: 2.1 (2), 1.6 (5), 0.7 (3), 0.3 (0), -0.4 (4), -1.2 (1).
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![4.0, 6.0, 1.0, 3.0, 5.0, 2.0]);
        x.zero_grad();
        let (v, _) = x.topk(2, 0, false);
        (&v * &w.narrow(0, 0, 2)).sum().backward();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 1.0, 0.0, 0.0, 2.0, 0.0]);
        x.zero_grad();
        // Through a dynamic zone: positive elements 0.3, 2.1, 0.7, 1.6.
        let s = x.masked_select(&x.gt_scalar(0.0));
        let (v, _) = s.sort(0, false);
        let pos = Tensor::arange_sym(&v.size(0)).to_dtype(DType::F32) + 1.0;
        (&v * &pos).sum().backward();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 0.0, 4.0, 2.0, 0.0, 3.0]);
        x.zero_grad();
        let (v, _) = s.topk(3, 0, true);
        (&v * &w.narrow(0, 0, 3)).sum().backward();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 0.0, 1.0, 3.0, 0.0, 2.0]);
        mark_step().unwrap();
    }
}

backend_test! {
    fn scatter_overwrites_and_adds() {
        let base = f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
        let idx = Tensor::from_vec(vec![2i64, 0, 1, 2], &[2, 2]).unwrap();
        let src = f32s(&[10.0, 20.0, 30.0, 40.0], &[2, 2]);
        // dim 0: out[idx[i][j]][j] = src[i][j].
        let out = base.scatter(0, &idx, &src);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 20.0, 30.0, 3.0, 10.0, 40.0]);
        let out = base.scatter_add(0, &idx, &src);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 21.0, 32.0, 3.0, 14.0, 45.0]);
        // dim 1, an index smaller than the base, a larger source.
        let idx1 = Tensor::from_vec(vec![1i64, 0], &[2, 1]).unwrap();
        let big = f32s(&[7.0, 70.0, 8.0, 80.0], &[2, 2]);
        let out = base.scatter(1, &idx1, &big);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 7.0, 8.0, 3.0, 4.0, 5.0]);
        // Duplicates: add accumulates.
        let dup = Tensor::from_vec(vec![0i64, 0, 0], &[3]).unwrap();
        let ones = f32s(&[1.0, 2.0, 3.0], &[3]);
        let out = Tensor::zeros(&[2], DType::F32).scatter_add(0, &dup, &ones);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![6.0, 0.0]);
        // Integers and bools overwrite too; the source takes the base's dtype.
        let ib = Tensor::zeros(&[3], DType::I64).scatter(0, &Tensor::from_vec(vec![2i64], &[1]).unwrap(), &f32s(&[9.0], &[1]));
        assert_eq!(ib.to_vec::<i64>().unwrap(), vec![0, 0, 9]);
        let bb = Tensor::zeros(&[3], DType::Bool).scatter(0, &Tensor::from_vec(vec![1i64], &[1]).unwrap(), &Tensor::from_vec(vec![true], &[1]).unwrap());
        assert_eq!(bb.to_vec::<bool>().unwrap(), vec![false, true, false]);
        // Misuse names the op and the shapes.
        let msg = panic_message(|| {
            let _ = base.scatter(0, &Tensor::from_vec(vec![0i64; 6], &[2, 3]).unwrap(), &f32s(&[0.0; 6], &[2, 3]));
        });
        assert!(msg.contains("scatter") && msg.contains("[3, 2]") && msg.contains("[2, 3]"), "{msg}");
        let msg = panic_message(|| {
            let _ = base.scatter(0, &f32s(&[0.0; 4], &[2, 2]), &src);
        });
        assert!(msg.contains("scatter") && msg.contains("index"), "{msg}");
    }
}

backend_test! {
    fn scatter_with_dynamic_indices_and_gradients() {
        // A permutation from a dynamic sort scatters the sorted values back
        // into place: the padding of index and source is dropped.
        let (real, s) = dynamic_input();
        let (v, i) = s.sort(0, true);
        let back = s.zeros_like().scatter(0, &i, &v);
        assert!(same(&back.to_vec::<f32>().unwrap(), &real));
        let sum = s.zeros_like().scatter_add(0, &i.zeros_like(), &v.ones_like());
        assert_eq!(sum.to_vec::<f32>().unwrap()[0], real.len() as f32);
        // Gradients: the source gets the output's gradient at its index,
        // the base none where it was overwritten.
        let b = f32s(&[1.0, 2.0, 3.0], &[3]).requires_grad(true);
        let src = f32s(&[5.0, 6.0], &[2]).requires_grad(true);
        let idx = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
        let w = f32s(&[1.0, 10.0, 100.0], &[3]);
        (&b.scatter(0, &idx, &src) * &w).sum().backward();
        assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.0, 10.0, 0.0]);
        assert_eq!(src.grad().unwrap().to_vec::<f32>().unwrap(), vec![100.0, 1.0]);
        b.zero_grad();
        src.zero_grad();
        (&b.scatter_add(0, &idx, &src) * &w).sum().backward();
        assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 10.0, 100.0]);
        assert_eq!(src.grad().unwrap().to_vec::<f32>().unwrap(), vec![100.0, 1.0]);
        mark_step().unwrap();
    }
}

/// Duplicate indices with `scatter`: the reference keeps the last in
/// row-major order of the index (XLA may keep any one, as PyTorch).
#[test]
fn scatter_duplicates_last_wins_on_the_reference() {
    common::run_on(&lazyxla::Device::reference(), || {
        let idx = Tensor::from_vec(vec![1i64, 0, 1, 1], &[4]).unwrap();
        let src = f32s(&[1.0, 2.0, 3.0, 4.0], &[4]);
        let out = Tensor::zeros(&[3], DType::F32).scatter(0, &idx, &src);
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 0.0]);
    });
}
