//! `LAZYXLA_CPU_DEVICES=n` sets how many devices the CPU plugin's client
//! makes (its `cpu_device_count` create option) and how many reference
//! devices there are. A binary of its own: the variable is read once, when
//! the first device is made, so it is set before anything else runs.

mod common;

use lazyxla::parallel::{self, DataParallel, ReduceOp};
use lazyxla::{Device, Tensor};

fn check_two_devices(d: &Device) {
    d.scoped(|| {
        let all = lazyxla::devices();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0], *d);
        let dp = DataParallel::with_replicas(2).unwrap();
        let e = DataParallel::with_replicas(3).err().unwrap().to_string();
        assert!(
            e.contains("3 replicas") && e.contains("there are 2 devices"),
            "{e}"
        );
        let x = dp.scoped(|| Tensor::replica_id().all_reduce(ReduceOp::Sum) + 10);
        assert_eq!(
            parallel::replica_values::<i64>(&x).unwrap(),
            vec![vec![11], vec![11]]
        );
    });
}

#[test]
fn the_variable_sets_the_device_count() {
    // SAFETY of the set: the only test of this binary, before any device.
    std::env::set_var("LAZYXLA_CPU_DEVICES", "2");
    let _g = common::lock();
    check_two_devices(&Device::reference());
    if let Some(d) = common::pjrt_device() {
        check_two_devices(&d);
    }
}
