//! `scan`: a counted device loop that reads one row of its scanned values
//! per iteration and stacks one row of its outputs per iteration, as
//! `jax.lax.scan`; one loop node (`Op::While` with scanned operands and
//! stacked results), differentiable.

use super::control_flow::{record_loop, LoopSpec, Trip, TripCount};
use super::guard::unify_node;
use super::Tensor;
use crate::ir::node::shape_string;
use crate::symint::SizeExpr;
use smallvec::SmallVec;
use std::sync::Arc;

/// Runs `body` `n` times on the device, threading the carries and
/// slicing the scanned values, as `jax.lax.scan`: iteration `i` gets the
/// counter `i` (an I64 scalar), the carries and row `i` of each of `xs`
/// (along dim 0), and returns the new carries and one row of each output.
/// Returns the final carries and the outputs stacked along a new dim 0
/// (`[n, ..]`).
///
/// `n` is a static count or a size ([`SymInt`](crate::SymInt)): each of
/// `xs` has `n` rows (a size that may differ is checked when the program
/// runs), and their other dims are static. A dynamic `n` (`x.size(0)` of
/// an input marked dynamic) runs the real number of iterations, and the
/// stacked outputs have that size, so one program serves every length.
/// The outputs' rows have static sizes; the carries follow
/// [`fori_loop`](crate::fori_loop)'s rules.
///
/// Differentiable (a static or a size `n`, static carries): gradients
/// reach the initial carries, `xs` and the tensors the body uses, through
/// a second scan that runs the iterations backwards.
///
/// ```
/// use lazyxla::{scan, Tensor};
/// let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
/// // Running sums: the carry is the total, each output the total so far.
/// let (total, ys) = scan(4, &[Tensor::scalar(0.0f32)], &[xs], |_, c, x| {
///     let s = &c[0] + &x[0];
///     (vec![s.clone()], vec![s])
/// });
/// assert_eq!(total[0].item::<f32>().unwrap(), 10.0);
/// assert_eq!(ys[0].to_vec::<f32>().unwrap(), vec![1.0, 3.0, 6.0, 10.0]);
/// ```
#[track_caller]
pub fn scan(
    n: impl Into<TripCount>,
    init: &[Tensor],
    xs: &[Tensor],
    body: impl FnOnce(&Tensor, &[Tensor], &[Tensor]) -> (Vec<Tensor>, Vec<Tensor>),
) -> (Vec<Tensor>, Vec<Tensor>) {
    scan_with(n.into(), init, xs, false, body)
}

/// [`scan`], visiting the rows from the last to the first when `reverse`
/// (the counter the body gets is the row).
#[track_caller]
pub(crate) fn scan_with(
    n: TripCount,
    init: &[Tensor],
    xs: &[Tensor],
    reverse: bool,
    body: impl FnOnce(&Tensor, &[Tensor], &[Tensor]) -> (Vec<Tensor>, Vec<Tensor>),
) -> (Vec<Tensor>, Vec<Tensor>) {
    let op = "scan";
    let (len, anchors) = match &n.0 {
        Trip::Static(c) if *c >= 0 => (SizeExpr::constant(*c), SmallVec::new()),
        Trip::Static(c) => panic!("{op}: the count must not be negative, got {c}"),
        Trip::Sym(s) => (s.expr.clone(), s.anchors.clone()),
        Trip::Tensor(t) => panic!(
            "{op}: the count is a tensor ({}{}); a scan's count is a size, static or a `SymInt` (`x.size(0)` of an input marked dynamic), since its outputs are stacked to that size",
            t.dtype(),
            t.shape_string()
        ),
    };
    // Each scanned value has `n` rows of static sizes.
    let xs: Vec<Tensor> = xs
        .iter()
        .enumerate()
        .map(|(j, x)| {
            let node = x.node();
            if node.shape.is_empty() || node.shape[1..].iter().any(|e| e.as_const().is_none()) {
                panic!(
                    "{op}: scanned value {j} is {}{}; it needs a dim 0 of {len} rows, and static sizes after it (`pad_to_bound(fill)` them)",
                    node.dtype,
                    shape_string(&node.shape)
                );
            }
            let mut want = node.shape.clone();
            want[0] = len.clone();
            let others: Vec<Arc<crate::ir::Node>> = anchors.iter().cloned().collect();
            let unified = unify_node(op, &x.input_node(), &want, &others)
                .unwrap_or_else(|e| panic!("{e}"));
            Tensor::from_node(unified, x.device())
        })
        .collect();
    let spec = LoopSpec {
        op,
        trip: Some(n.0),
        xs: &xs,
        reverse,
    };
    record_loop(spec, init, |carries, counter, rows| {
        let i = counter.expect("a scan has a counter");
        let (c, y) = body(i, carries, rows);
        (None, c, y)
    })
}
