//! A process has one CPU device unless it asks for more, as in JAX and
//! PyTorch/XLA; asking for another count once the devices exist is an
//! error naming both counts, and changes nothing. A binary of its own:
//! the count is fixed when the first device is made.

mod common;

use lazyxla::{Device, Tensor};

fn check_one_device(d: &Device) {
    d.scoped(|| {
        let all = lazyxla::devices();
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0], *d);
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let e = lazyxla::set_cpu_device_count(4).unwrap_err().to_string();
        assert!(
            e.contains("4 CPU devices") && e.contains("already has 1") && e.contains("before any"),
            "{e}"
        );
        assert!(lazyxla::set_cpu_device_count(1).is_ok());
        assert!(lazyxla::set_cpu_device_count(0).is_err());
        assert_eq!(lazyxla::devices().len(), 1);
        // Asking a one-device process for replicas says how to get more.
        let e = lazyxla::parallel::DataParallel::with_replicas(4)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("set_cpu_device_count(4)"), "{e}");
        assert_eq!((x * 2.0).to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    });
}

#[test]
fn a_process_has_one_cpu_device_unless_it_asks_for_more() {
    assert!(
        std::env::var_os("LAZYXLA_CPU_DEVICES").is_none(),
        "run this test without LAZYXLA_CPU_DEVICES"
    );
    let _g = common::lock();
    check_one_device(&Device::reference());
    if let Some(d) = common::pjrt_device() {
        check_one_device(&d);
    }
}

/// Whether the plugin accepts the CPU client option that turns
/// asynchronous dispatch off (`xla-cpu-pjrt` 0.81 refuses it).
fn plugin_knows_inline_dispatch() -> bool {
    use lazyxla::debug::pjrt_ffi::{Client, OptionValue, Plugin};
    let path = lazyxla::debug::pjrt_plugin_path().expect("a PJRT plugin loaded");
    let plugin = Plugin::load(&path).unwrap();
    Client::with_options(plugin, &[("asynchronous", OptionValue::Bool(false))]).is_ok()
}

#[test]
fn a_one_device_cpu_client_runs_each_program_on_the_syncing_thread() {
    assert!(
        std::env::var_os("LAZYXLA_CPU_ASYNC_DISPATCH").is_none(),
        "run this test without LAZYXLA_CPU_ASYNC_DISPATCH"
    );
    let _g = common::lock();
    let Some(d) = common::pjrt_device() else {
        return;
    };
    d.scoped(|| {
        let (runs, inline) = (
            lazyxla::metrics::counter("ExecuteGraph"),
            lazyxla::metrics::counter("ExecuteInline"),
        );
        let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).unwrap();
        for step in 1..=3 {
            let y = (&w * step as f64).sum();
            lazyxla::mark_step().unwrap();
            assert_eq!(y.item::<f32>().unwrap(), 1.5 * step as f32);
        }
        let runs = lazyxla::metrics::counter("ExecuteGraph") - runs;
        let inline = lazyxla::metrics::counter("ExecuteInline") - inline;
        assert!(runs >= 3, "{runs} executions");
        if plugin_knows_inline_dispatch() {
            // Each execution had completed when the plugin's call returned.
            assert_eq!(inline, runs);
            let e = lazyxla::set_cpu_async_dispatch(true)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("already dispatches inline")
                    && e.contains("LAZYXLA_CPU_ASYNC_DISPATCH=1"),
                "{e}"
            );
            assert!(lazyxla::set_cpu_async_dispatch(false).is_ok());
        } else {
            // The plugin dispatches as it always did; asking for that is fine.
            assert!(lazyxla::set_cpu_async_dispatch(true).is_ok());
        }
        // A refused request changed nothing.
        let y = (&w * 10.0).sum();
        lazyxla::mark_step().unwrap();
        assert_eq!(y.item::<f32>().unwrap(), 15.0);
    });
}
