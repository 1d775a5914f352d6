//! A C++ exception thrown inside the XLA plugin is an `Err`, never an
//! abort, and the runtime goes on: live tensors keep their values and the
//! next compile and step work.
//!
//! `THROWS` is a valid StableHLO program on which XLA's compiler (both CPU
//! plugins CI tests) throws `std::length_error` from inside
//! `PJRT_Client_Compile`: a slice of an empty range out of a concatenate
//! whose last operand is empty. The lowering no longer emits that shape
//! (`differential::an_empty_slice_of_a_concatenate_with_an_empty_part`),
//! so the program is compiled as text. Without the C++ guard around PJRT
//! calls (`src/backend/pjrt/ffi/guard.cc`) the exception reaches Rust and
//! the test process aborts ("Rust cannot catch foreign exceptions").
//!
//! With `LAZYXLA_REQUIRE_PJRT=1` a missing plugin FAILS these tests;
//! otherwise they report the skip on stderr and return.

mod common;

use common::{pjrt_device, run_on};
use lazyxla::debug::pjrt_ffi::{Client, ElementType, Plugin};
use lazyxla::{mark_step, metrics, Tensor};

const THROWS: &str = r#"
func.func @main(%x: tensor<2xf32>, %empty: tensor<0xf32>) -> tensor<0xf32> {
  %c = "stablehlo.concatenate"(%x, %empty) {dimension = 0 : i64} : (tensor<2xf32>, tensor<0xf32>) -> tensor<2xf32>
  %s = "stablehlo.slice"(%c) {start_indices = array<i64: 2>, limit_indices = array<i64: 2>, strides = array<i64: 1>} : (tensor<2xf32>) -> tensor<0xf32>
  "func.return"(%s) : (tensor<0xf32>) -> ()
}"#;

/// A shape whose element count overflows 64 bits: XLA's compiler throws
/// `absl::BadStatusOrAccess` ("overflow in static extent product") from
/// inside `PJRT_Client_Compile` on both CPU plugins. Inference rejects
/// such shapes before a program exists (`check_representable`).
const THROWS_TOO: &str = r#"
func.func @main(%x: tensor<f32>) -> tensor<4294967296x4294967296x16xf32> {
  %b = "stablehlo.broadcast_in_dim"(%x) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<4294967296x4294967296x16xf32>
  "func.return"(%b) : (tensor<4294967296x4294967296x16xf32>) -> ()
}"#;

/// The same shape as `THROWS` without the empty operand: XLA compiles it.
const COMPILES: &str = r#"
func.func @main(%x: tensor<2xf32>, %y: tensor<1xf32>) -> tensor<1xf32> {
  %c = "stablehlo.concatenate"(%x, %y) {dimension = 0 : i64} : (tensor<2xf32>, tensor<1xf32>) -> tensor<3xf32>
  %s = "stablehlo.slice"(%c) {start_indices = array<i64: 2>, limit_indices = array<i64: 3>, strides = array<i64: 1>} : (tensor<3xf32>) -> tensor<1xf32>
  "func.return"(%s) : (tensor<1xf32>) -> ()
}"#;

/// Checks that `message` reports the exception, of type `thrown`, as
/// XLA's own failure.
fn assert_reports_the_exception(message: &str, thrown: &str) {
    for part in [
        "PJRT_Client_Compile",
        &format!("threw a C++ exception ({thrown}"),
        "internal error of XLA",
        "report it",
    ] {
        assert!(message.contains(part), "no {part:?} in: {message}");
    }
}

#[test]
fn an_exception_in_the_xla_compiler_is_a_compile_error_and_the_runtime_goes_on() {
    let Some(d) = pjrt_device() else { return };
    run_on(&d, || {
        // Live tensors before the failure: one uploaded, one computed on
        // the device by a compiled program.
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let y = (&x * 2.0).exp();
        mark_step().unwrap();
        let y_before = y.to_vec::<f32>().unwrap();

        let e = lazyxla::debug::pjrt_compile_text(&d, THROWS).unwrap_err();
        let lazyxla::Error::Compile { message, .. } = &e else {
            panic!("expected a compile error, got {e:?}")
        };
        assert_reports_the_exception(message, "std::length_error: ");
        // The program was dumped for the report.
        assert!(common::take_dump(message).contains("concatenate"));

        // Again: a second throw is caught as well.
        let again = lazyxla::debug::pjrt_compile_text(&d, THROWS).unwrap_err();
        assert_reports_the_exception(&again.to_string(), "std::length_error: ");
        common::take_dump(&again.to_string());

        // The live tensors kept their values.
        assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(y.to_vec::<f32>().unwrap(), y_before);

        // A new program compiles and runs on them ...
        let compiles = metrics::counter("UncachedCompile");
        let z = (&y - &x).sum();
        let want: f32 = y_before
            .iter()
            .zip([1.0f32, 2.0, 3.0])
            .map(|(a, b)| a - b)
            .sum();
        common::assert_close(&[z.item::<f32>().unwrap()], &[want], 1e-6);
        assert_eq!(metrics::counter("UncachedCompile"), compiles + 1);
        // ... and an earlier one runs again from the cache.
        let y2 = (&x * 2.0).exp();
        assert_eq!(y2.to_vec::<f32>().unwrap(), y_before);
        assert_eq!(metrics::counter("UncachedCompile"), compiles + 1);
    });
}

#[test]
fn the_ffi_layer_returns_the_exception_and_the_client_stays_usable() {
    let Some(_) = pjrt_device() else { return };
    let path = lazyxla::debug::pjrt_plugin_path().unwrap();
    let client = Client::new(Plugin::load(&path).unwrap()).unwrap();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    // Buffers made before the failure.
    let x = client
        .buffer_from_host(&bytes(&[1.0, 2.0]), ElementType::F32, &[2], 0)
        .unwrap();
    let y = client
        .buffer_from_host(&bytes(&[5.0]), ElementType::F32, &[1], 0)
        .unwrap();

    let e = client.compile(THROWS).unwrap_err();
    assert_reports_the_exception(&e.message, "std::length_error: ");
    // Raised by lazyxla's guard, not returned by the plugin as a PJRT_Error.
    assert_eq!(e.code, None, "{e:?}");
    // Another exception type (the version namespace of absl differs
    // between plugins), and its message.
    let e = client.compile(THROWS_TOO).unwrap_err();
    assert_reports_the_exception(&e.message, "absl::");
    assert!(e.message.contains("BadStatusOrAccess: "), "{e:?}");
    assert!(e.message.contains("overflow"), "{e:?}");

    let exe = client.compile(COMPILES).unwrap();
    let out = exe.execute(&[&x, &y]).unwrap();
    assert_eq!(out[0].to_host().unwrap(), bytes(&[5.0]));
    assert_eq!(x.to_host().unwrap(), bytes(&[1.0, 2.0]));
}
