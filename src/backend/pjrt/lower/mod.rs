//! Lowering a canonical [`Program`] to StableHLO text (format `"mlir"`).
//!
//! # Entry convention
//!
//! Parameters, in order: for each `Program.params` entry, its data as a
//! STATIC tensor of the bound shape, immediately followed by one
//! `tensor<i32>` per dynamic dimension (in dimension order) holding its real
//! size; then one `tensor<i32>` per `VarSource::Arg` variable, in `k`
//! order. Inside, each size is clamped to `[0, bound]` and applied with
//! `set_dimension_size` (a bounded entry parameter does not compile on
//! CPU, and a size outside the bound is undefined behaviour).
//!
//! Results, in order: for each `Program.outputs` entry, its value made
//! static at its bound (`set_dimension_size` to the bound constant),
//! followed by one `tensor<i32>` per dynamic dimension from
//! `get_dimension_size`; then the `Program.size_outputs` values; then,
//! when the program's guards make size checks, their status (`i32[3]`:
//! the first failed check or -1, and its two sizes), which the backend
//! reads and removes. So every result buffer can be passed to the next
//! program as a parameter as is.
//!
//! # Padding
//!
//! A value with dynamic dimensions carries a bounded type; its padding is
//! unspecified. Elementwise ops run on bounded types directly (padding in,
//! padding out). Every other op works on a static view (`padded`) and
//! gives its result its real sizes with `redyn`. Where an op reads the
//! padding, an explicit fill before it (`Op::FillPadding`, `fill.rs`)
//! has set it to a value that cannot change the result: the identity of
//! a reduction, 0 on a contracted dimension, a never-winning value for
//! argmax, false in a mask. The passes `ir::passes::operand_fills` and
//! `shared_fill` put them there. So correctness never depends on which
//! ops XLA's dynamic padder knows.
//!
//! How each op keeps padding out: argmax/argmin reduce (value, index)
//! pairs ordered by (is NaN, value, lower index), so the first NaN wins
//! and padding, at higher indices, loses even a tie; both operands of a
//! dot are zero along its contracted dims (the other's unspecified
//! padding may be infinite, and `0 * inf` is NaN), except a checked
//! product (`guarded`); an
//! `index_select` or `index_add` whose index is a count (`arange`, as the
//! dynamic `Embedding` keeps its real rows) is a slice or a zero-padded
//! add, with no gather or scatter; scatters point padded indices out of
//! range, where XLA drops them; a window reduction pads with its identity;
//! a sort keys padding to sort last with a flag operand, and top-k (XLA's
//! TopK on a key ordered as the stable sort) gives padding a key below
//! every real one. Broadcast and iota are static ops at the bound. A
//! reshape is a reshape of the padded buffer when every dynamic dim keeps
//! its size after as many elements in both shapes (`[16, s, 64] -> [16, s,
//! 4, 16]`) or is major in both; else a gather by each position's rank
//! among the real elements, moving whole rows of the static trailing dims
//! both shapes share. Concat along a dynamic dim writes each part at the
//! running real offset. The data-dependent ops are built on a prefix sum
//! of the mask, which gives each kept element its destination for one
//! scatter, on the device (`dynamic`).
//!
//! A dim whose size is a zone's variable lowered as a mask (`masked`) is
//! static instead, its real elements where the zone's mask holds; the
//! fills read that mask as they read a dynamic dim's size.
//!
//! The lowering runs the passes of `ir::passes::LOWERING` first (shared
//! fills, the forms of products, checked products, masked zones, the
//! fills each op reads: decisions made as IR rewrites, which
//! `debug::lowered_ir_text` prints), then is ONE exhaustive `match` over
//! [`Op`] ([`Ctx::node`]).

mod backing;
mod collective;
mod conv;
mod dynamic;
mod emit;
mod fill;
mod guarded;
mod index;
mod loops;
mod masked;
mod math;
mod name;
mod padding;
mod reduce;
mod shape;
mod sizes;
mod sort;
mod types;
mod window;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ir::passes::zone_masks::same_padded_layout;
use crate::ir::program::{by_index, Program, VarSource};
use crate::ir::CmpOp;
use crate::ir::Op;
use crate::symint::SizeExpr;
pub(crate) use collective::collective_replicas;
use emit::{Builder, Elt, Name, Ty, V};
use std::collections::HashMap;

/// A lowered program and the layout of its results.
pub(crate) struct Lowered {
    /// The StableHLO module text.
    pub text: String,
    /// For each program output: its number of dynamic dimensions (each
    /// followed in the results by that many size scalars).
    pub output_dynamic: Vec<usize>,
    /// The number of `VarSource::Arg` parameters.
    pub num_var_args: usize,
    /// True when the program makes size checks: its last result is then
    /// their status (see `Ctx::check_status`).
    pub checked: bool,
    /// The program after the lowering passes (`ir::passes`), when they
    /// rewrote it: what the emitter translated, which a dump shows.
    pub passed: Option<Program>,
}

/// Lowering state for one program.
pub(super) struct Ctx<'p> {
    pub(super) b: Builder,
    pub(super) program: &'p Program,
    /// The value of each node lowered so far.
    pub(super) values: Vec<Option<V>>,
    /// The value of each `Data` node (set up from the entry parameters).
    params: HashMap<usize, V>,
    /// Position in `program.vars` by variable id.
    pub(super) var_pos: HashMap<u64, usize>,
    /// Emitted variable values by position in `program.vars`.
    pub(super) var_vals: HashMap<usize, V>,
    /// The `VarSource::Arg` parameters.
    pub(super) var_args: Vec<V>,
    /// Each check of the program's guards, in node order: whether it
    /// holds (i1) and its two sizes (see [`Ctx::check_status`]).
    pub(super) checks: Vec<(V, V, V)>,
    /// What is known of each value's padding, by SSA name (`padding`).
    pads: HashMap<Name, padding::Padding>,
    /// The static buffer at whose front each value's elements sit, by
    /// SSA name, where known (`backing`).
    backing: HashMap<Name, V>,
    /// Their masks and counts, once defined.
    masks: HashMap<u64, masked::MaskVar>,
    /// The precision of `f32` products: the program's, also in its loops'
    /// bodies (traced without one).
    pub(super) matmul_precision: crate::ir::program::MatmulPrecision,
}

/// The MLIR type of a node: a dimension is dynamic exactly when its size
/// expression is not a constant; its bound is the expression's upper bound.
pub(super) fn node_ty(dtype: DType, shape: &[SizeExpr]) -> Ty {
    Ty {
        elt: Elt::of(dtype),
        dims: shape
            .iter()
            .map(|e| e.as_const().unwrap_or_else(|| e.hi()).max(0))
            .collect(),
        dynamic: shape.iter().map(|e| e.as_const().is_none()).collect(),
    }
}

/// Lowers `program`.
pub(crate) fn lower(program: &Program) -> Result<Lowered> {
    lower_with(program, false)
}

/// The `mhlo.sharding` attribute of a whole value in an SPMD program.
const REPLICATED: &str = " {mhlo.sharding = \"{replicated}\"}";

/// Lowers `program` for one device, or with `spmd` for XLA's SPMD
/// partitioner: every argument carries its `mhlo.sharding`
/// (`Program::param_shardings`, else replicated), sizes and the check
/// status are replicated, a result written into a donated parameter's
/// buffer has that parameter's sharding (aliased buffers are split
/// alike), and the other results' shardings are left to XLA.
pub(crate) fn lower_with(program: &Program, spmd: bool) -> Result<Lowered> {
    // The decisions made as IR rewrites, its loops' programs included.
    let passed = crate::ir::passes::lowering(program);
    let program: &Program = &passed;
    let mut ctx = Ctx::new(Builder::new(), program);
    let mut sig: Vec<String> = Vec::new();
    // An argument of type `ty`, its entry (`%argK: type`) added to `sig`
    // with `attrs` (the SPMD ones if none are given).
    let arg = |ty: &Ty, attrs: &[String], sig: &mut Vec<String>| -> V {
        let v = V {
            name: Name::arg(sig.len()),
            ty: ty.clone(),
        };
        let mut entry = String::with_capacity(48);
        v.name.push_to(&mut entry);
        entry.push_str(": ");
        ty.push_to(&mut entry);
        match attrs {
            [] if spmd => entry.push_str(REPLICATED),
            [] => {}
            attrs => {
                entry.push_str(" {");
                entry.push_str(&attrs.join(", "));
                entry.push('}');
            }
        }
        sig.push(entry);
        v
    };
    let i32t = Ty::scalar(Elt::I32);
    // Per parameter: its buffer's dims, its sharding and the result
    // written into its buffer; per output, its buffer's dims (looked up
    // once each: a training step has as many aliases as parameters).
    let buffers = by_index(program.params.len(), &program.param_buffers);
    let output_buffers = by_index(program.outputs.len(), &program.output_buffers);
    let aliased = aliased_results(program, &buffers, &output_buffers)?;
    let shardings = by_index(program.params.len(), &program.param_shardings);
    let alias_of = by_index(program.params.len(), &aliased);
    let mut params = Vec::new();
    for (k, &p) in program.params.iter().enumerate() {
        let n = &program.nodes[p];
        let ty = node_ty(n.dtype, &n.shape);
        let buffer = match buffers[k] {
            Some((_, dims)) => Ty {
                dims: dims.iter().map(|&d| d as i64).collect(),
                ..ty.bound()
            },
            None => ty.bound(),
        };
        let mut attrs = Vec::new();
        match shardings[k] {
            Some((_, s)) => attrs.push(format!("mhlo.sharding = \"{}\"", s.hlo())),
            None if spmd => attrs.push("mhlo.sharding = \"{replicated}\"".to_string()),
            None => {}
        }
        if let Some(&(_, result)) = alias_of[k] {
            // XLA writes the result into this parameter's buffer when the
            // caller donates it (JAX's `donate_argnums` says the same).
            attrs.push(format!("tf.aliasing_output = {result} : i32"));
        }
        let mut data = arg(&buffer, &attrs, &mut sig);
        // A bucketed buffer is longer than the bound: read its first
        // `bound` elements along each such dim.
        for d in 0..ty.rank() {
            if data.ty.dims[d] > ty.dims[d] {
                let read = ctx.b.slice(&data, d, 0, ty.dims[d]);
                ctx.keep_backing(&data, &read);
                data = read;
            }
        }
        let sizes: Vec<V> = (0..ty.rank())
            .filter(|&d| ty.dynamic[d])
            .map(|_| arg(&i32t, &[], &mut sig))
            .collect();
        params.push((data, sizes));
    }
    let num_var_args = program
        .vars
        .iter()
        .filter_map(|v| match v.source {
            VarSource::Arg(k) => Some(k + 1),
            VarSource::Dim { .. } => None,
        })
        .max()
        .unwrap_or(0);
    let var_args = (0..num_var_args)
        .map(|_| arg(&i32t, &[], &mut sig))
        .collect();
    ctx.enter(params, var_args);
    ctx.lower_nodes()?;

    let mut results: Vec<V> = Vec::new();
    let mut output_dynamic = Vec::new();
    for (k, &o) in program.outputs.iter().enumerate() {
        let v = ctx.value(o)?;
        let dyn_dims: Vec<usize> = (0..v.ty.rank()).filter(|&d| v.ty.dynamic[d]).collect();
        let sizes: Vec<V> = dyn_dims.iter().map(|&d| ctx.b.get_size(&v, d)).collect();
        let mut s = v.clone();
        for &d in &dyn_dims {
            let bound = ctx.b.i32c(v.ty.dims[d]);
            s = ctx.b.set_size(&s, d, &bound, false);
        }
        if let Some((_, dims)) = output_buffers[k] {
            // A bucketed result: its bucket's buffer is longer than the
            // bound (the padding is never read).
            if let Some(w) = ctx.result_from_backing(&v, &s, dims) {
                s = w;
            }
            for (d, &want) in dims.iter().enumerate() {
                let have = s.ty.dims[d];
                if (want as i64) > have {
                    let zero = ctx.b.scalar(0.0, s.ty.elt);
                    s = ctx.b.pad(&s, &zero, d, 0, want as i64 - have);
                }
            }
        }
        results.push(s);
        results.extend(sizes);
        output_dynamic.push(dyn_dims.len());
    }
    for &k in &program.size_outputs {
        let var = program.vars[k].var.clone();
        let v = ctx.var_value(&var)?;
        results.push(v);
    }
    let checked = match ctx.check_status() {
        Some(status) => {
            results.push(status);
            true
        }
        None => false,
    };

    // In an SPMD program the scalars after each result (its sizes, the
    // size outputs, the status) are whole on every device, and a result
    // written into a donated parameter's buffer is split as that
    // parameter; the other results' shardings are XLA's to choose.
    let mut result_shardings: Vec<Option<String>> = Vec::new();
    if spmd {
        result_shardings = vec![Some(REPLICATED.to_string()); results.len()];
        let mut at = 0;
        for d in &output_dynamic {
            result_shardings[at] = None;
            at += 1 + d;
        }
        for &(k, position) in &aliased {
            result_shardings[position] = Some(match shardings[k] {
                Some((_, s)) => format!(" {{mhlo.sharding = \"{}\"}}", s.hlo()),
                None => REPLICATED.to_string(),
            });
        }
    }
    let body = &ctx.b.text;
    let mut text = String::with_capacity(body.len() + 48 * (sig.len() + 2 * results.len()) + 64);
    text.push_str("func.func @main(");
    text.push_str(&sig.join(", "));
    text.push_str(") -> (");
    for (k, v) in results.iter().enumerate() {
        if k > 0 {
            text.push_str(", ");
        }
        v.ty.push_to(&mut text);
        if let Some(Some(sharding)) = result_shardings.get(k) {
            text.push_str(sharding);
        }
    }
    text.push_str(") {\n");
    text.push_str(body);
    text.push_str("  \"func.return\"(");
    emit::push_names(&mut text, &results);
    text.push_str(") : (");
    emit::push_types(&mut text, results.iter().map(|v| &v.ty));
    text.push_str(") -> ()\n}\n");
    Ok(Lowered {
        text,
        output_dynamic,
        num_var_args,
        checked,
        passed: match passed {
            std::borrow::Cow::Owned(p) => Some(p),
            std::borrow::Cow::Borrowed(_) => None,
        },
    })
}

/// Each donated parameter (`Program::aliases`) with the position of its
/// result among the function's results (a result is followed by one size
/// per dynamic dimension). Both must have one type and buffer shape.
/// `param_buffers` and `output_buffers` are the program's, by index
/// ([`by_index`]).
fn aliased_results(
    program: &Program,
    param_buffers: &[Option<&(usize, Vec<usize>)>],
    output_buffers: &[Option<&(usize, Vec<usize>)>],
) -> Result<Vec<(usize, usize)>> {
    let mut out = Vec::with_capacity(program.aliases.len());
    // Where each output's value sits among the executable's outputs.
    let positions: Vec<usize> = program
        .outputs
        .iter()
        .scan(0, |at, &q| {
            let here = *at;
            *at += crate::backend::ExecOutputs::of_result(&program.nodes[q].shape);
            Some(here)
        })
        .collect();
    for &(k, o) in &program.aliases {
        let (Some(&p), Some(&r)) = (program.params.get(k), program.outputs.get(o)) else {
            return Err(Error::internal("pjrt lowering", "an alias out of range"));
        };
        let (pn, rn) = (&program.nodes[p], &program.nodes[r]);
        // The buffers must match: a dynamic value's is its bound, or its
        // bucket's buffer (an appended cache and the cache it extends).
        let buffer =
            |n: &crate::ir::program::PNode, given: Option<&(usize, Vec<usize>)>| match given {
                Some((_, dims)) => dims.clone(),
                None => n.shape.iter().map(|e| e.hi().max(0) as usize).collect(),
            };
        if pn.dtype != rn.dtype || buffer(pn, param_buffers[k]) != buffer(rn, output_buffers[o]) {
            return Err(Error::internal(
                "pjrt lowering",
                "a donated parameter and its result differ in type or buffer shape",
            ));
        }
        out.push((k, positions[o]));
    }
    Ok(out)
}

impl<'p> Ctx<'p> {
    /// A context lowering `program` into `b` (a function's body, or a
    /// loop's region: see `loops`).
    pub(super) fn new(b: Builder, program: &'p Program) -> Ctx<'p> {
        Ctx {
            b,
            program,
            values: vec![None; program.nodes.len()],
            params: HashMap::new(),
            var_pos: program.var_positions(),
            var_vals: HashMap::new(),
            var_args: Vec::new(),
            checks: Vec::new(),
            pads: HashMap::new(),
            backing: HashMap::new(),
            masks: HashMap::new(),
            matmul_precision: program.matmul_precision,
        }
    }

    /// Binds the parameters, each given as a static buffer at its bound
    /// and one i32 size per dynamic dimension (the entry convention; each
    /// size is clamped to its bound), and the `VarSource::Arg` sizes.
    pub(super) fn enter(&mut self, params: Vec<(V, Vec<V>)>, var_args: Vec<V>) {
        self.var_args = var_args;
        for (&p, (data, sizes)) in self.program.params.iter().zip(params) {
            let n = &self.program.nodes[p];
            let ty = node_ty(n.dtype, &n.shape);
            let mut sizes = sizes.into_iter();
            let mut v = data;
            for d in 0..ty.rank() {
                if ty.dynamic[d] {
                    let s = sizes.next().expect("one size per dynamic dim");
                    let s = self.clamp_size(&s, ty.dims[d]);
                    let sized = self.b.set_size(&v, d, &s, true);
                    self.keep_backing(&v, &sized);
                    v = sized;
                }
            }
            self.params.insert(p, v);
        }
    }

    /// Lowers every node, in order.
    pub(super) fn lower_nodes(&mut self) -> Result<()> {
        for i in 0..self.program.nodes.len() {
            let v = self.node(i)?;
            self.note_extents(i, &v);
            self.values[i] = Some(v);
        }
        Ok(())
    }
}

impl Ctx<'_> {
    pub(super) fn value(&self, i: usize) -> Result<V> {
        self.values[i].clone().ok_or_else(|| {
            Error::internal("pjrt lowering", format!("node {i} used before defined"))
        })
    }

    /// The type of node `i`: a masked dim is static (`masked`).
    pub(super) fn ty(&self, i: usize) -> Ty {
        let n = &self.program.nodes[i];
        let mut ty = node_ty(n.dtype, &n.shape);
        for d in 0..ty.rank() {
            if ty.dynamic[d] && self.masked_dim(i, d).is_some() {
                ty.dynamic[d] = false;
            }
        }
        ty
    }

    /// `f` on the operands, half ones widened to f32, its result rounded
    /// back when the node's type `ty` is a half: so half matrix products,
    /// convolutions and reductions accumulate in f32 (as PyTorch's kernels
    /// do) and round once, as the reference backend does. Other types pass
    /// through.
    fn in_f32(&mut self, ins: &[V], ty: &Ty, f: impl FnOnce(&mut Self, &[V], &Ty) -> V) -> V {
        if !ty.elt.is_half() {
            return f(self, ins, ty);
        }
        let wide: Vec<V> = ins
            .iter()
            .map(|x| {
                if x.ty.elt.is_half() {
                    let w = self.b.convert(x, Elt::F32);
                    self.same_padding(x, &w);
                    w
                } else {
                    x.clone()
                }
            })
            .collect();
        let out = f(self, &wide, &ty.with_elt(Elt::F32));
        self.b.convert(&out, ty.elt)
    }

    /// Lowers node `i`: the one exhaustive match over [`Op`].
    fn node(&mut self, i: usize) -> Result<V> {
        let node = &self.program.nodes[i];
        let ins: Vec<V> = node
            .inputs
            .iter()
            .map(|&j| self.value(j))
            .collect::<Result<_>>()?;
        let ty = self.ty(i);
        if empty_value(&node.op, &ty) {
            // XLA's compiler has thrown a C++ exception (which aborts the
            // process) on a program that sliced an empty range out of a
            // concatenate with an empty operand, and rejects collectives of
            // empty operands; an empty value needs no op.
            return Ok(self.b.splat(0.0, &ty));
        }
        Ok(match &node.op {
            Op::Data { .. } => self
                .params
                .remove(&i)
                .ok_or_else(|| Error::internal("pjrt lowering", "a data node is no parameter"))?,
            Op::Scalar { value, dtype } => self.b.scalar(value.0, Elt::of(*dtype)),
            Op::Iota { shape, dim, .. } => {
                // An i1 iota is not allowed; count in i64 and convert.
                let count = if ty.elt == Elt::I1 { Elt::I64 } else { ty.elt };
                let it = self.b.iota(&ty.with_elt(count), *dim);
                let it = self.b.convert(&it, ty.elt);
                let sizes = self.expr_sizes(shape, &ty)?;
                self.redyn(it, &ty, &sizes)
            }
            Op::SizeOf(e) => {
                let s = self.size_value(e)?;
                self.b.convert(&s, Elt::I64)
            }
            Op::RandomUniform { .. } => self.random_uniform(&ins[0], &ty),
            Op::Unary(u) => self.unary(*u, &ins[0]),
            Op::Binary(op) => self.binary(*op, &ins[0], &ins[1]),
            Op::Compare(c) => self.compare(*c, &ins[0], &ins[1]),
            Op::Select => self.b.select(&ins[0], &ins[1], &ins[2]),
            Op::Convert(d) => self.convert(&ins[0], Elt::of(*d)),
            Op::Broadcast { shape, dims } => {
                let x = self.padded(&ins[0], None);
                let d: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
                let out = self.b.broadcast_in_dim(&x, &d, ty.bound());
                let sizes = self.expr_sizes(shape, &ty)?;
                self.redyn(out, &ty, &sizes)
            }
            Op::Reshape { shape } => {
                let from = &self.program.nodes[node.inputs[0]].shape;
                let (xt, tt) = (&ins[0].ty, &ty);
                if same_padded_layout(
                    from,
                    (&xt.dims, &xt.dynamic),
                    shape,
                    (&tt.dims, &tt.dynamic),
                ) {
                    // The padding stays in its dims: a reshape of the
                    // padded buffer.
                    let xs = self.padded(&ins[0], None);
                    let out = self.b.reshape(&xs, ty.bound());
                    let sizes = self.expr_sizes(shape, &ty)?;
                    self.redyn(out, &ty, &sizes)
                } else {
                    self.reshape(&ins[0], shape, &ty)?
                }
            }
            Op::Transpose { perm } => {
                let sizes = self.sizes_of(&ins[0]);
                let x = self.padded(&ins[0], None);
                let out = self.b.transpose(&x, perm);
                let sizes: Vec<Option<V>> = perm.iter().map(|&p| sizes[p].clone()).collect();
                self.redyn(out, &ty, &sizes)
            }
            Op::Slice { dim, start, .. } => self.slice(&ins[0], *dim, *start, &ty),
            Op::Concat { dim } => self.concat(&ins, *dim, &ty),
            Op::Reverse { dims } => self.reverse(&ins[0], dims, &ty),
            Op::PadToBound { fill } => self.padded(&ins[0], Some(fill.0)),
            Op::FillPadding { dims, fill, shared } => {
                self.fill_padding(ins[0].clone(), dims, *fill, *shared)
            }
            Op::Guard { shape, checks } => self.guard(&ins[0], shape, checks, &ty)?,
            Op::Reduce { kind, dims } => {
                self.in_f32(&ins, &ty, |c, ins, ty| c.reduce(*kind, &ins[0], dims, ty))
            }
            Op::ArgReduce { kind, dim } => self.arg_reduce(*kind, &ins[0], *dim, &ty),
            Op::ReduceWindow { kind, window } => self.reduce_window(*kind, &ins[0], window, &ty),
            Op::SelectAndScatter { kind, window } => {
                self.select_and_scatter(*kind, &ins[0], &ins[1], window, &ty)
            }
            Op::Dot(dot) => {
                let precision = self.product_precision(ty.elt);
                self.in_f32(&ins, &ty, |c, ins, ty| {
                    c.dot(&ins[0], &ins[1], dot, ty, precision)
                })
            }
            Op::Convolution(cv) => self.in_f32(&ins, &ty, |c, ins, ty| {
                c.convolution(&ins[0], &ins[1], cv, ty)
            }),
            Op::IndexSelect { dim } => {
                if self.counting(node.inputs[1]) {
                    self.prefix_select(&ins[0], &ins[1], *dim, &ty)
                } else {
                    self.index_select(&ins[0], &ins[1], *dim, &ty)
                }
            }
            Op::Gather { dim } => self.gather(&ins[0], &ins[1], *dim, &ty),
            Op::IndexAdd { dim } => {
                if self.counting(node.inputs[1]) {
                    self.prefix_add(&ins[0], &ins[1], &ins[2], *dim, &ty)
                } else {
                    self.index_add(&ins[0], &ins[1], &ins[2], *dim, &ty)
                }
            }
            Op::Scatter { dim, mode } => self.scatter(&ins[0], &ins[1], &ins[2], *dim, *mode, &ty),
            Op::Argsort {
                dim,
                descending,
                first: None,
            } => self.argsort(&ins[0], *dim, *descending, &ty),
            Op::Argsort {
                dim,
                descending,
                first: Some(k),
            } => self.top_k(&ins[0], *dim, *descending, *k, &ty),
            Op::MaskedScatter => match self.masked_dim(node.inputs[2], 0) {
                Some(_) => self.masked_scatter_masked(&ins[0], &ins[1], &ins[2], &ty),
                None => self.masked_scatter(&ins[0], &ins[1], &ins[2], &ty),
            },
            Op::Nonzero => match self.masked_dim(i, 0) {
                Some(v) => self.masked_nonzero(v, &ins[0], &ty),
                None => self.nonzero(&ins[0], &ty),
            },
            Op::MaskedSelect => match self.masked_dim(i, 0) {
                Some(v) => self.masked_select_masked(v, &ins[0], &ins[1], &ty),
                None => self.masked_select(&ins[0], &ins[1], &ty),
            },
            Op::Unique => self.unique(&ins[0], &ty),
            Op::UniqueCounts => self.unique_counts(&ins[0], &ins[1], &ty),
            Op::AllReduce { kind, replicas } => self.all_reduce(*kind, &ins[0], *replicas, &ty),
            Op::AllGather { dim, replicas } => self.all_gather(&ins[0], *dim, *replicas, &ty),
            Op::ReduceScatter { dim, replicas } => {
                self.reduce_scatter(&ins[0], *dim, *replicas, &ty)
            }
            Op::ReplicaId => self.replica_id(),
            Op::Sharding(s) => self.sharding_constraint(&ins[0], s),
            Op::While(l) => self.while_loop(l, &ins)?,
            Op::LoopResult { index } => self.loop_result(node.inputs[0], &ins[0], *index, &ty)?,
        })
    }

    // ----- padding helpers -----

    /// The real size of each dimension of `x` (`None` for static ones).
    pub(super) fn sizes_of(&mut self, x: &V) -> Vec<Option<V>> {
        (0..x.ty.rank())
            .map(|d| x.ty.dynamic[d].then(|| self.b.get_size(x, d)))
            .collect()
    }

    /// The sizes of the dynamic dimensions of `ty` from their expressions.
    fn expr_sizes(&mut self, shape: &[SizeExpr], ty: &Ty) -> Result<Vec<Option<V>>> {
        (0..ty.rank())
            .map(|d| {
                if ty.dynamic[d] {
                    self.size_value(&shape[d]).map(Some)
                } else {
                    Ok(None)
                }
            })
            .collect()
    }

    /// A static Bool mask of `x`'s bound shape: true at real positions
    /// (below each dynamic dim's size, where each masked dim's mask
    /// holds). `None` when every position is real.
    pub(super) fn valid_mask(&mut self, x: &V) -> Option<V> {
        let sizes = self.sizes_of(x);
        let mask = self.mask_from_sizes(&x.ty, &sizes);
        self.and_masked_dims(x, |_| true, mask)
    }

    /// The mask of positions below `sizes` in the bound shape of `ty`.
    pub(super) fn mask_from_sizes(&mut self, ty: &Ty, sizes: &[Option<V>]) -> Option<V> {
        let shape = ty.bound().with_elt(Elt::I32);
        let mut mask: Option<V> = None;
        for (d, s) in sizes.iter().enumerate() {
            let Some(s) = s else { continue };
            let it = self.b.iota(&shape, d);
            let s = self.b.fill(s, &shape);
            let m = self.b.cmp(CmpOp::Lt, &it, &s);
            mask = Some(match mask {
                None => m,
                Some(prev) => self.b.bin("and", &prev, &m),
            });
        }
        mask
    }

    /// `x` as a static tensor of its bound shape: its static view. With
    /// `fill` (`Op::PadToBound`), the padding of its dynamic dims is set
    /// to it; otherwise it is what it is (unspecified, or what a fill
    /// before the reader wrote: `fill.rs`).
    pub(super) fn padded(&mut self, x: &V, fill: Option<f64>) -> V {
        let fill = fill.map(|f| x.ty.elt.literal(f));
        if !x.ty.is_dynamic() {
            return x.clone();
        }
        let mask = if fill.is_some() {
            self.valid_mask(x)
        } else {
            None
        };
        let mut s = x.clone();
        for d in 0..x.ty.rank() {
            if x.ty.dynamic[d] {
                let bound = self.b.i32c(x.ty.dims[d]);
                let full = self.b.set_size(&s, d, &bound, false);
                self.keep_backing(&s, &full);
                s = full;
            }
        }
        match (fill, mask) {
            (Some(lit), Some(mask)) => {
                let f = self.b.splat_lit(&lit, &s.ty);
                self.b.select(&mask, &s, &f)
            }
            _ => s,
        }
    }

    /// Gives the static `x` the dynamic dimensions of `ty` with `sizes`
    /// (clamped to the bounds).
    pub(super) fn redyn(&mut self, x: V, ty: &Ty, sizes: &[Option<V>]) -> V {
        let mut v = x;
        for d in 0..ty.rank() {
            if ty.dynamic[d] {
                let s = match sizes.get(d).cloned().flatten() {
                    Some(s) => s,
                    None => self.b.i32c(ty.dims[d]),
                };
                let s = self.clamp_size(&s, ty.dims[d]);
                let sized = self.b.set_size(&v, d, &s, true);
                self.keep_backing(&v, &sized);
                v = sized;
            }
        }
        v
    }
}

/// Whether a node of `op` whose type is `ty` is an empty array that an
/// empty constant can stand for: a static shape with a zero dim, from an op
/// that only computes (no parameter, size variable, check or loop). XLA
/// rejects collectives of empty operands; every replica skips them alike.
fn empty_value(op: &Op, ty: &Ty) -> bool {
    let empty = ty.dims.contains(&0) && !ty.dynamic.contains(&true);
    empty
        && matches!(
            op,
            Op::Unary(_)
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
                | Op::AllReduce { .. }
                | Op::AllGather { .. }
                | Op::ReduceScatter { .. }
        )
}
