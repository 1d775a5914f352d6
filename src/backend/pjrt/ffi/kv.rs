//! The key-value store a plugin's client may use to share data between
//! the processes of one job (`PJRT_Client_Create`'s `kv_get_callback`,
//! `kv_try_get_callback` and `kv_put_callback`): a GPU plugin exchanges
//! its topology through it when a job spans several hosts. Users implement
//! [`KeyValueStore`] over a store they already run; this module turns it
//! into the C callbacks.
//!
//! The CPU plugins never call them (measured: `reference/xla-multi-device.md`
//! §7); the callbacks are tested by calling them as a plugin would.
//!
//! `Device::pjrt_distributed(plugin, node_id, num_nodes, store)` creates
//! such a client with the create options `node_id` and `num_nodes`; lazyxla
//! runs no coordination service. Every process then sees all devices of
//! the job and addresses its own. What a multi-host step still needs, and
//! is not built: a device assignment naming other processes' devices
//! (global ids; `CompileOptions::on_devices` takes ids, and only
//! addressable devices are launched), launching the same program in the
//! same order in every process (the launch ids), and tests on real GPUs.
//! The CPU plugins reject (0.115) or ignore (0.81) `node_id` (the
//! `distributed` test checks exactly that). On CPU, several hosts mean one
//! client per process and a gradient all-reduce outside XLA.

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use super::sys;

/// A key-value store shared by every process of a multi-host job, which
/// a PJRT plugin's client uses to exchange what its processes must agree
/// on (the GPU plugin: its devices and topology). Keys and values are
/// bytes. Every method may be called from any thread of the plugin.
///
/// Errors are reported to the plugin as `NOT_FOUND` (a key that did not
/// appear) or `INTERNAL`, with the message.
pub trait KeyValueStore: Send + Sync {
    /// The value of `key`, waiting up to `timeout` for another process to
    /// put it; `Err(KvError::NotFound)` when it does not appear in time.
    fn get(&self, key: &[u8], timeout: Duration) -> Result<Vec<u8>, KvError>;
    /// The value of `key` if it is there now, without waiting.
    fn try_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;
    /// Stores `value` under `key`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), KvError>;
}

/// A [`KeyValueStore`] failure.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvError {
    /// The key is not there (in time).
    NotFound(String),
    /// Anything else: the store's own message.
    Other(String),
}

/// `PJRT_CallbackError`: how a callback makes the plugin's error value.
pub(super) type CallbackError = unsafe extern "C" fn(
    code: c_int,
    message: *const c_char,
    message_size: usize,
) -> *mut sys::Error;

/// `PJRT_KeyValueGetCallback_ValueDeleter` (and the try-get one).
pub(super) type ValueDeleter = unsafe extern "C" fn(value: *mut c_char);

/// `PJRT_KeyValueGetCallback_Args`.
#[repr(C)]
pub(super) struct GetArgs {
    pub struct_size: usize,
    pub extension_start: *mut sys::ExtensionBase,
    pub key: *const c_char,
    pub key_size: usize,
    pub timeout_in_ms: c_int,
    pub callback_error: *mut CallbackError,
    pub user_arg: *mut c_void,
    pub value: *mut c_char,
    pub value_size: usize,
    pub value_deleter_callback: Option<ValueDeleter>,
}

/// `PJRT_KeyValueTryGetCallback_Args`.
#[repr(C)]
pub(super) struct TryGetArgs {
    pub struct_size: usize,
    pub extension_start: *mut sys::ExtensionBase,
    pub key: *const c_char,
    pub key_size: usize,
    pub callback_error: *mut CallbackError,
    pub user_arg: *mut c_void,
    pub value: *mut c_char,
    pub value_size: usize,
    pub value_deleter_callback: Option<ValueDeleter>,
}

/// `PJRT_KeyValuePutCallback_Args`.
#[repr(C)]
pub(super) struct PutArgs {
    pub struct_size: usize,
    pub extension_start: *mut sys::ExtensionBase,
    pub key: *const c_char,
    pub key_size: usize,
    pub value: *const c_char,
    pub value_size: usize,
    pub callback_error: *mut CallbackError,
    pub user_arg: *mut c_void,
}

/// `PJRT_Error_Code_NOT_FOUND` and `PJRT_Error_Code_INTERNAL`.
const NOT_FOUND: c_int = 5;
const INTERNAL: c_int = 13;

/// What the callbacks' `user_arg` points to; owned by the client, so it
/// outlives every call the plugin makes.
pub(super) struct Callbacks {
    store: Arc<dyn KeyValueStore>,
}

impl Callbacks {
    pub(super) fn new(store: Arc<dyn KeyValueStore>) -> Box<Callbacks> {
        Box::new(Callbacks { store })
    }

    /// The three callbacks' addresses for `PJRT_Client_Create_Args`.
    pub(super) fn entries() -> (*mut c_void, *mut c_void, *mut c_void) {
        (
            get as *mut c_void,
            try_get as *mut c_void,
            put as *mut c_void,
        )
    }
}

/// The bytes at `ptr`, empty when null.
///
/// # Safety
/// When non-null, `ptr` is valid for `len` reads during the call.
unsafe fn bytes<'a>(ptr: *const c_char, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller (the plugin's arguments).
        unsafe { std::slice::from_raw_parts(ptr.cast(), len) }
    }
}

/// The plugin's error for `code` and `message`, or null when the plugin
/// gave no way to make one.
///
/// # Safety
/// `callback_error` is null or points to the plugin's function.
unsafe fn fail(callback_error: *mut CallbackError, code: c_int, message: &str) -> *mut sys::Error {
    if callback_error.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a pointer to the plugin's `PJRT_CallbackError`, which copies
    // the message during the call.
    unsafe { (*callback_error)(code, message.as_ptr().cast(), message.len()) }
}

fn code_of(e: &KvError) -> (c_int, &str) {
    match e {
        KvError::NotFound(m) => (NOT_FOUND, m),
        KvError::Other(m) => (INTERNAL, m),
    }
}

/// A value for the plugin: `len` bytes after an 8-byte length header,
/// freed by [`delete_value`] (the deleter gets only the pointer).
fn new_value(v: &[u8]) -> *mut c_char {
    let layout = value_layout(v.len());
    // SAFETY: the layout is at least 8 bytes (the header), nonzero.
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `base` spans the header and `v.len()` bytes after it, and is
    // aligned for `u64`.
    unsafe {
        base.cast::<u64>().write(v.len() as u64);
        std::ptr::copy_nonoverlapping(v.as_ptr(), base.add(8), v.len());
        base.add(8).cast()
    }
}

fn value_layout(len: usize) -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(8 + len, 8).expect("a value's size fits a layout")
}

/// Frees a value made by [`new_value`].
unsafe extern "C" fn delete_value(value: *mut c_char) {
    if value.is_null() {
        return;
    }
    // SAFETY: `value` came from `new_value`: its header is 8 bytes before.
    unsafe {
        let base = value.cast::<u8>().sub(8);
        let len = base.cast::<u64>().read() as usize;
        std::alloc::dealloc(base, value_layout(len));
    }
}

/// `kv_get_callback`.
unsafe extern "C" fn get(args: *mut GetArgs) -> *mut sys::Error {
    // SAFETY: the plugin passes valid args whose `user_arg` is our
    // `Callbacks`, alive as long as the client.
    let Some(args) = (unsafe { args.as_mut() }) else {
        return std::ptr::null_mut();
    };
    let Some(cb) = (unsafe { args.user_arg.cast::<Callbacks>().as_ref() }) else {
        // SAFETY: as above.
        return unsafe { fail(args.callback_error, INTERNAL, "no key-value store") };
    };
    // SAFETY: the key is valid for the call.
    let key = unsafe { bytes(args.key, args.key_size) };
    let timeout = Duration::from_millis(args.timeout_in_ms.max(0) as u64);
    let got = catch_unwind(AssertUnwindSafe(|| cb.store.get(key, timeout)))
        .unwrap_or_else(|_| Err(KvError::Other("the key-value store panicked".into())));
    match got {
        Ok(v) => {
            args.value_size = v.len();
            args.value = new_value(&v);
            args.value_deleter_callback = Some(delete_value);
            std::ptr::null_mut()
        }
        Err(e) => {
            let (code, m) = code_of(&e);
            // SAFETY: as above.
            unsafe { fail(args.callback_error, code, m) }
        }
    }
}

/// `kv_try_get_callback`.
unsafe extern "C" fn try_get(args: *mut TryGetArgs) -> *mut sys::Error {
    // SAFETY: as for `get`.
    let Some(args) = (unsafe { args.as_mut() }) else {
        return std::ptr::null_mut();
    };
    let Some(cb) = (unsafe { args.user_arg.cast::<Callbacks>().as_ref() }) else {
        // SAFETY: as for `get`.
        return unsafe { fail(args.callback_error, INTERNAL, "no key-value store") };
    };
    // SAFETY: as for `get`.
    let key = unsafe { bytes(args.key, args.key_size) };
    let got = catch_unwind(AssertUnwindSafe(|| cb.store.try_get(key)))
        .unwrap_or_else(|_| Err(KvError::Other("the key-value store panicked".into())));
    match got {
        Ok(Some(v)) => {
            args.value_size = v.len();
            args.value = new_value(&v);
            args.value_deleter_callback = Some(delete_value);
            std::ptr::null_mut()
        }
        Ok(None) => {
            let m = format!("key {:?} not present", String::from_utf8_lossy(key));
            // SAFETY: as for `get`.
            unsafe { fail(args.callback_error, NOT_FOUND, &m) }
        }
        Err(e) => {
            let (code, m) = code_of(&e);
            // SAFETY: as for `get`.
            unsafe { fail(args.callback_error, code, m) }
        }
    }
}

/// `kv_put_callback`.
unsafe extern "C" fn put(args: *mut PutArgs) -> *mut sys::Error {
    // SAFETY: as for `get`.
    let Some(args) = (unsafe { args.as_mut() }) else {
        return std::ptr::null_mut();
    };
    let Some(cb) = (unsafe { args.user_arg.cast::<Callbacks>().as_ref() }) else {
        // SAFETY: as for `get`.
        return unsafe { fail(args.callback_error, INTERNAL, "no key-value store") };
    };
    // SAFETY: key and value are valid for the call.
    let (key, value) = unsafe {
        (
            bytes(args.key, args.key_size),
            bytes(args.value, args.value_size),
        )
    };
    let put = catch_unwind(AssertUnwindSafe(|| cb.store.put(key, value)))
        .unwrap_or_else(|_| Err(KvError::Other("the key-value store panicked".into())));
    match put {
        Ok(()) => std::ptr::null_mut(),
        Err(e) => {
            let (code, m) = code_of(&e);
            // SAFETY: as for `get`.
            unsafe { fail(args.callback_error, code, m) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Memory(Mutex<HashMap<Vec<u8>, Vec<u8>>>);

    impl KeyValueStore for Memory {
        fn get(&self, key: &[u8], _timeout: Duration) -> Result<Vec<u8>, KvError> {
            self.0
                .lock()
                .unwrap()
                .get(key)
                .cloned()
                .ok_or_else(|| KvError::NotFound("not put in time".into()))
        }
        fn try_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
            Ok(self.0.lock().unwrap().get(key).cloned())
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
            self.0.lock().unwrap().insert(key.to_vec(), value.to_vec());
            Ok(())
        }
    }

    thread_local! {
        static LAST: std::cell::RefCell<Option<(c_int, String)>> = const { std::cell::RefCell::new(None) };
    }

    /// A plugin's error maker that remembers what it was given and
    /// returns a dangling non-null marker (never dereferenced here).
    unsafe extern "C" fn record(code: c_int, m: *const c_char, n: usize) -> *mut sys::Error {
        // SAFETY: the callbacks pass their message's bytes.
        let text = String::from_utf8_lossy(unsafe { bytes(m, n) }).into_owned();
        LAST.with(|l| *l.borrow_mut() = Some((code, text)));
        std::ptr::NonNull::dangling().as_ptr()
    }

    /// Calls the callbacks as a plugin would.
    #[test]
    fn the_callbacks_serve_the_store_as_a_plugin_calls_them() {
        let cb = Callbacks::new(Arc::new(Memory::default()));
        let user = (&*cb as *const Callbacks).cast_mut().cast::<c_void>();
        let mut maker: CallbackError = record;
        let (key, value) = (b"topology/0", b"\x00gpu\x01");
        // SAFETY: all-zero is a valid value of these argument structs.
        let mut p: PutArgs = unsafe { std::mem::zeroed() };
        p.struct_size = std::mem::size_of::<PutArgs>();
        p.key = key.as_ptr().cast();
        p.key_size = key.len();
        p.value = value.as_ptr().cast();
        p.value_size = value.len();
        p.callback_error = &mut maker;
        p.user_arg = user;
        // SAFETY: valid args, as a plugin would pass them.
        assert!(unsafe { put(&mut p) }.is_null());

        // SAFETY: as above.
        let mut g: GetArgs = unsafe { std::mem::zeroed() };
        g.key = key.as_ptr().cast();
        g.key_size = key.len();
        g.timeout_in_ms = 10;
        g.callback_error = &mut maker;
        g.user_arg = user;
        // SAFETY: as above.
        assert!(unsafe { get(&mut g) }.is_null());
        // SAFETY: the value the callback made, `value_size` bytes.
        assert_eq!(unsafe { bytes(g.value, g.value_size) }, value);
        // SAFETY: the plugin frees the value with the deleter it was given.
        unsafe { (g.value_deleter_callback.unwrap())(g.value) };

        // SAFETY: as above.
        let mut t: TryGetArgs = unsafe { std::mem::zeroed() };
        let missing = b"topology/1";
        t.key = missing.as_ptr().cast();
        t.key_size = missing.len();
        t.callback_error = &mut maker;
        t.user_arg = user;
        // SAFETY: as above.
        assert!(!unsafe { try_get(&mut t) }.is_null());
        let (code, m) = LAST.with(|l| l.borrow_mut().take()).unwrap();
        assert_eq!(code, NOT_FOUND);
        assert!(m.contains("topology/1"), "{m}");

        g.key = missing.as_ptr().cast();
        g.key_size = missing.len();
        g.value = std::ptr::null_mut();
        // SAFETY: as above.
        assert!(!unsafe { get(&mut g) }.is_null());
        assert_eq!(LAST.with(|l| l.borrow_mut().take()).unwrap().0, NOT_FOUND);
        // An empty value round-trips too.
        p.value_size = 0;
        // SAFETY: as above.
        assert!(unsafe { put(&mut p) }.is_null());
        t.key = key.as_ptr().cast();
        t.key_size = key.len();
        // SAFETY: as above.
        assert!(unsafe { try_get(&mut t) }.is_null());
        assert_eq!(t.value_size, 0);
        // SAFETY: as above.
        unsafe { (t.value_deleter_callback.unwrap())(t.value) };
    }

    #[test]
    fn layouts_match_the_header() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<GetArgs>(), 80);
        assert_eq!(size_of::<TryGetArgs>(), 72);
        assert_eq!(size_of::<PutArgs>(), 64);
        assert_eq!(offset_of!(GetArgs, timeout_in_ms), 32);
        assert_eq!(offset_of!(GetArgs, callback_error), 40);
        assert_eq!(offset_of!(TryGetArgs, callback_error), 32);
        assert_eq!(offset_of!(PutArgs, callback_error), 48);
    }
}
