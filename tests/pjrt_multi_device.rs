//! The PJRT FFI on several devices of one client, against a real plugin:
//! the `cpu_device_count` create option, compile options for replicas
//! and partitions, device assignments (a bad one is an error, never an
//! abort), execution on N devices at once, and copies between devices.
//!
//! With `LAZYXLA_REQUIRE_PJRT=1` a missing plugin FAILS every test;
//! otherwise each test reports the skip on stderr and returns.

mod common;

use std::sync::OnceLock;

use lazyxla::debug::pjrt_ffi::{Buffer, Client, CompileOptions, ElementType, OptionValue};

/// A client of 5 devices, shared by the tests, which run programs on 4
/// at most: a launch on every device of a CPU client can hang for want
/// of a thread (see `PjrtBackend::open_client`).
fn client() -> Option<&'static Client> {
    static CLIENT: OnceLock<Option<Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let option = [("cpu_device_count", OptionValue::Int64(5))];
            Some(Client::with_options(common::plugin()?, &option).expect("create client"))
        })
        .as_ref()
}

fn f32s(c: &Client, v: &[f32], device: usize) -> Buffer {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    c.buffer_from_host(&bytes, ElementType::F32, &[v.len() as i64], device)
        .unwrap()
}

fn to_f32(b: &Buffer) -> Vec<f32> {
    b.to_host()
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Sums a per-replica f32[2] over 4 replicas, and returns the replica id.
const ALL_REDUCE: &str = r#"
module @sum attributes {mhlo.num_replicas = 4 : i32, mhlo.num_partitions = 1 : i32} {
  func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<ui32>) {
    %s = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2xf32>) -> tensor<2xf32>
    %id = "stablehlo.replica_id"() : () -> tensor<ui32>
    return %s, %id : tensor<2xf32>, tensor<ui32>
  }
}"#;

/// The same over a bounded operand: XLA cannot compile it.
const BOUNDED_ALL_REDUCE: &str = r#"
module @bounded attributes {mhlo.num_replicas = 4 : i32, mhlo.num_partitions = 1 : i32} {
  func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<4>> {
    %d = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<4xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<4>>
    %s = "stablehlo.all_reduce"(%d) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<?xf32, #stablehlo.bounds<4>>) -> tensor<?xf32, #stablehlo.bounds<4>>
    return %s : tensor<?xf32, #stablehlo.bounds<4>>
  }
}"#;

/// Twice its argument, on one device.
const DOUBLE: &str = r#"
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = stablehlo.add %x, %x : tensor<2xf32>
  return %y : tensor<2xf32>
}"#;

/// Partition mode, global view: a sum of squares of f32[16] split over
/// 4 partitions (each device gets f32[4]); the partitioner adds the sum.
const SPMD_SUM: &str = r#"
module @spmd attributes {mhlo.num_replicas = 1 : i32, mhlo.num_partitions = 4 : i32} {
  func.func @main(%x: tensor<16xf32> {mhlo.sharding = "{devices=[4]<=[4]}"}) -> (tensor<f32> {mhlo.sharding = "{replicated}"}) {
    %sq = stablehlo.multiply %x, %x : tensor<16xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%sq init: %z) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}"#;

#[test]
fn cpu_device_count_sets_the_number_of_devices() {
    let Some(p) = common::plugin() else { return };
    for n in [1i64, 2, 8] {
        let c = Client::with_options(p.clone(), &[("cpu_device_count", OptionValue::Int64(n))])
            .unwrap();
        assert_eq!(c.device_count(), n as usize);
        assert_eq!(c.device_ids(), (0..n).collect::<Vec<_>>());
    }
}

#[test]
fn four_replicas_sum_on_four_devices() {
    let Some(c) = client() else { return };
    let ids = c.device_ids()[..4].to_vec();
    let exe = c
        .compile_with(ALL_REDUCE, &CompileOptions::replicas(4).on_devices(&ids))
        .unwrap();
    assert_eq!(exe.launch_devices().unwrap(), &[0, 1, 2, 3]);
    let args: Vec<Buffer> = (0..4)
        .map(|r| f32s(c, &[r as f32, 10.0 * r as f32], r))
        .collect();
    let lists: Vec<Vec<&Buffer>> = args.iter().map(|b| vec![b]).collect();
    let lists: Vec<&[&Buffer]> = lists.iter().map(Vec::as_slice).collect();
    let (outs, events) = exe.execute_replicas(&lists).unwrap();
    for e in events {
        e.wait().unwrap();
    }
    for (r, out) in outs.iter().enumerate() {
        assert_eq!(to_f32(&out[0]), vec![6.0, 60.0]);
        assert_eq!(out[1].to_host().unwrap(), (r as u32).to_ne_bytes());
    }
    // The results feed the next execution where they are.
    let again: Vec<Vec<&Buffer>> = outs.iter().map(|o| vec![&o[0]]).collect();
    let again: Vec<&[&Buffer]> = again.iter().map(Vec::as_slice).collect();
    let (outs, _) = exe.execute_replicas(&again).unwrap();
    assert_eq!(to_f32(&outs[3][0]), vec![24.0, 240.0]);
}

#[test]
fn an_assignment_places_replica_r_on_its_device() {
    let Some(c) = client() else { return };
    let exe = c
        .compile_with(
            ALL_REDUCE,
            &CompileOptions::replicas(4).on_devices(&[3, 2, 1, 0]),
        )
        .unwrap();
    assert_eq!(exe.launch_devices().unwrap(), &[3, 2, 1, 0]);
    let args: Vec<Buffer> = (0..4).map(|slot| f32s(c, &[1.0, 2.0], 3 - slot)).collect();
    let lists: Vec<Vec<&Buffer>> = args.iter().map(|b| vec![b]).collect();
    let lists: Vec<&[&Buffer]> = lists.iter().map(Vec::as_slice).collect();
    let (outs, _) = exe.execute_replicas(&lists).unwrap();
    for (slot, out) in outs.iter().enumerate() {
        assert_eq!(out[1].to_host().unwrap(), (slot as u32).to_ne_bytes());
        assert_eq!(to_f32(&out[0]), vec![4.0, 8.0]);
    }
    // Arguments on the wrong devices are an error before the plugin sees
    // them (a launch the CPU plugin refuses leaves the next collective
    // hanging), and the client goes on.
    let wrong: Vec<Buffer> = (0..4).map(|slot| f32s(c, &[1.0, 2.0], slot)).collect();
    let lists: Vec<Vec<&Buffer>> = wrong.iter().map(|b| vec![b]).collect();
    let wrong_lists: Vec<&[&Buffer]> = lists.iter().map(Vec::as_slice).collect();
    let e = exe.execute_replicas(&wrong_lists).unwrap_err();
    assert!(
        e.message
            .contains("is on device 0, but the slot runs on device 3"),
        "{e}"
    );
    let lists: Vec<Vec<&Buffer>> = args.iter().map(|b| vec![b]).collect();
    let lists: Vec<&[&Buffer]> = lists.iter().map(Vec::as_slice).collect();
    let (outs, _) = exe.execute_replicas(&lists).unwrap();
    assert_eq!(to_f32(&outs[0][0]), vec![4.0, 8.0]);
}

#[test]
fn a_bad_assignment_is_an_error_not_an_abort() {
    let Some(c) = client() else { return };
    // Naming a device twice aborts the plugin inside PJRT_Client_Compile:
    // it must never get there.
    let e = c
        .compile_with(
            ALL_REDUCE,
            &CompileOptions::replicas(4).on_devices(&[0, 1, 0, 1]),
        )
        .unwrap_err();
    assert!(
        e.message
            .contains("4 replicas need 4 distinct devices, it names 2"),
        "{e}"
    );
    let e = c
        .compile_with(ALL_REDUCE, &CompileOptions::replicas(8))
        .unwrap_err();
    assert!(
        e.message.contains("8 devices are needed") && e.message.contains("the client has 5"),
        "{e}"
    );
    let e = c
        .compile_with(
            ALL_REDUCE,
            &CompileOptions::replicas(4).on_devices(&[0, 1, 2, 9]),
        )
        .unwrap_err();
    assert!(e.message.contains("device 9"), "{e}");
    // The client still works.
    let exe = c
        .compile_with(ALL_REDUCE, &CompileOptions::replicas(4))
        .unwrap();
    assert_eq!(exe.launch_devices().unwrap().len(), 4);
}

#[test]
fn a_bounded_all_reduce_operand_does_not_compile() {
    let Some(c) = client() else { return };
    assert!(c
        .compile_with(BOUNDED_ALL_REDUCE, &CompileOptions::replicas(4))
        .is_err());
}

#[test]
fn a_replicated_program_on_one_device_list_is_an_error() {
    let Some(c) = client() else { return };
    let exe = c
        .compile_with(ALL_REDUCE, &CompileOptions::replicas(4))
        .unwrap();
    let x = f32s(c, &[1.0, 2.0], 0);
    assert!(exe.execute(&[&x]).is_err());
}

#[test]
fn one_replica_runs_on_the_device_assigned() {
    let Some(c) = client() else { return };
    let id = c.device_ids()[2];
    let exe = c
        .compile_with(DOUBLE, &CompileOptions::replicas(1).on_devices(&[id]))
        .unwrap();
    assert_eq!(exe.launch_devices().unwrap(), &[2]);
    let x = f32s(c, &[1.5, -2.0], 2);
    let y = exe.execute(&[&x]).unwrap();
    assert_eq!(to_f32(&y[0]), vec![3.0, -4.0]);
    let elsewhere = f32s(c, &[1.5, -2.0], 0);
    assert!(exe.execute(&[&elsewhere]).is_err());
}

#[test]
fn buffers_copy_between_devices() {
    let Some(c) = client() else { return };
    let x = f32s(c, &[1.0, 2.0], 0);
    let y = c.copy_to_device(&x, 3).unwrap();
    let z = c.copy_to_device(&y, 3).unwrap(); // onto its own device
    drop((x, y));
    assert_eq!(to_f32(&z), vec![1.0, 2.0]);
    assert!(c.copy_to_device(&z, 7).is_err());
}

#[test]
fn partition_mode_splits_an_argument() {
    let Some(c) = client() else { return };
    let exe = c
        .compile_with(SPMD_SUM, &CompileOptions::partitions(4))
        .unwrap();
    let args: Vec<Buffer> = (0..4)
        .map(|p| {
            let v: Vec<f32> = (0..4).map(|i| (4 * p + i) as f32).collect();
            f32s(c, &v, p)
        })
        .collect();
    let lists: Vec<Vec<&Buffer>> = args.iter().map(|b| vec![b]).collect();
    let lists: Vec<&[&Buffer]> = lists.iter().map(Vec::as_slice).collect();
    let (outs, _) = exe.execute_replicas(&lists).unwrap();
    let want: f32 = (0..16).map(|i| (i * i) as f32).sum();
    for out in &outs {
        assert_eq!(to_f32(&out[0]), vec![want]);
    }
}
