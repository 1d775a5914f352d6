//! Checks that the `sys` layouts are those a C compiler gives header 0.114.

use super::*;
use std::mem::{offset_of, size_of};

/// Sizes a 0.114 C compiler gives these structs (padded to 8 bytes). Every
/// one is >= the minimum that the 0.81 and 0.115 plugins demand, e.g.
/// Client_Create 88, BufferFromHostBuffer 120, ToHostBuffer 56, Execute 80.
#[test]
fn struct_sizes_match_header_0_114() {
    assert_eq!(size_of::<ApiVersion>(), 24);
    assert_eq!(size_of::<ErrorDestroyArgs>(), 24);
    assert_eq!(size_of::<ErrorMessageArgs>(), 40);
    assert_eq!(size_of::<ErrorGetCodeArgs>(), 32);
    assert_eq!(size_of::<PluginInitializeArgs>(), 16);
    assert_eq!(size_of::<EventArgs>(), 24);
    assert_eq!(size_of::<ClientCreateArgs>(), 88);
    assert_eq!(size_of::<ClientDestroyArgs>(), 24);
    assert_eq!(size_of::<ClientPlatformNameArgs>(), 40);
    assert_eq!(size_of::<ClientAddressableDevicesArgs>(), 40);
    assert_eq!(size_of::<Program>(), 48);
    assert_eq!(size_of::<ClientCompileArgs>(), 56);
    assert_eq!(size_of::<ClientBufferFromHostBufferArgs>(), 120);
    assert_eq!(size_of::<ExecutableDestroyArgs>(), 24);
    assert_eq!(size_of::<ExecutableNumOutputsArgs>(), 32);
    assert_eq!(size_of::<LoadedExecutableDestroyArgs>(), 24);
    assert_eq!(size_of::<LoadedExecutableGetExecutableArgs>(), 32);
    assert_eq!(size_of::<ExecuteOptions>(), 144);
    assert_eq!(size_of::<LoadedExecutableExecuteArgs>(), 80);
    assert_eq!(size_of::<BufferDestroyArgs>(), 24);
    assert_eq!(size_of::<BufferElementTypeArgs>(), 32);
    assert_eq!(size_of::<BufferDimensionsArgs>(), 40);
    assert_eq!(size_of::<BufferDynamicDimensionIndicesArgs>(), 40);
    assert_eq!(size_of::<BufferToHostBufferArgs>(), 56);
    assert_eq!(size_of::<NamedValue>(), 56);
    assert_eq!(size_of::<BufferCopyToDeviceArgs>(), 40);
    assert_eq!(size_of::<BufferDeviceArgs>(), 32);
    assert_eq!(size_of::<DeviceGetDescriptionArgs>(), 32);
    assert_eq!(size_of::<DeviceDescriptionIdArgs>(), 32);
    assert_eq!(size_of::<LoadedExecutableAddressableDevicesArgs>(), 40);
    assert_eq!(size_of::<ExecutableSerializeArgs>(), 56);
    assert_eq!(size_of::<ExecutableOptimizedProgramArgs>(), 32);
    assert_eq!(size_of::<ExecutableDeserializeAndLoadArgs>(), 72);
}

/// The offsets that the several-device calls depend on (the union of a
/// named value follows its 4-byte type, padded to 8).
#[test]
fn several_device_offsets_match_header_0_114() {
    assert_eq!(offset_of!(NamedValue, name), 16);
    assert_eq!(offset_of!(NamedValue, name_size), 24);
    assert_eq!(offset_of!(NamedValue, type_), 32);
    assert_eq!(offset_of!(NamedValue, value), 40);
    assert_eq!(offset_of!(NamedValue, value_size), 48);
    assert_eq!(size_of::<NamedValueValue>(), 8);
    assert_eq!(offset_of!(ClientCreateArgs, create_options), 16);
    assert_eq!(offset_of!(ClientCreateArgs, num_options), 24);
    assert_eq!(offset_of!(ClientCreateArgs, client), 64);
    assert_eq!(offset_of!(BufferCopyToDeviceArgs, dst_device), 24);
    assert_eq!(offset_of!(BufferCopyToDeviceArgs, dst_buffer), 32);
    assert_eq!(offset_of!(DeviceDescriptionIdArgs, id), 24);
    assert_eq!(
        offset_of!(
            LoadedExecutableAddressableDevicesArgs,
            num_addressable_devices
        ),
        32
    );
    assert_eq!(offset_of!(LoadedExecutableExecuteArgs, num_devices), 40);
    assert_eq!(offset_of!(LoadedExecutableExecuteArgs, num_args), 48);
    assert_eq!(offset_of!(Api, PJRT_DeviceDescription_Id), 40 + 8 * 23);
    assert_eq!(offset_of!(Api, PJRT_Device_GetDescription), 40 + 8 * 29);
    assert_eq!(
        offset_of!(Api, PJRT_LoadedExecutable_AddressableDevices),
        40 + 8 * 52
    );
    assert_eq!(offset_of!(Api, PJRT_Buffer_CopyToDevice), 40 + 8 * 69);
    assert_eq!(offset_of!(Api, PJRT_Buffer_Device), 40 + 8 * 65);
}

#[test]
fn field_offsets_match_header_0_114() {
    assert_eq!(offset_of!(ClientBufferFromHostBufferArgs, type_), 32);
    assert_eq!(
        offset_of!(ClientBufferFromHostBufferArgs, host_buffer_semantics),
        72
    );
    assert_eq!(offset_of!(ClientBufferFromHostBufferArgs, buffer), 112);
    assert_eq!(offset_of!(ExecuteOptions, launch_id), 48);
    assert_eq!(offset_of!(ExecuteOptions, incarnation_ids), 104);
    assert_eq!(
        offset_of!(ExecuteOptions, use_major_to_minor_data_layout_for_callbacks),
        120
    );
    assert_eq!(offset_of!(LoadedExecutableExecuteArgs, execute_device), 72);
    // Table slot n (0-based, header order) sits at 40 + 8 n.
    assert_eq!(offset_of!(Api, PJRT_Error_Destroy), 40);
    assert_eq!(offset_of!(Api, PJRT_Client_Create), 40 + 8 * 10);
    assert_eq!(
        offset_of!(Api, PJRT_Client_BufferFromHostBuffer),
        40 + 8 * 22
    );
    assert_eq!(offset_of!(Api, PJRT_Executable_Destroy), 40 + 8 * 40);
    assert_eq!(offset_of!(Api, PJRT_LoadedExecutable_Execute), 40 + 8 * 55);
    assert_eq!(offset_of!(Api, PJRT_Buffer_ToHostBuffer), 40 + 8 * 70);
    assert_eq!(offset_of!(Api, PJRT_Buffer_UnsafePointer), 40 + 8 * 73);
    assert_eq!(size_of::<Api>(), 40 + 8 * 74);
    assert_eq!(size_of::<BufferIsOnCpuArgs>(), 32);
    assert_eq!(size_of::<BufferUnsafePointerArgs>(), 32);
    assert_eq!(size_of::<BufferReadyEventArgs>(), 32);
    assert_eq!(offset_of!(Api, PJRT_Buffer_ReadyEvent), 40 + 8 * 72);
    assert_eq!(offset_of!(Api, PJRT_Event_OnReady), 40 + 8 * 9);
    assert_eq!(size_of::<EventOnReadyArgs>(), 40);
    assert_eq!(offset_of!(EventOnReadyArgs, callback), 24);
    assert_eq!(offset_of!(EventOnReadyArgs, user_arg), 32);
}
