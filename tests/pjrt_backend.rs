//! The XLA backend through PJRT: plugin discovery and its errors, program
//! dumps, compile errors, device-resident data, one compile per program
//! structure, and the bounded-dynamic examples of
//! `shared/reference/xla-bounded-dynamism.md`.
//!
//! Tests that need a different environment (no plugin, a dump directory,
//! a forced backend) re-run this test binary as a child process with that
//! environment and one `child_*` test selected; the `child_*` tests do
//! nothing unless `LAZYXLA_TEST_CHILD` is set.

mod common;

use common::{assert_close, panic_message, pjrt_device, run_on};
use lazyxla::{mark_step, metrics, DType, Device, Tensor};
use std::process::Command;

fn is_child() -> bool {
    std::env::var_os("LAZYXLA_TEST_CHILD").is_some()
}

/// Runs the `child_*` test `name` in a fresh process with `env` set and
/// the plugin variables cleared; returns (success, stdout + stderr).
fn run_child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("LAZYXLA_TEST_CHILD", "1")
        .env_remove("LAZYXLA_PJRT_PLUGIN")
        .env_remove("LAZYXLA_PJRT_PATH")
        .env_remove("LAZYXLA_BACKEND")
        .env_remove("PJRT_DEVICE")
        .env_remove("LAZYXLA_DUMP")
        .env_remove("XDG_CACHE_HOME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run child test");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// In a child started by [`run_child`] with a plugin, runs `f` on the
/// plugin's device; elsewhere does nothing.
fn in_child_on_pjrt(f: impl FnOnce()) {
    if is_child() {
        Device::pjrt().expect("a plugin in the child").scoped(f);
    }
}

// ----- discovery -----

#[test]
fn child_no_plugin() {
    if !is_child() {
        return;
    }
    let e = Device::pjrt().unwrap_err().to_string();
    println!("NO-PLUGIN-ERROR: {e}");
    assert!(
        e.contains("cargo run --release --example install_plugin"),
        "{e}"
    );
    assert!(
        e.contains("/nonexistent/home/.cache/lazyxla/plugins"),
        "{e}"
    );
    assert!(
        e.contains("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"),
        "{e}"
    );
    assert!(e.contains("/nonexistent/pjrt-dir"), "{e}");
    // Unset LAZYXLA_BACKEND: the reference backend, said on stderr.
    assert_eq!(Device::default().name(), "reference");
}

#[test]
fn no_plugin_lists_where_it_looked_and_how_to_install() {
    if is_child() {
        return;
    }
    // HOME and PATH point nowhere useful, so only system dirs and the
    // given (missing) directory are searched.
    let (ok, out) = run_child(
        "child_no_plugin",
        &[
            ("LAZYXLA_PJRT_PATH", "/nonexistent/pjrt-dir"),
            ("HOME", "/nonexistent/home"),
            ("PATH", "/nonexistent/bin"),
        ],
    );
    assert!(ok, "{out}");
    // The one line says what happened and how to get a plugin.
    let line = out
        .lines()
        .find(|l| {
            l.starts_with("lazyxla: no PJRT plugin found, so running on the reference backend")
        })
        .unwrap_or_else(|| panic!("no fallback line in: {out}"));
    assert!(
        line.contains("cargo run --release --example install_plugin"),
        "{line}"
    );
    assert!(
        line.contains("LAZYXLA_BACKEND=reference silences"),
        "{line}"
    );
}

#[test]
fn child_default_device_quietly() {
    if !is_child() {
        return;
    }
    assert_eq!(Device::default().name(), "reference");
}

#[test]
fn a_chosen_reference_backend_prints_nothing() {
    if is_child() {
        return;
    }
    let (ok, out) = run_child(
        "child_default_device_quietly",
        &[
            ("LAZYXLA_BACKEND", "reference"),
            ("LAZYXLA_PJRT_PATH", "/nonexistent/pjrt-dir"),
            ("HOME", "/nonexistent/home"),
            ("PATH", "/nonexistent/bin"),
        ],
    );
    assert!(ok, "{out}");
    assert!(!out.contains("lazyxla:"), "{out}");
}

#[test]
fn child_forced_pjrt_without_plugin() {
    if !is_child() {
        return;
    }
    let _ = Device::default();
}

#[test]
fn forced_pjrt_fails_clearly_without_a_plugin() {
    if is_child() {
        return;
    }
    let (ok, out) = run_child(
        "child_forced_pjrt_without_plugin",
        &[
            ("LAZYXLA_BACKEND", "pjrt"),
            ("LAZYXLA_PJRT_PATH", "/nonexistent/pjrt-dir"),
            ("HOME", "/nonexistent/home"),
            ("PATH", "/nonexistent/bin"),
        ],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("LAZYXLA_BACKEND=pjrt"), "{out}");
    assert!(out.contains("--example install_plugin"), "{out}");
}

#[test]
fn child_bad_pjrt_device() {
    if !is_child() {
        return;
    }
    let e = Device::pjrt().unwrap_err().to_string();
    assert!(e.contains("PJRT_DEVICE=FPGA"), "{e}");
}

#[test]
fn unknown_pjrt_device_is_an_error() {
    if is_child() {
        return;
    }
    let (ok, out) = run_child("child_bad_pjrt_device", &[("PJRT_DEVICE", "FPGA")]);
    assert!(ok, "{out}");
}

#[test]
fn a_file_that_is_no_plugin_names_its_path() {
    let dir = common::scratch();
    let p = dir.path().join("not_a_plugin.so");
    std::fs::write(&p, b"this is not a shared library").unwrap();
    let e = Device::pjrt_from(&p).unwrap_err();
    assert!(matches!(e, lazyxla::Error::Plugin(_)), "{e:?}");
    assert!(e.to_string().contains("not_a_plugin.so"), "{e}");
    let e = Device::pjrt_from("/nonexistent/plugin.so").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/plugin.so"), "{e}");
}

#[test]
fn the_device_is_created_once_per_plugin() {
    let Some(d) = pjrt_device() else { return };
    let again = Device::pjrt().unwrap();
    assert_eq!(d, again);
    let path = lazyxla::debug::pjrt_plugin_path().unwrap();
    assert_eq!(Device::pjrt_from(&path).unwrap(), d);
    assert!(d.name().starts_with("pjrt:"), "{}", d.name());
}

// ----- exiting -----

#[test]
fn child_exit_with_a_program_in_flight() {
    in_child_on_pjrt(|| {
        let a = Tensor::randn(&[1024, 1024], 1);
        mark_step().unwrap();
        // Half a second of matmuls, twice: a program's first run completes
        // inside `mark_step`, the second is still running when the process
        // exits.
        for _ in 0..2 {
            let mut b = a.matmul(&a);
            for _ in 0..6 {
                b = b.matmul(&a).tanh();
            }
            mark_step().unwrap();
        }
        assert_eq!(
            metrics::counter("CachedCompile"),
            1,
            "the second run is the same program"
        );
    });
}

#[test]
fn exiting_with_a_program_in_flight_waits_for_it() {
    if is_child() || pjrt_device().is_none() {
        return;
    }
    let plugin = lazyxla::debug::pjrt_plugin_path().unwrap();
    // Without the exit handler about half of such runs crash; four runs
    // catch that 15 times in 16.
    for _ in 0..4 {
        let (ok, out) = run_child(
            "child_exit_with_a_program_in_flight",
            &[("LAZYXLA_PJRT_PLUGIN", plugin.to_str().unwrap())],
        );
        assert!(
            ok,
            "the process must exit cleanly with a program in flight:\n{out}"
        );
    }
}

// ----- dumps and compile errors -----

#[test]
fn child_dump() {
    in_child_on_pjrt(|| {
        let a = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
        let n = a.nonzero();
        assert_eq!(n.to_vec::<i64>().unwrap(), vec![0, 2]);
    });
}

#[test]
fn dump_writes_ir_and_stablehlo_per_program() {
    if is_child() || pjrt_device().is_none() {
        return;
    }
    let scratch = common::scratch();
    let dir = scratch.path();
    let plugin = lazyxla::debug::pjrt_plugin_path().unwrap();
    let (ok, out) = run_child(
        "child_dump",
        &[
            ("LAZYXLA_DUMP", dir.to_str().unwrap()),
            ("LAZYXLA_PJRT_PLUGIN", plugin.to_str().unwrap()),
        ],
    );
    assert!(ok, "{out}");
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let ir = names.iter().find(|n| n.ends_with(".ir.txt")).expect("ir");
    let hlo = names
        .iter()
        .find(|n| n.ends_with(".stablehlo.mlir"))
        .expect("stablehlo");
    let ir = std::fs::read_to_string(dir.join(ir)).unwrap();
    let hlo = std::fs::read_to_string(dir.join(hlo)).unwrap();
    assert!(ir.contains("nonzero"), "{ir}");
    assert!(hlo.contains("stablehlo.set_dimension_size"), "{hlo}");
    assert!(hlo.contains("func.func @main"), "{hlo}");
}

#[test]
fn compile_error_has_xla_message_and_dump_path() {
    let Some(d) = pjrt_device() else { return };
    let _g = common::lock();
    let bad = "func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n  %b = stablehlo.frobnicate %a : tensor<3xf32>\n  return %b : tensor<3xf32>\n}";
    let e = lazyxla::debug::pjrt_compile_text(&d, bad).unwrap_err();
    let lazyxla::Error::Compile { message, .. } = &e else {
        panic!("expected a compile error, got {e:?}")
    };
    assert!(message.contains("frobnicate"), "{message}");
    assert!(common::take_dump(message).contains("frobnicate"));
}

// ----- device-resident data and compile counts -----

#[test]
fn a_ten_step_loop_never_copies_to_the_host() {
    let Some(d) = pjrt_device() else { return };
    run_on(&d, || {
        let mut w = Tensor::from_vec(vec![0.5f32; 16], &[4, 4]).unwrap();
        let x = Tensor::from_vec((0..8).map(|i| i as f32).collect(), &[2, 4]).unwrap();
        for _ in 0..10 {
            let y = x.matmul(&w);
            let sel = y.masked_select(&y.gt_scalar(3.0));
            let s = sel.sum();
            w = &w * 0.9 + &s.reshape(&[1, 1]).expand(&[4.into(), 4.into()]) * 0.001;
            mark_step().unwrap();
        }
        assert_eq!(metrics::counter("TransferFromDevice"), 0);
        assert_eq!(metrics::counter("SizeMaterialization"), 0);
        assert_eq!(
            metrics::counter("UncachedCompile"),
            1,
            "{}",
            metrics::report()
        );
        assert_eq!(metrics::counter("CachedCompile"), 9);
        // Reading at the end is the one transfer.
        let v = w.to_vec::<f32>().unwrap();
        assert_eq!(metrics::counter("TransferFromDevice"), 1);
        assert!(v.iter().all(|x| x.is_finite()));
    });
}

#[test]
fn one_compile_per_structure_while_dynamic_sizes_change() {
    let Some(d) = pjrt_device() else { return };
    run_on(&d, || {
        let mut sums = Vec::new();
        for step in 0..6 {
            let v: Vec<f32> = (0..25).map(|i| ((i * 7 + step) % 3) as f32).collect();
            let t1 = Tensor::from_vec(v.clone(), &[5, 5]).unwrap();
            let t2 = t1.nonzero();
            let t3 = t2.to_dtype(DType::F32).pow(2.0);
            let t5 = t3.sum() + 2.0;
            mark_step().unwrap();
            let want: f32 = v
                .iter()
                .enumerate()
                .filter(|(_, x)| **x != 0.0)
                .map(|(i, _)| ((i / 5) * (i / 5) + (i % 5) * (i % 5)) as f32)
                .sum::<f32>()
                + 2.0;
            sums.push((t5.item::<f32>().unwrap(), want));
        }
        for (got, want) in sums {
            assert_eq!(got, want);
        }
        assert_eq!(
            metrics::counter("UncachedCompile"),
            1,
            "{}",
            metrics::report()
        );
    });
}

#[test]
fn mark_dynamic_inputs_compile_once() {
    let Some(d) = pjrt_device() else { return };
    run_on(&d, || {
        for n in [3usize, 7, 1, 8] {
            let x = Tensor::from_vec((0..n * 2).map(|i| i as f32).collect(), &[n, 2])
                .unwrap()
                .mark_dynamic(0, 8);
            let y = (&x * 2.0).sum_dims(&[1], false);
            let want: Vec<f32> = (0..n).map(|r| (4 * r + 1) as f32 * 2.0).collect();
            assert_eq!(y.to_vec::<f32>().unwrap(), want);
        }
        assert_eq!(
            metrics::counter("UncachedCompile"),
            1,
            "{}",
            metrics::report()
        );
        let too_big = Tensor::from_vec(vec![0.0f32; 18], &[9, 2]).unwrap();
        let msg = panic_message(|| {
            let _ = too_big.mark_dynamic(0, 8);
        });
        assert!(msg.contains("bound"), "{msg}");
    });
}

// ----- the bounded-dynamic examples of the reference notes -----

backend_test! {
    fn reference_example_nonzero_of_a_matrix() {
        let x = Tensor::from_vec(vec![0.0f32, 1.0, 0.0, 2.0, 0.0, 3.0], &[2, 3]).unwrap();
        let n = x.nonzero();
        assert_eq!(n.to_vec::<i64>().unwrap(), vec![0, 1, 1, 0, 1, 2]);
        assert_eq!(n.size(0).materialize().unwrap(), 3);
    }
}

backend_test! {
    fn reference_example_masked_select_and_reductions() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[6]).unwrap();
        let m = Tensor::from_vec(vec![true, false, true, true, false, false], &[6]).unwrap();
        let s = x.masked_select(&m);
        assert_eq!(s.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 4.0]);
        assert_eq!(s.sum().item::<f32>().unwrap(), 8.0);
        assert_eq!(s.max().item::<f32>().unwrap(), 4.0);
        assert_eq!(s.min().item::<f32>().unwrap(), 1.0);
        assert_eq!(s.argmax(0).item::<i64>().unwrap(), 2);
        // dot over the dynamic contracting dim, concat of two dynamic tensors
        let dot = s.reshape(&[1, -1]).matmul(&s.reshape(&[-1, 1]));
        assert_eq!(dot.to_vec::<f32>().unwrap(), vec![26.0]);
        let c = Tensor::cat(&[&s, &s], 0);
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 4.0, 1.0, 3.0, 4.0]);
        assert_eq!(c.size(0).upper_bound(), 12);
        // broadcast of a dynamic vector, reshape 2 x <=6 -> <=12
        let b = s.unsqueeze(0).expand(&[2.into(), s.size(0)]);
        assert_eq!(b.reshape(&[-1]).to_vec::<f32>().unwrap(), vec![1.0, 3.0, 4.0, 1.0, 3.0, 4.0]);
        // gather rows with a dynamic number of indices; scatter-add them back
        let table = Tensor::from_vec(vec![0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0], &[4, 2]).unwrap();
        let idx = Tensor::from_vec(vec![3i64, 0, 2, 0, 1], &[5]).unwrap();
        let idx = idx.masked_select(&idx.ne_scalar(0.0));
        let rows = table.index_select(0, &idx);
        assert_eq!(rows.to_vec::<f32>().unwrap(), vec![30.0, 31.0, 20.0, 21.0, 10.0, 11.0]);
        let pad = s.pad_to_bound(-1.0);
        assert_eq!(pad.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 4.0, -1.0, -1.0, -1.0]);
    }
}

backend_test! {
    fn reference_example_unique_on_the_device() {
        let x = Tensor::from_vec(vec![3.0f32, f32::NAN, 1.0, 3.0, -0.0, 0.0, 1.0], &[7]).unwrap();
        let (u, c) = x.unique_with_counts();
        let uv = u.to_vec::<f32>().unwrap();
        assert_eq!(uv.len(), 4);
        assert_eq!(&uv[..3], &[0.0, 1.0, 3.0]);
        assert!(uv[3].is_nan());
        assert_eq!(c.to_vec::<i64>().unwrap(), vec![2, 2, 2, 0]);
        let m = Tensor::from_vec(vec![5i64, 5, 2, 9, 2, 5], &[2, 3]).unwrap();
        assert_eq!(m.unique().to_vec::<i64>().unwrap(), vec![2, 5, 9]);
    }
}

backend_test! {
    fn dynamic_zone_example() {
        let v: Vec<f32> = (0..25).map(|i| ((i * 3) % 2) as f32).collect();
        let t1 = Tensor::from_vec(v, &[5, 5]).unwrap();
        let t2 = t1.nonzero();
        let t3 = t2.to_dtype(DType::F32).pow(2.0);
        let t4 = t3.sum();
        let t5 = &t4 + 2.0;
        mark_step().unwrap();
        assert_eq!(t2.size(0).to_string(), "<=25");
        let mut want = 2.0f32;
        for i in 0..25 {
            if (i * 3) % 2 != 0 {
                want += ((i / 5) * (i / 5) + (i % 5) * (i % 5)) as f32;
            }
        }
        assert_close(&[t5.item::<f32>().unwrap()], &[want], 1e-6);
    }
}

backend_test! {
    fn random_uniform_matches_the_reference_bits() {
        let r = Tensor::rand(&[3, 5], 1234);
        let v = r.to_vec::<f32>().unwrap();
        let again = Tensor::rand(&[3, 5], 1234).to_vec::<f32>().unwrap();
        assert_eq!(v, again);
        // Pinned values: the same on every backend.
        let want = Device::reference().scoped(|| Tensor::rand(&[3, 5], 1234).to_vec::<f32>().unwrap());
        assert_eq!(v, want);
    }
}

backend_test! {
    fn remainder_nan_max_and_erf_follow_the_reference() {
        let a = Tensor::from_vec(vec![7i32, -7, 7, -7, 5, i32::MIN, 0], &[7]).unwrap();
        let b = Tensor::from_vec(vec![2i32, 2, -2, -2, 0, -1, 3], &[7]).unwrap();
        assert_eq!(a.remainder(&b).to_vec::<i32>().unwrap(), vec![1, 1, -1, -1, 5, 0, 0]);
        let f = Tensor::from_vec(vec![f32::NAN, 1.0, 2.5], &[3]).unwrap();
        let g = Tensor::from_vec(vec![1.0f32, f32::NAN, -1.0], &[3]).unwrap();
        let mx = f.maximum(&g).to_vec::<f32>().unwrap();
        assert!(mx[0].is_nan() && mx[1].is_nan() && mx[2] == 2.5);
        let e = Tensor::from_vec(vec![-7.0f64, -2.5, -0.3, 0.0, 0.1, 1.0, 2.9, 3.0, 4.5, 6.5], &[10]).unwrap();
        let got = e.erf().to_vec::<f64>().unwrap();
        let want = Device::reference().scoped(|| {
            Tensor::from_vec(vec![-7.0f64, -2.5, -0.3, 0.0, 0.1, 1.0, 2.9, 3.0, 4.5, 6.5], &[10])
                .unwrap()
                .erf()
                .to_vec::<f64>()
                .unwrap()
        });
        // Both sides sum the same series; near |x| = 3 its cancellation leaves
        // about 1e-13 of rounding, which XLA (fused multiply-adds) and the
        // interpreter spend differently.
        common::assert_close64(&got, &want, 1e-12);
    }
}

backend_test! {
    fn outer_product_of_two_dynamic_vectors() {
        let a = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0], &[4]).unwrap();
        let b = Tensor::from_vec(vec![0.0f32, 5.0, 6.0], &[3]).unwrap();
        let x = a.masked_select(&a.gt_scalar(0.0)).unsqueeze(1);
        let y = b.masked_select(&b.gt_scalar(0.0)).unsqueeze(0);
        let p = &x * &y.expand(&[1.into(), y.size(1)]);
        let p = p.expand(&[x.size(0), y.size(1)]) + 0.0;
        assert_eq!(p.concrete_shape().unwrap(), vec![3, 2]);
        assert_eq!(p.to_vec::<f32>().unwrap(), vec![5.0, 6.0, 10.0, 12.0, 15.0, 18.0]);
        assert_eq!(p.sum_dims(&[0], false).to_vec::<f32>().unwrap(), vec![30.0, 36.0]);
    }
}

#[test]
fn out_of_range_indices_error_on_the_reference_and_clamp_on_xla() {
    // Counters are process-wide: keep other tests' compile counts exact.
    let _g = common::lock();
    let idx = || Tensor::from_vec(vec![0i64, 7], &[2]).unwrap();
    let x = || Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let r = Device::reference().scoped(|| x().index_select(0, &idx()).to_vec::<f32>());
    assert!(r.unwrap_err().to_string().contains("out of range"));
    let Some(d) = pjrt_device() else { return };
    // XLA clamps gather start indices into the bound: index 7 reads x[2].
    let v = d.scoped(|| x().index_select(0, &idx()).to_vec::<f32>().unwrap());
    assert_eq!(v, vec![1.0, 3.0]);
    // Scatter drops an out-of-range update.
    let v = d.scoped(|| {
        let base = Tensor::zeros(&[3], DType::F32);
        let src = Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap();
        base.index_add(0, &idx(), &src).to_vec::<f32>().unwrap()
    });
    assert_eq!(v, vec![1.0, 0.0, 0.0]);
}

backend_test! {
    fn unique_of_one_element_counts_nan_as_zero() {
        let x = Tensor::from_vec(vec![f32::NAN], &[1]).unwrap();
        let (u, c) = x.unique_with_counts();
        assert!(u.to_vec::<f32>().unwrap()[0].is_nan());
        assert_eq!(c.to_vec::<i64>().unwrap(), vec![0]);
        let y = Tensor::from_vec(vec![4.0f32], &[1]).unwrap();
        assert_eq!(y.unique_with_counts().1.to_vec::<i64>().unwrap(), vec![1]);
    }
}

backend_test! {
    fn large_dynamic_ops_use_the_window_prefix_sum() {
        // 5000 elements: past the size where packing switches from the
        // doubling prefix sum to one reduce_window.
        let v: Vec<f32> = (0..5000).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
        let x = Tensor::from_vec(v.clone(), &[50, 100]).unwrap();
        let sel = x.masked_select(&x.gt_scalar(2.0));
        let want: Vec<f32> = v.iter().copied().filter(|&a| a > 2.0).collect();
        assert_eq!(sel.to_vec::<f32>().unwrap(), want);
        let nz = x.gt_scalar(4.0).nonzero();
        let coords: Vec<i64> = (0..5000)
            .filter(|&i| v[i] > 4.0)
            .flat_map(|i| [(i / 100) as i64, (i % 100) as i64])
            .collect();
        assert_eq!(nz.to_vec::<i64>().unwrap(), coords);
        let (u, c) = x.unique_with_counts();
        assert_eq!(u.to_vec::<f32>().unwrap(), (-5..=5).map(|k| k as f32).collect::<Vec<_>>());
        let counts: Vec<i64> = (-5..=5)
            .map(|k| v.iter().filter(|&&a| a == k as f32).count() as i64)
            .collect();
        assert_eq!(c.to_vec::<i64>().unwrap(), counts);
        let base = Tensor::zeros(&[50, 100], DType::F32);
        let back = base.masked_scatter(&x.gt_scalar(2.0), &sel);
        let want_back: Vec<f32> = v.iter().map(|&a| if a > 2.0 { a } else { 0.0 }).collect();
        assert_eq!(back.to_vec::<f32>().unwrap(), want_back);
    }
}
