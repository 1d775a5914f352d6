//! The gradient of a device loop (`Op::While`), as JAX's scan.
//!
//! A `fori_loop` with a static trip count `n` is differentiated with the
//! carries each iteration was given, stacked (`[n, ..]` per carry):
//!
//! 1. a loop recorded for a gradient saves them as it runs (extra
//!    results, `Loop::saves_carries`), and so does a loop of a body that
//!    the gradient instantiates; one recorded without runs again, saving
//!    them;
//! 2. a reverse loop over `i = n - 1, .., 0` carrying the gradients of
//!    the carries and the sums of the captured values' gradients: each
//!    iteration instantiates the body's program on that iteration's saved
//!    carries and takes its vector-Jacobian product (the ordinary rules).
//!
//! Gradients reach the initial carries and the captured values
//! (parameters) that need them. Carries must be static: a stack of
//! values whose size changes from one iteration to the next has no
//! shape. A `while_loop` or a `fori_loop` whose trip count is a tensor
//! has no fixed sequence of iterations to run back: backward through
//! one is an error that says what to do instead.
//!
//! A loop inside a body saves nothing when recorded (its stacks would go
//! unused): the gradient's instantiation of the body makes its loops save.
//! `detach` and `no_grad` inside a body stop gradients as outside (the body
//! remembers the nodes they made, `Loop::grad_stops`). Through a
//! `while_loop`, a tensor trip count, a dynamic carry or a dynamic captured
//! value that needs a gradient, `backward()` panics saying what to use
//! instead.

use super::vjp;
use crate::ir::check::SizeCheck;
use crate::ir::loops::{carry_string, Loop, LoopKind};
use crate::ir::node::{shape_string, Inputs};
use crate::ir::{Node, Op};
use crate::symint::SizeExpr;
use crate::tensor::{enable_grad, fori_loop, loop_node, no_grad, record, Tensor};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::Arc;

/// The gradient of each operand of the loop node `node` (operands `x`),
/// given the gradients `gs` of its results.
#[track_caller]
pub(super) fn input_grads(
    l: &Loop,
    node: &Arc<Node>,
    x: &[Tensor],
    gs: Vec<Option<Tensor>>,
) -> Vec<Option<Tensor>> {
    let n = match l.kind {
        LoopKind::Fori { trip: Some(n) } => n,
        LoopKind::Fori { trip: None } => panic!(
            "backward: a fori_loop whose trip count is a tensor (known only when the program runs) is not differentiable; give it a static trip count (an upper bound, with iterations past the real count left unchanged by `where_cond`), or build its inputs under no_grad / detach them"
        ),
        LoopKind::While => panic!(
            "backward: a while_loop is not differentiable (its number of iterations depends on data); use fori_loop with a static trip count (an upper bound, with iterations past the end left unchanged by `where_cond`), or build its inputs under no_grad / detach them"
        ),
    };
    let k = l.carries.len();
    for (i, c) in l.carries.iter().enumerate() {
        if c.dims.iter().any(|d| d.is_dynamic()) {
            panic!(
                "backward: carry {i} of a fori_loop has a dynamic size ({}{}); differentiating a loop whose carries have dynamic sizes is not supported (the saved carries of all iterations would need one shape): `pad_to_bound(fill)` the carry before the loop, or build its inputs under no_grad",
                c.dtype,
                carry_string(c)
            );
        }
    }
    let first = l.first_capture();
    let captured = &x[first..];
    let wanted: Vec<usize> = (0..captured.len())
        .filter(|&j| {
            let c = &node.inputs[first + j];
            c.requires_grad && c.dtype.is_float()
        })
        .collect();
    for &j in &wanted {
        let c = &node.inputs[first + j];
        if c.shape.iter().any(|e| e.as_const().is_none()) {
            panic!(
                "backward: a fori_loop's body uses a tensor of dynamic size ({}{}) that needs a gradient; gradients with respect to captured values of dynamic size are not supported: pass it as a carry, or `pad_to_bound(fill)` it first",
                c.dtype,
                shape_string(&c.shape)
            );
        }
    }
    let floats: Vec<usize> = (0..k).filter(|&i| l.carries[i].dtype.is_float()).collect();
    let mut out: Vec<Option<Tensor>> = vec![None; x.len()];
    if n <= 0 {
        for &i in &floats {
            out[i] = gs[i].clone();
        }
        return out;
    }
    // The forward loop's saved carries; a loop recorded without them runs
    // again, saving them.
    let saving = match l.saves_carries {
        true => node.clone(),
        false => loop_node(
            Op::While(Arc::new(l.saving_carries())),
            node.inputs.clone(),
            node.size_deps.clone(),
        )
        .unwrap_or_else(|e| panic!("{e}")),
    };
    let stacks: Vec<Tensor> = (k..2 * k)
        .map(|index| {
            let mut ins = Inputs::new();
            ins.push(saving.clone());
            let r = record(Op::LoopResult { index }, ins, SmallVec::new())
                .unwrap_or_else(|e| panic!("{e}"));
            Tensor::from_node(r, x[0].device())
        })
        .collect();
    let nf = floats.len();
    let mut init: Vec<Tensor> = floats
        .iter()
        .map(|&i| gs[i].clone().unwrap_or_else(|| x[i].zeros_like()))
        .collect();
    init.extend(wanted.iter().map(|&j| captured[j].zeros_like()));
    let rev = fori_loop(n, &init, |j, st| {
        // Iteration `t` of the forward loop, on the carries it was given.
        let t = &(j * -1) + (n - 1);
        let row = t.reshape(&[1]);
        let mut ps: Vec<Tensor> = (0..k)
            .map(|i| {
                let c = stacks[i].index_select(0, &row).squeeze(0);
                match l.carries[i].dtype {
                    d if d.is_float() => grad_root(&c),
                    _ => c,
                }
            })
            .collect();
        ps.push(t);
        ps.extend(
            captured
                .iter()
                .enumerate()
                .map(|(j, c)| match wanted.contains(&j) {
                    true => grad_root(c),
                    false => c.clone(),
                }),
        );
        let outs = enable_grad(|| instantiate(l, &ps, &node.size_deps));
        let mut wrt: Vec<Tensor> = floats.iter().map(|&i| ps[i].clone()).collect();
        wrt.extend(wanted.iter().map(|&j| ps[k + 1 + j].clone()));
        let f_outs: Vec<Tensor> = floats.iter().map(|&i| outs[i].clone()).collect();
        let grads = vjp(&f_outs, &st[..nf], &wrt);
        let mut next: Vec<Tensor> = (0..nf)
            .map(|i| grads[i].clone().unwrap_or_else(|| st[i].zeros_like()))
            .collect();
        next.extend((0..wanted.len()).map(|m| match &grads[nf + m] {
            Some(g) => &st[nf + m] + g,
            None => st[nf + m].clone(),
        }));
        next
    });
    for (p, &i) in floats.iter().enumerate() {
        out[i] = Some(rev[p].clone());
    }
    for (m, &j) in wanted.iter().enumerate() {
        out[first + j] = Some(rev[nf + m].clone());
    }
    out
}

/// A copy of `t` that a vector-Jacobian product is taken with respect to.
#[track_caller]
fn grad_root(t: &Tensor) -> Tensor {
    Tensor::from_node(t.node().grad_root_copy(), t.device())
}

/// Records the body of loop `l` on `params` as lazy ops and returns its
/// outputs. The program's own size variables are renamed to the sizes the
/// new operands and ops have; `outer_deps` define the sizes it reads from
/// outside (the loop node's size dependencies). Nodes the body recorded
/// without gradients are recorded so again; the body's loops that
/// gradients flow through save their carries.
#[track_caller]
pub(super) fn instantiate(l: &Loop, params: &[Tensor], outer_deps: &[Arc<Node>]) -> Vec<Tensor> {
    let p = &l.body;
    let device = params
        .first()
        .map_or_else(crate::Device::default, |t| t.device().clone());
    let mut nodes: Vec<Arc<Node>> = Vec::with_capacity(p.nodes.len());
    // Old variable id -> the size it stands for now.
    let mut renamed: FxHashMap<u64, SizeExpr> = FxHashMap::default();
    // Variable id -> a node whose dim it is.
    let mut definer: FxHashMap<u64, Arc<Node>> = FxHashMap::default();
    for (i, pn) in p.nodes.iter().enumerate() {
        let node = match p.params.iter().position(|&q| q == i) {
            Some(k) => params[k].node(),
            None => {
                let mut op = pn.op.clone();
                let rename = |e: &SizeExpr| match renamed.is_empty() {
                    true => e.clone(),
                    false => e.substitute(&mut |v| renamed.get(&v.0.id).cloned()),
                };
                for e in op.size_args_mut() {
                    *e = rename(e);
                }
                if let Op::Guard { checks, .. } = &mut op {
                    *checks = checks
                        .iter()
                        .map(|c| SizeCheck {
                            lhs: rename(&c.lhs),
                            rhs: rename(&c.rhs),
                            ..c.clone()
                        })
                        .collect();
                }
                let mut deps: SmallVec<[Arc<Node>; 1]> = SmallVec::new();
                let wanted = op
                    .size_args()
                    .iter()
                    .chain(op.checks().iter().flat_map(|c| [&c.lhs, &c.rhs]))
                    .flat_map(|e| e.vars());
                for v in wanted {
                    if crate::runtime::size_values::is_bound(&v) {
                        continue;
                    }
                    match definer.get(&v.0.id) {
                        Some(d) if !deps.iter().any(|x| Arc::ptr_eq(x, d)) => deps.push(d.clone()),
                        Some(_) => {}
                        None => {
                            for d in outer_deps {
                                if !deps.iter().any(|x| Arc::ptr_eq(x, d)) {
                                    deps.push(d.clone());
                                }
                            }
                        }
                    }
                }
                let inputs: Inputs = pn.inputs.iter().map(|&j| nodes[j].clone()).collect();
                if let Op::While(inner) = &op {
                    if !inner.saves_carries
                        && inner.can_save_carries()
                        && inputs.iter().any(|n| n.requires_grad)
                    {
                        op = Op::While(Arc::new(inner.saving_carries()));
                    }
                }
                let make = || match op {
                    Op::While(_) => loop_node(op, inputs, deps),
                    op => record(op, inputs, deps),
                };
                let made = match l.grad_stops.contains(&i) {
                    true => no_grad(make),
                    false => make(),
                };
                made.unwrap_or_else(|e| panic!("{e}"))
            }
        };
        for (was, now) in pn.shape.iter().zip(&node.shape) {
            if let Some(v) = was.as_var() {
                if was != now {
                    renamed.entry(v.0.id).or_insert_with(|| now.clone());
                }
            }
            if let Some(v) = now.as_var() {
                definer.entry(v.0.id).or_insert_with(|| node.clone());
            }
        }
        nodes.push(node);
    }
    p.outputs
        .iter()
        .map(|&o| Tensor::from_node(nodes[o].clone(), &device))
        .collect()
}
