//! The user-facing `Tensor`: eager-looking ops that record lazy graph nodes.

pub(crate) mod broadcast;
mod bucket;
pub(crate) mod capture_mode;
mod collective;
mod compare;
mod control_flow;
mod conv;
mod create;
mod dim;
mod display;
mod dynamic;
mod elementwise;
mod grad_mode;
mod guard;
mod indexing;
mod linalg;
mod masking;
mod pointwise;
mod random;
mod read;
mod rearrange;
mod reduce;
mod reduce_composite;
pub(crate) mod registry;
pub(crate) mod replay_hooks;
mod scan;
mod shape_ops;
mod sort;
mod std_ops;
mod sym_bool;
mod sym_int;
pub(crate) mod sync;
mod upsample;
mod window;

pub use collective::ReduceOp;
pub(crate) use control_flow::loop_node;
pub use control_flow::{fori_loop, while_loop, TripCount};
pub(crate) use create::SplitMix64;
pub use dim::DimIndex;
use dim::ResolveDim;
pub(crate) use grad_mode::enable_grad;
pub use grad_mode::no_grad;
pub use random::manual_seed;
pub(crate) use random::prepare_random_state;
pub use scan::scan;
pub(crate) use scan::scan_with;
pub use sym_bool::SymBool;
pub use sym_int::SymInt;

use crate::device::Device;
use crate::dtype::DType;
use crate::ir::infer::infer;
use crate::ir::node::{shape_string, Inputs};
use crate::ir::{Node, Op};
use crate::symint::{Shape, SizeExpr};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

static NEXT_TENSOR: AtomicU64 = AtomicU64::new(0);

/// The id the next tensor will get: every tensor created before this call
/// has a smaller one.
#[track_caller]
pub(crate) fn next_tensor_id() -> u64 {
    NEXT_TENSOR.load(Ordering::Relaxed)
}

/// A lazy tensor.
///
/// Ops record graph nodes and return at once; nothing runs until
/// [`mark_step`](crate::mark_step) or a read (`to_vec`, `item`, ..).
/// Cloning a `Tensor` is cheap and shares the value.
///
/// ```
/// use lazyxla::{Tensor, DType};
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
/// let b = (&a * 2.0 + 1.0).relu();
/// assert_eq!(b.dtype(), DType::F32);
/// assert_eq!(b.to_vec::<f32>().unwrap(), vec![3.0, 5.0, 7.0]);
/// ```
#[derive(Clone)]
pub struct Tensor {
    pub(crate) inner: Arc<TensorInner>,
}

/// The shared state of a tensor.
pub(crate) struct TensorInner {
    id: u64,
    /// This tensor's slot in the registry of live tensors.
    slot: usize,
    /// The node's dtype and rank, which no rebinding changes (syncs and
    /// `assign` keep them; `mark_dynamic` changes sizes only), kept here so
    /// that asking for them takes no lock: ops ask several times each.
    dtype: DType,
    rank: usize,
    device: Device,
    /// The node computing the value: a pending op, or a `Data` leaf once
    /// computed. Replaced by syncs and in-place updates.
    node: Mutex<Arc<Node>>,
    /// The data leaf the tensor held when it was last `assign`ed a
    /// pending value over data (the first such `assign` since it was last
    /// computed, or since it was assigned data): what a step whose size
    /// check fails restores (see [`Tensor::restore_before_assign`]), and
    /// the old value a step may donate (`runtime::donation`).
    before_assign: Mutex<Option<Arc<Node>>>,
    /// The accumulated gradient (see `autograd`).
    pub(crate) grad: GradSlot,
    /// True for a leaf that gradients accumulate into.
    pub(crate) requires_grad: std::sync::atomic::AtomicBool,
}

impl Drop for TensorInner {
    fn drop(&mut self) {
        registry::unregister(self.slot);
    }
}

impl Tensor {
    pub(crate) fn from_inner(inner: Arc<TensorInner>) -> Tensor {
        Tensor { inner }
    }

    /// Wraps a node into a new registered tensor.
    #[track_caller]
    pub(crate) fn from_node(node: Arc<Node>, device: &Device) -> Tensor {
        let inner = Arc::new_cyclic(|weak| TensorInner {
            id: NEXT_TENSOR.fetch_add(1, Ordering::Relaxed),
            slot: registry::register(weak.clone()),
            dtype: node.dtype,
            rank: node.shape.len(),
            device: device.clone(),
            node: Mutex::new(node),
            before_assign: Mutex::new(None),
            grad: GradSlot::default(),
            requires_grad: std::sync::atomic::AtomicBool::new(false),
        });
        Tensor { inner }
    }

    /// True when `other` is a handle of this same tensor.
    pub(crate) fn is(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A process-wide identity, increasing in creation order.
    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    /// The node currently computing this tensor.
    #[track_caller]
    pub(crate) fn node(&self) -> Arc<Node> {
        self.inner.node.lock().clone()
    }

    /// Runs `f` on the node, under its lock: no reference to take and
    /// release when `f` only looks.
    #[track_caller]
    pub(crate) fn with_node<R>(&self, f: impl FnOnce(&Node) -> R) -> R {
        f(&self.inner.node.lock())
    }

    /// The node to record as an operand. For a leaf that requires grad
    /// (outside `no_grad`), a copy of its node marked as that leaf, so
    /// backward knows where to accumulate.
    #[track_caller]
    pub(crate) fn input_node(&self) -> Arc<Node> {
        self.apply_buckets();
        let mut n = self.inner.node.lock();
        if self.inner.requires_grad.load(Ordering::Relaxed)
            && grad_mode::grad_enabled()
            && !n.is_leaf_of(&self.inner)
        {
            let leaf: std::sync::Weak<TensorInner> = Arc::downgrade(&self.inner);
            *n = n.leaf_copy(crate::ir::leaf::LeafTensor::new(leaf));
        }
        n.clone()
    }

    /// True when the value still has to be computed.
    #[track_caller]
    pub(crate) fn is_pending(&self) -> bool {
        !matches!(self.inner.node.lock().op, Op::Data { .. })
    }

    /// Replaces the node if it is still `expected` (a concurrent in-place
    /// update wins over a sync result).
    /// Returns, when it rebinds, the value the tensor had before it was
    /// `assign`ed since its last sync (`Some(None)` when it was not).
    #[track_caller]
    pub(crate) fn rebind_if_unchanged(
        &self,
        expected: &Arc<Node>,
        new: Arc<Node>,
    ) -> Option<Option<Arc<Node>>> {
        let mut n = self.inner.node.lock();
        if Arc::ptr_eq(&n, expected) {
            *n = new;
            Some(self.inner.before_assign.lock().take())
        } else {
            None
        }
    }

    /// The data leaf this tensor held when it was first `assign`ed since
    /// its last sync, if it was.
    #[track_caller]
    pub(crate) fn assigned_from(&self) -> Option<Arc<Node>> {
        self.inner.before_assign.lock().clone()
    }

    /// Gives the tensor back the value `before` it had before a step that
    /// failed a size check (see `tensor::sync::verify`).
    #[track_caller]
    pub(crate) fn restore_to(&self, before: Arc<Node>) {
        *self.inner.node.lock() = before;
        self.inner.before_assign.lock().take();
    }

    /// Gives back the pending `node` a read computed with another tensor
    /// before its size check failed (see `tensor::sync::verify`), and
    /// the value `before` it was `assign`ed, if it was.
    pub(crate) fn restore_pending(&self, node: Arc<Node>, before: Option<Arc<Node>>) {
        *self.inner.node.lock() = node;
        *self.inner.before_assign.lock() = before;
    }

    /// After a step whose size check failed: a tensor `assign`ed since it
    /// was last computed gets back the value it had then (parameters and
    /// optimizer state keep their values, as when PyTorch raises before
    /// the update). Others keep their pending value.
    #[track_caller]
    pub(crate) fn restore_before_assign(&self) {
        let mut n = self.inner.node.lock();
        if matches!(n.op, Op::Data { .. }) {
            return;
        }
        if let Some(old) = self.inner.before_assign.lock().take() {
            *n = old;
        }
    }

    /// Replaces this tensor's value with `value`'s: an in-place update, as
    /// the optimizers make (PyTorch's `p.copy_(v)`, without a copy). Every
    /// handle of this tensor sees the new value; nothing runs.
    ///
    /// Panics when the dtypes or shapes (with bounds) differ.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let alias = w.clone();
    /// w.assign(&(&w * 10.0));
    /// assert_eq!(alias.to_vec::<f32>().unwrap(), vec![10.0, 20.0]);
    /// ```
    #[track_caller]
    pub fn assign(&self, value: &Tensor) {
        let new = value.node();
        assert!(
            new.dtype == self.dtype() && new.shape == self.node().shape,
            "assign: the new value {}{} must match the tensor {}{}",
            new.dtype,
            shape_string(&new.shape),
            self.dtype(),
            shape_string(&self.node().shape)
        );
        let mut n = self.inner.node.lock();
        if matches!(n.op, Op::Data { .. }) {
            // The value before this step: the data the tensor holds now
            // (an earlier `assign` of data, `load_state_dict`'s, took
            // effect at once).
            *self.inner.before_assign.lock() = Some(n.clone());
        }
        *n = new;
    }

    /// The device the tensor lives on.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    /// println!("on {}", x.device().name());
    /// ```
    #[track_caller]
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// The element type.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// assert_eq!(Tensor::arange(3).dtype(), DType::I64);
    /// ```
    #[track_caller]
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The number of dimensions.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// assert_eq!(Tensor::arange(6).reshape(&[2, 3]).rank(), 2);
    /// ```
    #[track_caller]
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// The size of dimension `dim`: static, or dynamic with a bound.
    ///
    /// Panics when `dim` is out of range.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let nz = x.nonzero();
    /// assert_eq!(nz.size(0).to_string(), "<=3");
    /// assert_eq!(nz.size(-1), 1.into());
    /// assert_eq!(nz.size(0).materialize().unwrap(), 2);
    /// ```
    #[track_caller]
    pub fn size(&self, dim: impl DimIndex) -> SymInt {
        self.apply_buckets();
        let node = self.node();
        let d = dim.resolve("size", &node.shape);
        sym(&node, &node.shape[d])
    }

    /// All sizes.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let s: Vec<String> = x.nonzero().sizes().iter().map(|s| s.to_string()).collect();
    /// assert_eq!(s, ["<=3", "1"]);
    /// ```
    #[track_caller]
    pub fn sizes(&self) -> Vec<SymInt> {
        self.apply_buckets();
        let node = self.node();
        node.shape.iter().map(|e| sym(&node, e)).collect()
    }

    /// The static upper bound of every dimension.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// assert_eq!(x.nonzero().upper_bounds(), vec![3, 1]);
    /// ```
    #[track_caller]
    pub fn upper_bounds(&self) -> Vec<usize> {
        self.apply_buckets();
        self.node().bounds()
    }

    /// True when some dimension's size depends on data.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// assert!(!x.is_dynamic());
    /// assert!(x.nonzero().is_dynamic());
    /// ```
    #[track_caller]
    pub fn is_dynamic(&self) -> bool {
        self.node().is_dynamic()
    }

    /// The shape with bounds as text, e.g. `[<=5, 2]`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// assert_eq!(x.nonzero().shape_string(), "[<=3, 1]");
    /// ```
    #[track_caller]
    pub fn shape_string(&self) -> String {
        self.apply_buckets();
        shape_string(&self.node().shape)
    }

    #[track_caller]
    pub(crate) fn shape_exprs(&self) -> Shape {
        self.apply_buckets();
        self.node().shape.clone()
    }

    /// Records `op` applied to `inputs`. `size_deps` are nodes defining
    /// size variables that the op's own arguments mention. A misuse panics
    /// with inference's message.
    #[track_caller]
    pub(crate) fn apply(op: Op, inputs: &[&Tensor], size_deps: SmallVec<[Arc<Node>; 1]>) -> Tensor {
        match Tensor::try_apply(op, inputs, size_deps) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    #[track_caller]
    pub(crate) fn try_apply(
        op: Op,
        inputs: &[&Tensor],
        size_deps: SmallVec<[Arc<Node>; 1]>,
    ) -> crate::Result<Tensor> {
        let device = match inputs.first() {
            Some(t) => t.device().clone(),
            None => Device::default(),
        };
        Tensor::try_apply_on(op, inputs, size_deps, &device)
    }

    #[track_caller]
    pub(crate) fn try_apply_on(
        op: Op,
        inputs: &[&Tensor],
        size_deps: SmallVec<[Arc<Node>; 1]>,
        device: &Device,
    ) -> crate::Result<Tensor> {
        for t in inputs {
            if !t.device().same(device) {
                return Err(crate::Error::DeviceMismatch {
                    op: op.name(),
                    lhs: device.name().to_string(),
                    rhs: t.device().name().to_string(),
                });
            }
        }
        let nodes: Inputs = inputs.iter().map(|t| t.input_node()).collect();
        if crate::runtime::auto_dynamic::any() && nodes.iter().any(|n| dynamic::has_automatic(n)) {
            // An op that needs a size that automatic dynamic dims made
            // dynamic static gets it specialized to its value instead.
            let retry = (op.clone(), size_deps.clone());
            return match record(op, nodes.clone(), size_deps) {
                Err(crate::Error::DynamicUnsupported { .. }) => {
                    let fixed = nodes
                        .iter()
                        .map(dynamic::specialized)
                        .collect::<crate::Result<Inputs>>()?;
                    Ok(Tensor::from_node(record(retry.0, fixed, retry.1)?, device))
                }
                r => Ok(Tensor::from_node(r?, device)),
            };
        }
        Ok(Tensor::from_node(record(op, nodes, size_deps)?, device))
    }
}

/// Runs `f` as the sync site `kind` at the caller's line (see
/// `runtime::diagnose`): a public op that may run a program.
#[track_caller]
pub(crate) fn at_site<R>(kind: &'static str, f: impl FnOnce() -> R) -> R {
    crate::runtime::diagnose::with_site(kind, std::panic::Location::caller(), f)
}

/// Records `op` on operand nodes: inference, then one node. Internal
/// intermediates (a scalar and its broadcast) are recorded this way
/// without a `Tensor` around them; their device is their consumer's.
#[track_caller]
pub(crate) fn record(
    op: Op,
    nodes: Inputs,
    size_deps: SmallVec<[Arc<Node>; 1]>,
) -> crate::Result<Arc<Node>> {
    let (dtype, shape) = infer(&op, &nodes)?;
    // Only float results carry gradients: indices, masks and sizes do not.
    let requires_grad =
        grad_mode::grad_enabled() && dtype.is_float() && nodes.iter().any(|n| n.requires_grad);
    Ok(Node::new(op, nodes, size_deps, dtype, shape, requires_grad))
}

/// A user-facing size for dimension expression `e` of `node`, anchored to
/// the node while any of its variables is still uncomputed.
#[track_caller]
fn sym(node: &Arc<Node>, e: &SizeExpr) -> SymInt {
    let mut anchors = SmallVec::new();
    if e.as_const().is_none() {
        anchors.push(node.clone());
    }
    SymInt::new(e.clone(), anchors)
}

/// Nodes to record as size dependencies for `exprs`: `candidates` when any
/// variable of `exprs` is still uncomputed.
#[track_caller]
pub(crate) fn size_deps_for(
    exprs: &[SizeExpr],
    candidates: &[Arc<Node>],
) -> SmallVec<[Arc<Node>; 1]> {
    let pending = exprs
        .iter()
        .flat_map(|e| e.vars())
        .any(|v| !crate::runtime::size_values::is_bound(&v));
    if pending {
        candidates.iter().cloned().collect()
    } else {
        SmallVec::new()
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({}{}, {})",
            self.dtype(),
            self.shape_string(),
            self.device()
        )
    }
}

/// A tensor's gradient slot. Most tensors never have a gradient, and a
/// captured step's replay asks each tensor it reuses whether it has one:
/// a flag, set by the first access, answers that without the lock.
#[derive(Default)]
pub(crate) struct GradSlot {
    value: Mutex<Option<Tensor>>,
    /// False until the slot is first locked: the value is then `None`.
    touched: AtomicBool,
}

impl GradSlot {
    /// Locks the gradient for reading or writing.
    #[track_caller]
    pub fn lock(&self) -> parking_lot::MutexGuard<'_, Option<Tensor>> {
        self.touched.store(true, Ordering::Relaxed);
        self.value.lock()
    }

    /// True when there is no gradient.
    #[track_caller]
    pub fn is_none(&self) -> bool {
        !self.touched.load(Ordering::Relaxed) || self.lock().is_none()
    }
}

#[cfg(test)]
mod grad_slot_tests {
    use super::*;

    #[test]
    fn a_slot_answers_from_its_value_once_used() {
        let slot = GradSlot::default();
        assert!(slot.is_none());
        *slot.lock() = Some(Tensor::scalar(1.0f32));
        assert!(!slot.is_none(), "a gradient is seen through the flag");
        *slot.lock() = None;
        assert!(slot.is_none());
    }
}
