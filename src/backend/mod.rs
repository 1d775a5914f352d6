//! Backends: what compiles and runs a [`Program`].
//!
//! Two implement the small [`Backend`] trait: the embedded reference
//! interpreter (`reference`) and XLA through a PJRT plugin (`pjrt`).

pub mod pjrt;
pub(crate) mod reference;

use crate::host::HostArray;
use crate::runtime::program::Program;
use crate::Result;
use std::any::Any;
use std::sync::Arc;

/// A backend-owned piece of device memory (downcast by its backend).
pub(crate) type BufferRef = Arc<dyn Any + Send + Sync>;

/// A compiled program (downcast by its backend).
pub(crate) type ExecutableRef = Arc<dyn Any + Send + Sync>;

/// A size handed to or returned from a program.
#[derive(Clone, Debug)]
pub(crate) enum SizeArg {
    /// Known on the host.
    Host(i64),
    /// Held by a device buffer of this backend.
    Device(BufferRef),
}

/// The sizes of a tensor's dynamic dimensions, in order (inline for the
/// few that tensors have).
pub(crate) type Sizes = smallvec::SmallVec<[SizeArg; 2]>;

/// A tensor's buffer and, per dynamic dimension in order, its size.
pub(crate) type TensorData = (BufferRef, Sizes);

/// The arguments of one execution, in the program's parameter order.
pub(crate) struct ExecArgs {
    /// For each parameter: its buffer and sizes (inline for a few: a
    /// captured step's replay allocates nothing for them).
    pub params: smallvec::SmallVec<[TensorData; 4]>,
    /// For each `VarSource::Arg`: the variable's value.
    pub vars: Vec<SizeArg>,
}

/// What one execution produced, in the program's output order.
pub(crate) struct ExecOutputs {
    /// For each output: its buffer and sizes.
    pub tensors: Vec<TensorData>,
    /// The requested size outputs.
    pub sizes: Vec<SizeArg>,
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
    fn execute(&self, exe: &ExecutableRef, args: ExecArgs) -> Result<ExecOutputs>;
    /// Blocks until every program started by `execute` has finished, and
    /// reports the error of one that failed.
    fn synchronize(&self) -> Result<()>;
    /// Copies exact host data to the device; `bound` is the static shape to
    /// allocate (equal to the data's shape, or larger for `mark_dynamic`).
    fn upload(&self, host: &HostArray, bound: &[usize]) -> Result<BufferRef>;
    /// Copies the real elements (`shape`, within the buffer's bound) to the
    /// host.
    fn download(&self, buffer: &BufferRef, shape: &[usize]) -> Result<HostArray>;
    /// Reads a size buffer produced by `execute`.
    fn read_size(&self, buffer: &BufferRef) -> Result<i64>;
    /// The concrete backend, for backend-specific debugging hooks.
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }
}
