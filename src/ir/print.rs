//! The IR printer: a program in a jaxpr-like text form.
//!
//! ```text
//! program(a:f32[5]) {
//!   b:i64[s0<=5, 1] = nonzero a    # zone start: s0 in [0, 5]
//!   c:i64[s0<=5, 1] = mul b 2:i64
//!   d:i64[] = reduce_sum[dims=[0, 1]] c    # zone end
//!   return d
//! }
//! ```
//!
//! Nodes are named `a`, `b`, .. in order; parameters (device data) appear
//! in the header (`a:f32[s0<=64] in [65]` for data in a buffer longer than
//! its bound, see `runtime::buckets`); inline scalars print as `value:dtype` where used; dynamic
//! dims print as `s<k><=<bound>` with variables numbered by first
//! appearance. A comment marks where a dynamic zone starts (an op
//! introduces a size variable) and ends (dynamic operands, static result);
//! after the lowering passes, a zone the XLA lowering keeps masked says so
//! (`s0 in [0, 5], masked`). The format is stable: snapshot tests depend on it.

use super::loops::{Loop, LoopKind, Trip};
use super::op::{Lit, Op};
use crate::dtype::DType;
use crate::ir::program::Program;
use crate::symint::var::Renumbering;
use crate::symint::{SizeExpr, VarRef};
use std::fmt::Write;

/// Variable names: `s<k>`, numbered by first appearance as in the key.
struct Names {
    vars: Renumbering,
}

impl Names {
    fn var(&mut self, v: &VarRef) -> String {
        format!("s{}", self.vars.number(v))
    }

    fn expr(&mut self, e: &SizeExpr) -> String {
        let mut s = String::new();
        let _ = e.fmt_with(&mut s, &mut |v| self.var(v));
        s
    }

    fn dim(&mut self, e: &SizeExpr) -> String {
        match e.as_const() {
            Some(c) => c.to_string(),
            None => format!("{}<={}", self.expr(e), e.hi()),
        }
    }

    fn shape(&mut self, shape: &[SizeExpr]) -> String {
        let dims: Vec<String> = shape.iter().map(|d| self.dim(d)).collect();
        format!("[{}]", dims.join(", "))
    }
}

/// Node names: a..z, then ba, bb, .. (as jaxpr).
fn node_name(mut i: usize) -> String {
    let mut s = Vec::new();
    loop {
        s.push(b'a' + (i % 26) as u8);
        i /= 26;
        if i == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).expect("ascii")
}

fn lit(v: Lit) -> String {
    let x = v.0;
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// The op's attributes in brackets (empty for ops without any).
fn attrs(op: &Op, names: &mut Names) -> String {
    let body = match op {
        Op::Data { .. } | Op::Scalar { .. } => String::new(),
        Op::Iota { shape, dim, .. } => format!("shape={} dim={dim}", names.shape(shape)),
        Op::SizeOf(e) => names.expr(e),
        Op::RandomUniform { shape, .. } => format!("shape={}", names.shape(shape)),
        Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select => String::new(),
        Op::Convert(d) => d.to_string(),
        Op::Broadcast { dims, .. } => format!("dims={dims:?}"),
        Op::Reshape { .. } => String::new(),
        Op::Transpose { perm } => format!("perm={perm:?}"),
        Op::Slice { dim, start, len } => format!("dim={dim} start={start} len={len}"),
        Op::Concat { dim } => format!("dim={dim}"),
        Op::Reverse { dims } => format!("dims={dims:?}"),
        Op::PadToBound { fill } => format!("fill={}", lit(*fill)),
        Op::FillPadding { dims, fill, shared } => format!(
            "dims={dims:?} fill={}{}",
            fill.name(),
            if *shared { " shared" } else { "" }
        ),
        Op::Guard { checks, .. } => checks
            .iter()
            .map(|c| c.condition(&mut |e| names.expr(e)))
            .collect::<Vec<_>>()
            .join(", "),
        Op::Reduce { dims, .. } => format!("dims={dims:?}"),
        Op::ArgReduce { dim, .. } => format!("dim={dim}"),
        Op::ReduceWindow { window, .. } | Op::SelectAndScatter { window, .. } => window.describe(),
        Op::Dot(dot) => dot.describe(),
        Op::Convolution(conv) => conv.describe(),
        Op::IndexSelect { dim }
        | Op::Gather { dim }
        | Op::IndexAdd { dim }
        | Op::Scatter { dim, .. } => format!("dim={dim}"),
        Op::Argsort {
            dim,
            descending,
            first,
        } => {
            let first = first.map(|k| format!(" first={k}")).unwrap_or_default();
            let desc = if *descending { " descending" } else { "" };
            format!("dim={dim}{desc}{first}")
        }
        Op::MaskedScatter | Op::Nonzero | Op::MaskedSelect | Op::Unique | Op::UniqueCounts => {
            String::new()
        }
        Op::AllReduce { replicas, .. } => format!("replicas={replicas}"),
        Op::AllGather { dim, replicas } | Op::ReduceScatter { dim, replicas } => {
            format!("dim={dim} replicas={replicas}")
        }
        Op::ReplicaId => String::new(),
        Op::Sharding(s) => s.hlo(),
        // A loop prints as a block (`Printer::loop_block`).
        Op::While(_) => String::new(),
        Op::LoopResult { index } => index.to_string(),
    };
    if body.is_empty() {
        body
    } else {
        format!("[{body}]")
    }
}

/// Prints a canonical program.
pub(crate) fn print_program(p: &Program) -> String {
    let mut pr = Printer {
        names: Names {
            vars: Renumbering::default(),
        },
        next: 0,
        out: String::new(),
    };
    let name = pr.node_names(p);
    let params: Vec<String> = p
        .params
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let mut text = pr.param(p, &name, i);
            if let Some((_, dims)) = p.param_buffers.iter().find(|(q, _)| *q == k) {
                // A bucketed buffer, longer than the bound.
                let _ = write!(text, " in {dims:?}");
            }
            text
        })
        .collect();
    let _ = writeln!(pr.out, "program({}) {{", params.join(", "));
    pr.body(p, &name, 1);
    pr.out.push('}');
    pr.out.push('\n');
    pr.out
}

/// The printer's state: names so far (variables and nodes are numbered
/// across nested loop programs, so every name is unique) and the text.
struct Printer {
    names: Names,
    next: usize,
    out: String,
}

impl Printer {
    /// The name of each node of `p`: inline scalars print as their value,
    /// the rest as the next letters.
    fn node_names(&mut self, p: &Program) -> Vec<String> {
        p.nodes
            .iter()
            .map(|n| match &n.op {
                Op::Scalar { value, dtype } => match dtype {
                    DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {
                        format!("{}:{dtype}", lit(*value))
                    }
                    DType::Bool => format!("{}:{dtype}", value.0 != 0.0),
                    DType::I32 | DType::I64 => format!("{}:{dtype}", value.0 as i64),
                },
                _ => {
                    self.next += 1;
                    node_name(self.next - 1)
                }
            })
            .collect()
    }

    /// `a:f32[3]`: parameter `i` of `p` with its type.
    fn param(&mut self, p: &Program, name: &[String], i: usize) -> String {
        let n = &p.nodes[i];
        format!("{}:{}{}", name[i], n.dtype, self.names.shape(&n.shape))
    }

    /// The nodes of `p` (but its parameters) and its return line.
    fn body(&mut self, p: &Program, name: &[String], depth: usize) {
        let pad = "  ".repeat(depth);
        for (i, n) in p.nodes.iter().enumerate() {
            if matches!(n.op, Op::Data { .. } | Op::Scalar { .. }) {
                continue;
            }
            let operands: Vec<&str> = n.inputs.iter().map(|&j| name[j].as_str()).collect();
            if let Op::While(l) = &n.op {
                self.loop_block(l, &name[i], &operands, depth);
                continue;
            }
            let known_before = self.names.vars.len();
            let shape = self.names.shape(&n.shape);
            let a = attrs(&n.op, &mut self.names);
            let mut line = format!(
                "{pad}{}:{}{} = {}{}",
                name[i],
                n.dtype,
                shape,
                n.op.name(),
                a
            );
            if !operands.is_empty() {
                line.push(' ');
                line.push_str(&operands.join(" "));
            }
            // Zone markers: a variable first seen at this node starts a zone;
            // dynamic operands with a static result end one.
            let new_vars: Vec<u64> = self.names.vars.since(known_before).to_vec();
            let introduces = !new_vars.is_empty();
            let dynamic_in = n
                .inputs
                .iter()
                .any(|&j| p.nodes[j].shape.iter().any(|e| e.as_const().is_none()));
            let static_out = n.shape.iter().all(|e| e.as_const().is_some());
            if introduces {
                let vars: Vec<VarRef> = n
                    .shape
                    .iter()
                    .flat_map(|e| e.vars())
                    .filter(|v| new_vars.contains(&v.0.id))
                    .collect();
                let desc: Vec<String> = vars
                    .iter()
                    .map(|v| {
                        let masked = if p.masked_zones.binary_search(&v.0.id).is_ok() {
                            ", masked"
                        } else {
                            ""
                        };
                        format!("{} in [{}, {}]{masked}", self.names.var(v), v.0.lo, v.0.hi)
                    })
                    .collect();
                let _ = write!(line, "    # zone start: {}", desc.join(", "));
            } else if dynamic_in && static_out {
                line.push_str("    # zone end");
            }
            let _ = writeln!(self.out, "{line}");
        }
        let outs: Vec<&str> = p.outputs.iter().map(|&o| name[o].as_str()).collect();
        let mut ret = format!("{pad}return {}", outs.join(", "));
        if !p.size_outputs.is_empty() {
            let sizes: Vec<String> = p
                .size_outputs
                .iter()
                .map(|&k| self.names.var(&p.vars[k].var))
                .collect();
            let _ = write!(ret, "; sizes {}", sizes.join(", "));
        }
        if !p.aliases.is_empty() {
            let pairs: Vec<String> = p
                .aliases
                .iter()
                .map(|&(k, o)| format!("{} -> {}", name[p.params[k]], name[p.outputs[o]]))
                .collect();
            let _ = write!(ret, "    # aliases: {}", pairs.join(", "));
        }
        let _ = writeln!(self.out, "{ret}");
    }

    /// A loop node `name` with its operands, and its programs as nested
    /// blocks:
    ///
    /// ```text
    /// c = fori_loop[trip=10] a; captured b {
    ///   body(carries d:f32[3]; counter e:i64[]; captured f:f32[3]) {
    ///     g:f32[3] = add d f
    ///     return g
    ///   }
    /// }
    /// ```
    fn loop_block(&mut self, l: &Loop, name: &str, operands: &[&str], depth: usize) {
        let pad = "  ".repeat(depth);
        let carries = l.carries.len();
        let mut attrs: Vec<String> = Vec::new();
        match &l.kind {
            LoopKind::Fori {
                trip: Trip::Static(n),
            } => attrs.push(format!("trip={n}")),
            LoopKind::Fori {
                trip: Trip::Size(k),
            } => {
                if let Some(e) = l.outer_sizes.get(*k) {
                    attrs.push(format!("trip={}", self.names.expr(e)));
                }
            }
            LoopKind::Fori {
                trip: Trip::Operand,
            }
            | LoopKind::While => {}
        }
        if l.reverse {
            attrs.push("reverse".into());
        }
        if l.saves_carries {
            attrs.push("saves carries".into());
        }
        if !l.saved_nodes.is_empty() {
            attrs.push(format!("saves nodes={:?}", l.saved_nodes));
        }
        let attrs = match attrs.is_empty() {
            true => String::new(),
            false => format!("[{}]", attrs.join(" ")),
        };
        let mut line = format!("{pad}{name} = {}{attrs}", l.name());
        if carries > 0 {
            let _ = write!(line, " {}", operands[..carries].join(" "));
        }
        if l.trip_operand() {
            let _ = write!(line, "; trip {}", operands[carries]);
        }
        if l.xs > 0 {
            let _ = write!(
                line,
                "; scanning {}",
                operands[l.first_xs()..l.first_capture()].join(" ")
            );
        }
        if l.captures > 0 {
            let _ = write!(
                line,
                "; captured {}",
                operands[l.first_capture()..].join(" ")
            );
        }
        let _ = writeln!(self.out, "{line} {{");
        let programs = l
            .cond
            .iter()
            .map(|c| ("cond", c))
            .chain([("body", &l.body)]);
        for (what, p) in programs {
            let names = self.node_names(p);
            let mut params: Vec<usize> = p.params.clone();
            let captured = params.split_off(params.len() - l.captures);
            let rows = params.split_off(params.len() - l.xs);
            let counter = match l.has_counter() {
                true => params.split_off(carries),
                false => Vec::new(),
            };
            let mut sections = Vec::new();
            for (label, list) in [
                ("carries", params),
                ("counter", counter),
                ("rows", rows),
                ("captured", captured),
            ] {
                if !list.is_empty() {
                    let ps: Vec<String> = list.iter().map(|&i| self.param(p, &names, i)).collect();
                    sections.push(format!("{label} {}", ps.join(", ")));
                }
            }
            let _ = writeln!(self.out, "{pad}  {what}({}) {{", sections.join("; "));
            self.body(p, &names, depth + 2);
            let _ = writeln!(self.out, "{pad}  }}");
        }
        let _ = writeln!(self.out, "{pad}}}");
    }
}

/// Each node of `p` as text, for comparing two programs node by node
/// (`runtime::diagnose`): its op with attributes (a scalar's value, a
/// loop's whole block) and its type, variables numbered as the printer
/// numbers them.
pub(crate) fn node_texts(p: &Program) -> Vec<(String, String)> {
    let mut pr = Printer {
        names: Names {
            vars: Renumbering::default(),
        },
        next: 0,
        out: String::new(),
    };
    let name = pr.node_names(p);
    p.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let ty = format!("{}{}", n.dtype, pr.names.shape(&n.shape));
            let op = match &n.op {
                Op::Scalar { .. } => format!("scalar {}", name[i]),
                Op::While(l) => {
                    pr.out.clear();
                    let operands: Vec<&str> = n.inputs.iter().map(|&j| name[j].as_str()).collect();
                    pr.loop_block(l, &name[i], &operands, 0);
                    std::mem::take(&mut pr.out)
                }
                op => format!("{}{}", op.name(), attrs(op, &mut pr.names)),
            };
            (op, ty)
        })
        .collect()
}
