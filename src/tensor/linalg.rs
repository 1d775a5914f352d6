//! Matrix multiplication with `torch.matmul`'s rules.

use super::broadcast::try_broadcast_shapes;
use super::Tensor;
use crate::dtype::{result_type, Priority};
use crate::ir::node::shape_string;
use crate::ir::{Dot, Op};
use smallvec::SmallVec;

impl Tensor {
    /// Matrix product as `torch.matmul`: 1-D operands are vectors, leading
    /// (batch) dims broadcast. Any dimension may be dynamic, including the
    /// contracted one. A matrix (or vector) against a batch on either side
    /// is one product without broadcasting the matrix, and so is its
    /// gradient (`Linear` on `[B, T, in]` costs one `[B*T, in] x [in,
    /// out]` product, not `B` of them).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// let v = Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap();
    /// assert_eq!(a.matmul(&v).to_vec::<f32>().unwrap(), vec![3.0, 7.0]);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        let (ra, rb) = (self.rank(), other.rank());
        if ra == 0 || rb == 0 {
            panic!(
                "matmul: both operands need at least one dimension, got shapes {} and {}; use mul for scalars",
                self.shape_string(),
                other.shape_string()
            );
        }
        let dt = result_type(&[
            (self.dtype(), Priority::Dimensioned),
            (other.dtype(), Priority::Dimensioned),
        ]);
        let (a, b) = (self.to_dtype(dt), other.to_dtype(dt));
        let a2 = if ra == 1 { a.unsqueeze(0) } else { a };
        let b2 = if rb == 1 { b.unsqueeze(1) } else { b };
        let sa = a2.shape_exprs();
        // The contracted sizes: equal, or checked equal when the program
        // runs (`b` takes `a`'s size).
        let b2 = {
            let mut target = b2.shape_exprs();
            let k = target.len() - 2;
            target[k] = sa[sa.len() - 1].clone();
            let others = [&a2];
            let n = super::guard::unify_node(
                "matmul",
                &b2.input_node(),
                &target,
                &others.iter().map(|t| t.node()).collect::<Vec<_>>(),
            )
            .unwrap_or_else(|_| {
                panic!(
                    "{}",
                    crate::ir::infer::size_mismatch(
                        "matmul",
                        &sa[sa.len() - 1],
                        &b2.shape_exprs()[k],
                        &self.shape_exprs(),
                        &other.shape_exprs()
                    )
                )
            });
            Tensor::from_node(n, b2.device())
        };
        let sb = b2.shape_exprs();
        let (na, nb) = (sa.len(), sb.len());
        let dot = |x: &Tensor, y: &Tensor, dot: Dot| {
            Tensor::try_apply(Op::Dot(dot), &[x, y], SmallVec::new()).unwrap_or_else(|e| {
                panic!(
                    "{e} (operand shapes {} and {})",
                    shape_string(&self.shape_exprs()),
                    shape_string(&other.shape_exprs())
                )
            })
        };
        // A plain matrix against a batch pairs with every matrix of the
        // batch without being broadcast to it: one dot with no batch dims
        // (a weight gradient then contracts all leading dims at once).
        let out = if nb == 2 {
            // [.., m, k] . [k, n] -> [.., m, n].
            let d = Dot {
                batch: 0,
                lhs_contract: vec![na - 1],
                rhs_contract: vec![0],
                raw: None,
            };
            dot(&a2, &b2, d)
        } else if na == 2 {
            // [m, k] . [.., k, n] -> [m, .., n], then m moved after the
            // batch dims.
            let d = Dot {
                batch: 0,
                lhs_contract: vec![1],
                rhs_contract: vec![nb - 2],
                raw: None,
            };
            let perm: Vec<usize> = (1..nb - 1).chain([0, nb - 1]).collect();
            dot(&a2, &b2, d).permute(&perm)
        } else {
            let batch = try_broadcast_shapes("matmul", &sa[..na - 2], &sb[..nb - 2])
                .unwrap_or_else(|e| {
                    panic!(
                        "{e} (the batch dims of operand shapes {} and {} must broadcast)",
                        shape_string(&self.shape_exprs()),
                        shape_string(&other.shape_exprs())
                    )
                });
            // A batch size that only the other operand defines (a static
            // `[1, m, k]` times a batch of a dynamic zone) needs it as a
            // size dep.
            let full = |s: &[crate::symint::SizeExpr], t: &Tensor| {
                let mut shape = batch.clone();
                shape.extend(s[s.len() - 2..].iter().cloned());
                t.broadcast_for("matmul", &shape, &[&a2, &b2])
            };
            let (a3, b3) = (full(&sa, &a2), full(&sb, &b2));
            dot(&a3, &b3, Dot::matmul(batch.len() + 2))
        };
        let out = if rb == 1 { out.squeeze(-1) } else { out };
        if ra == 1 {
            out.squeeze(if rb == 1 { -1 } else { -2 })
        } else {
            out
        }
    }
}

impl Tensor {
    /// The dot primitive with explicit dims (see `ir::dot`); the operands
    /// must already agree on the paired sizes.
    #[track_caller]
    pub(crate) fn dot_general(&self, other: &Tensor, dot: Dot) -> Tensor {
        Tensor::apply(Op::Dot(dot), &[self, other], SmallVec::new())
    }
}
