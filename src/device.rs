//! Devices: where tensors live and programs run.

use crate::backend::pjrt::{discover, PjrtBackend};
use crate::backend::reference::ReferenceBackend;
use crate::backend::Backend;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

/// A device: a backend instance that holds tensor data and runs programs.
///
/// `Device::default()` is chosen once per process:
/// `LAZYXLA_BACKEND=reference` forces the embedded reference interpreter,
/// `LAZYXLA_BACKEND=pjrt` forces XLA (and panics with the reason when no
/// plugin loads); unset, XLA is used when a PJRT plugin loads, else the
/// reference backend, and one line on stderr says which.
///
/// Plugins are found as [`Device::pjrt`] describes.
///
/// ```
/// let d = lazyxla::Device::reference();
/// assert_eq!(d.name(), "reference");
/// ```
#[derive(Clone)]
pub struct Device(Arc<DeviceInner>);

struct DeviceInner {
    backend: Arc<dyn Backend>,
    name: String,
}

static REFERENCE: LazyLock<Device> = LazyLock::new(|| Device::new(Arc::new(ReferenceBackend)));

static DEFAULT: LazyLock<Device> = LazyLock::new(choose_default);

/// PJRT devices by canonical plugin path: one client per plugin per
/// process.
static PJRT: LazyLock<Mutex<HashMap<PathBuf, Device>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The plugin `Device::pjrt` tries first (see there).
pub(crate) fn plugin_path() -> crate::Result<PathBuf> {
    if let Some(p) = std::env::var_os("LAZYXLA_PJRT_PLUGIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let search = discover::search();
    search
        .found
        .first()
        .map(|(_, p)| p.clone())
        .ok_or_else(|| crate::Error::Plugin(discover::not_found_message(&search)))
}

fn choose_default() -> Device {
    let forced = std::env::var("LAZYXLA_BACKEND").unwrap_or_default();
    match forced.as_str() {
        "reference" => Device::reference(),
        "pjrt" | "xla" => match Device::pjrt() {
            Ok(d) => d,
            Err(e) => panic!("LAZYXLA_BACKEND={forced} but no PJRT plugin loads: {e}"),
        },
        "" => match Device::pjrt() {
            Ok(d) => {
                let path = PJRT
                    .lock()
                    .iter()
                    .find(|(_, v)| v.same(&d))
                    .map(|(p, _)| p.display().to_string())
                    .unwrap_or_default();
                eprintln!(
                    "lazyxla: using XLA ({}) through the PJRT plugin {path} (set LAZYXLA_BACKEND=reference for the reference backend)",
                    d.name()
                );
                d
            }
            Err(e) => {
                eprintln!("lazyxla: using the reference backend ({e})");
                Device::reference()
            }
        },
        other => {
            panic!("LAZYXLA_BACKEND={other} is not a known backend; use `reference` or `pjrt`")
        }
    }
}

impl Device {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Device {
        let name = backend.name();
        Device(Arc::new(DeviceInner { backend, name }))
    }

    /// The embedded reference backend (an ndarray interpreter on exact
    /// sizes); always available.
    pub fn reference() -> Device {
        REFERENCE.clone()
    }

    /// The XLA device through a PJRT plugin.
    ///
    /// The plugin is `LAZYXLA_PJRT_PLUGIN=/path/plugin.so` when that is
    /// set; otherwise the first one that loads among those pip installed in
    /// the Python environments on the machine (the directories in
    /// `LAZYXLA_PJRT_PATH`, colon-separated, first; then `$VIRTUAL_ENV`,
    /// `$CONDA_PREFIX`, the site-packages that `python3` reports, and the
    /// per-user and system `python3*/site-packages` and `dist-packages`):
    /// `libtpu/libtpu.so`, `jax_plugins/xla_cuda12/xla_cuda_plugin.so`,
    /// `lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so` (a newer, faster XLA
    /// CPU build), `xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so`, in that
    /// order of preference. `PJRT_DEVICE=CPU|CUDA|TPU` keeps only that kind. The
    /// device is created once per process and plugin.
    ///
    /// # Errors
    ///
    /// [`Error::Plugin`](crate::Error::Plugin): no plugin found (the message
    /// lists where it looked and the command that installs the CPU
    /// plugin), or none loads (each plugin's path, C API version and
    /// message).
    pub fn pjrt() -> crate::Result<Device> {
        if let Some(p) = std::env::var_os("LAZYXLA_PJRT_PLUGIN").filter(|p| !p.is_empty()) {
            return Device::pjrt_from(p);
        }
        let search = discover::search();
        if let Some(bad) = &search.bad_wanted {
            return Err(crate::Error::Plugin(format!(
                "PJRT_DEVICE={bad} is not one of CPU, CUDA, TPU"
            )));
        }
        if search.found.is_empty() {
            return Err(crate::Error::Plugin(discover::not_found_message(&search)));
        }
        let mut errors = Vec::new();
        for (_, path) in &search.found {
            match Device::pjrt_from(path) {
                Ok(d) => return Ok(d),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Err(crate::Error::Plugin(format!(
            "no PJRT plugin loads: {}",
            errors.join("; ")
        )))
    }

    /// The XLA device through the PJRT plugin at `path` (created once per
    /// process and plugin).
    ///
    /// # Errors
    ///
    /// [`Error::Plugin`](crate::Error::Plugin) with the plugin's path, its C
    /// API version when it could be read, and the reason.
    pub fn pjrt_from(path: impl AsRef<Path>) -> crate::Result<Device> {
        let path = path.as_ref();
        let key = std::fs::canonicalize(path).map_err(|e| {
            crate::Error::Plugin(format!("PJRT plugin {}: cannot open: {e}", path.display()))
        })?;
        let mut cache = PJRT.lock();
        if let Some(d) = cache.get(&key) {
            return Ok(d.clone());
        }
        let backend = PjrtBackend::open(path)?;
        let d = Device::new(Arc::new(backend));
        cache.insert(key, d.clone());
        Ok(d)
    }

    /// The device's name (`reference`, `pjrt:cpu`, ..).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Blocks until every program started on this device has finished, and
    /// returns the error of one that failed (PyTorch/XLA's
    /// `wait_device_ops`). `mark_step` only starts the step's program, so
    /// the host can record the next step while the device runs; reads wait
    /// by themselves, so this is needed only to time steps or to surface a
    /// device failure early.
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// let t = Tensor::ones(&[3], lazyxla::DType::F32) * 2.0;
    /// lazyxla::mark_step().unwrap();
    /// Device::default().synchronize().unwrap();
    /// # drop(t);
    /// ```
    pub fn synchronize(&self) -> crate::Result<()> {
        self.backend().synchronize()
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        self.0.backend.as_ref()
    }

    /// A new device whose backend is `wrap` applied to this one's (a
    /// different device: its programs are cached apart).
    pub(crate) fn wrapped<E>(
        &self,
        wrap: impl FnOnce(Arc<dyn Backend>) -> Result<Arc<dyn Backend>, E>,
    ) -> Result<Device, E> {
        wrap(self.0.backend.clone()).map(Device::new)
    }

    /// A process-unique identity, for cache keys.
    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as *const () as usize
    }

    pub(crate) fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

thread_local! {
    static SCOPED: std::cell::RefCell<Vec<Device>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Device {
    /// Runs `f` with this device as the default for constructors on the
    /// current thread (tests use it to run one body per backend).
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// let t = Device::reference().scoped(|| Tensor::zeros(&[2], lazyxla::DType::F32));
    /// assert_eq!(t.device().name(), "reference");
    /// ```
    pub fn scoped<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Pop;
        impl Drop for Pop {
            fn drop(&mut self) {
                SCOPED.with(|s| s.borrow_mut().pop());
            }
        }
        SCOPED.with(|s| s.borrow_mut().push(self.clone()));
        let _pop = Pop;
        f()
    }
}

impl Default for Device {
    /// The default device: the innermost [`Device::scoped`] one on this
    /// thread, else the process-wide one (see the type's docs).
    fn default() -> Device {
        SCOPED
            .with(|s| s.borrow().last().cloned())
            .unwrap_or_else(|| DEFAULT.clone())
    }
}

impl Device {
    /// [`Device::id`] of the default device, without a handle to it.
    pub(crate) fn default_id() -> usize {
        SCOPED
            .with(|s| s.borrow().last().map(Device::id))
            .unwrap_or_else(|| DEFAULT.id())
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.same(other)
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({})", self.name())
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
