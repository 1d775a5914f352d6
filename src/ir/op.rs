//! The closed set of primitive operations.
//!
//! Five exhaustive `match`es over [`Op`] give an op its meaning: shape and
//! dtype inference (`ir::infer`), reference evaluation
//! (`backend::reference::eval`), StableHLO lowering (`backend::pjrt::lower`),
//! the gradient rule (`autograd::rules`) and the printer (`ir::print`). A
//! new variant does not compile until all handle it, and until
//! [`Op::family`] classifies it; helpers that only need a property of the
//! family (size arguments, checks, whether a use observes positions)
//! match families. Elementwise ops are rows of one table
//! (`ir::elementwise`) that every stage expands. User-level ops that cost
//! nothing extra as compositions (softmax, gelu, losses, mean) are built in
//! `tensor` from these.

use super::check::SizeCheck;
use super::conv::Conv;
use super::dot::Dot;
pub use super::elementwise::{BinaryOp, CmpOp, UnaryOp};
use super::leaf::LeafData;
use super::loops::Loop;
pub use super::window::{Window, WindowKind};
use crate::dtype::DType;
use crate::symint::{Shape, SizeExpr};
use std::hash::{Hash, Hasher};

/// A literal scalar, compared and hashed by its bits so that it can be part
/// of a cache key.
#[derive(Copy, Clone, Debug)]
pub struct Lit(pub f64);

impl PartialEq for Lit {
    fn eq(&self, other: &Lit) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for Lit {}
impl Hash for Lit {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state)
    }
}

/// Reductions over a set of dimensions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ReduceKind {
    Sum,
    Max,
    Min,
    /// The product; its identity 1 fills the padding of a dynamic dim.
    Prod,
}

/// The value a fill of padding (`Op::FillPadding`) writes: one that
/// cannot change the result of the op that reads the padding.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PadFill {
    /// 0 (false for Bool): for sums, contracted dims and masks.
    Zero,
    /// 1: the identity of a product.
    One,
    /// The lowest value (-inf for floats): the identity of max, the value
    /// that never wins an argmax.
    Lowest,
    /// The highest value (+inf for floats): the identity of min.
    Highest,
}

impl PadFill {
    /// The identity of the reduction `kind`.
    pub fn identity(kind: ReduceKind) -> PadFill {
        match kind {
            ReduceKind::Sum => PadFill::Zero,
            ReduceKind::Prod => PadFill::One,
            ReduceKind::Max => PadFill::Lowest,
            ReduceKind::Min => PadFill::Highest,
        }
    }

    /// The identity of the window reduction `kind`.
    pub fn window_identity(kind: WindowKind) -> PadFill {
        match kind {
            WindowKind::Sum => PadFill::Zero,
            WindowKind::Product => PadFill::One,
            WindowKind::Max => PadFill::Lowest,
            WindowKind::Min => PadFill::Highest,
        }
    }

    /// The value that never wins the arg-reduction `kind`.
    pub fn worst(kind: ArgKind) -> PadFill {
        match kind {
            ArgKind::Max => PadFill::Lowest,
            ArgKind::Min => PadFill::Highest,
        }
    }

    /// The printed name.
    pub fn name(self) -> &'static str {
        match self {
            PadFill::Zero => "zero",
            PadFill::One => "one",
            PadFill::Lowest => "lowest",
            PadFill::Highest => "highest",
        }
    }
}

/// Index-of-extremum reductions over one dimension.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ArgKind {
    Max,
    Min,
}

/// How a scatter combines a source element with the one it lands on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScatterMode {
    /// Adds it (PyTorch's `scatter_add`); duplicate indices accumulate.
    Add,
    /// Replaces it (PyTorch's `scatter`). With duplicate indices the
    /// reference keeps the last in row-major order of the index; XLA may
    /// keep any of them (PyTorch leaves it unspecified too).
    Overwrite,
}

/// A primitive operation. Operands are the node's `inputs` in the order
/// each variant documents; sizes the op needs at run time come from its
/// shape expressions (see `symint`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    // ----- leaves -----
    /// Data held by the leaf; a program parameter. No operands.
    /// Its shape is the node's: it comes with the data, not from an
    /// operation (and a captured step's replay writes it once).
    Data {
        /// Element type of the data.
        dtype: DType,
        /// The data (not part of the op's identity, see [`LeafData`]).
        data: LeafData,
    },
    /// A scalar constant inlined into the program. No operands.
    Scalar {
        /// The value.
        value: Lit,
        /// Its dtype.
        dtype: DType,
    },
    /// Counting 0, 1, 2, .. along `dim` of a tensor of `shape`. No operands.
    Iota {
        /// Element type.
        dtype: DType,
        /// Output shape (may be dynamic).
        shape: Shape,
        /// The dimension that counts.
        dim: usize,
    },
    /// The value of a size expression as an I64 scalar. No operands.
    SizeOf(SizeExpr),
    /// Uniform random values in `[0, 1)` from a counter-based generator;
    /// operand: an I64 scalar seed. Identical on every backend.
    RandomUniform {
        /// Element type (float).
        dtype: DType,
        /// Output shape (static).
        shape: Shape,
    },

    // ----- elementwise -----
    /// One operand.
    Unary(UnaryOp),
    /// Two operands of equal dtype and shape.
    Binary(BinaryOp),
    /// Two operands of equal dtype and shape; Bool result.
    Compare(CmpOp),
    /// Operands `cond` (Bool), `on_true`, `on_false`, all of one shape.
    Select,
    /// One operand converted to the dtype.
    Convert(DType),

    // ----- shape -----
    /// One operand placed into `shape`: operand dim `i` becomes output dim
    /// `dims[i]` (its size must be 1 or equal); the rest is repeated.
    Broadcast {
        /// Output shape.
        shape: Shape,
        /// Where each operand dimension goes.
        dims: Vec<usize>,
    },
    /// One operand with the same elements in row-major order.
    Reshape {
        /// Output shape.
        shape: Shape,
    },
    /// One operand with dimensions permuted: output dim `i` is operand dim
    /// `perm[i]`.
    Transpose {
        /// The permutation.
        perm: Vec<usize>,
    },
    /// One operand, `len` elements from `start` along `dim`. Along a
    /// dynamic dim, the real elements from `start`, at most `len` (as
    /// Python's `x[start:start + len]`, which clamps): the result is
    /// dynamic, bounded by `min(len, bound - start)`.
    Slice {
        /// The dimension.
        dim: usize,
        /// First index.
        start: usize,
        /// Number of elements.
        len: usize,
    },
    /// Operands joined along `dim`.
    Concat {
        /// The dimension.
        dim: usize,
    },
    /// One operand with its elements in reverse order along each of
    /// `dims`. Along a dynamic dim only the real elements are reversed:
    /// element `i` of `n` becomes element `n - 1 - i`, and the padding
    /// stays after them.
    Reverse {
        /// Sorted, distinct dims.
        dims: Vec<usize>,
    },
    /// One operand as a static tensor of its bound shape, positions past
    /// the real sizes set to `fill`.
    PadToBound {
        /// The padding value.
        fill: Lit,
    },
    /// One operand, unchanged, once `checks` hold when the program runs
    /// (a failed check fails the step, see `ir::check`). Its sizes are
    /// `shape`: where they differ from the operand's, a check asserts that
    /// they are equal, so later ops see one size instead of two.
    Guard {
        /// The result's shape (the operand's, or sizes checked equal to
        /// its sizes).
        shape: Shape,
        /// What must hold. The node's `size_deps` define the variables
        /// they mention that neither the operand nor an earlier program
        /// computes (a clamp can fold a checked size out of `shape`).
        checks: std::sync::Arc<[SizeCheck]>,
    },

    /// One operand, unchanged: its padding along `dims` (dims of dynamic
    /// size) set to `fill`, for the op that reads it
    /// (`ir::passes::operand_fills`), or, `shared`, zeroed once for the
    /// several products and sums that need it zero
    /// (`ir::passes::shared_fill`). Only those passes make it. Without
    /// padding (the reference backend) it is the operand.
    FillPadding {
        /// Sorted, distinct dims.
        dims: Vec<usize>,
        /// What the padding holds after.
        fill: PadFill,
        /// Written once for several readers (an optimization barrier in
        /// the XLA lowering), not fused into its one reader.
        shared: bool,
    },

    // ----- reductions -----
    /// One operand reduced over `dims` (removed from the shape).
    Reduce {
        /// The reduction.
        kind: ReduceKind,
        /// Sorted, distinct dims.
        dims: Vec<usize>,
    },
    /// Index (I64) of the first extremum along `dim` (removed).
    ArgReduce {
        /// Max or min.
        kind: ArgKind,
        /// The dimension.
        dim: usize,
    },

    // ----- windows -----
    /// One operand reduced over sliding windows (XLA's `reduce_window`):
    /// output position `o` reduces the operand's elements at
    /// `o * stride + k - padding.0` for window offsets `k`, reading the
    /// kind's identity in the padding and in dilation holes. On a dynamic
    /// dim the window is trivial, or (sum and product) keeps the size.
    ReduceWindow {
        /// The reduction.
        kind: WindowKind,
        /// The window, one entry per operand dim.
        window: Window,
    },
    /// Operands `x` and `source` (the shape of a `ReduceWindow` of `x`
    /// with `window`): zeros of `x`'s shape where each window adds its
    /// `source` element at the position it selects: the first maximum
    /// (minimum) of `x` in the window's row-major order, the first NaN
    /// before any number (as `argmax`), never padding. The gradient of a
    /// max (min) window reduction, as PyTorch's pooling. No dilation.
    SelectAndScatter {
        /// Which extremum each window selects.
        kind: ArgKind,
        /// The window, one entry per operand dim.
        window: Window,
    },

    // ----- linear algebra -----
    /// Operands `lhs` and `rhs` of one numeric dtype: StableHLO's
    /// `dot_general` with leading batch dims (see `ir::dot`). Serves
    /// `torch.matmul` of two batches (equal batch dims) and of a batch and
    /// a plain matrix (no broadcast of the matrix), and their gradients.
    Dot(Dot),
    /// Operands input `[N, C, spatial..]` and weight `[O, C / groups,
    /// kernel..]` (float, one dtype): StableHLO's `convolution` in
    /// PyTorch's layout, result `[N / batch_groups, O, out..]` (see
    /// `ir::conv`). Only the input's batch may be dynamic.
    Convolution(Conv),

    // ----- indexing -----
    /// Operands `x` and 1-D integer `index`: slices of `x` along `dim`.
    IndexSelect {
        /// The dimension.
        dim: usize,
    },
    /// Operands `x` and integer `index` of `x`'s rank:
    /// `out[i][j] = x[index[i][j]][j]` for `dim = 0` (PyTorch's `gather`).
    Gather {
        /// The dimension.
        dim: usize,
    },
    /// Operands `base`, 1-D `index`, `src`: `base` with slice `k` of `src`
    /// added at `index[k]` along `dim` (PyTorch's `index_add`).
    IndexAdd {
        /// The dimension.
        dim: usize,
    },
    /// Operands `base`, integer `index` of base's rank, `src` of index's
    /// shape: `out[index[i][j]][j] = src[i][j]` for `dim = 0`, combined
    /// with what is there by `mode` (PyTorch's `scatter_add` and
    /// `scatter`). Outside `dim` the index is at most the base's size.
    Scatter {
        /// The dimension.
        dim: usize,
        /// Add or overwrite.
        mode: ScatterMode,
    },
    /// Operand `x` (rank >= 1): the I64 permutation that sorts `x` along
    /// `dim`, stably (equal elements keep their order), NaN largest (as
    /// PyTorch), ascending or `descending`; with `first: Some(k)`, only its
    /// first `k` entries (`dim` has size `k`: top-k, which XLA selects
    /// without sorting everything). Along a dynamic `dim` the padding
    /// sorts after every real element. Sorted values are
    /// `x.gather(dim, perm)`, so one primitive serves `sort`, `argsort`
    /// and `topk`, and their gradients are gather's.
    Argsort {
        /// The dimension.
        dim: usize,
        /// Largest first.
        descending: bool,
        /// Keep only the first `k` of the permutation.
        first: Option<usize>,
    },
    /// Operands `base`, Bool `mask` of base's shape, 1-D `src`: `base` with
    /// the `k`-th true position of `mask` (row-major) set to `src[k]`.
    /// The inverse of `MaskedSelect`.
    MaskedScatter,

    // ----- dynamic: the output has a data-dependent size -----
    /// Operand `x`: I64 `[<=numel, rank]` coordinates of nonzeros, row-major.
    Nonzero,
    /// Operands `x` and Bool `mask` of the same shape: the selected elements
    /// in row-major order, `[<=numel]`.
    MaskedSelect,
    /// Operand `x`: its sorted distinct values, `[<=numel]`.
    Unique,
    /// Operands `x` and `unique(x)`: how often each unique value occurs
    /// (I64, the shape of `unique(x)`).
    UniqueCounts,

    // ----- collectives: across the replicas that run the program -----
    /// One static operand, combined elementwise by `kind` (sum, max or
    /// min, never `Prod`) across the `replicas` replicas that run the
    /// program; every replica gets the result. With one replica, the
    /// operand. See DESIGN.md "Several devices".
    AllReduce {
        /// The combination.
        kind: ReduceKind,
        /// How many replicas run the program.
        replicas: usize,
    },
    /// One static operand: the replicas' operands concatenated along
    /// `dim` in replica order (the dim grows `replicas` times); every
    /// replica gets the result.
    AllGather {
        /// The dimension.
        dim: usize,
        /// How many replicas run the program.
        replicas: usize,
    },
    /// One static operand whose `dim` divides by `replicas`: the sum over
    /// the replicas, cut along `dim` into `replicas` equal blocks; replica
    /// `r` gets block `r`.
    ReduceScatter {
        /// The dimension.
        dim: usize,
        /// How many replicas run the program.
        replicas: usize,
    },
    /// No operands: the index of the replica running the program (an I64
    /// scalar; 0 on one device).
    ReplicaId,
    /// One operand, unchanged: a sharding constraint of an SPMD program
    /// (`Tensor::mark_sharding` on a pending value), lowered as XLA's
    /// `Sharding` custom call. Outside an SPMD program, the operand.
    Sharding(std::sync::Arc<super::sharding::Sharding>),
    // ----- control flow -----
    /// A device loop (see `ir::loops`): operands the initial carries, the
    /// trip count of a `fori_loop` given as a tensor, then the captured
    /// values. Its body and condition are programs held in the op. The
    /// node's own value is a token; `LoopResult` reads its results.
    While(std::sync::Arc<Loop>),
    /// Operand a `While` node: the final value of carry `index`.
    LoopResult {
        /// The carry.
        index: usize,
    },
}

/// A family of ops, as tinygrad's `GroupOp` sets: helpers over [`Op`]
/// match the handful of families instead of each variant. [`Op::family`]
/// is the one exhaustive list of which variant is in which family; a
/// family carries the run-time size arguments and checks its members may
/// have, so [`Op::size_args`] and [`Op::checks`] read them off it and a
/// new variant is classified once.
#[derive(Copy, Clone, Debug)]
pub enum Family<'a> {
    /// No operand to follow (a seed aside): `Data`, `Scalar`, `Iota`,
    /// `SizeOf`, `RandomUniform`. `sizes`: the shape or size it is made of.
    Source {
        /// The size expressions the op evaluates.
        sizes: &'a [SizeExpr],
    },
    /// Element `i` of the result from element `i` of each operand:
    /// `Unary`, `Binary`, `Compare`, `Select`, `Convert` (the table of
    /// `ir::elementwise`). No size arguments, no checks.
    Elementwise,
    /// The operand's elements moved, repeated, cut, placed or renamed, their
    /// values unchanged: `Broadcast`, `Reshape`, `Transpose`, `Slice`,
    /// `Concat`, `Reverse`, `PadToBound`, `Guard`, `Sharding`,
    /// `FillPadding`.
    Layout {
        /// The target shape of `Broadcast`, `Reshape` and `Guard`.
        sizes: &'a [SizeExpr],
        /// A guard's checks.
        checks: &'a [SizeCheck],
    },
    /// Reductions over whole dims: `Reduce`, `ArgReduce`. No size
    /// arguments, no checks.
    Reduction,
    /// Sliding windows: `ReduceWindow`, `SelectAndScatter`. No size
    /// arguments, no checks.
    Window,
    /// Sums of products: `Dot`, `Convolution`. No size arguments, no checks.
    Contraction,
    /// Reading or writing at indices or a mask: `IndexSelect`, `Gather`,
    /// `IndexAdd`, `Scatter`, `Argsort`, `MaskedScatter`. No size
    /// arguments, no checks.
    Indexing,
    /// A result whose size depends on the data: `Nonzero`, `MaskedSelect`,
    /// `Unique`, `UniqueCounts`. No size arguments, no checks.
    Dynamic,
    /// Across the replicas that run the program: `AllReduce`, `AllGather`,
    /// `ReduceScatter`, `ReplicaId`. No size arguments, no checks.
    Collective,
    /// Device loops: `While`, `LoopResult`.
    Loop {
        /// A loop's sizes from outside its programs.
        sizes: &'a [SizeExpr],
        /// The checks of its programs.
        checks: &'a [SizeCheck],
    },
}

impl Op {
    /// The op's family, with the size arguments and checks it carries.
    pub fn family(&self) -> Family<'_> {
        match self {
            Op::Data { .. } | Op::Scalar { .. } => Family::Source { sizes: &[] },
            Op::Iota { shape, .. } | Op::RandomUniform { shape, .. } => {
                Family::Source { sizes: shape }
            }
            Op::SizeOf(e) => Family::Source {
                sizes: std::slice::from_ref(e),
            },
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Convert(_) => {
                Family::Elementwise
            }
            Op::Broadcast { shape, .. } | Op::Reshape { shape } => Family::Layout {
                sizes: shape,
                checks: &[],
            },
            Op::Guard { shape, checks } => Family::Layout {
                sizes: shape,
                checks,
            },
            Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Concat { .. }
            | Op::Reverse { .. }
            | Op::PadToBound { .. }
            | Op::FillPadding { .. }
            | Op::Sharding(_) => Family::Layout {
                sizes: &[],
                checks: &[],
            },
            Op::Reduce { .. } | Op::ArgReduce { .. } => Family::Reduction,
            Op::ReduceWindow { .. } | Op::SelectAndScatter { .. } => Family::Window,
            Op::Dot(_) | Op::Convolution(_) => Family::Contraction,
            Op::IndexSelect { .. }
            | Op::Gather { .. }
            | Op::IndexAdd { .. }
            | Op::Scatter { .. }
            | Op::Argsort { .. }
            | Op::MaskedScatter => Family::Indexing,
            Op::Nonzero | Op::MaskedSelect | Op::Unique | Op::UniqueCounts => Family::Dynamic,
            Op::AllReduce { .. }
            | Op::AllGather { .. }
            | Op::ReduceScatter { .. }
            | Op::ReplicaId => Family::Collective,
            Op::While(l) => Family::Loop {
                sizes: &l.outer_sizes,
                checks: &l.checks,
            },
            Op::LoopResult { .. } => Family::Loop {
                sizes: &[],
                checks: &[],
            },
        }
    }

    /// The size expressions the op evaluates at run time: its own
    /// arguments, not its output shape. A program must be able to compute
    /// every variable they mention (see `runtime::canonical`).
    pub fn size_args(&self) -> &[SizeExpr] {
        match self.family() {
            Family::Source { sizes }
            | Family::Layout { sizes, .. }
            | Family::Loop { sizes, .. } => sizes,
            Family::Elementwise
            | Family::Reduction
            | Family::Window
            | Family::Contraction
            | Family::Indexing
            | Family::Dynamic
            | Family::Collective => &[],
        }
    }

    /// The size arguments of [`Op::size_args`], for rewriting (a loop's
    /// body instantiated on other operands, see `autograd::loops`).
    pub(crate) fn size_args_mut(&mut self) -> &mut [SizeExpr] {
        match self {
            Op::Iota { shape, .. }
            | Op::RandomUniform { shape, .. }
            | Op::Broadcast { shape, .. }
            | Op::Reshape { shape }
            | Op::Guard { shape, .. } => shape,
            Op::SizeOf(e) => std::slice::from_mut(e),
            Op::While(l) => &mut std::sync::Arc::make_mut(l).outer_sizes,
            // `Op::family` lists every variant; the ones above are all
            // whose family carries sizes.
            other => {
                debug_assert!(other.size_args().is_empty(), "{} has sizes", other.name());
                &mut []
            }
        }
    }

    /// The size checks the op makes when the program runs: a guard's,
    /// and those of a loop's programs. A program must be able to compute
    /// every variable a guard's mention, as for [`Op::size_args`]; a
    /// loop's mention its programs' variables, which it computes inside.
    pub(crate) fn checks(&self) -> &[SizeCheck] {
        match self.family() {
            Family::Layout { checks, .. } | Family::Loop { checks, .. } => checks,
            Family::Source { .. }
            | Family::Elementwise
            | Family::Reduction
            | Family::Window
            | Family::Contraction
            | Family::Indexing
            | Family::Dynamic
            | Family::Collective => &[],
        }
    }

    /// The op's name as the printer shows it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Data { .. } => "data",
            Op::Scalar { .. } => "scalar",
            Op::Iota { .. } => "iota",
            Op::SizeOf(_) => "size_of",
            Op::RandomUniform { .. } => "random_uniform",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Compare(c) => c.name(),
            Op::Select => "select",
            Op::Convert(_) => "convert",
            Op::Broadcast { .. } => "broadcast",
            Op::Reshape { .. } => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Slice { .. } => "slice",
            Op::Concat { .. } => "concat",
            Op::Reverse { .. } => "reverse",
            Op::PadToBound { .. } => "pad_to_bound",
            Op::Guard { .. } => "guard",
            Op::FillPadding { .. } => "fill_padding",
            Op::Reduce { kind, .. } => match kind {
                ReduceKind::Sum => "reduce_sum",
                ReduceKind::Max => "reduce_max",
                ReduceKind::Min => "reduce_min",
                ReduceKind::Prod => "reduce_prod",
            },
            Op::ArgReduce { kind, .. } => match kind {
                ArgKind::Max => "argmax",
                ArgKind::Min => "argmin",
            },
            Op::ReduceWindow { kind, .. } => match kind {
                WindowKind::Sum => "reduce_window_sum",
                WindowKind::Product => "reduce_window_prod",
                WindowKind::Max => "reduce_window_max",
                WindowKind::Min => "reduce_window_min",
            },
            Op::SelectAndScatter { kind, .. } => match kind {
                ArgKind::Max => "select_and_scatter_max",
                ArgKind::Min => "select_and_scatter_min",
            },
            Op::Dot(_) => "dot_general",
            Op::Convolution(_) => "convolution",
            Op::IndexSelect { .. } => "index_select",
            Op::Gather { .. } => "gather",
            Op::IndexAdd { .. } => "index_add",
            Op::Scatter { mode, .. } => match mode {
                ScatterMode::Add => "scatter_add",
                ScatterMode::Overwrite => "scatter",
            },
            Op::Argsort { .. } => "argsort",
            Op::MaskedScatter => "masked_scatter",
            Op::Nonzero => "nonzero",
            Op::MaskedSelect => "masked_select",
            Op::Unique => "unique",
            Op::UniqueCounts => "unique_counts",
            Op::AllReduce { kind, .. } => match kind {
                ReduceKind::Sum => "all_reduce_sum",
                ReduceKind::Max => "all_reduce_max",
                ReduceKind::Min => "all_reduce_min",
                ReduceKind::Prod => "all_reduce_prod",
            },
            Op::AllGather { .. } => "all_gather",
            Op::ReduceScatter { .. } => "reduce_scatter",
            Op::ReplicaId => "replica_id",
            Op::Sharding(_) => "sharding",
            Op::While(l) => l.name(),
            Op::LoopResult { .. } => "loop_result",
        }
    }
}
