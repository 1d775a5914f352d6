//! One size variable per source (`ir::size_source`): dynamic ops that
//! count the same thing of the same value share their size, so their
//! results meet in elementwise ops as they do in PyTorch; ops over
//! different values do not.

mod common;

use common::assert_close;
use common::Lcg;
use lazyxla::metrics::counter;
use lazyxla::{capture, mark_step, DType, Tensor};

fn host_masked(v: &[f32], m: &[bool]) -> Vec<f32> {
    v.iter()
        .zip(m)
        .filter(|(_, &b)| b)
        .map(|(x, _)| *x)
        .collect()
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap()
}

backend_test! {
    fn masked_select_difference_matches_the_host_and_compiles_once() {
        let mut g = Lcg(7);
        let n = 16;
        for step in 0..30 {
            // The number of positives changes every step (0 ..= 15).
            let mask: Vec<bool> = (0..n).map(|i| (i * 7 + step * 3) % 16 < step % 16).collect();
            let (pred, tgt) = (g.floats(n), g.floats(n));
            let m = Tensor::from_vec(mask.iter().map(|&b| b as i64 as f32).collect(), &[n])
                .unwrap()
                .gt_scalar(0.5);
            let (p, q) = (t(&pred), t(&tgt));
            let d = p.masked_select(&m) - q.masked_select(&m);
            assert_eq!(d.shape_string(), "[<=16]", "step {step}");
            let loss = d.pow(2.0).sum();
            mark_step().unwrap(); // one program computes both
            let want: Vec<f32> = host_masked(&pred, &mask)
                .iter()
                .zip(host_masked(&tgt, &mask))
                .map(|(a, b)| a - b)
                .collect();
            assert_eq!(d.to_vec::<f32>().unwrap(), want, "step {step}");
            let want_loss: f32 = want.iter().map(|x| x * x).sum();
            assert_close(&[loss.item::<f32>().unwrap()], &[want_loss], 1e-5);
        }
        let report = lazyxla::metrics::report();
        assert_eq!(counter("UncachedCompile"), 1, "{report}");
        assert_eq!(counter("CachedCompile"), 29, "{report}");
    }
}

backend_test! {
    fn two_nonzero_of_one_tensor_share_their_size() {
        let x = t(&[1.0, 0.0, 2.0, 0.0, 3.0]);
        let (a, b) = (x.nonzero(), x.nonzero());
        assert!(a.size(0) == b.size(0));
        assert_eq!((&a + &b).to_vec::<i64>().unwrap(), vec![0, 4, 8]);
        // And the size of a pending value is the other's once computed.
        assert_eq!(b.size(0).materialize().unwrap(), 3);
    }
}

backend_test! {
    fn nonzero_of_a_mask_and_masked_select_by_it_share_their_size() {
        let x = t(&[0.5, -1.0, 2.0, 3.0, -4.0]);
        let m = x.gt_scalar(0.0);
        let idx = m.nonzero(); // [s, 1]
        let sel = x.masked_select(&m); // [s]
        assert!(idx.size(0) == sel.size(0));
        let both = idx.flatten().to_dtype(DType::F32) + &sel;
        assert_eq!(both.to_vec::<f32>().unwrap(), vec![0.5, 4.0, 6.0]);
        // A float mask is compared with zero: its nonzero count is another
        // operand's (the tensor, not the comparison), so these do not share.
        let w = t(&[1.0, 0.0, 1.0, 1.0, 0.0]);
        assert!(w.nonzero().size(0) != x.masked_select(&w).size(0));
        // Two selections by one float mask share (equal comparisons).
        let s = x.masked_select(&w) * x.masked_select(&w);
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![0.25, 4.0, 9.0]);
    }
}

backend_test! {
    fn a_comparison_recorded_twice_is_the_same_mask() {
        let x = t(&[0.1, 0.9, 0.6, 0.2, 0.7]);
        let y = t(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        let a = x.masked_select(&x.gt_scalar(0.5));
        let b = y.masked_select(&x.gt_scalar(0.5));
        assert!(a.size(0) == b.size(0));
        let d = &b - &a;
        assert_close(&d.to_vec::<f32>().unwrap(), &[1.1, 2.4, 4.3], 1e-6);
        // Through a longer chain of equal ops, too.
        let chain = |x: &Tensor| (x * 2.0 + 1.0).exp().gt_scalar(5.0);
        assert!(x.masked_select(&chain(&x)).size(0) == y.masked_select(&chain(&x)).size(0));
    }
}

backend_test! {
    fn different_masks_do_not_share() {
        let x = t(&[0.1, 0.9, 0.6, 0.2, 0.7]);
        let a = x.masked_select(&x.gt_scalar(0.5));
        let b = x.masked_select(&x.gt_scalar(0.4));
        let c = x.masked_select(&x.lt_scalar(0.5));
        // Equal numbers in another tensor are another operand.
        let same_numbers = t(&[0.1, 0.9, 0.6, 0.2, 0.7]);
        let e = x.masked_select(&same_numbers.gt_scalar(0.5));
        for other in [&b, &c, &e] {
            assert!(a.size(0) != other.size(0));
        }
        assert!(x.nonzero().size(0) != a.size(0), "another operand");
        // Different sizes meet through a run-time check (3 and 2: it fails).
        let err = (&a - &c).to_vec::<f32>().unwrap_err().to_string();
        assert!(err.contains("must be equal") && err.contains("they are 3 and 2"), "{err}");
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![0.9, 0.6, 0.7]);
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![0.1, 0.2]);
    }
}

backend_test! {
    fn unique_twice_shares_its_size() {
        let x = Tensor::from_vec(vec![3i64, 1, 3, 2, 1, 2], &[2, 3]).unwrap();
        let (a, b) = (x.unique(), x.unique());
        assert!(a.size(0) == b.size(0));
        let (u, c) = x.unique_with_counts();
        assert!(u.size(0) == a.size(0) && c.size(0) == a.size(0));
        assert_eq!((&a * &b).to_vec::<i64>().unwrap(), vec![1, 4, 9]);
        assert_eq!((&c + &a).to_vec::<i64>().unwrap(), vec![3, 4, 5]);
        // A count of distinct elements is not a count of nonzero ones.
        assert!(x.flatten().nonzero().size(0) != a.size(0));
    }
}

backend_test! {
    fn a_computed_size_is_not_shared_by_new_ops() {
        // A size a program has computed keeps its value; ops recorded
        // after that get a new variable (shared among themselves).
        let x = t(&[1.0, -2.0, 3.0, -4.0, 5.0]);
        let m = x.gt_scalar(0.0);
        let a = x.masked_select(&m);
        let b = (-&x).masked_select(&m);
        let pending = &a + &b; // reads the definitions of a and b again
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 5.0]);
        let c = x.masked_select(&m);
        let d = (&x * 2.0).masked_select(&m);
        assert!(c.size(0) == d.size(0));
        assert!(c.size(0) != a.size(0));
        assert_eq!((&d - &c).to_vec::<f32>().unwrap(), vec![1.0, 3.0, 5.0]);
        // A program defining the already computed size of `a` and `b`.
        assert_eq!(pending.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0]);
        assert_eq!(pending.size(0).materialize().unwrap(), 3);
        assert_eq!(b.to_vec::<f32>().unwrap(), vec![-1.0, -3.0, -5.0]);
    }
}

backend_test! {
    fn a_captured_step_replays_shared_sizes_with_new_counts() {
        let mut step = capture(|x: &[Tensor]| {
            let m = x[0].gt_scalar(0.0);
            vec![x[1].masked_select(&m) - x[0].masked_select(&x[0].gt_scalar(0.0))]
        });
        let mut g = Lcg(11);
        for k in 0..8 {
            let a: Vec<f32> = g.floats(8).iter().map(|v| v - 0.5).collect();
            let b = g.floats(8);
            let out = step.run(&[t(&a), t(&b)]).unwrap();
            let mask: Vec<bool> = a.iter().map(|&v| v > 0.0).collect();
            let want: Vec<f32> = host_masked(&b, &mask)
                .iter()
                .zip(host_masked(&a, &mask))
                .map(|(p, q)| p - q)
                .collect();
            assert_eq!(out[0].to_vec::<f32>().unwrap(), want, "call {k}");
        }
        assert_eq!(step.recordings(), 1);
    }
}
