//! Reference evaluation of a device loop (`Op::While`): the body runs on
//! exact sizes, one iteration after the other, so a carry's size may
//! change from one iteration to the next.

use super::err;
use super::eval;
use crate::error::Result;
use crate::host::HostArray;
use crate::ir::loops::{Loop, LoopKind};
use crate::ir::program::Program;

/// The final carries of loop `l` on `operands` (the loop node's inputs);
/// `outer` holds the values of its outer sizes.
pub(super) fn run(l: &Loop, operands: &[&HostArray], outer: &[i64]) -> Result<Vec<HostArray>> {
    let k = l.carries.len();
    let mut carries: Vec<HostArray> = operands[..k].iter().map(|a| (*a).clone()).collect();
    let captured = &operands[l.first_capture()..];
    let trip = match l.kind {
        LoopKind::Fori { trip: Some(n) } => Some(n),
        LoopKind::Fori { trip: None } => Some(scalar_i64(operands[k], l.name())?),
        LoopKind::While => None,
    };
    // Each iteration's carries, when the loop saves them.
    let mut saved: Vec<Vec<HostArray>> = Vec::new();
    let mut i = 0i64;
    loop {
        let go_on = match (trip, &l.cond) {
            (Some(n), _) => i < n,
            (None, Some(cond)) => {
                let out = program(l, cond, params(&carries, None, captured), outer)?;
                match &out[0] {
                    HostArray::Bool(b) => b.iter().next().copied().unwrap_or(false),
                    _ => return Err(err("while_loop", "the condition is not a bool")),
                }
            }
            (None, None) => return Err(err("while_loop", "a while loop without a condition")),
        };
        if !go_on {
            if l.saves_carries {
                for k in 0..carries.len() {
                    let rows: Vec<&HostArray> = saved.iter().map(|s| &s[k]).collect();
                    carries.push(stack(&rows, l.name())?);
                }
            }
            return Ok(carries);
        }
        if l.saves_carries {
            saved.push(carries.clone());
        }
        let counter = l.has_counter().then_some(i);
        carries = program(l, &l.body, params(&carries, counter, captured), outer)?;
        i += 1;
    }
}

/// A loop program's parameters: the carries, the counter, the captured
/// values.
fn params(carries: &[HostArray], counter: Option<i64>, captured: &[&HostArray]) -> Vec<HostArray> {
    let mut ps: Vec<HostArray> = carries.to_vec();
    if let Some(i) = counter {
        ps.push(HostArray::I64(ndarray::ArrayD::from_elem(
            ndarray::IxDyn(&[]),
            i,
        )));
    }
    ps.extend(captured.iter().map(|a| (*a).clone()));
    ps
}

/// The outputs of `p` (a program of the loop `l`) on exact-size
/// parameters.
fn program(l: &Loop, p: &Program, params: Vec<HostArray>, outer: &[i64]) -> Result<Vec<HostArray>> {
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
    Ok(p.outputs
        .iter()
        .map(|&o| {
            std::mem::replace(
                &mut values[o],
                HostArray::full(crate::DType::Bool, &[], 0.0),
            )
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

/// `rows` (one shape and dtype, at least one) stacked along a new dim 0.
fn stack(rows: &[&HostArray], op: &'static str) -> Result<HostArray> {
    let first = rows
        .first()
        .ok_or_else(|| err(op, "no iterations to stack"))?;
    macro_rules! go {
        ($v:ident) => {{
            let views = rows
                .iter()
                .map(|a| match a {
                    HostArray::$v(x) => Ok(x.view()),
                    _ => Err(err(op, "saved carries of different dtypes")),
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
