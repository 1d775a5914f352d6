//! The StableHLO text builder: SSA values and one method per StableHLO
//! operation the lowering uses (element and tensor types: `types`).
//!
//! Every operation is written in MLIR's generic form with explicit operand
//! and result types, so the text never depends on a pretty-printer's type
//! inference, and bounded types (`tensor<?x2xf32, #stablehlo.bounds<6, ?>>`)
//! are spelled where they arise. SSA names come from one counter per
//! function, so values in nested regions never shadow outer ones.

use crate::ir::CmpOp;

pub(crate) use super::name::Name;
pub(crate) use super::types::{Elt, Ty};

/// An SSA value with its type.
#[derive(Clone, Debug)]
pub(crate) struct V {
    /// `%v12`, `%arg0`, `%v7#1`: copied with the value, written out where
    /// it is an operand.
    pub name: Name,
    pub ty: Ty,
}

/// `array<i64: 1, 2>`.
pub(crate) fn arr(v: &[i64]) -> String {
    let mut s = String::with_capacity(12 + 4 * v.len());
    push_arr(&mut s, v);
    s
}

/// `[1, 2]`.
pub(crate) fn list(v: &[i64]) -> String {
    let mut s = String::with_capacity(2 + 4 * v.len());
    push_list(&mut s, v);
    s
}

/// `[1, 2]` appended to `s`.
pub(crate) fn push_list(s: &mut String, v: &[i64]) {
    s.push('[');
    push_ints(s, v);
    s.push(']');
}

/// `array<i64: 1, 2>` appended to `s`.
pub(crate) fn push_arr(s: &mut String, v: &[i64]) {
    if v.is_empty() {
        s.push_str("array<i64>");
    } else {
        s.push_str("array<i64: ");
        push_ints(s, v);
        s.push('>');
    }
}

/// `%a, %b` appended to `s`: the values' names.
pub(super) fn push_names<'a>(s: &mut String, values: impl IntoIterator<Item = &'a V>) {
    for (k, v) in values.into_iter().enumerate() {
        if k > 0 {
            s.push_str(", ");
        }
        v.name.push_to(s);
    }
}

/// `ta, tb` appended to `s`: the MLIR spellings of `tys`.
pub(super) fn push_types<'a>(s: &mut String, tys: impl IntoIterator<Item = &'a Ty>) {
    for (k, t) in tys.into_iter().enumerate() {
        if k > 0 {
            s.push_str(", ");
        }
        t.push_to(s);
    }
}

/// ` {attrs} : (ta, tb)` appended to `s`: the attributes unless there
/// are none, then the operands' types.
fn push_attrs_and_types(s: &mut String, attrs: &str, args: &[&V]) {
    if !attrs.is_empty() {
        s.push_str(" {");
        s.push_str(attrs);
        s.push('}');
    }
    s.push_str(" : (");
    push_types(s, args.iter().map(|a| &a.ty));
    s.push(')');
}

/// The results of the op named `r` with `n` of them, `%r` or `%r:n`,
/// appended to `s`.
fn push_results(s: &mut String, r: Name, n: usize) {
    r.push_to(s);
    if n != 1 {
        s.push(':');
        s.push_str(itoa::Buffer::new().format(n));
    }
}

/// `1, 2` appended to `s`.
fn push_ints(s: &mut String, v: &[i64]) {
    let mut buf = itoa::Buffer::new();
    for (k, x) in v.iter().enumerate() {
        if k > 0 {
            s.push_str(", ");
        }
        s.push_str(buf.format(*x));
    }
}

/// StableHLO's spelling of a comparison direction.
fn direction(c: CmpOp) -> &'static str {
    match c {
        CmpOp::Eq => "EQ",
        CmpOp::Ne => "NE",
        CmpOp::Lt => "LT",
        CmpOp::Le => "LE",
        CmpOp::Gt => "GT",
        CmpOp::Ge => "GE",
    }
}

/// A function body under construction.
pub(crate) struct Builder {
    /// The body's lines, each ending in a newline.
    pub text: String,
    next: usize,
    indent: usize,
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            text: String::new(),
            next: 0,
            indent: 1,
        }
    }

    /// Starts a line at the current indentation; the caller writes it
    /// and ends it with a newline.
    fn line(&mut self) -> &mut String {
        for _ in 0..self.indent {
            self.text.push_str("  ");
        }
        &mut self.text
    }

    /// Writes `(a, b, ..) {attrs} : (ta, tb, ..)`: the operands' names,
    /// the attributes unless there are none, then the operands' types.
    fn operands(&mut self, args: &[&V], attrs: &str) {
        let t = &mut self.text;
        t.push('(');
        push_names(t, args.iter().copied());
        t.push(')');
        push_attrs_and_types(t, attrs, args);
    }

    pub fn fresh(&mut self) -> Name {
        self.next += 1;
        Name::value(self.next)
    }

    fn push(&mut self, line: String) {
        self.line().push_str(&line);
        self.text.push('\n');
    }

    /// Emits `%r = "dialect.op"(operands) {attrs} : (types) -> result`.
    fn generic(&mut self, dialect: &str, name: &str, args: &[&V], attrs: &str, ty: Ty) -> V {
        let r = self.fresh();
        let line = self.line();
        r.push_to(line);
        for part in [" = \"", dialect, ".", name, "\""] {
            line.push_str(part);
        }
        self.operands(args, attrs);
        self.text.push_str(" -> ");
        ty.push_to(&mut self.text);
        self.text.push('\n');
        V { name: r, ty }
    }

    /// Emits `%r = "op"(operands) {attrs} : (types) -> result`.
    pub fn op(&mut self, name: &str, args: &[&V], attrs: &str, ty: Ty) -> V {
        self.generic("stablehlo", name, args, attrs, ty)
    }

    /// Emits a CHLO op (`"chlo.name"`): XLA's client-level ops, which the
    /// plugin expands when it compiles (`erf`, `top_k`).
    pub fn chlo(&mut self, name: &str, args: &[&V], ty: Ty) -> V {
        self.generic("chlo", name, args, "", ty)
    }

    /// An op with one region whose block takes `block_args` scalars and
    /// whose body `body` emits the block and returns what it yields. Returns
    /// the op's results.
    pub fn region_op(
        &mut self,
        name: &str,
        args: &[&V],
        attrs: &str,
        block_args: &[Elt],
        results: &[Ty],
        body: impl FnOnce(&mut Builder, &[V]) -> Vec<V>,
    ) -> Vec<V> {
        let r = self.fresh();
        let block: Vec<V> = block_args
            .iter()
            .map(|&e| V {
                name: self.fresh(),
                ty: Ty::scalar(e),
            })
            .collect();
        let line = self.line();
        push_results(line, r, results.len());
        for part in [" = \"stablehlo.", name, "\"("] {
            line.push_str(part);
        }
        push_names(line, args.iter().copied());
        line.push_str(") ({\n");
        self.block_head(&block);
        self.indent += 1;
        let yielded = body(self, &block);
        self.yield_values(&yielded);
        self.indent -= 1;
        let line = self.line();
        line.push_str("})");
        push_attrs_and_types(line, attrs, args);
        line.push_str(" -> ");
        if results.len() == 1 {
            results[0].push_to(line);
        } else {
            line.push('(');
            push_types(line, results);
            line.push(')');
        }
        line.push('\n');
        results
            .iter()
            .enumerate()
            .map(|(i, t)| V {
                name: r.result(results.len(), i),
                ty: t.clone(),
            })
            .collect()
    }

    /// Opens a `stablehlo.while` whose state is `args` (static types);
    /// returns its result name. Then come its two regions, each a
    /// [`block`](Builder::block) closed by [`end_block`](Builder::end_block)
    /// (the condition yields an i1, the body the new state), separated by
    /// [`next_region`](Builder::next_region), and
    /// [`close_while`](Builder::close_while).
    pub fn open_while(&mut self, args: &[V]) -> Name {
        let r = self.fresh();
        let line = self.line();
        push_results(line, r, args.len());
        line.push_str(" = \"stablehlo.while\"(");
        push_names(line, args);
        line.push_str(") ({\n");
        r
    }

    /// Opens a region's block taking values of types `tys`; returns them.
    pub fn block(&mut self, tys: &[Ty]) -> Vec<V> {
        let args: Vec<V> = tys
            .iter()
            .map(|t| V {
                name: self.fresh(),
                ty: t.clone(),
            })
            .collect();
        self.block_head(&args);
        self.indent += 1;
        args
    }

    /// Writes a block's head, `^bb0(%a: ta, %b: tb):`.
    fn block_head(&mut self, args: &[V]) {
        let line = self.line();
        line.push_str("^bb0(");
        for (k, a) in args.iter().enumerate() {
            if k > 0 {
                line.push_str(", ");
            }
            a.name.push_to(line);
            line.push_str(": ");
            a.ty.push_to(line);
        }
        line.push_str("):\n");
    }

    /// Closes a block, yielding `values`.
    pub fn end_block(&mut self, values: &[V]) {
        self.yield_values(values);
        self.indent -= 1;
    }

    /// Ends a region by yielding `values` (`stablehlo.return`).
    pub fn yield_values(&mut self, values: &[V]) {
        let line = self.line();
        line.push_str("\"stablehlo.return\"(");
        push_names(line, values);
        line.push_str(") : (");
        push_types(line, values.iter().map(|v| &v.ty));
        line.push_str(") -> ()\n");
    }

    /// Opens a `stablehlo.if` on the i1 scalar `pred`; returns its result
    /// name. Then come its two regions, the one taken when `pred` holds
    /// and the other, each ended by [`yield_values`](Builder::yield_values)
    /// and separated by [`else_region`](Builder::else_region), and
    /// [`close_if`](Builder::close_if). The regions see the enclosing
    /// body's values; what a region defines is not visible after it.
    pub fn open_if(&mut self, pred: &V) -> Name {
        let r = self.fresh();
        self.push(format!("{r} = \"stablehlo.if\"({}) ({{", pred.name));
        self.indent += 1;
        r
    }

    /// Between the two regions of a `stablehlo.if`.
    pub fn else_region(&mut self) {
        self.indent -= 1;
        self.push("}, {".into());
        self.indent += 1;
    }

    /// Closes the `stablehlo.if` named `r` on `pred`, whose regions yield
    /// one value of type `ty`; returns it.
    pub fn close_if(&mut self, r: Name, pred: &V, ty: Ty) -> V {
        self.indent -= 1;
        self.push(format!("}}) : ({}) -> {}", pred.ty.mlir(), ty.mlir()));
        V { name: r, ty }
    }

    /// Between the regions of a multi-region op.
    pub fn next_region(&mut self) {
        self.push("}, {".into());
    }

    /// Closes the `stablehlo.while` named `r` whose state has types
    /// `tys`; returns its results.
    pub fn close_while(&mut self, r: Name, tys: &[Ty]) -> Vec<V> {
        let ts: Vec<String> = tys.iter().map(|t| t.mlir()).collect();
        let res = match ts.len() {
            1 => ts[0].clone(),
            _ => format!("({})", ts.join(", ")),
        };
        self.push(format!("}}) : ({}) -> {res}", ts.join(", ")));
        tys.iter()
            .enumerate()
            .map(|(i, t)| V {
                name: r.result(tys.len(), i),
                ty: t.clone(),
            })
            .collect()
    }

    /// XLA's TopK (`chlo.top_k`) along the last dimension of `x` (static):
    /// the I32 indices of the `k` largest elements, largest first, equal
    /// ones lower index first, floats ordered totally (-NaN < -inf < .. <
    /// -0 < +0 < .. < +inf < +NaN). XLA selects them without a full sort.
    pub fn top_k(&mut self, x: &V, k: usize) -> V {
        let r = self.fresh();
        let mut dims = x.ty.dims.clone();
        *dims.last_mut().expect("top_k of a scalar") = k as i64;
        let values = Ty::fixed(x.ty.elt, &dims);
        let indices = Ty::fixed(Elt::I32, &dims);
        self.push(format!(
            "{r}:2 = \"chlo.top_k\"({}) {{k = {k} : i64}} : ({}) -> ({}, {})",
            x.name,
            x.ty.mlir(),
            values.mlir(),
            indices.mlir()
        ));
        V {
            name: r.result(2, 1),
            ty: indices,
        }
    }

    // ----- leaves -----

    /// A constant of type `ty` (static) with every element `lit`.
    pub fn splat_lit(&mut self, lit: &str, ty: &Ty) -> V {
        let t = ty.bound();
        let r = self.fresh();
        let line = self.line();
        r.push_to(line);
        for part in [" = \"stablehlo.constant\"() {value = dense<", lit, "> : "] {
            line.push_str(part);
        }
        t.push_to(line);
        line.push_str("} : () -> ");
        t.push_to(line);
        line.push('\n');
        V { name: r, ty: t }
    }

    /// A constant of type `ty` (static) with every element `v`.
    pub fn splat(&mut self, v: f64, ty: &Ty) -> V {
        let lit = ty.elt.literal(v);
        self.splat_lit(&lit, ty)
    }

    /// A scalar constant.
    pub fn scalar(&mut self, v: f64, elt: Elt) -> V {
        self.splat(v, &Ty::scalar(elt))
    }

    /// An i32 scalar constant.
    pub fn i32c(&mut self, v: i64) -> V {
        self.scalar(v as f64, Elt::I32)
    }

    /// A static iota along `dim`.
    pub fn iota(&mut self, ty: &Ty, dim: usize) -> V {
        let t = ty.bound();
        let r = self.fresh();
        self.push(format!(
            "{r} = \"stablehlo.iota\"() {{iota_dimension = {dim} : i64}} : () -> {}",
            t.mlir()
        ));
        V { name: r, ty: t }
    }

    // ----- elementwise -----

    pub fn un(&mut self, name: &str, x: &V) -> V {
        self.op(name, &[x], "", x.ty.clone())
    }

    /// A binary elementwise op; the result has `a`'s type (a dynamic
    /// operand with a static one of its bound shape is allowed).
    pub fn bin(&mut self, name: &str, a: &V, b: &V) -> V {
        let ty = if a.ty.is_dynamic() || !b.ty.is_dynamic() {
            a.ty.clone()
        } else {
            b.ty.clone()
        };
        self.op(name, &[a, b], "", ty)
    }

    pub fn cmp(&mut self, dir: CmpOp, a: &V, b: &V) -> V {
        let ty = if a.ty.is_dynamic() || !b.ty.is_dynamic() {
            a.ty.with_elt(Elt::I1)
        } else {
            b.ty.with_elt(Elt::I1)
        };
        let attrs = [
            "comparison_direction = #stablehlo<comparison_direction ",
            direction(dir),
            ">, compare_type = #stablehlo<comparison_type ",
            a.ty.elt.compare_type(),
            ">",
        ]
        .concat();
        self.op("compare", &[a, b], &attrs, ty)
    }

    pub fn select(&mut self, c: &V, t: &V, f: &V) -> V {
        let ty = [&c.ty, &t.ty, &f.ty]
            .into_iter()
            .find(|x| x.is_dynamic())
            .map(|x| x.with_elt(t.ty.elt))
            .unwrap_or_else(|| t.ty.clone());
        self.op("select", &[c, t, f], "", ty)
    }

    /// `select(keep, x, splat(fill))` (`fill` an MLIR literal) without a
    /// select: `keep` is of `x`'s static shape in `x`'s integer twin
    /// ([`Elt::bits_twin`]), all ones where `x` is kept and zero where the
    /// fill goes; the bits of `x` and'ed with it, or'ed with the fill's
    /// bits where it is zero. Bit for bit the select's result.
    pub fn select_fill_bitwise(&mut self, keep: &V, x: &V, fill: &str) -> V {
        let bits = keep.ty.elt;
        let as_bits = |b: &mut Builder, v: &V| match v.ty.elt == bits {
            true => v.clone(),
            false => b.op("bitcast_convert", &[v], "", v.ty.with_elt(bits)),
        };
        let xb = as_bits(self, x);
        let mut r = self.bin("and", &xb, keep);
        if fill != x.ty.elt.literal(0.0) {
            let f = self.splat_lit(fill, &x.ty);
            let fb = as_bits(self, &f);
            let off = self.un("not", keep);
            let fill_bits = self.bin("and", &fb, &off);
            r = self.bin("or", &r, &fill_bits);
        }
        match x.ty.elt == bits {
            true => r,
            false => self.op("bitcast_convert", &[&r], "", x.ty.clone()),
        }
    }

    /// The i1 `mask` as `bits` (an integer type): all ones where it holds,
    /// zero elsewhere.
    pub fn all_ones_where(&mut self, mask: &V, bits: Elt) -> V {
        let one = self.convert(mask, bits);
        self.un("negate", &one)
    }

    pub fn convert(&mut self, x: &V, elt: Elt) -> V {
        if x.ty.elt == elt {
            return x.clone();
        }
        self.op("convert", &[x], "", x.ty.with_elt(elt))
    }

    /// `clamp(lo, x, hi)` with scalar bounds.
    pub fn clamp(&mut self, lo: &V, x: &V, hi: &V) -> V {
        self.op("clamp", &[lo, x, hi], "", x.ty.clone())
    }

    /// A scalar broadcast to the static type `ty`.
    pub fn fill(&mut self, s: &V, ty: &Ty) -> V {
        let t = ty.bound().with_elt(s.ty.elt);
        self.op(
            "broadcast_in_dim",
            &[s],
            "broadcast_dimensions = array<i64>",
            t,
        )
    }

    /// `x` unchanged, as a value XLA must materialize: no fusion reaches
    /// through it, so its producer is computed once for all consumers.
    pub fn optimization_barrier(&mut self, x: &V) -> V {
        self.op("optimization_barrier", &[x], "", x.ty.clone())
    }

    // ----- sizes -----

    pub fn get_size(&mut self, x: &V, dim: usize) -> V {
        if !x.ty.dynamic[dim] {
            return self.i32c(x.ty.dims[dim]);
        }
        self.op(
            "get_dimension_size",
            &[x],
            &format!("dimension = {dim} : i64"),
            Ty::scalar(Elt::I32),
        )
    }

    /// `set_dimension_size`; `dynamic` says whether the result dimension is
    /// dynamic (false when setting it to its bound, which restores a
    /// static type).
    pub fn set_size(&mut self, x: &V, dim: usize, size: &V, dynamic: bool) -> V {
        let mut ty = x.ty.clone();
        ty.dynamic[dim] = dynamic;
        self.op(
            "set_dimension_size",
            &[x, size],
            &format!("dimension = {dim} : i64"),
            ty,
        )
    }

    // ----- shape -----

    pub fn reshape(&mut self, x: &V, ty: Ty) -> V {
        if x.ty == ty {
            return x.clone();
        }
        self.op("reshape", &[x], "", ty)
    }

    pub fn broadcast_in_dim(&mut self, x: &V, dims: &[i64], ty: Ty) -> V {
        let mut attrs = String::from("broadcast_dimensions = ");
        push_arr(&mut attrs, dims);
        self.op("broadcast_in_dim", &[x], &attrs, ty)
    }

    pub fn transpose(&mut self, x: &V, perm: &[usize]) -> V {
        let ty = Ty {
            elt: x.ty.elt,
            dims: perm.iter().map(|&p| x.ty.dims[p]).collect(),
            dynamic: perm.iter().map(|&p| x.ty.dynamic[p]).collect(),
        };
        let p: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
        self.op("transpose", &[x], &format!("permutation = {}", arr(&p)), ty)
    }

    /// `x[start:limit]` along `dim` (other dims whole).
    pub fn slice(&mut self, x: &V, dim: usize, start: i64, limit: i64) -> V {
        let mut starts = vec![0; x.ty.rank()];
        let mut limits = x.ty.dims.clone();
        starts[dim] = start;
        limits[dim] = limit;
        let mut ty = x.ty.clone();
        ty.dims[dim] = limit - start;
        let strides = vec![1; x.ty.rank()];
        self.op(
            "slice",
            &[x],
            &format!(
                "start_indices = {}, limit_indices = {}, strides = {}",
                arr(&starts),
                arr(&limits),
                arr(&strides)
            ),
            ty,
        )
    }

    pub fn concat(&mut self, xs: &[&V], dim: usize, ty: Ty) -> V {
        self.op("concatenate", xs, &format!("dimension = {dim} : i64"), ty)
    }

    /// Pads `x` along `dim` with `lo` and `hi` elements of the scalar `v`.
    pub fn pad(&mut self, x: &V, v: &V, dim: usize, lo: i64, hi: i64) -> V {
        let r = x.ty.rank();
        let mut l = vec![0; r];
        let mut h = vec![0; r];
        l[dim] = lo;
        h[dim] = hi;
        let mut ty = x.ty.clone();
        ty.dims[dim] += lo + hi;
        self.op(
            "pad",
            &[x, v],
            &format!(
                "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
                arr(&l),
                arr(&h),
                arr(&vec![0; r])
            ),
            ty,
        )
    }

    // ----- reductions -----

    /// Reduces `x` over `dims` from `init` with the binary op `combine`.
    pub fn reduce(
        &mut self,
        x: &V,
        init: &V,
        dims: &[usize],
        combine: impl FnOnce(&mut Builder, &V, &V) -> V,
    ) -> V {
        let keep: Vec<usize> = (0..x.ty.rank()).filter(|d| !dims.contains(d)).collect();
        let ty = Ty {
            elt: x.ty.elt,
            dims: keep.iter().map(|&d| x.ty.dims[d]).collect(),
            dynamic: keep.iter().map(|&d| x.ty.dynamic[d]).collect(),
        };
        let ds: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let mut attrs = String::from("dimensions = ");
        push_arr(&mut attrs, &ds);
        let e = x.ty.elt;
        self.region_op("reduce", &[x, init], &attrs, &[e, e], &[ty], |b, args| {
            vec![combine(b, &args[0], &args[1])]
        })
        .remove(0)
    }

    /// Sum of all elements of a static i32 vector.
    pub fn sum_all(&mut self, x: &V) -> V {
        let z = self.scalar(0.0, x.ty.elt);
        let dims: Vec<usize> = (0..x.ty.rank()).collect();
        self.reduce(x, &z, &dims, |b, p, q| b.bin("add", p, q))
    }
}
