//! Lowering a device loop (`Op::While`) to one `stablehlo.while`.
//!
//! The loop's state is all static, following the entry convention: each
//! carry and captured value travels as its static buffer at its bound
//! followed by one i32 size per dynamic dimension, and each program
//! (condition, body) is lowered into its region exactly as a function
//! body on its parameters, sizes re-applied with `set_dimension_size`.
//! The state, in order:
//!
//! - `fori_loop`: the i64 counter, then the trip count when it is an
//!   operand; `while_loop`: the condition's value for the current carries
//!   (computed once before the loop, then at the end of each iteration,
//!   so the condition's size checks update the state like the body's);
//! - each carry (buffer, sizes); each captured value (buffer, sizes);
//! - the loop's outer sizes (i32 scalars);
//! - when the programs make size checks, their status: the first failed
//!   check (its index among the loop's checks, or -1) and its two sizes.
//!   A failed check stops the loop; after it, each of the loop's checks
//!   joins the enclosing program's as "the status is not this one".
//!
//! A body result whose bound is below its carry's is padded to it.

use super::emit::{result_name, Elt, Ty, V};
use super::Ctx;
use crate::error::{Error, Result};
use crate::ir::loops::{Carry, Loop, LoopKind};
use crate::ir::program::Program;
use crate::ir::CmpOp;

/// A failed-check status: the failed check's index (or -1) and its sizes.
type Status = (V, V, V);

/// A lowered check: whether it holds (i1) and its two sizes.
type Check = (V, V, V);

/// Where each part of a loop's state sits.
struct Layout {
    /// The counter (fori) or the condition's value (while), at 0.
    trip: Option<usize>,
    carries: Vec<usize>,
    /// The saved carries' stacks, when the loop saves them.
    stacks: Vec<usize>,
    captures: Vec<usize>,
    outer: usize,
    status: Option<usize>,
    len: usize,
}

fn dynamic_dims(t: &Ty) -> usize {
    t.dynamic.iter().filter(|&&d| d).count()
}

/// The static type of carry `c`'s buffer.
fn carry_ty(c: &Carry) -> Ty {
    let dims: Vec<i64> = c.dims.iter().map(|d| d.bound()).collect();
    Ty::fixed(Elt::of(c.dtype), &dims)
}

fn layout(l: &Loop, captured: &[Ty]) -> Layout {
    let mut at = 1;
    let trip = l.trip_operand().then(|| {
        at += 1;
        at - 1
    });
    let mut place = |ndyn: usize| {
        at += 1 + ndyn;
        at - 1 - ndyn
    };
    let carries = l
        .carries
        .iter()
        .map(|c| place(c.dims.iter().filter(|d| d.is_dynamic()).count()))
        .collect();
    let stacks = match l.saves_carries {
        true => l.carries.iter().map(|_| place(0)).collect(),
        false => Vec::new(),
    };
    let captures = captured.iter().map(|t| place(dynamic_dims(t))).collect();
    let outer = at;
    at += l.outer_sizes.len();
    let status = (!l.checks.is_empty()).then(|| {
        at += 3;
        at - 3
    });
    Layout {
        trip,
        carries,
        stacks,
        captures,
        outer,
        status,
        len: at,
    }
}

impl Ctx<'_> {
    /// `x` as its static buffer and the sizes of its dynamic dimensions.
    fn state_parts(&mut self, x: &V) -> (V, Vec<V>) {
        let sizes = (0..x.ty.rank())
            .filter(|&d| x.ty.dynamic[d])
            .map(|d| self.b.get_size(x, d))
            .collect();
        (self.padded(x, None), sizes)
    }

    /// A body result `x` as carry `c`'s buffer (padded to the carry's
    /// bounds) and the sizes of the carry's dynamic dimensions.
    fn carry_parts(&mut self, x: &V, c: &Carry) -> (V, Vec<V>) {
        let sizes = (0..x.ty.rank())
            .filter(|&d| c.dims[d].is_dynamic())
            .map(|d| self.b.get_size(x, d))
            .collect();
        let mut buf = self.padded(x, None);
        let want = carry_ty(c);
        for d in 0..want.rank() {
            if buf.ty.dims[d] < want.dims[d] {
                let zero = self.b.scalar(0.0, buf.ty.elt);
                let more = want.dims[d] - buf.ty.dims[d];
                buf = self.b.pad(&buf, &zero, d, 0, more);
            }
        }
        (buf, sizes)
    }

    /// Lowers program `p` of a loop into the current region on `params`
    /// (static buffers and sizes) and the loop's outer sizes; returns its
    /// outputs and its checks (holds, lhs, rhs).
    fn nested(
        &mut self,
        p: &Program,
        params: Vec<(V, Vec<V>)>,
        outer: &[V],
    ) -> Result<(Vec<V>, Vec<Check>)> {
        let b = std::mem::replace(&mut self.b, super::emit::Builder::new());
        let mut inner = Ctx::new(b, p);
        inner.matmul_precision = self.matmul_precision;
        inner.enter(params, outer.to_vec());
        let outputs = inner.lower_nodes().and_then(|()| {
            p.outputs
                .iter()
                .map(|&o| inner.value(o))
                .collect::<Result<Vec<_>>>()
        });
        let checks = std::mem::take(&mut inner.checks);
        self.b = inner.b;
        Ok((outputs?, checks))
    }

    /// The first of `checks` (numbered from `first`) that fails, as a
    /// status; -1 when none does.
    fn first_failure(&mut self, checks: &[Check], first: usize) -> Status {
        let (mut at, mut l, mut r) = (self.b.i32c(-1), self.b.i32c(0), self.b.i32c(0));
        for (k, (ok, cl, cr)) in checks.iter().enumerate().rev() {
            let k = self.b.i32c((first + k) as i64);
            at = self.b.select(ok, &at, &k);
            l = self.b.select(ok, &l, cl);
            r = self.b.select(ok, &r, cr);
        }
        (at, l, r)
    }

    /// `old` if it already failed, else the first failure among `checks`.
    fn update_status(&mut self, old: Status, checks: &[Check], first: usize) -> Status {
        if checks.is_empty() {
            return old;
        }
        let new = self.first_failure(checks, first);
        let none = self.b.i32c(-1);
        let failed = self.b.cmp(CmpOp::Ne, &old.0, &none);
        (
            self.b.select(&failed, &old.0, &new.0),
            self.b.select(&failed, &old.1, &new.1),
            self.b.select(&failed, &old.2, &new.2),
        )
    }

    /// True while `status` records no failure.
    fn status_ok(&mut self, status: &Status) -> V {
        let none = self.b.i32c(-1);
        self.b.cmp(CmpOp::Eq, &status.0, &none)
    }

    /// The condition of a `while_loop` on `carries` (as body results
    /// or initial values), with the status after its checks.
    fn condition(
        &mut self,
        l: &Loop,
        carries: &[(V, Vec<V>)],
        captured: &[(V, Vec<V>)],
        outer: &[V],
        status: Option<Status>,
    ) -> Result<(V, Option<Status>)> {
        let cond = l
            .cond
            .as_ref()
            .ok_or_else(|| Error::internal("pjrt lowering", "a while loop without a condition"))?;
        let params = carries.iter().chain(captured).cloned().collect();
        let (out, checks) = self.nested(cond, params, outer)?;
        let mut go = out[0].clone();
        let status = status.map(|s| self.update_status(s, &checks, 0));
        if let Some(s) = &status {
            let ok = self.status_ok(s);
            go = self.b.bin("and", &go, &ok);
        }
        Ok((go, status))
    }

    /// A loop node on its operands `ins`; its value is a token naming the
    /// `stablehlo.while` whose results `loop_result` reads.
    pub(super) fn while_loop(&mut self, l: &Loop, ins: &[V]) -> Result<V> {
        let k = l.carries.len();
        let carries: Vec<(V, Vec<V>)> = ins[..k].iter().map(|x| self.state_parts(x)).collect();
        let captured: Vec<(V, Vec<V>)> = ins[l.first_capture()..]
            .iter()
            .map(|x| self.state_parts(x))
            .collect();
        let outer = l
            .outer_sizes
            .iter()
            .map(|e| self.size_value(e))
            .collect::<Result<Vec<_>>>()?;
        let status = match l.checks.is_empty() {
            true => None,
            false => Some((self.b.i32c(-1), self.b.i32c(0), self.b.i32c(0))),
        };
        let (first, status) = match l.kind {
            LoopKind::Fori { .. } => (self.b.scalar(0.0, Elt::I64), status),
            LoopKind::While => self.condition(l, &carries, &captured, &outer, status)?,
        };
        let mut state = vec![first];
        if l.trip_operand() {
            state.push(ins[k].clone());
        }
        for (buf, sizes) in &carries {
            state.push(buf.clone());
            state.extend(sizes.iter().cloned());
        }
        if let Some(n) = l.saved_trip() {
            for c in &l.carries {
                let mut ty = carry_ty(c);
                ty.dims.insert(0, n);
                ty.dynamic.insert(0, false);
                state.push(self.b.splat(0.0, &ty));
            }
        }
        for (buf, sizes) in &captured {
            state.push(buf.clone());
            state.extend(sizes.iter().cloned());
        }
        state.extend(outer.iter().cloned());
        if let Some((at, lhs, rhs)) = &status {
            state.extend([at.clone(), lhs.clone(), rhs.clone()]);
        }
        let captured_tys: Vec<Ty> = ins[l.first_capture()..]
            .iter()
            .map(|x| x.ty.clone())
            .collect();
        let lay = layout(l, &captured_tys);
        let tys: Vec<Ty> = state.iter().map(|v| v.ty.clone()).collect();
        debug_assert_eq!(tys.len(), lay.len);

        let r = self.b.open_while(&state);
        // The condition region.
        let args = self.b.block(&tys);
        let status_of = |args: &[V]| {
            lay.status
                .map(|s| (args[s].clone(), args[s + 1].clone(), args[s + 2].clone()))
        };
        let go = match l.kind {
            LoopKind::While => args[0].clone(),
            LoopKind::Fori { trip } => {
                let n = match (trip, lay.trip) {
                    (Some(n), _) => self.b.scalar(n as f64, Elt::I64),
                    (None, Some(t)) => args[t].clone(),
                    (None, None) => return Err(Error::internal("pjrt lowering", "no trip count")),
                };
                let mut go = self.b.cmp(CmpOp::Lt, &args[0], &n);
                if let Some(s) = status_of(&args) {
                    let ok = self.status_ok(&s);
                    go = self.b.bin("and", &go, &ok);
                }
                go
            }
        };
        self.b.end_block(&[go]);
        self.b.next_region();

        // The body region.
        let args = self.b.block(&tys);
        let part = |at: usize, t: &Ty| -> (V, Vec<V>) {
            let n = dynamic_dims(t);
            (args[at].clone(), args[at + 1..at + 1 + n].to_vec())
        };
        let carries: Vec<(V, Vec<V>)> = l
            .carries
            .iter()
            .zip(&lay.carries)
            .map(|(c, &at)| {
                let n = c.dims.iter().filter(|d| d.is_dynamic()).count();
                (args[at].clone(), args[at + 1..at + 1 + n].to_vec())
            })
            .collect();
        let captured: Vec<(V, Vec<V>)> = lay
            .captures
            .iter()
            .zip(&captured_tys)
            .map(|(&at, t)| part(at, t))
            .collect();
        let outer: Vec<V> = args[lay.outer..lay.outer + l.outer_sizes.len()].to_vec();
        // Row `i` of each stack: the carries this iteration is given.
        let stacks: Vec<V> = lay
            .stacks
            .iter()
            .zip(&carries)
            .map(|(&at, (buf, _))| {
                let stack = &args[at];
                let mut row = stack.ty.clone();
                row.dims[0] = 1;
                let row = self.b.reshape(buf, row);
                let i = self.b.convert(&args[0], Elt::I32);
                let zero = self.b.i32c(0);
                let mut operands = vec![stack, &row, &i];
                operands.extend(std::iter::repeat_n(&zero, row.ty.rank() - 1));
                self.b
                    .op("dynamic_update_slice", &operands, "", stack.ty.clone())
            })
            .collect();
        let mut params = carries;
        if l.has_counter() {
            params.push((args[0].clone(), Vec::new()));
        }
        params.extend(captured.iter().cloned());
        let (outs, checks) = self.nested(&l.body, params, &outer)?;
        let new: Vec<(V, Vec<V>)> = outs
            .iter()
            .zip(&l.carries)
            .map(|(x, c)| self.carry_parts(x, c))
            .collect();
        let first_body_check = l.cond.as_ref().map_or(0, |c| c.checks().len());
        let mut status = status_of(&args).map(|s| self.update_status(s, &checks, first_body_check));
        let head = match l.kind {
            LoopKind::While => {
                let (go, s) = self.condition(l, &new, &captured, &outer, status)?;
                status = s;
                go
            }
            LoopKind::Fori { .. } => {
                let one = self.b.scalar(1.0, Elt::I64);
                self.b.bin("add", &args[0], &one)
            }
        };
        let mut yielded = vec![head];
        if let Some(t) = lay.trip {
            yielded.push(args[t].clone());
        }
        for (buf, sizes) in &new {
            yielded.push(buf.clone());
            yielded.extend(sizes.iter().cloned());
        }
        yielded.extend(stacks);
        for (buf, sizes) in &captured {
            yielded.push(buf.clone());
            yielded.extend(sizes.iter().cloned());
        }
        yielded.extend(outer.iter().cloned());
        if let Some((at, lhs, rhs)) = status {
            yielded.extend([at, lhs, rhs]);
        }
        self.b.end_block(&yielded);
        let results = self.b.close_while(&r, &tys);

        if let Some(s) = lay.status {
            let (at, lhs, rhs) = (&results[s], &results[s + 1], &results[s + 2]);
            for j in 0..l.checks.len() {
                let jv = self.b.i32c(j as i64);
                let ok = self.b.cmp(CmpOp::Ne, at, &jv);
                self.checks.push((ok, lhs.clone(), rhs.clone()));
            }
        }
        Ok(V {
            name: r,
            ty: Ty::scalar(Elt::I1),
        })
    }

    /// Result `index` of the loop node `node` (lowered to `token`), given
    /// the dynamic sizes of its type `ty`.
    pub(super) fn loop_result(
        &mut self,
        node: usize,
        token: &V,
        index: usize,
        ty: &Ty,
    ) -> Result<V> {
        let program = self.program;
        let n = &program.nodes[node];
        let crate::ir::Op::While(l) = &n.op else {
            return Err(Error::internal(
                "pjrt lowering",
                "a loop result of a non-loop node",
            ));
        };
        let captured: Vec<Ty> = n.inputs[l.first_capture()..]
            .iter()
            .map(|&j| self.ty(j))
            .collect();
        let lay = layout(l, &captured);
        let k = l.carries.len();
        if index >= k {
            let at = lay.stacks.get(index - k).copied().ok_or_else(|| {
                Error::internal("pjrt lowering", "a saved carry of a loop that saves none")
            })?;
            return Ok(V {
                name: result_name(&token.name, lay.len, at).into(),
                ty: ty.clone(),
            });
        }
        let c = &l.carries[index];
        let at = lay.carries[index];
        let buf = V {
            name: result_name(&token.name, lay.len, at).into(),
            ty: carry_ty(c),
        };
        let mut sizes = Vec::with_capacity(ty.rank());
        let mut next = at + 1;
        for d in &c.dims {
            sizes.push(d.is_dynamic().then(|| {
                next += 1;
                V {
                    name: result_name(&token.name, lay.len, next - 1).into(),
                    ty: Ty::scalar(Elt::I32),
                }
            }));
        }
        Ok(self.redyn(buf, ty, &sizes))
    }
}
