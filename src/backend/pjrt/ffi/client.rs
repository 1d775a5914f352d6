//! The client: device list, compilation entry point and host-to-device
//! transfers. Owns the `PJRT_Client` through [`ClientInner`], which every
//! buffer and executable shares.

use std::sync::Arc;

use super::{buffer, executable, new_args, plugin_slice, sys, Buffer, ElementType, Executable};
use super::{CompileOptions, PjrtError, Plugin};

/// The serialized `xla.CompileOptionsProto` of a one-device compile
/// (one replica on the client's default device, plus the debug-option
/// workarounds): [`CompileOptions::replicas`]`(1)`, encoded once. Its
/// build options are the measured minimum (`compile_options.rs`): XLA
/// copies proto fields verbatim, so the replica and partition counts are
/// required (with empty options both plugins, 0.81 and 0.115, abort the
/// process on a CHECK in `ParseDeviceAssignmentCompileOptions`).
fn compile_options() -> &'static [u8] {
    static ENCODED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ENCODED.get_or_init(|| CompileOptions::replicas(1).encode())
}

/// Owns a `PJRT_Client`; shared by the client handle and everything created
/// from it, so it is destroyed after the last of them.
pub(super) struct ClientInner {
    pub(super) plugin: Arc<Plugin>,
    pub(super) raw: *mut sys::Client,
    /// Addressable devices; owned by the client and valid as long as it is.
    pub(super) devices: Vec<*mut sys::Device>,
    /// The global id of each addressable device (what a device assignment
    /// names), in the same order.
    pub(super) device_ids: Vec<i64>,
    platform_name: String,
    /// Held while a program is launched on several devices (see
    /// `replicas`): launches interleaved across devices could deadlock
    /// their collectives.
    pub(super) launch: std::sync::Mutex<()>,
    /// The key-value store the plugin's callbacks reach, if one was
    /// given; dropped after the client (`Drop` runs before the fields).
    _kv: Option<Box<super::kv::Callbacks>>,
}

// SAFETY: a PJRT client and the devices it owns may be used from any thread
// (PjRtClient is thread-safe); we only hand its pointers to the plugin.
unsafe impl Send for ClientInner {}
// SAFETY: as above; nothing here is mutated after construction.
unsafe impl Sync for ClientInner {}

impl Drop for ClientInner {
    fn drop(&mut self) {
        if let Ok(destroy) = api_fn!(self.plugin, PJRT_Client_Destroy) {
            let mut args = new_args::<sys::ClientDestroyArgs>();
            args.client = self.raw;
            // SAFETY: no buffer or executable of this client is alive (each
            // holds an Arc to us), and the client is never used again.
            let _ = unsafe { self.plugin.call(destroy, &mut args, "PJRT_Client_Destroy") };
        }
    }
}

/// The value of a client create option (`PJRT_NamedValue`).
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    /// `PJRT_NamedValue_kInt64`.
    Int64(i64),
    /// `PJRT_NamedValue_kBool`.
    Bool(bool),
}

impl Client {
    /// Creates a client with create options and, when given, a key-value
    /// store its plugin may call (`kv_get_callback`, `kv_try_get_callback`,
    /// `kv_put_callback`; the GPU plugin does, with `node_id` and
    /// `num_nodes`, to span several hosts; the CPU plugins never do).
    pub fn with_store(
        plugin: Arc<Plugin>,
        options: &[(&str, OptionValue)],
        store: Option<Arc<dyn super::KeyValueStore>>,
    ) -> Result<Client, PjrtError> {
        Client::create(plugin, options, store.map(super::kv::Callbacks::new))
    }
}

/// A PJRT client: the devices of one plugin, plus compilation and transfers.
/// Cloning is cheap and shares the same underlying client.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("platform", &self.inner.platform_name)
            .field("devices", &self.inner.devices.len())
            .field("plugin", &self.inner.plugin)
            .finish()
    }
}

impl Client {
    /// Another handle on an existing client (its executables hand theirs out).
    pub(super) fn from_inner(inner: Arc<ClientInner>) -> Client {
        Client { inner }
    }

    /// Creates a client with no options (`PJRT_Client_Create`).
    pub fn new(plugin: Arc<Plugin>) -> Result<Client, PjrtError> {
        Client::with_options(plugin, &[])
    }

    /// Creates a client with create options (`PJRT_NamedValue`s), e.g.
    /// `("cpu_device_count", OptionValue::Int64(8))` for the CPU plugins.
    /// Plugins differ in what they accept: the 0.115 CPU plugin rejects
    /// names it does not know, the 0.81 one ignores them.
    pub fn with_options(
        plugin: Arc<Plugin>,
        options: &[(&str, OptionValue)],
    ) -> Result<Client, PjrtError> {
        Client::create(plugin, options, None)
    }

    fn create(
        plugin: Arc<Plugin>,
        options: &[(&str, OptionValue)],
        kv: Option<Box<super::kv::Callbacks>>,
    ) -> Result<Client, PjrtError> {
        let create = api_fn!(plugin, PJRT_Client_Create)?;
        let named: Vec<sys::NamedValue> = options
            .iter()
            .map(|(name, value)| {
                let mut v = new_args::<sys::NamedValue>();
                v.name = name.as_ptr().cast();
                v.name_size = name.len();
                v.value_size = 1;
                match value {
                    OptionValue::Int64(i) => {
                        v.type_ = sys::NAMED_VALUE_INT64;
                        v.value = sys::NamedValueValue { int64_value: *i };
                    }
                    OptionValue::Bool(b) => {
                        v.type_ = sys::NAMED_VALUE_BOOL;
                        v.value = sys::NamedValueValue { bool_value: *b };
                    }
                }
                v
            })
            .collect();
        let mut args = new_args::<sys::ClientCreateArgs>();
        if !named.is_empty() {
            args.create_options = named.as_ptr();
            args.num_options = named.len();
        }
        if let Some(cb) = &kv {
            let user = (&**cb as *const super::kv::Callbacks).cast_mut().cast();
            let (get, try_get, put) = super::kv::Callbacks::entries();
            args.kv_get_callback = get;
            args.kv_get_user_arg = user;
            args.kv_try_get_callback = try_get;
            args.kv_try_get_user_arg = user;
            args.kv_put_callback = put;
            args.kv_put_user_arg = user;
        }
        // SAFETY: valid args; the options (and the names they point to)
        // outlive the call, which copies what it keeps; the key-value
        // callbacks' state is owned by the client made here (`kv`), so it
        // lives as long as the plugin may call them.
        unsafe { plugin.call(create, &mut args, "PJRT_Client_Create") }?;
        // From here on `inner` owns the client, so early returns destroy it.
        let mut inner = ClientInner {
            plugin,
            raw: args.client,
            devices: Vec::new(),
            device_ids: Vec::new(),
            platform_name: String::new(),
            launch: std::sync::Mutex::new(()),
            _kv: kv,
        };
        let plugin = &inner.plugin;

        let name = api_fn!(plugin, PJRT_Client_PlatformName)?;
        let mut args = new_args::<sys::ClientPlatformNameArgs>();
        args.client = inner.raw;
        // SAFETY: valid args; the returned string is owned by the client.
        unsafe { plugin.call(name, &mut args, "PJRT_Client_PlatformName") }?;
        // SAFETY: pointer and length come from the plugin, valid while the client is.
        let bytes =
            unsafe { plugin_slice(args.platform_name.cast::<u8>(), args.platform_name_size) };
        let platform_name = String::from_utf8_lossy(bytes).into_owned();

        let devices = api_fn!(plugin, PJRT_Client_AddressableDevices)?;
        let mut args = new_args::<sys::ClientAddressableDevicesArgs>();
        args.client = inner.raw;
        // SAFETY: valid args; the returned array is owned by the client.
        unsafe { plugin.call(devices, &mut args, "PJRT_Client_AddressableDevices") }?;
        // SAFETY: as for the platform name.
        let devices =
            unsafe { plugin_slice(args.addressable_devices, args.num_addressable_devices) }
                .to_vec();

        inner.device_ids = devices
            .iter()
            .enumerate()
            .map(|(i, &d)| device_id(plugin, d).unwrap_or(i as i64))
            .collect();
        inner.platform_name = platform_name;
        inner.devices = devices;
        Ok(Client {
            inner: Arc::new(inner),
        })
    }

    /// True when `other` is a handle of this same client.
    pub fn same(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The plugin this client was created from.
    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.inner.plugin
    }

    /// The platform name reported by the plugin, e.g. `"cpu"` or `"cuda"`.
    pub fn platform_name(&self) -> String {
        self.inner.platform_name.clone()
    }

    /// The number of devices this process can address.
    pub fn device_count(&self) -> usize {
        self.inner.devices.len()
    }

    /// The global id of each addressable device, in the order of their
    /// ordinals (the `device` argument of [`Client::buffer_from_host`]).
    pub fn device_ids(&self) -> &[i64] {
        &self.inner.device_ids
    }

    /// Compiles MLIR text (see [`Client::compile`]) with `options`, which
    /// are checked against the client's devices first: an assignment that
    /// names a device twice would abort the process inside the plugin.
    pub fn compile_with(
        &self,
        mlir_text: &str,
        options: &CompileOptions,
    ) -> Result<Executable, PjrtError> {
        options.validate(&self.inner.device_ids)?;
        executable::compile(&self.inner, mlir_text, &options.encode())
    }

    /// Compiles a StableHLO/MHLO module given as MLIR text (program format
    /// `"mlir"`) for one replica and one partition on the client's default
    /// device (the first addressable one, where `execute` expects its
    /// arguments). A program XLA rejects yields an `Err` carrying XLA's
    /// diagnostic.
    pub fn compile(&self, mlir_text: &str) -> Result<Executable, PjrtError> {
        executable::compile(&self.inner, mlir_text, compile_options())
    }

    /// Compiles MLIR text with `options` already encoded (the bytes of a
    /// `CompileOptionsProto`, [`CompileOptions::encode`], checked by the
    /// caller).
    pub fn compile_encoded(
        &self,
        mlir_text: &str,
        options: &[u8],
    ) -> Result<Executable, PjrtError> {
        executable::compile(&self.inner, mlir_text, options)
    }

    /// The compile options [`Client::compile`] uses (one replica on the
    /// default device), encoded.
    pub fn default_compile_options() -> &'static [u8] {
        compile_options()
    }

    /// Loads a program that [`Executable::serialize`] wrote, on a client of
    /// the same plugin (`PJRT_Executable_DeserializeAndLoad`); the plugin
    /// rejects another's bytes with an error.
    pub fn deserialize(&self, bytes: &[u8]) -> Result<Executable, PjrtError> {
        executable::deserialize(&self.inner, bytes)
    }

    /// Copies `buffer` to the addressable device with ordinal `device` of
    /// this client, device to device (`PJRT_Buffer_CopyToDevice`). The copy
    /// can be used at once: PJRT orders its uses after the transfer.
    pub fn copy_to_device(&self, buffer: &Buffer, device: usize) -> Result<Buffer, PjrtError> {
        buffer::copy_to_device(&self.inner, buffer, device)
    }

    /// Copies a dense, row-major host array to addressable device `device`.
    /// `data` must hold exactly `product(dims) * byte size` bytes (`dims = []`
    /// is a scalar; a zero dimension gives an empty array). The copy has
    /// finished when this returns, so `data` may be reused at once.
    pub fn buffer_from_host(
        &self,
        data: &[u8],
        ty: ElementType,
        dims: &[i64],
        device: usize,
    ) -> Result<Buffer, PjrtError> {
        buffer::from_host(&self.inner, data, ty, dims, device)
    }

    /// A buffer over host bytes lent instead of copied, where the plugin
    /// can (the CPU plugins, for 64-byte aligned bytes; otherwise it
    /// copies them). `lent` lives until the plugin no longer reads them,
    /// which for a buffer made in place is when the buffer (or a result
    /// that took it over by donation) is gone. Returns at once.
    pub fn buffer_from_lent_host(
        &self,
        lent: Arc<dyn buffer::LentBytes>,
        ty: ElementType,
        dims: &[i64],
        device: usize,
    ) -> Result<Buffer, PjrtError> {
        buffer::from_lent_host(&self.inner, lent, ty, dims, device)
    }
}

/// The global id of `device` (`PJRT_DeviceDescription_Id`), when the
/// plugin provides the entries.
fn device_id(plugin: &Plugin, device: *mut sys::Device) -> Result<i64, PjrtError> {
    let describe = api_fn!(plugin, PJRT_Device_GetDescription)?;
    let mut args = new_args::<sys::DeviceGetDescriptionArgs>();
    args.device = device;
    // SAFETY: valid args for a device owned by a live client; the
    // description is owned by the device.
    unsafe { plugin.call(describe, &mut args, "PJRT_Device_GetDescription") }?;
    let id = api_fn!(plugin, PJRT_DeviceDescription_Id)?;
    let mut id_args = new_args::<sys::DeviceDescriptionIdArgs>();
    id_args.device_description = args.device_description;
    // SAFETY: valid args for the description just returned.
    unsafe { plugin.call(id, &mut id_args, "PJRT_DeviceDescription_Id") }?;
    Ok(id_args.id as i64)
}
