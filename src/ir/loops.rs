//! Device loops in the IR: one `Op::While` node runs a loop whose body
//! (and, for `while_loop`, condition) are canonical programs held in the
//! op, so they are part of the cache key and the printer; its results are
//! read with `Op::LoopResult`.
//!
//! # Operands and programs
//!
//! A loop node's operands are the initial carries, then (for a `fori_loop`
//! whose trip count is a tensor) the trip count, then the scanned values
//! of a `scan` (`xs`), then the captured values: every value from outside
//! the body that the body or condition uses (parameters, boxes, ..),
//! passed in explicitly (closure conversion). Both programs take the same
//! parameters: the carries, then (for a counted loop) the I64 counter,
//! then one row of each scanned value, then the captured values. The body
//! returns the new carries, then one row of each stacked output (a
//! `scan`'s `ys`); the condition one Bool scalar.
//!
//! A trip count given as a dynamic size (`Trip::Size`, a `scan` over a
//! dynamic dim) is one of the node's size arguments: the loop runs that
//! many iterations, and its stacks (outputs, the carries saved for a
//! gradient) have that size along dim 0.
//!
//! # Sizes
//!
//! A carry's type is its initial value's: its dtype, rank, static sizes
//! and the bounds of its dynamic dims. Inside a program a dynamic carry
//! has a size variable of its own, numbered like any other, so its size
//! may change from one iteration to the next within its bound. After the
//! loop, a dim the body provably keeps (it returns the variable it was
//! given) keeps the initial value's size expression; any other dynamic
//! dim gets a fresh variable, defined by the loop (it starts a zone, like
//! `nonzero`). A program is closed: its parameters' shapes are formal
//! types whose variables it defines itself; a variable it needs from
//! outside (a size argument over an outer size) is one of the loop's
//! `outer_sizes`, which are the loop node's size arguments.
//!
//! # Tracing a body
//!
//! Placeholders (carries, counter) are `Data` nodes marked with a
//! [`LoopParam`] at the loop's nesting depth; every node records the
//! deepest placeholder it depends on (`Node::loop_depth`). Tracing from
//! the results stops at shallower nodes: those are the values from
//! outside, captured (scalars are copied in as constants instead).
//!
//! # Bounds
//!
//! The user states a carry's bound with its initial value
//! (`mark_dynamic(dim, bound)`, or a dynamic op's bound). The body returns
//! each carry with the same dtype, rank and static sizes, and dynamic sizes
//! within the bounds: a smaller bound is widened; a larger one panics
//! naming the loop, the carry and both shapes; `with_bound(dim, bound)`
//! caps a carry that grows with `cat`, checked when the program runs. A
//! body's value used outside the body is an error naming the loop. The
//! loop is one `stablehlo.while` of the step's program: nothing is
//! unrolled and nothing goes back to the host.

use super::check::SizeCheck;
use super::leaf::LeafData;
use super::node::{shape_string, topo_order_indexed, Node};
use super::op::Op;
use super::program::{PNode, Program, VarInfo, VarSource};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::symint::{Shape, SizeExpr, VarRef};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::Arc;

/// A device loop: what an `Op::While` node runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Loop {
    /// A counted or a conditional loop.
    pub kind: LoopKind,
    /// The type of each carry, in order.
    pub carries: Vec<Carry>,
    /// The number of scanned operands (a `scan`'s `xs`, after the trip
    /// count): iteration `i` gets row `i` of each (along dim 0) as a
    /// parameter, row `trip - 1 - i` when `reverse`.
    pub xs: usize,
    /// The type of each stacked output (static): the body returns one row
    /// of each after the new carries, and the loop stacks them along a
    /// new dim 0 (`[trip, ..]`), at the row its scanned operands were
    /// read from.
    pub ys: Vec<Carry>,
    /// Iterations visit rows from the last to the first, and the counter
    /// the programs get is the row (`trip - 1 - i`), as `jax.lax.scan`'s
    /// `reverse`.
    pub reverse: bool,
    /// `while_loop` only: the condition, one Bool scalar result.
    pub cond: Option<Program>,
    /// The body: the new carries, then the rows of the stacked outputs.
    pub body: Program,
    /// The number of captured operands (after the scanned operands).
    pub captures: usize,
    /// Sizes of the enclosing program the programs read
    /// (`VarSource::Arg(k)` is `outer_sizes[k]`), and a trip count given
    /// as a size ([`Trip::Size`]): the node's size arguments.
    pub outer_sizes: Vec<SizeExpr>,
    /// The checks the programs make, condition first, each in node order.
    pub checks: Vec<SizeCheck>,
    /// The body's nodes that stop gradients (recorded by `detach` or
    /// under `no_grad` from values that carry them), by index: its
    /// gradient instantiates them without gradients.
    pub grad_stops: Vec<usize>,
    /// A loop that [can](Loop::can_save_carries) and is recorded for a
    /// gradient (outside any body), or instantiated by one: it also
    /// returns the carries each iteration was given, stacked (`[trip, ..]`
    /// per carry), then the values of `saved_nodes` in each iteration,
    /// stacked, as results after the stacked outputs (see
    /// `autograd::loops`).
    pub saves_carries: bool,
    /// With `saves_carries`: the body's nodes (matrix products) whose
    /// values each iteration the loop saves, so that its gradient reads
    /// them instead of computing them again.
    pub saved_nodes: Vec<usize>,
}

/// How a loop decides to go on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LoopKind {
    /// `fori_loop` and `scan`: the counter runs from 0 while it is below
    /// the trip count.
    Fori {
        /// The trip count.
        trip: Trip,
    },
    /// `while_loop`: runs while the condition holds.
    While,
}

/// The trip count of a counted loop.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Trip {
    /// A constant.
    Static(i64),
    /// An I64 scalar operand (after the carries), known when the program
    /// runs.
    Operand,
    /// The size `outer_sizes[k]` (a dynamic size with a bound): the
    /// loop's stacks have that size.
    Size(usize),
}

/// The type of one carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Carry {
    /// Element type.
    pub dtype: DType,
    /// One entry per dimension.
    pub dims: Vec<CarryDim>,
}

/// One dimension of a carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CarryDim {
    /// A static size, the same in every iteration.
    Static(i64),
    /// A dynamic size the body keeps: after the loop, the initial value's.
    Kept {
        /// The bound.
        bound: i64,
    },
    /// A dynamic size the body may change: after the loop, this variable
    /// (its bound is the carry's), defined by the loop's result.
    Changes(VarRef),
}

impl CarryDim {
    /// The static size or the bound.
    pub fn bound(&self) -> i64 {
        match self {
            CarryDim::Static(n) | CarryDim::Kept { bound: n } => *n,
            CarryDim::Changes(v) => v.0.hi,
        }
    }

    /// True for a dynamic dimension.
    pub fn is_dynamic(&self) -> bool {
        !matches!(self, CarryDim::Static(_))
    }
}

impl Loop {
    /// The user-facing name: `fori_loop`, `scan` or `while_loop`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            LoopKind::Fori { .. } if self.xs > 0 || !self.ys.is_empty() => "scan",
            LoopKind::Fori { .. } => "fori_loop",
            LoopKind::While => "while_loop",
        }
    }

    /// True when the trip count is an operand (after the carries).
    pub fn trip_operand(&self) -> bool {
        matches!(
            self.kind,
            LoopKind::Fori {
                trip: Trip::Operand
            }
        )
    }

    /// True when the programs take the counter (after the carries).
    pub fn has_counter(&self) -> bool {
        matches!(self.kind, LoopKind::Fori { .. })
    }

    /// The position of the first scanned operand.
    pub fn first_xs(&self) -> usize {
        self.carries.len() + self.trip_operand() as usize
    }

    /// The position of the first captured operand.
    pub fn first_capture(&self) -> usize {
        self.first_xs() + self.xs
    }

    /// The position of the first row parameter of the programs (after
    /// the carries and the counter).
    pub fn first_row_param(&self) -> usize {
        self.carries.len() + self.has_counter() as usize
    }

    /// The number of operands.
    pub fn operands(&self) -> usize {
        self.first_capture() + self.captures
    }

    /// The number of results: the carries, the stacked outputs, and the
    /// saved carries and node values when the loop saves them.
    pub fn results(&self) -> usize {
        let saved = match self.saves_carries {
            true => self.carries.len() + self.saved_nodes.len(),
            false => 0,
        };
        self.carries.len() + self.ys.len() + saved
    }

    /// The length of the stacks (outputs, saved values) as a size: the
    /// trip count (at least 0), unless it is an operand.
    pub fn stack_len(&self) -> Option<SizeExpr> {
        match &self.kind {
            LoopKind::Fori {
                trip: Trip::Static(n),
            } => Some(SizeExpr::constant((*n).max(0))),
            LoopKind::Fori {
                trip: Trip::Size(k),
            } => self.outer_sizes.get(*k).cloned(),
            LoopKind::Fori {
                trip: Trip::Operand,
            }
            | LoopKind::While => None,
        }
    }

    /// True when the loop could save its carries (`saves_carries`): a
    /// counted loop whose count is a constant of at least 1 or a size,
    /// with static carries.
    pub fn can_save_carries(&self) -> bool {
        let counted = match &self.kind {
            LoopKind::Fori {
                trip: Trip::Static(n),
            } => *n > 0,
            LoopKind::Fori {
                trip: Trip::Size(_),
            } => true,
            LoopKind::Fori {
                trip: Trip::Operand,
            }
            | LoopKind::While => false,
        };
        counted
            && self
                .carries
                .iter()
                .all(|c| c.dims.iter().all(|d| !d.is_dynamic()))
    }

    /// This loop, saving its carries and the values of its body's float
    /// matrix products of static shape (what its gradient would compute
    /// again at the highest cost).
    pub fn saving_carries(&self) -> Loop {
        let saved_nodes = self
            .body
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                matches!(n.op, Op::Dot(_))
                    && n.dtype.is_float()
                    && n.shape.iter().all(|e| e.as_const().is_some())
            })
            .map(|(i, _)| i)
            .collect();
        Loop {
            saves_carries: true,
            saved_nodes,
            ..self.clone()
        }
    }

    /// The shape of a stack of rows of `row` dims: `[stack_len, row..]`.
    fn stack_shape(&self, row: impl IntoIterator<Item = i64>) -> Option<Shape> {
        let mut shape: Shape = smallvec::smallvec![self.stack_len()?];
        shape.extend(row.into_iter().map(SizeExpr::constant));
        Some(shape)
    }

    /// The type of result `k` of the loop node `l` (whose operands are
    /// its inputs).
    fn result_type(&self, k: usize, l: &Node) -> Result<(DType, Shape)> {
        let missing = || {
            Error::internal(
                "loop_result",
                format!("a loop with {} results has no result {k}", self.results()),
            )
        };
        let nc = self.carries.len();
        if k >= nc {
            // Stacked outputs, saved carries, saved node values.
            let j = k - nc;
            let ny = self.ys.len();
            let (dtype, row): (DType, Vec<i64>) = if j < ny {
                let c = &self.ys[j];
                (c.dtype, c.dims.iter().map(|d| d.bound()).collect())
            } else if !self.saves_carries {
                return Err(missing());
            } else if let Some(c) = self.carries.get(j - ny) {
                (c.dtype, c.dims.iter().map(|d| d.bound()).collect())
            } else {
                let i = *self.saved_nodes.get(j - ny - nc).ok_or_else(missing)?;
                let n = &self.body.nodes[i];
                (n.dtype, n.shape.iter().map(|e| e.hi()).collect())
            };
            return Ok((dtype, self.stack_shape(row).ok_or_else(missing)?));
        }
        let c = self.carries.get(k).ok_or_else(missing)?;
        let init = &l.inputs[k];
        let shape = c
            .dims
            .iter()
            .zip(&init.shape)
            .map(|(d, e)| match d {
                CarryDim::Static(n) => SizeExpr::constant(*n),
                CarryDim::Kept { .. } => e.clone(),
                CarryDim::Changes(v) => SizeExpr::var(v.clone()),
            })
            .collect();
        Ok((c.dtype, shape))
    }
}

/// The carry type of a value of `dtype` and `shape` (the initial value):
/// `changes[d]` says whether the body may change dynamic dim `d`, with
/// its fresh variable's lower bound.
pub(crate) fn carry_type(dtype: DType, shape: &[SizeExpr], changes: &[Option<i64>]) -> Carry {
    let dims = shape
        .iter()
        .zip(changes)
        .map(|(e, ch)| match (e.as_const(), ch) {
            (Some(n), _) => CarryDim::Static(n),
            (None, None) => CarryDim::Kept { bound: e.hi() },
            (None, Some(lo)) => CarryDim::Changes(VarRef::fresh((*lo).min(e.hi()), e.hi())),
        })
        .collect();
    Carry { dtype, dims }
}

/// `[3, <=8]`: a carry's shape with bounds.
pub(crate) fn carry_string(c: &Carry) -> String {
    let dims: Vec<String> = c
        .dims
        .iter()
        .map(|d| match d {
            CarryDim::Static(n) => n.to_string(),
            d => format!("<={}", d.bound()),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// The marker a loop placeholder's `Data` node holds instead of data.
#[derive(Debug)]
pub(crate) struct LoopParam {
    /// The user-facing name of the loop (for messages).
    pub op: &'static str,
}

/// A placeholder of a loop body at nesting `depth` (a carry or the
/// counter).
pub(crate) fn placeholder(
    op: &'static str,
    dtype: DType,
    shape: Shape,
    depth: u32,
    requires_grad: bool,
) -> Arc<Node> {
    let data = LeafData::new(Arc::new(LoopParam { op }));
    Node::with_depth(
        Op::Data { dtype, data },
        SmallVec::new(),
        SmallVec::new(),
        dtype,
        shape,
        requires_grad,
        depth,
    )
}

/// The loop a placeholder belongs to, if `n` is one.
pub(crate) fn placeholder_of(n: &Node) -> Option<&LoopParam> {
    n.leaf_data()?.get::<LoopParam>()
}

/// The error for a value of a loop body needed where its loop does not
/// run it: after the loop, or before it runs (a read, a size or a
/// `mark_step` inside the body). The only way out of a body is a carry.
pub(crate) fn escaped(op: &'static str, from: &LoopParam) -> Error {
    Error::invalid(
        op,
        format!(
            "a value computed inside the body of a {} is used outside it (after the loop, or read, materialized or synced inside the body, before the loop runs); a loop's values leave it only as its results: return it as a carry and read the results after the loop",
            from.op
        ),
    )
}

/// A traced body (and condition): the programs, and what the loop node
/// needs from outside.
pub(crate) struct Traced {
    /// One program per traced root list, in order.
    pub programs: Vec<Program>,
    /// For each program, the nodes that stop gradients (see
    /// [`Loop::grad_stops`]).
    pub grad_stops: Vec<Vec<usize>>,
    /// The captured values, in parameter order.
    pub captures: Vec<Arc<Node>>,
    /// Outside nodes defining variables that the programs' size arguments
    /// need (the loop node's size dependencies).
    pub size_deps: SmallVec<[Arc<Node>; 1]>,
    /// See [`Loop::outer_sizes`].
    pub outer_sizes: Vec<SizeExpr>,
}

/// Traces the graphs of `roots` (one list per program: condition, body)
/// of a loop whose placeholders `params` (carries, then the counter) sit
/// at nesting `depth`, into programs that share one parameter list:
/// `params`, then the captured values.
pub(crate) fn trace(
    op: &'static str,
    depth: u32,
    params: &[Arc<Node>],
    roots: &[Vec<Arc<Node>>],
) -> Result<Traced> {
    let param_ptrs: Vec<*const ()> = params
        .iter()
        .map(|p| p.leaf_data().map_or(std::ptr::null(), |d| d.ptr()))
        .collect();
    let param_of = |n: &Node| -> Option<usize> {
        let d = n.leaf_data()?;
        d.get::<LoopParam>()?;
        param_ptrs.iter().position(|&p| p == d.ptr())
    };
    let outside = |n: &Node| n.loop_depth < depth;
    let stop = |n: &Node| outside(n) || param_of(n).is_some();

    // Pass 1: the captured values and size dependencies, in a fixed order.
    let mut captures: Vec<Arc<Node>> = Vec::new();
    let mut size_deps: SmallVec<[Arc<Node>; 1]> = SmallVec::new();
    let capture = |n: &Arc<Node>, captures: &mut Vec<Arc<Node>>| {
        if !matches!(n.op, Op::Scalar { .. }) && !captures.iter().any(|c| Arc::ptr_eq(c, n)) {
            captures.push(n.clone());
        }
    };
    for rs in roots {
        for r in rs.iter().filter(|r| outside(r) && param_of(r).is_none()) {
            capture(r, &mut captures);
        }
        let (order, _) = topo_order_indexed(rs.iter(), stop);
        for n in order {
            if stop(n) {
                continue;
            }
            if let Some(p) = placeholder_of(n) {
                return Err(escaped(op, p));
            }
            for x in n
                .inputs
                .iter()
                .filter(|x| outside(x) && param_of(x).is_none())
            {
                capture(x, &mut captures);
            }
            for x in n.size_deps.iter().filter(|x| outside(x)) {
                if !size_deps.iter().any(|s| Arc::ptr_eq(s, x)) {
                    size_deps.push(x.clone());
                }
            }
        }
    }

    // Pass 2: one program per root list.
    let mut outer_sizes = Vec::new();
    let mut programs = Vec::with_capacity(roots.len());
    let mut grad_stops = Vec::with_capacity(roots.len());
    for rs in roots {
        let mut stops = Vec::new();
        let mut nodes: Vec<PNode> = params
            .iter()
            .chain(&captures)
            .map(|n| PNode {
                op: Op::Data {
                    dtype: n.dtype,
                    data: LeafData::detached(),
                },
                inputs: Default::default(),
                dtype: n.dtype,
                shape: n.shape.clone(),
            })
            .collect();
        let mut index: FxHashMap<*const Node, usize> = FxHashMap::default();
        for (i, c) in captures.iter().enumerate() {
            index.insert(Arc::as_ptr(c), params.len() + i);
        }
        // A placeholder's copy that gradients do not flow through
        // (`detach`) is an identity reshape of the parameter that stops
        // them.
        for x in topo_order_indexed(rs.iter(), stop).0 {
            if let Some(p) = param_of(x) {
                if !Arc::ptr_eq(x, &params[p]) && !x.requires_grad && params[p].requires_grad {
                    index.insert(Arc::as_ptr(x), nodes.len());
                    stops.push(nodes.len());
                    nodes.push(PNode {
                        op: Op::Reshape {
                            shape: x.shape.clone(),
                        },
                        inputs: smallvec::smallvec![p],
                        dtype: x.dtype,
                        shape: x.shape.clone(),
                    });
                }
            }
        }
        let at = |n: &Arc<Node>, index: &FxHashMap<*const Node, usize>| -> Result<usize> {
            if let Some(i) = index.get(&Arc::as_ptr(n)) {
                return Ok(*i);
            }
            if let Some(p) = param_of(n) {
                return Ok(p);
            }
            index.get(&Arc::as_ptr(n)).copied().ok_or_else(|| {
                Error::internal(
                    op,
                    format!("a {} node of the body has no place", n.op.name()),
                )
            })
        };
        let (order, _) = topo_order_indexed(rs.iter(), stop);
        for n in order {
            if param_of(n).is_some() || index.contains_key(&Arc::as_ptr(n)) {
                continue;
            }
            if outside(n) {
                if let Op::Scalar { .. } = n.op {
                    index.insert(Arc::as_ptr(n), nodes.len());
                    nodes.push(PNode {
                        op: n.op.clone(),
                        inputs: Default::default(),
                        dtype: n.dtype,
                        shape: n.shape.clone(),
                    });
                }
                // Otherwise only a size dependency: not part of the program.
                continue;
            }
            let inputs = n
                .inputs
                .iter()
                .map(|x| at(x, &index))
                .collect::<Result<_>>()?;
            // Recorded without gradients (`detach`, `no_grad`) from values
            // that carry them.
            let stops_here = !n.requires_grad
                && (n.dtype.is_float() || matches!(n.op, Op::While(_)))
                && n.inputs.iter().any(|x| x.requires_grad);
            if stops_here {
                stops.push(nodes.len());
            }
            index.insert(Arc::as_ptr(n), nodes.len());
            nodes.push(PNode {
                op: n.op.clone(),
                inputs,
                dtype: n.dtype,
                shape: n.shape.clone(),
            });
        }
        let outputs = rs
            .iter()
            .map(|r| at(r, &index))
            .collect::<Result<Vec<_>>>()?;
        let vars = program_vars(&nodes, &mut outer_sizes);
        grad_stops.push(stops);
        programs.push(Program {
            params: (0..params.len() + captures.len()).collect(),
            nodes,
            vars,
            outputs,
            size_outputs: Vec::new(),
            aliases: Vec::new(),
            // The lowering uses the enclosing program's.
            matmul_precision: Default::default(),
            // A loop's state is at its bounds.
            param_buffers: Vec::new(),
            output_buffers: Vec::new(),
            param_shardings: Vec::new(),
            masked_zones: Vec::new(),
        });
    }
    Ok(Traced {
        programs,
        grad_stops,
        captures,
        size_deps,
        outer_sizes,
    })
}

/// The variables a loop program's size arguments and checks need, with
/// their sources: a whole dimension of an earlier node (parameters
/// included), else an outer size (added to `outer_sizes`).
fn program_vars(nodes: &[PNode], outer_sizes: &mut Vec<SizeExpr>) -> Vec<VarInfo> {
    let mut vars: Vec<VarInfo> = Vec::new();
    let mut defined: FxHashMap<u64, VarSource> = FxHashMap::default();
    for (i, n) in nodes.iter().enumerate() {
        // A nested loop's checks are on its own programs' sizes.
        let checks: &[SizeCheck] = match &n.op {
            Op::While(_) => &[],
            op => op.checks(),
        };
        let needed =
            n.op.size_args()
                .iter()
                .chain(checks.iter().flat_map(|c| [&c.lhs, &c.rhs]))
                .flat_map(|e| e.vars());
        for v in needed {
            if vars.iter().any(|i| i.var == v) {
                continue;
            }
            let source = match defined.get(&v.0.id) {
                Some(s) => s.clone(),
                None => {
                    let e = SizeExpr::var(v.clone());
                    let k = match outer_sizes.iter().position(|o| *o == e) {
                        Some(k) => k,
                        None => {
                            outer_sizes.push(e);
                            outer_sizes.len() - 1
                        }
                    };
                    VarSource::Arg(k)
                }
            };
            vars.push(VarInfo { var: v, source });
        }
        for (d, e) in n.shape.iter().enumerate() {
            if let Some(v) = e.as_var() {
                defined
                    .entry(v.0.id)
                    .or_insert(VarSource::Dim { node: i, dim: d });
            }
        }
    }
    vars
}

/// Inference of a loop node: its operands against the carries' types and
/// the programs' captured parameters. The node's own value is a token
/// (Bool scalar) that only `Op::LoopResult` reads.
pub(crate) fn infer_while(l: &Loop, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    let op = l.name();
    if inputs.len() != l.operands() {
        return Err(Error::internal(
            op,
            format!("expected {} operands, got {}", l.operands(), inputs.len()),
        ));
    }
    for (k, (c, x)) in l.carries.iter().zip(inputs).enumerate() {
        let fits = x.dtype == c.dtype
            && x.shape.len() == c.dims.len()
            && c.dims.iter().zip(&x.shape).all(|(d, e)| match d {
                CarryDim::Static(n) => e.as_const() == Some(*n),
                d => e.as_const().is_none() && e.hi() == d.bound(),
            });
        if !fits {
            return Err(Error::shape(
                op,
                format!(
                    "the initial value of carry {k} is {}{}, the loop carries {}{}",
                    x.dtype,
                    shape_string(&x.shape),
                    c.dtype,
                    carry_string(c)
                ),
            ));
        }
    }
    if l.trip_operand() {
        let t = &inputs[l.carries.len()];
        if t.dtype != DType::I64 || !t.shape.is_empty() {
            return Err(Error::dtype(
                op,
                format!(
                    "the trip count must be an i64 scalar, got {}{}",
                    t.dtype,
                    shape_string(&t.shape)
                ),
            ));
        }
    }
    let rows = l.first_row_param();
    for (j, x) in inputs[l.first_xs()..l.first_capture()].iter().enumerate() {
        let p = &l.body.nodes[l.body.params[rows + j]];
        let want = l.stack_len();
        let fits = p.dtype == x.dtype
            && x.shape.len() == p.shape.len() + 1
            && want.as_ref() == Some(&x.shape[0])
            && p.shape
                .iter()
                .zip(&x.shape[1..])
                .all(|(a, b)| a.as_const().is_some() && a == b);
        if !fits {
            return Err(Error::shape(
                op,
                format!(
                    "scanned value {j} is {}{}, the loop scans {} rows of {}{}",
                    x.dtype,
                    shape_string(&x.shape),
                    want.map_or_else(|| "?".to_string(), |e| e.to_string()),
                    p.dtype,
                    shape_string(&p.shape)
                ),
            ));
        }
    }
    let first = rows + l.xs;
    for (j, x) in inputs[l.first_capture()..].iter().enumerate() {
        let p = &l.body.nodes[l.body.params[first + j]];
        let fits = p.dtype == x.dtype
            && p.shape.len() == x.shape.len()
            && p.shape
                .iter()
                .zip(&x.shape)
                .all(|(a, b)| a.as_const() == b.as_const() && a.hi() == b.hi());
        if !fits {
            return Err(Error::internal(
                op,
                format!(
                    "captured value {j} is {}{}, the body takes {}{}",
                    x.dtype,
                    shape_string(&x.shape),
                    p.dtype,
                    shape_string(&p.shape)
                ),
            ));
        }
    }
    Ok((DType::Bool, Shape::new()))
}

/// Inference of `Op::LoopResult { index }` on a loop node.
pub(crate) fn infer_result(index: usize, inputs: &[Arc<Node>]) -> Result<(DType, Shape)> {
    match inputs {
        [l] => match &l.op {
            Op::While(lp) => lp.result_type(index, l),
            other => Err(Error::internal(
                "loop_result",
                format!("the operand is a {} node, not a loop", other.name()),
            )),
        },
        _ => Err(Error::internal("loop_result", "expected one operand")),
    }
}
