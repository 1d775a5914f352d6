//! Graph nodes: an op applied to input nodes, typed by dtype and shape.

use super::leaf::{LeafData, LeafTensor};
use super::op::Op;
use crate::dtype::DType;
use crate::symint::{Shape, SizeExpr};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

static LIVE_NODES: AtomicUsize = AtomicUsize::new(0);

/// The number of graph nodes alive in the process (a memory check: it stays
/// bounded across steps because a sync releases the graph behind the
/// tensors it computes).
pub fn live_node_count() -> usize {
    LIVE_NODES.load(Ordering::Relaxed)
}

/// Input list of a node; most ops have at most three operands.
pub(crate) type Inputs = SmallVec<[Arc<Node>; 3]>;

/// One operation in a lazy graph. Immutable once built; shared with `Arc`.
#[derive(Debug)]
pub struct Node {
    pub(crate) op: Op,
    /// Operands, in the order the op documents.
    pub(crate) inputs: Inputs,
    /// Nodes that define variables mentioned by the op's own size
    /// arguments (e.g. `Iota`'s shape) that no program has computed yet.
    /// They are part of the program so those sizes can be computed.
    pub(crate) size_deps: SmallVec<[Arc<Node>; 1]>,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    /// True when a gradient must flow through this node.
    pub(crate) requires_grad: bool,
    /// Set on the node standing for a leaf tensor that requires grad:
    /// backward accumulates into that tensor here and goes no further.
    pub(crate) grad_leaf: Option<LeafTensor>,
    /// On a data leaf that a sync computed from a node gradients flow
    /// through: that node, so a backward recorded after the read still
    /// reaches the parameters (see `Node::with_grad_history`).
    pub(crate) grad_history: Option<Arc<Node>>,
    /// Set once a backward has gone through this node: as with PyTorch's
    /// `retain_graph=False`, its history is not kept past a sync.
    backward_done: AtomicBool,
    /// The deepest loop body whose placeholders (a carry, the counter)
    /// this node depends on, through its inputs or size dependencies: 0
    /// outside every loop body. Tracing a body at depth `d` stops at nodes
    /// below `d`, which are values from outside it (see `ir::loops`).
    pub(crate) loop_depth: u32,
    /// Where the op was recorded: the user's call of the public op (ops
    /// carry `#[track_caller]` down to here), for diagnostics
    /// (`runtime::diagnose`).
    pub(crate) location: &'static Location<'static>,
}

impl Node {
    #[track_caller]
    pub(crate) fn new(
        op: Op,
        inputs: Inputs,
        size_deps: SmallVec<[Arc<Node>; 1]>,
        dtype: DType,
        shape: Shape,
        requires_grad: bool,
    ) -> Arc<Node> {
        let loop_depth = inputs
            .iter()
            .chain(&size_deps)
            .map(|n| n.loop_depth)
            .max()
            .unwrap_or(0);
        Node::with_depth(
            op,
            inputs,
            size_deps,
            dtype,
            shape,
            requires_grad,
            loop_depth,
        )
    }

    /// [`Node::new`] with its loop depth given: a loop body's placeholder
    /// (see `ir::loops`), the one node that starts a depth.
    #[track_caller]
    pub(crate) fn with_depth(
        op: Op,
        inputs: Inputs,
        size_deps: SmallVec<[Arc<Node>; 1]>,
        dtype: DType,
        shape: Shape,
        requires_grad: bool,
        loop_depth: u32,
    ) -> Arc<Node> {
        LIVE_NODES.fetch_add(1, Ordering::Relaxed);
        Arc::new(Node {
            op,
            inputs,
            size_deps,
            dtype,
            shape,
            requires_grad,
            grad_leaf: None,
            grad_history: None,
            backward_done: AtomicBool::new(false),
            loop_depth,
            location: Location::caller(),
        })
    }

    /// A copy of this node marked as the gradient leaf of `leaf`.
    pub(crate) fn leaf_copy(&self, leaf: LeafTensor) -> Arc<Node> {
        self.marked_copy(Some(leaf), None)
    }

    /// The data leaf `self` (a sync's result for `computed`) carrying
    /// `computed` as its gradient history, when gradients flow through
    /// `computed` and no backward has gone through it yet; else `self`.
    /// A tensor read before its backward is recorded (`loss.item()` then
    /// `loss.backward()`) keeps its graph, as in PyTorch; the backward
    /// then computes the history's forward values again in its program.
    pub(crate) fn with_grad_history(self: &Arc<Node>, computed: &Arc<Node>) -> Arc<Node> {
        if !computed.keeps_history_after_sync() {
            return self.clone();
        }
        self.marked_copy(None, Some(computed.clone()))
    }

    /// True when a sync's result for this node keeps the node as its
    /// gradient history (see [`Node::with_grad_history`]).
    pub(crate) fn keeps_history_after_sync(&self) -> bool {
        self.requires_grad
            && self.grad_leaf.is_none()
            && !self.backward_done.load(Ordering::Relaxed)
    }

    /// A copy of this node that gradients flow through, standing for a
    /// gradient leaf or carrying a gradient history.
    fn marked_copy(&self, grad_leaf: Option<LeafTensor>, history: Option<Arc<Node>>) -> Arc<Node> {
        LIVE_NODES.fetch_add(1, Ordering::Relaxed);
        Arc::new(Node {
            op: self.op.clone(),
            inputs: self.inputs.clone(),
            size_deps: self.size_deps.clone(),
            dtype: self.dtype,
            shape: self.shape.clone(),
            requires_grad: true,
            grad_leaf,
            grad_history: history,
            backward_done: AtomicBool::new(false),
            loop_depth: self.loop_depth,
            location: self.location,
        })
    }

    /// A copy of this node that gradients flow through, and no further:
    /// the point a vector-Jacobian product is taken with respect to (see
    /// `autograd::loops`).
    pub(crate) fn grad_root_copy(&self) -> Arc<Node> {
        self.marked_copy(None, None)
    }

    /// Records that a backward went through this node.
    pub(crate) fn mark_backward_done(&self) {
        self.backward_done.store(true, Ordering::Relaxed);
    }

    /// True when this node is the gradient leaf of `t`.
    pub(crate) fn is_leaf_of<T>(&self, t: &Arc<T>) -> bool {
        self.grad_leaf.as_ref().is_some_and(|l| l.is(t))
    }

    /// The data of a data leaf.
    pub(crate) fn leaf_data(&self) -> Option<&LeafData> {
        match &self.op {
            Op::Data { data, .. } => Some(data),
            _ => None,
        }
    }

    /// True when any dimension is data-dependent.
    pub(crate) fn is_dynamic(&self) -> bool {
        self.shape.iter().any(|d| d.as_const().is_none())
    }

    /// Upper bounds of the shape.
    pub(crate) fn bounds(&self) -> Vec<usize> {
        self.shape.iter().map(|d| d.hi().max(0) as usize).collect()
    }
}

impl Drop for Node {
    /// Drops the graph behind a node iteratively, so that a long chain of
    /// pending ops cannot overflow the stack.
    fn drop(&mut self) {
        LIVE_NODES.fetch_sub(1, Ordering::Relaxed);
        // An input this node held alone is taken apart, its own inputs
        // pushed on the stack; dropping a node whose inputs other nodes
        // still hold, the common case, allocates nothing.
        let mut stack: Vec<Arc<Node>> = Vec::new();
        let empty_into = |node: &mut Node, stack: &mut Vec<Arc<Node>>| {
            stack.extend(node.inputs.drain(..));
            stack.extend(node.size_deps.drain(..));
        };
        let take = |mut n: Arc<Node>, stack: &mut Vec<Arc<Node>>| {
            if let Some(alone) = Arc::get_mut(&mut n) {
                // Emptied in place (moving a node out copies its ~300
                // bytes); it drops with `n`, its input lists empty.
                empty_into(alone, stack);
            } else if let Some(mut inner) = Arc::into_inner(n) {
                // The last handle of a node that weak handles still
                // name (a size variable's operand).
                empty_into(&mut inner, stack);
            }
        };
        for n in self.inputs.drain(..).chain(self.size_deps.drain(..)) {
            take(n, &mut stack);
        }
        while let Some(n) = stack.pop() {
            take(n, &mut stack);
        }
    }
}

/// Formats a shape with bounds: `[<=5, 2]`.
pub(crate) fn shape_string(shape: &[SizeExpr]) -> String {
    let dims: Vec<String> = shape
        .iter()
        .map(|d| match d.as_const() {
            Some(c) => c.to_string(),
            None => format!("<={}", d.hi()),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// A value for messages: `f32[<=5, 2] from nonzero`.
pub(crate) fn describe_value(op: &Op, dtype: DType, shape: &[SizeExpr]) -> String {
    if let Op::While(l) = op {
        // Its own value is a token: name the loop.
        return format!("a {}", l.name());
    }
    format!("{dtype}{} from {}", shape_string(shape), op.name())
}

/// Values for messages, largest (at their bounds) first; at most three
/// are named.
pub(crate) fn describe_values<'a>(
    values: impl IntoIterator<Item = (&'a Op, DType, &'a [SizeExpr])>,
) -> String {
    let mut all: Vec<(u128, String)> = values
        .into_iter()
        .map(|(op, dtype, shape)| {
            let bytes = shape.iter().fold(dtype.size_in_bytes() as u128, |acc, d| {
                acc.saturating_mul(d.hi().max(0) as u128)
            });
            (bytes, describe_value(op, dtype, shape))
        })
        .collect();
    all.sort_by_key(|v| std::cmp::Reverse(v.0));
    let n = all.len();
    let mut text: Vec<String> = all.into_iter().take(3).map(|(_, d)| d).collect();
    if n > 3 {
        text.push(format!("{} more", n - 3));
    }
    match n {
        0 => "sizes".into(),
        1 => format!("tensor {}", text[0]),
        _ => format!("tensors {}", text.join(", ")),
    }
}

/// The nodes reachable from `roots` in topological order (inputs first),
/// computed without recursion. `stop(n)` marks nodes whose predecessors are
/// not visited (they are treated as leaves). Borrows instead of cloning:
/// the roots keep every reachable node alive.
pub(crate) fn topo_order(roots: &[Arc<Node>], stop: impl Fn(&Node) -> bool) -> Vec<&Arc<Node>> {
    topo_order_indexed(roots.iter(), stop).0
}

/// [`topo_order`] and each node's position in it.
pub(crate) fn topo_order_indexed<'a>(
    roots: impl DoubleEndedIterator<Item = &'a Arc<Node>>,
    stop: impl Fn(&Node) -> bool,
) -> (Vec<&'a Arc<Node>>, FxHashMap<*const Node, usize>) {
    // Room for the graph up front, sized by the last traversal (a training
    // loop traces graphs of one size over and over): grown from empty, the
    // map rehashes several times on every sync (small graphs trace ~15%
    // faster with room for 32).
    static LAST_LEN: AtomicUsize = AtomicUsize::new(32);
    let room = LAST_LEN.load(Ordering::Relaxed).clamp(32, 4096);
    let mut order = Vec::with_capacity(room);
    let mut index: FxHashMap<*const Node, usize> =
        FxHashMap::with_capacity_and_hasher(room, Default::default());
    // (node, whether its deps were already pushed)
    let mut stack: Vec<(&'a Arc<Node>, bool)> = roots.rev().map(|r| (r, false)).collect();
    while let Some((n, expanded)) = stack.pop() {
        let key = Arc::as_ptr(n);
        if expanded {
            if let std::collections::hash_map::Entry::Vacant(e) = index.entry(key) {
                e.insert(order.len());
                order.push(n);
            }
            continue;
        }
        if index.contains_key(&key) {
            continue;
        }
        stack.push((n, true));
        if !stop(n) {
            for d in n.size_deps.iter().rev().chain(n.inputs.iter().rev()) {
                if !index.contains_key(&Arc::as_ptr(d)) {
                    stack.push((d, false));
                }
            }
        }
    }
    LAST_LEN.store(order.len(), Ordering::Relaxed);
    (order, index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::op::{Lit, UnaryOp};

    /// A chain far deeper than a thread's stack could drop recursively
    /// drops, and so does a node whose inputs other nodes still hold.
    #[test]
    fn a_long_chain_and_a_shared_input_drop_without_recursion() {
        let leaf = Node::new(
            Op::Scalar {
                value: Lit(1.0),
                dtype: DType::F32,
            },
            Inputs::new(),
            SmallVec::new(),
            DType::F32,
            Shape::new(),
            false,
        );
        let neg = |x: &Arc<Node>| {
            Node::new(
                Op::Unary(UnaryOp::Neg),
                smallvec::smallvec![x.clone()],
                SmallVec::new(),
                DType::F32,
                Shape::new(),
                false,
            )
        };
        let mut chain = neg(&leaf);
        for _ in 0..1_000_000 {
            chain = neg(&chain);
        }
        let shared = neg(&leaf);
        drop(chain);
        drop(shared);
        assert_eq!(Arc::strong_count(&leaf), 1);
    }
}
