//! Zero padding written once per value, not once per consumer.
//!
//! A matrix product that contracts a dynamic dim, and a sum over one,
//! each zero the operand's padding along those dims (a select over the
//! whole operand). A value with several such consumers, typical of
//! training (a gradient feeds the product for the weight's gradient, the
//! product for the input's and the bias's sum; an activation feeds its
//! forward product and the weight's gradient), got one select per
//! consumer, and XLA materializes each selected copy for its product:
//! three vocabulary-sized passes where one does. So this pass zeroes such
//! a value's padding once, right where it is defined, along every dim
//! some consumer needs zeroed: a shared [`Op::FillPadding`] node after it
//! that every reader (its outputs, the sizes read from it) reads instead,
//! and the consumers find those dims already zero and select nothing.
//!
//! The lowering writes the zeroed value through an
//! `optimization_barrier`, so XLA writes it once and every consumer reads
//! that buffer. Without it XLA's CPU fusion judged the select cheap and
//! copied the whole producer chain into each consumer's fusion (the
//! transformer's vocabulary-sized gradient was computed three times, and
//! the expensive `exp` before it split into a fusion of its own;
//! `benches/README.md`, "Current figures"). On the reference backend,
//! which holds no padding, the node is the identity.

use super::checked_dot::{program_raw_side, Side};
use super::Rewrite;
use crate::dtype::DType;
use crate::ir::program::{PNode, Program};
use crate::ir::{Op, PadFill, ReduceKind};

/// For each node: the dims along which at least one consumer zeroes its
/// padding, when there are any and the node has at least two consumers
/// (with one, zeroing at the consumer is the same work). Bool values
/// have no fill (no product or sum reads their padding).
pub(crate) fn zero_once(program: &Program) -> Vec<Option<Vec<usize>>> {
    let n = program.nodes.len();
    let uses = super::uses(program);
    let mut wants: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in program.nodes.iter().enumerate() {
        let mut want = |j: usize, dims: &[usize]| {
            for &d in dims {
                if !wants[j].contains(&d) {
                    wants[j].push(d);
                }
            }
        };
        if let Op::Dot(dot) = &node.op {
            // A checked product leaves its larger operand's padding as it
            // is (`checked_dot`).
            let raw = program_raw_side(program, i);
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
    (0..n)
        .map(|i| {
            let node = &program.nodes[i];
            let mut dims: Vec<usize> = wants[i]
                .iter()
                .copied()
                .filter(|&d| node.shape[d].as_const().is_none())
                .collect();
            dims.sort_unstable();
            (uses[i] >= 2 && !dims.is_empty() && node.dtype != DType::Bool).then_some(dims)
        })
        .collect()
}

/// The pass: a shared `Op::FillPadding` of zeros after each value of
/// [`zero_once`], read in its place.
pub(crate) fn run(program: &Program, pinned: &mut [usize]) -> Option<Program> {
    let zero = zero_once(program);
    if zero.iter().all(Option::is_none) {
        return None;
    }
    let mut r = Rewrite::new(program);
    for (i, dims) in zero.into_iter().enumerate() {
        let k = r.copy(i);
        if let Some(dims) = dims {
            let n = &program.nodes[i];
            let z = r.push(PNode {
                op: Op::FillPadding {
                    dims,
                    fill: PadFill::Zero,
                    shared: true,
                },
                inputs: smallvec::smallvec![k],
                dtype: n.dtype,
                shape: n.shape.clone(),
            });
            r.redirect(i, z);
        }
    }
    Some(r.finish(pinned))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{before_after, program_of};
    use crate::{Device, Tensor};

    /// A dynamic activation read by two products over its rows: zeroed
    /// once, both products read the fill.
    #[test]
    fn a_value_two_products_contract_is_zeroed_once() {
        Device::reference().scoped(|| {
            let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0, 0.0, 4.0], &[6]).unwrap();
            let rows = x.nonzero().to_dtype(crate::DType::F32); // [s, 1]
            let w = Tensor::from_vec(vec![0.5f32, 0.25], &[2, 1]).unwrap();
            let h = rows.matmul(&w.transpose(0, 1)); // [s, 2]
            let gw = h.transpose(0, 1).matmul(&h); // contracts s
            let total = h.sum_dims(&[0], false); // sums s
            let p = program_of(&[&gw, &total]);
            let text = before_after(&p, &|p| super::run(p, &mut Vec::new()));
            assert!(
                text.contains("fill_padding[dims=[0] fill=zero shared]"),
                "{text}"
            );
            insta::assert_snapshot!("shared_fill_two_consumers", text);
        });
    }

    /// A static program has no padding: the pass leaves it as it is.
    #[test]
    fn static_programs_are_unchanged() {
        Device::reference().scoped(|| {
            let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
            let b = a.matmul(&a);
            let c = (&b + 1.0).sum();
            let p = program_of(&[&b, &c]);
            assert_eq!(super::run(&p, &mut Vec::new()), None);
        });
    }
}
