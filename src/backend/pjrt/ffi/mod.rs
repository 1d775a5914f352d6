//! A small, safe layer over the PJRT C API: load a plugin, create a client,
//! compile StableHLO text, move buffers between host and device, execute.
//!
//! Ownership mirrors the C API: every `PJRT_*` object returned to us is owned
//! by exactly one Rust value and released in its `Drop`. Buffers and
//! executables hold an `Arc` to their client, so the client is destroyed only
//! after the last object created from it. Plugins are never unloaded.
//!
//! Every call that borrows host memory blocks until the plugin is done with
//! it (its events are awaited before returning), so no host memory is
//! borrowed past a call, except host memory given away on purpose: a lent
//! upload (`Client::buffer_from_lent_host`) owns its array until the
//! plugin's done event drops it (`buffer.rs`). Execution alone may run on: `execute_async` hands
//! back the results at once with an [`Event`] that fires when they are
//! computed; PJRT orders later uses of those buffers after it.

use std::collections::HashMap;
use std::mem::{size_of, ManuallyDrop};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use libloading::Library;

/// Fetches the function in slot `$name` of a plugin's `PJRT_Api` table, or a
/// [`PjrtError`] naming the function when the plugin's table is too short or
/// the slot is null. Defined before the child modules so they can use it.
macro_rules! api_fn {
    ($plugin:expr, $name:ident) => {
        $plugin.entry(
            ::std::mem::offset_of!(sys::Api, $name),
            stringify!($name),
            // SAFETY: `entry` calls this only after checking that the slot
            // lies inside the plugin's table; no reference to the (possibly
            // shorter) whole table is created.
            |api| unsafe { ::std::ptr::addr_of!((*api).$name).read() },
        )
    };
}

mod buffer;
mod client;
mod compile_options;
pub(crate) mod dispatch;
mod event;
mod executable;
mod guard;
mod kv;
mod replicas;
mod sys;

pub use buffer::{Buffer, LentBytes};
use client::ClientInner;
pub use client::{Client, OptionValue};
pub use compile_options::{CompileOptions, XLA_WORKAROUNDS};
pub use event::Event;
pub use executable::Executable;
pub use kv::{KeyValueStore, KvError};

/// An error reported by a PJRT plugin, or by this layer before calling one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PjrtError {
    /// Human-readable reason. For plugin errors: the name of the failing C API
    /// function, then the plugin's own message (e.g. XLA's diagnostic).
    pub message: String,
    /// The plugin's `PJRT_Error_Code` (absl status code numbering, e.g. 3 =
    /// INVALID_ARGUMENT); `None` for errors raised by this layer itself.
    pub code: Option<i32>,
}

impl PjrtError {
    fn local(message: impl Into<String>) -> Self {
        PjrtError {
            message: message.into(),
            code: None,
        }
    }
}

/// Every argument struct starts with `struct_size` and `extension_start`;
/// this fills those (size of OUR layout, per the version rule in `sys`) and
/// zeroes the rest, so fields newer than the plugin are inert.
fn new_args<T: sys::Args>() -> T {
    // SAFETY: `sys::Args` guarantees that all-zero is a valid `T`.
    let mut args: T = unsafe { std::mem::zeroed() };
    // SAFETY: `sys::Args` guarantees a leading `usize` `struct_size` field.
    unsafe { (&mut args as *mut T).cast::<usize>().write(size_of::<T>()) };
    args
}

/// A view of `len` bytes at `ptr` owned by the plugin; empty when null.
///
/// # Safety
/// When non-null, `ptr` must be valid for `len` reads of `T` for `'a`.
unsafe fn plugin_slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// A loaded PJRT plugin (a shared library exporting `GetPjrtApi`).
///
/// One `Plugin` exists per library file for the whole process: `load` hands
/// out the same `Arc` for the same file, so `PJRT_Plugin_Initialize` runs once.
pub struct Plugin {
    path: PathBuf,
    api: *const sys::Api,
    /// The plugin's own `PJRT_Api.struct_size`: entries at or past this offset
    /// do not exist in its table.
    table_size: usize,
    version: (i32, i32),
    /// Never closed: plugins start threads and register process-wide state
    /// that outlives every client, so `dlclose` could unmap running code.
    _library: ManuallyDrop<Library>,
}

// SAFETY: the API table is immutable static data inside the never-unloaded
// library, and PJRT requires its functions to be callable from any thread.
unsafe impl Send for Plugin {}
// SAFETY: as above; `Plugin` has no interior mutability.
unsafe impl Sync for Plugin {}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("api_version", &self.version)
            .finish()
    }
}

impl Plugin {
    /// Loads the plugin at `path` (or returns the already loaded one), reads
    /// its API table and initializes it. Errors name the path.
    pub fn load(path: &Path) -> Result<Arc<Plugin>, PjrtError> {
        static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Plugin>>>> = OnceLock::new();
        let fail =
            |what: String| PjrtError::local(format!("PJRT plugin {}: {what}", path.display()));

        let key = std::fs::canonicalize(path).map_err(|e| fail(format!("cannot open: {e}")))?;
        // A poisoned lock only means another thread panicked mid-load; the map
        // itself is never left half-updated.
        let mut loaded = LOADED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(plugin) = loaded.get(&key) {
            return Ok(plugin.clone());
        }

        // SAFETY: loading runs the library's initializers; a PJRT plugin is
        // trusted native code by design.
        let library =
            unsafe { Library::new(&key) }.map_err(|e| fail(format!("cannot load: {e}")))?;
        // SAFETY: `GetPjrtApi` has this signature in every PJRT version.
        let get_api =
            unsafe { library.get::<unsafe extern "C" fn() -> *const sys::Api>(b"GetPjrtApi\0") }
                .map_err(|e| fail(format!("no GetPjrtApi symbol: {e}")))?;
        // SAFETY: see above; the call has no preconditions.
        let api = unsafe { get_api() };
        if api.is_null() {
            return Err(fail("GetPjrtApi returned null".into()));
        }
        // SAFETY: the leading `struct_size`, `extension_start` and
        // `pjrt_api_version` fields have been present since the API's first
        // version, so they are readable in any plugin's table.
        let (table_size, major, minor) = unsafe {
            (
                std::ptr::addr_of!((*api).struct_size).read(),
                std::ptr::addr_of!((*api).pjrt_api_version.major_version).read(),
                std::ptr::addr_of!((*api).pjrt_api_version.minor_version).read(),
            )
        };
        if major != sys::API_MAJOR {
            return Err(fail(format!(
                "PJRT C API {major}.{minor} is ABI-incompatible with the {}.{} layouts used here",
                sys::API_MAJOR,
                sys::API_MINOR
            )));
        }

        let plugin = Plugin {
            path: path.to_path_buf(),
            api,
            table_size,
            version: (major, minor),
            _library: ManuallyDrop::new(library),
        };
        // Memory safety rests on these: waiting is what keeps host memory
        // lent to the plugin alive long enough, and errors must be freed.
        api_fn!(plugin, PJRT_Error_Destroy)?;
        api_fn!(plugin, PJRT_Error_Message)?;
        api_fn!(plugin, PJRT_Event_Await)?;
        api_fn!(plugin, PJRT_Event_Destroy)?;
        // Very old tables lack this entry; such plugins need no initialization.
        if let Ok(initialize) = api_fn!(plugin, PJRT_Plugin_Initialize) {
            let mut args = new_args::<sys::PluginInitializeArgs>();
            // SAFETY: valid args struct; called once per process per library.
            unsafe { plugin.call(initialize, &mut args, "PJRT_Plugin_Initialize") }.map_err(
                |e| PjrtError {
                    code: e.code,
                    ..fail(e.message)
                },
            )?;
        }
        let plugin = Arc::new(plugin);
        loaded.insert(key, plugin.clone());
        Ok(plugin)
    }

    /// The plugin's PJRT C API version `(major, minor)`.
    pub fn api_version(&self) -> (i32, i32) {
        self.version
    }

    /// The path the plugin was first loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads one API table slot; see [`api_fn!`].
    fn entry<F>(
        &self,
        offset: usize,
        name: &str,
        read: impl FnOnce(*const sys::Api) -> Option<F>,
    ) -> Result<F, PjrtError> {
        let missing = || {
            PjrtError::local(format!(
                "PJRT plugin {} (C API {}.{}) does not provide {name}",
                self.path.display(),
                self.version.0,
                self.version.1
            ))
        };
        if offset + size_of::<usize>() > self.table_size {
            return Err(missing());
        }
        read(self.api).ok_or_else(missing)
    }

    /// Turns a returned `PJRT_Error*` into a `Result`, taking ownership of it.
    fn check(&self, err: *mut sys::Error, function: &str) -> Result<(), PjrtError> {
        if err.is_null() {
            Ok(())
        } else {
            Err(self.take_error(err, function))
        }
    }

    /// Reads message and code of a non-null `err`, then destroys it.
    fn take_error(&self, err: *mut sys::Error, function: &str) -> PjrtError {
        let mut message = String::from("(plugin gave no message)");
        if let Ok(get_message) = api_fn!(self, PJRT_Error_Message) {
            let mut args = new_args::<sys::ErrorMessageArgs>();
            args.error = err;
            // SAFETY: `err` is a live error owned by us; the message it points
            // to lives as long as `err`, which we destroy only below.
            unsafe {
                get_message(&mut args);
                let bytes = plugin_slice(args.message.cast::<u8>(), args.message_size);
                message = String::from_utf8_lossy(bytes).into_owned();
            }
        }
        let mut code = None;
        if let Ok(get_code) = api_fn!(self, PJRT_Error_GetCode) {
            let mut args = new_args::<sys::ErrorGetCodeArgs>();
            args.error = err;
            // SAFETY: as above.
            let code_err = unsafe { get_code(&mut args) };
            if code_err.is_null() {
                code = Some(args.code);
            } else {
                self.destroy_error(code_err);
            }
        }
        self.destroy_error(err);
        PjrtError {
            message: format!("{function}: {message}"),
            code,
        }
    }

    fn destroy_error(&self, err: *mut sys::Error) {
        // Without the entry the error leaks, which is the only safe option.
        if let Ok(free) = api_fn!(self, PJRT_Error_Destroy) {
            let mut args = new_args::<sys::ErrorDestroyArgs>();
            args.error = err;
            // SAFETY: we own `err` and never use it again.
            unsafe { free(&mut args) };
        }
    }

    /// Blocks until `event` (owned by us; may be null = already complete)
    /// fires, destroys it, and reports its error status.
    fn await_event(&self, event: *mut sys::Event, function: &str) -> Result<(), PjrtError> {
        if event.is_null() {
            return Ok(());
        }
        let result = (|| {
            let wait = api_fn!(self, PJRT_Event_Await)?;
            let mut args = new_args::<sys::EventArgs>();
            args.event = event;
            // SAFETY: `event` is live until destroyed below.
            unsafe { self.call(wait, &mut args, function) }?;
            // Await already returns the status; Event_Error is asked as well
            // because the header documents it as the event's status of record.
            if let Ok(status) = api_fn!(self, PJRT_Event_Error) {
                let mut args = new_args::<sys::EventArgs>();
                args.event = event;
                // SAFETY: as above; the event is ready, as Event_Error requires.
                unsafe { self.call(status, &mut args, function) }?;
            }
            Ok(())
        })();
        self.destroy_event(event);
        result
    }

    /// Destroys `event` (owned by the caller, never used again); errors are
    /// dropped, as in every destructor.
    fn destroy_event(&self, event: *mut sys::Event) {
        if let Ok(destroy) = api_fn!(self, PJRT_Event_Destroy) {
            let mut args = new_args::<sys::EventArgs>();
            args.event = event;
            // SAFETY: the caller owns `event` and never uses it again.
            let _ = unsafe { self.call(destroy, &mut args, "PJRT_Event_Destroy") };
        }
    }
}

/// Element types, numbered as `PJRT_Buffer_Type` (header 0.114).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElementType {
    /// Boolean, one byte per element (0 or 1).
    Pred,
    /// Signed 8-bit integer.
    S8,
    /// Signed 16-bit integer.
    S16,
    /// Signed 32-bit integer.
    S32,
    /// Signed 64-bit integer.
    S64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE half precision float.
    F16,
    /// IEEE single precision float.
    F32,
    /// IEEE double precision float.
    F64,
    /// bfloat16.
    BF16,
    /// Complex of two `F32`.
    C64,
    /// Complex of two `F64`.
    C128,
    /// Any other `PJRT_Buffer_Type` value (sub-byte, 8-bit float, token, ...),
    /// carried through unchanged but not accepted for host transfers.
    Other(i32),
}

impl ElementType {
    /// The `PJRT_Buffer_Type` value.
    pub fn to_raw(self) -> i32 {
        match self {
            ElementType::Pred => 1,
            ElementType::S8 => 2,
            ElementType::S16 => 3,
            ElementType::S32 => 4,
            ElementType::S64 => 5,
            ElementType::U8 => 6,
            ElementType::U16 => 7,
            ElementType::U32 => 8,
            ElementType::U64 => 9,
            ElementType::F16 => 10,
            ElementType::F32 => 11,
            ElementType::F64 => 12,
            ElementType::BF16 => 13,
            ElementType::C64 => 14,
            ElementType::C128 => 15,
            ElementType::Other(raw) => raw,
        }
    }

    /// The element type for a `PJRT_Buffer_Type` value.
    pub fn from_raw(raw: i32) -> ElementType {
        match raw {
            1 => ElementType::Pred,
            2 => ElementType::S8,
            3 => ElementType::S16,
            4 => ElementType::S32,
            5 => ElementType::S64,
            6 => ElementType::U8,
            7 => ElementType::U16,
            8 => ElementType::U32,
            9 => ElementType::U64,
            10 => ElementType::F16,
            11 => ElementType::F32,
            12 => ElementType::F64,
            13 => ElementType::BF16,
            14 => ElementType::C64,
            15 => ElementType::C128,
            other => ElementType::Other(other),
        }
    }

    /// Bytes per element in a dense host array; `None` for `Other`, whose
    /// host representation this layer does not know.
    pub fn byte_size(self) -> Option<usize> {
        Some(match self {
            ElementType::Pred | ElementType::S8 | ElementType::U8 => 1,
            ElementType::S16 | ElementType::U16 | ElementType::F16 | ElementType::BF16 => 2,
            ElementType::S32 | ElementType::U32 | ElementType::F32 => 4,
            ElementType::S64 | ElementType::U64 | ElementType::F64 | ElementType::C64 => 8,
            ElementType::C128 => 16,
            ElementType::Other(_) => return None,
        })
    }
}

/// The number of bytes of a dense `ty` array of shape `dims`, or an error
/// explaining why no such host array can exist.
fn dense_byte_size(ty: ElementType, dims: &[i64]) -> Result<usize, PjrtError> {
    let elem = ty.byte_size().ok_or_else(|| {
        PjrtError::local(format!("element type {ty:?} has no dense host layout here"))
    })?;
    dims.iter().try_fold(elem, |acc, &d| {
        let d = usize::try_from(d)
            .map_err(|_| PjrtError::local(format!("negative dimension {d} in {dims:?}")))?;
        acc.checked_mul(d)
            .ok_or_else(|| PjrtError::local(format!("shape {dims:?} overflows the address space")))
    })
}
