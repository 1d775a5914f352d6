//! A computed size: produced by a program, kept on its device until read.

use crate::backend::{DeviceBuffer, SizeArg};
use crate::device::Device;
use crate::Result;
use parking_lot::Mutex;

/// The value of one dynamic dimension after a program computed it.
///
/// It stays on the device (so the next program can take it as an argument
/// without a host round trip) and is read to the host at most once.
pub(crate) struct SizeCell {
    device: Option<(DeviceBuffer, Device)>,
    host: Mutex<Option<i64>>,
    /// True on a replicated device, where each replica may hold its own
    /// value: programs then always take the device buffer, never the
    /// host copy (the first replica's value, once read).
    per_replica: bool,
}

impl std::fmt::Debug for SizeCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SizeCell({:?})", *self.host.lock())
    }
}

impl SizeCell {
    /// A size known on the host (e.g. the length of a `mark_dynamic` input).
    pub fn host(v: i64) -> SizeCell {
        SizeCell {
            device: None,
            host: Mutex::new(Some(v)),
            per_replica: false,
        }
    }

    /// A size held by a device buffer.
    pub fn on_device(buffer: DeviceBuffer, device: Device) -> SizeCell {
        SizeCell {
            per_replica: device.replica_count() > 1,
            device: Some((buffer, device)),
            host: Mutex::new(None),
        }
    }

    /// How the size is passed to a program: its host value if known, else
    /// its device buffer.
    pub fn as_arg(&self) -> SizeArg<'_> {
        if let (true, Some(b)) = (self.per_replica, self.device_buffer()) {
            return SizeArg::Device(b);
        }
        match (self.known(), self.device_buffer()) {
            (Some(v), _) => SizeArg::Host(v),
            (None, Some(b)) => SizeArg::Device(b),
            (None, None) => SizeArg::Host(0),
        }
    }

    /// The value if it is already on the host.
    pub fn known(&self) -> Option<i64> {
        *self.host.lock()
    }

    /// The device buffer, if the size lives on a device.
    pub fn device_buffer(&self) -> Option<&DeviceBuffer> {
        self.device.as_ref().map(|(b, _)| b)
    }

    /// The value, read from the device the first time.
    pub fn get(&self) -> Result<i64> {
        let mut host = self.host.lock();
        if let Some(v) = *host {
            return Ok(v);
        }
        let (buf, dev) = self.device.as_ref().ok_or_else(|| {
            crate::Error::internal("size", "a size cell with neither a host nor a device value")
        })?;
        let v = dev.backend().read_size(buf)?;
        *host = Some(v);
        Ok(v)
    }
}
