//! Several threads: each training its own model on its own device of one
//! client, and several sharing one model under a lock; both give what
//! one thread gives (DESIGN.md, "Diagnostics and failures", Threads).

mod common;

use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, Device, Tensor};
use std::sync::{Arc, Mutex};

/// Trains a `Linear(4, 2)` for `steps` steps on batches made from `seed`;
/// returns its parameters.
fn train(seed: u64, steps: usize) -> Vec<Vec<f32>> {
    let model = Linear::new(4, 2, seed);
    let mut opt = Sgd::new(model.parameters(), 0.05).momentum(0.9);
    for s in 0..steps {
        let x = Tensor::randn(&[8, 4], seed * 1000 + s as u64);
        let y = Tensor::randn(&[8, 2], seed * 2000 + s as u64);
        opt.zero_grad();
        nn::mse_loss(&model.forward(&x), &y).backward();
        opt.step();
        mark_step().unwrap();
    }
    model
        .parameters()
        .iter()
        .map(|p| p.to_vec::<f32>().unwrap())
        .collect()
}

/// The devices of `backend`'s client (the test binary asks for 4 CPU
/// devices, see `common`).
fn devices_of(backend: &Device) -> Vec<Device> {
    backend.scoped(lazyxla::devices)
}

fn each_backend(f: impl Fn(&Device)) {
    let _g = common::lock();
    common::fresh_process_state();
    f(&Device::reference());
    if let Some(d) = common::pjrt_device() {
        f(&d);
    }
}

#[test]
fn threads_training_their_own_models_on_their_own_devices() {
    each_backend(|backend| {
        let devices = devices_of(backend);
        assert!(devices.len() >= 2, "{} devices", devices.len());
        let alone: Vec<_> = (0..devices.len() as u64)
            .map(|k| devices[k as usize].scoped(|| train(k, 12)))
            .collect();
        let together: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = devices
                .iter()
                .enumerate()
                .map(|(k, d)| s.spawn(move || d.scoped(|| train(k as u64, 12))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(together, alone, "on {backend}");
    });
}

#[test]
fn threads_sharing_one_model_under_a_lock() {
    each_backend(|backend| {
        let run = |threads: usize| {
            backend.scoped(|| {
                let model = Linear::new(4, 2, 7);
                let opt = Sgd::new(model.parameters(), 0.05).momentum(0.9);
                let shared = Arc::new(Mutex::new((model, opt)));
                // One batch for every step: the order of the steps does not
                // change the result.
                let x = Tensor::randn(&[8, 4], 1);
                let y = Tensor::randn(&[8, 2], 2);
                std::thread::scope(|s| {
                    for _ in 0..threads {
                        let (shared, x, y) = (shared.clone(), x.clone(), y.clone());
                        s.spawn(move || {
                            backend.scoped(|| {
                                for _ in 0..12 / threads {
                                    let mut guard = shared.lock().unwrap();
                                    let (model, opt) = &mut *guard;
                                    opt.zero_grad();
                                    nn::mse_loss(&model.forward(&x), &y).backward();
                                    opt.step();
                                    mark_step().unwrap();
                                }
                            })
                        });
                    }
                });
                let (model, _) = &*shared.lock().unwrap();
                model
                    .parameters()
                    .iter()
                    .map(|p| p.to_vec::<f32>().unwrap())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(run(3), run(1), "on {backend}");
    });
}

/// The user-facing types can cross threads.
#[test]
fn tensors_devices_and_models_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Tensor>();
    both::<Device>();
    both::<lazyxla::SymInt>();
    both::<Linear>();
    both::<lazyxla::Error>();
}
