//! The crate's one error type.
//!
//! Every variant names the operation that failed and, where shapes matter,
//! the shapes with their bounds (`[<=5, 2]`) so a message alone tells the user
//! what went wrong and how to fix it.

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in lazyxla.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An op was given operands whose shapes do not fit together.
    #[error("{op}: {message}")]
    Shape {
        /// The op that rejected its operands.
        op: &'static str,
        /// What was wrong, with the shapes and bounds involved, and the fix.
        message: String,
    },
    /// An op was given operands of unsupported or mismatching dtypes.
    #[error("{op}: {message}")]
    DType {
        /// The op that rejected its operands.
        op: &'static str,
        /// What was wrong and the fix.
        message: String,
    },
    /// A dimension index is out of range for the tensor's rank.
    #[error("{op}: dimension {dim} is out of range for a tensor of shape {shape} (rank {rank}); dims count from 0, or from the end when negative")]
    DimOutOfRange {
        /// The op that was called.
        op: &'static str,
        /// The dimension that was asked for.
        dim: i64,
        /// The tensor's rank.
        rank: usize,
        /// The tensor's shape with bounds.
        shape: String,
    },
    /// An op does not support a dynamic (bounded) dimension on this input.
    #[error("{op} does not support the dynamic dimension {dim} of its input (shape {shape}); call `pad_to_bound(fill)` to get a static tensor of the bound shape, or `materialize()` the size first")]
    DynamicUnsupported {
        /// The op that was called.
        op: &'static str,
        /// The dynamic dimension.
        dim: usize,
        /// The input shape with bounds.
        shape: String,
    },
    /// Two dynamic sizes could not be proven equal.
    #[error("{op}: cannot prove that the sizes {lhs} and {rhs} are equal (operand shapes {lhs_shape} and {rhs_shape}); use operands derived from the same dynamic tensor, or `pad_to_bound(fill)` both")]
    UnprovableEquality {
        /// The op that was called.
        op: &'static str,
        /// The left size expression with its bounds.
        lhs: String,
        /// The right size expression with its bounds.
        rhs: String,
        /// The left operand's shape.
        lhs_shape: String,
        /// The right operand's shape.
        rhs_shape: String,
    },
    /// Host data given to a constructor does not match the shape.
    #[error("{op}: {message}")]
    InvalidArgument {
        /// The constructor or op that was called.
        op: &'static str,
        /// What was wrong and the fix.
        message: String,
    },
    /// A runtime size exceeded the declared upper bound.
    #[error("{op}: dimension {dim} has length {len}, above its declared upper bound {bound}; raise the bound passed to mark_dynamic")]
    BoundExceeded {
        /// The op that was called.
        op: &'static str,
        /// The dimension.
        dim: usize,
        /// The real length.
        len: usize,
        /// The declared bound.
        bound: usize,
    },
    /// Tensors from two different devices met in one op.
    #[error(
        "{op}: operands live on different devices ({lhs} and {rhs}); move one with `to_device`"
    )]
    DeviceMismatch {
        /// The op that was called.
        op: &'static str,
        /// One device.
        lhs: String,
        /// The other device.
        rhs: String,
    },
    /// The backend failed to compile a program.
    #[error("compile failed on {backend}: {message}")]
    Compile {
        /// The backend's name.
        backend: String,
        /// The backend's message (XLA's diagnostic for PJRT), plus where the
        /// program was dumped when `LAZYXLA_DUMP` is set.
        message: String,
    },
    /// The backend failed to run a program or move data.
    #[error("{backend} failed during {op}: {message}")]
    Backend {
        /// The backend's name.
        backend: String,
        /// What the runtime was doing (execute, upload, download).
        op: &'static str,
        /// The backend's message.
        message: String,
    },
    /// A step's program failed. Its pending tensors stay pending (and
    /// valid), so every later step that computes them fails the same way
    /// until they are dropped or reassigned: the message names them.
    #[error("{source} [while computing {failed}: the pending {pending} stay pending, and every step that computes them fails the same way until they are dropped or reassigned]")]
    StepFailed {
        /// What could not be computed: a value (dtype, shape with bounds,
        /// the op that makes it) when the backend can tell, else the
        /// program.
        failed: String,
        /// The tensors that need it (dtype, shape, op), largest first.
        pending: String,
        /// Why it failed.
        source: Box<Error>,
    },
    /// A size check that recording could not decide failed when the
    /// program ran (see `ir::check`): two sizes an op needs equal were not,
    /// a computed size was negative, or an element count did not divide.
    /// The step bound none of its results.
    #[error("{op}: {message} [the step changed nothing: tensors assigned since the last step keep their earlier values, and results that need this check fail the same way until dropped]")]
    SizeCheckFailed {
        /// The op that recorded the check.
        op: &'static str,
        /// The check, both sizes with their bounds and values, and the fix.
        message: String,
    },
    /// A captured step would record more distinct graphs than its
    /// [`max_graphs`](crate::CapturedStep::max_graphs) limit allows.
    #[error("capture: this call would record a new graph, but the step has already recorded {limit}, its limit (max_graphs({limit})); a new graph comes from new input dtypes, static sizes or bounds, or a change in the tensors the step reads (shape, dtype, gradient presence). The step did not run and every tensor keeps its value; raise the limit with max_graphs(n), or keep those fixed (mark_dynamic for sizes that vary)")]
    GraphLimit {
        /// The limit that was reached.
        limit: usize,
    },
    /// A graph too large to compile, or one that grew with every program
    /// compiled at one sync site (`runtime::diagnose`): refused before it
    /// reaches XLA, whose compiler can abort the process on such graphs.
    #[error("{site}: {message}")]
    GrowingGraph {
        /// The sync that would have compiled it (`mark_step at src/main.rs:40`).
        site: String,
        /// How large, how it grew, and the fix.
        message: String,
    },
    /// A file could not be read or written (checkpoints).
    #[error("{op}: {path}: {message}")]
    Io {
        /// The function that failed.
        op: &'static str,
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// No PJRT plugin could be loaded.
    #[error("{0}")]
    Plugin(String),
    /// An invariant of the runtime was broken; this is a lazyxla bug.
    #[error("internal error in {op}: {message} (this is a lazyxla bug, please report it)")]
    Internal {
        /// Where it happened.
        op: &'static str,
        /// What was found.
        message: String,
    },
}

impl Error {
    pub(crate) fn shape(op: &'static str, message: impl Into<String>) -> Error {
        Error::Shape {
            op,
            message: message.into(),
        }
    }

    pub(crate) fn dtype(op: &'static str, message: impl Into<String>) -> Error {
        Error::DType {
            op,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(op: &'static str, message: impl Into<String>) -> Error {
        Error::InvalidArgument {
            op,
            message: message.into(),
        }
    }

    pub(crate) fn internal(op: &'static str, message: impl Into<String>) -> Error {
        Error::Internal {
            op,
            message: message.into(),
        }
    }
}
