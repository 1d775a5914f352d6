//! Which operand of a product keeps its padding, the result checked: the
//! rule of `backend::pjrt::lower::guarded`, over shapes, so that a pass
//! ([`super::shared_fill`]) and the emitter decide alike.
//!
//! A float product that contracts padding, whose result has none and is
//! no larger than its larger operand of at least [`MIN_RAW`] elements,
//! zeroes the smaller operand only and checks the result (see
//! `lower/guarded.rs` for why the check makes it exact).

use crate::ir::program::Program;
use crate::ir::Op;
use crate::symint::SizeExpr;

/// Below this many elements in the raw operand, both operands are zeroed:
/// the select saved is small, and the check adds three small ops (the
/// finiteness test, the conditional, the mask handed to its slow path).
/// Not tuned: the detector's features (65,536 elements) gain, and the
/// small products of the tests keep their plain form.
pub(crate) const MIN_RAW: i64 = 4096;

/// An operand of a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Lhs,
    Rhs,
}

/// What [`raw_side`] reads of a product.
pub(crate) struct Shapes {
    /// The product is of floats.
    pub float: bool,
    /// Some contracted dim has padding.
    pub contract_padded: bool,
    /// Some result dim has padding.
    pub out_padded: bool,
    /// Elements of the lhs, the rhs and the result at their bounds.
    pub lhs: i64,
    pub rhs: i64,
    pub out: i64,
}

/// The operand whose padding a product leaves as it is (the larger one),
/// when the rule of the module docs applies.
pub(crate) fn raw_side(s: &Shapes) -> Option<Side> {
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
