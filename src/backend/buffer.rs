//! [`DeviceBuffer`], counted by the `LiveBuffers` gauge of `metrics`.
//!
//! A `DeviceBuffer` (one variant per backend) is owned by the device data
//! or size cell that tensors share; a program's arguments borrow it
//! (`ExecArgs<'a>`), and its outputs are one flat list (`ExecOutputs`) that
//! a sync or replay takes from by position, so a result reaches its tensor
//! with no allocation of its own.

use super::pjrt;
use crate::host::HostArray;
use crate::metrics::{self, Gauge};

/// What a [`DeviceBuffer`] holds. The backends are a closed set, so each
/// one's memory is a variant; a backend given the other's says so.
pub(crate) enum Storage {
    /// The reference backend's exact array.
    Reference(Box<HostArray>),
    /// A size computed by the reference backend.
    ReferenceSize(i64),
    /// A PJRT buffer.
    Pjrt(pjrt::ffi::Buffer),
    /// A PJRT buffer that a program running on the dispatch thread
    /// computes (`pjrt::ffi::dispatch`): waited for on first use.
    PjrtPending(Box<pjrt::ffi::dispatch::PendingBuffer>),
    /// One whole value per device of a group (`backend::group`): replica
    /// `r`'s, or a mesh's copy on device `r`, held by member `r`.
    Replicas(Box<[DeviceBuffer]>),
    /// A value split over the devices of a mesh (see the `sharding`
    /// module): the sharding, and per device its piece (the piece of
    /// partition `p` is `parts[p]`, padded to the shard shape), on
    /// either backend.
    Shards(Box<Shards>),
}

/// A sharded value's pieces ([`Storage::Shards`]).
pub(crate) struct Shards {
    /// How the value is split.
    pub sharding: std::sync::Arc<crate::ir::sharding::Sharding>,
    /// The pieces, by partition (or the whole value, on the reference).
    pub parts: Box<[DeviceBuffer]>,
}

/// A piece of device memory, owned: the device data or size cell holding
/// it is what tensors share. Owned rather than reference-counted so that
/// a program's result goes into its tensor with no allocation of its own
/// (a captured step's replay binds several per step).
///
/// Counted from [`DeviceBuffer::new`], its only constructor (the field is
/// private to this module), to its drop: one relaxed atomic each.
pub(crate) struct DeviceBuffer {
    storage: Storage,
}

impl DeviceBuffer {
    /// A buffer holding `storage`, counted as alive until dropped.
    #[inline]
    pub fn new(storage: Storage) -> DeviceBuffer {
        metrics::rise(Gauge::LiveBuffers);
        DeviceBuffer { storage }
    }

    /// What the buffer holds.
    #[inline]
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The PJRT buffer it holds, waiting for the program computing it when
    /// that runs on the dispatch thread (its error when it failed); `None`
    /// for another backend's memory.
    pub fn pjrt(&self) -> Option<Result<&pjrt::ffi::Buffer, pjrt::ffi::PjrtError>> {
        match &self.storage {
            Storage::Pjrt(b) => Some(Ok(b)),
            Storage::PjrtPending(p) => Some(p.get()),
            Storage::Reference(_)
            | Storage::ReferenceSize(_)
            | Storage::Replicas(_)
            | Storage::Shards(_) => None,
        }
    }

    /// The sharding of a value split over an SPMD backend's devices
    /// (`None` for a whole value, replicated or on one device).
    pub fn sharding(&self) -> Option<&std::sync::Arc<crate::ir::sharding::Sharding>> {
        match &self.storage {
            Storage::Shards(s) => Some(&s.sharding),
            _ => None,
        }
    }

    /// Replica `r`'s buffer of a replicated buffer (device `r`'s piece of
    /// a sharded one).
    pub fn replica(&self, r: usize) -> crate::error::Result<&DeviceBuffer> {
        let parts = match &self.storage {
            Storage::Shards(s) => Some(&s.parts),
            _ => None,
        };
        if let Some(b) = parts {
            return b.get(r).ok_or_else(|| {
                crate::error::Error::internal(
                    "shards",
                    format!("piece {r} of a value in {}", b.len()),
                )
            });
        }
        match &self.storage {
            Storage::Replicas(b) => b.get(r).ok_or_else(|| {
                crate::error::Error::internal(
                    "replicas",
                    format!("replica {r} of a buffer of {}", b.len()),
                )
            }),
            _ => Err(crate::error::Error::internal(
                "replicas",
                "a buffer of one device where one per replica was expected",
            )),
        }
    }
}

impl Drop for DeviceBuffer {
    #[inline]
    fn drop(&mut self) {
        metrics::fall(Gauge::LiveBuffers);
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.storage {
            Storage::Reference(a) => write!(f, "Reference({:?})", a.shape()),
            Storage::ReferenceSize(v) => write!(f, "ReferenceSize({v})"),
            Storage::Pjrt(b) => write!(f, "{b:?}"),
            Storage::PjrtPending(b) => write!(f, "{b:?}"),
            Storage::Replicas(r) => f.debug_list().entries(r.iter()).finish(),
            Storage::Shards(s) => write!(f, "Shards({}, {:?})", s.sharding, s.parts),
        }
    }
}
