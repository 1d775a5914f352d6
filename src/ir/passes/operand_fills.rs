//! The padding each op reads, filled with a value that cannot change its
//! result: an explicit fill before the op.
//!
//! In the XLA lowering a value with a dynamic dim is its bound-sized
//! buffer, and what lies past the real size is unspecified. An op that
//! combines elements along a dim (a reduction, a contraction, a window)
//! or tests each element (`nonzero`, a mask) would read that padding, so
//! the padding it reads must first hold a value that changes nothing:
//!
//! | op | operand | dims | fill |
//! |---|---|---|---|
//! | `Reduce` | the operand | the reduced dims | the reduction's identity |
//! | `ArgReduce` | the operand | the reduced dim | the value that never wins |
//! | `Dot` | each operand not left `raw` | its contracted dims | zero |
//! | `ReduceWindow` | the operand | every dim | the reduction's identity |
//! | `SelectAndScatter` | the operand; the source | every dim | never winning; zero |
//! | `Nonzero` | the operand | every dim | zero |
//! | `MaskedSelect`, `MaskedScatter` | the mask | every dim | false |
//!
//! Only dims of symbolic size have padding (a zone's masked dims
//! included). An operand whose padding already holds the fill along those
//! dims (a shared fill, [`super::shared_fill`]) gets none. This pass runs
//! last, after [`super::checked_dot`] has chosen each product's `raw`
//! operand (whose padding is left as it is, the result checked) and
//! after [`super::zone_masks`], which reads the program without these
//! fills. Each fill has one reader; the lowering writes it as a select
//! that XLA fuses into that reader. Ops that write padding without
//! reading it (elementwise, layout) and those whose lowering keeps
//! padding out by their indices (scatters, sorts, gathers) need none.

use super::Rewrite;
use crate::ir::program::{PNode, Program};
use crate::ir::{Op, PadFill};

/// One fill an op needs: operand `slot`, along `dims` (`None`: every
/// dim), with `fill`.
struct Need {
    slot: usize,
    dims: Option<Vec<usize>>,
    fill: PadFill,
}

/// The fills node `i` reads (the table of the module docs).
fn needs(program: &Program, i: usize) -> Vec<Need> {
    let need = |slot, dims: Option<&[usize]>, fill| Need {
        slot,
        dims: dims.map(<[usize]>::to_vec),
        fill,
    };
    let node = &program.nodes[i];
    match &node.op {
        Op::Reduce { kind, dims } => vec![need(0, Some(dims), PadFill::identity(*kind))],
        Op::ArgReduce { kind, dim } => vec![need(0, Some(&[*dim]), PadFill::worst(*kind))],
        Op::Dot(dot) => {
            use crate::ir::dot::Side;
            let mut v = Vec::new();
            if dot.raw != Some(Side::Lhs) {
                v.push(need(0, Some(&dot.lhs_contract), PadFill::Zero));
            }
            if dot.raw != Some(Side::Rhs) {
                v.push(need(1, Some(&dot.rhs_contract), PadFill::Zero));
            }
            v
        }
        Op::ReduceWindow { kind, .. } => {
            vec![need(0, None, PadFill::window_identity(*kind))]
        }
        Op::SelectAndScatter { kind, .. } => vec![
            need(0, None, PadFill::worst(*kind)),
            need(1, None, PadFill::Zero),
        ],
        Op::Nonzero => vec![need(0, None, PadFill::Zero)],
        Op::MaskedSelect | Op::MaskedScatter => vec![need(1, None, PadFill::Zero)],
        Op::Data { .. }
        | Op::Scalar { .. }
        | Op::Iota { .. }
        | Op::SizeOf(_)
        | Op::RandomUniform { .. }
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Convert(_)
        | Op::Broadcast { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Concat { .. }
        | Op::Reverse { .. }
        | Op::PadToBound { .. }
        | Op::FillPadding { .. }
        | Op::Guard { .. }
        | Op::Convolution(_)
        | Op::IndexSelect { .. }
        | Op::Gather { .. }
        | Op::IndexAdd { .. }
        | Op::Scatter { .. }
        | Op::Argsort { .. }
        | Op::Unique
        | Op::UniqueCounts
        | Op::AllReduce { .. }
        | Op::AllGather { .. }
        | Op::ReduceScatter { .. }
        | Op::ReplicaId
        | Op::Sharding(_)
        | Op::While(_)
        | Op::LoopResult { .. } => Vec::new(),
    }
}

/// The dims of `need` that have padding in node `j` (a symbolic size),
/// sorted; empty when there are none.
fn padded_dims(program: &Program, j: usize, need: &Need) -> Vec<usize> {
    let shape = &program.nodes[j].shape;
    let all: Vec<usize> = (0..shape.len()).collect();
    let mut dims: Vec<usize> = need
        .dims
        .as_ref()
        .unwrap_or(&all)
        .iter()
        .copied()
        .filter(|&d| shape[d].as_const().is_none())
        .collect();
    dims.sort_unstable();
    dims.dedup();
    dims
}

/// The pass: an unshared `Op::FillPadding` before each operand of the
/// module docs' table that has padding not filled already.
pub(crate) fn run(program: &Program, pinned: &mut [usize]) -> Option<Program> {
    let mut r: Option<Rewrite> = None;
    for i in 0..program.nodes.len() {
        let node = &program.nodes[i];
        let fills: Vec<(usize, Vec<usize>, PadFill)> = needs(program, i)
            .into_iter()
            .filter_map(|need| {
                let j = node.inputs[need.slot];
                let dims = padded_dims(program, j, &need);
                let done = super::fills_along(program, j, &dims, need.fill);
                (!dims.is_empty() && !done).then_some((need.slot, dims, need.fill))
            })
            .collect();
        if fills.is_empty() {
            if let Some(r) = r.as_mut() {
                r.copy(i);
            }
            continue;
        }
        let r = r.get_or_insert_with(|| {
            let mut r = Rewrite::new(program);
            (0..i).for_each(|k| {
                r.copy(k);
            });
            r
        });
        let mut copy = node.clone();
        copy.inputs = node.inputs.iter().map(|&j| r.value(j)).collect();
        for (slot, dims, fill) in fills {
            let from = &program.nodes[node.inputs[slot]];
            copy.inputs[slot] = r.push(PNode {
                op: Op::FillPadding {
                    dims,
                    fill,
                    shared: false,
                },
                inputs: smallvec::smallvec![copy.inputs[slot]],
                dtype: from.dtype,
                shape: from.shape.clone(),
            });
        }
        let k = r.push(copy);
        r.place(i, k);
    }
    r.map(|r| r.finish(pinned))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{before_after, program_of};
    use crate::{Device, Tensor};

    /// A max over a dynamic dim reads it filled with the lowest value; a
    /// sum of the same value over a static dim reads no fill.
    #[test]
    fn a_reduction_reads_its_identity_in_the_padding() {
        Device::reference().scoped(|| {
            let x = Tensor::from_vec(vec![1.0f32, -2.0, 0.0, 3.0, 0.0, 4.0], &[3, 2]).unwrap();
            let rows = x.index_select(0, &x.sum_dims(&[1], false).nonzero().squeeze(1));
            let top = rows.max_dims(&[0], false); // over the dynamic rows
            let per_row = rows.sum_dims(&[1], false); // over the static dim
            let p = program_of(&[&top, &per_row]);
            let text = before_after(&p, &|p| super::run(p, &mut Vec::new()));
            assert_eq!(
                text.matches("fill_padding[dims=[0] fill=lowest]").count(),
                1,
                "{text}"
            );
            assert!(!text.contains("fill=zero"), "{text}");
            insta::assert_snapshot!("operand_fills_reduction", text);
        });
    }

    /// A product over a dynamic dim zeroes what it contracts, except
    /// where a shared fill has zeroed it already.
    #[test]
    fn a_product_zeroes_what_it_contracts_unless_it_is_zero_already() {
        Device::reference().scoped(|| {
            let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0, 0.0, 4.0], &[6]).unwrap();
            let h = x.nonzero().to_dtype(crate::DType::F32); // [s, 1]
            let gw = h.transpose(0, 1).matmul(&h); // contracts s
            let total = h.sum_dims(&[0], false); // sums s
            let p = program_of(&[&gw, &total]);
            let shared = super::super::shared_fill::run(&p, &mut Vec::new()).expect("h is shared");
            let text = before_after(&shared, &|p| super::run(p, &mut Vec::new()));
            let after = text.split("--- after ---").nth(1).unwrap();
            // `h` is zeroed once for the sum and the product's right side;
            // only its transpose, the left side, gets a fill of its own.
            assert_eq!(after.matches("fill=zero shared]").count(), 1, "{text}");
            assert_eq!(after.matches("fill=zero]").count(), 1, "{text}");
            insta::assert_snapshot!("operand_fills_product", text);
        });
    }

    /// The lowering's passes keep the values of programs with fills on
    /// the reference backend, where a fill is the identity.
    #[test]
    fn fills_keep_the_reference_values() {
        let run = || {
            let x = Tensor::from_vec(vec![1.0f32, -2.0, 0.0, 3.0, 0.0, 4.0], &[6]).unwrap();
            let nz = x.masked_select(&x.gt_scalar(0.5));
            let m = nz.max();
            let a = nz.argmin(0).to_dtype(crate::DType::F32);
            let s = nz.unsqueeze(0).matmul(&nz.unsqueeze(1)).sum();
            let c = nz.nonzero().to_dtype(crate::DType::F32).sum();
            (&(&m + &a) + &(&s + &c)).to_vec::<f32>().unwrap()
        };
        let want = Device::reference().scoped(run);
        let got = crate::device::reference_after_passes().scoped(run);
        assert_eq!(got, want);
    }
}
