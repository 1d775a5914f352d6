//! A process that asks for inline dispatch before its first device gets
//! it where the plugin knows the option: each program runs inside the
//! sync that starts it (counted by `ExecuteInline`), training gives the
//! reference backend's losses, and asking for asynchronous dispatch
//! afterwards is an error that says how the client dispatches. A plugin
//! too old for the option dispatches asynchronously, as before. A binary
//! of its own: the choice is fixed when the CPU client is made.

mod common;

use lazyxla::nn::{Linear, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{metrics, Device, Tensor};

/// Whether the plugin accepts the CPU client option that turns
/// asynchronous dispatch off. (`xla-cpu-pjrt` 0.81 accepts it without
/// honouring it; the programs here are small enough that its client runs
/// them inside the call anyway, as XLA does with cheap programs.)
fn plugin_knows_inline_dispatch() -> bool {
    use lazyxla::debug::pjrt_ffi::{Client, OptionValue, Plugin};
    let path = lazyxla::debug::pjrt_plugin_path().expect("a PJRT plugin loaded");
    let plugin = Plugin::load(&path).unwrap();
    Client::with_options(plugin, &[("asynchronous", OptionValue::Bool(false))]).is_ok()
}

/// Four SGD steps of a linear layer, each loss read after its sync.
fn losses(device: &Device) -> Vec<f32> {
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
            .collect()
    })
}

#[test]
fn inline_dispatch_asked_for_first_runs_each_program_in_its_sync() {
    lazyxla::set_cpu_async_dispatch(false).unwrap();
    let _g = common::lock();
    let Some(d) = common::pjrt_device() else {
        return;
    };
    let (runs, inline) = (
        metrics::counter("ExecuteGraph"),
        metrics::counter("ExecuteInline"),
    );
    let on_xla = losses(&d);
    let (runs, inline) = (
        metrics::counter("ExecuteGraph") - runs,
        metrics::counter("ExecuteInline") - inline,
    );
    common::assert_close(&on_xla, &losses(&Device::reference()), 1e-5);
    assert!(runs >= 4, "{runs} executions");
    d.scoped(|| {
        if plugin_knows_inline_dispatch() {
            // Each execution had completed when the plugin's call returned.
            assert_eq!(inline, runs);
            let e = lazyxla::set_cpu_async_dispatch(true)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("already dispatches inline") && e.contains("before any tensor"),
                "{e}"
            );
            assert!(lazyxla::set_cpu_async_dispatch(false).is_ok());
        } else {
            let e = lazyxla::set_cpu_async_dispatch(false)
                .unwrap_err()
                .to_string();
            assert!(e.contains("already dispatches asynchronously"), "{e}");
        }
    });
}
