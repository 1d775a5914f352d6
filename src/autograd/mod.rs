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

mod collective;
mod rules;

use crate::ir::Node;
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
    pub fn requires_grad(self, on: bool) -> Tensor {
        self.set_requires_grad(on);
        self
    }

    /// Sets whether this tensor is a leaf that accumulates gradients.
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
    pub fn is_requires_grad(&self) -> bool {
        self.inner.requires_grad.load(Ordering::Relaxed) || self.node().requires_grad
    }

    /// The accumulated gradient, if a `backward` reached this tensor.
    pub fn grad(&self) -> Option<Tensor> {
        self.inner.grad.lock().clone()
    }

    /// Forgets the accumulated gradient.
    pub fn zero_grad(&self) {
        *self.inner.grad.lock() = None;
    }

    /// The same value, cut off from the gradient graph.
    pub fn detach(&self) -> Tensor {
        no_grad(|| {
            let n = self.node();
            if n.requires_grad {
                // A fresh node with the same op and inputs, not requiring grad.
                Tensor::from_node(
                    Node::new(
                        n.op.clone(),
                        n.inputs.clone(),
                        n.size_deps.clone(),
                        n.dtype,
                        n.shape.clone(),
                        false,
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
            let order = grad_order(&root);
            for n in &order {
                n.mark_backward_done();
            }
            let mut grads: FxHashMap<*const Node, Tensor> = FxHashMap::default();
            grads.insert(
                Arc::as_ptr(&root),
                Tensor::from_node(root.clone(), &device).ones_like(),
            );
            for n in order.iter().rev() {
                let Some(g) = grads.remove(&Arc::as_ptr(n)) else {
                    continue;
                };
                if let Some(history) = &n.grad_history {
                    // A value computed before this backward: its gradient
                    // is the gradient of the node it was computed from.
                    let key = Arc::as_ptr(history);
                    let total = match grads.remove(&key) {
                        Some(old) => &old + &g,
                        None => g,
                    };
                    grads.insert(key, total);
                    continue;
                }
                if let Some(leaf) = &n.grad_leaf {
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
                let inputs: Vec<Tensor> = n
                    .inputs
                    .iter()
                    .map(|i| Tensor::from_node(i.clone(), &device))
                    .collect();
                let out = Tensor::from_node(Arc::clone(n), &device);
                let input_grads = rules::input_grads(&n.op, &inputs, &out, &g);
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
                    let key = Arc::as_ptr(node);
                    let total = match grads.remove(&key) {
                        Some(old) => &old + &ig,
                        None => ig,
                    };
                    grads.insert(key, total);
                }
            }
        });
    }
}

/// The nodes a backward from `root` goes through, each after every node
/// it depends on: the operands of nodes gradients flow through, up to the
/// gradient leaves, and through the history of a value a sync computed
/// (`Node::grad_history`).
fn grad_order(root: &Arc<Node>) -> Vec<Arc<Node>> {
    let next = |n: &Node| -> Vec<Arc<Node>> {
        if n.grad_leaf.is_some() || !n.requires_grad {
            return Vec::new();
        }
        match &n.grad_history {
            Some(h) => vec![h.clone()],
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
    let mut stack = vec![(root.clone(), false)];
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
