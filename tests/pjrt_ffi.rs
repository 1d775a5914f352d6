//! End-to-end tests of the PJRT FFI layer (`lazyxla::debug::pjrt_ffi`)
//! against a real plugin.
//!
//! The plugin is the one `Device::pjrt()` would load first
//! (`LAZYXLA_PJRT_PLUGIN`, else discovery). With `LAZYXLA_REQUIRE_PJRT=1`
//! a missing plugin FAILS every test; otherwise each test reports the skip
//! on stderr and returns.

mod common;

use std::sync::{Arc, OnceLock};

use lazyxla::debug::pjrt_ffi::{
    Buffer, Client, CompileOptions, ElementType, Executable, LentBytes, Plugin,
};

/// One client shared by the tests: creating a CPU client starts thread pools.
fn client() -> Option<&'static Client> {
    static CLIENT: OnceLock<Option<Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| Some(Client::new(common::plugin()?).expect("create client")))
        .as_ref()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}
fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}
fn to_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}
fn to_i32(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}
fn to_i64(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

fn f32s(c: &Client, v: &[f32], dims: &[i64]) -> Buffer {
    c.buffer_from_host(&f32_bytes(v), ElementType::F32, dims, 0)
        .unwrap()
}
fn i32_scalar(c: &Client, v: i32) -> Buffer {
    c.buffer_from_host(&v.to_ne_bytes(), ElementType::S32, &[], 0)
        .unwrap()
}

const BOUNDED_RESULT: &str = r#"
func.func @main(%x: tensor<5xf32>, %n: tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<5>> {
  %d = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<5xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<5>>
  %e = stablehlo.multiply %d, %d : tensor<?xf32, #stablehlo.bounds<5>>
  return %e : tensor<?xf32, #stablehlo.bounds<5>>
}"#;

const GET_SIZE_AND_RESTATICIZE: &str = r#"
func.func @main(%x: tensor<5xf32>, %n: tensor<i32>) -> (tensor<i32>, tensor<5xf32>) {
  %d = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<5xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<5>>
  %e = stablehlo.multiply %d, %d : tensor<?xf32, #stablehlo.bounds<5>>
  %g = stablehlo.get_dimension_size %e, dim = 0 : (tensor<?xf32, #stablehlo.bounds<5>>) -> tensor<i32>
  %c5 = stablehlo.constant dense<5> : tensor<i32>
  %p = stablehlo.set_dimension_size %e, %c5, dim = 0 : (tensor<?xf32, #stablehlo.bounds<5>>, tensor<i32>) -> tensor<5xf32>
  return %g, %p : tensor<i32>, tensor<5xf32>
}"#;

const NONZERO_SORT: &str = r#"
func.func @main(%x: tensor<2x3xf32>) -> (tensor<?x2xi32, #stablehlo.bounds<6, ?>>, tensor<i32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<2x3xf32>
  %cond = stablehlo.compare NE, %x, %zero, FLOAT : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %flat = stablehlo.reshape %cond : (tensor<2x3xi1>) -> tensor<6xi1>
  %ci = stablehlo.convert %flat : (tensor<6xi1>) -> tensor<6xi32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %len = stablehlo.reduce(%ci init: %c0) applies stablehlo.add across dimensions = [0] : (tensor<6xi32>, tensor<i32>) -> tensor<i32>
  %i0 = stablehlo.iota dim = 0 : tensor<2x3xi32>
  %i1 = stablehlo.iota dim = 1 : tensor<2x3xi32>
  %r0 = stablehlo.reshape %i0 : (tensor<2x3xi32>) -> tensor<6xi32>
  %r1 = stablehlo.reshape %i1 : (tensor<2x3xi32>) -> tensor<6xi32>
  %s:3 = "stablehlo.sort"(%ci, %r0, %r1) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %p0: tensor<i32>, %q0: tensor<i32>, %p1: tensor<i32>, %q1: tensor<i32>):
    %gt = stablehlo.compare GT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  }) : (tensor<6xi32>, tensor<6xi32>, tensor<6xi32>) -> (tensor<6xi32>, tensor<6xi32>, tensor<6xi32>)
  %c0r = stablehlo.reshape %s#1 : (tensor<6xi32>) -> tensor<6x1xi32>
  %c1r = stablehlo.reshape %s#2 : (tensor<6xi32>) -> tensor<6x1xi32>
  %cat = stablehlo.concatenate %c0r, %c1r, dim = 1 : (tensor<6x1xi32>, tensor<6x1xi32>) -> tensor<6x2xi32>
  %res = stablehlo.set_dimension_size %cat, %len, dim = 0 : (tensor<6x2xi32>, tensor<i32>) -> tensor<?x2xi32, #stablehlo.bounds<6, ?>>
  return %res, %len : tensor<?x2xi32, #stablehlo.bounds<6, ?>>, tensor<i32>
}"#;

const MASKED_SELECT_SCATTER: &str = r#"
func.func @main(%x: tensor<6xf32>, %mask: tensor<6xi1>) -> tensor<?xf32, #stablehlo.bounds<6>> {
  %mi = stablehlo.convert %mask : (tensor<6xi1>) -> tensor<6xi32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %cs = "stablehlo.reduce_window"(%mi, %c0) <{window_dimensions = array<i64: 6>, padding = dense<[[5, 0]]> : tensor<1x2xi64>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) : (tensor<6xi32>, tensor<i32>) -> tensor<6xi32>
  %one = stablehlo.constant dense<1> : tensor<6xi32>
  %n6 = stablehlo.constant dense<6> : tensor<6xi32>
  %pos = stablehlo.subtract %cs, %one : tensor<6xi32>
  %dst = stablehlo.select %mask, %pos, %n6 : tensor<6xi1>, tensor<6xi32>
  %dsti = stablehlo.reshape %dst : (tensor<6xi32>) -> tensor<6x1xi32>
  %z = stablehlo.constant dense<0.0> : tensor<6xf32>
  %packed = "stablehlo.scatter"(%z, %dsti, %x) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<6xf32>, tensor<6x1xi32>, tensor<6xf32>) -> tensor<6xf32>
  %len = stablehlo.reduce(%mi init: %c0) applies stablehlo.add across dimensions = [0] : (tensor<6xi32>, tensor<i32>) -> tensor<i32>
  %r = stablehlo.set_dimension_size %packed, %len, dim = 0 : (tensor<6xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<6>>
  return %r : tensor<?xf32, #stablehlo.bounds<6>>
}"#;

const ADD_F32: &str = r#"
func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %c = stablehlo.add %a, %b : tensor<3xf32>
  return %c : tensor<3xf32>
}"#;

fn compile(c: &Client, text: &str) -> Executable {
    c.compile(text)
        .unwrap_or_else(|e| panic!("compile failed: {e}"))
}

#[test]
fn load_reads_version_and_is_shared() {
    let Some(path) = common::plugin_path() else {
        return;
    };
    let plugin = Plugin::load(&path).unwrap();
    let (major, minor) = plugin.api_version();
    assert_eq!(major, 0);
    assert!(minor >= 81, "unexpectedly old plugin: 0.{minor}");
    assert_eq!(plugin.path(), path.as_path());
    assert!(Arc::ptr_eq(&plugin, &Plugin::load(&path).unwrap()));
    eprintln!("plugin {} has PJRT C API {major}.{minor}", path.display());
}

#[test]
fn load_error_names_the_path() {
    let missing = std::path::Path::new("/nonexistent/libnot_a_plugin.so");
    let err = Plugin::load(missing).unwrap_err();
    assert!(
        err.message.contains("/nonexistent/libnot_a_plugin.so"),
        "{err}"
    );
    assert_eq!(err.code, None);
}

#[test]
fn client_reports_platform_and_devices() {
    let Some(c) = client() else { return };
    assert!(!c.platform_name().is_empty());
    assert!(c.device_count() >= 1);
    // A second, independent client of the same plugin can coexist and drop.
    let other = Client::new(c.plugin().clone()).unwrap();
    assert_eq!(other.platform_name(), c.platform_name());
}

#[test]
fn round_trip_f32_i64_pred_and_shapes() {
    let Some(c) = client() else { return };
    let v = [1.5f32, -2.0, 3.25, 0.0, 7.0, -0.5];
    let b = f32s(c, &v, &[2, 3]);
    assert_eq!(b.element_type(), ElementType::F32);
    assert_eq!(b.dims(), &[2, 3]);
    assert_eq!(b.unpadded_dims(), &[2, 3]);
    assert!(b.dynamic_dims().is_empty());
    assert_eq!(to_f32(&b.to_host().unwrap()), v);

    let w = [i64::MIN, -1, 0, i64::MAX];
    let b = c
        .buffer_from_host(&i64_bytes(&w), ElementType::S64, &[4], 0)
        .unwrap();
    assert_eq!(b.element_type(), ElementType::S64);
    assert_eq!(to_i64(&b.to_host().unwrap()), w);

    let p = [1u8, 0, 0, 1, 1];
    let b = c.buffer_from_host(&p, ElementType::Pred, &[5], 0).unwrap();
    assert_eq!(b.element_type(), ElementType::Pred);
    assert_eq!(b.to_host().unwrap(), p);

    let s = c
        .buffer_from_host(&2.5f64.to_ne_bytes(), ElementType::F64, &[], 0)
        .unwrap();
    assert_eq!(s.dims(), &[] as &[i64]);
    assert_eq!(s.to_host().unwrap(), 2.5f64.to_ne_bytes());
}

#[test]
fn empty_arrays_round_trip() {
    let Some(c) = client() else { return };
    for dims in [&[0i64][..], &[2, 0, 3][..]] {
        let b = c.buffer_from_host(&[], ElementType::F32, dims, 0).unwrap();
        assert_eq!(b.dims(), dims);
        assert!(b.to_host().unwrap().is_empty());
    }
}

#[test]
fn bad_host_data_is_rejected_before_the_plugin() {
    let Some(c) = client() else { return };
    let err = c
        .buffer_from_host(&[0u8; 7], ElementType::F32, &[2], 0)
        .unwrap_err();
    assert!(err.message.contains("8 bytes"), "{err}");
    assert!(c.buffer_from_host(&[], ElementType::F32, &[-1], 0).is_err());
    assert!(c
        .buffer_from_host(&[2u8], ElementType::Pred, &[1], 0)
        .is_err());
    assert!(c
        .buffer_from_host(&[0u8; 4], ElementType::F32, &[], c.device_count())
        .is_err());
    assert!(c
        .buffer_from_host(&[0u8], ElementType::Other(16), &[1], 0)
        .is_err());
}

#[test]
fn bounded_result_has_padded_and_real_dims() {
    let Some(c) = client() else { return };
    let exe = compile(c, BOUNDED_RESULT);
    assert_eq!(exe.num_outputs(), 1);
    let x = f32s(c, &[1.0, 2.0, 3.0, 4.0, 5.0], &[5]);
    for (n, expect) in [
        (3, &[1.0f32, 4.0, 9.0][..]),
        (5, &[1.0, 4.0, 9.0, 16.0, 25.0][..]),
        (0, &[][..]),
    ] {
        let out = exe.execute(&[&x, &i32_scalar(c, n)]).unwrap();
        assert_eq!(out.len(), 1);
        let r = &out[0];
        assert_eq!(r.element_type(), ElementType::F32);
        assert_eq!(r.dims(), &[5], "padded bound");
        assert_eq!(r.unpadded_dims(), &[n as i64], "real size");
        assert_eq!(r.dynamic_dims(), &[0]);
        assert_eq!(to_f32(&r.to_host().unwrap()), expect, "logical data only");
    }
    // Arguments are never donated: `x` is still intact after three runs.
    assert_eq!(to_f32(&x.to_host().unwrap()), [1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn get_size_and_restaticize_returns_two_outputs() {
    let Some(c) = client() else { return };
    let exe = compile(c, GET_SIZE_AND_RESTATICIZE);
    assert_eq!(exe.num_outputs(), 2);
    let x = f32s(c, &[1.0, 2.0, 3.0, 4.0, 5.0], &[5]);
    let out = exe.execute(&[&x, &i32_scalar(c, 3)]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].element_type(), ElementType::S32);
    assert_eq!(out[0].dims(), &[] as &[i64]);
    assert_eq!(to_i32(&out[0].to_host().unwrap()), [3]);
    assert_eq!(out[1].dims(), &[5]);
    assert_eq!(out[1].unpadded_dims(), &[5]);
    assert!(out[1].dynamic_dims().is_empty());
    // Only the first 3 elements are defined; the tail is leftover padding.
    assert_eq!(to_f32(&out[1].to_host().unwrap())[..3], [1.0, 4.0, 9.0]);
}

#[test]
fn nonzero_by_sort() {
    let Some(c) = client() else { return };
    let exe = compile(c, NONZERO_SORT);
    assert_eq!(exe.num_outputs(), 2);
    let x = f32s(c, &[0.0, 1.0, 0.0, 2.0, 0.0, 3.0], &[2, 3]);
    let out = exe.execute(&[&x]).unwrap();
    let idx = &out[0];
    assert_eq!(idx.element_type(), ElementType::S32);
    assert_eq!(idx.dims(), &[6, 2]);
    assert_eq!(idx.unpadded_dims(), &[3, 2]);
    assert_eq!(idx.dynamic_dims(), &[0]);
    assert_eq!(to_i32(&idx.to_host().unwrap()), [0, 1, 1, 0, 1, 2]);
    assert_eq!(to_i32(&out[1].to_host().unwrap()), [3]);
}

#[test]
fn masked_select_by_scatter() {
    let Some(c) = client() else { return };
    let exe = compile(c, MASKED_SELECT_SCATTER);
    let x = f32s(c, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[6]);
    let mask = c
        .buffer_from_host(&[1, 0, 1, 1, 0, 0], ElementType::Pred, &[6], 0)
        .unwrap();
    let out = exe.execute(&[&x, &mask]).unwrap();
    assert_eq!(out[0].dims(), &[6]);
    assert_eq!(out[0].unpadded_dims(), &[3]);
    assert_eq!(to_f32(&out[0].to_host().unwrap()), [1.0, 3.0, 4.0]);
}

#[test]
fn compile_error_carries_xla_diagnostic() {
    let Some(c) = client() else { return };
    let bad = "func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n  %b = stablehlo.frobnicate %a : tensor<3xf32>\n  return %b : tensor<3xf32>\n}";
    let err = c.compile(bad).unwrap_err();
    eprintln!("compile error: {err}");
    assert!(err.message.contains("PJRT_Client_Compile"), "{err}");
    assert!(err.message.contains("frobnicate"), "{err}");
    assert!(err.code.is_some());

    // Text that ends mid-token: MLIR's lexer reads one byte past the end, and
    // the 0.115 plugin crashed here until the text was passed NUL-terminated.
    for text in ["bad", "", "func.func @main("] {
        let err = c.compile(text).unwrap_err();
        assert!(err.code.is_some(), "{err}");
    }

    let mismatch = "func.func @main(%a: tensor<3xf32>, %b: tensor<4xf32>) -> tensor<3xf32> {\n  %c = stablehlo.add %a, %b : (tensor<3xf32>, tensor<4xf32>) -> tensor<3xf32>\n  return %c : tensor<3xf32>\n}";
    let err = c.compile(mismatch).unwrap_err();
    eprintln!("compile error: {err}");
    assert!(err.code.is_some());
}

#[test]
fn bounded_entry_parameter_fails_cleanly() {
    let Some(c) = client() else { return };
    let text = "func.func @main(%a: tensor<?xf32, #stablehlo.bounds<6>>) -> tensor<?xf32, #stablehlo.bounds<6>> {\n  %e = stablehlo.add %a, %a : tensor<?xf32, #stablehlo.bounds<6>>\n  return %e : tensor<?xf32, #stablehlo.bounds<6>>\n}";
    match c.compile(text) {
        Err(e) => eprintln!("bounded parameter rejected at compile time: {e}"),
        Ok(exe) => {
            let a = f32s(c, &[1.0; 6], &[6]);
            let r = exe.execute(&[&a]);
            eprintln!(
                "bounded parameter compiled; execute gave {:?}",
                r.as_ref().err()
            );
        }
    }
}

#[test]
fn execute_rejects_wrong_arguments() {
    let Some(c) = client() else { return };
    let exe = compile(c, ADD_F32);
    let a = f32s(c, &[1.0, 2.0, 3.0], &[3]);
    let err = exe.execute(&[&a]).unwrap_err();
    eprintln!("too few arguments: {err}");
    let other = Client::new(c.plugin().clone()).unwrap();
    let foreign = f32s(&other, &[1.0, 2.0, 3.0], &[3]);
    assert!(exe.execute(&[&a, &foreign]).is_err());
    let out = exe.execute(&[&a, &a]).unwrap();
    assert_eq!(to_f32(&out[0].to_host().unwrap()), [2.0, 4.0, 6.0]);
}

#[test]
fn async_results_chain_and_outlive_their_inputs() {
    let Some(c) = client() else { return };
    let exe = compile(c, ADD_F32);
    let a = f32s(c, &[1.0, 2.0, 3.0], &[3]);
    // Each execution consumes the previous one's result before it is ready;
    // PJRT orders them. The inputs are dropped while work may be in flight.
    let (mut out, mut done) = exe.execute_async(&[&a, &a]).unwrap();
    assert_eq!(
        out[0].dims(),
        [3],
        "a static result's shape is known at once"
    );
    for _ in 0..20 {
        let x = out.pop().unwrap();
        let (next, next_done) = exe.execute_async(&[&x, &x]).unwrap();
        drop(x);
        done.wait().unwrap();
        (out, done) = (next, next_done);
    }
    drop(a);
    // A copy to the host waits for the last execution by itself.
    let expect: Vec<f32> = [1.0f32, 2.0, 3.0]
        .iter()
        .map(|v| v * 2f32.powi(21))
        .collect();
    assert_eq!(to_f32(&out[0].to_host().unwrap()), expect);
    done.wait().unwrap();
    // An event dropped unwaited only releases the handle.
    let (out, done) = exe.execute_async(&[&out[0], &out[0]]).unwrap();
    drop(done);
    assert_eq!(to_f32(&out[0].to_host().unwrap())[0], 2f32.powi(22));
}

#[test]
fn objects_outlive_client_handle_and_cross_threads() {
    let Some(path) = common::plugin_path() else {
        return;
    };
    let c = Client::new(Plugin::load(&path).unwrap()).unwrap();
    let exe = Arc::new(compile(&c, ADD_F32));
    let a = Arc::new(f32s(&c, &[1.0, 2.0, 3.0], &[3]));
    drop(c); // buffers and executables keep the client alive
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (exe, a) = (exe.clone(), a.clone());
            std::thread::spawn(move || {
                let out = exe.execute(&[&a, &a]).unwrap();
                to_f32(&out[0].to_host().unwrap())
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), [2.0, 4.0, 6.0]);
    }
}

#[test]
fn wrappers_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Plugin>();
    check::<Client>();
    check::<Executable>();
    check::<Buffer>();
    check::<lazyxla::debug::pjrt_ffi::Event>();
}

/// `%a` is donatable to the result (`tf.aliasing_output`, as JAX's
/// `donate_argnums` lowers it).
const ALIASED_ADD: &str = r#"
func.func @main(%a: tensor<3xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<3xf32>) -> tensor<3xf32> {
  %c = stablehlo.add %a, %b : tensor<3xf32>
  return %c : tensor<3xf32>
}"#;

#[test]
fn a_donated_argument_becomes_the_result_and_is_deleted() {
    let Some(c) = client() else { return };
    let exe = compile(c, ALIASED_ADD);
    let b = f32s(c, &[10.0, 20.0, 30.0], &[3]);

    // Not donated: the aliased argument keeps its value, and the result
    // gets memory of its own.
    let a = f32s(c, &[1.0, 2.0, 3.0], &[3]);
    let (out, done) = exe.execute_async_donating(&[&a, &b], &[]).unwrap();
    done.wait().unwrap();
    assert_eq!(to_f32(&out[0].to_host().unwrap()), [11.0, 22.0, 33.0]);
    assert_eq!(to_f32(&a.to_host().unwrap()), [1.0, 2.0, 3.0]);
    assert_ne!(out[0].memory_address(), a.memory_address());
    // Plain execution never donates either.
    let out = exe.execute(&[&a, &b]).unwrap();
    assert_eq!(to_f32(&out[0].to_host().unwrap()), [11.0, 22.0, 33.0]);
    assert_eq!(to_f32(&a.to_host().unwrap()), [1.0, 2.0, 3.0]);

    // Donated: the result is written into the argument's memory, and the
    // argument is deleted: reading it or running on it is an error.
    let address = a.memory_address();
    assert!(address.is_some(), "the CPU plugin gives a buffer's address");
    let (out, done) = exe.execute_async_donating(&[&a, &b], &[0]).unwrap();
    done.wait().unwrap();
    assert_eq!(to_f32(&out[0].to_host().unwrap()), [11.0, 22.0, 33.0]);
    assert_eq!(
        out[0].memory_address(),
        address,
        "the result reuses the memory"
    );
    let e = a.to_host().unwrap_err().to_string();
    assert!(e.contains("delete") || e.contains("donat"), "{e}");
    assert!(exe.execute(&[&a, &b]).is_err());
    // The undonated argument is intact; a non-aliased one is never donated.
    let (out2, done) = exe.execute_async_donating(&[&out[0], &b], &[1]).unwrap();
    done.wait().unwrap();
    assert_eq!(to_f32(&out2[0].to_host().unwrap()), [21.0, 42.0, 63.0]);
    assert_eq!(to_f32(&b.to_host().unwrap()), [10.0, 20.0, 30.0]);
    assert_eq!(to_f32(&out[0].to_host().unwrap()), [11.0, 22.0, 33.0]);
    drop(a);
}

/// On the CPU plugins a buffer is read in place (a memcpy from its host
/// memory once it is ready), not through a transfer on the plugin's
/// worker threads; the read still waits for the program that writes it
/// and still fails on a buffer that was donated.
#[test]
fn reads_in_place_wait_for_their_program_and_refuse_a_donated_buffer() {
    let Some(c) = client() else { return };
    let exe = compile(c, ADD_F32);
    let a = f32s(c, &[1.0, 2.0, 3.0], &[3]);
    // Twenty executions chained, none awaited: the read waits for the last.
    let (mut out, _) = exe.execute_async(&[&a, &a]).unwrap();
    for _ in 0..20 {
        let x = out.pop().unwrap();
        (out, _) = exe.execute_async(&[&x, &x]).unwrap();
    }
    let mut bytes = [0u8; 12];
    let on_cpu = c.platform_name().eq_ignore_ascii_case("cpu");
    // The CPU plugins keep buffers in host memory; a GPU's are not read so.
    assert_eq!(out[0].read_in_place(&mut bytes).unwrap(), on_cpu);
    let mut into = [0u8; 12];
    out[0].to_host_into(&mut into).unwrap();
    assert_eq!(to_f32(&into), [1.0, 2.0, 3.0].map(|v| v * 2f32.powi(21)));
    if on_cpu {
        assert_eq!(into, bytes);
    }
    // Not the buffer's byte size: nothing read, the caller transfers.
    assert!(!out[0].read_in_place(&mut [0u8; 8]).unwrap());

    let exe = compile(c, ALIASED_ADD);
    let (b, d) = (f32s(c, &[1.0; 3], &[3]), f32s(c, &[1.0; 3], &[3]));
    let (sum, done) = exe.execute_async_donating(&[&d, &b], &[0]).unwrap();
    done.wait().unwrap();
    // Whether the plugin refuses the address or the readiness, nothing is
    // read in place, and the transfer reports the deletion.
    assert!(!matches!(d.read_in_place(&mut bytes), Ok(true)));
    let e = d.to_host_into(&mut bytes).unwrap_err().to_string();
    assert!(e.contains("delete") || e.contains("donat"), "{e}");
    sum[0].to_host_into(&mut bytes).unwrap();
    assert_eq!(to_f32(&bytes), [2.0; 3]);
}

/// Bytes at a chosen offset from a 64-byte boundary, to lend to a buffer.
struct Placed {
    memory: Vec<u8>,
    start: usize,
    len: usize,
}

impl Placed {
    fn f32s(values: &[f32], past_alignment: usize) -> Arc<Placed> {
        let len = values.len() * 4;
        let mut memory = vec![0u8; len + 128];
        let start = (memory.as_ptr() as usize).wrapping_neg() % 64 + past_alignment;
        for (i, v) in values.iter().enumerate() {
            memory[start + 4 * i..start + 4 * i + 4].copy_from_slice(&v.to_ne_bytes());
        }
        Arc::new(Placed { memory, start, len })
    }
}

// SAFETY: the bytes are a fixed range of a `Vec` no one writes after
// construction.
unsafe impl lazyxla::debug::pjrt_ffi::LentBytes for Placed {
    fn lent_bytes(&self) -> &[u8] {
        &self.memory[self.start..self.start + self.len]
    }
}

/// Waits up to 2 s for the plugin to drop its last reference.
fn released(w: &std::sync::Weak<Placed>) -> bool {
    (0..200).any(|_| {
        let gone = w.upgrade().is_none();
        if !gone {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        gone
    })
}

/// Host bytes lent at a 64-byte boundary are used in place by the CPU
/// plugins, kept alive while a buffer (or a result that took it over by
/// donation) may read them, and released afterwards; lent bytes the plugin
/// cannot use in place (unaligned, or on a GPU) are copied and released
/// once copied.
#[test]
fn lent_host_bytes_live_as_long_as_the_plugin_reads_them() {
    let Some(c) = client() else { return };
    let lent = Placed::f32s(&[1.0, 2.0, 3.0], 0);
    let at = lent.lent_bytes().as_ptr() as usize;
    let watch = Arc::downgrade(&lent);
    let a = c
        .buffer_from_lent_host(lent, ElementType::F32, &[3], 0)
        .unwrap();
    if c.platform_name().eq_ignore_ascii_case("cpu") {
        assert_eq!(a.memory_address(), Some(at), "used in place");
        assert!(
            watch.upgrade().is_some(),
            "the buffer still reads the bytes"
        );
    } else {
        // A GPU plugin copies lent bytes to the device, then lets them go.
        assert!(released(&watch), "copied bytes are released");
    }
    let exe = compile(c, ALIASED_ADD);
    let b = f32s(c, &[10.0; 3], &[3]);
    let (sum, done) = exe.execute_async_donating(&[&a, &b], &[0]).unwrap();
    done.wait().unwrap();
    drop(a);
    let mut bytes = [0u8; 12];
    sum[0].to_host_into(&mut bytes).unwrap();
    assert_eq!(to_f32(&bytes), [11.0, 12.0, 13.0]);
    drop(sum);
    assert!(released(&watch), "released once no buffer reads them");

    let lent = Placed::f32s(&[4.0, 5.0, 6.0], 4);
    let watch = Arc::downgrade(&lent);
    let copied = c
        .buffer_from_lent_host(lent, ElementType::F32, &[3], 0)
        .unwrap();
    assert!(released(&watch), "copied bytes are released at once");
    copied.to_host_into(&mut bytes).unwrap();
    assert_eq!(to_f32(&bytes), [4.0, 5.0, 6.0]);
}

/// A compiled program serializes, and a client of the same plugin loads
/// the bytes and runs them as the original; garbage is an error, never a
/// crash (the persistent compilation cache relies on both).
#[test]
fn an_executable_serializes_and_loads_again() {
    let Some(c) = client() else { return };
    let exe = compile(c, ADD_F32);
    let bytes = exe.serialize().unwrap();
    assert!(!bytes.is_empty());
    let other = Client::new(c.plugin().clone()).unwrap();
    let loaded = other.deserialize(&bytes).unwrap();
    let (a, b) = (
        f32s(&other, &[1.0, 2.0, 3.0], &[3]),
        f32s(&other, &[10.0, 20.0, 30.0], &[3]),
    );
    let out = loaded.execute(&[&a, &b]).unwrap();
    assert_eq!(to_f32(&out[0].to_host().unwrap()), [11.0, 22.0, 33.0]);
    for bad in [
        &b"not an executable"[..],
        &bytes[..bytes.len() / 2],
        &[][..],
    ] {
        assert!(other.deserialize(bad).is_err());
    }
}

/// The debug-option workarounds (`pjrt_ffi::XLA_WORKAROUNDS`) reach the
/// compiler: without them XLA annotates a counted loop with its trip
/// count (`while-loop-trip-count-annotator`, the pass that can abort the
/// process, openxla/xla#47384); with them, as every compile has them,
/// the pass does not run, and the loop computes the same.
#[test]
fn the_xla_workarounds_reach_the_compiler() {
    let Some(c) = client() else {
        return;
    };
    let x = lazyxla::Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let out = lazyxla::fori_loop(5, std::slice::from_ref(&x), |_, v| vec![&v[0] * 2.0]);
    let text = lazyxla::debug::stablehlo_text(&[&out[0]]).unwrap();
    let annotated = |options: &CompileOptions| {
        let exe = c.compile_with(&text, options).unwrap();
        let (_, module) = exe.optimized_program().unwrap();
        let found = module.windows(16).any(|w| w == b"known_trip_count");
        let input = f32s(c, &[1.0, 2.0, 3.0], &[3]);
        let result = exe.execute(&[&input]).unwrap();
        (found, to_f32(&result[0].to_host().unwrap()))
    };
    let (plain, plain_out) = annotated(&CompileOptions::replicas(1).without_workarounds());
    let (worked, worked_out) = annotated(&CompileOptions::replicas(1));
    assert!(
        plain,
        "XLA did not annotate the loop: the test no longer shows the override works"
    );
    assert!(
        !worked,
        "the pass ran although the compile options disable it"
    );
    assert_eq!(plain_out, vec![32.0, 64.0, 96.0]);
    assert_eq!(worked_out, plain_out);
}
