//! Operands of the elementwise ops: PyTorch's dtype promotion and
//! broadcasting, to two nodes of one dtype and shape; and the scalar
//! operands shared between ops.

use super::{record, size_deps_for, Tensor};
use crate::dtype::{result_type, DType, Priority};
use crate::ir::infer::size_mismatch;
use crate::ir::node::shape_string;
use crate::ir::node::Inputs;
use crate::ir::{Lit, Node, Op};
use crate::symint::{Shape, SizeExpr};
use smallvec::SmallVec;
use std::sync::Arc;

/// The right operand of a binary op.
#[derive(Clone, Copy)]
pub(crate) enum Rhs<'a> {
    Tensor(&'a Tensor),
    /// A Rust number; its dtype only decides the category (see `Priority`).
    Scalar(f64, DType),
}

#[track_caller]
pub(super) fn priority(t: &Tensor) -> Priority {
    if t.rank() == 0 {
        Priority::ZeroDim
    } else {
        Priority::Dimensioned
    }
}

/// The broadcast shape of two shapes (right-aligned, size 1 stretches);
/// panics with the message of [`try_broadcast_shapes`].
#[track_caller]
pub(crate) fn broadcast_shapes(op: &'static str, a: &[SizeExpr], b: &[SizeExpr]) -> Shape {
    try_broadcast_shapes(op, a, b).unwrap_or_else(|e| panic!("{e}"))
}

/// The broadcast shape of two shapes, or the error naming both shapes and
/// the way to make them broadcast.
#[track_caller]
pub(crate) fn try_broadcast_shapes(
    op: &'static str,
    a: &[SizeExpr],
    b: &[SizeExpr],
) -> crate::Result<Shape> {
    let r = a.len().max(b.len());
    let one = SizeExpr::constant(1);
    (0..r)
        .map(|i| {
            let x = if i + a.len() >= r {
                &a[i + a.len() - r]
            } else {
                &one
            };
            let y = if i + b.len() >= r {
                &b[i + b.len() - r]
            } else {
                &one
            };
            if x == y || y.as_const() == Some(1) {
                Ok(x.clone())
            } else if x.as_const() == Some(1) {
                Ok(y.clone())
            } else if x.as_const().is_none() || y.as_const().is_none() {
                // Sizes recording cannot tell apart: checked equal when the
                // program runs (the operands are unified by a guard), unless
                // the bounds already rule it out.
                match crate::ir::check::SizeCheck::equal(op, x, y).decided() {
                    Some(false) => Err(size_mismatch(op, x, y, a, b)),
                    _ if y.as_const().is_some() => Ok(y.clone()),
                    _ => Ok(x.clone()),
                }
            } else {
                Err(crate::Error::shape(
                    op,
                    format!(
                        "cannot broadcast shapes {} and {}: sizes {x} and {y} at dim {i} of the result are neither equal nor 1; reshape, expand or narrow an operand so that they broadcast",
                        shape_string(a),
                        shape_string(b)
                    ),
                ))
            }
        })
        .collect()
}

impl Tensor {
    /// This tensor broadcast to `shape` (right-aligned); `others` may hold
    /// the nodes defining `shape`'s dynamic sizes.
    #[track_caller]
    pub(crate) fn broadcast_to(&self, shape: &[SizeExpr], others: &[&Tensor]) -> Tensor {
        self.broadcast_for("expand", shape, others)
    }

    /// [`Tensor::broadcast_to`] for `op`, which names the size checks it
    /// records (see [`try_broadcast_shapes`]).
    #[track_caller]
    pub(crate) fn broadcast_for(
        &self,
        op: &'static str,
        shape: &[SizeExpr],
        others: &[&Tensor],
    ) -> Tensor {
        let node = self.node();
        if node.shape[..] == *shape {
            return self.clone();
        }
        let candidates: Vec<Arc<Node>> = others.iter().map(|t| t.node()).collect();
        let x = super::guard::unify_for_broadcast(op, &self.input_node(), shape, &candidates)
            .unwrap_or_else(|e| panic!("{e}"));
        if x.shape[..] == *shape {
            return Tensor::from_node(x, self.device());
        }
        let node = record(
            broadcast_op(&x.shape, shape),
            Inputs::from_iter([x]),
            size_deps_for(shape, &candidates),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Tensor::from_node(node, self.device())
    }

    /// This tensor converted to `dtype` (no op when it already is).
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let i = x.to_dtype(DType::I64);
    /// assert_eq!(i.dtype(), DType::I64);
    /// assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2]);
    /// ```
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        Tensor::apply(Op::Convert(dtype), &[self], SmallVec::new())
    }

    /// The operand node of this tensor converted to `dtype` (an intermediate
    /// node: no `Tensor` is made for the conversion).
    #[track_caller]
    fn input_node_as(&self, dtype: DType) -> Arc<Node> {
        let n = self.input_node();
        if n.dtype == dtype {
            return n;
        }
        record(Op::Convert(dtype), smallvec::smallvec![n], SmallVec::new())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Promotes and broadcasts both operands; `float` forces a float result
    /// type (true division, float-only functions). Returns operand nodes:
    /// the scalar and broadcast intermediates need no `Tensor`.
    #[track_caller]
    pub(super) fn operands(
        &self,
        op: &'static str,
        rhs: Rhs<'_>,
        float: bool,
    ) -> (Arc<Node>, Arc<Node>) {
        let (rdt, rprio) = match rhs {
            Rhs::Tensor(t) => (t.dtype(), priority(t)),
            Rhs::Scalar(_, d) => (d, Priority::Scalar),
        };
        let mut dt = result_type(&[(self.dtype(), priority(self)), (rdt, rprio)]);
        if float && !dt.is_float() {
            dt = DType::F32;
        }
        let a = self.input_node_as(dt);
        match rhs {
            Rhs::Tensor(t) => {
                if !t.device().same(self.device()) {
                    panic!(
                        "{}",
                        crate::Error::DeviceMismatch {
                            op,
                            lhs: self.device().to_string(),
                            rhs: t.device().to_string()
                        }
                    );
                }
                let b = t.input_node_as(dt);
                if a.shape == b.shape {
                    return (a, b);
                }
                let shape = broadcast_shapes(op, &a.shape, &b.shape);
                (
                    broadcast_node(op, &a, &shape, &b),
                    broadcast_node(op, &b, &shape, &a),
                )
            }
            Rhs::Scalar(v, _) => {
                let b = splat::shared_or(v, dt, &a.shape, || {
                    let s = record(
                        Op::Scalar {
                            value: Lit(v),
                            dtype: dt,
                        },
                        Inputs::new(),
                        SmallVec::new(),
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                    broadcast_node(op, &s, &a.shape, &a)
                });
                (a, b)
            }
        }
    }
}

/// The op broadcasting `from` into `to` (right-aligned).
#[track_caller]
fn broadcast_op(from: &[SizeExpr], to: &[SizeExpr]) -> Op {
    Op::Broadcast {
        shape: to.iter().cloned().collect(),
        dims: (to.len() - from.len()..to.len()).collect(),
    }
}

/// `x` broadcast to `shape`, whose dynamic sizes `other` defines, for
/// `op` (which names the size checks it records).
#[track_caller]
fn broadcast_node(
    op: &'static str,
    x: &Arc<Node>,
    shape: &[SizeExpr],
    other: &Arc<Node>,
) -> Arc<Node> {
    if x.shape[..] == *shape {
        return x.clone();
    }
    let others = std::slice::from_ref(other);
    let x =
        super::guard::unify_for_broadcast(op, x, shape, others).unwrap_or_else(|e| panic!("{e}"));
    if x.shape[..] == *shape {
        return x;
    }
    let deps = size_deps_for(shape, others);
    let mut inputs = Inputs::new();
    inputs.push(x.clone());
    record(broadcast_op(&x.shape, shape), inputs, deps).unwrap_or_else(|e| panic!("{e}"))
}

/// Scalar operands broadcast to static shapes, shared between the ops
/// (and steps) that use them: a training step multiplies by the same
/// constants every time, and the two nodes of a constant (the scalar and
/// its broadcast) cost twice what the op using them does to record
/// (`benches/record.rs`). Nodes never change once made, so a graph that
/// shares one computes what it would with its own; a trace meets it once.
/// Per thread, and bounded: past `CAPACITY` entries the cache starts over.
pub(crate) mod splat {
    use crate::dtype::DType;
    use crate::ir::Node;
    use crate::symint::SizeExpr;
    use rustc_hash::FxHashMap;
    use smallvec::SmallVec;
    use std::cell::RefCell;
    use std::sync::Arc;

    const CAPACITY: usize = 256;

    type Key = (u64, DType, SmallVec<[i64; 4]>);

    thread_local! {
        static SPLATS: RefCell<FxHashMap<Key, Arc<Node>>> = RefCell::new(FxHashMap::default());
    }

    /// The key of `v` as `dtype` at `shape`, if the shape is static.
    #[track_caller]
    fn key(v: f64, dtype: DType, shape: &[SizeExpr]) -> Option<Key> {
        let dims = shape
            .iter()
            .map(SizeExpr::as_const)
            .collect::<Option<_>>()?;
        Some((v.to_bits(), dtype, dims))
    }

    /// Drops this thread's shared scalar nodes (they would otherwise go
    /// when the thread ends).
    pub(crate) fn clear() {
        SPLATS.with(|m| m.borrow_mut().clear());
    }

    /// The shared node of `v` as `dtype` broadcast to `shape`, made by
    /// `make` (and kept, when the shape is static) if there is none.
    #[track_caller]
    pub(super) fn shared_or(
        v: f64,
        dtype: DType,
        shape: &[SizeExpr],
        make: impl FnOnce() -> Arc<Node>,
    ) -> Arc<Node> {
        let Some(k) = key(v, dtype, shape) else {
            return make();
        };
        if let Some(n) = SPLATS.with(|m| m.borrow().get(&k).cloned()) {
            return n;
        }
        // Made outside the borrow, so that recording can never find the
        // cache borrowed.
        let n = make();
        SPLATS.with(|m| {
            let mut m = m.borrow_mut();
            if m.len() >= CAPACITY {
                m.clear();
            }
            m.insert(k, n.clone());
        });
        n
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;
    use std::sync::Arc;

    /// The broadcast operand of `t`'s op (its second input).
    fn operand(t: &Tensor) -> Arc<crate::ir::Node> {
        t.node().inputs[1].clone()
    }

    #[test]
    fn a_scalar_operand_at_a_static_shape_is_one_node_shared_by_its_uses() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let b = Tensor::from_vec(vec![3.0f32, 4.0], &[2]).unwrap();
        let (x, y) = (&a * 0.5, &b * 0.5);
        assert!(Arc::ptr_eq(&operand(&x), &operand(&y)));
        // Another value, dtype or shape is another node.
        assert!(!Arc::ptr_eq(&operand(&x), &operand(&(&a * 0.25))));
        let c = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
        assert!(!Arc::ptr_eq(&operand(&x), &operand(&(&c * 0.5))));
        let d = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap();
        assert!(!Arc::ptr_eq(&operand(&x), &operand(&(&d * 0.5))));
        // Shared, the program still computes each use.
        assert_eq!((&x + &y).to_vec::<f32>().unwrap(), vec![2.0, 3.0]);
    }
}
