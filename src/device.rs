//! Devices: where tensors live and programs run.

use crate::backend::reference::ReferenceBackend;
use crate::backend::Backend;
use std::fmt;
use std::sync::{Arc, LazyLock};

/// A device: a backend instance that holds tensor data and runs programs.
///
/// `Device::default()` is chosen once per process: `LAZYXLA_BACKEND=reference`
/// forces the embedded reference interpreter.
///
/// ```
/// let d = lazyxla::Device::reference();
/// assert_eq!(d.name(), "reference");
/// ```
#[derive(Clone)]
pub struct Device(Arc<DeviceInner>);

struct DeviceInner {
    backend: Box<dyn Backend>,
    name: String,
}

static REFERENCE: LazyLock<Device> = LazyLock::new(|| Device::new(Box::new(ReferenceBackend)));

static DEFAULT: LazyLock<Device> = LazyLock::new(choose_default);

fn choose_default() -> Device {
    let forced = std::env::var("LAZYXLA_BACKEND").unwrap_or_default();
    match forced.as_str() {
        "" | "reference" => {
            if forced.is_empty() {
                eprintln!("lazyxla: using the reference backend (set LAZYXLA_BACKEND=reference to silence this line)");
            }
            Device::reference()
        }
        other => panic!("LAZYXLA_BACKEND={other} is not a known backend; use `reference`"),
    }
}

impl Device {
    pub(crate) fn new(backend: Box<dyn Backend>) -> Device {
        let name = backend.name();
        Device(Arc::new(DeviceInner { backend, name }))
    }

    /// The embedded reference backend (an ndarray interpreter on exact
    /// sizes); always available.
    pub fn reference() -> Device {
        REFERENCE.clone()
    }

    /// The XLA device through a PJRT plugin (see the crate docs for how
    /// plugins are found).
    pub fn pjrt() -> crate::Result<Device> {
        Err(crate::Error::Plugin(
            "the PJRT backend is not part of this build yet".into(),
        ))
    }

    /// The device's name (`reference`, `pjrt:cpu`, ..).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        self.0.backend.as_ref()
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
