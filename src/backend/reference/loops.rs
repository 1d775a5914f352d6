//! Reference evaluation of a device loop (`Op::While`): the body runs on
//! exact sizes, one iteration after the other, so a carry's size may
//! change from one iteration to the next.

use super::err;
use super::eval;
use crate::host::HostArray;
use crate::ir::loops::{Loop, LoopKind};
use crate::ir::program::Program;
use crate::Result;

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
    let mut i = 0i64;
    loop {
        let go_on = match (trip, &l.cond) {
            (Some(n), _) => i < n,
            (None, Some(cond)) => {
                let out = program(cond, params(&carries, None, captured), outer)?;
                match &out[0] {
                    HostArray::Bool(b) => b.iter().next().copied().unwrap_or(false),
                    _ => return Err(err("while_loop", "the condition is not a bool")),
                }
            }
            (None, None) => return Err(err("while_loop", "a while loop without a condition")),
        };
        if !go_on {
            return Ok(carries);
        }
        let counter = l.has_counter().then_some(i);
        carries = program(&l.body, params(&carries, counter, captured), outer)?;
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

/// The outputs of `p` on exact-size parameters.
fn program(p: &Program, params: Vec<HostArray>, outer: &[i64]) -> Result<Vec<HostArray>> {
    // Parameters at their exact sizes need no size arguments.
    let params = params.into_iter().map(|a| (a, Vec::new())).collect();
    let mut values = eval::run(p, params, outer)?;
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
