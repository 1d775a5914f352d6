//! The logic of `examples/install_plugin.rs`: which wheels a target needs
//! on this platform, downloading one over HTTPS (the system's certificate
//! store, the standard proxy variables), checking it against the size and
//! sha256 pinned in `pins.rs`, and unpacking it into a directory laid out
//! as pip lays out site-packages, which discovery searches.
//!
//! `tests/install_plugin.rs` includes this file too, so everything here
//! that does not need the network is tested without it.

// The example and its tests each use a part of this module.
#![allow(dead_code)]

mod pins;

use sha2::{Digest, Sha256};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One wheel on PyPI, pinned: its distribution, version, the Linux
/// architecture it is for, where to get it, and what it must be.
#[derive(Debug)]
pub struct Wheel {
    /// The distribution's name (`lammps-jax-pjrt-cpu`).
    pub dist: &'static str,
    /// Its version.
    pub version: &'static str,
    /// The Linux architecture, as `std::env::consts::ARCH` names it.
    pub arch: &'static str,
    /// The file's URL on files.pythonhosted.org.
    pub url: &'static str,
    /// The file's size in bytes.
    pub size: u64,
    /// The file's sha256, lowercase hex.
    pub sha256: &'static str,
}

impl Wheel {
    /// The wheel's file name (the last part of its URL).
    pub fn file_name(&self) -> &'static str {
        self.url.rsplit('/').next().unwrap_or(self.url)
    }
}

/// What to install: the CPU plugin, or a CUDA plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// XLA's CPU plugin.
    Cpu,
    /// JAX's PJRT plugin for CUDA 12 (`jax-cuda12-pjrt`).
    Cuda12,
    /// JAX's PJRT plugin for CUDA 13 (`jax-cuda13-pjrt`).
    Cuda13,
}

impl Target {
    /// The target of `--gpu VALUE`.
    pub fn from_gpu_flag(value: &str) -> Result<Target, InstallError> {
        match value {
            "cuda12" => Ok(Target::Cuda12),
            "cuda13" => Ok(Target::Cuda13),
            other => Err(InstallError::Usage(format!(
                "--gpu {other}: the GPU plugins are `cuda12` and `cuda13` (JAX's CUDA PJRT plugins; take the one matching your NVIDIA driver: `nvidia-smi` prints the newest CUDA it supports)"
            ))),
        }
    }
}

/// Where a plugin file is, relative to the directory a wheel unpacks
/// into; the same paths discovery looks for (`src/backend/pjrt/discover.rs`).
fn plugin_file_of(dist: &str) -> Option<&'static str> {
    match dist {
        "lammps-jax-pjrt-cpu" => Some("lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"),
        "xla-cpu-pjrt" => Some("xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"),
        "jax-cuda12-pjrt" => Some("jax_plugins/xla_cuda12/xla_cuda_plugin.so"),
        "jax-cuda13-pjrt" => Some("jax_plugins/xla_cuda13/xla_cuda_plugin.so"),
        _ => None,
    }
}

/// The wheels one install downloads, and the directory (under the plugin
/// cache) they unpack into together.
#[derive(Debug)]
pub struct Plan {
    /// What is installed.
    pub target: Target,
    /// The plugin's wheel.
    pub plugin: &'static Wheel,
    /// NVIDIA's CUDA libraries, for a GPU plugin unless `--plugin-only`.
    pub libs: Vec<&'static Wheel>,
}

impl Plan {
    /// Every wheel, the plugin's first.
    pub fn wheels(&self) -> impl Iterator<Item = &'static Wheel> + '_ {
        std::iter::once(self.plugin).chain(self.libs.iter().copied())
    }

    /// The total download size in bytes.
    pub fn download_size(&self) -> u64 {
        self.wheels().map(|w| w.size).sum()
    }

    /// The name of the directory the wheels unpack into:
    /// `<dist>-<version>`, with `-plugin-only` for a GPU plugin without
    /// its libraries (so neither install replaces the other).
    pub fn dir_name(&self) -> String {
        let only = if self.target != Target::Cpu && self.libs.is_empty() {
            "-plugin-only"
        } else {
            ""
        };
        format!("{}-{}{only}", self.plugin.dist, self.plugin.version)
    }

    /// The plugin file, relative to the directory the wheels unpack into.
    pub fn plugin_file(&self) -> &'static str {
        plugin_file_of(self.plugin.dist).expect("every pinned plugin has a known file")
    }

    /// What the marker file of a finished install says: one line per
    /// wheel (distribution, version, sha256).
    fn marker(&self) -> String {
        self.wheels()
            .map(|w| format!("{} {} {}\n", w.dist, w.version, w.sha256))
            .collect()
    }
}

/// The marker file a finished install leaves in its directory.
pub const MARKER: &str = "lazyxla-install.txt";

/// The wheels to install for `target` on the platform `os`/`arch` (as
/// `std::env::consts` names them). `with_cuda_libs` adds NVIDIA's CUDA
/// library wheels to a GPU plugin.
pub fn plan(
    target: Target,
    os: &str,
    arch: &str,
    with_cuda_libs: bool,
) -> Result<Plan, InstallError> {
    let unsupported = |what: &str| {
        InstallError::Unsupported(format!(
            "no {what} is published for {os} {arch}: PyPI has PJRT plugin wheels for Linux on x86_64 and aarch64 only. lazyxla runs on its reference backend here; a PJRT plugin built for this machine can be used with LAZYXLA_PJRT_PLUGIN=/path/to/plugin"
        ))
    };
    if os != "linux" {
        return Err(unsupported("PJRT plugin wheel"));
    }
    let find = |dist: &str| {
        pins::WHEELS
            .iter()
            .find(|w| w.dist == dist && w.arch == arch)
    };
    let (plugin, libs): (&Wheel, &[&str]) = match target {
        // The newer XLA where it exists (x86_64), else the older plugin.
        Target::Cpu => (
            find("lammps-jax-pjrt-cpu")
                .or_else(|| find("xla-cpu-pjrt"))
                .ok_or_else(|| unsupported("XLA CPU plugin wheel"))?,
            &[],
        ),
        Target::Cuda12 => (
            find("jax-cuda12-pjrt").ok_or_else(|| unsupported("CUDA 12 plugin wheel"))?,
            pins::CUDA12_LIBS,
        ),
        Target::Cuda13 => (
            find("jax-cuda13-pjrt").ok_or_else(|| unsupported("CUDA 13 plugin wheel"))?,
            pins::CUDA13_LIBS,
        ),
    };
    let libs = if with_cuda_libs {
        libs.iter()
            .map(|d| find(d).ok_or_else(|| unsupported(&format!("{d} wheel"))))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    Ok(Plan {
        target,
        plugin,
        libs,
    })
}

/// Why an install failed; each message says what to do about it.
#[derive(Debug)]
pub enum InstallError {
    /// A bad command line.
    Usage(String),
    /// No wheel for this platform.
    Unsupported(String),
    /// The system's certificate store gave no certificate.
    Certificates(String),
    /// A proxy variable that is not a proxy URL.
    Proxy(String),
    /// The download failed: offline, a proxy or server that does not
    /// answer, a certificate not trusted, an HTTP error.
    Network {
        /// What was being downloaded.
        url: String,
        /// Why it failed, and what to check.
        reason: String,
    },
    /// The file is not the pinned one.
    Mismatch {
        /// The wheel's file name.
        file: String,
        /// The pinned size and sha256.
        expected: (u64, String),
        /// What arrived.
        actual: (u64, String),
    },
    /// A wheel that cannot be unpacked safely.
    BadWheel(String),
    /// A file-system error.
    Io(String, io::Error),
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::Usage(m)
            | InstallError::Unsupported(m)
            | InstallError::Certificates(m)
            | InstallError::Proxy(m)
            | InstallError::BadWheel(m) => f.write_str(m),
            InstallError::Network { url, reason } => {
                write!(f, "could not download {url}: {reason}")
            }
            InstallError::Mismatch {
                file,
                expected,
                actual,
            } => write!(
                f,
                "{file} is not the pinned wheel: expected {} bytes with sha256 {}, got {} bytes with sha256 {}. The file was deleted; run the installer again (a proxy or mirror that rewrites downloads gives this too)",
                expected.0, expected.1, actual.0, actual.1
            ),
            InstallError::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for InstallError {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> InstallError {
    let what = what.into();
    move |e| InstallError::Io(what, e)
}

/// The proxy variables ureq reads, in its order of preference.
const PROXY_VARS: &[&str] = &[
    "ALL_PROXY",
    "all_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
];

/// The host every pinned wheel is downloaded from.
pub const DOWNLOAD_HOST: &str = "files.pythonhosted.org";

/// True when the `NO_PROXY` list `no_proxy` (comma-separated, as curl
/// reads it: `*` for every host, `example.org` or `.example.org` for that
/// domain and its subdomains, an optional `:port` ignored) names `host`.
pub fn no_proxy_matches(no_proxy: &str, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    no_proxy.split(',').map(str::trim).any(|entry| {
        if entry == "*" {
            return true;
        }
        let entry = entry.rsplit_once(':').map_or(entry, |(h, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                entry
            }
        });
        let entry = entry.trim_start_matches('.').to_ascii_lowercase();
        !entry.is_empty() && (host == entry || host.ends_with(&format!(".{entry}")))
    })
}

/// The proxy the standard variables ask for to reach `host`
/// (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, in either case), or `None`
/// to connect directly: when none is set, or when `NO_PROXY` (or
/// `no_proxy`) names `host`. A variable that is set but is no proxy URL is
/// an error (ureq would silently connect directly).
pub fn proxy_from_env(host: &str) -> Result<Option<ureq::Proxy>, InstallError> {
    for var in ["NO_PROXY", "no_proxy"] {
        if std::env::var(var).is_ok_and(|v| no_proxy_matches(&v, host)) {
            return Ok(None);
        }
    }
    for var in PROXY_VARS {
        if let Ok(value) = std::env::var(var) {
            if !value.is_empty() && ureq::Proxy::new(&value).is_err() {
                return Err(InstallError::Proxy(format!(
                    "{var}={value} is not a proxy URL: write it as http://host:port (or unset {var} to connect directly)"
                )));
            }
        }
    }
    Ok(ureq::Proxy::try_from_env())
}

/// An HTTPS client that trusts the system's certificate store (so a
/// network that intercepts TLS with its own CA, added to that store,
/// works) and goes through `proxy` when given.
pub fn agent(proxy: Option<ureq::Proxy>) -> Result<ureq::Agent, InstallError> {
    let native = rustls_native_certs::load_native_certs();
    if native.certs.is_empty() {
        let errors: Vec<String> = native.errors.iter().map(|e| e.to_string()).collect();
        return Err(InstallError::Certificates(format!(
            "no certificate found in the system's certificate store{}: install your system's CA certificates (the `ca-certificates` package on Linux), or set SSL_CERT_FILE to a PEM file of trusted certificates",
            if errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", errors.join("; "))
            }
        )));
    }
    let roots: Vec<ureq::tls::Certificate<'static>> = native
        .certs
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::new_with_certs(&roots))
        .build();
    let config = ureq::Agent::config_builder()
        .tls_config(tls)
        .proxy(proxy)
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .user_agent(concat!(
            "lazyxla-install-plugin/",
            env!("CARGO_PKG_VERSION")
        ))
        .build();
    Ok(config.new_agent())
}

/// What a failed request means for the user.
fn network_reason(e: &ureq::Error, proxy: Option<&str>) -> String {
    let via = proxy.map_or_else(String::new, |p| format!(" through the proxy {p}"));
    let offline = format!(
        "the machine seems to be offline or cannot reach files.pythonhosted.org{via}. Check the connection (and HTTPS_PROXY / NO_PROXY), or download the wheel elsewhere and pass its directory with --from DIR"
    );
    let certificate = |e: &ureq::Error| {
        format!(
            "{e}: the server's certificate is not trusted by the system's certificate store. On a network that intercepts TLS, add its CA certificate to the system store (or point SSL_CERT_FILE at a PEM file holding it)"
        )
    };
    match e {
        ureq::Error::HostNotFound => format!("host not found: {offline}"),
        ureq::Error::ConnectionFailed | ureq::Error::Timeout(_) => {
            format!("{e}: {offline}")
        }
        // ureq reports a certificate rustls rejects as an I/O error.
        ureq::Error::Io(io) if io.to_string().contains("certificate") => certificate(e),
        ureq::Error::Io(_) => format!("{e}: {offline}"),
        ureq::Error::ConnectProxyFailed(m) => {
            format!("the proxy{via} refused the connection ({m}): check HTTPS_PROXY / NO_PROXY")
        }
        ureq::Error::StatusCode(code) => format!(
            "the server answered HTTP {code}{via}: the pinned URL may have moved; update the installer (scripts/pin_plugins.py regenerates its pins)"
        ),
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => certificate(e),
        other => format!("{other}: {offline}"),
    }
}

/// Downloads `wheel` into `dest` (a file), checking it against its pins
/// on the way; `progress` sees the bytes received so far.
pub fn download(
    agent: &ureq::Agent,
    wheel: &Wheel,
    dest: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<(), InstallError> {
    let proxy = agent.config().proxy().map(|p| p.uri().to_string());
    let network = |e: ureq::Error| InstallError::Network {
        url: wheel.url.to_string(),
        reason: network_reason(&e, proxy.as_deref()),
    };
    let response = agent.get(wheel.url).call().map_err(network)?;
    let body = response
        .into_body()
        .into_with_config()
        .limit(wheel.size.saturating_add(1))
        .reader();
    save_verified(body, wheel, dest, progress).map_err(|e| match e {
        InstallError::Io(what, io) if what.starts_with("reading") => InstallError::Network {
            url: wheel.url.to_string(),
            reason: format!(
                "the download broke off ({io}); run the installer again (the partial file was deleted)"
            ),
        },
        other => other,
    })
}

/// Copies `reader` into the new file `dest`, computing its size and
/// sha256; keeps the file only when both match `wheel`'s pins.
pub fn save_verified(
    mut reader: impl Read,
    wheel: &Wheel,
    dest: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<(), InstallError> {
    let result = (|| {
        let mut out = File::create(dest).map_err(io_err(format!("creating {}", dest.display())))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        loop {
            let k = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(InstallError::Io(format!("reading {}", wheel.url), e)),
            };
            hasher.update(&buf[..k]);
            out.write_all(&buf[..k])
                .map_err(io_err(format!("writing {}", dest.display())))?;
            n += k as u64;
            progress(n);
        }
        out.sync_all()
            .map_err(io_err(format!("writing {}", dest.display())))?;
        check(wheel, n, &hex(&hasher.finalize()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(dest);
    }
    result
}

/// Checks an existing file (`--from DIR`) against `wheel`'s pins.
pub fn verify_file(path: &Path, wheel: &Wheel) -> Result<(), InstallError> {
    let f = File::open(path).map_err(io_err(format!("opening {}", path.display())))?;
    let mut reader = BufReader::new(f);
    let mut hasher = Sha256::new();
    let n = io::copy(&mut reader, &mut hasher)
        .map_err(io_err(format!("reading {}", path.display())))?;
    check(wheel, n, &hex(&hasher.finalize())).map_err(|e| match e {
        InstallError::Mismatch {
            expected, actual, ..
        } => InstallError::Mismatch {
            file: path.display().to_string(),
            expected,
            actual,
        },
        other => other,
    })
}

fn check(wheel: &Wheel, size: u64, sha256: &str) -> Result<(), InstallError> {
    if size == wheel.size && sha256 == wheel.sha256 {
        Ok(())
    } else {
        Err(InstallError::Mismatch {
            file: wheel.file_name().to_string(),
            expected: (wheel.size, wheel.sha256.to_string()),
            actual: (size, sha256.to_string()),
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where a wheel's entry goes, relative to the install directory, as pip
/// puts it: `<name>.data/purelib/..` and `<name>.data/platlib/..` go to
/// the top; the other `.data` categories (scripts, headers, data) are
/// for Python environments and are skipped (`None`).
fn install_path(entry: &Path) -> Option<PathBuf> {
    let mut parts = entry.components();
    let first = parts.next()?.as_os_str().to_string_lossy().into_owned();
    if !first.ends_with(".data") {
        return Some(entry.to_path_buf());
    }
    match parts.next()?.as_os_str().to_str()? {
        "purelib" | "platlib" => Some(parts.as_path().to_path_buf()),
        _ => None,
    }
}

/// Unpacks the wheel `file` into the directory `root`, as pip would;
/// returns the number of files written. An entry whose path leaves
/// `root` makes the wheel bad.
pub fn unpack(file: &Path, root: &Path) -> Result<usize, InstallError> {
    let bad = |m: String| InstallError::BadWheel(format!("{}: {m}", file.display()));
    let f = File::open(file).map_err(io_err(format!("opening {}", file.display())))?;
    let mut zip = zip::ZipArchive::new(BufReader::new(f))
        .map_err(|e| bad(format!("not a wheel (zip) file: {e}")))?;
    let mut written = 0;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| bad(format!("entry {i}: {e}")))?;
        let name = entry.name().to_string();
        let enclosed = entry.enclosed_name().ok_or_else(|| {
            bad(format!(
                "the entry `{name}` would be written outside the install directory; not installed"
            ))
        })?;
        let Some(rel) = install_path(&enclosed) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let out = root.join(&rel);
        if entry.is_dir() {
            std::fs::create_dir_all(&out).map_err(io_err(format!("creating {}", out.display())))?;
            continue;
        }
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io_err(format!("creating {}", parent.display())))?;
        }
        let mut w = File::create(&out).map_err(io_err(format!("creating {}", out.display())))?;
        io::copy(&mut entry, &mut w).map_err(|e| bad(format!("unpacking `{name}`: {e}")))?;
        #[cfg(unix)]
        if let Some(mode) = entry.unix_mode() {
            use std::os::unix::fs::PermissionsExt;
            let mode = (mode & 0o777) | 0o600;
            std::fs::set_permissions(&out, std::fs::Permissions::from_mode(mode))
                .map_err(io_err(format!("setting the mode of {}", out.display())))?;
        }
        written += 1;
    }
    Ok(written)
}

/// Where each wheel comes from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// Downloaded by this client.
    Download(&'a ureq::Agent),
    /// Already downloaded into this directory (`--from DIR`), under the
    /// wheel's own file name.
    Dir(&'a Path),
}

/// What an install did.
#[derive(Debug)]
pub struct Installed {
    /// The directory the wheels were unpacked into.
    pub root: PathBuf,
    /// The plugin file in it.
    pub plugin: PathBuf,
    /// False when the same wheels were installed there already.
    pub fresh: bool,
}

/// Installs `plan` into `base/<plan.dir_name()>`: each wheel is fetched
/// (or taken from `--from`'s directory) and checked against its pins,
/// then unpacked into a hidden directory beside it, which replaces the
/// old install only once complete (discovery skips hidden directories).
/// Skips the work when the same wheels are installed there already,
/// unless `force`. `report` hears each step; `progress` the bytes of
/// the wheel being downloaded.
pub fn install(
    plan: &Plan,
    base: &Path,
    source: Source<'_>,
    force: bool,
    report: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Wheel, u64),
) -> Result<Installed, InstallError> {
    let root = base.join(plan.dir_name());
    let plugin = root.join(plan.plugin_file());
    let marker = plan.marker();
    if !force && is_installed(plan, base) {
        return Ok(Installed {
            root,
            plugin,
            fresh: false,
        });
    }
    std::fs::create_dir_all(base).map_err(io_err(format!("creating {}", base.display())))?;
    let pid = std::process::id();
    let partial = base.join(format!(".partial-{}-{pid}", plan.dir_name()));
    let _ = std::fs::remove_dir_all(&partial);
    let result = (|| {
        std::fs::create_dir_all(&partial)
            .map_err(io_err(format!("creating {}", partial.display())))?;
        for wheel in plan.wheels() {
            let (file, temporary) = match source {
                Source::Download(agent) => {
                    let file = base.join(format!(".download-{}-{pid}", wheel.file_name()));
                    report(&format!(
                        "downloading {} ({})",
                        wheel.file_name(),
                        megabytes(wheel.size)
                    ));
                    download(agent, wheel, &file, &mut |n| progress(wheel, n))?;
                    (file, true)
                }
                Source::Dir(dir) => {
                    let file = dir.join(wheel.file_name());
                    report(&format!("checking {}", file.display()));
                    verify_file(&file, wheel)?;
                    (file, false)
                }
            };
            report(&format!("unpacking {}", wheel.file_name()));
            let unpacked = unpack(&file, &partial);
            if temporary {
                let _ = std::fs::remove_file(&file);
            }
            unpacked?;
        }
        if !partial.join(plan.plugin_file()).is_file() {
            return Err(InstallError::BadWheel(format!(
                "{} holds no {}: not a plugin wheel lazyxla knows",
                plan.plugin.file_name(),
                plan.plugin_file()
            )));
        }
        std::fs::write(partial.join(MARKER), &marker).map_err(io_err(format!(
            "writing {}",
            partial.join(MARKER).display()
        )))?;
        replace_dir(&partial, &root)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    result.map(|()| Installed {
        root,
        plugin,
        fresh: true,
    })
}

/// True when `plan`'s wheels are installed in `base/<plan.dir_name()>`
/// already (its marker names the same wheels, and the plugin is there).
pub fn is_installed(plan: &Plan, base: &Path) -> bool {
    let root = base.join(plan.dir_name());
    root.join(plan.plugin_file()).is_file()
        && std::fs::read_to_string(root.join(MARKER)).is_ok_and(|m| m == plan.marker())
}

/// Moves the finished install `from` to `to`, replacing what is there.
fn replace_dir(from: &Path, to: &Path) -> Result<(), InstallError> {
    if to.exists() {
        let old = to.with_file_name(format!(
            ".old-{}-{}",
            to.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        std::fs::rename(to, &old).map_err(io_err(format!("moving {} aside", to.display())))?;
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(from, to).map_err(io_err(format!(
        "moving {} to {}",
        from.display(),
        to.display()
    )))
}

/// `n` bytes in MB, for messages.
pub fn megabytes(n: u64) -> String {
    format!("{:.1} MB", n as f64 / 1e6)
}
