//! The gradient of a device loop (`Op::While`), as JAX's scan.
//!
//! A counted loop (`fori_loop`, `scan`) whose count is a constant or a
//! size is differentiated with the carries each iteration was given,
//! stacked (`[n, ..]` per carry, `n` dynamic for a size):
//!
//! 1. a loop recorded for a gradient saves them as it runs (extra
//!    results, `Loop::saves_carries`), with the values of its body's
//!    matrix products (`Loop::saved_nodes`), and so does a loop of a body
//!    that the gradient instantiates; one recorded without runs again,
//!    saving them;
//! 2. a scan over the rows in the other order (`n - 1, .., 0` for a
//!    forward loop) carrying the gradients
//!    of the carries and the sums of the captured values' gradients, and
//!    scanning the saved carries, the scanned values and the gradients of
//!    the stacked outputs: each iteration instantiates the body's program
//!    on that iteration's saved carries and rows, with each saved product
//!    standing for itself (its value is read, its gradient still flows to
//!    its operands through the product's rule, so the reverse pass does
//!    not compute it again), and takes its vector-Jacobian product (the
//!    ordinary rules). The gradients of the scanned values are its
//!    stacked outputs.
//!
//! Gradients reach the initial carries, the scanned values and the
//! captured values (parameters) that need them. Carries must be static: a
//! stack of values whose size changes from one iteration to the next has
//! no shape. A `while_loop` or a `fori_loop` whose trip count is a tensor
//! has no known number of iterations to run back and stack: backward
//! through one is an error that says what to do instead.
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
use crate::ir::loops::{carry_string, Loop, LoopKind, Trip};
use crate::ir::node::{shape_string, Inputs};
use crate::ir::{Node, Op};
use crate::symint::SizeExpr;
use crate::tensor::{
    enable_grad, loop_node, no_grad, record, scan_with, SymInt, Tensor, TripCount,
};
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
    let op = l.name();
    let (trip, static_n): (TripCount, Option<i64>) = match &l.kind {
        LoopKind::Fori {
            trip: Trip::Static(n),
        } => (TripCount::from(*n), Some(*n)),
        LoopKind::Fori {
            trip: Trip::Size(k),
        } => (TripCount::from(trip_size(&l.outer_sizes[*k], node)), None),
        LoopKind::Fori {
            trip: Trip::Operand,
        } => panic!(
            "backward: a {op} whose trip count is a tensor (known only when the program runs) is not differentiable; give it a static count or a size (`SymInt`, such as `x.size(0)` of an input marked dynamic), or build its inputs under no_grad / detach them"
        ),
        LoopKind::While => panic!(
            "backward: a while_loop is not differentiable (its number of iterations depends on data); use fori_loop with a static trip count or a size (`SymInt`), with iterations past the end left unchanged by `where_cond`, or build its inputs under no_grad / detach them"
        ),
    };
    let k = l.carries.len();
    for (i, c) in l.carries.iter().enumerate() {
        if c.dims.iter().any(|d| d.is_dynamic()) {
            panic!(
                "backward: carry {i} of a {op} has a dynamic size ({}{}); differentiating a loop whose carries have dynamic sizes is not supported (the saved carries of all iterations would need one shape): `pad_to_bound(fill)` the carry before the loop, or build its inputs under no_grad",
                c.dtype,
                carry_string(c)
            );
        }
    }
    let first = l.first_capture();
    let captured = &x[first..];
    let scanned = &x[l.first_xs()..first];
    let needs = |j: usize| {
        let c = &node.inputs[j];
        c.requires_grad && c.dtype.is_float()
    };
    let wanted: Vec<usize> = (0..captured.len()).filter(|&j| needs(first + j)).collect();
    let wanted_xs: Vec<usize> = (0..scanned.len())
        .filter(|&j| needs(l.first_xs() + j))
        .collect();
    for &j in &wanted {
        let c = &node.inputs[first + j];
        if c.shape.iter().any(|e| e.as_const().is_none()) {
            panic!(
                "backward: a {op}'s body uses a tensor of dynamic size ({}{}) that needs a gradient; gradients with respect to captured values of dynamic size are not supported: pass it as a carry, or `pad_to_bound(fill)` it first",
                c.dtype,
                shape_string(&c.shape)
            );
        }
    }
    let floats: Vec<usize> = (0..k).filter(|&i| l.carries[i].dtype.is_float()).collect();
    let mut out: Vec<Option<Tensor>> = vec![None; x.len()];
    if static_n.is_some_and(|n| n <= 0) {
        for &i in &floats {
            out[i] = gs[i].clone();
        }
        return out;
    }
    // The forward loop's saved carries and products; a loop recorded
    // without them runs again, saving them.
    let saving = match l.saves_carries {
        true => node.clone(),
        false => loop_node(
            Op::While(Arc::new(l.saving_carries())),
            node.inputs.clone(),
            node.size_deps.clone(),
        )
        .unwrap_or_else(|e| panic!("{e}")),
    };
    let Op::While(saver) = &saving.op else {
        unreachable!("a loop node holds a loop")
    };
    let ny = l.ys.len();
    let result = |index: usize| {
        let mut ins = Inputs::new();
        ins.push(saving.clone());
        let r = record(Op::LoopResult { index }, ins, SmallVec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_node(r, x[0].device())
    };
    let stacks: Vec<Tensor> = (k + ny..k + ny + k).map(result).collect();
    let saved_nodes = saver.saved_nodes.clone();
    let products: Vec<Tensor> = (0..saved_nodes.len())
        .map(|j| result(2 * k + ny + j))
        .collect();
    // The stacked outputs whose gradients flow back.
    let gys: Vec<(usize, Tensor)> = (0..ny)
        .filter(|&j| l.ys[j].dtype.is_float())
        .filter_map(|j| gs[k + j].clone().map(|g| (j, g)))
        .collect();
    let nf = floats.len();
    let mut init: Vec<Tensor> = floats
        .iter()
        .map(|&i| gs[i].clone().unwrap_or_else(|| x[i].zeros_like()))
        .collect();
    init.extend(wanted.iter().map(|&j| captured[j].zeros_like()));
    let mut rev_xs: Vec<Tensor> = stacks;
    rev_xs.extend(scanned.iter().cloned());
    rev_xs.extend(gys.iter().map(|(_, g)| g.clone()));
    rev_xs.extend(products);
    let m = scanned.len();
    let (finals, gxs) = scan_with(trip, &init, &rev_xs, !l.reverse, |t, st, rows| {
        // Iteration `t` of the forward loop, on the carries and rows it
        // was given.
        let mut ps: Vec<Tensor> = (0..k)
            .map(|i| match l.carries[i].dtype.is_float() {
                true => grad_root(&rows[i]),
                false => rows[i].clone(),
            })
            .collect();
        ps.push(t.clone());
        ps.extend((0..m).map(|j| match wanted_xs.contains(&j) {
            true => grad_root(&rows[k + j]),
            false => rows[k + j].clone(),
        }));
        ps.extend(
            captured
                .iter()
                .enumerate()
                .map(|(j, c)| match wanted.contains(&j) {
                    true => grad_root(c),
                    false => c.clone(),
                }),
        );
        let gy_rows = &rows[k + m..k + m + gys.len()];
        let saved: FxHashMap<usize, Tensor> = saved_nodes
            .iter()
            .zip(&rows[k + m + gys.len()..])
            .map(|(&i, r)| (i, r.clone()))
            .collect();
        let outs = enable_grad(|| instantiate(l, &ps, &node.size_deps, &saved));
        let mut wrt: Vec<Tensor> = floats.iter().map(|&i| ps[i].clone()).collect();
        wrt.extend(wanted_xs.iter().map(|&j| ps[k + 1 + j].clone()));
        wrt.extend(wanted.iter().map(|&j| ps[k + 1 + m + j].clone()));
        let mut f_outs: Vec<Tensor> = floats.iter().map(|&i| outs[i].clone()).collect();
        f_outs.extend(gys.iter().map(|(j, _)| outs[k + j].clone()));
        let mut cots: Vec<Tensor> = st[..nf].to_vec();
        cots.extend(gy_rows.iter().cloned());
        let grads = vjp(&f_outs, &cots, &wrt);
        let mut next: Vec<Tensor> = (0..nf)
            .map(|i| grads[i].clone().unwrap_or_else(|| st[i].zeros_like()))
            .collect();
        let nx = wanted_xs.len();
        next.extend((0..wanted.len()).map(|w| match &grads[nf + nx + w] {
            Some(g) => &st[nf + w] + g,
            None => st[nf + w].clone(),
        }));
        let gx: Vec<Tensor> = wanted_xs
            .iter()
            .enumerate()
            .map(|(w, &j)| {
                grads[nf + w]
                    .clone()
                    .unwrap_or_else(|| rows[k + j].zeros_like())
            })
            .collect();
        (next, gx)
    });
    for (p, &i) in floats.iter().enumerate() {
        out[i] = Some(finals[p].clone());
    }
    for (w, &j) in wanted.iter().enumerate() {
        out[first + j] = Some(finals[nf + w].clone());
    }
    for (w, &j) in wanted_xs.iter().enumerate() {
        out[l.first_xs() + j] = Some(gxs[w].clone());
    }
    out
}

/// The trip count `e` of the loop `node` as a size, anchored to the
/// operands and size dependencies that define its variables.
fn trip_size(e: &SizeExpr, node: &Arc<Node>) -> SymInt {
    let vars = e.vars();
    let anchors = node
        .inputs
        .iter()
        .chain(&node.size_deps)
        .filter(|n| {
            n.shape
                .iter()
                .any(|d| d.vars().iter().any(|v| vars.contains(v)))
        })
        .cloned()
        .collect();
    SymInt::new(e.clone(), anchors)
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
/// gradients flow through save their carries. A node in `saved` is the
/// given value, with the node as recorded for its gradient history: its
/// value is read, not computed, and gradients reach its operands.
#[track_caller]
pub(super) fn instantiate(
    l: &Loop,
    params: &[Tensor],
    outer_deps: &[Arc<Node>],
    saved: &FxHashMap<usize, Tensor>,
) -> Vec<Tensor> {
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
                let made = made.unwrap_or_else(|e| panic!("{e}"));
                match saved.get(&i) {
                    Some(v) if made.requires_grad => v.node().with_grad_history(&made),
                    Some(v) => v.node(),
                    None => made,
                }
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
