//! Reverse-mode autograd over the lazy graph.
//!
//! `backward()` walks the graph from the loss and records the gradient as
//! more lazy ops (rules in `rules.rs`, one exhaustive `match` over `Op`),
//! so forward, backward and the optimizer update of a step are one program
//! at `mark_step()`. Gradients accumulate into leaf tensors that called
//! `requires_grad(true)`; the node standing for such a leaf in a graph is
//! marked (`Node::grad_leaf`) so backward stops there.
//!
//! Integer outputs (`nonzero`, `unique`, `argmax`, comparisons) carry no
//! gradient. Gradients flow through dynamic zones: `masked_select` scatters
//! back into the input's shape, `index_select` and `gather` scatter-add,
//! reductions and `matmul` over dynamic dims, `pad_to_bound` crops back.
//!
//! A leaf with `requires_grad(true)` used as an operand (outside
//! `no_grad`) is recorded as a copy of its node marked `grad_leaf`.
//! Backward walks iteratively, skipping nodes that need no gradient; only
//! float results carry gradients. Through dynamic zones `cat` splits at
//! `SymInt` offsets and a guard checks back; ties in `max`/`min` share the
//! gradient, as PyTorch.
//!
//! A sync replaces a tensor's node by a data leaf; when gradients flow
//! through the node and no backward has gone through it yet, the leaf
//! keeps it (`Node::grad_history`) and backward follows it, so a value
//! read before its backward (`loss.item()` then `loss.backward()`) keeps
//! its graph, as in PyTorch; that backward recomputes the forward values
//! it needs. After a backward (PyTorch's `retain_graph=False`) a sync
//! keeps nothing, so a training loop holds no old graph.

mod collective;
mod elementwise;
mod loops;
mod rules;

use crate::ir::{Node, Op};
use crate::tensor::{no_grad, Tensor};
use rustc_hash::FxHashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Tensor {
    /// Marks this tensor as a leaf whose gradient [`backward`](Tensor::backward)
    /// accumulates into [`grad`](Tensor::grad); returns the same tensor.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let w = Tensor::from_vec(vec![3.0f32], &[1]).unwrap().requires_grad(true);
    /// let loss = (&w * &w).sum();
    /// loss.backward();
    /// assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![6.0]);
    /// ```
    #[track_caller]
    pub fn requires_grad(self, on: bool) -> Tensor {
        self.set_requires_grad(on);
        self
    }

    /// Sets whether this tensor is a leaf that accumulates gradients.
    #[track_caller]
    pub fn set_requires_grad(&self, on: bool) {
        if on && !self.dtype().is_float() {
            panic!(
                "requires_grad: only float tensors can require gradients, this one is {}",
                self.dtype()
            );
        }
        self.inner.requires_grad.store(on, Ordering::Relaxed);
    }

    /// True when gradients flow to or through this tensor.
    #[track_caller]
    pub fn is_requires_grad(&self) -> bool {
        self.inner.requires_grad.load(Ordering::Relaxed) || self.node().requires_grad
    }

    /// The accumulated gradient, if a `backward` reached this tensor.
    #[track_caller]
    pub fn grad(&self) -> Option<Tensor> {
        self.inner.grad.lock().clone()
    }

    /// Forgets the accumulated gradient.
    #[track_caller]
    pub fn zero_grad(&self) {
        *self.inner.grad.lock() = None;
    }

    /// The same value, cut off from the gradient graph.
    #[track_caller]
    pub fn detach(&self) -> Tensor {
        no_grad(|| {
            let n = self.node();
            if n.requires_grad {
                // A fresh node with the same op and inputs, not requiring
                // grad (at the same loop depth: a loop's placeholder has
                // no inputs to take it from).
                Tensor::from_node(
                    Node::with_depth(
                        n.op.clone(),
                        n.inputs.clone(),
                        n.size_deps.clone(),
                        n.dtype,
                        n.shape.clone(),
                        false,
                        n.loop_depth,
                    ),
                    self.device(),
                )
            } else {
                Tensor::from_node(n, self.device())
            }
        })
    }

    /// Records the gradient of this scalar with respect to every leaf that
    /// requires grad, accumulating into their [`grad`](Tensor::grad). Nothing
    /// runs: the gradients are lazy tensors computed with the next sync.
    ///
    /// Values read before the backward is recorded (`loss.item()` first, or
    /// a `mark_step` between the forward and the backward) keep the graph
    /// they were computed from, so their gradient still reaches the
    /// parameters; that backward computes those forward values again in
    /// its program. As with PyTorch's `retain_graph=False`, a value synced
    /// after a backward went through it keeps no graph: a second backward
    /// through it sees a constant.
    ///
    /// Panics when the tensor is not a float scalar or does not depend on
    /// any tensor that requires grad.
    #[track_caller]
    pub fn backward(&self) {
        let root = self.node();
        if !root.shape.is_empty() || !root.dtype.is_float() {
            panic!(
                "backward: the loss must be a float scalar, got {}{}; reduce it first (e.g. .sum() or .mean())",
                root.dtype,
                crate::ir::node::shape_string(&root.shape)
            );
        }
        if !root.requires_grad {
            panic!("backward: the loss does not depend on any tensor that requires grad; call requires_grad(true) on the parameters");
        }
        let device = self.device().clone();
        no_grad(|| {
            let order = grad_order(std::slice::from_ref(&root), |_| false);
            for n in &order {
                n.mark_backward_done();
            }
            let mut flow = Flow::default();
            flow.add(&root, Tensor::from_node(root.clone(), &device).ones_like());
            for n in order.iter().rev() {
                if let Some(history) = &n.grad_history {
                    // A value computed before this backward: its gradient
                    // is the gradient of the node it was computed from.
                    if let Some(g) = flow.take(n) {
                        flow.add(history, g);
                    }
                    continue;
                }
                if let Some(leaf) = &n.grad_leaf {
                    let Some(g) = flow.take(n) else { continue };
                    if let Some(inner) = leaf.upgrade::<crate::tensor::TensorInner>() {
                        let t = Tensor::from_inner(inner);
                        let mut slot = t.inner.grad.lock();
                        let total = match slot.take() {
                            Some(old) => &old + &g,
                            None => g,
                        };
                        *slot = Some(total);
                    }
                    continue;
                }
                flow.through(n, &device);
            }
        });
    }
}

/// Gradients on their way back through a graph, by node.
#[derive(Default)]
pub(crate) struct Flow {
    grads: FxHashMap<*const Node, Tensor>,
    /// The gradients of each loop node's results, by result: a loop's
    /// rule takes them all at once (see `loops`).
    results: FxHashMap<*const Node, Vec<Option<Tensor>>>,
    /// Tensor handles of nodes that rules took as operands, kept until
    /// the node's own rule takes it as its value: every consumer of a node
    /// comes before it in reverse order, so one handle serves them all.
    handles: FxHashMap<*const Node, Tensor>,
}

impl Flow {
    /// Adds `g` to the gradient of `node`.
    #[track_caller]
    pub(crate) fn add(&mut self, node: &Arc<Node>, g: Tensor) {
        let key = Arc::as_ptr(node);
        let total = match self.grads.remove(&key) {
            Some(old) => &old + &g,
            None => g,
        };
        self.grads.insert(key, total);
    }

    /// Takes the gradient of `node`.
    #[track_caller]
    pub(crate) fn take(&mut self, node: &Node) -> Option<Tensor> {
        self.grads.remove(&(node as *const Node))
    }

    /// Passes the gradient of `n` (nothing when it has none) to its
    /// operands through its rule.
    #[track_caller]
    pub(crate) fn through(&mut self, n: &Arc<Node>, device: &crate::Device) {
        let inputs: smallvec::SmallVec<[Tensor; 3]> = n
            .inputs
            .iter()
            .map(|i| {
                self.handles
                    .entry(Arc::as_ptr(i))
                    .or_insert_with(|| Tensor::from_node(i.clone(), device))
                    .clone()
            })
            .collect();
        let input_grads = match &n.op {
            Op::While(l) => {
                let Some(gs) = self.results.remove(&Arc::as_ptr(n)) else {
                    return;
                };
                loops::input_grads(l, n, &inputs, gs).into()
            }
            Op::LoopResult { index } => {
                let Some(g) = self.take(n) else { return };
                let lp = &n.inputs[0];
                let count = match &lp.op {
                    Op::While(l) => l.results(),
                    _ => 0,
                };
                let slots = self
                    .results
                    .entry(Arc::as_ptr(lp))
                    .or_insert_with(|| vec![None; count]);
                if let Some(slot) = slots.get_mut(*index) {
                    *slot = Some(match slot.take() {
                        Some(old) => &old + &g,
                        None => g,
                    });
                }
                return;
            }
            op => {
                let Some(g) = self.take(n) else { return };
                let out = match self.handles.remove(&Arc::as_ptr(n)) {
                    Some(out) => out,
                    None => Tensor::from_node(Arc::clone(n), device),
                };
                rules::input_grads(op, &inputs, &out, &g)
            }
        };
        for ((input, node), ig) in inputs.iter().zip(&n.inputs).zip(input_grads) {
            let Some(ig) = ig else { continue };
            if !node.requires_grad {
                continue;
            }
            debug_assert_eq!(
                ig.shape_exprs(),
                input.shape_exprs(),
                "gradient of {} has the wrong shape",
                n.op.name()
            );
            self.add(node, ig);
        }
    }
}

/// The gradients of `wrt` (nodes gradients flow through) given the
/// gradients `cots` of `outs`: a vector-Jacobian product, recorded as lazy
/// ops; `None` where nothing flows. Leaves of the graph get nothing.
#[track_caller]
pub(crate) fn vjp(outs: &[Tensor], cots: &[Tensor], wrt: &[Tensor]) -> Vec<Option<Tensor>> {
    let Some(device) = outs.first().map(|t| t.device().clone()) else {
        return vec![None; wrt.len()];
    };
    let wrt: Vec<Arc<Node>> = wrt.iter().map(|t| t.node()).collect();
    let is_wrt = |n: &Node| wrt.iter().any(|w| std::ptr::eq(&**w, n));
    let roots: Vec<Arc<Node>> = outs
        .iter()
        .map(|t| t.node())
        .filter(|n| n.requires_grad)
        .collect();
    let order = grad_order(&roots, is_wrt);
    let mut flow = Flow::default();
    for (o, c) in outs.iter().zip(cots) {
        let n = o.node();
        if n.requires_grad {
            flow.add(&n, c.clone());
        }
    }
    for n in order.iter().rev() {
        if is_wrt(n) || n.grad_leaf.is_some() {
            continue;
        }
        if let Some(history) = &n.grad_history {
            if let Some(g) = flow.take(n) {
                flow.add(history, g);
            }
            continue;
        }
        flow.through(n, &device);
    }
    wrt.iter().map(|w| flow.take(w)).collect()
}

/// The nodes a backward from `roots` goes through, each after every node
/// it depends on: the operands of nodes gradients flow through, up to the
/// gradient leaves (and the nodes `stop` picks), and through the history
/// of a value a sync computed (`Node::grad_history`).
#[track_caller]
fn grad_order(roots: &[Arc<Node>], stop: impl Fn(&Node) -> bool) -> Vec<Arc<Node>> {
    let next = |n: &Node| -> smallvec::SmallVec<[Arc<Node>; 3]> {
        if n.grad_leaf.is_some() || !n.requires_grad || stop(n) {
            return smallvec::SmallVec::new();
        }
        match &n.grad_history {
            Some(h) => smallvec::smallvec![h.clone()],
            None => n
                .inputs
                .iter()
                .filter(|i| i.requires_grad)
                .cloned()
                .collect(),
        }
    };
    let mut order = Vec::new();
    let mut seen: rustc_hash::FxHashSet<*const Node> = Default::default();
    // (node, whether the nodes it depends on were pushed already)
    let mut stack: Vec<(Arc<Node>, bool)> =
        roots.iter().rev().map(|r| (r.clone(), false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            order.push(n);
            continue;
        }
        if !seen.insert(Arc::as_ptr(&n)) {
            continue;
        }
        let deps = next(&n);
        stack.push((n, true));
        for d in deps.into_iter().rev() {
            if !seen.contains(&Arc::as_ptr(&d)) {
                stack.push((d, false));
            }
        }
    }
    order
}
