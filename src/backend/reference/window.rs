//! Reference kernels of the window ops (`Op::ReduceWindow`,
//! `Op::SelectAndScatter`) on exact sizes: padding and dilation holes are
//! skipped, which is reading the reduction's identity.

use super::err;
use super::kernels::Num;
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::{ArgKind, Window, WindowKind};
use ndarray::{ArrayD, IxDyn};

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `visit(o, i)` for every output position `o` (row-major) and
/// every input position `i` its window reads, in the window's row-major
/// order (positions in padding or dilation holes are skipped).
fn for_each_window(
    in_shape: &[usize],
    w: &Window,
    out_shape: &[usize],
    mut visit: impl FnMut(usize, usize),
) {
    let r = in_shape.len();
    let in_strides = strides(in_shape);
    let n_out: usize = out_shape.iter().product();
    let n_win: usize = w.size.iter().product();
    let mut o_idx = vec![0usize; r];
    for o in 0..n_out {
        let mut k_idx = vec![0usize; r];
        for _ in 0..n_win {
            let mut flat = Some(0usize);
            for d in 0..r {
                // Position in the padded, dilated operand, then in the operand.
                let p = (o_idx[d] * w.stride[d] + k_idx[d]) as i64 - w.padding[d].0 as i64;
                let dil = w.dilation[d] as i64;
                if p < 0 || p % dil != 0 || (p / dil) as usize >= in_shape[d] {
                    flat = None;
                    break;
                }
                flat = flat.map(|f| f + (p / dil) as usize * in_strides[d]);
            }
            if let Some(i) = flat {
                visit(o, i);
            }
            increment(&mut k_idx, &w.size);
        }
        increment(&mut o_idx, out_shape);
    }
}

/// The next row-major index within `shape` (wrapping to zeros).
fn increment(idx: &mut [usize], shape: &[usize]) {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

fn out_shape(w: &Window, shape: &[usize]) -> Vec<usize> {
    (0..shape.len()).map(|d| w.out_size(d, shape[d])).collect()
}

/// The one dim along which `w` is an inclusive scan of an operand of
/// `shape` while every other dim is trivial, and whether it runs from the
/// end: a window ending at each position and reaching back to the start
/// (`cumsum`), or starting there and reaching the end (its gradient).
fn scan_dim(w: &Window, shape: &[usize]) -> Option<(usize, bool)> {
    let mut dims = (0..w.rank()).filter(|&d| !w.is_trivial(d));
    let d = dims.next()?;
    if dims.next().is_some() || !w.keeps_size(d) {
        return None;
    }
    match w.padding[d] {
        (lo, 0) if lo + 1 >= shape[d] => Some((d, false)),
        (0, hi) if hi + 1 >= shape[d] => Some((d, true)),
        _ => None,
    }
}

/// Combines the window's elements in its order, from the identity.
fn combine<T: Num>(kind: WindowKind, acc: T, v: T) -> T {
    match kind {
        WindowKind::Sum => acc.add(v),
        WindowKind::Product => acc.mul(v),
        // NaN propagates, as in `max`/`min`.
        WindowKind::Max if v.is_nan() || v > acc => v,
        WindowKind::Min if v.is_nan() || v < acc => v,
        WindowKind::Max | WindowKind::Min => acc,
    }
}

fn identity<T: Num>(kind: WindowKind) -> T {
    match kind {
        WindowKind::Sum => T::default(),
        WindowKind::Product => T::from_f64(1.0),
        WindowKind::Max => T::lowest(),
        WindowKind::Min => T::highest(),
    }
}

fn reduce_window_num<T: Num>(kind: WindowKind, a: &ArrayD<T>, w: &Window) -> ArrayD<T> {
    if let Some((d, reverse)) = scan_dim(w, a.shape()) {
        // `cumsum`, `cumprod` and their gradients in linear time: each
        // window's fold is its neighbour's and one element (forwards, the
        // operations of the general loop below, in its order).
        let mut out = a.clone();
        for mut lane in out.lanes_mut(ndarray::Axis(d)) {
            let mut acc = identity::<T>(kind);
            let mut step = |v: &mut T| {
                acc = combine(kind, acc, *v);
                *v = acc;
            };
            if reverse {
                lane.iter_mut().rev().for_each(&mut step);
            } else {
                lane.iter_mut().for_each(&mut step);
            }
        }
        return out;
    }
    let a = a.as_standard_layout();
    let x = a.as_slice().expect("standard layout");
    let shape = out_shape(w, a.shape());
    let mut out = vec![identity::<T>(kind); shape.iter().product()];
    for_each_window(a.shape(), w, &shape, |o, i| {
        out[o] = combine(kind, out[o], x[i])
    });
    ArrayD::from_shape_vec(IxDyn(&shape), out).expect("shape matches")
}

/// `Op::ReduceWindow`.
pub(super) fn reduce_window(kind: WindowKind, x: &HostArray, w: &Window) -> Result<HostArray> {
    Ok(match x {
        HostArray::I32(a) => HostArray::I32(reduce_window_num(kind, a, w)),
        HostArray::I64(a) => HostArray::I64(reduce_window_num(kind, a, w)),
        HostArray::F32(a) => HostArray::F32(reduce_window_num(kind, a, w)),
        HostArray::F64(a) => HostArray::F64(reduce_window_num(kind, a, w)),
        HostArray::Bool(_) => return Err(err("reduce_window", "bool is not supported")),
        HostArray::F16(_) | HostArray::BF16(_) => {
            return Err(err("reduce_window", "halves are evaluated in f32"))
        }
    })
}

fn select_and_scatter_num<T: Num>(
    kind: ArgKind,
    a: &ArrayD<T>,
    src: &ArrayD<T>,
    w: &Window,
) -> Result<ArrayD<T>> {
    let a = a.as_standard_layout();
    let x = a.as_slice().expect("standard layout");
    let src = src.as_standard_layout();
    let s = src.as_slice().expect("standard layout");
    let shape = out_shape(w, a.shape());
    if src.shape() != shape.as_slice() {
        return Err(err(
            "select_and_scatter",
            format!(
                "the source {:?} does not have the windows' shape {shape:?}",
                src.shape()
            ),
        ));
    }
    // The first extremum in the window's row-major order, the first NaN
    // before any number (as `argmax`): a candidate replaces the choice
    // only when strictly better.
    let keep = |cur: T, cand: T| {
        cur.is_nan()
            || !(cand.is_nan()
                || match kind {
                    ArgKind::Max => cand > cur,
                    ArgKind::Min => cand < cur,
                })
    };
    let mut chosen: Vec<Option<usize>> = vec![None; shape.iter().product()];
    for_each_window(a.shape(), w, &shape, |o, i| {
        chosen[o] = match chosen[o] {
            Some(c) if keep(x[c], x[i]) => Some(c),
            _ => Some(i),
        };
    });
    let mut out = vec![T::default(); x.len()];
    for (o, c) in chosen.iter().enumerate() {
        if let Some(i) = c {
            out[*i] = out[*i].add(s[o]);
        }
    }
    Ok(ArrayD::from_shape_vec(IxDyn(a.shape()), out).expect("shape matches"))
}

/// `Op::SelectAndScatter`.
pub(super) fn select_and_scatter(
    kind: ArgKind,
    x: &HostArray,
    src: &HostArray,
    w: &Window,
) -> Result<HostArray> {
    Ok(match (x, src) {
        (HostArray::I32(a), HostArray::I32(s)) => {
            HostArray::I32(select_and_scatter_num(kind, a, s, w)?)
        }
        (HostArray::I64(a), HostArray::I64(s)) => {
            HostArray::I64(select_and_scatter_num(kind, a, s, w)?)
        }
        (HostArray::F32(a), HostArray::F32(s)) => {
            HostArray::F32(select_and_scatter_num(kind, a, s, w)?)
        }
        (HostArray::F64(a), HostArray::F64(s)) => {
            HostArray::F64(select_and_scatter_num(kind, a, s, w)?)
        }
        _ => return Err(err("select_and_scatter", "unsupported dtypes")),
    })
}
