//! The pass deciding which operand of a product keeps its padding, the
//! result checked instead (`Dot::raw`).
//!
//! A float product that contracts padding, whose result has none and is
//! no larger than its larger operand of at least [`MIN_RAW`] elements,
//! zeroes the smaller operand only and checks the result
//! (`backend::pjrt::lower::guarded` says why the check makes it exact
//! and writes it). The larger operand is left raw unless its padding is
//! zero already (an `Op::FillPadding` of zeros along the contracted
//! dims), where the plain product costs nothing more.
//! [`super::shared_fill`] reads the same rule ([`program_raw_side`]) so
//! as not to zero what this pass leaves raw.

pub(crate) use crate::ir::dot::Side;
use crate::ir::program::Program;
use crate::ir::{Op, PadFill};
use crate::symint::SizeExpr;

/// Below this many elements in the raw operand, both operands are zeroed:
/// the select saved is small, and the check adds three small ops (the
/// finiteness test, the conditional, the mask handed to its slow path).
/// Not tuned: the detector's features (65,536 elements) gain, and the
/// small products of the tests keep their plain form.
const MIN_RAW: i64 = 4096;

/// What [`raw_side`] reads of a product.
struct Shapes {
    /// The product is of floats.
    float: bool,
    /// Some contracted dim has padding.
    contract_padded: bool,
    /// Some result dim has padding.
    out_padded: bool,
    /// Elements of the lhs at its bounds.
    lhs: i64,
    /// Elements of the rhs at its bounds.
    rhs: i64,
    /// Elements of the result at its bounds.
    out: i64,
}

/// The operand whose padding a product leaves as it is (the larger one),
/// when the rule of the module docs applies.
fn raw_side(s: &Shapes) -> Option<Side> {
    if !s.float || !s.contract_padded || s.out_padded {
        return None;
    }
    let (side, n) = if s.rhs >= s.lhs {
        (Side::Rhs, s.rhs)
    } else {
        (Side::Lhs, s.lhs)
    };
    (n >= MIN_RAW && s.out <= n).then_some(side)
}

/// The number of elements of `shape` at its bounds.
fn bound_numel(shape: &[SizeExpr]) -> i64 {
    shape
        .iter()
        .map(|e| e.as_const().unwrap_or_else(|| e.hi()).max(0))
        .product()
}

/// [`raw_side`] for node `i` of `program`, a `Dot`, from its shapes: the
/// operand that no fill of this product zeroes.
pub(crate) fn program_raw_side(program: &Program, i: usize) -> Option<Side> {
    let n = &program.nodes[i];
    let Op::Dot(dot) = &n.op else {
        return None;
    };
    let (a, b) = (&program.nodes[n.inputs[0]], &program.nodes[n.inputs[1]]);
    let padded = |shape: &[SizeExpr], d: usize| shape[d].as_const().is_none();
    raw_side(&Shapes {
        float: n.dtype.is_float(),
        contract_padded: dot.lhs_contract.iter().any(|&d| padded(&a.shape, d))
            || dot.rhs_contract.iter().any(|&d| padded(&b.shape, d)),
        out_padded: (0..n.shape.len()).any(|d| padded(&n.shape, d)),
        lhs: bound_numel(&a.shape),
        rhs: bound_numel(&b.shape),
        out: bound_numel(&n.shape),
    })
}

/// True when node `j` is a shared zero fill of its padding along every
/// padded dim of `dims` (bool values are never filled).
fn zero_along(program: &Program, j: usize, dims: &[usize]) -> bool {
    program.nodes[j].dtype != crate::dtype::DType::Bool
        && super::fills_along(program, j, dims, PadFill::Zero)
}

/// The pass: each product's `raw` operand, where the rule applies and
/// that operand's padding is not zero already.
pub(crate) fn run(program: &Program, _pinned: &mut [usize]) -> Option<Program> {
    let mut out: Option<Program> = None;
    for (i, n) in program.nodes.iter().enumerate() {
        let Op::Dot(dot) = &n.op else { continue };
        let Some(side) = program_raw_side(program, i) else {
            continue;
        };
        let (j, dims) = match side {
            Side::Lhs => (n.inputs[0], &dot.lhs_contract),
            Side::Rhs => (n.inputs[1], &dot.rhs_contract),
        };
        if zero_along(program, j, dims) || dot.raw == Some(side) {
            continue;
        }
        let p = out.get_or_insert_with(|| program.clone());
        p.nodes[i].op = Op::Dot(crate::ir::Dot {
            raw: Some(side),
            ..dot.clone()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{before_after, program_of};
    use crate::{Device, Tensor};

    /// A product contracting the rows of a zone: with a large operand
    /// (8192 x 8 at the bound) that operand stays raw and the result is
    /// checked; with two small operands both are zeroed (no `raw`).
    #[test]
    fn a_large_operand_keeps_its_padding_and_a_small_one_does_not() {
        Device::reference().scoped(|| {
            let x = Tensor::from_vec(vec![1.0f32; 8192], &[8192]).unwrap();
            let rows = x.nonzero().to_dtype(crate::DType::F32); // [s, 1]
            let w = Tensor::from_vec(vec![0.5f32; 8], &[1, 8]).unwrap();
            let feats = rows.matmul(&w); // [s, 8]
            let large = feats.transpose(0, 1).matmul(&rows); // [8, 1]
            let y = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
            let r = y.nonzero().to_dtype(crate::DType::F32); // [t, 1]
            let small = r.transpose(0, 1).matmul(&r); // [1, 1]
            let p = program_of(&[&large, &small]);
            let text = before_after(&p, &|p| super::run(p, &mut Vec::new()));
            assert_eq!(text.matches("raw=lhs").count(), 1, "{text}");
            assert!(!text.contains("raw=rhs"), "{text}");
            insta::assert_snapshot!("checked_dot_large_operand", text);
        });
    }
}
