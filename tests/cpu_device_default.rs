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

#[test]
fn a_cpu_client_runs_programs_inline_unless_asked() {
    assert!(
        std::env::var_os("LAZYXLA_CPU_ASYNC_DISPATCH").is_none(),
        "run this test without LAZYXLA_CPU_ASYNC_DISPATCH"
    );
    let _g = common::lock();
    let Some(d) = common::pjrt_device() else {
        return;
    };
    d.scoped(|| {
        let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).unwrap();
        let y = (&w * 2.0).sum();
        lazyxla::mark_step().unwrap();
        assert_eq!(y.item::<f32>().unwrap(), 3.0);
        // By default the client runs programs inline (long ones on
        // lazyxla's dispatch thread): asking for the plugin's workers now
        // is refused with how to ask in time.
        let e = lazyxla::set_cpu_async_dispatch(true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("asynchronous dispatch was asked for")
                && e.contains("already dispatches inline")
                && e.contains("LAZYXLA_CPU_ASYNC_DISPATCH=1"),
            "{e}"
        );
        // A refused request changed nothing.
        let y = (&w * 10.0).sum();
        lazyxla::mark_step().unwrap();
        assert_eq!(y.item::<f32>().unwrap(), 15.0);
    });
}
