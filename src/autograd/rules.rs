//! Gradient rules: one exhaustive `match` over [`Op`], the elementwise
//! ops' from the `grad:` column of their table (`elementwise.rs`), the
//! longer rules in named helpers below it.
//!
//! Each rule maps the output gradient `g` to one gradient per operand
//! (`None` where an operand carries no gradient: integer data, indices,
//! masks, conditions). Rules are written with the tensor API, so they are
//! lazy ops like any other and every backend runs them.

use crate::ir::{ArgKind, Dot, Op, ReduceKind, ScatterMode, Window, WindowKind};
use crate::symint::{Shape, SizeExpr};
use crate::tensor::Tensor;
use crate::SymInt;
use smallvec::smallvec;

/// One gradient per operand (`None` where none flows); most ops have at
/// most three operands, so a rule's result needs no allocation.
pub(super) type Grads = smallvec::SmallVec<[Option<Tensor>; 3]>;

/// The gradient of each operand of `op`, given the operands `x`, the
/// node's own value `out` and the gradient `g` of `out`.
#[track_caller]
pub(super) fn input_grads(op: &Op, x: &[Tensor], out: &Tensor, g: &Tensor) -> Grads {
    match op {
        Op::Data { .. } | Op::Scalar { .. } | Op::Iota { .. } | Op::SizeOf(_) => smallvec![],
        Op::RandomUniform { .. } => smallvec![None],
        Op::Unary(u) => super::elementwise::unary(*u, g, &x[0], out),
        Op::Binary(b) => super::elementwise::binary(*b, g, &x[0], &x[1], out),
        Op::Compare(_) => smallvec![None, None],
        Op::Select => {
            let (c, zero) = (&x[0], g.zeros_like());
            smallvec![
                None,
                Some(c.where_cond(g, &zero)),
                Some(c.where_cond(&zero, g)),
            ]
        }
        Op::Convert(_) => {
            let a = &x[0];
            if a.dtype().is_float() && g.dtype().is_float() {
                smallvec![Some(g.to_dtype(a.dtype()))]
            } else {
                smallvec![None]
            }
        }
        Op::Broadcast { shape, dims } => smallvec![Some(unbroadcast(g, &x[0], shape, dims))],
        Op::Reshape { .. } => smallvec![Some(g.reshape_exprs(x[0].shape_exprs(), &[&x[0]]))],
        Op::Transpose { perm } => {
            let mut inverse = vec![0usize; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            smallvec![Some(g.permute(&inverse))]
        }
        Op::Slice { dim, start, .. } => smallvec![Some(slice_grad(g, &x[0], out, *dim, *start))],
        Op::Concat { dim } => concat_grads(g, x, *dim),
        Op::Reverse { dims } => smallvec![Some(g.flip(dims))],
        Op::Guard { checks, .. } => smallvec![Some(g.guard_back(&x[0], checks))],
        Op::PadToBound { .. } => smallvec![Some(crop_to_real(g, &x[0]))],
        Op::Reduce { kind, dims } => smallvec![Some(reduce_grad(*kind, dims, g, &x[0], out))],
        Op::ArgReduce { .. } => smallvec![None],
        Op::ReduceWindow { kind, window } => smallvec![Some(window_grad(*kind, window, &x[0], out, g))],
        Op::SelectAndScatter { .. } => panic!(
            "select_and_scatter: the gradient with respect to its source (a second derivative of max pooling) is not implemented"
        ),
        Op::Dot(dot) => dot_grads(dot, g, &x[0], &x[1]),
        Op::Convolution(c) => {
            let (a, w) = (&x[0], &x[1]);
            let bounds = w.upper_bounds();
            smallvec![
                Some(g.conv_input_grad_of(a, w, c)),
                Some(g.conv_weight_grad(a, &bounds[2..], c)),
            ]
        }
        Op::IndexSelect { dim } => smallvec![Some(x[0].zeros_like().index_add(*dim, &x[1], g)), None],
        Op::Gather { dim } => smallvec![Some(x[0].zeros_like().scatter_add(*dim, &x[1], g)), None],
        Op::IndexAdd { dim } => smallvec![Some(g.clone()), None, Some(g.index_select(*dim, &x[1]))],
        Op::Scatter { dim, mode } => {
            let (idx, src) = (&x[1], &x[2]);
            let dbase = match mode {
                ScatterMode::Add => g.clone(),
                // Overwritten positions take no gradient back to the base.
                ScatterMode::Overwrite => g.scatter(*dim, idx, &src.zeros_like()),
            };
            smallvec![Some(dbase), None, Some(g.gather(*dim, idx))]
        }
        // An integer result: values sorted with it (`gather`) carry the
        // gradient.
        Op::Argsort { .. } => smallvec![None],
        Op::MaskedScatter => {
            let (mask, src) = (&x[1], &x[2]);
            let dsrc = g.masked_select(mask);
            let dsrc = (dsrc.shape_exprs() == src.shape_exprs()).then_some(dsrc);
            smallvec![Some(mask.where_cond(&g.zeros_like(), g)), None, dsrc]
        }
        Op::Nonzero => smallvec![None],
        Op::MaskedSelect => smallvec![Some(x[0].zeros_like().masked_scatter(&x[1], g)), None],
        Op::Unique => smallvec![None],
        Op::UniqueCounts => smallvec![None, None],
        Op::AllReduce { kind, replicas } => smallvec![Some(super::collective::all_reduce(
            *kind, *replicas, &x[0], out, g,
        ))],
        Op::AllGather { dim, replicas } => smallvec![Some(g.reduce_scatter_over(*dim, *replicas))],
        Op::ReduceScatter { dim, replicas } => smallvec![Some(g.all_gather_over(*dim, *replicas))],
        Op::ReplicaId => smallvec![],
        // A constraint places the value, a fill of padding changes no
        // value: the gradient is the incoming one.
        Op::Sharding(_) | Op::FillPadding { .. } => smallvec![Some(g.clone())],
        // A loop's results share one rule, which needs all their
        // gradients at once: backward gathers them at the loop node
        // (`super::loops::input_grads`) and never calls this for either.
        Op::While(_) | Op::LoopResult { .. } => {
            unreachable!("a loop's gradient is taken at the loop node")
        }
    }
}

/// The gradient of a slice of `a` along `dim` from `start`: zeros before
/// and after it. On a dynamic dim the slice starts at `min(n, start)` and
/// the rest is `n` - that - its size, so the three sizes add up to `n`
/// exactly.
#[track_caller]
fn slice_grad(g: &Tensor, a: &Tensor, out: &Tensor, dim: usize, start: usize) -> Tensor {
    let shape = a.shape_exprs();
    let n = &shape[dim];
    let before = n.minimum(&SizeExpr::constant(start as i64));
    let after = n.sub(&before).sub(&out.shape_exprs()[dim]);
    let zeros = |size: SizeExpr| {
        let mut s = shape.clone();
        s[dim] = size;
        a.zeros_like_shape(s)
    };
    let (before, after) = (zeros(before), zeros(after));
    Tensor::cat(&[&before, g, &after], dim)
}

/// The gradients of the operands `x` joined along `dim`: each its piece
/// of `g`, from its `SymInt` offset.
#[track_caller]
fn concat_grads(g: &Tensor, x: &[Tensor], dim: usize) -> Grads {
    let mut offset = SymInt::from(0);
    let mut out = Grads::with_capacity(x.len());
    for a in x {
        let n = a.size(dim);
        let idx = Tensor::arange_sym(&n).on(g);
        let idx = match offset.as_static() {
            Some(o) => &idx + o,
            None => &idx + &size_tensor(&offset, g),
        };
        out.push(Some(g.index_select(dim, &idx)));
        offset = offset + n;
    }
    out
}

/// The gradient of `pad_to_bound(a)`: `g` cropped back to `a`'s real sizes.
#[track_caller]
fn crop_to_real(g: &Tensor, a: &Tensor) -> Tensor {
    let mut d = g.clone();
    for (k, s) in a.sizes().iter().enumerate() {
        if s.is_dynamic() {
            d = d.index_select(k, &Tensor::arange_sym(s).on(g));
        }
    }
    d
}

/// The gradient of a reduction of `a` over `dims`, whose result is `out`.
#[track_caller]
fn reduce_grad(kind: ReduceKind, dims: &[usize], g: &Tensor, a: &Tensor, out: &Tensor) -> Tensor {
    let back = |t: &Tensor| t.unreduce(a, dims);
    match kind {
        ReduceKind::Sum => back(g),
        ReduceKind::Max | ReduceKind::Min => {
            // Ties share the gradient evenly (as PyTorch's amax).
            let mask = a.eq(&back(out)).to_dtype(a.dtype());
            let count = back(&mask.sum_dims(dims, false));
            &back(g) * &mask / &count
        }
        ReduceKind::Prod => &back(g) * &prod_grad_factor(a, dims),
    }
}

/// The gradients of `dot(a, b)`: each one dot summing over what the
/// forward dot kept free (see `Dot::grads`), so a batch times a matrix
/// gets its matrix gradient from one contraction over all leading dims,
/// never a batched product reduced afterwards.
#[track_caller]
fn dot_grads(dot: &Dot, g: &Tensor, a: &Tensor, b: &Tensor) -> Grads {
    let [(dl, pl), (dr, pr)] = dot.grads(a.rank(), b.rank());
    smallvec![
        Some(g.dot_general(b, dl).permute(&pl)),
        Some(a.dot_general(g, dr).permute(&pr)),
    ]
}

/// The gradient of a window reduction of `a`: windowed sums spread `g`
/// back over their windows; products do the same with `g * out / a`
/// (PyTorch's `cumprod` formula for nonzero inputs); max and min route
/// each window's gradient to its first extremum, as PyTorch's pooling.
#[track_caller]
fn window_grad(kind: WindowKind, w: &Window, a: &Tensor, out: &Tensor, g: &Tensor) -> Tensor {
    match kind {
        WindowKind::Sum => spread_windows(g, w, a),
        WindowKind::Product => &spread_windows(&(g * out), w, a) / a,
        WindowKind::Max => a.select_and_scatter(ArgKind::Max, g, w.clone()),
        WindowKind::Min => a.select_and_scatter(ArgKind::Min, g, w.clone()),
    }
}

/// The transpose of a windowed sum over `a`: each element of `a` gets the
/// sum of `g` over the windows that read it. That is itself a windowed
/// sum of `g`, dilated by the stride, read every `dilation` elements by a
/// window of the same size, padded `size - 1 - lo` before and enough
/// after to give `a`'s size (the mirror padding `lo` on a dim that keeps
/// its size, which is how dynamic dims have it).
#[track_caller]
fn spread_windows(g: &Tensor, w: &Window, a: &Tensor) -> Tensor {
    let (xs, gs) = (a.shape_exprs(), g.shape_exprs());
    let mut t = Window::new(w.size.clone());
    for d in 0..w.rank() {
        let ((lo, hi), k) = (w.padding[d], w.size[d]);
        if lo >= k || hi >= k {
            panic!("reduce_window: the gradient of a window whose padding ({lo}, {hi}) covers a whole window (size {k}) is not supported");
        }
        t.dilation[d] = w.stride[d];
        t.stride[d] = w.dilation[d];
        let after = match (xs[d].as_const(), gs[d].as_const()) {
            (Some(0), _) | (_, Some(0)) => return a.zeros_like(),
            (Some(n), Some(m)) => {
                (n - 1) * w.dilation[d] as i64 + lo as i64 - (m - 1) * w.stride[d] as i64
            }
            _ => lo as i64,
        };
        t.padding[d] = (k - 1 - lo, after.max(0) as usize);
    }
    g.reduce_window("reduce_window", WindowKind::Sum, t)
}

/// d(prod over `dims` of `a`)/d`a`, in `a`'s shape, as PyTorch computes
/// it, zeros included: the product of the other elements of each group.
/// Without a zero in the group that is `prod / a`; with exactly one, the
/// zero's is the product of the nonzero elements and the others' is 0;
/// with more, all are 0. (Padding of a dynamic dim is summed as 0 and
/// multiplied as 1, so it counts as no zero and changes no product.)
#[track_caller]
fn prod_grad_factor(a: &Tensor, dims: &[usize]) -> Tensor {
    let back = |t: &Tensor| t.unreduce(a, dims);
    let is_zero = a.eq_scalar(0.0);
    let zeros = back(&is_zero.to_dtype(a.dtype()).sum_dims(dims, false));
    let nonzero = is_zero.where_cond(&a.ones_like(), a);
    let others = back(&nonzero.prod_dims(dims));
    let lone_zero = zeros.eq_scalar(1.0).logical_and(&is_zero);
    let when_one = lone_zero.where_cond(&others, &a.zeros_like());
    zeros
        .eq_scalar(0.0)
        .where_cond(&(&others / &nonzero), &when_one)
}

/// Sums `g` (of the broadcast `shape`) back to the shape of `a`.
#[track_caller]
fn unbroadcast(g: &Tensor, a: &Tensor, shape: &[SizeExpr], dims: &[usize]) -> Tensor {
    let input = a.shape_exprs();
    let mut summed: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    for (i, &d) in dims.iter().enumerate() {
        if input[i].as_const() == Some(1) && shape[d].as_const() != Some(1) {
            summed.push(d);
        }
    }
    summed.sort_unstable();
    let reduced = if summed.is_empty() {
        g.clone()
    } else {
        g.sum_dims(&summed, false)
    };
    reduced.reshape_exprs(input, &[a])
}

impl Tensor {
    /// `1 / self`.
    #[track_caller]
    pub(super) fn reciprocal(&self) -> Tensor {
        &self.ones_like() / self
    }

    /// A gradient of a reduction over `dims` put back into `a`'s shape.
    #[track_caller]
    fn unreduce(&self, a: &Tensor, dims: &[usize]) -> Tensor {
        self.keep_dims(a, dims).broadcast_to(&a.shape_exprs(), &[a])
    }

    /// Zeros of `shape` (whose variables this tensor's graph defines).
    #[track_caller]
    fn zeros_like_shape(&self, shape: Shape) -> Tensor {
        let node = self.node();
        let deps = crate::tensor::size_deps_for(&shape, std::slice::from_ref(&node));
        Tensor::full_exprs(shape, 0.0, self.dtype(), deps, self.device())
    }

    /// This tensor on `other`'s device (index tensors are made on the
    /// default device).
    #[track_caller]
    fn on(self, other: &Tensor) -> Tensor {
        if self.device().same(other.device()) {
            self
        } else {
            self.to_device(other.device())
                .unwrap_or_else(|e| panic!("{e}"))
        }
    }
}

/// A size as an I64 scalar tensor on `like`'s device.
#[track_caller]
fn size_tensor(s: &SymInt, like: &Tensor) -> Tensor {
    let deps = crate::tensor::size_deps_for(std::slice::from_ref(&s.expr), &s.anchors);
    Tensor::try_apply_on(Op::SizeOf(s.expr.clone()), &[], deps, like.device())
        .unwrap_or_else(|e| panic!("{e}"))
}
