//! Raw `#[repr(C)]` declarations for the subset of the PJRT C API we call.
//!
//! Layouts follow `xla/pjrt/c/pjrt_c_api.h` at **PJRT C API 0.114**
//! (`PJRT_API_MAJOR 0`, `PJRT_API_MINOR 114`), as of openxla/xla commit
//! 70fe66213b73c5953d92eb25d2606bd6004d47c3 (read from the zml/xla mirror of
//! openxla/xla, branch `main` at 84938591e04575f91e13bef13eb736bf475b7cd2).
//! Every argument struct used here is unchanged in the 0.115 CPU plugin: its
//! minimum sizes, probed by passing `struct_size = 1`, equal the 0.114 sizes.
//!
//! # The version rule
//!
//! A plugin validates every argument struct with
//! `args->struct_size >= <size of that struct in the header it was built with>`.
//! Fields are only ever appended, so a caller laid out against a NEWER header
//! than the plugin passes every check (the plugin ignores the tail it does not
//! know), while a caller laid out against an OLDER header is rejected with
//! "Unexpected ..._Args size". Hence these structs track the newest header we
//! could confirm, and callers set `struct_size` to `size_of::<Struct>()`.
//! Newer-only input fields must stay zero/null so that older plugins, which
//! never read them, and newer plugins, which read them, behave alike.
//!
//! The [`Api`] table follows the same rule in the other direction: a plugin
//! built against an OLDER header has a SHORTER table, so an entry may only be
//! read after checking that it lies inside the table's own `struct_size`.
//!
//! A plugin of another MAJOR version is refused at load. The same binary
//! runs on plugins of C API 0.81 and 0.115.
//!
//! Only declarations live here; all invariants are upheld in the parent module.

#![allow(non_snake_case)]
#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_void};
use std::marker::{PhantomData, PhantomPinned};

/// `PJRT_API_MAJOR` of the header these layouts follow; a plugin reporting a
/// different major version has an incompatible ABI.
pub const API_MAJOR: c_int = 0;
/// `PJRT_API_MINOR` of the header these layouts follow.
pub const API_MINOR: c_int = 114;

macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            // Owned and mutated by the plugin: neither Send, Sync nor Unpin
            // on its own; the safe wrappers decide thread-safety.
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// `PJRT_Extension_Base`; we never chain extensions, so always null.
    ExtensionBase;
    /// `PJRT_Error`.
    Error;
    /// `PJRT_Event`.
    Event;
    /// `PJRT_Client`.
    Client;
    /// `PJRT_Device`.
    Device;
    /// `PJRT_Memory`.
    Memory;
    /// `PJRT_Executable`.
    Executable;
    /// `PJRT_LoadedExecutable`.
    LoadedExecutable;
    /// `PJRT_SerializedExecutable`: the plugin's owner of serialized bytes.
    SerializedExecutable;
    /// `PJRT_Buffer`.
    Buffer;
    /// `PJRT_Buffer_MemoryLayout`; only ever passed as null (default layout).
    BufferMemoryLayout;
    /// `PJRT_DeviceDescription`.
    DeviceDescription;
}

/// `PJRT_Buffer_Type` (a C enum, `int`-sized).
pub type BufferType = c_int;
/// `PJRT_Error_Code` (a C enum, `int`-sized).
pub type ErrorCode = c_int;
/// `PJRT_HostBufferSemantics` (a C enum, `int`-sized).
pub type HostBufferSemantics = c_int;

/// `PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes`: the plugin may
/// read the host data until `done_with_host_buffer` fires.
pub const HOST_BUFFER_IMMUTABLE_UNTIL_TRANSFER_COMPLETES: HostBufferSemantics = 1;
/// `PJRT_HostBufferSemantics_kImmutableZeroCopy`: the buffer may use the
/// host memory in place for its whole life (the CPU plugins do when it is
/// 64-byte aligned, else they copy); `done_with_host_buffer` fires once the
/// plugin no longer reads it. The caller never writes it meanwhile.
pub const HOST_BUFFER_IMMUTABLE_ZERO_COPY: HostBufferSemantics = 2;

/// `PJRT_NamedValue_Type` (a C enum, `int`-sized).
pub type NamedValueType = c_int;
/// `PJRT_NamedValue_kInt64`.
pub const NAMED_VALUE_INT64: NamedValueType = 1;
/// `PJRT_NamedValue_kBool`.
pub const NAMED_VALUE_BOOL: NamedValueType = 4;

/// The value of a `PJRT_NamedValue` (an anonymous union in C).
#[repr(C)]
#[derive(Clone, Copy)]
pub union NamedValueValue {
    pub string_value: *const c_char,
    pub int64_value: i64,
    pub int64_array_value: *const i64,
    pub float_value: f32,
    pub bool_value: bool,
}

/// `PJRT_NamedValue`: one create option.
#[repr(C)]
pub struct NamedValue {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub name: *const c_char,
    pub name_size: usize,
    pub type_: NamedValueType,
    pub value: NamedValueValue,
    /// 1 for a scalar; the element count of a list or string.
    pub value_size: usize,
}

/// `PJRT_Api_Version`.
#[repr(C)]
pub struct ApiVersion {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// `PJRT_Error_Destroy_Args`.
#[repr(C)]
pub struct ErrorDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub error: *mut Error,
}

/// `PJRT_Error_Message_Args`.
#[repr(C)]
pub struct ErrorMessageArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub error: *const Error,
    pub message: *const c_char,
    pub message_size: usize,
}

/// `PJRT_Error_GetCode_Args`.
#[repr(C)]
pub struct ErrorGetCodeArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub error: *const Error,
    pub code: ErrorCode,
}

/// `PJRT_Plugin_Initialize_Args`.
#[repr(C)]
pub struct PluginInitializeArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
}

/// `PJRT_Event_Destroy_Args`, `PJRT_Event_Error_Args` and
/// `PJRT_Event_Await_Args` (all three share this layout).
#[repr(C)]
pub struct EventArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub event: *mut Event,
}

/// `PJRT_Event_OnReadyCallback`: called once with the event's status (an
/// owned error, null on success) and the registered `user_arg`.
pub type EventOnReadyCallback = unsafe extern "C" fn(error: *mut Error, user_arg: *mut c_void);

/// `PJRT_Event_IsReady_Args`.
#[repr(C)]
pub struct EventIsReadyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub event: *mut Event,
    pub is_ready: bool,
}

/// `PJRT_Event_OnReady_Args` (the caller keeps owning the event).
#[repr(C)]
pub struct EventOnReadyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub event: *mut Event,
    pub callback: Option<EventOnReadyCallback>,
    pub user_arg: *mut c_void,
}

/// `PJRT_Client_Create_Args`.
#[repr(C)]
pub struct ClientCreateArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub create_options: *const NamedValue,
    pub num_options: usize,
    pub kv_get_callback: *mut c_void,
    pub kv_get_user_arg: *mut c_void,
    pub kv_put_callback: *mut c_void,
    pub kv_put_user_arg: *mut c_void,
    pub client: *mut Client,
    pub kv_try_get_callback: *mut c_void,
    pub kv_try_get_user_arg: *mut c_void,
}

/// `PJRT_Client_Destroy_Args`.
#[repr(C)]
pub struct ClientDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
}

/// `PJRT_Client_PlatformName_Args`.
#[repr(C)]
pub struct ClientPlatformNameArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub platform_name: *const c_char,
    pub platform_name_size: usize,
}

/// `PJRT_Client_AddressableDevices_Args`.
#[repr(C)]
pub struct ClientAddressableDevicesArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub addressable_devices: *const *mut Device,
    pub num_addressable_devices: usize,
}

/// `PJRT_Program`.
#[repr(C)]
pub struct Program {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    /// Declared `char*` because serialization writes it; compile only reads.
    pub code: *mut c_char,
    pub code_size: usize,
    pub format: *const c_char,
    pub format_size: usize,
}

/// `PJRT_Client_Compile_Args`.
#[repr(C)]
pub struct ClientCompileArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub program: *const Program,
    pub compile_options: *const c_char,
    pub compile_options_size: usize,
    pub executable: *mut LoadedExecutable,
}

/// `PJRT_Client_BufferFromHostBuffer_Args`.
#[repr(C)]
pub struct ClientBufferFromHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub data: *const c_void,
    pub type_: BufferType,
    pub dims: *const i64,
    pub num_dims: usize,
    pub byte_strides: *const i64,
    pub num_byte_strides: usize,
    pub host_buffer_semantics: HostBufferSemantics,
    pub device: *mut Device,
    pub memory: *mut Memory,
    pub device_layout: *mut BufferMemoryLayout,
    pub done_with_host_buffer: *mut Event,
    pub buffer: *mut Buffer,
}

/// `PJRT_Executable_Destroy_Args`.
#[repr(C)]
pub struct ExecutableDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut Executable,
}

/// `PJRT_Executable_NumOutputs_Args`.
#[repr(C)]
pub struct ExecutableNumOutputsArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut Executable,
    pub num_outputs: usize,
}

/// `PJRT_LoadedExecutable_Destroy_Args`.
#[repr(C)]
pub struct LoadedExecutableDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut LoadedExecutable,
}

/// `PJRT_Executable_OptimizedProgram_Args`: the program as XLA optimized
/// it (for an SPMD program, the partitioned per-device program, which
/// holds the shardings the partitioner chose). Called twice: with
/// `program.code` null for the size, then with a buffer of that size.
#[repr(C)]
pub struct ExecutableOptimizedProgramArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut Executable,
    pub program: *mut Program,
}

/// `PJRT_Executable_Serialize_Args`. The bytes live until
/// `serialized_executable_deleter` is called on `serialized_executable`.
#[repr(C)]
pub struct ExecutableSerializeArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *const Executable,
    pub serialized_bytes: *const c_char,
    pub serialized_bytes_size: usize,
    pub serialized_executable: *mut SerializedExecutable,
    pub serialized_executable_deleter: Option<unsafe extern "C" fn(*mut SerializedExecutable)>,
}

/// `PJRT_Executable_DeserializeAndLoad_Args`, with the `load_options`
/// that newer headers append (null: a plugin that predates it reads no
/// further than its own struct size).
#[repr(C)]
pub struct ExecutableDeserializeAndLoadArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub serialized_executable: *const c_char,
    pub serialized_executable_size: usize,
    pub loaded_executable: *mut LoadedExecutable,
    pub overridden_serialized_compile_options: *const c_char,
    pub overridden_serialized_compile_options_size: usize,
    pub load_options: *mut c_void,
}

/// `PJRT_LoadedExecutable_GetExecutable_Args`.
#[repr(C)]
pub struct LoadedExecutableGetExecutableArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub loaded_executable: *mut LoadedExecutable,
    pub executable: *mut Executable,
}

/// `PJRT_ExecuteOptions`. Callback, context and multi-slice pointers are
/// typed `void*` because we always pass null for them.
#[repr(C)]
pub struct ExecuteOptions {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub send_callbacks: *mut *mut c_void,
    pub recv_callbacks: *mut *mut c_void,
    pub num_send_ops: usize,
    pub num_recv_ops: usize,
    pub launch_id: c_int,
    pub non_donatable_input_indices: *const i64,
    pub num_non_donatable_input_indices: usize,
    pub context: *mut c_void,
    pub call_location: *const c_char,
    pub num_tasks: usize,
    pub task_ids: *mut c_int,
    pub incarnation_ids: *mut i64,
    pub multi_slice_config: *mut c_void,
    pub use_major_to_minor_data_layout_for_callbacks: bool,
    pub hlo_output_callbacks: *mut c_void,
    pub num_hlo_output_callbacks: usize,
}

/// `PJRT_LoadedExecutable_Execute_Args`.
#[repr(C)]
pub struct LoadedExecutableExecuteArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut LoadedExecutable,
    pub options: *mut ExecuteOptions,
    /// `num_devices` lists of `num_args` argument buffers.
    pub argument_lists: *const *const *mut Buffer,
    pub num_devices: usize,
    pub num_args: usize,
    /// `num_devices` caller-allocated lists of `num_outputs` slots.
    pub output_lists: *const *mut *mut Buffer,
    /// Caller-allocated `num_devices` slots, or null for no events.
    pub device_complete_events: *mut *mut Event,
    pub execute_device: *mut Device,
}

/// `PJRT_Buffer_Destroy_Args`.
#[repr(C)]
pub struct BufferDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
}

/// `PJRT_Buffer_ElementType_Args`.
#[repr(C)]
pub struct BufferElementTypeArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    pub type_: BufferType,
}

/// `PJRT_Buffer_Dimensions_Args` and `PJRT_Buffer_UnpaddedDimensions_Args`
/// (same layout; the output array is owned by the buffer).
#[repr(C)]
pub struct BufferDimensionsArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    pub dims: *const i64,
    pub num_dims: usize,
}

/// `PJRT_Buffer_DynamicDimensionIndices_Args`.
#[repr(C)]
pub struct BufferDynamicDimensionIndicesArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    pub dynamic_dim_indices: *const usize,
    pub num_dynamic_dims: usize,
}

/// `PJRT_Buffer_ToHostBuffer_Args`.
#[repr(C)]
pub struct BufferToHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub src: *mut Buffer,
    pub host_layout: *mut BufferMemoryLayout,
    /// Null asks only for the required size, returned in `dst_size`.
    pub dst: *mut c_void,
    pub dst_size: usize,
    pub event: *mut Event,
}

/// `PJRT_Buffer_IsOnCpu_Args`.
#[repr(C)]
pub struct BufferIsOnCpuArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    /// Out: true when the buffer's memory is host memory.
    pub is_on_cpu: bool,
}

/// `PJRT_Buffer_UnsafePointer_Args`.
#[repr(C)]
pub struct BufferUnsafePointerArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    /// Out: the address of the buffer's memory.
    pub buffer_pointer: usize,
}

/// `PJRT_Buffer_ReadyEvent_Args`.
#[repr(C)]
pub struct BufferReadyEventArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    /// Out: fires when the buffer's contents are defined (or failed);
    /// owned by the caller.
    pub event: *mut Event,
}

/// `PJRT_Buffer_CopyToDevice_Args`.
#[repr(C)]
pub struct BufferCopyToDeviceArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    pub dst_device: *mut Device,
    /// Out: the copy, owned by the caller.
    pub dst_buffer: *mut Buffer,
}

/// `PJRT_Buffer_Device_Args`.
#[repr(C)]
pub struct BufferDeviceArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    /// Out: owned by the client.
    pub device: *mut Device,
}

/// `PJRT_Device_GetDescription_Args`.
#[repr(C)]
pub struct DeviceGetDescriptionArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub device: *mut Device,
    /// Out: owned by the device.
    pub device_description: *mut DeviceDescription,
}

/// `PJRT_DeviceDescription_Id_Args`.
#[repr(C)]
pub struct DeviceDescriptionIdArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub device_description: *mut DeviceDescription,
    /// Out: the device's global id (what a device assignment names).
    pub id: c_int,
}

/// `PJRT_LoadedExecutable_AddressableDevices_Args`.
#[repr(C)]
pub struct LoadedExecutableAddressableDevicesArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut LoadedExecutable,
    /// Out: owned by the executable; launch slot `i` runs on entry `i`.
    pub addressable_devices: *const *mut Device,
    pub num_addressable_devices: usize,
}

/// Marks the structs that [`super::new_args`] may build.
///
/// # Safety
/// Implementors are `#[repr(C)]`, start with `struct_size: usize`, and are
/// valid when all-zero (integers, bools, raw or optional pointers only).
pub unsafe trait Args {}

macro_rules! args_structs {
    ($($name:ident),* $(,)?) => {$(
        // SAFETY: each listed struct above meets the trait's contract.
        unsafe impl Args for $name {}
    )*};
}

args_structs!(
    NamedValue,
    BufferCopyToDeviceArgs,
    BufferDeviceArgs,
    DeviceGetDescriptionArgs,
    DeviceDescriptionIdArgs,
    LoadedExecutableAddressableDevicesArgs,
    BufferIsOnCpuArgs,
    BufferUnsafePointerArgs,
    BufferReadyEventArgs,
    ErrorDestroyArgs,
    ErrorMessageArgs,
    ErrorGetCodeArgs,
    PluginInitializeArgs,
    EventArgs,
    EventOnReadyArgs,
    EventIsReadyArgs,
    ClientCreateArgs,
    ClientDestroyArgs,
    ClientPlatformNameArgs,
    ClientAddressableDevicesArgs,
    Program,
    ClientCompileArgs,
    ClientBufferFromHostBufferArgs,
    ExecutableDestroyArgs,
    ExecutableNumOutputsArgs,
    LoadedExecutableDestroyArgs,
    LoadedExecutableGetExecutableArgs,
    ExecutableSerializeArgs,
    ExecutableOptimizedProgramArgs,
    ExecutableDeserializeAndLoadArgs,
    ExecuteOptions,
    LoadedExecutableExecuteArgs,
    BufferDestroyArgs,
    BufferElementTypeArgs,
    BufferDimensionsArgs,
    BufferDynamicDimensionIndicesArgs,
    BufferToHostBufferArgs,
);

/// `PJRT_Error_Destroy` (returns nothing, unlike every other entry).
pub type ErrorDestroyFn = unsafe extern "C" fn(*mut ErrorDestroyArgs);
/// `PJRT_Error_Message`.
pub type ErrorMessageFn = unsafe extern "C" fn(*mut ErrorMessageArgs);
/// An API entry taking `Args` and returning an owned `PJRT_Error*` (null on
/// success).
pub type Fallible<Args> = unsafe extern "C" fn(*mut Args) -> *mut Error;
/// Placeholder for table entries we never call; only their slot matters.
pub type Unused = unsafe extern "C" fn();

/// `PJRT_Api`, declared up to the last entry we call
/// (`PJRT_Buffer_UnsafePointer`, slot 73 of 138 in 0.114). Entries are in header order; every slot is a
/// nullable function pointer, so all are `Option`s.
///
/// Never create a reference to a whole `Api`: a plugin's table may be shorter
/// than this struct. Read single fields through raw pointers after checking
/// `struct_size`.
#[repr(C)]
pub struct Api {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub pjrt_api_version: ApiVersion,

    pub PJRT_Error_Destroy: Option<ErrorDestroyFn>,
    pub PJRT_Error_Message: Option<ErrorMessageFn>,
    pub PJRT_Error_GetCode: Option<Fallible<ErrorGetCodeArgs>>,

    pub PJRT_Plugin_Initialize: Option<Fallible<PluginInitializeArgs>>,
    pub PJRT_Plugin_Attributes: Option<Unused>,

    pub PJRT_Event_Destroy: Option<Fallible<EventArgs>>,
    pub PJRT_Event_IsReady: Option<Fallible<EventIsReadyArgs>>,
    pub PJRT_Event_Error: Option<Fallible<EventArgs>>,
    pub PJRT_Event_Await: Option<Fallible<EventArgs>>,
    pub PJRT_Event_OnReady: Option<Fallible<EventOnReadyArgs>>,

    pub PJRT_Client_Create: Option<Fallible<ClientCreateArgs>>,
    pub PJRT_Client_Destroy: Option<Fallible<ClientDestroyArgs>>,
    pub PJRT_Client_PlatformName: Option<Fallible<ClientPlatformNameArgs>>,
    pub PJRT_Client_ProcessIndex: Option<Unused>,
    pub PJRT_Client_PlatformVersion: Option<Unused>,
    pub PJRT_Client_Devices: Option<Unused>,
    pub PJRT_Client_AddressableDevices: Option<Fallible<ClientAddressableDevicesArgs>>,
    pub PJRT_Client_LookupDevice: Option<Unused>,
    pub PJRT_Client_LookupAddressableDevice: Option<Unused>,
    pub PJRT_Client_AddressableMemories: Option<Unused>,
    pub PJRT_Client_Compile: Option<Fallible<ClientCompileArgs>>,
    pub PJRT_Client_DefaultDeviceAssignment: Option<Unused>,
    pub PJRT_Client_BufferFromHostBuffer: Option<Fallible<ClientBufferFromHostBufferArgs>>,

    pub PJRT_DeviceDescription_Id: Option<Fallible<DeviceDescriptionIdArgs>>,
    pub PJRT_DeviceDescription_ProcessIndex: Option<Unused>,
    pub PJRT_DeviceDescription_Attributes: Option<Unused>,
    pub PJRT_DeviceDescription_Kind: Option<Unused>,
    pub PJRT_DeviceDescription_DebugString: Option<Unused>,
    pub PJRT_DeviceDescription_ToString: Option<Unused>,

    pub PJRT_Device_GetDescription: Option<Fallible<DeviceGetDescriptionArgs>>,
    pub PJRT_Device_IsAddressable: Option<Unused>,
    pub PJRT_Device_LocalHardwareId: Option<Unused>,
    pub PJRT_Device_AddressableMemories: Option<Unused>,
    pub PJRT_Device_DefaultMemory: Option<Unused>,
    pub PJRT_Device_MemoryStats: Option<Unused>,

    pub PJRT_Memory_Id: Option<Unused>,
    pub PJRT_Memory_Kind: Option<Unused>,
    pub PJRT_Memory_DebugString: Option<Unused>,
    pub PJRT_Memory_ToString: Option<Unused>,
    pub PJRT_Memory_AddressableByDevices: Option<Unused>,

    pub PJRT_Executable_Destroy: Option<Fallible<ExecutableDestroyArgs>>,
    pub PJRT_Executable_Name: Option<Unused>,
    pub PJRT_Executable_NumReplicas: Option<Unused>,
    pub PJRT_Executable_NumPartitions: Option<Unused>,
    pub PJRT_Executable_NumOutputs: Option<Fallible<ExecutableNumOutputsArgs>>,
    pub PJRT_Executable_SizeOfGeneratedCodeInBytes: Option<Unused>,
    pub PJRT_Executable_GetCostAnalysis: Option<Unused>,
    pub PJRT_Executable_OutputMemoryKinds: Option<Unused>,
    pub PJRT_Executable_OptimizedProgram: Option<Fallible<ExecutableOptimizedProgramArgs>>,
    pub PJRT_Executable_Serialize: Option<Fallible<ExecutableSerializeArgs>>,

    pub PJRT_LoadedExecutable_Destroy: Option<Fallible<LoadedExecutableDestroyArgs>>,
    pub PJRT_LoadedExecutable_GetExecutable: Option<Fallible<LoadedExecutableGetExecutableArgs>>,
    pub PJRT_LoadedExecutable_AddressableDevices:
        Option<Fallible<LoadedExecutableAddressableDevicesArgs>>,
    pub PJRT_LoadedExecutable_Delete: Option<Unused>,
    pub PJRT_LoadedExecutable_IsDeleted: Option<Unused>,
    pub PJRT_LoadedExecutable_Execute: Option<Fallible<LoadedExecutableExecuteArgs>>,
    pub PJRT_Executable_DeserializeAndLoad: Option<Fallible<ExecutableDeserializeAndLoadArgs>>,
    pub PJRT_LoadedExecutable_Fingerprint: Option<Unused>,

    pub PJRT_Buffer_Destroy: Option<Fallible<BufferDestroyArgs>>,
    pub PJRT_Buffer_ElementType: Option<Fallible<BufferElementTypeArgs>>,
    pub PJRT_Buffer_Dimensions: Option<Fallible<BufferDimensionsArgs>>,
    pub PJRT_Buffer_UnpaddedDimensions: Option<Fallible<BufferDimensionsArgs>>,
    pub PJRT_Buffer_DynamicDimensionIndices: Option<Fallible<BufferDynamicDimensionIndicesArgs>>,
    pub PJRT_Buffer_GetMemoryLayout: Option<Unused>,
    pub PJRT_Buffer_OnDeviceSizeInBytes: Option<Unused>,
    pub PJRT_Buffer_Device: Option<Fallible<BufferDeviceArgs>>,
    pub PJRT_Buffer_Memory: Option<Unused>,
    pub PJRT_Buffer_Delete: Option<Unused>,
    pub PJRT_Buffer_IsDeleted: Option<Unused>,
    pub PJRT_Buffer_CopyToDevice: Option<Fallible<BufferCopyToDeviceArgs>>,
    pub PJRT_Buffer_ToHostBuffer: Option<Fallible<BufferToHostBufferArgs>>,
    pub PJRT_Buffer_IsOnCpu: Option<Fallible<BufferIsOnCpuArgs>>,
    pub PJRT_Buffer_ReadyEvent: Option<Fallible<BufferReadyEventArgs>>,
    pub PJRT_Buffer_UnsafePointer: Option<Fallible<BufferUnsafePointerArgs>>,
}

#[cfg(all(test, target_pointer_width = "64"))]
mod layout_tests;
