//! Device buffers: creation from host data, shape queries, copy to host.
//!
//! **Reads in place on the CPU plugins.** A read (`download`, a size, a
//! check status) first asks the plugin whether the buffer lives in host
//! memory (`PJRT_Buffer_IsOnCpu`); if so it waits for the buffer's own
//! ready event (`PJRT_Buffer_ReadyEvent`: the program that writes it has
//! finished, or its error) and copies the bytes from
//! `PJRT_Buffer_UnsafePointer` (`Buffer::read_in_place`).
//! `PJRT_Buffer_ToHostBuffer`, used otherwise (and on a GPU), hands the
//! copy to a plugin worker thread and wakes the caller when it is done,
//! which for a small step cost more than the step. JAX reads CPU arrays in
//! place the same way. Only dense static buffers are read so (every
//! lazyxla buffer); a donated or deleted buffer falls back to the transfer
//! and its error.
//!
//! **Uploads lent, not copied, on the CPU plugins.** A CPU plugin copies
//! host data into memory of its own, unless the bytes start on a 64-byte
//! boundary: then, asked with `IMMUTABLE_ZERO_COPY`, it uses them in place
//! (measured with both plugins; other addresses are copied).
//! `Tensor::from_slice` therefore lays data of 32 KiB or more out at that
//! alignment (`host::aligned_copy`), and an upload of a contiguous array
//! that only its device data holds (`Arc::strong_count` 1) lends it
//! (`Backend::upload_owned`, `Client::buffer_from_lent_host`): the host
//! array then lives until the plugin's `done_with_host_buffer` event fires,
//! which drops it (`Event::drop_when_ready`, a `PJRT_Event_OnReady`
//! callback). That event fires when no buffer reads the memory any more,
//! including a result that took a lent buffer over by donation, so
//! donating a lent buffer is safe. On a GPU uploads are copies (the plugin
//! releases lent bytes once copied anyway).

use std::sync::{Arc, LazyLock, OnceLock};

use super::{
    dense_byte_size, new_args, plugin_slice, sys, ClientInner, ElementType, Event, PjrtError,
};

/// An array on a device, owned by this value (`PJRT_Buffer_Destroy` on drop).
///
/// Its type and shape are known when the buffer is handed out (PJRT
/// buffers are immutable, and results are complete by then), so the accessors
/// are cheap and infallible.
pub struct Buffer {
    client: Arc<ClientInner>,
    raw: *mut sys::Buffer,
    /// Shared by every result of one executable's static output (see
    /// `Executable::execute_async`), so handing out a result costs no query.
    pub(super) shape: Arc<BufferShape>,
    /// The ordinal of the device holding it, among its client's
    /// addressable devices: set where it is known at creation, else asked
    /// once (see [`Buffer::device_ordinal`]).
    pub(super) device: OnceLock<usize>,
}

/// A buffer's element type and shape, as the plugin reports them.
#[derive(Debug)]
pub(super) struct BufferShape {
    pub element_type: ElementType,
    pub dims: Vec<i64>,
    pub unpadded_dims: Vec<i64>,
    pub dynamic_dims: Vec<usize>,
}

/// The shape of a buffer not yet queried.
static UNREAD: LazyLock<Arc<BufferShape>> = LazyLock::new(|| {
    Arc::new(BufferShape {
        element_type: ElementType::Other(0),
        dims: Vec::new(),
        unpadded_dims: Vec::new(),
        dynamic_dims: Vec::new(),
    })
});

// SAFETY: PJRT buffers are immutable device arrays whose C API calls are
// thread-safe; this value is the sole owner of the pointer.
unsafe impl Send for Buffer {}
// SAFETY: as above; `&Buffer` only reads cached data or calls thread-safe
// PJRT queries and copies.
unsafe impl Sync for Buffer {}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("element_type", &self.shape.element_type)
            .field("dims", &self.shape.dims)
            .field("unpadded_dims", &self.shape.unpadded_dims)
            .field("dynamic_dims", &self.shape.dynamic_dims)
            .finish()
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        if super::dispatch::deferring() {
            // An execution handed to the dispatch thread may still name
            // it: the thread destroys it after them.
            super::dispatch::defer(Buffer {
                client: self.client.clone(),
                raw: std::mem::replace(&mut self.raw, std::ptr::null_mut()),
                shape: self.shape.clone(),
                device: OnceLock::new(),
            });
            return;
        }
        let raw = self.raw;
        let plugin = &self.client.plugin;
        if let Ok(destroy) = api_fn!(plugin, PJRT_Buffer_Destroy) {
            let mut args = new_args::<sys::BufferDestroyArgs>();
            args.buffer = raw;
            // SAFETY: we own the buffer and its client is still alive.
            let _ = unsafe { plugin.call(destroy, &mut args, "PJRT_Buffer_Destroy") };
        }
    }
}

impl Buffer {
    /// Takes ownership of `raw` without querying it, so that it is released
    /// even if a later step fails. Call [`Buffer::read_shape`] once the
    /// buffer's contents are defined.
    pub(super) fn adopt(client: &Arc<ClientInner>, raw: *mut sys::Buffer) -> Buffer {
        Buffer {
            client: client.clone(),
            raw,
            shape: UNREAD.clone(),
            device: OnceLock::new(),
        }
    }

    /// Sets the cached type and shape to those the buffer was created
    /// with from dense host data: a static array of exactly `dims`, which
    /// is what PJRT makes of it, so the plugin need not be asked.
    fn set_created_shape(&mut self, element_type: ElementType, dims: &[i64]) {
        self.shape = Arc::new(BufferShape {
            element_type,
            dims: dims.to_vec(),
            unpadded_dims: dims.to_vec(),
            dynamic_dims: Vec::new(),
        });
    }

    /// Fills the cached type and shape from the plugin.
    pub(super) fn read_shape(&mut self) -> Result<(), PjrtError> {
        let plugin = &self.client.plugin;

        let element_type = api_fn!(plugin, PJRT_Buffer_ElementType)?;
        let mut args = new_args::<sys::BufferElementTypeArgs>();
        args.buffer = self.raw;
        // SAFETY: valid args for a live buffer.
        unsafe { plugin.call(element_type, &mut args, "PJRT_Buffer_ElementType") }?;
        let element_type = ElementType::from_raw(args.type_);

        let dims = api_fn!(plugin, PJRT_Buffer_Dimensions)?;
        let mut args = new_args::<sys::BufferDimensionsArgs>();
        args.buffer = self.raw;
        // SAFETY: valid args; the returned array is owned by the buffer.
        unsafe { plugin.call(dims, &mut args, "PJRT_Buffer_Dimensions") }?;
        // SAFETY: pointer and length from the plugin, valid while the buffer is.
        let dims = unsafe { plugin_slice(args.dims, args.num_dims) }.to_vec();

        let unpadded = api_fn!(plugin, PJRT_Buffer_UnpaddedDimensions)?;
        let mut args = new_args::<sys::BufferDimensionsArgs>();
        args.buffer = self.raw;
        // SAFETY: as for the dimensions.
        unsafe { plugin.call(unpadded, &mut args, "PJRT_Buffer_UnpaddedDimensions") }?;
        // SAFETY: as for the dimensions.
        let unpadded_dims = unsafe { plugin_slice(args.dims, args.num_dims) }.to_vec();

        let dynamic = api_fn!(plugin, PJRT_Buffer_DynamicDimensionIndices)?;
        let mut args = new_args::<sys::BufferDynamicDimensionIndicesArgs>();
        args.buffer = self.raw;
        // SAFETY: as for the dimensions.
        unsafe { plugin.call(dynamic, &mut args, "PJRT_Buffer_DynamicDimensionIndices") }?;
        // SAFETY: as for the dimensions.
        let dynamic_dims =
            unsafe { plugin_slice(args.dynamic_dim_indices, args.num_dynamic_dims) }.to_vec();
        self.shape = Arc::new(BufferShape {
            element_type,
            dims,
            unpadded_dims,
            dynamic_dims,
        });
        Ok(())
    }

    /// The element type.
    pub fn element_type(&self) -> ElementType {
        self.shape.element_type
    }

    /// The dimensions as allocated: for a bounded dynamic dimension, its bound.
    pub fn dims(&self) -> &[i64] {
        &self.shape.dims
    }

    /// The real (logical) dimensions; equal to [`Buffer::dims`] except along
    /// the dynamic dimensions.
    pub fn unpadded_dims(&self) -> &[i64] {
        &self.shape.unpadded_dims
    }

    /// Indices of the bounded dynamic dimensions (empty for a static shape).
    pub fn dynamic_dims(&self) -> &[usize] {
        &self.shape.dynamic_dims
    }

    /// The ordinal of the device holding the buffer, among its client's
    /// addressable devices (`PJRT_Buffer_Device`, asked once).
    pub fn device_ordinal(&self) -> Result<usize, PjrtError> {
        if let Some(&d) = self.device.get() {
            return Ok(d);
        }
        let plugin = &self.client.plugin;
        let get = api_fn!(plugin, PJRT_Buffer_Device)?;
        let mut args = new_args::<sys::BufferDeviceArgs>();
        args.buffer = self.raw;
        // SAFETY: valid args for a live buffer; the device is owned by
        // the client.
        unsafe { plugin.call(get, &mut args, "PJRT_Buffer_Device") }?;
        let d = self
            .client
            .devices
            .iter()
            .position(|&x| x == args.device)
            .ok_or_else(|| {
                PjrtError::local("the buffer is on a device its client does not address")
            })?;
        Ok(*self.device.get_or_init(|| d))
    }

    /// Whether this buffer was created by (a handle of) `client`.
    pub(super) fn same_client(&self, client: &Arc<ClientInner>) -> bool {
        Arc::ptr_eq(&self.client, client)
    }

    pub(super) fn raw(&self) -> *mut sys::Buffer {
        self.raw
    }

    /// An identity for this buffer, distinct from every other buffer alive
    /// at the same time (the address of the plugin's handle).
    pub fn id(&self) -> usize {
        self.raw as usize
    }

    /// The address of the buffer's memory (`PJRT_Buffer_UnsafePointer`),
    /// for telling whether two buffers share memory; `None` when the
    /// plugin does not say (a deleted or donated buffer, say).
    pub fn memory_address(&self) -> Option<usize> {
        let plugin = &self.client.plugin;
        let pointer = api_fn!(plugin, PJRT_Buffer_UnsafePointer).ok()?;
        let mut args = new_args::<sys::BufferUnsafePointerArgs>();
        args.buffer = self.raw;
        // SAFETY: valid args for a live handle; nothing is dereferenced.
        unsafe { plugin.call(pointer, &mut args, "PJRT_Buffer_UnsafePointer") }.ok()?;
        (args.buffer_pointer != 0).then_some(args.buffer_pointer)
    }

    /// The address of the buffer's memory when the plugin keeps it in
    /// host memory (`PJRT_Buffer_IsOnCpu`, then
    /// `PJRT_Buffer_UnsafePointer`: the CPU plugins); `None` when it does
    /// not, or cannot say.
    fn host_address(&self) -> Option<usize> {
        let plugin = &self.client.plugin;
        let is_on_cpu = api_fn!(plugin, PJRT_Buffer_IsOnCpu).ok()?;
        let mut args = new_args::<sys::BufferIsOnCpuArgs>();
        args.buffer = self.raw;
        // SAFETY: valid args for a live buffer.
        if unsafe { plugin.call(is_on_cpu, &mut args, "PJRT_Buffer_IsOnCpu") }.is_err()
            || !args.is_on_cpu
        {
            return None;
        }
        self.memory_address()
    }

    /// Blocks until the buffer's contents are defined (the execution or
    /// transfer that writes it has completed: `PJRT_Buffer_ReadyEvent`);
    /// the error is that work's failure, or the buffer's (deleted or
    /// donated). Awaiting a buffer that is ready already costs no thread
    /// handoff.
    pub fn wait_ready(&self) -> Result<(), PjrtError> {
        let plugin = &self.client.plugin;
        let ready = api_fn!(plugin, PJRT_Buffer_ReadyEvent)?;
        let mut args = new_args::<sys::BufferReadyEventArgs>();
        args.buffer = self.raw;
        // SAFETY: valid args for a live buffer; the event is ours to
        // destroy, which `await_event` does.
        unsafe { plugin.call(ready, &mut args, "PJRT_Buffer_ReadyEvent") }?;
        plugin.await_event(args.event, "PJRT_Buffer_ReadyEvent")
    }

    /// Copies the whole buffer into `out` from its host memory, once it is
    /// ready, when the plugin keeps it there (the CPU plugins): `Ok(false)`
    /// when it does not (or cannot say), or when the buffer is not a dense
    /// static array of exactly `out.len()` bytes; then nothing was copied.
    ///
    /// A transfer through the plugin (`PJRT_Buffer_ToHostBuffer`) hands
    /// the copy to one of the plugin's worker threads and wakes the caller
    /// when it is done: ~50 µs on the CPU plugins even for 4 bytes, where
    /// this is a memcpy (what JAX does on CPU: its arrays read a CPU
    /// buffer in place).
    pub fn read_in_place(&self, out: &mut [u8]) -> Result<bool, PjrtError> {
        if !self.shape.dynamic_dims.is_empty()
            || dense_byte_size(self.element_type(), self.dims()).ok() != Some(out.len())
        {
            return Ok(false);
        }
        let Some(address) = self.host_address() else {
            return Ok(false);
        };
        self.wait_ready()?;
        if !out.is_empty() {
            // SAFETY: the plugin keeps this buffer in host memory at
            // `address`, dense and row-major (lazyxla asks for no other
            // layout, and a static PJRT CPU buffer has the default one),
            // `out.len()` bytes long (checked above); it is ready (awaited
            // above) and immutable, and alive while `self` is.
            let bytes = unsafe { std::slice::from_raw_parts(address as *const u8, out.len()) };
            out.copy_from_slice(bytes);
        }
        Ok(true)
    }

    /// Copies a small buffer whose byte size the caller knows (a size
    /// scalar, a check status) into `out`: in place where the plugin
    /// allows it ([`Buffer::read_in_place`]), else one transfer, where
    /// [`Buffer::to_host`] first asks the plugin for the size.
    pub fn to_host_exact(&self, out: &mut [u8]) -> Result<(), PjrtError> {
        if self.read_in_place(out)? {
            return Ok(());
        }
        let plugin = &self.client.plugin;
        let to_host = api_fn!(plugin, PJRT_Buffer_ToHostBuffer)?;
        // Aligned for any element type (see `to_host`).
        let mut aligned = [0u128; 4];
        if out.len() > std::mem::size_of_val(&aligned) {
            return Err(PjrtError {
                message: format!("to_host_exact: {} bytes is not a small buffer", out.len()),
                code: None,
            });
        }
        let mut args = new_args::<sys::BufferToHostBufferArgs>();
        args.src = self.raw;
        args.dst = aligned.as_mut_ptr().cast();
        args.dst_size = out.len();
        // SAFETY: `aligned` is valid for `out.len()` writes and outlives the
        // copy, whose completion event is awaited before returning.
        unsafe { plugin.call(to_host, &mut args, "PJRT_Buffer_ToHostBuffer") }?;
        plugin.await_event(args.event, "PJRT_Buffer_ToHostBuffer")?;
        // SAFETY: `aligned` spans at least `out.len()` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), out.len()) };
        out.copy_from_slice(bytes);
        Ok(())
    }

    /// Copies the logical contents (dense, row-major, of shape
    /// [`Buffer::unpadded_dims`]) into `out`, which must be exactly their
    /// byte size and aligned for the element type: in place where the
    /// plugin allows it ([`Buffer::read_in_place`]), else one transfer,
    /// where [`Buffer::to_host`] first asks the plugin for the size.
    pub fn to_host_into(&self, out: &mut [u8]) -> Result<(), PjrtError> {
        let expected = dense_byte_size(self.element_type(), self.unpadded_dims())?;
        if out.len() != expected {
            return Err(PjrtError::local(format!(
                "to_host_into: the buffer holds {expected} bytes, the destination {}",
                out.len()
            )));
        }
        if out.is_empty() || self.read_in_place(out)? {
            return Ok(());
        }
        let plugin = &self.client.plugin;
        let to_host = api_fn!(plugin, PJRT_Buffer_ToHostBuffer)?;
        let mut args = new_args::<sys::BufferToHostBufferArgs>();
        args.src = self.raw;
        args.dst = out.as_mut_ptr().cast();
        args.dst_size = out.len();
        // SAFETY: `out` is valid for `out.len()` writes and outlives the
        // copy, whose completion event is awaited before returning.
        unsafe { plugin.call(to_host, &mut args, "PJRT_Buffer_ToHostBuffer") }?;
        plugin.await_event(args.event, "PJRT_Buffer_ToHostBuffer")
    }

    /// Copies the logical contents to the host: dense, row-major, of shape
    /// [`Buffer::unpadded_dims`] (padding of dynamic dimensions is dropped).
    pub fn to_host(&self) -> Result<Vec<u8>, PjrtError> {
        let plugin = &self.client.plugin;
        let to_host = api_fn!(plugin, PJRT_Buffer_ToHostBuffer)?;

        // A null destination asks only for the size of the logical array.
        let mut args = new_args::<sys::BufferToHostBufferArgs>();
        args.src = self.raw;
        // SAFETY: valid args for a live buffer.
        unsafe { plugin.call(to_host, &mut args, "PJRT_Buffer_ToHostBuffer") }?;
        plugin.await_event(args.event, "PJRT_Buffer_ToHostBuffer")?;
        let size = args.dst_size;
        if size == 0 {
            return Ok(Vec::new());
        }

        let read_into = |dst: *mut u8| -> Result<(), PjrtError> {
            let mut args = new_args::<sys::BufferToHostBufferArgs>();
            args.src = self.raw;
            args.dst = dst.cast();
            args.dst_size = size;
            // SAFETY: `dst` is valid for `size` writes and outlives the copy,
            // because we await its completion event before returning.
            unsafe { plugin.call(to_host, &mut args, "PJRT_Buffer_ToHostBuffer") }?;
            plugin.await_event(args.event, "PJRT_Buffer_ToHostBuffer")
        };

        let mut out = vec![0u8; size];
        // The plugin may write through typed pointers, so it gets memory
        // aligned for any element type. malloc already gives 16-byte alignment
        // on the platforms we run on; the fallback keeps that an optimisation.
        if out.as_ptr().cast::<u128>().is_aligned() {
            read_into(out.as_mut_ptr())?;
        } else {
            let mut aligned = vec![0u128; size.div_ceil(std::mem::size_of::<u128>())];
            read_into(aligned.as_mut_ptr().cast())?;
            // SAFETY: `aligned` spans at least `size` initialised bytes.
            let bytes = unsafe { std::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), size) };
            out.copy_from_slice(bytes);
        }
        Ok(out)
    }
}

/// See [`super::Client::buffer_from_host`].
pub(super) fn from_host(
    client: &Arc<ClientInner>,
    data: &[u8],
    ty: ElementType,
    dims: &[i64],
    device: usize,
) -> Result<Buffer, PjrtError> {
    let semantics = sys::HOST_BUFFER_IMMUTABLE_UNTIL_TRANSFER_COMPLETES;
    // SAFETY: `data` stays borrowed until `done` has fired below.
    let (mut buffer, done) = unsafe { start_from_host(client, data, ty, dims, device, semantics) }?;
    done.wait()?;
    buffer.set_created_shape(ty, dims);
    Ok(buffer)
}

/// See [`super::Client::buffer_from_lent_host`].
pub(super) fn from_lent_host(
    client: &Arc<ClientInner>,
    lent: Arc<dyn LentBytes>,
    ty: ElementType,
    dims: &[i64],
    device: usize,
) -> Result<Buffer, PjrtError> {
    let semantics = sys::HOST_BUFFER_IMMUTABLE_ZERO_COPY;
    // SAFETY: `LentBytes` promises the bytes stay where they are, unwritten,
    // while `lent` lives, and `done` drops `lent` only once the plugin no
    // longer reads them.
    let (mut buffer, done) =
        unsafe { start_from_host(client, lent.lent_bytes(), ty, dims, device, semantics) }?;
    done.drop_when_ready(Box::new(lent));
    buffer.set_created_shape(ty, dims);
    Ok(buffer)
}

/// Starts a buffer from host data; the event fires when the plugin is done
/// with `data`.
///
/// # Safety
///
/// `data` must stay valid, and unwritten, until the event has fired.
unsafe fn start_from_host(
    client: &Arc<ClientInner>,
    data: &[u8],
    ty: ElementType,
    dims: &[i64],
    device: usize,
    semantics: sys::HostBufferSemantics,
) -> Result<(Buffer, Event), PjrtError> {
    let expected = dense_byte_size(ty, dims)?;
    if data.len() != expected {
        return Err(PjrtError::local(format!(
            "host data for a {ty:?} array of shape {dims:?} must be {expected} bytes, got {}",
            data.len()
        )));
    }
    // XLA treats PRED bytes as C++ `bool`, for which any other byte is UB.
    if ty == ElementType::Pred && data.iter().any(|&b| b > 1) {
        return Err(PjrtError::local(
            "PRED host data must contain only 0 and 1 bytes",
        ));
    }
    let device_ptr = device_at(client, device)?;

    let plugin = &client.plugin;
    let from_host = api_fn!(plugin, PJRT_Client_BufferFromHostBuffer)?;
    let mut args = new_args::<sys::ClientBufferFromHostBufferArgs>();
    args.client = client.raw;
    args.data = data.as_ptr().cast();
    args.type_ = ty.to_raw();
    args.dims = dims.as_ptr();
    args.num_dims = dims.len();
    args.host_buffer_semantics = semantics;
    args.device = device_ptr;
    // SAFETY: `data` holds exactly the bytes the shape needs (checked above)
    // and stays valid until the event fires (the caller's promise).
    unsafe { plugin.call(from_host, &mut args, "PJRT_Client_BufferFromHostBuffer") }?;
    let done = Event::adopt(
        plugin,
        args.done_with_host_buffer,
        "PJRT_Client_BufferFromHostBuffer",
    );
    let buffer = Buffer::adopt(client, args.buffer);
    let _ = buffer.device.set(device);
    Ok((buffer, done))
}

/// Host bytes lent to a buffer instead of copied
/// ([`super::Client::buffer_from_lent_host`]).
///
/// # Safety
///
/// Every call of [`LentBytes::lent_bytes`] returns the same memory, and
/// nothing writes it while any reference to the value lives.
pub unsafe trait LentBytes: Send + Sync + 'static {
    /// The bytes, in the layout the buffer is created with.
    fn lent_bytes(&self) -> &[u8];
}

/// See [`super::Client::copy_to_device`].
pub(super) fn copy_to_device(
    client: &Arc<ClientInner>,
    buffer: &Buffer,
    device: usize,
) -> Result<Buffer, PjrtError> {
    if !buffer.same_client(client) {
        return Err(PjrtError::local(
            "copy_to_device: the buffer belongs to a different PJRT client",
        ));
    }
    let device_ptr = device_at(client, device)?;
    let plugin = &client.plugin;
    let copy = api_fn!(plugin, PJRT_Buffer_CopyToDevice)?;
    let mut args = new_args::<sys::BufferCopyToDeviceArgs>();
    args.buffer = buffer.raw;
    args.dst_device = device_ptr;
    // SAFETY: valid args for a live buffer and a device of its client; the
    // copy is a new buffer owned by us.
    unsafe { plugin.call(copy, &mut args, "PJRT_Buffer_CopyToDevice") }?;
    let mut out = Buffer::adopt(client, args.dst_buffer);
    let _ = out.device.set(device);
    if buffer.shape.dynamic_dims.is_empty() {
        // Type and shape are the source's (static, known without waiting).
        out.shape = buffer.shape.clone();
    } else {
        out.read_shape()?;
    }
    Ok(out)
}

/// The raw handle of the client's addressable device `device`.
fn device_at(client: &ClientInner, device: usize) -> Result<*mut sys::Device, PjrtError> {
    client.devices.get(device).copied().ok_or_else(|| {
        PjrtError::local(format!(
            "device {device} out of range: the client has {} addressable devices",
            client.devices.len()
        ))
    })
}
