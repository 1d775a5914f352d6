//! From live graph nodes to a canonical [`Program`] and its arguments.

use super::device_data::DeviceData;
use super::program::{PNode, Program, VarInfo, VarSource};
use super::size_cell::SizeCell;
use crate::backend::{ExecArgs, SizeArg};
use crate::ir::node::topo_order;
use crate::ir::{Node, Op};
use crate::symint::{SizeExpr, VarRef};
use crate::{Error, Result};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A program ready to run: the program and what this execution passes it.
pub(crate) struct Traced {
    pub program: Program,
    /// The data of each parameter, in order (uploaded by `args`).
    pub params: Vec<Arc<DeviceData>>,
    /// The value of each `VarSource::Arg` variable, in order.
    pub var_args: Vec<SizeArg>,
}

impl Traced {
    /// The execution arguments; uploads host data not yet on the device.
    pub fn args(&self) -> Result<ExecArgs> {
        let mut params = Vec::with_capacity(self.params.len());
        for data in &self.params {
            let sizes = data.sizes.iter().flatten().map(|c| size_arg(c)).collect();
            params.push((data.buffer()?, sizes));
        }
        Ok(ExecArgs {
            params,
            vars: self.var_args.clone(),
        })
    }
}

/// Size expressions an op evaluates at run time (its own arguments, not
/// its output shape).
fn op_size_args(op: &Op) -> Vec<&SizeExpr> {
    match op {
        Op::Iota { shape, .. } | Op::Broadcast { shape, .. } | Op::Reshape { shape } => {
            shape.iter().collect()
        }
        Op::SizeOf(e) => vec![e],
        _ => Vec::new(),
    }
}

fn size_arg(cell: &SizeCell) -> SizeArg {
    match (cell.known(), cell.device_buffer()) {
        (Some(v), _) => SizeArg::Host(v),
        (None, Some(b)) => SizeArg::Device(b.clone()),
        (None, None) => SizeArg::Host(0),
    }
}

/// Builds the canonical program computing `roots` and the values of
/// `size_requests`; `include` adds nodes that define requested sizes.
pub(crate) fn trace(
    roots: &[Arc<Node>],
    include: &[Arc<Node>],
    size_requests: &[VarRef],
) -> Result<Traced> {
    let all: Vec<Arc<Node>> = roots.iter().chain(include).cloned().collect();
    let order = topo_order(&all, |_| false);
    let index: FxHashMap<*const Node, usize> = order
        .iter()
        .enumerate()
        .map(|(i, n)| (Arc::as_ptr(n), i))
        .collect();

    let mut nodes = Vec::with_capacity(order.len());
    let mut params = Vec::new();
    let mut param_data = Vec::new();
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
                    let cell = v.0.cell.get().ok_or_else(|| {
                        Error::internal(
                            "trace",
                            format!(
                                "size variable s{} is neither computed nor defined in the program",
                                v.0.id
                            ),
                        )
                    })?;
                    var_args.push(size_arg(cell));
                    VarSource::Arg(var_args.len() - 1)
                }
            };
            vars.push(VarInfo {
                var: v.clone(),
                source,
            });
            Ok(())
        };

    for (i, n) in order.iter().enumerate() {
        for e in op_size_args(&n.op) {
            for v in e.vars() {
                need(&v, &defined, &mut vars)?;
            }
        }
        if let Op::Data { .. } = n.op {
            let data: &Arc<DeviceData> = n
                .data
                .as_ref()
                .ok_or_else(|| Error::internal("trace", "a data node without data"))?;
            param_data.push(data.clone());
            params.push(i);
        }
        for (d, e) in n.shape.iter().enumerate() {
            if let Some(v) = e.as_var() {
                defined
                    .entry(v.0.id)
                    .or_insert(VarSource::Dim { node: i, dim: d });
            }
        }
        nodes.push(PNode {
            op: n.op.clone(),
            inputs: n.inputs.iter().map(|x| index[&Arc::as_ptr(x)]).collect(),
            dtype: n.dtype,
            shape: n.shape.clone(),
        });
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
        program: Program {
            nodes,
            params,
            vars,
            outputs,
            size_outputs,
        },
        params: param_data,
        var_args,
    })
}
