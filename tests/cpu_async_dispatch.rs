//! A process that asks for asynchronous dispatch before its first device
//! gets it: `mark_step` hands each program to the plugin's workers, the
//! results are the same, and asking for inline dispatch afterwards is an
//! error that says how the client dispatches. A binary of its own: the
//! choice is fixed when the CPU client is made.

mod common;

use lazyxla::nn::{Linear, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::Tensor;

#[test]
fn asynchronous_dispatch_asked_for_first_trains_as_inline_dispatch_does() {
    lazyxla::set_cpu_async_dispatch(true).unwrap();
    let _g = common::lock();
    let Some(d) = common::pjrt_device() else {
        return;
    };
    let losses = |device: &lazyxla::Device| {
        device.scoped(|| {
            let layer = Linear::new(3, 1, 5);
            let mut opt = Sgd::new(layer.parameters(), 0.1);
            let x = Tensor::from_vec(vec![1.0f32, 0.0, -1.0, 0.5, 2.0, 1.0], &[2, 3]).unwrap();
            let t = Tensor::from_vec(vec![1.0f32, -1.0], &[2, 1]).unwrap();
            (0..4)
                .map(|_| {
                    opt.zero_grad();
                    let loss = (&layer.forward(&x) - &t).pow(2.0).mean();
                    loss.backward();
                    opt.step();
                    lazyxla::mark_step().unwrap();
                    loss.item::<f32>().unwrap()
                })
                .collect::<Vec<f32>>()
        })
    };
    let on_xla = losses(&d);
    let on_reference = losses(&lazyxla::Device::reference());
    common::assert_close(&on_xla, &on_reference, 1e-5);
    d.scoped(|| {
        let e = lazyxla::set_cpu_async_dispatch(false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("already dispatches asynchronously") && e.contains("before any tensor"),
            "{e}"
        );
        assert!(lazyxla::set_cpu_async_dispatch(true).is_ok());
    });
}
