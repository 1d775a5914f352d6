//! Reference evaluation of a device loop (`Op::While`): the body runs on
//! exact sizes, one iteration after the other, so a carry's size may
//! change from one iteration to the next.

use super::err;
use super::eval;
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::loops::{Loop, LoopKind, Trip};
use crate::ir::program::Program;

/// The results of loop `l` on `operands` (the loop node's inputs): the
/// final carries, then its stacks; `outer` holds the values of its outer
/// sizes.
pub(super) fn run(l: &Loop, operands: &[&HostArray], outer: &[i64]) -> Result<Vec<HostArray>> {
    let k = l.carries.len();
    let mut carries: Vec<HostArray> = operands[..k].iter().map(|a| (*a).clone()).collect();
    let xs = &operands[l.first_xs()..l.first_capture()];
    let captured = &operands[l.first_capture()..];
    let trip = match &l.kind {
        LoopKind::Fori {
            trip: Trip::Static(n),
        } => Some(*n),
        LoopKind::Fori {
            trip: Trip::Operand,
        } => Some(scalar_i64(operands[k], l.name())?),
        LoopKind::Fori {
            trip: Trip::Size(j),
        } => Some(
            *outer
                .get(*j)
                .ok_or_else(|| err(l.name(), "no value for the trip count"))?,
        ),
        LoopKind::While => None,
    };
    // The rows of each stack, one per iteration, in row order at the end.
    let mut rows: Vec<Vec<HostArray>> = Vec::new();
    let mut i = 0i64;
    loop {
        let go_on = match (trip, &l.cond) {
            (Some(n), _) => i < n,
            (None, Some(cond)) => {
                let ps = params(&carries, None, &[], captured);
                let out = program(l, cond, ps, outer, &[])?;
                match &out[0] {
                    HostArray::Bool(b) => b.iter().next().copied().unwrap_or(false),
                    _ => return Err(err("while_loop", "the condition is not a bool")),
                }
            }
            (None, None) => return Err(err("while_loop", "a while loop without a condition")),
        };
        if !go_on {
            if l.reverse {
                rows.reverse();
            }
            let count = l.results() - k;
            for s in 0..count {
                let stack_rows: Vec<&HostArray> = rows.iter().map(|r| &r[s]).collect();
                carries.push(stack(&stack_rows, l, k + s)?);
            }
            return Ok(carries);
        }
        let row = match (l.reverse, trip) {
            (true, Some(n)) => n - 1 - i,
            _ => i,
        };
        let x_rows = xs
            .iter()
            .map(|x| row_of(x, row, l))
            .collect::<Result<Vec<_>>>()?;
        let counter = l.has_counter().then_some(row);
        let ps = params(&carries, counter, &x_rows, captured);
        let mut out = program(l, &l.body, ps, outer, &l.saved_nodes)?;
        let mut saved = out.split_off(k);
        if l.saves_carries {
            let nodes = saved.split_off(l.ys.len());
            saved.extend(carries.iter().cloned());
            saved.extend(nodes);
        }
        rows.push(saved);
        carries = out;
        i += 1;
    }
}

/// A loop program's parameters: the carries, the counter, the rows of
/// the scanned values, the captured values.
fn params(
    carries: &[HostArray],
    counter: Option<i64>,
    rows: &[HostArray],
    captured: &[&HostArray],
) -> Vec<HostArray> {
    let mut ps: Vec<HostArray> = carries.to_vec();
    if let Some(i) = counter {
        ps.push(HostArray::I64(ndarray::ArrayD::from_elem(
            ndarray::IxDyn(&[]),
            i,
        )));
    }
    ps.extend(rows.iter().cloned());
    ps.extend(captured.iter().map(|a| (*a).clone()));
    ps
}

/// The outputs of `p` (a program of the loop `l`) on exact-size
/// parameters, then the values of its nodes `extra`.
fn program(
    l: &Loop,
    p: &Program,
    params: Vec<HostArray>,
    outer: &[i64],
    extra: &[usize],
) -> Result<Vec<HostArray>> {
    // Parameters at their exact sizes need no size arguments.
    let params = params.into_iter().map(|a| (a, Vec::new())).collect();
    let mut values = eval::run(p, params, outer).map_err(|e| match e {
        // The loop's node reports the step's pending tensors.
        crate::error::Error::StepFailed { failed, source, .. } => err(
            l.name(),
            format!("its body failed computing {failed}: {source}"),
        ),
        e => e,
    })?;
    // A value may be returned twice (a carry that is also a stacked
    // output): moved out at its last use, cloned before.
    let wanted: Vec<usize> = p.outputs.iter().chain(extra).copied().collect();
    Ok(wanted
        .iter()
        .enumerate()
        .map(|(j, &o)| match wanted[j + 1..].contains(&o) {
            true => values[o].clone(),
            false => std::mem::replace(
                &mut values[o],
                HostArray::full(crate::DType::Bool, &[], 0.0),
            ),
        })
        .collect())
}

fn scalar_i64(a: &HostArray, op: &'static str) -> Result<i64> {
    match a {
        HostArray::I64(x) => x
            .iter()
            .next()
            .copied()
            .ok_or_else(|| err(op, "an empty trip count")),
        _ => Err(err(op, "the trip count must be i64")),
    }
}

/// `rows` (one shape and dtype) stacked along a new dim 0: result
/// `index` of loop `l` (an empty stack has the result's row shape).
fn stack(rows: &[&HostArray], l: &Loop, index: usize) -> Result<HostArray> {
    let op = l.name();
    let Some(first) = rows.first() else {
        // No iteration ran: zero rows of the stack's row type.
        let k = l.carries.len();
        let j = index - k;
        let (dtype, row): (crate::DType, Vec<usize>) = if j < l.ys.len() {
            let c = &l.ys[j];
            (c.dtype, c.dims.iter().map(|d| d.bound() as usize).collect())
        } else if j < l.ys.len() + k {
            let c = &l.carries[j - l.ys.len()];
            (c.dtype, c.dims.iter().map(|d| d.bound() as usize).collect())
        } else {
            let n = &l.body.nodes[l.saved_nodes[j - l.ys.len() - k]];
            (n.dtype, n.shape.iter().map(|e| e.hi() as usize).collect())
        };
        let mut shape = vec![0];
        shape.extend(row);
        return Ok(HostArray::full(dtype, &shape, 0.0));
    };
    macro_rules! go {
        ($v:ident) => {{
            let views = rows
                .iter()
                .map(|a| match a {
                    HostArray::$v(x) => Ok(x.view()),
                    _ => Err(err(op, "stacked rows of different dtypes")),
                })
                .collect::<Result<Vec<_>>>()?;
            HostArray::$v(
                ndarray::stack(ndarray::Axis(0), &views).map_err(|e| err(op, e.to_string()))?,
            )
        }};
    }
    Ok(match first {
        HostArray::Bool(_) => go!(Bool),
        HostArray::I32(_) => go!(I32),
        HostArray::I64(_) => go!(I64),
        HostArray::F16(_) => go!(F16),
        HostArray::BF16(_) => go!(BF16),
        HostArray::F32(_) => go!(F32),
        HostArray::F64(_) => go!(F64),
    })
}

/// Row `i` of `a` along dim 0.
fn row_of(a: &HostArray, i: i64, l: &Loop) -> Result<HostArray> {
    let n = a.shape().first().copied().unwrap_or(0);
    let i = usize::try_from(i)
        .ok()
        .filter(|&i| i < n)
        .ok_or_else(|| err(l.name(), format!("row {i} of a scanned value of {n} rows")))?;
    macro_rules! row {
        ($($v:ident),*) => {
            match a {
                $(HostArray::$v(x) => HostArray::$v(x.index_axis(ndarray::Axis(0), i).to_owned()),)*
            }
        };
    }
    Ok(row!(Bool, I32, I64, F16, BF16, F32, F64))
}
