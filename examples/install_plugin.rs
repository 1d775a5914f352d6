//! Installs a PJRT plugin without Python, so lazyxla runs on XLA: the
//! pinned wheel is downloaded from PyPI over HTTPS (the system's
//! certificate store; `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and
//! `NO_PROXY` as usual), checked against the size and sha256 pinned in
//! `examples/plugin_installer/pins.rs`, and unpacked into the per-user
//! plugin cache (`lazyxla::Device::plugin_cache_dir()`, e.g.
//! `~/.cache/lazyxla/plugins`), which discovery searches.
//!
//! Run: `cargo run --release --example install_plugin [-- --gpu cuda12|cuda13]`
//! (`-- --help` lists the options).

#[path = "plugin_installer/mod.rs"]
mod plugin_installer;

use plugin_installer::{megabytes, InstallError, Plan, Source, Target};
use std::path::PathBuf;

const USAGE: &str = "\
usage: cargo run --release --example install_plugin [-- OPTIONS]

Installs a PJRT plugin where lazyxla finds it, so that it runs on XLA.

  (no option)           XLA's CPU plugin: lammps-jax-pjrt-cpu 0.11.2 on x86_64
                        (XLA of jaxlib 0.11.2), xla-cpu-pjrt 0.0.1 on aarch64
  --gpu cuda12|cuda13   JAX's CUDA PJRT plugin 0.11.2 (jax-cudaNN-pjrt) and
                        NVIDIA's CUDA library wheels it loads (a few GB); the
                        machine needs only the NVIDIA driver
  --plugin-only         with --gpu: the plugin alone, for a machine whose CUDA
                        and cuDNN libraries are on the library path already
  --dir DIR             install under DIR instead of the plugin cache (then
                        LAZYXLA_PJRT_PATH=DIR/<name> makes lazyxla search it)
  --from DIR            take the wheels from DIR (downloaded elsewhere, e.g. the
                        URLs --list prints) instead of downloading them
  --force               install again even when the same wheels are installed
  --list                print the wheels (URL, size, sha256) and stop
  --help                this text";

struct Args {
    target: Target,
    plugin_only: bool,
    dir: Option<PathBuf>,
    from: Option<PathBuf>,
    force: bool,
    list: bool,
}

fn parse_args() -> Result<Option<Args>, InstallError> {
    let mut args = Args {
        target: Target::Cpu,
        plugin_only: false,
        dir: None,
        from: None,
        force: false,
        list: false,
    };
    let mut it = std::env::args().skip(1);
    let value = |it: &mut dyn Iterator<Item = String>, flag: &str| {
        it.next()
            .ok_or_else(|| InstallError::Usage(format!("{flag} needs a value\n\n{USAGE}")))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--gpu" => args.target = Target::from_gpu_flag(&value(&mut it, "--gpu")?)?,
            "--plugin-only" => args.plugin_only = true,
            "--dir" => args.dir = Some(value(&mut it, "--dir")?.into()),
            "--from" => args.from = Some(value(&mut it, "--from")?.into()),
            "--force" => args.force = true,
            "--list" => args.list = true,
            "-h" | "--help" => return Ok(None),
            other => {
                return Err(InstallError::Usage(format!(
                    "unknown option `{other}`\n\n{USAGE}"
                )))
            }
        }
    }
    if args.plugin_only && args.target == Target::Cpu {
        return Err(InstallError::Usage(
            "--plugin-only goes with --gpu cuda12|cuda13 (the CPU plugin needs no other library)"
                .into(),
        ));
    }
    Ok(Some(args))
}

fn main() {
    match run() {
        Ok(()) => {}
        Err(e @ InstallError::Usage(_)) => {
            eprintln!("install_plugin: {e}");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("install_plugin: error: {e}");
            std::process::exit(1);
        }
    }
}

fn run() -> Result<(), InstallError> {
    let Some(args) = parse_args()? else {
        println!("{USAGE}");
        return Ok(());
    };
    let plan = plugin_installer::plan(
        args.target,
        std::env::consts::OS,
        std::env::consts::ARCH,
        !args.plugin_only,
    )?;
    if args.list {
        for w in plan.wheels() {
            println!("{} {} sha256:{}", w.url, w.size, w.sha256);
        }
        return Ok(());
    }
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => lazyxla::Device::plugin_cache_dir().ok_or_else(|| {
            InstallError::Usage(
                "no home directory (HOME is unset), so no plugin cache: pass --dir DIR".into(),
            )
        })?,
    };
    let count = plan.wheels().count();
    let announce = args.force || !plugin_installer::is_installed(&plan, &base);
    if announce {
        eprintln!(
            "installing {} {}{} into {}: {count} wheel{}, {}",
            plan.plugin.dist,
            plan.plugin.version,
            if plan.libs.is_empty() {
                ""
            } else {
                " with NVIDIA's CUDA libraries"
            },
            base.join(plan.dir_name()).display(),
            if count == 1 { "" } else { "s" },
            megabytes(plan.download_size()),
        );
    }

    let agent;
    let source = match &args.from {
        Some(dir) => Source::Dir(dir),
        None => {
            agent = plugin_installer::agent(plugin_installer::proxy_from_env(
                plugin_installer::DOWNLOAD_HOST,
            )?)?;
            Source::Download(&agent)
        }
    };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {bytes}/{total_bytes} {bytes_per_sec} {msg}",
        )
        .expect("a valid template"),
    );
    let mut current = "";
    let installed = plugin_installer::install(
        &plan,
        &base,
        source,
        args.force,
        &mut |step| bar.println(step),
        &mut |wheel, n| {
            if current != wheel.file_name() {
                current = wheel.file_name();
                bar.set_length(wheel.size);
                bar.set_message(wheel.dist);
            }
            bar.set_position(n);
        },
    );
    bar.finish_and_clear();
    let installed = installed?;
    if installed.fresh {
        println!("installed {}", installed.root.display());
    } else {
        println!(
            "already installed: {} (--force installs again)",
            installed.root.display()
        );
    }
    println!("plugin: {}", installed.plugin.display());
    if args.dir.is_some() {
        println!(
            "lazyxla does not search {} by itself: set LAZYXLA_PJRT_PATH={}",
            base.display(),
            installed.root.display()
        );
    } else {
        println!("lazyxla finds it there by itself (Device::pjrt, and Device::default when no LAZYXLA_BACKEND is set).");
    }
    check_loads(&plan, &installed.plugin)
}

/// Loads the plugin and runs one small program on it. A CPU plugin that
/// does not load is an error; a GPU plugin may be installed on a machine
/// without the GPU (or the driver), so there it is a warning.
fn check_loads(plan: &Plan, plugin: &std::path::Path) -> Result<(), InstallError> {
    let tried = lazyxla::Device::pjrt_from(plugin).and_then(|d| {
        d.scoped(|| {
            let t = lazyxla::Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?;
            (&t * &t).sum().item::<f32>()
        })
        .map(|v| (d.name().to_string(), v))
    });
    match tried {
        Ok((name, 14.0)) => {
            println!("checked: the plugin loads and runs a program ({name})");
            Ok(())
        }
        Ok((name, v)) => Err(InstallError::BadWheel(format!(
            "the plugin loads ({name}) but computed 1+4+9 = {v}"
        ))),
        Err(e) if plan.target == Target::Cpu => Err(InstallError::BadWheel(format!(
            "the plugin was installed but does not load here: {e}"
        ))),
        Err(e) => {
            let needs = if plan.libs.is_empty() {
                "the NVIDIA driver, and CUDA and cuDNN libraries on the library path (LD_LIBRARY_PATH or ldconfig), as --plugin-only was given"
            } else {
                "the NVIDIA driver (libcuda.so.1); the CUDA libraries are installed beside the plugin, where it finds them"
            };
            println!(
                "warning: the plugin does not load on this machine ({e}); it needs a GPU and {needs}"
            );
            Ok(())
        }
    }
}
