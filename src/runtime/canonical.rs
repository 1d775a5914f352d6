//! From live graph nodes to a canonical [`Program`] and its arguments.

use super::device_data::{Bounds, DeviceData};
use super::size_cell::SizeCell;
use crate::backend::ExecArgs;
use crate::ir::leaf::LeafData;
use crate::ir::node::topo_order_indexed;
use crate::ir::program::{KeyWriter, PNode, Program, VarInfo, VarSource};
use crate::ir::{Node, Op};
use crate::symint::VarRef;
use crate::{Error, Result};
use rustc_hash::FxHashMap;
use std::hash::Hash;
use std::sync::Arc;

/// A traced graph: its cache key, the arguments of this execution, and
/// what is needed to build the canonical [`Program`] on a cache miss (a
/// hit never builds it).
pub(crate) struct Traced<'a> {
    /// The nodes in topological order (borrowed: the roots keep them alive).
    order: Vec<&'a Arc<Node>>,
    index: FxHashMap<*const Node, usize>,
    params: Vec<usize>,
    vars: Vec<VarInfo>,
    outputs: Vec<usize>,
    size_outputs: Vec<usize>,
    /// The cache key: exactly the bytes `Hash` writes for the program.
    pub key: Vec<u8>,
    /// The key's first part, written while tracing (see [`write_node`]):
    /// the node count and every node, which `Program::hash` writes before
    /// anything [`Traced::donate`] or [`Traced::write_outputs_into`] may
    /// still change. [`Traced::compute_key`] appends the rest.
    key_nodes: Option<KeyWriter>,
    /// The data of each parameter, in order (uploaded by `args`).
    pub params_data: Vec<Arc<DeviceData>>,
    /// The cell of each `VarSource::Arg` variable, in order.
    pub var_args: Vec<Arc<SizeCell>>,
    /// True when a node makes size checks: the program then returns their
    /// status last (see `Backend::check_status`).
    pub checked: bool,
    /// The aliased parameters (`Program::aliases`), set by `donate`.
    pub aliases: Vec<(usize, usize)>,
    /// The aliased parameters this execution donates, set by `donate`.
    pub donated: smallvec::SmallVec<[usize; 4]>,
    /// The precision of `f32` matrix products when traced.
    matmul_precision: crate::ir::program::MatmulPrecision,
    /// `Program::param_buffers`.
    param_buffers: Vec<(usize, Vec<usize>)>,
    /// `Program::output_buffers`, set by [`Traced::write_outputs_into`].
    output_buffers: Vec<(usize, Vec<usize>)>,
    /// `Program::param_shardings`.
    param_shardings: Vec<(usize, Arc<crate::ir::sharding::Sharding>)>,
}

impl Traced<'_> {
    /// The execution arguments; uploads host data not yet on the device.
    pub fn args(&self) -> Result<ExecArgs<'_>> {
        let mut params = smallvec::SmallVec::with_capacity(self.params.len());
        for data in &self.params_data {
            params.push(data.exec_arg()?);
        }
        Ok(ExecArgs {
            params,
            vars: self.var_args.iter().map(|c| c.as_arg()).collect(),
            donate: self.donated.clone(),
        })
    }

    /// The variables passed as arguments (`VarSource::Arg`), in order.
    pub fn arg_vars(&self) -> Vec<VarRef> {
        let mut args: Vec<(usize, VarRef)> = self
            .vars
            .iter()
            .filter_map(|v| match v.source {
                VarSource::Arg(k) => Some((k, v.var.clone())),
                VarSource::Dim { .. } => None,
            })
            .collect();
        args.sort_by_key(|(k, _)| *k);
        args.into_iter().map(|(_, v)| v).collect()
    }

    fn input_indices<'a>(&'a self, n: &'a Node) -> impl Iterator<Item = usize> + 'a {
        n.inputs.iter().map(|x| self.index[&Arc::as_ptr(x)])
    }

    /// The canonical program (built on a cache miss, or for printing).
    pub fn program(&self) -> Program {
        let nodes = self
            .order
            .iter()
            .map(|n| PNode {
                // A program holds no data: a cache entry must not keep
                // device memory alive; data come as arguments.
                op: match &n.op {
                    Op::Data { dtype, .. } => Op::Data {
                        dtype: *dtype,
                        data: LeafData::detached(),
                    },
                    op => op.clone(),
                },
                inputs: self.input_indices(n).collect(),
                dtype: n.dtype,
                shape: n.shape.clone(),
            })
            .collect();
        Program {
            nodes,
            params: self.params.clone(),
            vars: self.vars.clone(),
            outputs: self.outputs.clone(),
            size_outputs: self.size_outputs.clone(),
            aliases: self.aliases.clone(),
            matmul_precision: self.matmul_precision,
            param_buffers: self.param_buffers.clone(),
            output_buffers: self.output_buffers.clone(),
            param_shardings: self.param_shardings.clone(),
            masked_zones: Vec::new(),
        }
    }

    /// Writes output `k` into a buffer of shape `bounds[k]` where that is
    /// longer than its node's bounds (bucketed results, see
    /// `runtime::buckets`); called before [`Traced::compute_key`].
    pub fn write_outputs_into(&mut self, bounds: &[Bounds]) {
        self.output_buffers = self
            .outputs
            .iter()
            .zip(bounds)
            .enumerate()
            .filter(|(_, (&o, b))| self.order[o].bounds()[..] != b[..])
            .map(|(k, (_, b))| (k, b.to_vec()))
            .collect();
    }

    /// Where each node of the program was recorded.
    pub fn locations(&self) -> Vec<&'static std::panic::Location<'static>> {
        self.order.iter().map(|n| n.location).collect()
    }

    /// The line that recorded the most of the graph's ops, for a message
    /// about a graph that grows: a history kept across iterations repeats
    /// the loop body's lines.
    pub fn most_recorded_line(&self) -> String {
        let mut counts: FxHashMap<(&str, u32), usize> = FxHashMap::default();
        for n in &self.order {
            let ours = super::diagnose::is_ours(n.location);
            if !ours && !matches!(n.op, Op::Data { .. } | Op::Scalar { .. }) {
                *counts
                    .entry((n.location.file(), n.location.line()))
                    .or_default() += 1;
            }
        }
        match counts
            .into_iter()
            .max_by_key(|&(at, c)| (c, std::cmp::Reverse(at)))
        {
            Some(((file, line), c)) => format!(
                "the ops recorded at {file}:{line} ({c} of its {} nodes)",
                self.order.len()
            ),
            None => "its values".into(),
        }
    }

    /// Chooses the parameters the program aliases to its results and
    /// those this execution donates (see `runtime::donation`); called
    /// before [`Traced::compute_key`].
    pub fn donate(&mut self, roots: &[Arc<Node>], holders: &super::donation::Holders) {
        // Each output's buffer: a bucketed one where written, else its
        // bounds (looked up once each, not searched per output).
        let written = crate::ir::program::by_index(self.outputs.len(), &self.output_buffers);
        let out_buffers: Vec<Vec<usize>> = written
            .iter()
            .zip(&self.outputs)
            .map(|(w, &o)| match w {
                Some((_, dims)) => dims.clone(),
                None => self.order[o].bounds(),
            })
            .collect();
        let graph = super::donation::Graph {
            order: &self.order,
            index: &self.index,
            params: &self.params,
            params_data: &self.params_data,
            out_buffers: &out_buffers,
            checked: self.checked,
        };
        let choice = super::donation::choose(&graph, roots, holders);
        self.aliases = choice.aliases;
        self.donated = choice.donate;
    }

    /// The key: the bytes `Program::hash` would write, written straight
    /// from the graph (`Program` derives `Hash` over these fields in this
    /// order; `program_key_matches_the_program` checks it).
    pub fn compute_key(&mut self) {
        // Written by the trace, unless a key was computed already.
        let mut w = self.key_nodes.take().unwrap_or_else(|| {
            let mut w = key_writer(self.order.len());
            let mut inputs = Vec::with_capacity(4);
            for n in &self.order {
                write_node(&mut w, n, &self.index, &mut inputs);
            }
            w
        });
        self.params.hash(&mut w);
        self.vars.hash(&mut w);
        self.outputs.hash(&mut w);
        self.size_outputs.hash(&mut w);
        self.aliases.hash(&mut w);
        self.matmul_precision.hash(&mut w);
        self.param_buffers.hash(&mut w);
        self.output_buffers.hash(&mut w);
        self.param_shardings.hash(&mut w);
        // `Program::masked_zones`: none before the lowering passes.
        (&[] as &[u64]).hash(&mut w);
        LAST_KEY_LEN.set(w.bytes.len());
        self.key = w.bytes;
    }
}

thread_local! {
    /// The buffer of this thread's last key, given back by [`recycle_key`]:
    /// a step's key is about 100 bytes a node, and writing it into a
    /// buffer that fits already spares the allocator a large request and
    /// the copies of growing one, every step.
    static KEY_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    /// The length of this thread's last key (see [`key_writer`]).
    static LAST_KEY_LEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Gives a key's buffer back, for the next key this thread computes
/// (unless it grew past 4 MiB, for a program far larger than a step's).
pub(crate) fn recycle_key(key: Vec<u8>) {
    if key.capacity() <= 4 << 20 {
        KEY_BUFFER.set(key);
    }
}

/// A key writer over this thread's last key buffer, with the node count
/// written: the key's start.
fn key_writer(nodes: usize) -> KeyWriter {
    let mut w = KeyWriter::into(KEY_BUFFER.take());
    // Room for this thread's last key: a loop tracing one graph again and
    // again writes its key without growing the buffer, even when the key
    // is too large to be recycled (a graph of about 50,000 nodes or more).
    // Exactly that much, so a key that can be recycled still is.
    w.bytes.reserve(LAST_KEY_LEN.get());
    nodes.hash(&mut w);
    w
}

/// Writes node `n`'s part of the key: its op, its inputs' positions,
/// dtype and shape, as `Program::hash` writes its `PNode`.
fn write_node(
    w: &mut KeyWriter,
    n: &Node,
    index: &FxHashMap<*const Node, usize>,
    inputs: &mut Vec<usize>,
) {
    n.op.hash(w);
    inputs.clear();
    inputs.extend(n.inputs.iter().map(|x| index[&Arc::as_ptr(x)]));
    inputs.hash(w);
    n.dtype.hash(w);
    n.shape.hash(w);
}

/// Builds the canonical program computing `roots` and the values of
/// `size_requests`, with its key; `include` adds nodes that define
/// requested sizes.
pub(crate) fn trace<'a>(
    roots: &'a [Arc<Node>],
    include: &'a [Arc<Node>],
    size_requests: &[VarRef],
) -> Result<Traced<'a>> {
    let mut traced = trace_unkeyed(roots, include, size_requests)?;
    traced.compute_key();
    Ok(traced)
}

/// [`trace`] without the key, for a caller that still chooses what the
/// program donates ([`Traced::donate`], then [`Traced::compute_key`]).
pub(crate) fn trace_unkeyed<'a>(
    roots: &'a [Arc<Node>],
    include: &'a [Arc<Node>],
    size_requests: &[VarRef],
) -> Result<Traced<'a>> {
    let (order, index) = topo_order_indexed(roots.iter().chain(include), |_| false);

    let mut params = Vec::new();
    let mut param_data = Vec::new();
    let mut param_buffers = Vec::new();
    let mut param_shardings = Vec::new();
    let mut checked = false;
    let mut vars: Vec<VarInfo> = Vec::new();
    let mut var_args = Vec::new();
    // Where each variable can be read, among nodes already placed.
    let mut defined: FxHashMap<u64, VarSource> = FxHashMap::default();

    let mut need =
        |v: &VarRef, defined: &FxHashMap<u64, VarSource>, vars: &mut Vec<VarInfo>| -> Result<()> {
            if vars.iter().any(|i| &i.var == v) {
                return Ok(());
            }
            let source = match defined.get(&v.0.id) {
                Some(s) => s.clone(),
                None => {
                    let cell = super::size_values::cell(v).ok_or_else(|| {
                        Error::internal(
                            "trace",
                            format!(
                                "size variable s{} is neither computed nor defined in the program",
                                v.0.id
                            ),
                        )
                    })?;
                    var_args.push(cell);
                    VarSource::Arg(var_args.len() - 1)
                }
            };
            vars.push(VarInfo {
                var: v.clone(),
                source,
            });
            Ok(())
        };

    // The key's node part is written in this same walk: after the
    // topological order, one more visit of each node instead of two (a
    // large graph's nodes are out of cache by the time a second walk
    // comes back to them; 12-20% less trace time from 5,000 to 200,000
    // nodes, `benches/scaling.rs`).
    let mut key = key_writer(order.len());
    let mut key_inputs = Vec::with_capacity(4);
    for (i, n) in order.iter().enumerate() {
        write_node(&mut key, n, &index, &mut key_inputs);
        for e in n.op.size_args().iter().filter(|e| e.as_const().is_none()) {
            for v in e.vars() {
                need(&v, &defined, &mut vars)?;
            }
        }
        for c in n.op.checks() {
            checked = true;
            if let Op::While(_) = n.op {
                // A loop's checks are on its own programs' sizes.
                continue;
            }
            for v in c.lhs.vars().into_iter().chain(c.rhs.vars()) {
                need(&v, &defined, &mut vars)?;
            }
        }
        if let Op::Data { data, .. } = &n.op {
            let data: Arc<DeviceData> =
                data.shared()
                    .ok_or_else(|| match crate::ir::loops::placeholder_of(n) {
                        Some(p) => crate::ir::loops::escaped("mark_step", p),
                        None => Error::internal("trace", "a data leaf without device data"),
                    })?;
            if n.is_dynamic() && data.bounds() != &n.bounds()[..] {
                param_buffers.push((params.len(), data.bounds().to_vec()));
            }
            if let Some(s) = data.sharding() {
                param_shardings.push((params.len(), s));
            }
            param_data.push(data);
            params.push(i);
        }
        for (d, e) in n.shape.iter().enumerate() {
            if let Some(v) = e.as_var() {
                defined
                    .entry(v.0.id)
                    .or_insert(VarSource::Dim { node: i, dim: d });
            }
        }
    }
    let mut size_outputs = Vec::new();
    for v in size_requests {
        need(v, &defined, &mut vars)?;
        size_outputs.push(vars.iter().position(|i| &i.var == v).expect("just added"));
    }
    let mut outputs: Vec<usize> = Vec::new();
    for r in roots {
        let i = index[&Arc::as_ptr(r)];
        outputs.push(i);
    }
    Ok(Traced {
        checked,
        order,
        index,
        params,
        vars,
        outputs,
        size_outputs,
        key: Vec::new(),
        key_nodes: Some(key),
        params_data: param_data,
        var_args,
        aliases: Vec::new(),
        donated: smallvec::SmallVec::new(),
        matmul_precision: super::precision::current(),
        param_buffers,
        output_buffers: Vec::new(),
        param_shardings,
    })
}
