//! The data behind a computed or uploaded tensor.

use super::size_cell::SizeCell;
use crate::backend::{DeviceBuffer, SizeArg, TensorArg};
use crate::device::Device;
use crate::host::HostArray;
use crate::metrics;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Per dimension of a tensor, its size cell if dynamic (inline up to
/// rank 4, like [`crate::symint::Shape`]).
pub(crate) type SizeCells = smallvec::SmallVec<[Option<Arc<SizeCell>>; 4]>;

/// The static shape of a buffer (inline up to rank 4).
pub(crate) type Bounds = smallvec::SmallVec<[usize; 4]>;

/// A tensor's value on its device: the backend's buffer (for PJRT, static
/// at the bound shape; for the reference backend, exact) and, for every
/// dynamic dimension, its real size.
///
/// Data created from the host is uploaded when a program first needs it,
/// so `mark_dynamic` can still choose the padded shape and reading a value
/// that never ran costs no transfer.
pub(crate) struct DeviceData {
    pub device: Device,
    storage: Storage,
    /// One entry per dimension; `Some` exactly for dynamic dimensions.
    pub sizes: SizeCells,
    /// The static shape of the buffer: the bound of the node holding the
    /// data, or along a dim with bucketed bounds the bucket's buffer,
    /// longer than the bound the node gives it (`runtime::buckets`).
    bounds: Bounds,
    /// Set when the program that computed this data failed a size check
    /// found only after it was bound (see `tensor::sync::verify`): every
    /// use of the data is then that error.
    failed: OnceLock<Box<crate::Error>>,
    /// Set once the buffer was donated to a program (`mark_donated`): the
    /// backend deleted it, so it is never used again.
    donated: AtomicBool,
}

/// Where the elements are. A program's result is on the device from the
/// start and needs no once-cell: a captured step builds and replaces
/// several of these per replay.
enum Storage {
    Device(DeviceBuffer),
    /// Host data, uploaded on first use.
    Host {
        buffer: OnceLock<DeviceBuffer>,
        /// Exact host data and the static shape to allocate for it, until
        /// the upload.
        pending: Mutex<Option<(Arc<HostArray>, Vec<usize>)>>,
    },
}

impl std::fmt::Debug for DeviceData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uploaded = match &self.storage {
            Storage::Device(_) => true,
            Storage::Host { buffer, .. } => buffer.get().is_some(),
        };
        write!(f, "DeviceData({}, uploaded={uploaded})", self.device)
    }
}

impl DeviceData {
    /// Data already on the device (a program's result) in a buffer of
    /// shape `bounds`.
    pub fn on_device(
        device: Device,
        buffer: DeviceBuffer,
        sizes: SizeCells,
        bounds: Bounds,
    ) -> DeviceData {
        DeviceData {
            device,
            storage: Storage::Device(buffer),
            sizes,
            bounds,
            failed: OnceLock::new(),
            donated: AtomicBool::new(false),
        }
    }

    /// Host data to be uploaded into a buffer of shape `bound` on first use.
    pub fn from_host(
        device: Device,
        host: Arc<HostArray>,
        bound: Vec<usize>,
        sizes: SizeCells,
    ) -> DeviceData {
        DeviceData {
            device,
            bounds: bound.iter().copied().collect(),
            storage: Storage::Host {
                buffer: OnceLock::new(),
                pending: Mutex::new(Some((host, bound))),
            },
            sizes,
            failed: OnceLock::new(),
            donated: AtomicBool::new(false),
        }
    }

    /// The static shape of the buffer: the bounds of the node holding the
    /// data, or longer along a bucketed dim (`runtime::buckets`).
    pub fn bounds(&self) -> &[usize] {
        &self.bounds
    }

    /// Marks the data as computed by a program whose size check `e`
    /// failed: every later use is that error.
    pub fn fail(&self, e: crate::Error) {
        let _ = self.failed.set(Box::new(e));
    }

    /// Records that a program was given this data's buffer to write its
    /// result into (see `runtime::donation`): the buffer is gone, and every
    /// later use is an error.
    pub fn mark_donated(&self) {
        self.donated.store(true, Ordering::Release);
    }

    /// The device buffer, uploading the host data the first time.
    pub fn buffer(&self) -> crate::Result<&DeviceBuffer> {
        if let Some(e) = self.failed.get() {
            return Err((**e).clone());
        }
        if self.donated.load(Ordering::Acquire) {
            return Err(crate::Error::internal(
                "device data",
                "a value whose buffer a step donated to its update was used after the step \
                 (was the tensor used from another thread while it was synced?)",
            ));
        }
        let (buffer, pending) = match &self.storage {
            Storage::Device(b) => return Ok(b),
            Storage::Host { buffer, pending } => (buffer, pending),
        };
        if let Some(b) = buffer.get() {
            return Ok(b);
        }
        let mut pending = pending.lock();
        if let Some(b) = buffer.get() {
            return Ok(b);
        }
        let (host, bound) = pending.as_ref().ok_or_else(|| {
            crate::Error::internal("upload", "data with neither a buffer nor host data")
        })?;
        // Data held only here may be lent to the buffer rather than copied.
        let b = match Arc::strong_count(host) {
            1 => self.device.backend().upload_owned(host, bound)?,
            _ => self.device.backend().upload(host, bound)?,
        };
        metrics::inc(metrics::Counter::TransferToDevice);
        // Under the lock, with the cell checked empty: this set succeeds.
        let b = buffer.get_or_init(|| b);
        *pending = None;
        Ok(b)
    }

    /// This data as a program argument: its buffer (uploaded the first
    /// time) and the size of each dynamic dimension.
    pub fn exec_arg(&self) -> crate::Result<TensorArg<'_>> {
        let mut sizes = smallvec::SmallVec::<[SizeArg<'_>; 2]>::new();
        for c in self.sizes.iter().flatten() {
            sizes.push(c.as_arg());
        }
        Ok((self.buffer()?, sizes))
    }

    /// Puts a program's result buffer in place of this data's elements.
    /// The caller guarantees that it has the dtype and rank of the node
    /// holding this data, and updates [`DeviceData::sizes`] and that
    /// node's shape to the result's.
    pub fn set_buffer(&mut self, buffer: DeviceBuffer) {
        self.storage = Storage::Device(buffer);
        *self.donated.get_mut() = false;
    }

    /// The sharding of data split over an SPMD backend's devices (`None`
    /// for whole data, and for host data not uploaded yet).
    pub fn sharding(&self) -> Option<Arc<crate::ir::sharding::Sharding>> {
        match &self.storage {
            Storage::Device(b) => b.sharding().cloned(),
            Storage::Host { buffer, .. } => buffer.get().and_then(|b| b.sharding().cloned()),
        }
    }

    /// The exact host data, if it was never uploaded.
    pub fn host_copy(&self) -> Option<Arc<HostArray>> {
        match &self.storage {
            Storage::Device(_) => None,
            Storage::Host { buffer, pending } => {
                if buffer.get().is_some() {
                    return None;
                }
                pending.lock().as_ref().map(|(h, _)| h.clone())
            }
        }
    }
}

/// The device data of a data leaf (`None` for any other node).
pub(crate) fn of(node: &crate::ir::Node) -> Option<&DeviceData> {
    node.leaf_data()?.get()
}

/// A shared handle of a data leaf's device data.
pub(crate) fn shared(node: &crate::ir::Node) -> Option<Arc<DeviceData>> {
    node.leaf_data()?.shared()
}

/// A data leaf of type `dtype` and `shape` holding `data`.
#[track_caller]
pub(crate) fn leaf(
    dtype: crate::DType,
    shape: crate::symint::Shape,
    data: DeviceData,
) -> Arc<crate::ir::Node> {
    leaf_shared(dtype, shape, Arc::new(data))
}

/// [`leaf`] of data another leaf may hold too (the same data under other
/// size names, see `tensor::bucket`).
#[track_caller]
pub(crate) fn leaf_shared(
    dtype: crate::DType,
    shape: crate::symint::Shape,
    data: Arc<DeviceData>,
) -> Arc<crate::ir::Node> {
    let op = crate::ir::Op::Data {
        dtype,
        data: crate::ir::leaf::LeafData::new(data),
    };
    let (inputs, size_deps) = (smallvec::SmallVec::new(), smallvec::SmallVec::new());
    crate::ir::Node::new(op, inputs, size_deps, dtype, shape, false)
}
