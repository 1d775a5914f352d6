//! Reference kernels of the indexing family: reads and writes at integer
//! indices or at a mask's true positions. An index out of range is an
//! error here (XLA clamps a gather and drops a scatter's update).

use super::elementwise::half_kernel;
use super::err;
use super::kernels::{self, check_index, with_index, Num};
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::ScatterMode;
use crate::map_host_array;
use ndarray::{ArrayD, Axis};

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

/// Slices of `x` along `dim` at a 1-D index.
pub(super) fn index_select(x: &HostArray, index: &HostArray, dim: usize) -> Result<HostArray> {
    let idx = indices(index)?;
    let size = x.shape()[dim];
    let idx = idx
        .iter()
        .map(|&i| check_index("index_select", i, size))
        .collect::<Result<Vec<_>>>()?;
    Ok(map_host_array!(x, a => a.select(Axis(dim), &idx)))
}

/// `x` read along `dim` at an index of its rank (PyTorch's `gather`).
pub(super) fn gather(x: &HostArray, index: &HostArray, dim: usize) -> Result<HostArray> {
    let idx = index_array(index)?;
    let size = x.shape()[dim];
    for &i in idx.iter() {
        check_index("gather", i, size)?;
    }
    Ok(
        map_host_array!(x, a => ArrayD::from_shape_fn(idx.raw_dim(), |p| a[with_index(&p, dim, idx[&p] as usize)])),
    )
}

/// `base` with slice `k` of `src` added at `index[k]` along `dim`.
pub(super) fn index_add(
    base: &HostArray,
    index: &HostArray,
    src: &HostArray,
    dim: usize,
) -> Result<HostArray> {
    let idx = indices(index)?;
    let size = base.shape()[dim];
    let idx = idx
        .iter()
        .map(|&i| check_index("index_add", i, size))
        .collect::<Result<Vec<_>>>()?;
    Ok(numeric_pair!(base, src, "index_add", |base, src| {
        let mut out = base.clone();
        for (k, &i) in idx.iter().enumerate() {
            let s = src.index_axis(Axis(dim), k);
            out.index_axis_mut(Axis(dim), i)
                .zip_mut_with(&s, |o, &v| *o = Num::add(*o, v));
        }
        out
    }))
}

/// The I64 permutation sorting `x` along `dim` (stable, NaN largest), or
/// its `first` entries.
pub(super) fn argsort(
    x: &HostArray,
    dim: usize,
    descending: bool,
    first: Option<usize>,
) -> Result<HostArray> {
    let perm = match x {
        HostArray::Bool(a) => kernels::argsort(a, dim, descending),
        HostArray::I32(a) => kernels::argsort(a, dim, descending),
        HostArray::I64(a) => kernels::argsort(a, dim, descending),
        HostArray::F32(a) => kernels::argsort(a, dim, descending),
        HostArray::F64(a) => kernels::argsort(a, dim, descending),
        HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("sort")),
    };
    Ok(HostArray::I64(match first {
        Some(k) => kernels::first_along(&perm, dim, k),
        None => perm,
    }))
}

/// `base` with the `k`-th true position of `mask` set to `src[k]`.
pub(super) fn masked_scatter(
    base: &HostArray,
    mask: &HostArray,
    src: &HostArray,
) -> Result<HostArray> {
    let HostArray::Bool(mask) = mask else {
        return Err(err("masked_scatter", "mask must be bool"));
    };
    let needed = mask.iter().filter(|&&m| m).count();
    if src.shape()[0] < needed {
        return Err(err(
            "masked_scatter",
            format!(
                "the source has {} elements, the mask selects {needed}",
                src.shape()[0]
            ),
        ));
    }
    Ok(match (base, src) {
        (HostArray::F32(b), HostArray::F32(s)) => HostArray::F32(masked_scatter_of(b, mask, s)),
        (HostArray::F64(b), HostArray::F64(s)) => HostArray::F64(masked_scatter_of(b, mask, s)),
        (HostArray::I32(b), HostArray::I32(s)) => HostArray::I32(masked_scatter_of(b, mask, s)),
        (HostArray::I64(b), HostArray::I64(s)) => HostArray::I64(masked_scatter_of(b, mask, s)),
        (HostArray::Bool(b), HostArray::Bool(s)) => HostArray::Bool(masked_scatter_of(b, mask, s)),
        _ => return Err(err("masked_scatter", "dtypes differ")),
    })
}

/// `base` with `src` scattered along `dim` at `index` (PyTorch's
/// `scatter_add` and `scatter`); with duplicate indices and `Overwrite`,
/// the last in row-major order of the index wins.
pub(super) fn scatter(ins: &[&HostArray], dim: usize, mode: ScatterMode) -> Result<HostArray> {
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

fn masked_scatter_of<T: Copy>(base: &ArrayD<T>, mask: &ArrayD<bool>, src: &ArrayD<T>) -> ArrayD<T> {
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
