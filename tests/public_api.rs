//! Promises of the public API that the compiler checks: which types can
//! cross threads, and that every public type can be printed with `{:?}`.
//! (The `#[non_exhaustive]` enums are checked by their users: a `match`
//! outside the crate needs a `_` arm.)

use lazyxla::{DType, Device, Error, SymBool, SymInt, Tensor};

fn send_sync<T: Send + Sync>() {}
fn debug<T: std::fmt::Debug>() {}

#[test]
fn tensors_devices_and_errors_cross_threads() {
    // A tensor is a handle (an `Arc`) to shared graph state behind locks:
    // it can be sent to and shared with other threads, and every thread
    // sees the same value.
    send_sync::<Tensor>();
    send_sync::<Device>();
    send_sync::<Error>();
    send_sync::<DType>();
    send_sync::<SymInt>();
    send_sync::<SymBool>();
    send_sync::<lazyxla::SizeBuckets>();
    send_sync::<lazyxla::host::HostArray>();
    send_sync::<lazyxla::nn::Linear>();
    send_sync::<lazyxla::nn::Sequential>();
    send_sync::<lazyxla::optim::AdamW>();
    send_sync::<lazyxla::optim::Sgd>();

    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let u = t.clone();
    let sum = std::thread::spawn(move || u.sum().item::<f32>().unwrap())
        .join()
        .unwrap();
    assert_eq!(sum, 6.0);
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
}

#[test]
fn public_types_print_with_debug() {
    debug::<Tensor>();
    debug::<Device>();
    debug::<Error>();
    debug::<DType>();
    debug::<SymInt>();
    debug::<SymBool>();
    debug::<lazyxla::TripCount>();
    debug::<lazyxla::CapturedStep<fn(&[Tensor]) -> Vec<Tensor>>>();
    debug::<lazyxla::nn::Linear>();
    debug::<lazyxla::nn::Conv2d>();
    debug::<lazyxla::nn::Sequential>();
    debug::<lazyxla::nn::Dropout>();
    debug::<lazyxla::optim::Adam>();
    debug::<lazyxla::optim::lr_scheduler::LinearWarmup>();
    debug::<lazyxla::parallel::DataParallel>();
    debug::<lazyxla::parallel::ReduceOp>();
    debug::<lazyxla::debug::CompileEntry>();

    let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    assert!(!format!("{t:?}").is_empty());
    let mut seq = lazyxla::nn::Sequential::new();
    seq = seq.add(lazyxla::nn::Linear::new(2, 2, 0));
    assert!(format!("{seq:?}").contains("Sequential"), "{seq:?}");
}
