//! Tensors carried from step to step with a dynamic size (a cache that
//! grows by `cat`, a list that changes length) reuse their program, with
//! fixed bounds and with bucketed bounds (`set_size_buckets`).

mod common;

use lazyxla::metrics::counter;
use lazyxla::{mark_step, DType, SizeBuckets, Tensor};

/// Sets the process's buckets for one test and turns them off after it,
/// even when it fails (the tests of this binary hold the test lock).
struct Buckets;

impl Buckets {
    fn on(min: usize, max: usize) -> Buckets {
        lazyxla::set_size_buckets(Some(SizeBuckets::powers_of_two(min, max).unwrap()));
        Buckets
    }
}

impl Drop for Buckets {
    fn drop(&mut self) {
        lazyxla::set_size_buckets(None);
    }
}

/// Appends one row a step to a `[1, <=max, 4]` cache that starts with 3
/// rows, `steps` times, as a decode loop does; returns the cache.
fn grow(steps: usize, max: usize) -> Tensor {
    let start: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let mut cache = Tensor::from_vec(start, &[1, 3, 4])
        .unwrap()
        .mark_dynamic(1, max);
    for step in 0..steps {
        let row = Tensor::from_vec(vec![100.0 + step as f32; 4], &[1, 1, 4]).unwrap();
        cache = Tensor::cat(&[&cache, &row], 1).with_bound(1, max);
        mark_step().unwrap();
    }
    cache
}

fn expected(steps: usize) -> Vec<f32> {
    let mut want: Vec<f32> = (0..12).map(|v| v as f32).collect();
    for step in 0..steps {
        want.extend([100.0 + step as f32; 4]);
    }
    want
}

backend_test! {
    fn a_cache_grown_by_cat_every_step_compiles_once() {
        let cache = grow(20, 256);
        assert_eq!(counter("UncachedCompile"), 1, "one program for every step");
        assert_eq!(cache.size(1).materialize().unwrap(), 23);
        assert_eq!(cache.to_vec::<f32>().unwrap(), expected(20));
        // The carried size is a variable of its own with the bound of the
        // cap, not an expression growing with the steps.
        assert_eq!(cache.shape_string(), "[1, <=256, 4]");
        assert_eq!(cache.size(1).lower_bound(), 0);
    }
}

backend_test! {
    fn with_buckets_a_growing_cache_compiles_once_per_bucket() {
        let _b = Buckets::on(4, 64);
        // Sizes 3 to 42: buckets 4, 8, 16, 32 and 64.
        let cache = grow(40, 64);
        assert_eq!(counter("UncachedCompile"), 5, "one program per bucket");
        assert_eq!(cache.size(1).materialize().unwrap(), 43);
        assert_eq!(cache.to_vec::<f32>().unwrap(), expected(40));
        // Used again, it gets the bound of its bucket.
        assert_eq!(cache.shape_string(), "[1, <=64, 4]");
    }
}

backend_test! {
    fn a_bucket_bounds_data_marked_dynamic_by_its_real_size() {
        let _b = Buckets::on(4, 64);
        let x = Tensor::from_vec(vec![1.0f32; 5], &[5]).unwrap().mark_dynamic(0, 64);
        let y = &x * 2.0;
        assert_eq!(y.shape_string(), "[<=8]");
        assert_eq!(y.sum().item::<f32>().unwrap(), 10.0);
        // Every length of one bucket runs one program.
        lazyxla::metrics::reset();
        for n in 5..=8 {
            let x = Tensor::from_vec(vec![1.0f32; n], &[n]).unwrap().mark_dynamic(0, 64);
            assert_eq!((&x * 2.0).sum().item::<f32>().unwrap(), 2.0 * n as f32);
        }
        assert_eq!(counter("UncachedCompile"), 0);
        let x = Tensor::from_vec(vec![1.0f32; 9], &[9]).unwrap().mark_dynamic(0, 64);
        assert_eq!((&x * 2.0).shape_string(), "[<=16]");
        // Above the largest bucket a size keeps its bound.
        let _b = Buckets::on(4, 8);
        let x = Tensor::from_vec(vec![1.0f32; 9], &[9]).unwrap().mark_dynamic(0, 64);
        assert_eq!((&x * 2.0).shape_string(), "[<=64]");
        let _ = DType::F32;
    }
}

/// True on a backend that donates (XLA, unless `LAZYXLA_PJRT_DONATE=0`).
fn donates() -> bool {
    lazyxla::Device::default().name().starts_with("pjrt")
        && std::env::var("LAZYXLA_PJRT_DONATE").as_deref() != Ok("0")
}

backend_test! {
    fn with_buckets_a_dropped_cache_is_extended_in_its_own_buffer() {
        let _b = Buckets::on(4, 64);
        let before = counter("DonatedBuffer");
        let cache = grow(40, 64);
        let donated = counter("DonatedBuffer") - before;
        assert_eq!(cache.to_vec::<f32>().unwrap(), expected(40));
        // Each step's program appends the row into the buffer of the cache
        // it was given, which nothing else holds: XLA writes it in place.
        if donates() {
            assert!(donated >= 35, "{donated} of 40 steps appended in place");
        } else {
            assert_eq!(donated, 0);
        }
    }
}

backend_test! {
    fn with_buckets_a_cache_still_held_keeps_its_value_when_extended() {
        let _b = Buckets::on(4, 64);
        let before = counter("DonatedBuffer");
        let start: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let mut cache = Tensor::from_vec(start, &[1, 3, 4])
            .unwrap()
            .mark_dynamic(1, 64);
        let mut kept = Vec::new();
        for step in 0..12 {
            let row = Tensor::from_vec(vec![100.0 + step as f32; 4], &[1, 1, 4]).unwrap();
            kept.push(cache.clone());
            cache = Tensor::cat(&[&cache, &row], 1).with_bound(1, 64);
            mark_step().unwrap();
        }
        assert_eq!(counter("DonatedBuffer") - before, 0, "a held cache is never donated");
        for (step, old) in kept.iter().enumerate() {
            assert_eq!(old.to_vec::<f32>().unwrap(), expected(step));
        }
        assert_eq!(cache.to_vec::<f32>().unwrap(), expected(12));
    }
}
