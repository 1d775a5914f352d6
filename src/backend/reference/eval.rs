//! Reference evaluation: one exhaustive `match` over [`Op`] on exact sizes.

use super::conv;
use super::elementwise::{self, half_kernel};
use super::err;
use super::kernels::{self, check_index, with_index, Num};
use crate::dtype::DType;
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::node::{describe_value, describe_values};
use crate::ir::program::{Program, VarSource};
use crate::ir::{ArgKind, Op, ReduceKind, ScatterMode};
use crate::map_host_array;
use crate::symint::{SizeExpr, VarRef};
use ndarray::{ArrayD, Axis, IxDyn};
use std::collections::HashMap;

/// Runs `$body` with `$b`, `$s` bound to two arrays of the same numeric
/// dtype, rewrapping the result.
macro_rules! numeric_pair {
    ($base:expr, $src:expr, $op:expr, |$b:ident, $s:ident| $body:expr) => {
        match ($base, $src) {
            (HostArray::F32($b), HostArray::F32($s)) => HostArray::F32($body),
            (HostArray::F64($b), HostArray::F64($s)) => HostArray::F64($body),
            (HostArray::I32($b), HostArray::I32($s)) => HostArray::I32($body),
            (HostArray::I64($b), HostArray::I64($s)) => HostArray::I64($body),
            _ => return Err(err($op, "unsupported dtypes")),
        }
    };
}

/// Evaluates every node of `program`; returns each node's value.
pub(super) fn run(
    program: &Program,
    params: Vec<(HostArray, Vec<i64>)>,
    var_args: &[i64],
) -> Result<Vec<HostArray>> {
    let positions = program.var_positions();
    let mut values: Vec<HostArray> = Vec::with_capacity(program.nodes.len());
    // Each loop node's results (its own value is a token).
    let mut loops: HashMap<usize, Vec<HostArray>> = HashMap::new();
    let mut params = params.into_iter();
    for (i, node) in program.nodes.iter().enumerate() {
        let ins: Vec<&HostArray> = node.inputs.iter().map(|&i| &values[i]).collect();
        // Halves compute in f32: their operands are widened (exactly) here
        // and the result rounded back to the node's half dtype below, so
        // every op rounds once, as a half kernel that accumulates in f32.
        let widened: Vec<HostArray>;
        let ins: Vec<&HostArray> = if ins.iter().any(|a| a.dtype().is_half()) {
            widened = ins.iter().map(|a| widen(a)).collect();
            widened.iter().collect()
        } else {
            ins
        };
        let dims = |e: &[SizeExpr], values: &[HostArray]| -> Result<Vec<usize>> {
            e.iter()
                .map(|x| {
                    size_value(x, program, &positions, values, var_args).map(|v| v.max(0) as usize)
                })
                .collect()
        };
        reserve(node).map_err(|e| node_failed(program, i, e))?;
        // One closure per node, so that every failure below is reported
        // with the node it happened in.
        let mut eval = || -> Result<HostArray> {
            Ok(match &node.op {
                Op::Data { .. } => {
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
                    if real.as_slice() == a.shape() {
                        a
                    } else {
                        map_host_array!(&a, x => kernels::slice_to(x, &real))
                    }
                }
                Op::Scalar { value, dtype } => HostArray::full(*dtype, &[], value.0),
                Op::Iota { dtype, shape, dim } => {
                    let sh = dims(shape, &values)?;
                    let a = ArrayD::from_shape_fn(IxDyn(&sh), |p| p[*dim] as i64);
                    HostArray::I64(a).cast(*dtype)
                }
                Op::SizeOf(e) => HostArray::I64(ArrayD::from_elem(
                    IxDyn(&[]),
                    size_value(e, program, &positions, &values, var_args)?,
                )),
                Op::RandomUniform { dtype, shape } => {
                    let sh = dims(shape, &values)?;
                    let seed = match ins[0] {
                        HostArray::I64(s) => *s
                            .iter()
                            .next()
                            .ok_or_else(|| err("random_uniform", "empty seed"))?,
                        _ => return Err(err("random_uniform", "the seed must be i64")),
                    };
                    let mut i = 0u32;
                    let a = ArrayD::from_shape_simple_fn(IxDyn(&sh), || {
                        let u = crate::ir::random::uniform(seed, i);
                        i = i.wrapping_add(1);
                        u
                    });
                    HostArray::F64(a).cast(*dtype)
                }
                Op::Unary(u) => elementwise::unary(*u, ins[0])?,
                Op::Binary(b) => elementwise::binary(*b, ins[0], ins[1])?,
                Op::Compare(c) => elementwise::compare(*c, ins[0], ins[1])?,
                Op::Select => elementwise::select(ins[0], ins[1], ins[2])?,
                Op::Convert(d) => ins[0].cast(*d),
                Op::Broadcast { shape, dims: map } => {
                    let sh = dims(shape, &values)?;
                    let x = ins[0];
                    let mut expanded = vec![1usize; sh.len()];
                    for (i, &d) in map.iter().enumerate() {
                        expanded[d] = x.shape()[i];
                    }
                    map_host_array!(x, a => {
                        let r = a.to_shape(IxDyn(&expanded)).map_err(|e| err("broadcast", e.to_string()))?;
                        r.broadcast(IxDyn(&sh)).ok_or_else(|| err("broadcast", format!("cannot broadcast {:?} to {:?}", a.shape(), sh)))?.to_owned()
                    })
                }
                Op::Reshape { shape } => {
                    let sh = dims(shape, &values)?;
                    map_host_array!(ins[0], a => {
                        a.to_shape(IxDyn(&sh)).map_err(|e| err("reshape", format!("{:?} -> {:?}: {e}", a.shape(), sh)))?.to_owned()
                    })
                }
                Op::Transpose { perm } => {
                    map_host_array!(ins[0], a => a.clone().permuted_axes(IxDyn(perm)).as_standard_layout().into_owned())
                }
                Op::Slice { dim, start, len } => {
                    // Exact sizes: a dynamic dim clamps (see `Op::Slice`).
                    map_host_array!(ins[0], a => {
                        let n = a.shape()[*dim];
                        let from = (*start).min(n);
                        a.slice_axis(Axis(*dim), ndarray::Slice::from(from..start.saturating_add(*len).min(n))).to_owned()
                    })
                }
                Op::Concat { dim } => concat(&ins, *dim)?,
                Op::Reverse { dims: ds } => map_host_array!(ins[0], a => {
                    // Exact sizes: reversing the whole axis is reversing
                    // the real elements.
                    let mut v = a.view();
                    for &d in ds {
                        v.invert_axis(Axis(d));
                    }
                    v.as_standard_layout().into_owned()
                }),
                Op::Guard { shape, checks } => {
                    let size = |e: &SizeExpr| size_value(e, program, &positions, &values, var_args);
                    for c in checks.iter() {
                        let (l, r) = (size(&c.lhs)?, size(&c.rhs)?);
                        if !c.holds(l, r) {
                            return Err(c.failure(l, r));
                        }
                    }
                    let sh = dims(shape, &values)?;
                    if ins[0].shape() != sh.as_slice() {
                        return Err(err(
                            "guard",
                            format!(
                                "checked sizes {sh:?} differ from the operand's {:?}",
                                ins[0].shape()
                            ),
                        ));
                    }
                    ins[0].clone()
                }
                Op::PadToBound { fill } => {
                    let bound: Vec<usize> =
                        node.shape.iter().map(|e| e.hi().max(0) as usize).collect();
                    ins[0]
                        .padded(&bound, fill.0)
                        .ok_or_else(|| err("pad_to_bound", "the value exceeds its bound"))?
                }
                Op::Reduce { kind, dims: ds } => reduce(*kind, ins[0], ds)?,
                Op::ArgReduce { kind, dim } => {
                    macro_rules! arg {
                        ($a:expr) => {
                            match kind {
                                ArgKind::Max => kernels::arg_reduce($a, *dim, |x, b| x > b),
                                ArgKind::Min => kernels::arg_reduce($a, *dim, |x, b| x < b),
                            }
                        };
                    }
                    HostArray::I64(match ins[0] {
                        HostArray::I32(a) => arg!(a),
                        HostArray::I64(a) => arg!(a),
                        HostArray::F32(a) => arg!(a),
                        HostArray::F64(a) => arg!(a),
                        HostArray::Bool(_) => return Err(err("argmax", "bool is not supported")),
                        HostArray::F16(_) | HostArray::BF16(_) => {
                            return Err(half_kernel("argmax"))
                        }
                    })
                }
                Op::ReduceWindow { kind, window } => {
                    super::window::reduce_window(*kind, ins[0], window)?
                }
                Op::SelectAndScatter { kind, window } => {
                    super::window::select_and_scatter(*kind, ins[0], ins[1], window)?
                }
                Op::Dot(d) => match (ins[0], ins[1]) {
                    (HostArray::F32(a), HostArray::F32(b)) => {
                        HostArray::F32(kernels::dot_general(a, b, d))
                    }
                    (HostArray::F64(a), HostArray::F64(b)) => {
                        HostArray::F64(kernels::dot_general(a, b, d))
                    }
                    (HostArray::I32(a), HostArray::I32(b)) => {
                        HostArray::I32(kernels::dot_general(a, b, d))
                    }
                    (HostArray::I64(a), HostArray::I64(b)) => {
                        HostArray::I64(kernels::dot_general(a, b, d))
                    }
                    _ => return Err(err("matmul", "unsupported dtypes")),
                },
                Op::Convolution(c) => match (ins[0], ins[1]) {
                    (HostArray::F32(x), HostArray::F32(w)) => {
                        HostArray::F32(conv::convolution(x, w, c))
                    }
                    (HostArray::F64(x), HostArray::F64(w)) => {
                        HostArray::F64(conv::convolution(x, w, c))
                    }
                    _ => return Err(err("convolution", "unsupported dtypes")),
                },
                Op::IndexSelect { dim } => {
                    let idx = indices(ins[1])?;
                    let size = ins[0].shape()[*dim];
                    let idx = idx
                        .iter()
                        .map(|&i| check_index("index_select", i, size))
                        .collect::<Result<Vec<_>>>()?;
                    map_host_array!(ins[0], a => a.select(Axis(*dim), &idx))
                }
                Op::Gather { dim } => {
                    let idx = index_array(ins[1])?;
                    let size = ins[0].shape()[*dim];
                    for &i in idx.iter() {
                        check_index("gather", i, size)?;
                    }
                    map_host_array!(ins[0], a => ArrayD::from_shape_fn(idx.raw_dim(), |p| a[with_index(&p, *dim, idx[&p] as usize)]))
                }
                Op::IndexAdd { dim } => {
                    let idx = indices(ins[1])?;
                    let size = ins[0].shape()[*dim];
                    let idx = idx
                        .iter()
                        .map(|&i| check_index("index_add", i, size))
                        .collect::<Result<Vec<_>>>()?;
                    numeric_pair!(ins[0], ins[2], "index_add", |base, src| {
                        let mut out = base.clone();
                        for (k, &i) in idx.iter().enumerate() {
                            let s = src.index_axis(Axis(*dim), k);
                            out.index_axis_mut(Axis(*dim), i)
                                .zip_mut_with(&s, |o, &v| *o = Num::add(*o, v));
                        }
                        out
                    })
                }
                Op::Scatter { dim, mode } => scatter(&ins, *dim, *mode)?,
                Op::Argsort {
                    dim,
                    descending,
                    first,
                } => {
                    let (d, desc) = (*dim, *descending);
                    let perm = match ins[0] {
                        HostArray::Bool(a) => kernels::argsort(a, d, desc),
                        HostArray::I32(a) => kernels::argsort(a, d, desc),
                        HostArray::I64(a) => kernels::argsort(a, d, desc),
                        HostArray::F32(a) => kernels::argsort(a, d, desc),
                        HostArray::F64(a) => kernels::argsort(a, d, desc),
                        HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("sort")),
                    };
                    HostArray::I64(match first {
                        Some(k) => kernels::first_along(&perm, d, *k),
                        None => perm,
                    })
                }
                Op::MaskedScatter => {
                    let HostArray::Bool(mask) = ins[1] else {
                        return Err(err("masked_scatter", "mask must be bool"));
                    };
                    let needed = mask.iter().filter(|&&m| m).count();
                    if ins[2].shape()[0] < needed {
                        return Err(err(
                            "masked_scatter",
                            format!(
                                "the source has {} elements, the mask selects {needed}",
                                ins[2].shape()[0]
                            ),
                        ));
                    }
                    match (ins[0], ins[2]) {
                        (HostArray::F32(b), HostArray::F32(s)) => {
                            HostArray::F32(masked_scatter(b, mask, s))
                        }
                        (HostArray::F64(b), HostArray::F64(s)) => {
                            HostArray::F64(masked_scatter(b, mask, s))
                        }
                        (HostArray::I32(b), HostArray::I32(s)) => {
                            HostArray::I32(masked_scatter(b, mask, s))
                        }
                        (HostArray::I64(b), HostArray::I64(s)) => {
                            HostArray::I64(masked_scatter(b, mask, s))
                        }
                        (HostArray::Bool(b), HostArray::Bool(s)) => {
                            HostArray::Bool(masked_scatter(b, mask, s))
                        }
                        _ => return Err(err("masked_scatter", "dtypes differ")),
                    }
                }
                Op::Nonzero => HostArray::I64(match ins[0] {
                    HostArray::Bool(a) => kernels::nonzero(a, |x| x),
                    HostArray::I32(a) => kernels::nonzero(a, |x| x != 0),
                    HostArray::I64(a) => kernels::nonzero(a, |x| x != 0),
                    HostArray::F32(a) => kernels::nonzero(a, |x| x != 0.0),
                    HostArray::F64(a) => kernels::nonzero(a, |x| x != 0.0),
                    HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("nonzero")),
                }),
                Op::MaskedSelect => {
                    let HostArray::Bool(mask) = ins[1] else {
                        return Err(err("masked_select", "mask must be bool"));
                    };
                    map_host_array!(ins[0], a => kernels::masked_select(a, mask))
                }
                Op::Unique => match ins[0] {
                    HostArray::I32(a) => HostArray::I32(kernels::unique(a)),
                    HostArray::I64(a) => HostArray::I64(kernels::unique(a)),
                    HostArray::F32(a) => HostArray::F32(kernels::unique(a)),
                    HostArray::F64(a) => HostArray::F64(kernels::unique(a)),
                    HostArray::Bool(_) => return Err(err("unique", "bool is not supported")),
                    HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("unique")),
                },
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
                Op::AllGather { dim, replicas } => {
                    super::collective::all_gather(ins[0], *dim, *replicas)?
                }
                Op::ReduceScatter { dim, replicas } => {
                    super::collective::reduce_scatter(ins[0], *dim, *replicas)?
                }
                Op::ReplicaId => super::collective::replica_id(),
                // The reference runs the unpartitioned program.
                Op::Sharding(_) => ins[0].clone(),
                Op::While(l) => {
                    let outer = l
                        .outer_sizes
                        .iter()
                        .map(|e| size_value(e, program, &positions, &values, var_args))
                        .collect::<Result<Vec<_>>>()?;
                    let operands: Vec<&HostArray> =
                        node.inputs.iter().map(|&j| &values[j]).collect();
                    loops.insert(i, super::loops::run(l, &operands, &outer)?);
                    HostArray::full(DType::Bool, &[], 0.0)
                }
                Op::LoopResult { index } => loops
                    .get(&node.inputs[0])
                    .and_then(|r| r.get(*index))
                    .cloned()
                    .ok_or_else(|| err("loop_result", "no such result"))?,
            })
        };
        let v = eval().map_err(|e| node_failed(program, i, e))?;
        let v = if node.dtype.is_half() && v.dtype() == DType::F32 {
            v.cast(node.dtype)
        } else {
            v
        };
        values.push(v);
    }
    Ok(values)
}

/// A half array as f32 (exact); any other array as it is.
fn widen(a: &HostArray) -> HostArray {
    if a.dtype().is_half() {
        a.cast(DType::F32)
    } else {
        a.clone()
    }
}

/// The value of a size expression in this execution.
fn size_value(
    e: &SizeExpr,
    program: &Program,
    positions: &HashMap<u64, usize>,
    values: &[HostArray],
    var_args: &[i64],
) -> Result<i64> {
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

/// `base` with `src` scattered along `dim` at `index` (PyTorch's
/// `scatter_add` and `scatter`); with duplicate indices and `Overwrite`,
/// the last in row-major order of the index wins.
fn scatter(ins: &[&HostArray], dim: usize, mode: ScatterMode) -> Result<HostArray> {
    let op = match mode {
        ScatterMode::Add => "scatter_add",
        ScatterMode::Overwrite => "scatter",
    };
    let idx = index_array(ins[1])?;
    let size = ins[0].shape()[dim];
    for &i in idx.iter() {
        check_index(op, i, size)?;
    }
    macro_rules! go {
        ($base:expr, $src:expr, $f:expr) => {{
            let mut out = $base.clone();
            for (p, &i) in idx.indexed_iter() {
                let q = with_index(&p, dim, i as usize);
                out[&q] = $f(out[&q], $src[&p]);
            }
            out
        }};
    }
    Ok(match mode {
        ScatterMode::Add => numeric_pair!(ins[0], ins[2], op, |base, src| go!(base, src, Num::add)),
        ScatterMode::Overwrite => match (ins[0], ins[2]) {
            (HostArray::Bool(b), HostArray::Bool(s)) => HostArray::Bool(go!(b, s, replace)),
            (b, s) => numeric_pair!(b, s, op, |base, src| go!(base, src, replace)),
        },
    })
}

/// The overwrite combiner: the new value.
fn replace<T>(_old: T, new: T) -> T {
    new
}

fn masked_scatter<T: Copy>(base: &ArrayD<T>, mask: &ArrayD<bool>, src: &ArrayD<T>) -> ArrayD<T> {
    let mut out = base.clone();
    let mut k = 0;
    for (o, &m) in out.iter_mut().zip(mask.iter()) {
        if m {
            *o = src[[k].as_slice()];
            k += 1;
        }
    }
    out
}

fn indices(a: &HostArray) -> Result<Vec<i64>> {
    Ok(index_array(a)?.iter().copied().collect())
}

fn index_array(a: &HostArray) -> Result<ArrayD<i64>> {
    match a {
        HostArray::I64(x) => Ok(x.clone()),
        HostArray::I32(x) => Ok(x.mapv(|v| v as i64)),
        _ => Err(err("index", "indices must be integers")),
    }
}

pub(super) fn concat(ins: &[&HostArray], dim: usize) -> Result<HostArray> {
    macro_rules! cat {
        ($v:ident) => {{
            let views = ins
                .iter()
                .map(|a| match a {
                    HostArray::$v(x) => Ok(x.view()),
                    _ => Err(err("concat", "dtypes differ")),
                })
                .collect::<Result<Vec<_>>>()?;
            HostArray::$v(
                ndarray::concatenate(Axis(dim), &views)
                    .map_err(|e| err("concat", e.to_string()))?,
            )
        }};
    }
    Ok(match ins[0].dtype() {
        DType::Bool => cat!(Bool),
        DType::I32 => cat!(I32),
        DType::I64 => cat!(I64),
        DType::F16 => cat!(F16),
        DType::BF16 => cat!(BF16),
        DType::F32 => cat!(F32),
        DType::F64 => cat!(F64),
    })
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
fn reserve(node: &crate::ir::program::PNode) -> Result<()> {
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
