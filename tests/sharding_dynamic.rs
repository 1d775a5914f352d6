//! Bounded dynamic sizes in sharded programs on a 4-device mesh, on both
//! backends (the findings are in `lazyxla::sharding::dynamic`): a
//! dynamic dim that stays whole, and `nonzero` inside a sharded step,
//! equal one device; splitting a dynamic dim is a clear error naming
//! the dim.

mod common;

use common::{assert_close, Lcg};
use lazyxla::sharding::Mesh;
use lazyxla::{mark_step, metrics, Tensor};

fn host(seed: u64, shape: &[usize]) -> Tensor {
    let mut g = Lcg(seed);
    let n = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| (g.next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    Tensor::from_vec(v, shape).unwrap()
}

fn mesh() -> Mesh {
    Mesh::new(&lazyxla::devices(), &[4], &["data"]).unwrap()
}

/// Columns of `x [8, 6]` picked by the positive entries of `w [6]`: a
/// result `[8, <=6]` whose dynamic dim is not split (dim 0 is).
fn picked(x: &Tensor, w: &Tensor) -> Tensor {
    let cols = w.gt_scalar(0.0).nonzero().reshape(&[-1]);
    let y = x.index_select(1, &cols);
    (&y * &y).sum_dims(&[1], false)
}

backend_test! {
    fn a_whole_dynamic_dim_in_a_sharded_step_equals_one_device() {
        let mesh = mesh();
        for seed in [1u64, 2, 3] {
            let (x, w) = (host(seed, &[8, 6]), host(seed + 10, &[6]));
            let want = picked(&x, &w).to_vec::<f32>().unwrap();
            let xs = x.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
            let ws = mesh.scoped(|| w.to_device(mesh.device()).unwrap());
            if seed == 1 {
                metrics::reset();
            }
            let got = picked(&xs, &ws);
            mark_step().unwrap();
            assert_close(&got.to_vec::<f32>().unwrap(), &want, 1e-5);
        }
        // The number of picked columns changed; the program did not.
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
    }
}

backend_test! {
    fn nonzero_of_a_sharded_value_equals_one_device() {
        let mesh = mesh();
        let x = host(4, &[8, 6]);
        let want = x.gt_scalar(0.3).nonzero();
        let want_n = want.size(0).materialize().unwrap();
        let want = want.to_vec::<i64>().unwrap();
        let xs = x.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        let nz = xs.gt_scalar(0.3).nonzero();
        let total = nz.to_dtype(lazyxla::DType::F32).sum();
        mark_step().unwrap();
        assert_eq!(nz.size(0).materialize().unwrap(), want_n);
        assert_eq!(nz.to_vec::<i64>().unwrap(), want);
        let want_total: i64 = want.iter().sum();
        assert_close(&[total.item::<f32>().unwrap()], &[want_total as f32], 1e-6);
    }
}

backend_test! {
    /// A batch marked dynamic (6 of at most 8 rows) split over 4 devices
    /// by a constraint.
    fn a_split_dynamic_batch_equals_one_device() {
        let mesh = mesh();
        let x = host(6, &[6, 6]);
        let want = (&x * 3.0).sum_dims(&[1], false).to_vec::<f32>().unwrap();
        let xd = x.mark_dynamic(0, 8);
        let xs = mesh.scoped(|| xd.to_device(mesh.device()).unwrap());
        let y = (&xs * 3.0).mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        assert_eq!(y.sharding().unwrap().tiles(), &[4, 1]);
        let got = y.sum_dims(&[1], false);
        mark_step().unwrap();
        assert_close(&got.to_vec::<f32>().unwrap(), &want, 1e-6);
    }
}

backend_test! {
    /// The rows of a `nonzero`, split and reduced without being read: a
    /// masked zone, static at its bound in the program.
    fn a_split_masked_nonzero_zone_equals_one_device() {
        let mesh = mesh();
        let x = host(5, &[8, 6]);
        let want = x.gt_scalar(0.0).nonzero().to_dtype(lazyxla::DType::F32).sum();
        let want = want.item::<f32>().unwrap();
        let xs = x.mark_sharding(&mesh, &[None, None]).unwrap();
        let total = xs
            .gt_scalar(0.0)
            .nonzero()
            .to_dtype(lazyxla::DType::F32)
            .mark_sharding(&mesh, &[Some("data"), None])
            .unwrap()
            .sum();
        assert_close(&[total.item::<f32>().unwrap()], &[want], 1e-6);
    }
}

backend_test! {
    /// Rows of a `nonzero` that are read (packed) cannot be split by
    /// XLA: the compile error names the node, the dim and its bound, and
    /// the inputs are kept. The reference runs the program whole. Split
    /// computed dynamic data is refused.
    fn splitting_a_packed_dynamic_dim_is_an_error_naming_it() {
        let mesh = mesh();
        let x = host(5, &[8, 6]);
        let want = x.gt_scalar(0.0).nonzero().to_vec::<i64>().unwrap();
        let xs = x.mark_sharding(&mesh, &[None, None]).unwrap();
        let rows = xs.gt_scalar(0.0).nonzero(); // [<=48, 2], read below
        rows.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        match mesh.device().name().starts_with("pjrt") {
            true => {
                let e = mark_step().unwrap_err().to_string();
                assert!(e.contains("splits dim 0 of size <=48 over 4 devices"), "{e}");
                assert!(e.contains("mark_sharding"), "{e}");
                common::take_dump(&e);
                // Nothing lost: the input reads back whole.
                assert_close(&xs.to_vec::<f32>().unwrap(), &x.to_vec::<f32>().unwrap(), 0.0);
            }
            false => {
                mark_step().unwrap();
                assert_eq!(rows.to_vec::<i64>().unwrap(), want);
                let e = rows.mark_sharding(&mesh, &[Some("data"), None]).err().unwrap().to_string();
                assert!(e.contains("dynamic sizes"), "{e}");
            }
        }
    }
}
