//! [`Device::memory_stats`]: the bytes of live tensor data on a device,
//! from the runtime's own accounting (the live-tensor registry and the
//! shapes and shardings of their buffers), not the plugin's allocator.

use crate::backend::Storage;
use crate::device::Device;
use crate::runtime::device_data::DeviceData;
use std::collections::HashSet;
use std::sync::Arc;

/// What a device holds ([`Device::memory_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of the live tensor buffers on the device: a buffer's static
    /// shape times its element size; for a value split over a mesh, the
    /// device's piece only (padded to the shard shape).
    pub live_bytes: usize,
    /// How many live tensor buffers (or pieces) are on the device.
    pub live_buffers: usize,
}

impl Device {
    /// The bytes of the live tensor data on this device (see
    /// [`MemoryStats`]), counting each buffer once however many tensors
    /// share it: data on this device, the device's replica of data on a
    /// replicated device, and its piece of data on a mesh
    /// ([`crate::sharding`]), on either backend. Host data not uploaded
    /// yet is not counted.
    ///
    /// ```
    /// use lazyxla::{Device, Tensor, DType};
    /// let d = Device::reference();
    /// let before = d.memory_stats().live_bytes;
    /// let t = d.scoped(|| Tensor::zeros(&[256], DType::F32) + 1.0);
    /// lazyxla::mark_step().unwrap();
    /// assert!(d.memory_stats().live_bytes >= before + 1024);
    /// # drop(t);
    /// ```
    pub fn memory_stats(&self) -> MemoryStats {
        let mut seen: HashSet<*const DeviceData> = HashSet::new();
        let mut stats = MemoryStats::default();
        for t in crate::tensor::registry::live() {
            let node = t.node();
            let Some(data) = crate::runtime::device_data::shared(&node) else {
                continue;
            };
            if !seen.insert(Arc::as_ptr(&data)) || data.host_copy().is_some() {
                continue;
            }
            if !data.device.replica_devices().iter().any(|m| m.same(self)) {
                continue;
            }
            let Ok(buffer) = data.buffer() else {
                continue;
            };
            let elt = node.dtype.size_in_bytes();
            let dims: Vec<usize> = match buffer.storage() {
                Storage::Shards(s) => s.sharding.shard_shape(data.bounds()),
                _ => data.bounds().to_vec(),
            };
            stats.live_bytes += dims.iter().product::<usize>() * elt;
            stats.live_buffers += 1;
        }
        stats
    }
}
