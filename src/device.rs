//! Devices: where tensors live and programs run.

use crate::backend::group::{Group, Placement};
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
    /// For a replicated device, the device of each replica; else empty.
    members: Vec<Device>,
}

static REFERENCE: LazyLock<Device> =
    LazyLock::new(|| Device::new(Arc::new(ReferenceBackend::default())));

/// The reference backend running programs after the lowering passes
/// (`debug::reference_after_passes`).
static REFERENCE_AFTER_PASSES: LazyLock<Device> =
    LazyLock::new(|| Device::new(Arc::new(ReferenceBackend::after_passes())));

/// The device of `debug::reference_after_passes`.
pub(crate) fn reference_after_passes() -> Device {
    REFERENCE_AFTER_PASSES.clone()
}

/// The reference devices: `Device::reference()` first, as many as the
/// CPU device count ([`set_cpu_device_count`]; a bad `LAZYXLA_CPU_DEVICES`
/// is reported when a PJRT client is made, and leaves one here).
static REFERENCE_DEVICES: LazyLock<Vec<Device>> = LazyLock::new(|| {
    let n = crate::backend::cpu_devices::fixed().map_or(1, |(n, _)| n);
    let mut all = vec![REFERENCE.clone()];
    all.extend((1..n).map(|k| Device::new(Arc::new(ReferenceBackend::device(k)))));
    all
});

static DEFAULT: LazyLock<Device> = LazyLock::new(choose_default);

/// PJRT devices by canonical plugin path: one client per plugin per
/// process, and a device per addressable device of that client (the
/// first is [`Device::pjrt`]'s).
static PJRT: LazyLock<Mutex<HashMap<PathBuf, Vec<Device>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The identities of a group's devices, and whether it is an SPMD one.
type GroupKey = (Vec<usize>, bool);

/// Replicated (and SPMD) devices by the identities of their members, so that the
/// same devices give the same replicated device (and compiled programs).
static REPLICATED: LazyLock<Mutex<HashMap<GroupKey, Device>>> =
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

/// Registers the devices of a new PJRT client under its plugin's path and
/// returns the first (the one `pjrt_from` and `pjrt_distributed` give).
fn register_client(
    cache: &mut HashMap<PathBuf, Vec<Device>>,
    key: PathBuf,
    path: &Path,
    backends: Vec<PjrtBackend>,
) -> crate::Result<Device> {
    let all: Vec<Device> = backends
        .into_iter()
        .map(|b| Device::new(Arc::new(b)))
        .collect();
    let first = all.first().cloned().ok_or_else(|| {
        crate::Error::Plugin(format!(
            "PJRT plugin {}: the client has no devices",
            path.display()
        ))
    })?;
    cache.insert(key, all);
    Ok(first)
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
                    .find(|(_, v)| v[0].same(&d))
                    .map(|(p, _)| p.display().to_string())
                    .unwrap_or_default();
                eprintln!(
                    "lazyxla: using XLA ({}) through the PJRT plugin {path} (set LAZYXLA_BACKEND=reference for the reference backend)",
                    d.name()
                );
                d
            }
            Err(e) => {
                eprintln!("lazyxla: {}", reference_fallback_line(&e));
                Device::reference()
            }
        },
        other => {
            panic!("LAZYXLA_BACKEND={other} is not a known backend; use `reference` or `pjrt`")
        }
    }
}

/// The stderr line when the default device falls back to the reference
/// backend: how to get a plugin when none was found, else why none
/// loaded; and how to silence the line.
fn reference_fallback_line(e: &crate::Error) -> String {
    let found_none = std::env::var_os("LAZYXLA_PJRT_PLUGIN").is_none_or(|p| p.is_empty())
        && discover::search().found.is_empty();
    if found_none {
        format!(
            "no PJRT plugin found, so running on the reference backend (correct, but slow); to run on XLA, install a plugin with {} (LAZYXLA_BACKEND=reference silences this line)",
            discover::INSTALL_HINT
        )
    } else {
        format!(
            "running on the reference backend, as no PJRT plugin loads: {e} (LAZYXLA_BACKEND=reference silences this line)"
        )
    }
}

impl Device {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Device {
        let name = backend.name();
        Device(Arc::new(DeviceInner {
            backend,
            name,
            members: Vec::new(),
        }))
    }

    /// The embedded reference backend (an ndarray interpreter on exact
    /// sizes); always available.
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// let d = Device::reference();
    /// let t = d.scoped(|| Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().sum());
    /// assert_eq!(t.item::<f32>().unwrap(), 3.0);
    /// ```
    pub fn reference() -> Device {
        REFERENCE.clone()
    }

    /// The XLA device through a PJRT plugin.
    ///
    /// The plugin is `LAZYXLA_PJRT_PLUGIN=/path/plugin.so` when that is
    /// set; otherwise the first one that loads among those found in
    /// package directories laid out as pip installs them: the directories
    /// in `LAZYXLA_PJRT_PATH` (colon-separated) first; then the plugins
    /// that `cargo run --release --example install_plugin` installed in
    /// [`Device::plugin_cache_dir`]; then the Python environments on the
    /// machine (`$VIRTUAL_ENV`, `$CONDA_PREFIX`, the site-packages that
    /// `python3` reports, and the per-user and system
    /// `python3*/site-packages` and `dist-packages`):
    /// `libtpu/libtpu.so`, `jax_plugins/xla_cuda13/xla_cuda_plugin.so`,
    /// `jax_plugins/xla_cuda12/xla_cuda_plugin.so`,
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
    ///
    /// ```
    /// match lazyxla::Device::pjrt() {
    ///     Ok(d) => println!("XLA: {}", d.name()),
    ///     Err(e) => println!("no plugin: {e}"),
    /// }
    /// ```
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

    /// The per-user directory where `cargo run --release --example
    /// install_plugin` puts PJRT plugins (one directory per plugin and
    /// version, laid out as pip installs them), searched by
    /// [`Device::pjrt`]: `$XDG_CACHE_HOME/lazyxla/plugins` when
    /// `XDG_CACHE_HOME` is an absolute path, else
    /// `~/Library/Caches/lazyxla/plugins` on macOS,
    /// `%LOCALAPPDATA%\lazyxla\plugins` on Windows and
    /// `~/.cache/lazyxla/plugins` elsewhere. `None` when there is no home
    /// directory to put it in.
    ///
    /// ```
    /// if let Some(dir) = lazyxla::Device::plugin_cache_dir() {
    ///     assert!(dir.ends_with("lazyxla/plugins"));
    ///     println!("install_plugin puts plugins in {}", dir.display());
    /// }
    /// ```
    pub fn plugin_cache_dir() -> Option<PathBuf> {
        discover::plugin_cache_dir()
    }

    /// The XLA device through the PJRT plugin at `path` (created once per
    /// process and plugin).
    ///
    /// # Errors
    ///
    /// [`Error::Plugin`](crate::Error::Plugin) with the plugin's path, its C
    /// API version when it could be read, and the reason.
    ///
    /// ```
    /// let e = lazyxla::Device::pjrt_from("/nonexistent/plugin.so").unwrap_err();
    /// assert!(e.to_string().contains("/nonexistent/plugin.so"));
    /// ```
    pub fn pjrt_from(path: impl AsRef<Path>) -> crate::Result<Device> {
        let path = path.as_ref();
        let key = std::fs::canonicalize(path).map_err(|e| {
            crate::Error::Plugin(format!("PJRT plugin {}: cannot open: {e}", path.display()))
        })?;
        let mut cache = PJRT.lock();
        if let Some(d) = cache.get(&key) {
            return Ok(d[0].clone());
        }
        let backends = PjrtBackend::open_all(path)?;
        register_client(&mut cache, key, path, backends)
    }

    /// The XLA device of the PJRT plugin at `path` as process `node_id` of
    /// `num_nodes` of one job spanning several hosts: the client is
    /// created with the create options `node_id` and `num_nodes` and
    /// with `store`'s key-value callbacks, through which the GPU plugin's
    /// processes find each other (see DESIGN.md "Several devices"). It
    /// must be the first use of that plugin in the process (one client
    /// per plugin per process); [`devices`] then lists this host's
    /// devices.
    ///
    /// # Errors
    ///
    /// [`Error::Plugin`](crate::Error::Plugin) when a client of that
    /// plugin exists already, or the plugin refuses the options (the CPU
    /// plugins run no job across processes: the 0.115 one rejects
    /// `node_id`; the 0.81 one ignores it and calls no callback).
    pub fn pjrt_distributed(
        path: impl AsRef<Path>,
        node_id: usize,
        num_nodes: usize,
        store: Arc<dyn crate::backend::pjrt::ffi::KeyValueStore>,
    ) -> crate::Result<Device> {
        let path = path.as_ref();
        let key = std::fs::canonicalize(path).map_err(|e| {
            crate::Error::Plugin(format!("PJRT plugin {}: cannot open: {e}", path.display()))
        })?;
        if node_id >= num_nodes {
            return Err(crate::Error::Plugin(format!(
                "node {node_id} of {num_nodes}: node ids run from 0 to {}",
                num_nodes.saturating_sub(1)
            )));
        }
        let mut cache = PJRT.lock();
        if cache.contains_key(&key) {
            return Err(crate::Error::Plugin(format!(
                "PJRT plugin {}: its client exists already in this process; call Device::pjrt_distributed before any other use of the plugin",
                path.display()
            )));
        }
        let backends = PjrtBackend::open_distributed(path, node_id, num_nodes, store)?;
        register_client(&mut cache, key, path, backends)
    }

    /// The device's name (`reference`, `pjrt:cpu`, ..).
    ///
    /// ```
    /// assert_eq!(lazyxla::Device::reference().name(), "reference");
    /// ```
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

/// The devices of the default device's backend, the default device's
/// own first: every addressable device of its PJRT client, or the
/// reference devices. A CPU client and the reference backend have one
/// device unless [`set_cpu_device_count`] or `LAZYXLA_CPU_DEVICES` asks for
/// more; a GPU plugin's client has every GPU it sees. Tensors can live on
/// any of them; [`Device::replicated`] runs one program on several at once.
///
/// ```
/// lazyxla::set_cpu_device_count(4).unwrap();
/// let devices = lazyxla::Device::reference().scoped(lazyxla::devices);
/// assert_eq!(devices[0].name(), "reference");
/// assert_eq!(devices.len(), 4);
/// ```
pub fn devices() -> Vec<Device> {
    let d = Device::default();
    let d = d.0.members.first().cloned().unwrap_or(d);
    peers(&d).unwrap_or_else(|| vec![d])
}

/// Asks for `n` CPU devices: the PJRT CPU client's devices and the
/// reference devices, which are otherwise one, as in JAX and PyTorch/XLA
/// (`LAZYXLA_CPU_DEVICES=n` asks the same from outside the program; this
/// call takes precedence). On CPU the devices share the machine's cores:
/// they are for testing data-parallel code ([`Device::replicated`],
/// `parallel::DataParallel`) that runs on several GPUs, not for
/// speed; each extra device also adds a thread to the plugin's pools.
///
/// The count is fixed when the first CPU client or reference device group
/// is made, so call this first thing in `main`.
///
/// # Errors
///
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when `n` is
/// 0 or above 4096, or when the devices were already made with another
/// count (the message names both).
///
/// ```
/// lazyxla::set_cpu_device_count(2).unwrap();
/// let devices = lazyxla::Device::reference().scoped(lazyxla::devices);
/// assert_eq!(devices.len(), 2);
/// assert!(lazyxla::set_cpu_device_count(2).is_ok());
/// let e = lazyxla::set_cpu_device_count(8).unwrap_err().to_string();
/// assert!(e.contains("8 CPU devices") && e.contains("already has 2"), "{e}");
/// ```
pub fn set_cpu_device_count(n: usize) -> crate::Result<()> {
    crate::backend::cpu_devices::ask(n)
}

/// Fixes how the PJRT CPU client runs programs: every one on the
/// plugin's worker threads, returning from the step's sync at once
/// (`true`, asynchronous dispatch, as in JAX), or every one on the thread
/// that syncs, returning when it is done (`false`, inline).
/// `LAZYXLA_CPU_ASYNC_DISPATCH=1` or `=0` asks the same from outside the
/// program (`auto`, or unset, keeps the default); this call takes
/// precedence.
///
/// By default a one-device CPU client runs short programs inline (under
/// 1 ms the last time they ran) and hands longer ones to a thread of
/// lazyxla's, whose results wait for them on first use. Inline skips
/// handing a program to a worker and waking up again for the read: the
/// detector of the benchmarks takes about a third less time a step. A
/// long program run inline would hold up the recording of the next step,
/// and its temporaries would come from the main thread's `malloc` arena,
/// which glibc trims and grows again every step (an MLP step of 3 ms took
/// 30–48% longer). Asking for plain inline dispatch after the client
/// exists keeps every later program inline.
///
/// With several CPU devices dispatch is always asynchronous, since a
/// program's replicas must run at the same time; like JAX's
/// `jax_cpu_enable_async_dispatch`, the choice is for one-device
/// processes. It is fixed when the CPU client is made, so call this first
/// thing in `main`. Other plugins (GPUs) always dispatch asynchronously;
/// so does a CPU plugin too old to know the option (`xla-cpu-pjrt`).
///
/// # Errors
///
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the CPU
/// client already exists and dispatches the other way (the message says
/// how it dispatches, and why when it has several devices).
///
/// ```
/// lazyxla::set_cpu_async_dispatch(false).unwrap();
/// let x = lazyxla::Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let y = &x * 3.0;
/// lazyxla::mark_step().unwrap(); // on a CPU plugin, returns with the step done
/// assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
/// ```
pub fn set_cpu_async_dispatch(enabled: bool) -> crate::Result<()> {
    crate::backend::cpu_dispatch::ask(enabled)
}

/// The devices of `d`'s group (one PJRT client, or the reference devices),
/// if it belongs to one.
fn peers(d: &Device) -> Option<Vec<Device>> {
    if REFERENCE_DEVICES.iter().any(|r| r.same(d)) {
        return Some(REFERENCE_DEVICES.clone());
    }
    PJRT.lock()
        .values()
        .find(|all| all.iter().any(|x| x.same(d)))
        .cloned()
}

impl Device {
    /// A device that runs every program on `devices` at once, as one
    /// replica per device (XLA's replica mode: one program compiled for
    /// `devices.len()` replicas). A tensor on it holds one value per
    /// replica; ops run on every replica, the collectives
    /// ([`Tensor::all_reduce`](crate::Tensor::all_reduce), ..) combine
    /// them, and reading a value reads the first replica's. Host data
    /// uploaded to it (`from_vec_on`, `to_device`) is the same on every
    /// replica; `lazyxla::parallel::shard` gives each its own part. The same devices give the same replicated device.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when
    /// `devices` is empty, names a device twice (the message names the
    /// replica count and the number of distinct devices), or mixes devices
    /// that do not belong to one group of [`devices`].
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// lazyxla::set_cpu_device_count(2).unwrap();
    /// let devices = Device::reference().scoped(lazyxla::devices);
    /// let r = Device::replicated(&devices[..2]).unwrap();
    /// let x = Tensor::from_vec_on(vec![1.0f32, 2.0], &[2], &r).unwrap();
    /// let total = r.scoped(|| x.all_reduce(lazyxla::parallel::ReduceOp::Sum));
    /// assert_eq!(total.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    /// ```
    pub fn replicated(devices: &[Device]) -> crate::Result<Device> {
        Device::group(devices, false, "replicated")
    }

    /// The device of SPMD programs over `devices` (a mesh's, in order):
    /// partition `p` runs on `devices[p]`, and a value on it is split
    /// over them by its sharding (the `sharding` module). The same devices
    /// give the same device. Errors as [`Device::replicated`].
    pub(crate) fn spmd(devices: &[Device], op: &'static str) -> crate::Result<Device> {
        Device::group(devices, true, op)
    }

    /// A replicated (`partitioned` false) or SPMD device over `devices`.
    fn group(devices: &[Device], partitioned: bool, op: &'static str) -> crate::Result<Device> {
        let invalid = |m: String| crate::Error::invalid(op, m);
        let Some(first) = devices.first() else {
            return Err(invalid("no devices given; pass at least one".into()));
        };
        let names = || {
            devices
                .iter()
                .map(|d| d.name().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut distinct: Vec<&Device> = Vec::new();
        for d in devices {
            if !d.0.members.is_empty() {
                return Err(invalid(format!(
                    "{} is already a replicated device; pass its devices ({})",
                    d.name(),
                    d.0.members
                        .iter()
                        .map(|m| m.name().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            if !distinct.iter().any(|x| x.same(d)) {
                distinct.push(d);
            }
        }
        if distinct.len() != devices.len() {
            let what = if partitioned {
                "mesh positions"
            } else {
                "replicas"
            };
            return Err(invalid(format!(
                "{} {what} need {} distinct devices, but {} are distinct ({}); name each device once",
                devices.len(),
                devices.len(),
                distinct.len(),
                names()
            )));
        }
        let group = peers(first).ok_or_else(|| {
            invalid(format!(
                "{} is not one of `lazyxla::devices()`; replicate devices from that list",
                first.name()
            ))
        })?;
        if let Some(d) = devices.iter().find(|d| !group.iter().any(|g| g.same(d))) {
            return Err(invalid(format!(
                "{} and {} are not devices of one client; replicas must be ({})",
                first.name(),
                d.name(),
                names()
            )));
        }
        let key = (
            devices.iter().map(Device::id).collect::<Vec<usize>>(),
            partitioned,
        );
        let mut cache = REPLICATED.lock();
        if let Some(d) = cache.get(&key) {
            return Ok(d.clone());
        }
        let placement = match partitioned {
            true => Placement::Mesh(devices.len()),
            false => Placement::Replicas(devices.len()),
        };
        let backend: Arc<dyn Backend> = if REFERENCE_DEVICES.iter().any(|r| r.same(first)) {
            let index = |d: &Device| {
                REFERENCE_DEVICES
                    .iter()
                    .position(|r| r.same(d))
                    .unwrap_or(0)
            };
            let members = devices
                .iter()
                .map(|d| ReferenceBackend::device(index(d)))
                .collect();
            Arc::new(Group::new(members, placement)?)
        } else {
            let backends = devices
                .iter()
                .map(|d| {
                    d.backend()
                        .as_any()
                        .and_then(|a| a.downcast_ref::<PjrtBackend>())
                        .ok_or_else(|| invalid(format!("{} is not a PJRT device", d.name())))
                })
                .collect::<crate::Result<Vec<&PjrtBackend>>>()?;
            Arc::new(Group::new(
                PjrtBackend::group_members(&backends)?,
                placement,
            )?)
        };
        let name = backend.name();
        let d = Device(Arc::new(DeviceInner {
            backend,
            name,
            members: devices.to_vec(),
        }));
        cache.insert(key, d.clone());
        Ok(d)
    }

    /// How many replicas run each program on this device: 1, or the
    /// number of devices of a [`Device::replicated`] one.
    ///
    /// ```
    /// assert_eq!(lazyxla::Device::reference().replica_count(), 1);
    /// ```
    pub fn replica_count(&self) -> usize {
        self.backend().placement().replicas()
    }

    /// The device of each replica: the devices of a
    /// [`Device::replicated`] one, else this device alone.
    ///
    /// ```
    /// let d = lazyxla::Device::reference();
    /// assert_eq!(d.replica_devices().len(), d.replica_count());
    /// ```
    pub fn replica_devices(&self) -> Vec<Device> {
        if self.0.members.is_empty() {
            vec![self.clone()]
        } else {
            self.0.members.clone()
        }
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
