//! The plugin installer's logic (`examples/plugin_installer`), without the
//! network: the pins, the choice of wheels per platform, the hash check,
//! unpacking a wheel as pip would, replacing an install only once a new
//! one is complete, and the message when the network (here, a proxy that
//! does not answer) is unreachable.

#[path = "../examples/plugin_installer/mod.rs"]
mod plugin_installer;

use plugin_installer::{InstallError, Plan, Source, Target, Wheel};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lazyxla-install-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A pinned wheel for `bytes`, named `file` (leaked: pins are `'static`).
fn wheel_for(dist: &'static str, file: &str, bytes: &[u8]) -> &'static Wheel {
    Box::leak(Box::new(Wheel {
        dist,
        version: "1.0",
        arch: "x86_64",
        url: Box::leak(format!("https://files.example.invalid/packages/{file}").into_boxed_str()),
        size: bytes.len() as u64,
        sha256: Box::leak(sha256_hex(bytes).into_boxed_str()),
    }))
}

/// A zip (wheel) holding `entries`: (name, contents, unix mode).
fn zip_bytes(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data, mode) in entries {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(*mode);
        w.start_file(*name, options).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

#[test]
fn every_pin_names_a_wheel_of_its_distribution_with_a_sha256() {
    let plans = [
        (Target::Cpu, "x86_64"),
        (Target::Cpu, "aarch64"),
        (Target::Cuda12, "x86_64"),
        (Target::Cuda12, "aarch64"),
        (Target::Cuda13, "x86_64"),
        (Target::Cuda13, "aarch64"),
    ];
    for (target, arch) in plans {
        let plan = plugin_installer::plan(target, "linux", arch, true).unwrap();
        for w in plan.wheels() {
            let file = w.file_name();
            let prefix = format!("{}-{}-", w.dist.replace('-', "_"), w.version);
            assert!(file.starts_with(&prefix), "{file} is not {prefix}*");
            assert!(file.ends_with(&format!("_{arch}.whl")), "{file} not {arch}");
            assert_eq!(w.arch, arch);
            assert!(
                w.url
                    .starts_with("https://files.pythonhosted.org/packages/"),
                "{}",
                w.url
            );
            assert_eq!(w.sha256.len(), 64, "{file}");
            assert!(
                w.sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{file}"
            );
            assert!(w.size > 0, "{file}");
        }
    }
}

#[test]
fn each_platform_gets_its_plugin_and_a_gpu_its_cuda_libraries() {
    let cpu = plugin_installer::plan(Target::Cpu, "linux", "x86_64", true).unwrap();
    assert_eq!(
        (cpu.plugin.dist, cpu.plugin.version),
        ("lammps-jax-pjrt-cpu", "0.11.2")
    );
    assert!(cpu.libs.is_empty());
    assert_eq!(cpu.dir_name(), "lammps-jax-pjrt-cpu-0.11.2");
    assert_eq!(
        cpu.plugin_file(),
        "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"
    );
    // No lammps-jax-pjrt-cpu wheel for aarch64: the older plugin.
    let arm = plugin_installer::plan(Target::Cpu, "linux", "aarch64", true).unwrap();
    assert_eq!(arm.plugin.dist, "xla-cpu-pjrt");

    let gpu = plugin_installer::plan(Target::Cuda13, "linux", "x86_64", true).unwrap();
    assert_eq!(gpu.plugin.dist, "jax-cuda13-pjrt");
    assert_eq!(
        gpu.plugin_file(),
        "jax_plugins/xla_cuda13/xla_cuda_plugin.so"
    );
    let libs: Vec<&str> = gpu.libs.iter().map(|w| w.dist).collect();
    for needed in [
        "nvidia-cudnn-cu13",
        "nvidia-cublas",
        "nvidia-nccl-cu13",
        "nvidia-cuda-nvcc",
    ] {
        assert!(libs.contains(&needed), "{needed} missing from {libs:?}");
    }
    assert!(gpu.download_size() > gpu.plugin.size);
    assert_eq!(gpu.dir_name(), "jax-cuda13-pjrt-0.11.2");
    let only = plugin_installer::plan(Target::Cuda12, "linux", "x86_64", false).unwrap();
    assert!(only.libs.is_empty());
    assert_eq!(only.dir_name(), "jax-cuda12-pjrt-0.11.2-plugin-only");
}

#[test]
fn an_unsupported_platform_or_flag_says_what_to_do() {
    let e = plugin_installer::plan(Target::Cpu, "macos", "aarch64", true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("macos aarch64"), "{e}");
    assert!(e.contains("LAZYXLA_PJRT_PLUGIN"), "{e}");
    let e = Target::from_gpu_flag("cuda11").unwrap_err().to_string();
    assert!(e.contains("cuda12") && e.contains("cuda13"), "{e}");
    assert!(matches!(
        Target::from_gpu_flag("cuda13"),
        Ok(Target::Cuda13)
    ));
}

#[test]
fn a_download_that_is_not_the_pinned_file_is_refused_and_deleted() {
    let dir = temp_dir("hash");
    let wheel = wheel_for("demo", "demo-1.0-py3-none-any.whl", b"the pinned bytes");
    let dest = dir.join("demo.whl");
    let mut seen = 0;
    plugin_installer::save_verified(&b"the pinned bytes"[..], wheel, &dest, &mut |n| seen = n)
        .unwrap();
    assert_eq!(seen, 16);
    assert_eq!(std::fs::read(&dest).unwrap(), b"the pinned bytes");
    plugin_installer::verify_file(&dest, wheel).unwrap();

    // Same size, other bytes: the hash tells.
    let e = plugin_installer::save_verified(&b"the pinned bytez"[..], wheel, &dest, &mut |_| {})
        .unwrap_err();
    let msg = e.to_string();
    match e {
        InstallError::Mismatch {
            expected, actual, ..
        } => {
            assert_eq!(expected, (16, wheel.sha256.to_string()));
            assert_eq!(actual, (16, sha256_hex(b"the pinned bytez")));
        }
        other => panic!("not a mismatch: {other}"),
    }
    assert!(
        msg.contains(wheel.sha256) && msg.contains("demo-1.0-py3-none-any.whl"),
        "{msg}"
    );
    assert!(!dest.exists(), "a file that failed its check is deleted");

    // A file given with --from is checked the same way.
    let other = dir.join("other.whl");
    std::fs::write(&other, b"short").unwrap();
    let msg = plugin_installer::verify_file(&other, wheel)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("expected 16 bytes") && msg.contains("got 5 bytes"),
        "{msg}"
    );
    assert!(msg.contains("other.whl"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wheel_unpacks_as_pip_lays_it_out() {
    let dir = temp_dir("unpack");
    let file = dir.join("demo.whl");
    std::fs::write(
        &file,
        zip_bytes(&[
            ("pkg/plugin.so", b"ELF", 0o755),
            ("pkg/__init__.py", b"", 0o644),
            ("demo-1.0.data/platlib/nvidia/lib/libx.so", b"lib", 0o755),
            ("demo-1.0.data/scripts/tool", b"#!/bin/sh", 0o755),
            ("demo-1.0.dist-info/RECORD", b"", 0o644),
        ]),
    )
    .unwrap();
    let root = dir.join("root");
    assert_eq!(plugin_installer::unpack(&file, &root).unwrap(), 4);
    assert_eq!(std::fs::read(root.join("pkg/plugin.so")).unwrap(), b"ELF");
    assert_eq!(
        std::fs::read(root.join("nvidia/lib/libx.so")).unwrap(),
        b"lib"
    );
    assert!(root.join("demo-1.0.dist-info/RECORD").is_file());
    assert!(!root.join("tool").exists() && !root.join("demo-1.0.data").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| {
            std::fs::metadata(root.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("pkg/plugin.so"), 0o755);
        assert_eq!(mode("pkg/__init__.py"), 0o644);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wheel_that_writes_outside_its_directory_is_refused() {
    let dir = temp_dir("escape");
    let file = dir.join("evil.whl");
    std::fs::write(&file, zip_bytes(&[("../../escaped.txt", b"x", 0o644)])).unwrap();
    let root = dir.join("a/b/root");
    let e = plugin_installer::unpack(&file, &root)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside the install directory"), "{e}");
    assert!(!dir.join("a/escaped.txt").exists() && !dir.join("escaped.txt").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A plan for a fake CPU plugin wheel whose bytes are `wheel_bytes`,
/// named as the pins name `xla-cpu-pjrt`'s.
fn fake_plan(wheel_bytes: &[u8]) -> Plan {
    Plan {
        target: Target::Cpu,
        plugin: wheel_for(
            "xla-cpu-pjrt",
            "xla_cpu_pjrt-1.0-py3-none-manylinux_2_27_x86_64.whl",
            wheel_bytes,
        ),
        libs: Vec::new(),
    }
}

fn install_quietly(
    plan: &Plan,
    base: &Path,
    source: Source<'_>,
    force: bool,
) -> Result<plugin_installer::Installed, InstallError> {
    plugin_installer::install(plan, base, source, force, &mut |_| {}, &mut |_, _| {})
}

#[test]
fn an_install_replaces_the_old_one_only_once_complete() {
    let dir = temp_dir("replace");
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    let good = zip_bytes(&[("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", b"v1", 0o755)]);
    let plan = fake_plan(&good);
    std::fs::write(wheels.join(plan.plugin.file_name()), &good).unwrap();
    let base = dir.join("cache");

    let first = install_quietly(&plan, &base, Source::Dir(&wheels), false).unwrap();
    assert!(first.fresh);
    assert_eq!(first.root, base.join("xla-cpu-pjrt-1.0"));
    assert_eq!(std::fs::read(&first.plugin).unwrap(), b"v1");
    let marker = std::fs::read_to_string(first.root.join(plugin_installer::MARKER)).unwrap();
    assert!(marker.contains(plan.plugin.sha256), "{marker}");
    // The same wheels again: nothing to do, unless forced.
    assert!(
        !install_quietly(&plan, &base, Source::Dir(&wheels), false)
            .unwrap()
            .fresh
    );
    assert!(
        install_quietly(&plan, &base, Source::Dir(&wheels), true)
            .unwrap()
            .fresh
    );

    // A wheel that fails its check leaves the installed plugin as it was
    // and nothing half-done beside it.
    std::fs::write(wheels.join(plan.plugin.file_name()), b"corrupt").unwrap();
    let e = install_quietly(&plan, &base, Source::Dir(&wheels), true).unwrap_err();
    assert!(matches!(e, InstallError::Mismatch { .. }), "{e}");
    assert_eq!(std::fs::read(&first.plugin).unwrap(), b"v1");
    let names: Vec<String> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["xla-cpu-pjrt-1.0".to_string()]);

    // A wheel without the plugin file is no plugin wheel.
    let empty = zip_bytes(&[("something/else.txt", b"", 0o644)]);
    let plan = fake_plan(&empty);
    std::fs::write(wheels.join(plan.plugin.file_name()), &empty).unwrap();
    let e = install_quietly(&plan, &base, Source::Dir(&wheels), true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"),
        "{e}"
    );
    assert_eq!(std::fs::read(&first.plugin).unwrap(), b"v1");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A local port with nothing listening on it.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn an_unreachable_network_is_a_clear_error_and_leaves_nothing() {
    let proxy_url = format!("http://127.0.0.1:{}", closed_port());
    let proxy = ureq::Proxy::new(&proxy_url).unwrap();
    let agent = plugin_installer::agent(Some(proxy)).unwrap();
    let dir = temp_dir("offline");
    let plan = plugin_installer::plan(Target::Cpu, "linux", "x86_64", true).unwrap();
    let e = install_quietly(&plan, &dir, Source::Download(&agent), false).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, InstallError::Network { .. }), "{msg}");
    assert!(msg.contains(plan.plugin.url), "{msg}");
    assert!(msg.contains("offline"), "{msg}");
    assert!(
        msg.contains(&format!("through the proxy {proxy_url}")) || msg.contains(&proxy_url[7..]),
        "{msg}"
    );
    assert!(msg.contains("--from DIR"), "{msg}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing left behind"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pinned_file_that_is_no_zip_is_a_bad_wheel_and_installs_nothing() {
    let dir = temp_dir("corrupt");
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    // Its hash matches its (fake) pin, so only unpacking can tell.
    let bytes = b"PK\x03\x04 not really a zip archive".to_vec();
    let plan = fake_plan(&bytes);
    std::fs::write(wheels.join(plan.plugin.file_name()), &bytes).unwrap();
    let base = dir.join("cache");
    let e = install_quietly(&plan, &base, Source::Dir(&wheels), false).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, InstallError::BadWheel(_)), "{msg}");
    assert!(msg.contains("not a wheel (zip) file"), "{msg}");
    assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0, "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_proxy_names_hosts_as_curl_reads_it() {
    use plugin_installer::no_proxy_matches as m;
    let host = plugin_installer::DOWNLOAD_HOST;
    assert!(m("*", host));
    assert!(m("localhost, files.pythonhosted.org", host));
    assert!(m("pythonhosted.org", host));
    assert!(m(".pythonhosted.org", host));
    assert!(m("PythonHosted.org:443", host));
    assert!(!m("", host));
    assert!(!m("hosted.org.example, pypi.org", host));
    assert!(!m("osted.org", host));
}
