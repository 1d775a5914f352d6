//! The canonical program: what a backend compiles, and the cache key.
//!
//! A program is a graph in topological order with relative node indices.
//! Device data become parameters; small scalars stay inline. Its key is
//! the program's structure serialised through `Hash` with size variables
//! numbered by first appearance, so it holds op structure, dtypes, static
//! sizes and bounds, and never data values, tensor ids or real dynamic sizes.

use super::Op;
use crate::dtype::DType;
use crate::symint::var::{Renumbering, VAR_TAG};
use crate::symint::{Shape, VarRef};
use std::hash::{Hash, Hasher};

/// A program node's operands: inline up to three, as nearly every op's
/// are (passes copy and drop whole programs; a node should not allocate
/// for them).
pub(crate) type PInputs = smallvec::SmallVec<[usize; 3]>;

/// One node of a program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PNode {
    pub op: Op,
    /// Indices of operand nodes (all smaller than this node's index).
    pub inputs: PInputs,
    pub dtype: DType,
    pub shape: Shape,
}

/// Where a program gets the value of a size variable it needs.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) enum VarSource {
    /// The size of dimension `dim` of an earlier node.
    Dim { node: usize, dim: usize },
    /// Argument `k` of the execution (`ExecArgs::vars[k]`).
    Arg(usize),
}

/// A size variable the program needs, with where it comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VarInfo {
    pub var: VarRef,
    pub source: VarSource,
}

/// A canonical program. A loop's body and condition are programs too,
/// held in its `Op::While` (see `ir::loops`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Program {
    pub nodes: Vec<PNode>,
    /// Node indices of the `Data` leaves, in parameter order.
    pub params: Vec<usize>,
    /// The variables that op arguments (iota and broadcast shapes, sizes
    /// as values, ..) or size outputs need, in order of first need.
    pub vars: Vec<VarInfo>,
    /// Node indices whose values are returned, in order.
    pub outputs: Vec<usize>,
    /// Indices into `vars` whose values are returned.
    pub size_outputs: Vec<usize>,
    /// Aliased parameters: `(parameter, output)` pairs, by position in
    /// `params` and `outputs`, sorted and each position at most once, of
    /// one dtype and buffer shape: the old value of a tensor the program
    /// updates and its new value (static), or a dynamic value and the
    /// `cat` that extends it in the same buffer (`runtime::donation`,
    /// extensions). A backend that donates writes the
    /// output into the parameter's buffer when an execution donates it
    /// (`ExecArgs::donate`, what the runtime proved nobody reads after
    /// the program starts), and into fresh memory otherwise (DESIGN.md
    /// "Donated buffers"). Part of the key.
    pub aliases: Vec<(usize, usize)>,
    /// How a backend may compute the program's `f32` matrix products
    /// (`set_float32_matmul_precision`, as set when it was traced). Part
    /// of the key.
    pub matmul_precision: MatmulPrecision,
    /// The parameters whose buffers are longer than their node's bounds
    /// (by position in `params`, sorted), with the buffers' static shape:
    /// data of a bucketed dim (`runtime::buckets`), narrowed to the bounds
    /// as the program reads them. Part of the key.
    pub param_buffers: Vec<(usize, Vec<usize>)>,
    /// The outputs written into buffers longer than their bounds (by
    /// position in `outputs`, sorted), with the buffers' static shape:
    /// bucketed results, padded after their bounds. Part of the key.
    pub output_buffers: Vec<(usize, Vec<usize>)>,
    /// The parameters split over the devices of an SPMD backend (by
    /// position in `params`, sorted), with their sharding; every other
    /// parameter of an SPMD program is whole on every device. Part of
    /// the key.
    pub param_shardings: Vec<(usize, std::sync::Arc<super::sharding::Sharding>)>,
    /// The variables (by id, sorted) whose zones the XLA lowering keeps in
    /// their source's layout, masked rather than packed: empty until the
    /// lowering pass `ir::passes::zone_masks` decides.
    pub masked_zones: Vec<u64>,
}

/// The internal precision of `f32` matrix products, PyTorch's
/// `torch.set_float32_matmul_precision` levels. A CPU computes every level
/// in `f32`; an accelerator may use TensorFloat-32 or bf16 passes below
/// `Highest` (XLA's `precision_config` `HIGH` and `DEFAULT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) enum MatmulPrecision {
    /// `f32` throughout (`"highest"`, PyTorch's default).
    #[default]
    Highest,
    /// TensorFloat-32, or three bf16 passes, where faster (`"high"`).
    High,
    /// The backend's fastest (`"medium"`): TensorFloat-32 on NVIDIA GPUs,
    /// bf16 on TPUs, as JAX and PyTorch/XLA compute by default.
    Medium,
}

/// Collects the bytes that `Hash` writes, so the key is an exact encoding
/// rather than a digest that could collide. Size variables are written as
/// their number of first appearance (see `VarRef`'s `Hash`), never their
/// process-wide id: a key holds no identities.
pub(crate) struct KeyWriter {
    /// The key so far.
    pub bytes: Vec<u8>,
    vars: Renumbering,
}

impl KeyWriter {
    /// An empty key with room for `capacity` bytes.
    #[cfg(test)]
    pub fn with_capacity(capacity: usize) -> KeyWriter {
        KeyWriter::into(Vec::with_capacity(capacity))
    }

    /// An empty key written into `buffer` (cleared; its capacity kept).
    pub fn into(mut buffer: Vec<u8>) -> KeyWriter {
        buffer.clear();
        KeyWriter {
            bytes: buffer,
            vars: Renumbering::default(),
        }
    }
}

impl Hasher for KeyWriter {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes)
    }
    fn write_i128(&mut self, v: i128) {
        if v & VAR_TAG == VAR_TAG {
            let id = (v & !VAR_TAG) as u64;
            let n = self.vars.number_id(id) as u64;
            self.bytes.extend_from_slice(&n.to_ne_bytes());
        } else {
            self.bytes.extend_from_slice(&v.to_ne_bytes());
        }
    }
}

impl Program {
    /// The cache key (see the module docs). The runtime writes the same
    /// bytes straight from the graph (`Traced::key`) so a cache hit never
    /// builds a `Program`; this is the definition it must match.
    #[cfg(test)]
    pub fn key(&self) -> Vec<u8> {
        let mut w = KeyWriter::with_capacity(64 * self.nodes.len());
        self.hash(&mut w);
        w.bytes
    }

    /// Every size check of the program's guards, in node order (the order
    /// in which a backend reports the first that fails).
    pub fn checks(&self) -> Vec<super::check::SizeCheck> {
        self.nodes
            .iter()
            .flat_map(|n| n.op.checks().iter().cloned())
            .collect()
    }

    /// The position of each variable in `vars`, by variable id.
    pub fn var_positions(&self) -> std::collections::HashMap<u64, usize> {
        self.vars
            .iter()
            .enumerate()
            .map(|(i, v)| (v.var.0.id, i))
            .collect()
    }
}

/// `items`, `(index, item)` pairs, by index for indices below `n`; the
/// first of several with one index wins, as `Iterator::find` would.
pub(crate) fn by_index<X>(n: usize, items: &[(usize, X)]) -> Vec<Option<&(usize, X)>> {
    let mut out = vec![None; n];
    for it in items.iter().rev() {
        if let Some(slot) = out.get_mut(it.0) {
            *slot = Some(it);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::runtime::canonical::trace;
    use crate::{Device, Tensor};

    #[test]
    fn program_key_matches_the_program() {
        Device::reference().scoped(|| {
            let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0], &[2, 2]).unwrap();
            let n = x.nonzero();
            let y = (&n.to_dtype(crate::DType::F32) * 2.0).sum_dims(&[1], true);
            let z = Tensor::arange_sym(&n.size(0)).to_dtype(crate::DType::F32) + &y.squeeze(1);
            let roots = [z.node(), y.node()];
            let t = trace(&roots, &[], &[]).unwrap();
            assert_eq!(t.key, t.program().key());
        });
    }

    #[test]
    fn by_index_keeps_the_first_item_of_an_index_and_skips_those_out_of_range() {
        let items = [(2, 'a'), (0, 'b'), (2, 'c'), (5, 'd')];
        let got: Vec<Option<char>> = super::by_index(3, &items)
            .iter()
            .map(|o| o.map(|&(_, c)| c))
            .collect();
        assert_eq!(got, vec![Some('b'), None, Some('a')]);
    }
}
