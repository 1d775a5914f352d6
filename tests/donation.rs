//! Donated buffers (DESIGN.md "Donated buffers"): a step that updates a
//! tensor gives its old buffer to the program on XLA, where nothing can
//! read the old value any more; a value someone still holds keeps it.
//! Every body runs on both backends: the reference backend donates
//! nothing, and the values must be the same.

mod common;

use lazyxla::nn::{Linear, Module};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{capture, mark_step, metrics, no_grad, Tensor};

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// True on a backend that donates (XLA, unless `LAZYXLA_PJRT_DONATE=0`).
fn donates() -> bool {
    lazyxla::Device::default().name().starts_with("pjrt")
        && std::env::var("LAZYXLA_PJRT_DONATE").as_deref() != Ok("0")
}

/// `DonatedBuffer` since the last call.
fn donated_since(last: &mut u64) -> u64 {
    let now = metrics::counter("DonatedBuffer");
    let d = now - *last;
    *last = now;
    d
}

backend_test! {
    fn a_lazy_update_donates_the_old_value_and_compiles_once() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let mut last = 0;
        let mut want = vec![1.0f32, 2.0, 3.0];
        for step in 0..6 {
            w.assign(&(&w * 0.5 + 1.0));
            mark_step().unwrap();
            want = want.iter().map(|v| v * 0.5 + 1.0).collect();
            assert_eq!(values(&w), want, "step {step}");
            let expect = if donates() { 1 } else { 0 };
            assert_eq!(donated_since(&mut last), expect, "step {step}");
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        // Another handle of the same tensor sees the new value, as every
        // handle does after `assign`; it does not stop the donation.
        let alias = w.clone();
        w.assign(&(&w + 1.0));
        mark_step().unwrap();
        assert_eq!(values(&alias), want.iter().map(|v| v + 1.0).collect::<Vec<_>>());
        assert_eq!(donated_since(&mut last), u64::from(donates()));
    }
}

backend_test! {
    fn a_held_old_value_keeps_its_value_and_the_update_compiles_once() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let mut last = 0;
        let mut now = vec![1.0f32, 2.0];
        for round in 0..3 {
            // Held: the program writes the update to fresh memory.
            let old = w.detach();
            w.assign(&(&w * 2.0));
            mark_step().unwrap();
            assert_eq!(values(&old), now, "round {round}: the held value is intact");
            now = now.iter().map(|v| v * 2.0).collect();
            assert_eq!(values(&w), now);
            assert_eq!(donated_since(&mut last), 0);
            // Pending work that reads the old value holds it too, when a
            // read computes the update without it.
            let later = &w + 0.0;
            w.assign(&(&w * 2.0));
            let before = now.clone();
            now = now.iter().map(|v| v * 2.0).collect();
            assert_eq!(values(&w), now);
            assert_eq!(donated_since(&mut last), 0);
            assert_eq!(values(&later), before, "round {round}: pending work reads the old value");
            // Released: donated.
            drop((old, later));
            w.assign(&(&w * 2.0));
            mark_step().unwrap();
            now = now.iter().map(|v| v * 2.0).collect();
            assert_eq!(values(&w), now);
            assert_eq!(donated_since(&mut last), u64::from(donates()));
        }
        // One program for the update, donating or not, and `later`'s.
        assert_eq!(metrics::counter("UncachedCompile"), 2);
    }
}

backend_test! {
    fn pending_work_computed_in_the_same_step_reads_the_old_value() {
        // `later` reads the old value in the very program that donates it:
        // XLA orders the read before the write.
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let later = &w + 10.0;
        w.assign(&(&w * 2.0));
        mark_step().unwrap();
        assert_eq!(values(&later), vec![11.0, 12.0]);
        assert_eq!(values(&w), vec![2.0, 4.0]);
        assert_eq!(metrics::counter("DonatedBuffer"), u64::from(donates()));
    }
}

backend_test! {
    fn a_kept_gradient_history_keeps_the_old_weight() {
        // `loss.item()` before `backward` keeps the graph the loss was
        // computed from; the backward computes it again from the weight
        // it read, which an update in between must not have overwritten.
        let w = Tensor::from_vec(vec![1.0f32, 3.0], &[2]).unwrap().requires_grad(true);
        let loss = (&w * &w).sum();
        assert_eq!(loss.item::<f32>().unwrap(), 10.0);
        no_grad(|| w.assign(&(&w - 1.0)));
        mark_step().unwrap();
        assert_eq!(metrics::counter("DonatedBuffer"), 0);
        loss.backward();
        assert_eq!(values(&w.grad().unwrap()), vec![2.0, 6.0]);
        assert_eq!(values(&w), vec![0.0, 2.0]);
    }
}

backend_test! {
    fn adam_training_donates_parameters_and_moments_and_compiles_once() {
        let model = Linear::new(4, 3, 7);
        let params = model.parameters();
        let mut opt = Adam::new(params.clone(), 0.01);
        let x = Tensor::from_vec((0..8).map(|i| i as f32 * 0.25).collect(), &[2, 4]).unwrap();
        let mut losses = Vec::new();
        let mut last = 0;
        for step in 0..5 {
            opt.zero_grad();
            let d = model.forward(&x) - 1.0;
            let loss = (&d * &d).mean();
            loss.backward();
            opt.step();
            mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
            let donated = donated_since(&mut last);
            if donates() {
                // Each parameter and its two moments (and the step count),
                // from the first step: parameters and moments are device
                // data from the start.
                assert!(donated >= 3 * params.len() as u64, "step {step}: {donated}");
            }
            if !donates() {
                assert_eq!(donated, 0);
            }
        }
        assert!(losses[4] < losses[0], "{losses:?}");
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        for _ in 0..3 {
            opt.zero_grad();
            let d = model.forward(&x) - 1.0;
            let loss = (&d * &d).mean();
            loss.backward();
            opt.step();
            mark_step().unwrap();
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "steady steps compile nothing");
    }
}

backend_test! {
    fn a_captured_update_donates_unless_the_old_value_is_held() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let mut step = capture(|x: &[Tensor]| {
            w.assign(&(&w * 2.0 + &x[0]));
            vec![]
        });
        let one = Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap();
        let mut now = vec![1.0f32, 2.0];
        let mut last = 0;
        for call in 0..4 {
            step.run(std::slice::from_ref(&one)).unwrap();
            now = now.iter().map(|v| v * 2.0 + 1.0).collect();
            assert_eq!(values(&w), now, "call {call}");
            assert_eq!(donated_since(&mut last), u64::from(donates()), "call {call}");
        }
        let old = w.detach();
        step.run(std::slice::from_ref(&one)).unwrap();
        assert_eq!(values(&old), now, "a held value keeps what it was");
        now = now.iter().map(|v| v * 2.0 + 1.0).collect();
        assert_eq!(values(&w), now);
        assert_eq!(donated_since(&mut last), 0);
        drop(old);
        step.run(std::slice::from_ref(&one)).unwrap();
        now = now.iter().map(|v| v * 2.0 + 1.0).collect();
        assert_eq!(values(&w), now);
        assert_eq!(donated_since(&mut last), u64::from(donates()));
        assert_eq!(step.recordings(), 1);
        assert_eq!(metrics::counter("UncachedCompile"), 1, "one program for every call");
    }
}

backend_test! {
    fn a_step_with_size_checks_donates_nothing_and_a_failed_check_restores() {
        // A failed check gives assigned tensors their old values back, so
        // a program with checks keeps them.
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let a = Tensor::from_vec(vec![1.0f32, 0.0, 3.0], &[3]).unwrap();
        let b = Tensor::from_vec(vec![1.0f32, 2.0, 0.0], &[3]).unwrap();
        let c = Tensor::from_vec(vec![0.0f32, 0.0, 3.0], &[3]).unwrap();
        // Equal counts (2 and 2): the check passes.
        let d = (&a.masked_select(&a.ne_scalar(0.0)) - &b.masked_select(&b.ne_scalar(0.0))).sum();
        w.assign(&(&w + &d));
        mark_step().unwrap();
        assert_eq!(values(&w), vec![2.0, 3.0]);
        // Counts 2 and 1: it fails, and `w` keeps its value.
        let d = (&a.masked_select(&a.ne_scalar(0.0)) - &c.masked_select(&c.ne_scalar(0.0))).sum();
        w.assign(&(&w + &d));
        let e = mark_step().unwrap_err();
        assert!(matches!(e, lazyxla::Error::SizeCheckFailed { .. }), "{e}");
        assert_eq!(values(&w), vec![2.0, 3.0]);
        assert_eq!(metrics::counter("DonatedBuffer"), 0);
        drop(d);
        // Without checks, the next update donates again.
        w.assign(&(&w * 2.0));
        mark_step().unwrap();
        assert_eq!(values(&w), vec![4.0, 6.0]);
        assert_eq!(metrics::counter("DonatedBuffer"), u64::from(donates()));
    }
}

backend_test! {
    fn data_parallel_steps_donate_on_every_replica() {
        let on = donates();
        let dp = lazyxla::parallel::DataParallel::with_replicas(2).unwrap();
        let model = dp.scoped(|| Linear::new(3, 2, 5));
        let params = model.parameters();
        let mut opt = dp.scoped(|| Adam::new(params.clone(), 0.05));
        let x = Tensor::from_vec((0..12).map(|i| i as f32 * 0.1).collect(), &[4, 3]).unwrap();
        let y = Tensor::from_vec(vec![1.0f32; 8], &[4, 2]).unwrap();
        let mut losses = Vec::new();
        {
            let mut step = dp.train_step(&params, &mut opt, |b: &[Tensor]| {
                lazyxla::nn::mse_loss(&model.forward(&b[0]), &b[1])
            });
            for _ in 0..5 {
                losses.push(step.run(&[x.clone(), y.clone()]).unwrap().item::<f32>().unwrap());
            }
        }
        assert!(losses[4] < losses[0], "{losses:?}");
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        for p in &params {
            let r = lazyxla::parallel::replica_values::<f32>(p).unwrap();
            assert_eq!(r[0], r[1], "the replicas agree");
        }
        // Each step's parameters and moments (and step count), one
        // buffer per replica each, counted once per launch.
        let donated = metrics::counter("DonatedBuffer");
        if on {
            assert!(donated >= 5 * 3 * params.len() as u64, "{donated}");
        } else {
            assert_eq!(donated, 0);
        }
    }
}

backend_test! {
    fn an_update_over_data_the_caller_holds_keeps_it_and_compiles_once() {
        // As after `load_state_dict`: the tensor holds data the caller
        // still holds. The first step's update goes to fresh memory
        // (XLA copies the aliased argument), later ones are donated, and
        // all run one program.
        let w = Tensor::from_vec(vec![0.0f32; 2], &[2]).unwrap();
        let loaded = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        w.assign(&loaded);
        let mut last = 0;
        for step in 0..3u64 {
            w.assign(&(&w + 1.0));
            mark_step().unwrap();
            let want = if step == 0 { 0 } else { u64::from(donates()) };
            assert_eq!(donated_since(&mut last), want, "step {step}");
        }
        assert_eq!(values(&loaded), vec![1.0, 2.0]);
        assert_eq!(values(&w), vec![4.0, 5.0]);
        assert_eq!(metrics::counter("UncachedCompile"), 1);
    }
}

backend_test! {
    fn a_large_tensor_from_a_slice_donated_by_its_updates_keeps_its_values() {
        // 64 KiB: `from_slice` lays it out for a CPU plugin to use in place,
        // and the first update donates that very memory to its result.
        let n = 16 * 1024;
        let source: Vec<f32> = (0..n).map(|i| (i % 97) as f32).collect();
        let w = Tensor::from_slice(&source, &[n]).unwrap();
        let mut last = 0;
        let mut want = source.clone();
        for step in 0..3 {
            w.assign(&(&w * 2.0 + 1.0));
            mark_step().unwrap();
            want = want.iter().map(|v| v * 2.0 + 1.0).collect();
            assert_eq!(values(&w), want, "step {step}");
        }
        assert_eq!(donated_since(&mut last), if donates() { 3 } else { 0 });
        // The slice is unchanged, and a fresh tensor of it reads it whole.
        assert_eq!(source[5], 5.0);
        let sum = Tensor::from_slice(&source, &[n]).unwrap().sum();
        let expect: f32 = source.iter().sum();
        assert_eq!(sum.item::<f32>().unwrap(), expect);
    }
}
