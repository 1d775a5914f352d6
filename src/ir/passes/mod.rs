//! Lowering passes: the XLA lowering's decisions, made as IR-to-IR
//! rewrites before the emitter translates each op into StableHLO.
//!
//! A pass is a function from [`Program`] to [`Program`]. What it decides
//! becomes an op of the program (a fill of padding is an
//! `Op::FillPadding` node, a transposed product is a `Dot` with its
//! operands swapped), so it prints with the IR printer
//! (`debug::lowered_ir_text`) and runs on the reference backend, which is
//! how the tests check that a pass keeps every value
//! (`debug::reference_after_passes`, `tests/differential.rs`).
//!
//! [`LOWERING`] is the list the PJRT backend runs, in order, on every
//! program it lowers (`backend::pjrt::lower`), the programs of its device
//! loops included; the passes that only fill padding are skipped where
//! every size is a constant. Each pass decides on the program it is
//! given, exactly as the emitter decided on the traced program before the
//! pass existed:
//!
//! 1. [`shared_fill`]: a value whose padding several products or sums
//!    zero gets it zeroed once, where it is defined.
//! 2. [`dot_forms`]: matrix products written in the form XLA's CPU
//!    kernels run fastest (a transposed product swapped, a transposed
//!    operand folded into the dimension numbers, a few rows times a
//!    transposed matrix turned around).
//! 3. [`checked_dot`]: a product that contracts padding and has a large
//!    operand leaves that operand's padding as it is and checks its
//!    result (`Dot::raw`).
//! 4. [`zone_masks`]: the zones whose packed order nothing observes keep
//!    their source's layout (`Program::masked_zones`).
//! 5. [`operand_fills`]: every other padding an op reads is filled, just
//!    before that op, with a value that cannot change its result.
//!
//! What the emitter still chooses is how to write an op, not what the
//! program computes: how a zone is packed (a prefix sum by doubling or
//! one `reduce_window`, by static size), where a value's buffer is read
//! in place (`lower/backing.rs`), an `index_add` at a count written as a
//! padded add (its source zeroed past the index's count), and the slow
//! path of a checked product, which zeroes its raw operand inside the
//! branch that needs it.

pub(crate) mod checked_dot;
pub(crate) mod dot_forms;
pub(crate) mod operand_fills;
pub(crate) mod shared_fill;
pub(crate) mod zone_masks;

use super::loops::Loop;
use super::program::{PNode, Program, VarSource};
use super::{Op, PadFill};
use std::borrow::Cow;
use std::sync::Arc;

/// One pass: its name and the rewrite, `None` when it changes nothing.
/// `pinned` lists nodes read from outside the program besides its outputs
/// (a loop body's `saved_nodes`); the pass keeps them and renumbers them
/// in place.
pub(crate) struct Pass {
    /// The pass's name.
    pub name: &'static str,
    /// The rewrite.
    pub run: fn(&Program, &mut [usize]) -> Option<Program>,
    /// True when the pass only acts on padding: a program whose every
    /// size is a constant has none, and the pass is not run on it (most
    /// training steps are static; the sweep is a tenth of a large
    /// program's lowering).
    pub padding_only: bool,
}

/// The passes the PJRT backend runs before lowering, in order.
pub(crate) const LOWERING: &[Pass] = &[
    Pass {
        name: "shared_fill",
        run: shared_fill::run,
        padding_only: true,
    },
    Pass {
        name: "dot_forms",
        run: dot_forms::run,
        padding_only: false,
    },
    Pass {
        name: "checked_dot",
        run: checked_dot::run,
        padding_only: true,
    },
    Pass {
        name: "zone_masks",
        run: zone_masks::run,
        padding_only: true,
    },
    Pass {
        name: "operand_fills",
        run: operand_fills::run,
        padding_only: true,
    },
];

/// `program` after every pass of [`LOWERING`], the programs of its loops
/// too; borrowed when no pass changes it.
pub(crate) fn lowering(program: &Program) -> Cow<'_, Program> {
    match run_passes(LOWERING, program, &mut []) {
        Some(p) => Cow::Owned(p),
        None => Cow::Borrowed(program),
    }
}

/// `program` after `passes`, in order, each loop's programs first; `None`
/// when none changes it.
pub(crate) fn run_passes(
    passes: &[Pass],
    program: &Program,
    pinned: &mut [usize],
) -> Option<Program> {
    let mut cur = in_loops(passes, program);
    let padded = has_padding(program);
    for pass in passes {
        let p = cur.as_ref().unwrap_or(program);
        if pass.padding_only && !padded {
            debug_assert!(
                (pass.run)(p, &mut pinned.to_vec()).is_none(),
                "{} rewrote a program without padding",
                pass.name
            );
            continue;
        }
        if let Some(p) = (pass.run)(p, pinned) {
            cur = Some(p);
        }
    }
    cur
}

/// True when some value of `program` has a dimension of symbolic size,
/// whose padding a pass may fill (the passes keep every node's shape, so
/// this holds for their results too).
fn has_padding(program: &Program) -> bool {
    program
        .nodes
        .iter()
        .any(|n| n.shape.iter().any(|e| e.as_const().is_none()))
}

/// `program` with `passes` run on the body and condition of each loop;
/// `None` when they change none.
fn in_loops(passes: &[Pass], program: &Program) -> Option<Program> {
    let mut out: Option<Program> = None;
    for (i, n) in program.nodes.iter().enumerate() {
        if let Op::While(l) = &n.op {
            if let Some(l) = loop_after(passes, l) {
                let p = out.get_or_insert_with(|| program.clone());
                p.nodes[i].op = Op::While(Arc::new(l));
            }
        }
    }
    out
}

/// `l` with `passes` run on its programs, `None` when they change
/// neither. Its `grad_stops` are dropped: they serve the gradient, taken
/// before any pass.
fn loop_after(passes: &[Pass], l: &Loop) -> Option<Loop> {
    let mut saved = l.saved_nodes.clone();
    let body = run_passes(passes, &l.body, &mut saved);
    let cond = l.cond.as_ref().and_then(|c| run_passes(passes, c, &mut []));
    if body.is_none() && cond.is_none() {
        return None;
    }
    Some(Loop {
        body: body.unwrap_or_else(|| l.body.clone()),
        cond: cond.or_else(|| l.cond.clone()),
        saved_nodes: saved,
        grad_stops: Vec::new(),
        ..l.clone()
    })
}

/// True when node `j` is a fill (`Op::FillPadding`) of `fill` along every
/// dim of `dims` that has padding (a dim of symbolic size).
pub(crate) fn fills_along(program: &Program, j: usize, dims: &[usize], fill: PadFill) -> bool {
    let n = &program.nodes[j];
    match &n.op {
        Op::FillPadding {
            dims: filled,
            fill: f,
            ..
        } => {
            *f == fill
                && dims
                    .iter()
                    .all(|d| n.shape[*d].as_const().is_some() || filled.contains(d))
        }
        _ => false,
    }
}

/// How many times each node is read: by later nodes and as an output.
pub(crate) fn uses(program: &Program) -> Vec<usize> {
    let mut uses = vec![0usize; program.nodes.len()];
    for n in &program.nodes {
        for &j in &n.inputs {
            uses[j] += 1;
        }
    }
    for &o in &program.outputs {
        uses[o] += 1;
    }
    uses
}

/// A program under rewrite: nodes are copied in order, some replaced,
/// dropped or added, and every reference to a node is renumbered.
pub(crate) struct Rewrite<'p> {
    old: &'p Program,
    nodes: Vec<PNode>,
    /// The new index of each old node itself (`None`: dropped).
    at: Vec<Option<usize>>,
    /// The new node whose value stands for each old node's value, for its
    /// readers (itself, or a node that replaced it).
    value: Vec<usize>,
}

impl<'p> Rewrite<'p> {
    /// An empty rewrite of `old`.
    pub fn new(old: &'p Program) -> Rewrite<'p> {
        Rewrite {
            old,
            nodes: Vec::with_capacity(old.nodes.len()),
            at: vec![None; old.nodes.len()],
            value: vec![usize::MAX; old.nodes.len()],
        }
    }

    /// The new node holding old node `j`'s value.
    pub fn value(&self, j: usize) -> usize {
        debug_assert!(self.value[j] != usize::MAX, "node {j} read before defined");
        self.value[j]
    }

    /// Appends `node` (inputs already renumbered); its new index.
    pub fn push(&mut self, node: PNode) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Old node `i` copied, its inputs renumbered; its new index.
    pub fn copy(&mut self, i: usize) -> usize {
        let old = &self.old.nodes[i];
        let n = PNode {
            op: old.op.clone(),
            inputs: old.inputs.iter().map(|&j| self.value(j)).collect(),
            dtype: old.dtype,
            shape: old.shape.clone(),
        };
        let k = self.push(n);
        self.place(i, k);
        k
    }

    /// Old node `i` becomes new node `k` (itself and its value).
    pub fn place(&mut self, i: usize, k: usize) {
        self.at[i] = Some(k);
        self.value[i] = k;
    }

    /// Readers of old node `i` read new node `k` from now on.
    pub fn redirect(&mut self, i: usize, k: usize) {
        self.value[i] = k;
    }

    /// The rewritten program, `pinned` renumbered to the values' nodes.
    pub fn finish(self, pinned: &mut [usize]) -> Program {
        let old = self.old;
        let at = |j: usize| self.at[j].expect("a parameter is never dropped");
        for p in pinned.iter_mut() {
            *p = self.value[*p];
        }
        let vars = old
            .vars
            .iter()
            .map(|v| {
                let mut v = v.clone();
                if let VarSource::Dim { node, .. } = &mut v.source {
                    *node = self.value[*node];
                }
                v
            })
            .collect();
        Program {
            params: old.params.iter().map(|&p| at(p)).collect(),
            outputs: old.outputs.iter().map(|&o| self.value[o]).collect(),
            vars,
            nodes: self.nodes,
            size_outputs: old.size_outputs.clone(),
            aliases: old.aliases.clone(),
            matmul_precision: old.matmul_precision,
            param_buffers: old.param_buffers.clone(),
            output_buffers: old.output_buffers.clone(),
            param_shardings: old.param_shardings.clone(),
            masked_zones: old.masked_zones.clone(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::ir::program::Program;
    use crate::runtime::canonical::trace;
    use crate::Tensor;

    /// The program computing `ts`, traced.
    pub(crate) fn program_of(ts: &[&Tensor]) -> Program {
        let roots: Vec<_> = ts.iter().map(|t| t.node()).collect();
        trace(&roots, &[], &[]).expect("traced").program()
    }

    /// A loop body's transposed product is swapped too, and the loop
    /// computes the same values on the reference backend after the passes.
    #[test]
    fn passes_rewrite_loop_bodies() {
        let run = || {
            let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
            let out = crate::fori_loop(3, std::slice::from_ref(&x), |_, c| {
                vec![&c[0] + &x.transpose(0, 1).matmul(&c[0]).transpose(0, 1).sum()]
            });
            out[0].clone()
        };
        let text = crate::Device::reference().scoped(|| {
            let y = run();
            crate::ir::print::print_program(&super::lowering(&program_of(&[&y])))
        });
        assert!(text.contains("contract=[0]x[1]"), "{text}");
        let want = crate::Device::reference().scoped(|| run().to_vec::<f32>().unwrap());
        let got = crate::device::reference_after_passes().scoped(|| run().to_vec::<f32>().unwrap());
        assert_eq!(got, want);
    }

    /// The printed program before and after `run`, for snapshots.
    pub(crate) fn before_after(p: &Program, run: &dyn Fn(&Program) -> Option<Program>) -> String {
        let after = run(p).expect("the pass rewrites the program");
        format!(
            "{}\n--- after ---\n{}",
            crate::ir::print::print_program(p),
            crate::ir::print::print_program(&after)
        )
    }
}
