//! Size expressions as `tensor<i32>` values.
//!
//! A `SizeExpr` is `c + Σ k·atom`; each variable's value comes from where
//! the program says (`VarSource::Dim` → `get_dimension_size` of that node's
//! value, `VarSource::Arg(k)` → the k-th size parameter). Arithmetic is i32
//! with the same meaning as `SizeExpr::eval`: floor division and Python's
//! remainder (sign of the divisor), both 0 for a zero divisor.

use super::emit::{Elt, Ty, V};
use super::Ctx;
use crate::error::{Error, Result};
use crate::ir::check::{CheckKind, SizeCheck};
use crate::ir::program::VarSource;
use crate::ir::CmpOp;
use crate::symint::expr::AtomOp;
use crate::symint::{SizeExpr, VarRef};

impl Ctx<'_> {
    /// The value of a variable, emitted once per program.
    pub(super) fn var_value(&mut self, v: &VarRef) -> Result<V> {
        if let Some(count) = self.masked_count(v.0.id) {
            return Ok(count);
        }
        let pos = *self.var_pos.get(&v.0.id).ok_or_else(|| {
            Error::internal(
                "pjrt lowering",
                format!("size variable s{} has no source in the program", v.0.id),
            )
        })?;
        if let Some(x) = self.var_vals.get(&pos) {
            return Ok(x.clone());
        }
        let x = match &self.program.vars[pos].source {
            VarSource::Dim { node, dim } => {
                let val = self.values[*node].clone().ok_or_else(|| {
                    Error::internal("pjrt lowering", "a size read from a node not yet lowered")
                })?;
                self.b.get_size(&val, *dim)
            }
            VarSource::Arg(k) => self.var_args.get(*k).cloned().ok_or_else(|| {
                Error::internal("pjrt lowering", format!("size argument {k} missing"))
            })?,
        };
        self.var_vals.insert(pos, x.clone());
        Ok(x)
    }

    /// Evaluates a size expression to an i32 scalar.
    pub(super) fn size_value(&mut self, e: &SizeExpr) -> Result<V> {
        let (c, terms) = e.parts();
        let mut acc = self.b.i32c(c);
        for (atom, k) in terms {
            let x = match &atom.op {
                AtomOp::Var(v) => self.var_value(v)?,
                AtomOp::Mul(a, b) => {
                    let (a, b) = (self.size_value(a)?, self.size_value(b)?);
                    self.b.bin("multiply", &a, &b)
                }
                AtomOp::FloorDiv(a, b) => {
                    let (a, b) = (self.size_value(a)?, self.size_value(b)?);
                    self.floor_div_rem(&a, &b).0
                }
                AtomOp::Rem(a, b) => {
                    let (a, b) = (self.size_value(a)?, self.size_value(b)?);
                    self.floor_div_rem(&a, &b).1
                }
                AtomOp::Min(a, b) => {
                    let (a, b) = (self.size_value(a)?, self.size_value(b)?);
                    self.b.bin("minimum", &a, &b)
                }
                AtomOp::Max(a, b) => {
                    let (a, b) = (self.size_value(a)?, self.size_value(b)?);
                    self.b.bin("maximum", &a, &b)
                }
            };
            let term = if *k == 1 {
                x
            } else {
                let kk = self.b.i32c(*k);
                self.b.bin("multiply", &x, &kk)
            };
            acc = self.b.bin("add", &acc, &term);
        }
        Ok(acc)
    }

    /// Floor division and Python remainder of i32 scalars; both 0 when the
    /// divisor is 0 (as `SizeExpr::eval`).
    fn floor_div_rem(&mut self, a: &V, b: &V) -> (V, V) {
        let b_ = &mut self.b;
        let zero = b_.i32c(0);
        let one = b_.i32c(1);
        let is_zero = b_.cmp(CmpOp::Eq, b, &zero);
        let safe = b_.select(&is_zero, &one, b);
        let q = b_.bin("divide", a, &safe);
        let qb = b_.bin("multiply", &q, &safe);
        let r = b_.bin("subtract", a, &qb);
        let r_nz = b_.cmp(CmpOp::Ne, &r, &zero);
        let r_neg = b_.cmp(CmpOp::Lt, &r, &zero);
        let b_neg = b_.cmp(CmpOp::Lt, &safe, &zero);
        let differ = b_.cmp(CmpOp::Ne, &r_neg, &b_neg);
        let adjust = b_.bin("and", &r_nz, &differ);
        let q1 = b_.bin("subtract", &q, &one);
        let q = b_.select(&adjust, &q1, &q);
        let r1 = b_.bin("add", &r, &safe);
        let r = b_.select(&adjust, &r1, &r);
        let q = b_.select(&is_zero, &zero, &q);
        let r = b_.select(&is_zero, &zero, &r);
        (q, r)
    }

    /// `s` clamped to `[0, bound]` (every size given to
    /// `set_dimension_size` passes through here: a size outside the bound
    /// is undefined behaviour in XLA).
    pub(super) fn clamp_size(&mut self, s: &V, bound: i64) -> V {
        let lo = self.b.i32c(0);
        let hi = self.b.i32c(bound);
        let s = self.b.convert(s, Elt::I32);
        self.b.clamp(&lo, &s, &hi)
    }

    /// A guard (`Op::Guard`): records whether each check holds, for the
    /// program's check status ([`Ctx::check_status`]), and gives the
    /// operand the sizes `shape` (a static view cut or padded to the
    /// result's bounds, so the result is well-formed even when a check
    /// fails and the step's results are discarded).
    pub(super) fn guard(
        &mut self,
        x: &V,
        shape: &[SizeExpr],
        checks: &[SizeCheck],
        ty: &Ty,
    ) -> Result<V> {
        for c in checks {
            let (l, r) = (self.size_value(&c.lhs)?, self.size_value(&c.rhs)?);
            let ok = match c.kind {
                CheckKind::Equal => self.b.cmp(CmpOp::Eq, &l, &r),
                CheckKind::NonNegative => {
                    let zero = self.b.i32c(0);
                    self.b.cmp(CmpOp::Ge, &l, &zero)
                }
                CheckKind::MultipleOf => {
                    let rem = self.floor_div_rem(&l, &r).1;
                    let zero = self.b.i32c(0);
                    let pos = self.b.cmp(CmpOp::Gt, &r, &zero);
                    let divides = self.b.cmp(CmpOp::Eq, &rem, &zero);
                    self.b.bin("and", &pos, &divides)
                }
                CheckKind::AtMost => self.b.cmp(CmpOp::Le, &l, &r),
            };
            self.checks.push((ok, l, r));
        }
        let sizes = self.expr_sizes(shape, ty)?;
        if x.ty.dims == ty.dims && x.ty.dynamic == ty.dynamic {
            // The same bounded type: only the dynamic sizes change.
            return Ok(self.redyn(x.clone(), ty, &sizes));
        }
        let mut v = self.padded(x, None);
        for d in 0..ty.rank() {
            let (have, want) = (v.ty.dims[d], ty.dims[d]);
            if have > want {
                let front = self.b.slice(&v, d, 0, want);
                self.keep_backing(&v, &front);
                v = front;
            } else if have < want {
                let zero = self.b.scalar(0.0, v.ty.elt);
                v = self.b.pad(&v, &zero, d, 0, want - have);
            }
        }
        Ok(self.redyn(v, ty, &sizes))
    }

    /// The program's check status: `i32[3]`, the index of the first check
    /// (in node order) that failed, or -1, then the values of its two
    /// sizes. `None` when the program makes no checks.
    pub(super) fn check_status(&mut self) -> Option<V> {
        if self.checks.is_empty() {
            return None;
        }
        let checks = std::mem::take(&mut self.checks);
        let (mut at, mut l, mut r) = (self.b.i32c(-1), self.b.i32c(0), self.b.i32c(0));
        for (k, (ok, cl, cr)) in checks.iter().enumerate().rev() {
            let k = self.b.i32c(k as i64);
            at = self.b.select(ok, &at, &k);
            l = self.b.select(ok, &l, cl);
            r = self.b.select(ok, &r, cr);
        }
        let one = Ty::fixed(Elt::I32, &[1]);
        let parts: Vec<V> = [at, l, r]
            .iter()
            .map(|v| self.b.reshape(v, one.clone()))
            .collect();
        let refs: Vec<&V> = parts.iter().collect();
        Some(self.b.concat(&refs, 0, Ty::fixed(Elt::I32, &[3])))
    }
}
