//! Finding a PJRT plugin on the machine.
//!
//! Order: `LAZYXLA_PJRT_PLUGIN=/path/plugin.so` alone when set; otherwise
//! package directories, each searched for the files that pip installs:
//! `LAZYXLA_PJRT_PATH` first, then the plugins that `install_plugin` put
//! in the per-user cache ([`plugin_cache_dir`]), then the Python
//! environments on the machine (the site-packages that `python3` reports,
//! then the usual per-user and system locations). Python is never
//! required: it is asked once, with a timeout, only to learn where its
//! packages are.
//!
//! Among the plugins found: TPU before CUDA before CPU, and among CPU
//! plugins the newer XLA first (`lammps-jax-pjrt-cpu`, jaxlib 0.11.2's XLA,
//! before `xla-cpu-pjrt`); the first that loads wins, so a newer plugin
//! that fails to load falls back to the older one. One client per plugin
//! per process. `Device::default()` is `LAZYXLA_BACKEND=reference|pjrt`,
//! else XLA when a plugin loads, else the reference backend (stderr says
//! which and why).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The kind of device a plugin drives, as `PJRT_DEVICE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Cpu,
    Cuda,
    Tpu,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "CPU",
            Kind::Cuda => "CUDA",
            Kind::Tpu => "TPU",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        match s.to_ascii_uppercase().as_str() {
            "CPU" => Some(Kind::Cpu),
            "CUDA" | "GPU" => Some(Kind::Cuda),
            "TPU" => Some(Kind::Tpu),
            _ => None,
        }
    }
}

/// Where pip puts each plugin, relative to a package directory. The order
/// is the preference when `PJRT_DEVICE` is unset: accelerators first;
/// among CPU plugins the newer XLA first. `lammps-jax-pjrt-cpu` 0.11.2 is
/// XLA's CPU plugin as jaxlib 0.11.2 builds it (C API 0.115); its compiler
/// runs lazyxla's step programs 10-25% faster than the XLA of
/// `xla-cpu-pjrt` 0.0.1 (C API 0.81), which stays supported and tested
/// (benches/README.md, "Plugins").
pub(crate) const PLUGIN_FILES: &[(Kind, &str)] = &[
    (Kind::Tpu, "libtpu/libtpu.so"),
    (Kind::Cuda, "jax_plugins/xla_cuda13/xla_cuda_plugin.so"),
    (Kind::Cuda, "jax_plugins/xla_cuda12/xla_cuda_plugin.so"),
    (Kind::Cpu, "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"),
    (Kind::Cpu, "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"),
];

/// The one command that installs the CPU plugin (from lazyxla's source
/// directory), and its Python equivalent.
pub(crate) const INSTALL_HINT: &str = "`cargo run --release --example install_plugin` once, in lazyxla's source directory (or `python3 -m pip install --no-deps lammps-jax-pjrt-cpu`)";

/// The per-user directory where `install_plugin` puts plugins, each in a
/// directory of its own laid out as pip would (`<dist>-<version>/...`):
/// `$XDG_CACHE_HOME/lazyxla/plugins` when `XDG_CACHE_HOME` is set (to an
/// absolute path), else `~/Library/Caches/lazyxla/plugins` on macOS,
/// `%LOCALAPPDATA%\lazyxla\plugins` on Windows and
/// `~/.cache/lazyxla/plugins` elsewhere. `None` without a home directory.
pub(crate) fn plugin_cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    cache_dir_for(
        std::env::consts::OS,
        var("XDG_CACHE_HOME"),
        var("HOME"),
        var("LOCALAPPDATA"),
    )
}

/// [`plugin_cache_dir`] for the operating system `os` (as
/// `std::env::consts::OS` names it) and the given variables.
fn cache_dir_for(
    os: &str,
    xdg_cache_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
    local_app_data: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    // The XDG base directory specification ignores a relative path.
    let base = match xdg_cache_home.map(PathBuf::from) {
        Some(x) if x.is_absolute() => x,
        _ => match os {
            "macos" => PathBuf::from(home?).join("Library").join("Caches"),
            "windows" => PathBuf::from(local_app_data?),
            _ => PathBuf::from(home?).join(".cache"),
        },
    };
    Some(base.join("lazyxla").join("plugins"))
}

/// The installed plugins' directories under `cache` (one per plugin and
/// version), by name; directories whose name starts with `.` are
/// installs in progress, not searched.
fn cache_package_dirs(cache: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The outcome of a search: the candidates found, in preference order, and
/// every directory looked in (for the error message).
pub(crate) struct Search {
    pub found: Vec<(Kind, PathBuf)>,
    pub looked_in: Vec<PathBuf>,
    /// `PJRT_DEVICE`, when set to a known kind.
    pub wanted: Option<Kind>,
    /// `PJRT_DEVICE`'s raw value when it names no known kind.
    pub bad_wanted: Option<String>,
}

/// Directories that may hold pip-installed packages, in search order,
/// without duplicates.
pub(crate) fn package_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(extra) = std::env::var_os("LAZYXLA_PJRT_PATH") {
        dirs.extend(std::env::split_paths(&extra).filter(|p| !p.as_os_str().is_empty()));
    }
    if let Some(cache) = plugin_cache_dir() {
        dirs.extend(cache_package_dirs(&cache));
    }
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(prefix) = std::env::var_os(var) {
            dirs.extend(python_lib_dirs(&PathBuf::from(prefix).join("lib")));
        }
    }
    dirs.extend(python_reported_dirs());
    if let Some(home) = std::env::var_os("HOME") {
        dirs.extend(python_lib_dirs(&PathBuf::from(home).join(".local/lib")));
    }
    for root in ["/usr/local/lib", "/usr/lib", "/opt/conda/lib"] {
        dirs.extend(python_lib_dirs(Path::new(root)));
    }
    let mut unique = Vec::with_capacity(dirs.len());
    for d in dirs {
        if !unique.contains(&d) {
            unique.push(d);
        }
    }
    unique
}

/// `<lib>/python3*/site-packages` and `<lib>/python3*/dist-packages`.
fn python_lib_dirs(lib: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(lib) else {
        return out;
    };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        for sub in ["site-packages", "dist-packages"] {
            let d = p.join(sub);
            if d.is_dir() {
                out.push(d);
            }
        }
    }
    out
}

/// The package directories `python3` reports (site-packages, user site,
/// `sys.path`), asked once per process with a 3 s timeout; empty when
/// there is no `python3` on `PATH` or it does not answer in time.
fn python_reported_dirs() -> Vec<PathBuf> {
    static DIRS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    DIRS.get_or_init(|| {
        // `-S` skips the site hooks at startup (faster); `site` is imported
        // explicitly for its directory functions.
        let script = "import site,sys\n\
                      p=list(getattr(site,'getsitepackages',lambda:[])())\n\
                      p.append(site.getusersitepackages())\n\
                      p+=sys.path\n\
                      print('\\n'.join(x for x in p if x))";
        let Ok(mut child) = std::process::Command::new("python3")
            .args(["-S", "-c"])
            .arg(script)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
        else {
            return Vec::new();
        };
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() < Duration::from_secs(3) => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Vec::new();
                }
            }
        }
        let mut out = String::new();
        if let Some(mut s) = child.stdout.take() {
            use std::io::Read;
            let _ = s.read_to_string(&mut out);
        }
        out.lines()
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .collect()
    })
    .clone()
}

/// Searches the package directories for plugins.
pub(crate) fn search() -> Search {
    let looked_in = package_dirs();
    let (wanted, bad_wanted) = match std::env::var("PJRT_DEVICE") {
        Ok(v) if !v.is_empty() => match Kind::parse(&v) {
            Some(k) => (Some(k), None),
            None => (None, Some(v)),
        },
        _ => (None, None),
    };
    let found = plugins_in(&looked_in, wanted);
    Search {
        found,
        looked_in,
        wanted,
        bad_wanted,
    }
}

/// The plugins in `dirs` (of kind `wanted` only, when given), in
/// preference order: by [`PLUGIN_FILES`]' order, then by directory.
fn plugins_in(dirs: &[PathBuf], wanted: Option<Kind>) -> Vec<(Kind, PathBuf)> {
    let mut found: Vec<(Kind, PathBuf)> = Vec::new();
    for (kind, rel) in PLUGIN_FILES {
        if wanted.is_some_and(|w| w != *kind) {
            continue;
        }
        for dir in dirs {
            let p = dir.join(rel);
            if p.is_file() && !found.iter().any(|(_, q)| q == &p) {
                found.push((*kind, p));
            }
        }
    }
    found
}

/// The message for "no plugin found": where it looked and how to install one.
pub(crate) fn not_found_message(s: &Search) -> String {
    let cache = plugin_cache_dir().map_or_else(
        || "(no home directory, so no plugin cache)".to_string(),
        |d| format!("{} (install_plugin's cache)", d.display()),
    );
    let mut m = String::from("no PJRT plugin found");
    if let Some(k) = s.wanted {
        m.push_str(&format!(" for PJRT_DEVICE={}", k.name()));
    }
    m.push_str(". Looked for ");
    m.push_str(
        &PLUGIN_FILES
            .iter()
            .map(|(_, r)| *r)
            .collect::<Vec<_>>()
            .join(", "),
    );
    m.push_str(" in: ");
    m.push_str(&cache);
    for p in &s.looked_in {
        m.push_str(", ");
        m.push_str(&p.display().to_string());
    }
    m.push_str(&format!(
        ". Install the CPU plugin with {INSTALL_HINT}, or point LAZYXLA_PJRT_PLUGIN at a plugin .so (LAZYXLA_PJRT_PATH=DIR adds a directory that holds plugins as pip installs them)"
    ));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newer_cpu_plugin_is_preferred_in_any_directory() {
        let root = std::env::temp_dir().join(format!("lazyxla-discover-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        let touch = |dir: &Path, rel: &str| {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
            p
        };
        let old = touch(&a, "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so");
        let new = touch(&b, "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so");
        let found = plugins_in(&[a.clone(), b.clone()], None);
        assert_eq!(
            found,
            vec![(Kind::Cpu, new.clone()), (Kind::Cpu, old.clone())]
        );
        // Either alone is found; `PJRT_DEVICE=CUDA` keeps neither.
        assert_eq!(
            plugins_in(std::slice::from_ref(&a), Some(Kind::Cpu)),
            vec![(Kind::Cpu, old)]
        );
        assert!(plugins_in(&[a, b], Some(Kind::Cuda)).is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_plugin_cache_follows_each_platforms_convention() {
        let s = |v: &str| Some(std::ffi::OsString::from(v));
        let p = |v: &str| Some(PathBuf::from(v));
        // XDG_CACHE_HOME wins on every platform when absolute.
        assert_eq!(
            cache_dir_for("linux", s("/x"), s("/home/u"), None),
            p("/x/lazyxla/plugins")
        );
        assert_eq!(
            cache_dir_for("macos", s("/x"), s("/Users/u"), None),
            p("/x/lazyxla/plugins")
        );
        // A relative one is ignored, as the XDG specification says.
        assert_eq!(
            cache_dir_for("linux", s("rel"), s("/home/u"), None),
            p("/home/u/.cache/lazyxla/plugins")
        );
        assert_eq!(
            cache_dir_for("macos", None, s("/Users/u"), None),
            p("/Users/u/Library/Caches/lazyxla/plugins")
        );
        assert_eq!(
            cache_dir_for("windows", None, None, s("/appdata")),
            p("/appdata/lazyxla/plugins")
        );
        assert_eq!(cache_dir_for("linux", None, None, None), None);
    }

    #[test]
    fn installed_plugins_are_found_and_installs_in_progress_are_not() {
        let root = std::env::temp_dir().join(format!("lazyxla-cache-{}", std::process::id()));
        let so = "lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so";
        for dir in [
            "lammps-jax-pjrt-cpu-0.11.2",
            ".partial-lammps-jax-pjrt-cpu-0.11.2-7",
        ] {
            let p = root.join(dir).join(so);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
        }
        std::fs::write(root.join("a-file"), b"").unwrap();
        let dirs = cache_package_dirs(&root);
        assert_eq!(dirs, vec![root.join("lammps-jax-pjrt-cpu-0.11.2")]);
        assert_eq!(
            plugins_in(&dirs, None),
            vec![(Kind::Cpu, root.join("lammps-jax-pjrt-cpu-0.11.2").join(so))]
        );
        assert!(cache_package_dirs(&root.join("missing")).is_empty());
        let _ = std::fs::remove_dir_all(&root);
    }
}
