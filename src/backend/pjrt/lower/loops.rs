//! Lowering a device loop (`Op::While`) to one `stablehlo.while`.
//!
//! The loop's state is all static, following the entry convention: each
//! carry and captured value travels as its static buffer at its bound
//! followed by one i32 size per dynamic dimension, and each program
//! (condition, body) is lowered into its region exactly as a function
//! body on its parameters, sizes re-applied with `set_dimension_size`.
//! The state, in order:
//!
//! - `fori_loop` and `scan`: the i64 counter, then the trip count when it
//!   is an operand; `while_loop`: the condition's value for the current
//!   carries (computed once before the loop, then at the end of each
//!   iteration, so the condition's size checks update the state like the
//!   body's);
//! - each carry (buffer, sizes); each stack: the stacked outputs, then
//!   (a loop that saves them) the saved carries and node values, each
//!   `[bound, ..]` at the trip count's bound, written at the iteration's
//!   row with `dynamic_update_slice`; each scanned value (buffer, sizes),
//!   whose row the body reads with `dynamic_slice`; each captured value
//!   (buffer, sizes);
//! - the loop's outer sizes (i32 scalars), among them a trip count given
//!   as a size;
//! - when the programs make size checks, their status: the first failed
//!   check (its index among the loop's checks, or -1) and its two sizes.
//!   A failed check stops the loop; after it, each of the loop's checks
//!   joins the enclosing program's as "the status is not this one".
//!
//! A body result whose bound is below its carry's is padded to it.

use super::emit::{Elt, Ty, V};
use super::Ctx;
use crate::error::{Error, Result};
use crate::ir::loops::{Carry, Loop, LoopKind, Trip};
use crate::ir::program::Program;
use crate::ir::CmpOp;

/// A failed-check status: the failed check's index (or -1) and its sizes.
type Status = (V, V, V);

/// A lowered check: whether it holds (i1) and its two sizes.
type Check = (V, V, V);

/// Where each part of a loop's state sits.
struct Layout {
    /// The trip count, when it is an operand (the counter, or the
    /// condition's value, is at 0).
    trip: Option<usize>,
    carries: Vec<usize>,
    /// The stacks: stacked outputs, then the saved carries and node values
    /// when the loop saves them.
    stacks: Vec<usize>,
    xs: Vec<usize>,
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

/// The number of stacks of loop `l`.
fn stack_count(l: &Loop) -> usize {
    l.ys.len()
        + match l.saves_carries {
            true => l.carries.len() + l.saved_nodes.len(),
            false => 0,
        }
}

fn layout(l: &Loop, xs: &[Ty], captured: &[Ty]) -> Layout {
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
    let stacks = (0..stack_count(l)).map(|_| place(0)).collect();
    let xs = xs.iter().map(|t| place(dynamic_dims(t))).collect();
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
        xs,
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
    /// outputs (then the values of its nodes `extra`) and its checks
    /// (holds, lhs, rhs).
    fn nested(
        &mut self,
        p: &Program,
        params: Vec<(V, Vec<V>)>,
        outer: &[V],
        extra: &[usize],
    ) -> Result<(Vec<V>, Vec<Check>)> {
        let b = std::mem::replace(&mut self.b, super::emit::Builder::new());
        let mut inner = Ctx::new(b, p);
        inner.matmul_precision = self.matmul_precision;
        inner.enter(params, outer.to_vec());
        let outputs = inner.lower_nodes().and_then(|()| {
            p.outputs
                .iter()
                .chain(extra)
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
        let (out, checks) = self.nested(cond, params, outer, &[])?;
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
        let xs: Vec<(V, Vec<V>)> = ins[l.first_xs()..l.first_capture()]
            .iter()
            .map(|x| self.state_parts(x))
            .collect();
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
        for ty in self.stack_types(l)? {
            state.push(self.b.splat(0.0, &ty));
        }
        for (buf, sizes) in xs.iter().chain(&captured) {
            state.push(buf.clone());
            state.extend(sizes.iter().cloned());
        }
        state.extend(outer.iter().cloned());
        if let Some((at, lhs, rhs)) = &status {
            state.extend([at.clone(), lhs.clone(), rhs.clone()]);
        }
        let tys_of = |vs: &[V]| -> Vec<Ty> { vs.iter().map(|x| x.ty.clone()).collect() };
        let xs_tys = tys_of(&ins[l.first_xs()..l.first_capture()]);
        let captured_tys = tys_of(&ins[l.first_capture()..]);
        let lay = layout(l, &xs_tys, &captured_tys);
        let tys: Vec<Ty> = state.iter().map(|v| v.ty.clone()).collect();
        debug_assert_eq!(tys.len(), lay.len);

        let r = self.b.open_while(&state);
        // The condition region.
        let args = self.b.block(&tys);
        let status_of = |args: &[V]| {
            lay.status
                .map(|s| (args[s].clone(), args[s + 1].clone(), args[s + 2].clone()))
        };
        let go = match &l.kind {
            LoopKind::While => args[0].clone(),
            LoopKind::Fori { trip } => {
                let n = self.trip_value(trip, &args, &lay)?;
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
        let xs: Vec<(V, Vec<V>)> = lay
            .xs
            .iter()
            .zip(&xs_tys)
            .map(|(&at, t)| part(at, t))
            .collect();
        let captured: Vec<(V, Vec<V>)> = lay
            .captures
            .iter()
            .zip(&captured_tys)
            .map(|(&at, t)| part(at, t))
            .collect();
        let outer: Vec<V> = args[lay.outer..lay.outer + l.outer_sizes.len()].to_vec();
        // The row this iteration reads and writes: the counter, or from
        // the end.
        let row = match (&l.kind, l.reverse) {
            (LoopKind::Fori { trip }, true) => {
                let n = self.trip_value(trip, &args, &lay)?;
                let one = self.b.scalar(1.0, Elt::I64);
                let last = self.b.bin("subtract", &n, &one);
                self.b.bin("subtract", &last, &args[0])
            }
            _ => args[0].clone(),
        };
        let row32 = self.b.convert(&row, Elt::I32);
        let zero = self.b.i32c(0);
        let mut params = carries.clone();
        if l.has_counter() {
            params.push((row.clone(), Vec::new()));
        }
        let first_row = l.first_row_param();
        for (j, (buf, _)) in xs.iter().enumerate() {
            let p = &l.body.nodes[l.body.params[first_row + j]];
            let mut one = buf.ty.clone();
            one.dims[0] = 1;
            one.dynamic = smallvec::smallvec![false; one.rank()];
            let mut operands = vec![buf, &row32];
            operands.extend(std::iter::repeat_n(&zero, one.rank() - 1));
            let attrs = format!("slice_sizes = {}", super::emit::arr(&one.dims));
            let dims: Vec<i64> = p.shape.iter().map(|e| e.hi()).collect();
            let row_ty = Ty::fixed(Elt::of(p.dtype), &dims);
            // A value of no rows (a count of 0): the body never runs, and
            // no row can be sliced from it.
            let x = match buf.ty.dims[0] {
                0 => self.b.splat(0.0, &row_ty),
                _ => {
                    let slice = self.b.op("dynamic_slice", &operands, &attrs, one);
                    self.b.reshape(&slice, row_ty)
                }
            };
            params.push((x, Vec::new()));
        }
        params.extend(captured.iter().cloned());
        let (outs, checks) = self.nested(&l.body, params, &outer, &l.saved_nodes)?;
        let new: Vec<(V, Vec<V>)> = outs
            .iter()
            .zip(&l.carries)
            .map(|(x, c)| self.carry_parts(x, c))
            .collect();
        // Rows written into the stacks: the outputs, then the carries this
        // iteration was given and the saved nodes' values.
        let mut rows: Vec<V> = outs[k..].iter().map(|x| self.padded(x, None)).collect();
        if l.saves_carries {
            let saved_nodes = rows.split_off(l.ys.len());
            rows.extend(carries.iter().map(|(buf, _)| buf.clone()));
            rows.extend(saved_nodes);
        }
        let stacks: Vec<V> = lay
            .stacks
            .iter()
            .zip(&rows)
            .map(|(&at, x)| {
                let stack = &args[at];
                if stack.ty.dims[0] == 0 {
                    // No rows to write (a count of 0: never runs).
                    return stack.clone();
                }
                let mut one = stack.ty.clone();
                one.dims[0] = 1;
                let one = self.b.reshape(x, one);
                let mut operands = vec![stack, &one, &row32];
                operands.extend(std::iter::repeat_n(&zero, one.ty.rank() - 1));
                self.b
                    .op("dynamic_update_slice", &operands, "", stack.ty.clone())
            })
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
        for (buf, sizes) in xs.iter().chain(&captured) {
            yielded.push(buf.clone());
            yielded.extend(sizes.iter().cloned());
        }
        yielded.extend(outer.iter().cloned());
        if let Some((at, lhs, rhs)) = status {
            yielded.extend([at, lhs, rhs]);
        }
        self.b.end_block(&yielded);
        let results = self.b.close_while(r, &tys);

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

    /// The trip count of a counted loop as an i64, inside a region whose
    /// arguments are `args`.
    fn trip_value(&mut self, trip: &Trip, args: &[V], lay: &Layout) -> Result<V> {
        Ok(match (trip, lay.trip) {
            (Trip::Static(n), _) => self.b.scalar(*n as f64, Elt::I64),
            (Trip::Operand, Some(t)) => args[t].clone(),
            (Trip::Size(k), _) => self.b.convert(&args[lay.outer + k], Elt::I64),
            (Trip::Operand, None) => return Err(Error::internal("pjrt lowering", "no trip count")),
        })
    }

    /// The static types of loop `l`'s stacks, at the trip count's bound.
    fn stack_types(&mut self, l: &Loop) -> Result<Vec<Ty>> {
        if stack_count(l) == 0 {
            return Ok(Vec::new());
        }
        let n = l
            .stack_len()
            .ok_or_else(|| Error::internal("pjrt lowering", "stacks without a trip count"))?;
        let stacked = |dtype, dims: &mut dyn Iterator<Item = i64>| {
            let mut all = vec![n.hi().max(0)];
            all.extend(dims);
            Ty::fixed(Elt::of(dtype), &all)
        };
        let mut tys: Vec<Ty> =
            l.ys.iter()
                .map(|c| stacked(c.dtype, &mut c.dims.iter().map(|d| d.bound())))
                .collect();
        if l.saves_carries {
            for c in &l.carries {
                tys.push(stacked(c.dtype, &mut c.dims.iter().map(|d| d.bound())));
            }
            for &i in &l.saved_nodes {
                let p = &l.body.nodes[i];
                tys.push(stacked(p.dtype, &mut p.shape.iter().map(|e| e.hi())));
            }
        }
        Ok(tys)
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
        let tys = |from: usize, to: usize| -> Vec<Ty> {
            n.inputs[from..to].iter().map(|&j| self.ty(j)).collect()
        };
        let xs = tys(l.first_xs(), l.first_capture());
        let captured = tys(l.first_capture(), n.inputs.len());
        let lay = layout(l, &xs, &captured);
        let k = l.carries.len();
        if index >= k {
            let at =
                lay.stacks.get(index - k).copied().ok_or_else(|| {
                    Error::internal("pjrt lowering", "a loop result past its stacks")
                })?;
            let mut buf_ty = ty.clone();
            buf_ty.dynamic = smallvec::smallvec![false; ty.rank()];
            let buf = V {
                name: token.name.result(lay.len, at),
                ty: buf_ty,
            };
            // A stack as long as a dynamic trip count.
            let size = match &l.kind {
                LoopKind::Fori {
                    trip: Trip::Size(j),
                } => Some(V {
                    name: token.name.result(lay.len, lay.outer + j),
                    ty: Ty::scalar(Elt::I32),
                }),
                _ => None,
            };
            return Ok(self.redyn(buf, ty, &[size]));
        }
        let c = &l.carries[index];
        let at = lay.carries[index];
        let buf = V {
            name: token.name.result(lay.len, at),
            ty: carry_ty(c),
        };
        let mut sizes = Vec::with_capacity(ty.rank());
        let mut next = at + 1;
        for d in &c.dims {
            sizes.push(d.is_dynamic().then(|| {
                next += 1;
                V {
                    name: token.name.result(lay.len, next - 1),
                    ty: Ty::scalar(Elt::I32),
                }
            }));
        }
        Ok(self.redyn(buf, ty, &sizes))
    }
}
