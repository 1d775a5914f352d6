//! Reference evaluation: one exhaustive `match` over [`Op`] on exact sizes.
//!
//! `run` walks the program's nodes in order; each arm of `eval_node`
//! calls its family's kernels (`elementwise.rs`, `layout.rs`,
//! `indexing.rs`, `window.rs`, `conv.rs`, `collective.rs`, `loops.rs`),
//! and what every node shares (widening halves, reserving memory, naming
//! the failed node) stays in `run`.

use super::conv;
use super::elementwise::{self, half_kernel};
use super::err;
use super::indexing;
use super::kernels::{self, Num};
use super::layout;
use crate::dtype::DType;
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::check::SizeCheck;
use crate::ir::node::{describe_value, describe_values};
use crate::ir::program::{PNode, Program, VarSource};
use crate::ir::{ArgKind, Dot, Op, ReduceKind};
use crate::map_host_array;
use crate::symint::{SizeExpr, VarRef};
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;

/// Where one execution's size expressions get their values: the program's
/// variables are dims of computed values or size arguments.
struct Sizes<'a> {
    program: &'a Program,
    positions: HashMap<u64, usize>,
    var_args: &'a [i64],
}

impl Sizes<'_> {
    /// The value of `e`, given the values computed so far.
    fn value(&self, e: &SizeExpr, values: &[HostArray]) -> Result<i64> {
        let (program, positions, var_args) = (self.program, &self.positions, self.var_args);
        let mut missing = None;
        let v = e.eval(&mut |var: &VarRef| match positions
            .get(&var.0.id)
            .map(|&p| &program.vars[p].source)
        {
            Some(VarSource::Dim { node, dim }) => values[*node].shape()[*dim] as i64,
            Some(VarSource::Arg(k)) => var_args[*k],
            None => {
                missing = Some(var.0.id);
                0
            }
        });
        match missing {
            Some(id) => Err(crate::error::Error::internal(
                "reference",
                format!("size variable s{id} has no source"),
            )),
            None => Ok(v),
        }
    }

    /// The values of a shape's sizes (a negative one as 0).
    fn dims(&self, shape: &[SizeExpr], values: &[HostArray]) -> Result<Vec<usize>> {
        shape
            .iter()
            .map(|e| self.value(e, values).map(|v| v.max(0) as usize))
            .collect()
    }

    /// Fails with the first of `checks` that does not hold.
    fn check(&self, checks: &[SizeCheck], values: &[HostArray]) -> Result<()> {
        for c in checks {
            let (l, r) = (self.value(&c.lhs, values)?, self.value(&c.rhs, values)?);
            if !c.holds(l, r) {
                return Err(c.failure(l, r));
            }
        }
        Ok(())
    }
}

/// Each parameter's array and the sizes of its dynamic dims, in order.
type Params = std::vec::IntoIter<(HostArray, Vec<i64>)>;

/// Evaluates every node of `program`; returns each node's value.
pub(super) fn run(
    program: &Program,
    params: Vec<(HostArray, Vec<i64>)>,
    var_args: &[i64],
) -> Result<Vec<HostArray>> {
    let sizes = Sizes {
        program,
        positions: program.var_positions(),
        var_args,
    };
    let mut values: Vec<HostArray> = Vec::with_capacity(program.nodes.len());
    // Each loop node's results (its own value is a token).
    let mut loops: HashMap<usize, Vec<HostArray>> = HashMap::new();
    let mut params = params.into_iter();
    for (i, node) in program.nodes.iter().enumerate() {
        // Every failure is reported with the node it happened in.
        reserve(node).map_err(|e| node_failed(program, i, e))?;
        let v = eval_node(&sizes, i, node, &values, &mut params, &mut loops)
            .map_err(|e| node_failed(program, i, e))?;
        // Halves compute in f32 (see `eval_node`): the result is rounded
        // back to the node's half dtype here, once.
        let v = if node.dtype.is_half() && v.dtype() == DType::F32 {
            v.cast(node.dtype)
        } else {
            v
        };
        values.push(v);
    }
    Ok(values)
}

/// The value of node `i`, given the values of the nodes before it.
fn eval_node(
    sizes: &Sizes,
    i: usize,
    node: &PNode,
    values: &[HostArray],
    params: &mut Params,
    loops: &mut HashMap<usize, Vec<HostArray>>,
) -> Result<HostArray> {
    let ins: Vec<&HostArray> = node.inputs.iter().map(|&i| &values[i]).collect();
    // Halves compute in f32: their operands are widened (exactly) here and
    // `run` rounds the result, so every op rounds once, as a half kernel
    // that accumulates in f32.
    let widened: Vec<HostArray>;
    let ins: Vec<&HostArray> = if ins.iter().any(|a| a.dtype().is_half()) {
        widened = ins.iter().map(|a| widen(a)).collect();
        widened.iter().collect()
    } else {
        ins
    };
    let dims = |shape: &[SizeExpr]| sizes.dims(shape, values);
    Ok(match &node.op {
        Op::Data { .. } => parameter(node, params)?,
        Op::Scalar { value, dtype } => HostArray::full(*dtype, &[], value.0),
        Op::Iota { dtype, shape, dim } => {
            let a = ArrayD::from_shape_fn(IxDyn(&dims(shape)?), |p| p[*dim] as i64);
            HostArray::I64(a).cast(*dtype)
        }
        Op::SizeOf(e) => HostArray::I64(ArrayD::from_elem(IxDyn(&[]), sizes.value(e, values)?)),
        Op::RandomUniform { dtype, shape } => random_uniform(*dtype, &dims(shape)?, ins[0])?,
        Op::Unary(u) => elementwise::unary(*u, ins[0])?,
        Op::Binary(b) => elementwise::binary(*b, ins[0], ins[1])?,
        Op::Compare(c) => elementwise::compare(*c, ins[0], ins[1])?,
        Op::Select => elementwise::select(ins[0], ins[1], ins[2])?,
        Op::Convert(d) => ins[0].cast(*d),
        Op::Broadcast { shape, dims: map } => layout::broadcast(ins[0], map, &dims(shape)?)?,
        Op::Reshape { shape } => layout::reshape(ins[0], &dims(shape)?)?,
        Op::Transpose { perm } => layout::transpose(ins[0], perm),
        Op::Slice { dim, start, len } => layout::slice(ins[0], *dim, *start, *len),
        Op::Concat { dim } => layout::concat(&ins, *dim)?,
        Op::Reverse { dims: ds } => layout::reverse(ins[0], ds),
        Op::Guard { shape, checks } => {
            sizes.check(checks, values)?;
            layout::guard(ins[0], &dims(shape)?)?
        }
        Op::PadToBound { fill } => {
            let bound: Vec<usize> = node.shape.iter().map(|e| e.hi().max(0) as usize).collect();
            layout::pad_to_bound(ins[0], &bound, fill.0)?
        }
        Op::Reduce { kind, dims: ds } => reduce(*kind, ins[0], ds)?,
        Op::ArgReduce { kind, dim } => arg_reduce(*kind, ins[0], *dim)?,
        Op::ReduceWindow { kind, window } => super::window::reduce_window(*kind, ins[0], window)?,
        Op::SelectAndScatter { kind, window } => {
            super::window::select_and_scatter(*kind, ins[0], ins[1], window)?
        }
        Op::Dot(d) => dot(ins[0], ins[1], d)?,
        Op::Convolution(c) => match (ins[0], ins[1]) {
            (HostArray::F32(x), HostArray::F32(w)) => HostArray::F32(conv::convolution(x, w, c)),
            (HostArray::F64(x), HostArray::F64(w)) => HostArray::F64(conv::convolution(x, w, c)),
            _ => return Err(err("convolution", "unsupported dtypes")),
        },
        Op::IndexSelect { dim } => indexing::index_select(ins[0], ins[1], *dim)?,
        Op::Gather { dim } => indexing::gather(ins[0], ins[1], *dim)?,
        Op::IndexAdd { dim } => indexing::index_add(ins[0], ins[1], ins[2], *dim)?,
        Op::Scatter { dim, mode } => indexing::scatter(&ins, *dim, *mode)?,
        Op::Argsort {
            dim,
            descending,
            first,
        } => indexing::argsort(ins[0], *dim, *descending, *first)?,
        Op::MaskedScatter => indexing::masked_scatter(ins[0], ins[1], ins[2])?,
        Op::Nonzero => nonzero(ins[0])?,
        Op::MaskedSelect => {
            let HostArray::Bool(mask) = ins[1] else {
                return Err(err("masked_select", "mask must be bool"));
            };
            map_host_array!(ins[0], a => kernels::masked_select(a, mask))
        }
        Op::Unique => unique(ins[0])?,
        Op::UniqueCounts => HostArray::I64(match (ins[0], ins[1]) {
            (HostArray::I32(a), HostArray::I32(u)) => kernels::unique_counts(a, u),
            (HostArray::I64(a), HostArray::I64(u)) => kernels::unique_counts(a, u),
            (HostArray::F32(a), HostArray::F32(u)) => kernels::unique_counts(a, u),
            (HostArray::F64(a), HostArray::F64(u)) => kernels::unique_counts(a, u),
            _ => return Err(err("unique_counts", "unsupported dtypes")),
        }),
        Op::AllReduce { kind, replicas } => {
            super::collective::all_reduce(*kind, ins[0], *replicas)?
        }
        Op::AllGather { dim, replicas } => super::collective::all_gather(ins[0], *dim, *replicas)?,
        Op::ReduceScatter { dim, replicas } => {
            super::collective::reduce_scatter(ins[0], *dim, *replicas)?
        }
        Op::ReplicaId => super::collective::replica_id(),
        // The reference runs the unpartitioned program.
        Op::Sharding(_) => ins[0].clone(),
        // No padding here to zero.
        Op::FillPadding { .. } => ins[0].clone(),
        Op::While(l) => {
            let outer = l
                .outer_sizes
                .iter()
                .map(|e| sizes.value(e, values))
                .collect::<Result<Vec<_>>>()?;
            let operands: Vec<&HostArray> = node.inputs.iter().map(|&j| &values[j]).collect();
            loops.insert(i, super::loops::run(l, &operands, &outer)?);
            HostArray::full(DType::Bool, &[], 0.0)
        }
        Op::LoopResult { index } => loops
            .get(&node.inputs[0])
            .and_then(|r| r.get(*index))
            .cloned()
            .ok_or_else(|| err("loop_result", "no such result"))?,
    })
}

/// The next parameter, cut to the real sizes of its dynamic dims.
fn parameter(node: &PNode, params: &mut Params) -> Result<HostArray> {
    let (a, sizes) = params
        .next()
        .ok_or_else(|| err("execute", "too few parameters"))?;
    let mut dyn_sizes = sizes.into_iter();
    let real: Vec<usize> = node
        .shape
        .iter()
        .zip(a.shape())
        .map(|(e, &s)| {
            if e.as_const().is_some() {
                s
            } else {
                dyn_sizes.next().unwrap_or(s as i64) as usize
            }
        })
        .collect();
    Ok(if real.as_slice() == a.shape() {
        a
    } else {
        map_host_array!(&a, x => kernels::slice_to(x, &real))
    })
}

/// `ir::random::uniform` of the I64 scalar `seed`, element by element in
/// row-major order.
fn random_uniform(dtype: DType, sh: &[usize], seed: &HostArray) -> Result<HostArray> {
    let seed = match seed {
        HostArray::I64(s) => *s
            .iter()
            .next()
            .ok_or_else(|| err("random_uniform", "empty seed"))?,
        _ => return Err(err("random_uniform", "the seed must be i64")),
    };
    let mut i = 0u32;
    let a = ArrayD::from_shape_simple_fn(IxDyn(sh), || {
        let u = crate::ir::random::uniform(seed, i);
        i = i.wrapping_add(1);
        u
    });
    Ok(HostArray::F64(a).cast(dtype))
}

/// The index of the first extremum along `dim` (I64).
fn arg_reduce(kind: ArgKind, x: &HostArray, dim: usize) -> Result<HostArray> {
    macro_rules! arg {
        ($a:expr) => {
            match kind {
                ArgKind::Max => kernels::arg_reduce($a, dim, |x, b| x > b),
                ArgKind::Min => kernels::arg_reduce($a, dim, |x, b| x < b),
            }
        };
    }
    Ok(HostArray::I64(match x {
        HostArray::I32(a) => arg!(a),
        HostArray::I64(a) => arg!(a),
        HostArray::F32(a) => arg!(a),
        HostArray::F64(a) => arg!(a),
        HostArray::Bool(_) => return Err(err("argmax", "bool is not supported")),
        HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("argmax")),
    }))
}

/// `dot_general` of two arrays of one numeric dtype.
fn dot(a: &HostArray, b: &HostArray, d: &Dot) -> Result<HostArray> {
    Ok(match (a, b) {
        (HostArray::F32(a), HostArray::F32(b)) => HostArray::F32(kernels::dot_general(a, b, d)),
        (HostArray::F64(a), HostArray::F64(b)) => HostArray::F64(kernels::dot_general(a, b, d)),
        (HostArray::I32(a), HostArray::I32(b)) => HostArray::I32(kernels::dot_general(a, b, d)),
        (HostArray::I64(a), HostArray::I64(b)) => HostArray::I64(kernels::dot_general(a, b, d)),
        _ => return Err(err("matmul", "unsupported dtypes")),
    })
}

/// The coordinates of the nonzeros, `[n, rank]` (I64).
fn nonzero(x: &HostArray) -> Result<HostArray> {
    Ok(HostArray::I64(match x {
        HostArray::Bool(a) => kernels::nonzero(a, |x| x),
        HostArray::I32(a) => kernels::nonzero(a, |x| x != 0),
        HostArray::I64(a) => kernels::nonzero(a, |x| x != 0),
        HostArray::F32(a) => kernels::nonzero(a, |x| x != 0.0),
        HostArray::F64(a) => kernels::nonzero(a, |x| x != 0.0),
        HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("nonzero")),
    }))
}

/// The sorted distinct values.
fn unique(x: &HostArray) -> Result<HostArray> {
    Ok(match x {
        HostArray::I32(a) => HostArray::I32(kernels::unique(a)),
        HostArray::I64(a) => HostArray::I64(kernels::unique(a)),
        HostArray::F32(a) => HostArray::F32(kernels::unique(a)),
        HostArray::F64(a) => HostArray::F64(kernels::unique(a)),
        HostArray::Bool(_) => return Err(err("unique", "bool is not supported")),
        HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("unique")),
    })
}

/// A half array as f32 (exact); any other array as it is.
fn widen(a: &HostArray) -> HostArray {
    if a.dtype().is_half() {
        a.cast(DType::F32)
    } else {
        a.clone()
    }
}

fn num_reduce<T: Num>(kind: ReduceKind, a: &ArrayD<T>, dims: &[usize]) -> ArrayD<T> {
    match kind {
        ReduceKind::Sum => kernels::sum(a, dims),
        ReduceKind::Max => kernels::reduce(a, dims, T::lowest(), |acc, x| {
            if x.is_nan() || x > acc {
                x
            } else {
                acc
            }
        }),
        ReduceKind::Min => kernels::reduce(a, dims, T::highest(), |acc, x| {
            if x.is_nan() || x < acc {
                x
            } else {
                acc
            }
        }),
        ReduceKind::Prod => kernels::reduce(a, dims, T::from_f64(1.0), T::mul),
    }
}

fn reduce(kind: ReduceKind, x: &HostArray, dims: &[usize]) -> Result<HostArray> {
    Ok(match x {
        HostArray::I32(a) => HostArray::I32(num_reduce(kind, a, dims)),
        HostArray::I64(a) => HostArray::I64(num_reduce(kind, a, dims)),
        HostArray::F32(a) => HostArray::F32(num_reduce(kind, a, dims)),
        HostArray::F64(a) => HostArray::F64(num_reduce(kind, a, dims)),
        HostArray::Bool(_) => return Err(err("reduce", "bool")),
        HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("reduce")),
    })
}

/// Checks that memory for node's result (at its bounds) can be had, so an
/// impossible size is an error instead of an allocation failure, which
/// would abort the process. The block is released at once; the kernel
/// then allocates its own.
fn reserve(node: &PNode) -> Result<()> {
    let bytes = node
        .shape
        .iter()
        .try_fold(node.dtype.size_in_bytes(), |acc, d| {
            acc.checked_mul(d.hi().max(0) as usize)
        });
    let mut block: Vec<u8> = Vec::new();
    match bytes {
        Some(b) if block.try_reserve_exact(b).is_ok() => Ok(()),
        _ => Err(err(
            "execute",
            format!(
                "cannot allocate {} bytes for the result; use smaller sizes",
                bytes.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string())
            ),
        )),
    }
}

/// `e`, raised while computing node `i`, with the node and the program
/// results that need it (the pending tensors that will keep failing).
fn node_failed(program: &Program, i: usize, e: crate::error::Error) -> crate::error::Error {
    // A failed size check names its op and sizes, and fails the step
    // before any value is bound (as on every backend).
    if let crate::error::Error::SizeCheckFailed { .. } = e {
        return e;
    }
    let mut needs = vec![false; program.nodes.len()];
    needs[i] = true;
    for k in i + 1..program.nodes.len() {
        needs[k] = program.nodes[k].inputs.iter().any(|&j| needs[j]);
    }
    let needed_by: Vec<&crate::ir::program::PNode> = program
        .outputs
        .iter()
        .filter(|&&o| needs[o])
        .map(|&o| &program.nodes[o])
        .collect();
    crate::error::Error::StepFailed {
        failed: {
            let n = &program.nodes[i];
            describe_value(&n.op, n.dtype, &n.shape)
        },
        pending: describe_values(needed_by.iter().map(|n| (&n.op, n.dtype, &n.shape[..]))),
        source: Box::new(e),
    }
}
