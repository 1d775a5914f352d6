//! Zero padding written once per value, not once per consumer.
//!
//! A matrix product that contracts a dynamic dim, and a sum over one,
//! each zero the operand's padding along those dims (a select over the
//! whole operand, `Ctx::padded_along`). A value with several such
//! consumers, typical of training (a gradient feeds the product for the
//! weight's gradient, the product for the input's and the bias's sum; an
//! activation feeds its forward product and the weight's gradient), got
//! one select per consumer, and XLA materializes each selected copy for
//! its product: three vocabulary-sized passes where one does. So the
//! lowering zeroes such a value's padding once, right where it is
//! defined, along every dim some consumer needs zeroed, and its
//! consumers find those dims already zero and select nothing.
//!
//! The zeroed value passes through an `optimization_barrier`, so XLA
//! writes it once and every consumer reads that buffer. Without it XLA's
//! CPU fusion judged the select cheap and copied the whole producer
//! chain into each consumer's fusion (the transformer's vocabulary-sized
//! gradient was computed three times, and the expensive `exp` before it
//! split into a fusion of its own; `benches/README.md`, "Current
//! figures").

use super::emit::{Elt, V};
use super::guarded::{self, Side};
use super::Ctx;
use crate::ir::program::Program;
use crate::ir::{Op, ReduceKind};

/// For each node: the dims along which at least one consumer zeroes its
/// padding, when there are any and the node has at least two consumers
/// (with one, zeroing at the consumer is the same work).
pub(super) fn zero_once(program: &Program) -> Vec<Option<Vec<usize>>> {
    let n = program.nodes.len();
    let mut uses = vec![0usize; n];
    let mut wants: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in program.nodes.iter().enumerate() {
        for &j in &node.inputs {
            uses[j] += 1;
        }
        let mut want = |j: usize, dims: &[usize]| {
            for &d in dims {
                if !wants[j].contains(&d) {
                    wants[j].push(d);
                }
            }
        };
        if let Op::Dot(dot) = &node.op {
            // A checked product leaves its larger operand's padding as it
            // is (`guarded`).
            let raw = guarded::program_raw_side(program, i);
            if raw != Some(Side::Lhs) {
                want(node.inputs[0], &dot.lhs_contract);
            }
            if raw != Some(Side::Rhs) {
                want(node.inputs[1], &dot.rhs_contract);
            }
        } else if let Op::Reduce {
            kind: ReduceKind::Sum,
            dims,
        } = &node.op
        {
            want(node.inputs[0], dims);
        }
    }
    for &o in &program.outputs {
        uses[o] += 1;
    }
    (0..n)
        .map(|i| {
            let shape = &program.nodes[i].shape;
            let mut dims: Vec<usize> = wants[i]
                .iter()
                .copied()
                .filter(|&d| shape[d].as_const().is_none())
                .collect();
            dims.sort_unstable();
            (uses[i] >= 2 && !dims.is_empty()).then_some(dims)
        })
        .collect()
}

impl Ctx<'_> {
    /// `v` (node `i`'s value) with its padding zeroed along `dims`, still
    /// dynamic, and recorded as such (`padding`).
    pub(super) fn zero_padding_once(&mut self, v: V, dims: &[usize]) -> V {
        if v.ty.elt == Elt::I1 {
            return v;
        }
        let sizes = self.sizes_of(&v);
        let zero = v.ty.elt.literal(0.0);
        let filled = self.padded_along(&v, &sizes, &zero, dims);
        let filled = self.b.optimization_barrier(&filled);
        let ty = v.ty.clone();
        let out = self.redyn(filled, &ty, &sizes);
        self.note_zero(&out, dims);
        out
    }
}
