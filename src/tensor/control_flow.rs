//! Device loops: [`fori_loop`] and [`while_loop`] record one loop node
//! whose body runs inside the program (a `stablehlo.while` on XLA), with
//! no host round trip and no unrolling.
//!
//! The body (and condition) closure runs once, on placeholder tensors
//! standing for the carries, and records ordinary lazy ops; the graph it
//! returns becomes the loop's programs (`ir::loops`). Values it uses from
//! outside (parameters, boxes, ..) become operands of the loop.
//!
//! A carry's bound is its initial value's: to let a carry's size change
//! (a list that grows each iteration), give the initial value a dynamic
//! dimension with the bound it needs (`mark_dynamic(dim, bound)`, or a
//! value from a dynamic op). The body returns each carry with the same
//! dtype and rank, the same static sizes, and dynamic sizes within the
//! bounds; a result whose bound is smaller is widened to the carry's.

use super::dim::ResolveDim;
use super::{grad_mode, record, size_deps_for, SymInt, Tensor};
use crate::device::Device;
use crate::dtype::DType;
use crate::ir::loops::{self, carry_type, Carry, Loop, LoopKind, Trip as LoopTrip};
use crate::ir::node::{shape_string, Inputs};
use crate::ir::{Node, Op};
use crate::symint::{Shape, SizeExpr, VarRef};
use smallvec::SmallVec;
use std::cell::Cell;
use std::sync::Arc;

/// How many times a [`fori_loop`] or [`scan`](crate::scan) runs: a static
/// count (`usize`, `i64`, `i32`), or one known only when the program
/// runs (a dynamic [`SymInt`], or an integer scalar tensor). A count
/// below 1 runs the body never.
#[derive(Debug)]
pub struct TripCount(pub(super) Trip);

#[derive(Debug)]
pub(super) enum Trip {
    Static(i64),
    /// A dynamic size: bounded, and the stacks of the loop have it.
    Sym(SymInt),
    Tensor(Tensor),
}

impl From<usize> for TripCount {
    #[track_caller]
    fn from(n: usize) -> TripCount {
        TripCount(Trip::Static(i64::try_from(n).unwrap_or(i64::MAX)))
    }
}
impl From<i64> for TripCount {
    #[track_caller]
    fn from(n: i64) -> TripCount {
        TripCount(Trip::Static(n))
    }
}
impl From<i32> for TripCount {
    #[track_caller]
    fn from(n: i32) -> TripCount {
        TripCount(Trip::Static(n as i64))
    }
}
impl From<&SymInt> for TripCount {
    #[track_caller]
    fn from(n: &SymInt) -> TripCount {
        match n.as_static() {
            Some(c) => TripCount(Trip::Static(c)),
            None => TripCount(Trip::Sym(n.clone())),
        }
    }
}
impl From<SymInt> for TripCount {
    #[track_caller]
    fn from(n: SymInt) -> TripCount {
        TripCount::from(&n)
    }
}
impl From<&Tensor> for TripCount {
    #[track_caller]
    fn from(t: &Tensor) -> TripCount {
        if !t.dtype().is_int() || t.rank() != 0 {
            panic!(
                "fori_loop: the trip count must be an integer scalar tensor, got {}{}",
                t.dtype(),
                t.shape_string()
            );
        }
        TripCount(Trip::Tensor(t.to_dtype(DType::I64)))
    }
}
impl From<Tensor> for TripCount {
    #[track_caller]
    fn from(t: Tensor) -> TripCount {
        TripCount::from(&t)
    }
}

impl Tensor {
    /// The same tensor with dynamic dimension `dim` bounded by `bound`:
    /// the program checks that its size is at most `bound` (a larger size
    /// fails the step with a clear error, never a silent truncation). A
    /// bound at or above the current one changes nothing. This keeps a
    /// loop carry that grows (`cat`) within its bound.
    ///
    /// Panics when `dim` is static and larger than `bound`.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let v = x.masked_select(&x.gt_scalar(0.0)); // [<=3]
    /// let more = Tensor::cat(&[&v, &v], 0); // [<=6]
    /// let capped = more.with_bound(0, 4);
    /// assert_eq!(capped.shape_string(), "[<=4]");
    /// assert_eq!(capped.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn with_bound(&self, dim: impl super::DimIndex, bound: usize) -> Tensor {
        let node = self.node();
        let d = dim.resolve("with_bound", &node.shape);
        let e = &node.shape[d];
        let bound = i64::try_from(bound).unwrap_or(i64::MAX);
        if e.hi() <= bound {
            return self.clone();
        }
        if e.as_const().is_some() {
            panic!(
                "with_bound: dimension {d} of {} is static ({e}), above the bound {bound}",
                self.shape_string()
            );
        }
        let mut shape = node.shape.clone();
        shape[d] = e.minimum(&SizeExpr::constant(bound));
        let check = crate::ir::check::SizeCheck::at_most("with_bound", e, bound);
        let g = super::guard::guard_node(&self.input_node(), shape, vec![check], &[])
            .unwrap_or_else(|err| panic!("{err}"));
        Tensor::from_node(g, self.device())
    }
}

thread_local! {
    /// The nesting depth of the loop bodies being traced on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// True while this thread traces a loop body. A `mark_step` on another
/// thread leaves the values of bodies being traced alone (they cannot be
/// computed outside their loop); on the tracing thread it reports them.
#[track_caller]
pub(crate) fn tracing_body() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

/// Runs `body` `n` times on the device, threading the carries through:
/// `carry = body(i, carry)` for `i = 0, 1, .., n - 1` (an I64 scalar
/// tensor). Returns the final carries. The loop is one op of the program
/// (XLA's `while`): nothing is unrolled and nothing returns to the host.
///
/// `body` runs once, when the loop is recorded, on placeholders; it must
/// return as many tensors as `init` has, each with its carry's dtype,
/// rank and static sizes, and dynamic sizes within the bounds of `init`'s
/// (a carry may grow within its bound: see the module docs). With a
/// static trip count the loop is differentiable: gradients reach the
/// initial carries and the tensors the body uses (parameters).
///
/// Panics, naming the carry and both shapes with bounds, when the body
/// breaks these rules.
///
/// ```
/// use lazyxla::{fori_loop, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// // Sum i * x for i in 0..4.
/// let out = fori_loop(4, &[x.zeros_like()], |i, c| {
///     vec![&c[0] + &(&x * &i.to_dtype(lazyxla::DType::F32))]
/// });
/// assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![6.0, 12.0]);
/// ```
#[track_caller]
pub fn fori_loop(
    n: impl Into<TripCount>,
    init: &[Tensor],
    body: impl FnOnce(&Tensor, &[Tensor]) -> Vec<Tensor>,
) -> Vec<Tensor> {
    let spec = LoopSpec {
        op: "fori_loop",
        trip: Some(n.into().0),
        xs: &[],
        reverse: false,
    };
    record_loop(spec, init, |carries, counter, _| {
        let i = counter.expect("a fori_loop has a counter");
        (None, body(i, carries), Vec::new())
    })
    .0
}

/// Runs `body` while `cond` holds, on the device: `while cond(carry) {
/// carry = body(carry) }`. `cond` returns a Bool scalar tensor. Returns
/// the final carries; the loop is one op of the program (XLA's `while`).
///
/// Both closures run once, when the loop is recorded (see [`fori_loop`]
/// for the rules the body follows). A `while_loop` is not differentiable
/// (its trip count depends on data): `backward()` through it panics and
/// says to use a [`fori_loop`] with a static trip count.
///
/// ```
/// use lazyxla::{while_loop, Tensor};
/// // Collatz steps from 6: 6 3 10 5 16 8 4 2 1.
/// let two = Tensor::scalar(2.0f64);
/// let out = while_loop(
///     &[Tensor::scalar(6.0f64), Tensor::scalar(0i64)],
///     |c| c[0].gt_scalar(1.0),
///     |c| {
///         let even = c[0].remainder(&two).eq_scalar(0.0);
///         let next = even.where_cond(&(&c[0] * 0.5), &(&c[0] * 3.0 + 1.0));
///         vec![next, &c[1] + 1]
///     },
/// );
/// assert_eq!(out[1].item::<i64>().unwrap(), 8);
/// ```
#[track_caller]
pub fn while_loop(
    init: &[Tensor],
    cond: impl FnOnce(&[Tensor]) -> Tensor,
    body: impl FnOnce(&[Tensor]) -> Vec<Tensor>,
) -> Vec<Tensor> {
    let spec = LoopSpec {
        op: "while_loop",
        trip: None,
        xs: &[],
        reverse: false,
    };
    record_loop(spec, init, |carries, _, _| {
        let c = cond(carries);
        (Some(c), body(carries), Vec::new())
    })
    .0
}

/// Restores the tracing depth when a body returns or panics.
struct DepthGuard(u32);

impl Drop for DepthGuard {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(self.0 - 1));
    }
}

/// What kind of loop [`record_loop`] records.
pub(super) struct LoopSpec<'a> {
    /// The user-facing name, for messages.
    pub op: &'static str,
    /// The trip count of a counted loop; `None` for a `while_loop`.
    pub trip: Option<Trip>,
    /// Scanned values: the body gets one row of each (dim 0 is the trip
    /// count, the others static).
    pub xs: &'a [Tensor],
    /// Rows from the last to the first.
    pub reverse: bool,
}

/// What the closures returned: the condition, the new carries and the
/// rows of the stacked outputs.
type TraceOut = (Option<Tensor>, Vec<Tensor>, Vec<Tensor>);

/// Records a loop: traces `trace` (condition and body on the
/// placeholders: carries, counter, rows), checks what it returned, and
/// builds the loop node; returns its final carries and stacked outputs.
#[track_caller]
pub(super) fn record_loop(
    spec: LoopSpec<'_>,
    init: &[Tensor],
    trace: impl FnOnce(&[Tensor], Option<&Tensor>, &[Tensor]) -> TraceOut,
) -> (Vec<Tensor>, Vec<Tensor>) {
    let op = spec.op;
    let trip_tensor = match &spec.trip {
        Some(Trip::Tensor(t)) => Some(t),
        _ => None,
    };
    let device = init
        .first()
        .or(trip_tensor)
        .or(spec.xs.first())
        .map_or_else(Device::default, |t| t.device().clone());
    for t in init.iter().chain(trip_tensor).chain(spec.xs) {
        if !t.device().same(&device) {
            panic!(
                "{op}: the initial carries and scanned values live on different devices ({} and {}); move them with `to_device`",
                device.name(),
                t.device().name()
            );
        }
    }
    let init_nodes: Vec<Arc<Node>> = init.iter().map(|t| t.node()).collect();
    let xs_nodes: Vec<Arc<Node>> = spec.xs.iter().map(|t| t.node()).collect();

    // Placeholders: each carry with a variable of its own per dynamic dim.
    let depth = DEPTH.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    let guard = DepthGuard(depth);
    let mut dim_vars: Vec<Vec<Option<VarRef>>> = Vec::with_capacity(init.len());
    let mut params: Vec<Arc<Node>> = Vec::with_capacity(init.len() + 1 + spec.xs.len());
    // Every float carry may carry a gradient in the body: a gradient can
    // reach it through the loop even when its initial value needs none,
    // and a `detach` inside the body must show.
    let grad = |dtype: DType| grad_mode::grad_enabled() && dtype.is_float();
    for n in &init_nodes {
        let vars: Vec<Option<VarRef>> = n
            .shape
            .iter()
            .map(|e| e.as_const().is_none().then(|| VarRef::fresh(0, e.hi())))
            .collect();
        let shape: Shape = n
            .shape
            .iter()
            .zip(&vars)
            .map(|(e, v)| v.clone().map_or_else(|| e.clone(), SizeExpr::var))
            .collect();
        params.push(loops::placeholder(op, n.dtype, shape, depth, grad(n.dtype)));
        dim_vars.push(vars);
    }
    let counter = spec
        .trip
        .is_some()
        .then(|| loops::placeholder(op, DType::I64, Shape::new(), depth, false));
    params.extend(counter.iter().cloned());
    for x in &xs_nodes {
        let row: Shape = x.shape[1..].iter().cloned().collect();
        params.push(loops::placeholder(op, x.dtype, row, depth, grad(x.dtype)));
    }
    let handles = |ps: &[Arc<Node>]| -> Vec<Tensor> {
        ps.iter()
            .map(|p| Tensor::from_node(p.clone(), &device))
            .collect()
    };
    let carries = handles(&params[..init.len()]);
    let rows = handles(&params[params.len() - xs_nodes.len()..]);
    let counter_t = counter.map(|c| Tensor::from_node(c, &device));
    let (cond, results, ys) = trace(&carries, counter_t.as_ref(), &rows);
    drop((carries, counter_t, rows));
    drop(guard);

    // What the closures returned.
    if results.len() != init.len() {
        panic!(
            "{op}: the body returned {} carries, the loop has {} (initial values {}); return one tensor per carry",
            results.len(),
            init.len(),
            describe(&init_nodes)
        );
    }
    let result_nodes: Vec<Arc<Node>> = results.iter().map(|t| t.node()).collect();
    let mut changes: Vec<Vec<Option<i64>>> = Vec::with_capacity(init.len());
    for (k, ((x, r), vars)) in init_nodes
        .iter()
        .zip(&result_nodes)
        .zip(&dim_vars)
        .enumerate()
    {
        changes.push(check_carry(op, k, x, r, vars));
    }
    let y_nodes: Vec<Arc<Node>> = ys.iter().map(|t| t.node()).collect();
    let y_types: Vec<Carry> = y_nodes
        .iter()
        .enumerate()
        .map(|(j, y)| {
            if y.is_dynamic() {
                panic!(
                    "{op}: output {j} of the body is {}{}; a stacked output needs static sizes: `pad_to_bound(fill)` it, or return it as a carry",
                    y.dtype,
                    shape_string(&y.shape)
                );
            }
            carry_type(y.dtype, &y.shape, &vec![None; y.shape.len()])
        })
        .collect();
    let mut roots: Vec<Vec<Arc<Node>>> = Vec::new();
    if let Some(c) = &cond {
        let n = c.node();
        if n.dtype != DType::Bool || !n.shape.is_empty() {
            panic!(
                "{op}: the condition must be a bool scalar, got {}{}; compare (`gt_scalar`, ..) and reduce (`any`, `all`) to one bool",
                n.dtype,
                shape_string(&n.shape)
            );
        }
        roots.push(vec![n]);
    }
    roots.push(result_nodes.into_iter().chain(y_nodes).collect());
    let traced = loops::trace(op, depth, &params, &roots).unwrap_or_else(|e| panic!("{e}"));
    drop((roots, params, results, ys, cond));

    let grad_stops = traced.grad_stops.last().cloned().unwrap_or_default();
    let mut programs = traced.programs.into_iter();
    let cond = match spec.trip {
        None => programs.next(),
        Some(_) => None,
    };
    let body = programs.next().expect("a body program");
    let mut checks: Vec<_> = cond.iter().flat_map(|c| c.checks()).collect();
    checks.extend(body.checks());
    let mut outer_sizes = traced.outer_sizes;
    let mut size_deps = traced.size_deps;
    let (kind, trip_tensor) = match spec.trip {
        None => (LoopKind::While, None),
        Some(Trip::Static(n)) => (
            LoopKind::Fori {
                trip: LoopTrip::Static(n),
            },
            None,
        ),
        Some(Trip::Tensor(t)) => (
            LoopKind::Fori {
                trip: LoopTrip::Operand,
            },
            Some(t),
        ),
        Some(Trip::Sym(n)) => {
            for d in size_deps_for(std::slice::from_ref(&n.expr), &n.anchors) {
                if !size_deps.iter().any(|x| Arc::ptr_eq(x, &d)) {
                    size_deps.push(d);
                }
            }
            outer_sizes.push(n.expr.clone());
            (
                LoopKind::Fori {
                    trip: LoopTrip::Size(outer_sizes.len() - 1),
                },
                None,
            )
        }
    };
    let mut lp = Loop {
        grad_stops,
        saves_carries: false,
        saved_nodes: Vec::new(),
        kind,
        carries: init_nodes
            .iter()
            .zip(&changes)
            .map(|(n, ch)| carry_type(n.dtype, &n.shape, ch))
            .collect(),
        xs: xs_nodes.len(),
        ys: y_types,
        reverse: spec.reverse,
        cond,
        body,
        captures: traced.captures.len(),
        outer_sizes,
        checks,
    };
    // A loop recorded for a gradient saves the carries of each iteration
    // for the backward pass, as JAX's scan saves its residuals. Inside a
    // body it does not: a gradient instantiates the body anew (with
    // saving loops), and this one's stacks would go unused.
    let needs_grad = init.iter().chain(spec.xs).any(|t| t.is_requires_grad())
        || traced.captures.iter().any(|c| c.requires_grad);
    if depth == 1 && lp.can_save_carries() && grad_mode::grad_enabled() && needs_grad {
        lp = lp.saving_carries();
    }
    let (nc, ny) = (lp.carries.len(), lp.ys.len());
    let mut inputs: Inputs = init.iter().map(|t| t.input_node()).collect();
    inputs.extend(trip_tensor.map(|t| t.input_node()));
    inputs.extend(spec.xs.iter().map(|t| t.input_node()));
    inputs.extend(traced.captures);
    let node =
        loop_node(Op::While(Arc::new(lp)), inputs, size_deps).unwrap_or_else(|e| panic!("{e}"));
    let result = |index: usize| {
        let mut ins = Inputs::new();
        ins.push(node.clone());
        let r = record(Op::LoopResult { index }, ins, SmallVec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_node(r, &device)
    };
    (
        (0..nc).map(result).collect(),
        (nc..nc + ny).map(result).collect(),
    )
}

/// Records a loop node: gradients flow through it when they flow
/// through any operand (its own value is a Bool token, so `record`'s
/// float rule does not apply).
#[track_caller]
pub(crate) fn loop_node(
    op: Op,
    inputs: Inputs,
    size_deps: SmallVec<[Arc<Node>; 1]>,
) -> crate::Result<Arc<Node>> {
    let (dtype, shape) = crate::ir::infer::infer(&op, &inputs)?;
    let requires_grad = grad_mode::grad_enabled() && inputs.iter().any(|n| n.requires_grad);
    Ok(Node::new(
        op,
        inputs,
        size_deps,
        dtype,
        shape,
        requires_grad,
    ))
}

/// `f32[3], i64[<=8]`: values for messages.
#[track_caller]
fn describe(nodes: &[Arc<Node>]) -> String {
    let all: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}{}", n.dtype, shape_string(&n.shape)))
        .collect();
    format!("[{}]", all.join(", "))
}

/// Checks the body's result `r` for carry `k` (initial value `x`, the
/// placeholder's variable per dynamic dim in `vars`); returns, per dim,
/// whether the body may change its size (with the lower bound of the
/// size after the loop).
#[track_caller]
fn check_carry(
    op: &'static str,
    k: usize,
    x: &Node,
    r: &Node,
    vars: &[Option<VarRef>],
) -> Vec<Option<i64>> {
    let both = || {
        format!(
            "the body returned {}{} for carry {k}, whose initial value is {}{}",
            r.dtype,
            shape_string(&r.shape),
            x.dtype,
            shape_string(&x.shape)
        )
    };
    if r.dtype != x.dtype || r.shape.len() != x.shape.len() {
        panic!(
            "{op}: {}; a carry keeps its dtype and rank in every iteration (convert with `to_dtype`, reshape)",
            both()
        );
    }
    let mut changes = Vec::with_capacity(vars.len());
    for (d, ((e, re), v)) in x.shape.iter().zip(&r.shape).zip(vars).enumerate() {
        match (e.as_const(), v) {
            (Some(c), _) => {
                if re.as_const() != Some(c) {
                    panic!(
                        "{op}: {}; dimension {d} of the carry is static ({c}) and must stay so: give the initial value a dynamic dimension with the bound it needs (`mark_dynamic({d}, bound)`) to let its size change, or `pad_to_bound(fill)` the result",
                        both()
                    );
                }
                changes.push(None);
            }
            (None, v) => {
                if re.hi() > e.hi() {
                    panic!(
                        "{op}: {}; dimension {d} may grow to {} in the body, above the carry's bound {}: give the initial value a larger bound (`mark_dynamic`, `pad`), or keep the result within it",
                        both(),
                        re.hi(),
                        e.hi()
                    );
                }
                let kept = v.as_ref().is_some_and(|v| re.as_var() == Some(v));
                changes.push((!kept).then(|| e.lo().min(re.lo()).max(0)));
            }
        }
    }
    changes
}
