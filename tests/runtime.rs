//! The runtime: compile cache, memory over many steps, panic safety, the
//! IR printer, size bounds on real dynamic tensors.

mod common;

use common::{assert_close, panic_message};
use lazyxla::{debug, mark_step, metrics, DType, Tensor};

backend_test! {
    fn same_structure_compiles_once() {
        for step in 0..20 {
            let x = Tensor::from_vec((0..6).map(|i| (i + step) as f32).collect(), &[2, 3]).unwrap();
            let w = Tensor::from_vec(vec![0.5f32; 3], &[3]).unwrap();
            let y = (&x * &w + 1.0).relu().sum_dims(&[1], false);
            mark_step().unwrap();
            let base = (3 * step) as f32;
            let want = [0.5 * (base + 3.0) + 3.0, 0.5 * (base + 12.0) + 3.0];
            assert_close(&y.to_vec::<f32>().unwrap(), &want, 1e-6);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        assert_eq!(metrics::counter("CachedCompile"), 19, "{}", metrics::report());
        assert_eq!(metrics::counter("MarkStep"), 20);

        // A different shape is a different program.
        let x = Tensor::from_vec(vec![1.0f32; 8], &[2, 4]).unwrap();
        let w = Tensor::from_vec(vec![0.5f32; 4], &[4]).unwrap();
        let y = (&x * &w + 1.0).relu().sum_dims(&[1], false);
        mark_step().unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![6.0, 6.0]);
        assert_eq!(metrics::counter("UncachedCompile"), 2);
    }
}

backend_test! {
    fn steps_run_ahead_of_reads_and_synchronize_waits_for_them() {
        // Each step consumes the previous one's results; `mark_step` only
        // starts a program, so nothing here waits until `synchronize`.
        let mut x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3]).unwrap();
        let mut total = Tensor::scalar(0.0f32);
        for _ in 0..50 {
            x = &x * 1.5 - 0.25;
            total = &total + x.sum();
            mark_step().unwrap();
        }
        lazyxla::Device::default().synchronize().unwrap();
        assert_eq!(metrics::counter("TransferFromDevice"), 0);
        let (mut want, mut want_total) = (vec![1.0f32, -2.0, 3.0], 0.0f32);
        for _ in 0..50 {
            want.iter_mut().for_each(|v| *v = *v * 1.5 - 0.25);
            want_total += want.iter().sum::<f32>();
        }
        assert_close(&x.to_vec::<f32>().unwrap(), &want, 1e-4);
        assert_close(&[total.item::<f32>().unwrap()], &[want_total], 1e-4);
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
    }
}

backend_test! {
    fn scalar_values_are_part_of_the_key_but_tensor_data_is_not() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let a = &x * 2.0;
        mark_step().unwrap();
        let b = &x * 3.0;
        mark_step().unwrap();
        assert_eq!(metrics::counter("UncachedCompile"), 2);
        // A scalar tensor is data: changing it does not recompile.
        for k in 0..3 {
            let s = Tensor::scalar(k as f32);
            let c = &x * &s;
            mark_step().unwrap();
            assert_eq!(c.to_vec::<f32>().unwrap(), vec![k as f32, 2.0 * k as f32]);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 3);
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        assert_eq!(b.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    }
}

backend_test! {
    fn mark_step_computes_all_pending_tensors_in_one_program() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let a = x.exp();
        let b = &a + &x;
        let c = b.sum();
        mark_step().unwrap();
        assert_eq!(metrics::counter("ExecuteGraph"), 1);
        // Reading afterwards runs nothing.
        let before = metrics::counter("ExecuteGraph");
        assert_close(&[c.item::<f32>().unwrap()], &[(1f32.exp() + 2f32.exp() + 3f32.exp()) + 6.0], 1e-5);
        assert_close(&b.to_vec::<f32>().unwrap()[..1], &[1f32.exp() + 1.0], 1e-5);
        assert_eq!(metrics::counter("ExecuteGraph"), before);
    }
}

backend_test! {
    fn reading_a_value_runs_only_what_it_needs() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let a = &x + 1.0;
        let b = &x * 10.0;
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
        assert_eq!(metrics::counter("ExecuteGraph"), 1);
        // b is still pending and is computed by the next mark_step.
        mark_step().unwrap();
        assert_eq!(metrics::counter("ExecuteGraph"), 2);
        let before = metrics::counter("ExecuteGraph");
        assert_eq!(b.to_vec::<f32>().unwrap(), vec![10.0, 20.0]);
        assert_eq!(metrics::counter("ExecuteGraph"), before);
    }
}

backend_test! {
    fn memory_stays_bounded_over_thousands_of_steps() {
        let mut w = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
        let g = Tensor::from_vec(vec![0.001f32; 4], &[4]).unwrap();
        let mut peak_nodes = 0;
        let mut peak_registry = 0;
        for step in 0..2000 {
            w = (&w - &g * 0.5).maximum(&Tensor::zeros(&[4], DType::F32));
            mark_step().unwrap();
            if step >= 10 {
                peak_nodes = peak_nodes.max(debug::live_node_count());
                peak_registry = peak_registry.max(debug::registry_len());
            }
        }
        assert_close(&w.to_vec::<f32>().unwrap(), &[0.0; 4], 1e-6);
        // A handful of nodes per step are alive at most (the data leaves of
        // w and g); the graph of a step is released after its sync. Other
        // tests may hold a few nodes too, so allow some slack but nothing
        // that grows with the step count.
        assert!(peak_nodes < 200, "live nodes grew to {peak_nodes}");
        assert!(peak_registry < 5000, "registry grew to {peak_registry}");
        assert_eq!(metrics::counter("UncachedCompile"), 1);
    }
}

backend_test! {
    fn live_buffers_rise_with_computed_tensors_and_fall_when_they_drop() {
        let live = || metrics::counter("LiveBuffers");
        // Twice, checked the second time: on the reference backend the
        // compiled program (the program itself, held by the compile cache)
        // keeps the size cell of the run that compiled it, until evicted.
        for round in 0..2 {
            let before = live();
            // Host data is uploaded when a program first needs it.
            let x = Tensor::from_vec(vec![1.0f32, 0.0, 3.0, 0.0, 5.0], &[5]).unwrap();
            let y = &x * 2.0;
            assert_eq!(live(), before, "nothing is on the device before a step");
            let total = y.sum();
            // A dynamic result also keeps its size on the device.
            let picked = x.nonzero();
            mark_step().unwrap();
            lazyxla::Device::default().synchronize().unwrap();
            // x's upload, y, total, and picked with its size at least.
            let computed = live();
            assert!(computed >= before + 5, "{before} -> {computed}\n{}", metrics::report());
            // A level, not an event count: reset leaves it.
            metrics::reset();
            assert_eq!(live(), computed);
            let row = format!("{:<22} {computed}\n", "LiveBuffers");
            assert!(metrics::report().contains(&row), "{}", metrics::report());
            assert_eq!(total.item::<f32>().unwrap(), 18.0);
            assert_eq!(picked.size(0).materialize().unwrap(), 3);
            drop((y, total));
            let fewer = live();
            assert!(fewer <= computed - 2, "{computed} -> {fewer}");
            drop((x, picked));
            if round == 1 {
                assert_eq!(live(), before, "{}", metrics::report());
            }
        }

        // Over steps it stays flat: each step's results replace the last.
        let before = live();
        let mut w = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
        let mut levels = Vec::new();
        for _ in 0..20 {
            w = (&w * 0.5 + 1.0).relu();
            mark_step().unwrap();
            levels.push(live());
        }
        assert!(levels[5..].iter().all(|&l| l == levels[5]), "{levels:?}");
        drop(w);
        lazyxla::Device::default().synchronize().unwrap();
        assert_eq!(live(), before, "{}", metrics::report());
    }
}

backend_test! {
    fn a_panicking_op_leaves_the_runtime_usable() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let pending = &a * 2.0;
        let b = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let msg = panic_message(|| {
            let _ = &a + &b;
        });
        assert!(msg.contains("add") && msg.contains("[3]") && msg.contains("[2]"), "{msg}");
        let msg = panic_message(|| {
            let _ = a.sum_dims(&[3], false);
        });
        assert!(msg.contains("out of range"), "{msg}");
        // Earlier tensors still read, pending work still runs.
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        mark_step().unwrap();
        assert_eq!(pending.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
        let c = &a + 1.0;
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
    }
}

backend_test! {
    fn sizes_of_dynamic_tensors_have_correct_bounds() {
        // x = nonzero(..) with size(0) in [0, 10].
        let data: Vec<f32> = (0..10).map(|i| (i % 3) as f32).collect();
        let x = Tensor::from_vec(data, &[10]).unwrap().nonzero();
        let n = x.size(0);
        assert_eq!((n.lower_bound(), n.upper_bound()), (0, 10));
        let r = 10 - n.clone();
        assert_eq!((r.lower_bound(), r.upper_bound()), (0, 10));
        let m = n.rem(3);
        assert_eq!((m.lower_bound(), m.upper_bound()), (0, 2));
        assert_eq!(n.materialize().unwrap(), 6);
        assert_eq!(r.materialize().unwrap(), 4);
        assert_eq!(m.materialize().unwrap(), 0);
    }
}

#[test]
fn printer_shows_bounds_dimension_variables_and_zones() {
    let _g = common::lock();
    lazyxla::Device::reference().scoped(|| {
        let t1 = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 0.0, 3.0], &[5]).unwrap();
        let t2 = t1.nonzero();
        let t3 = t2.to_dtype(DType::F32).pow(2.0);
        let t4 = t3.sum();
        let t5 = &t4 + 2.0;
        insta::assert_snapshot!("dynamic_zone", debug::ir_text(&[&t5]));
        let a = Tensor::from_vec(vec![1.0f32; 6], &[3, 2]).unwrap();
        let b = Tensor::from_vec(vec![1.0f32; 2], &[2]).unwrap();
        let c = (&a * &b).matmul(&a.transpose(0, 1)).softmax(-1);
        insta::assert_snapshot!("static_chain", debug::ir_text(&[&c]));
        let m = a.gt_scalar(0.5);
        let s = a.masked_select(&m);
        let u = s.unique();
        let both = Tensor::cat(&[&s, &s], 0);
        insta::assert_snapshot!("two_zones", debug::ir_text(&[&u, &both, &s.mean()]));
    });
}

/// The reference backend reports an index out of range as an execution
/// error (XLA clamps indices instead), which makes it the vehicle for
/// checking what the runtime does with a failed step.
#[test]
fn a_failed_step_loses_nothing() {
    common::run_on(&lazyxla::Device::reference(), || {
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let good = &a * 2.0;
        let bad_index = Tensor::from_vec(vec![0i64, 7], &[2]).unwrap();
        let bad = a.index_select(0, &bad_index);
        let err = mark_step().expect_err("an index out of range must fail the step");
        assert!(err.to_string().contains("index"), "{err}");
        // Nothing was lost: data reads, the good pending tensor is still
        // pending and computes once the bad one is gone.
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        assert!(bad.to_vec::<f32>().is_err());
        drop(bad);
        mark_step().unwrap();
        assert_eq!(good.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    });
}

#[test]
fn tensors_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tensor>();
    check::<lazyxla::SymInt>();
    check::<lazyxla::Device>();
}
