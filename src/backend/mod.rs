//! Backends: what compiles and runs a [`Program`].
//!
//! Two implement the small [`Backend`] trait: the embedded reference
//! interpreter (`reference`) and XLA through a PJRT plugin (`pjrt`).

mod buffer;
pub(crate) mod cpu_devices;
pub(crate) mod cpu_dispatch;
pub(crate) mod group;
pub mod pjrt;
pub(crate) mod reference;

pub(crate) use buffer::{DeviceBuffer, Shards, Storage};
pub(crate) use group::Placement;

use crate::error::Result;
use crate::host::HostArray;
use crate::ir::program::Program;
use std::any::Any;
use std::sync::Arc;

/// A compiled program (downcast by its backend).
pub(crate) type ExecutableRef = Arc<dyn Any + Send + Sync>;

/// A size handed to a program.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SizeArg<'a> {
    /// Known on the host.
    Host(i64),
    /// Held by a device buffer of this backend.
    Device(&'a DeviceBuffer),
}

/// A tensor argument: its buffer and, per dynamic dimension in order, its
/// size (inline for the few that tensors have).
pub(crate) type TensorArg<'a> = (&'a DeviceBuffer, smallvec::SmallVec<[SizeArg<'a>; 2]>);

/// The arguments of one execution, in the program's parameter order,
/// borrowed from the data and size cells that hold them.
pub(crate) struct ExecArgs<'a> {
    /// For each parameter: its buffer and sizes (inline for a few: a
    /// captured step's replay allocates nothing for them).
    pub params: smallvec::SmallVec<[TensorArg<'a>; 4]>,
    /// For each `VarSource::Arg`: the variable's value.
    pub vars: smallvec::SmallVec<[SizeArg<'a>; 2]>,
    /// The parameters (positions in `params`, sorted) whose buffers this
    /// execution donates to the results the program aliases them with
    /// (`Program::aliases`): a backend that [`Backend::donates`] writes
    /// those results into them, and the buffers are gone afterwards. An
    /// aliased parameter not listed keeps its buffer.
    pub donate: smallvec::SmallVec<[usize; 4]>,
}

/// What one execution produced: every output buffer in the program's
/// order, each taken once. For each result, its buffer, then one buffer
/// per dynamic dimension holding that dimension's size; after the
/// results, the requested size outputs; last, for a program with size
/// checks, their status (see [`Backend::check_status`]).
///
/// One flat list, the one the plugin's wrapper fills: results reach their
/// tensors with no list of their own, allocated or copied.
pub(crate) struct ExecOutputs {
    buffers: Vec<Option<DeviceBuffer>>,
}

impl ExecOutputs {
    /// The outputs, in order.
    pub fn new(buffers: Vec<Option<DeviceBuffer>>) -> ExecOutputs {
        ExecOutputs { buffers }
    }

    /// How many outputs a result of `shape` takes: its buffer and one size
    /// per dynamic dimension.
    pub fn of_result(shape: &[crate::symint::SizeExpr]) -> usize {
        1 + shape.iter().filter(|d| d.as_const().is_none()).count()
    }

    /// Every output still there to take, in order (`None` for one taken).
    pub fn buffers(&self) -> impl Iterator<Item = Option<&DeviceBuffer>> {
        self.buffers.iter().map(Option::as_ref)
    }

    /// How many outputs the program returned.
    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    /// True when output `at` is there to take.
    pub fn has(&self, at: usize) -> bool {
        matches!(self.buffers.get(at), Some(Some(_)))
    }

    /// Takes the last output (a program's check status).
    pub fn take_last(&mut self) -> Result<DeviceBuffer> {
        let at = self.buffers.len().checked_sub(1).ok_or_else(|| {
            crate::error::Error::internal("execute", "a program with checks returned no status")
        })?;
        let b = self.take(at)?;
        self.buffers.pop();
        Ok(b)
    }

    /// Takes output `at`.
    pub fn take(&mut self, at: usize) -> Result<DeviceBuffer> {
        self.buffers
            .get_mut(at)
            .and_then(Option::take)
            .ok_or_else(|| {
                crate::error::Error::internal(
                    "execute",
                    format!(
                        "output {at} of {} is missing or was taken already",
                        self.buffers.len()
                    ),
                )
            })
    }
}

/// Compiles and runs programs, and moves data between host and device.
pub(crate) trait Backend: Send + Sync {
    /// A short name for messages and the report (`reference`, `pjrt:cpu`).
    fn name(&self) -> String;
    /// Compiles a canonical program.
    fn compile(&self, program: &Program) -> Result<ExecutableRef>;
    /// Starts a compiled program. Its results may still be computing when
    /// this returns (the backend orders their uses after it); an error of
    /// the running program is reported by the next `execute`,
    /// `synchronize` or read of its results.
    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs>;
    /// Blocks until every program started by `execute` has finished, and
    /// reports the error of one that failed.
    fn synchronize(&self) -> Result<()>;
    /// Copies exact host data to the device; `bound` is the static shape to
    /// allocate (equal to the data's shape, or larger for `mark_dynamic`).
    fn upload(&self, host: &HostArray, bound: &[usize]) -> Result<DeviceBuffer>;
    /// [`Backend::upload`] of host data nothing else holds: a backend may
    /// keep `host` and use its memory in place instead of copying it (even
    /// write it, when the buffer is donated).
    fn upload_owned(&self, host: &Arc<HostArray>, bound: &[usize]) -> Result<DeviceBuffer> {
        self.upload(host, bound)
    }
    /// Copies the real elements (`shape`, within the buffer's bound) to the
    /// host.
    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray>;
    /// Reads the status that a program with size checks returns as its
    /// last output (`ir::check`), waiting for the program if it still
    /// runs, and turns a failed check into its error.
    fn check_status(&self, exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()>;
    /// Reads a size buffer produced by `execute`.
    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64>;
    /// True when the backend writes a program's aliased results into the
    /// donated parameters' buffers (`ExecArgs::donate`); the runtime then
    /// looks for parameters to donate. False for the reference backend,
    /// which ignores aliasing.
    fn donates(&self) -> bool {
        false
    }
    /// The concrete backend, for backend-specific debugging hooks.
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }

    // ----- several devices (`group`, DESIGN.md "Several devices") -----

    /// Where this backend's programs run and its values live: one
    /// device, or a [`group::Group`] of replicas or of a mesh, whose
    /// buffers hold one buffer per device.
    fn placement(&self) -> Placement {
        Placement::One
    }

    /// Uploads one host array per device of the placement, each into a
    /// buffer of shape `bound`.
    fn upload_replicas(&self, hosts: &[HostArray], bound: &[usize]) -> Result<DeviceBuffer> {
        match hosts {
            [h] => self.upload(h, bound),
            _ => Err(crate::error::Error::internal(
                "upload",
                format!("{} arrays for one device", hosts.len()),
            )),
        }
    }

    /// One size per device of the placement as a size buffer, which
    /// [`SizeArg::Device`] passes to programs (a replicated backend's
    /// per-replica sizes, from `parallel::shard`).
    fn upload_sizes(&self, sizes: &[i64]) -> Result<DeviceBuffer> {
        Err(crate::error::Error::internal(
            "upload",
            format!("{} sizes for a device that is not replicated", sizes.len()),
        ))
    }

    /// Host data of a static shape split over an SPMD backend's devices
    /// by `sharding` before the upload: each device receives only its
    /// piece.
    fn upload_sharded(
        &self,
        host: &HostArray,
        sharding: &Arc<crate::ir::sharding::Sharding>,
    ) -> Result<DeviceBuffer> {
        let _ = host;
        Err(crate::error::Error::internal(
            "upload",
            format!(
                "a sharding of {} devices on a backend that is not SPMD",
                sharding.device_count()
            ),
        ))
    }

    /// Every replica's real elements; replica `r`'s shape is `shapes[r]`.
    fn download_replicas(
        &self,
        buffer: &DeviceBuffer,
        shapes: &[Vec<usize>],
    ) -> Result<Vec<HostArray>> {
        match shapes {
            [s] => Ok(vec![self.download(buffer, s)?]),
            _ => Err(crate::error::Error::internal(
                "download",
                format!("{} shapes for one device", shapes.len()),
            )),
        }
    }

    /// Every replica's value of a size buffer.
    fn read_sizes(&self, buffer: &DeviceBuffer) -> Result<Vec<i64>> {
        Ok(vec![self.read_size(buffer)?])
    }

    /// A copy of `buffer` (held by `from`) made directly on this backend's
    /// device or devices, with no transfer through the host, when both
    /// can do that (devices of one PJRT client; reference devices);
    /// `None` when the copy must go through the host.
    fn copy_from(&self, from: &dyn Backend, buffer: &DeviceBuffer) -> Result<Option<DeviceBuffer>> {
        let _ = (from, buffer);
        Ok(None)
    }
}
