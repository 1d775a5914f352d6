//! Shape ops: reshape, permute, broadcast, concatenation, slicing.

use super::create::{clamp_size, size_args};
use super::dim::{resolve_in, DimIndex, ResolveDim};
use super::sym_int::anchors_of;
use super::{size_deps_for, Tensor};
use crate::dtype::{result_type, Priority};
use crate::ir::check::SizeCheck;
use crate::ir::node::shape_string;
use crate::ir::{Node, Op};
use crate::symint::{Shape, SizeExpr};
use crate::SymInt;
use smallvec::SmallVec;
use std::sync::Arc;

impl Tensor {
    /// The same elements in a new shape; one entry may be `-1` (inferred).
    ///
    /// A dynamic tensor can be reshaped when the element counts are equal as
    /// expressions and the result has at most one dynamic dimension.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::arange(6);
    /// assert_eq!(x.reshape(&[3, -1]).concrete_shape().unwrap(), vec![3, 2]);
    /// ```
    #[track_caller]
    pub fn reshape(&self, shape: &[i64]) -> Tensor {
        let input = self.shape_exprs();
        let numel = input.iter().fold(SizeExpr::constant(1), |a, d| a.mul(d));
        let holes = shape.iter().filter(|&&s| s == -1).count();
        if holes > 1 || shape.iter().any(|&s| s < -1) {
            panic!("reshape: {shape:?} may hold one -1 and otherwise non-negative sizes (input shape {})", shape_string(&input));
        }
        let known = shape
            .iter()
            .filter(|&&s| s != -1)
            .try_fold(1i64, |acc, &s| acc.checked_mul(s))
            .unwrap_or_else(|| panic!("reshape: the sizes {shape:?} have more elements than a 64-bit count holds (input shape {})", shape_string(&input)));
        let mut x = self.clone();
        let out: Shape = shape
            .iter()
            .map(|&s| {
                if s != -1 {
                    return SizeExpr::constant(s);
                }
                if known == 0 {
                    panic!("reshape: cannot infer -1 next to a zero size in {shape:?} (input shape {})", shape_string(&input));
                }
                let inferred = numel.floor_div(&SizeExpr::constant(known));
                if inferred.mul(&SizeExpr::constant(known)) != numel {
                    x = self.dividing(&input, &numel, known, &inferred).unwrap_or_else(|| {
                        panic!(
                            "reshape: cannot reshape {} into {shape:?}: {} elements are not a multiple of {known}",
                            shape_string(&input),
                            numel
                        )
                    });
                }
                inferred
            })
            .collect();
        x.reshape_exprs(out, &[self])
    }

    /// This tensor, whose element count `numel` may or may not be a
    /// multiple of `known`, checked to be one when the program runs and
    /// given the count `inferred * known` (so that it reshapes to
    /// `[.., inferred, ..]` with the other sizes making `known`). `None`
    /// when the count is certainly no multiple, or when the new count
    /// cannot be written on one dimension (more than one dynamic
    /// dimension, or `known` not a multiple of the static ones).
    #[track_caller]
    fn dividing(
        &self,
        input: &[SizeExpr],
        numel: &SizeExpr,
        known: i64,
        inferred: &SizeExpr,
    ) -> Option<Tensor> {
        let divides = SizeCheck::multiple_of("reshape", numel, known);
        if divides.decided() == Some(false) {
            return None;
        }
        let dynamic: Vec<usize> = (0..input.len())
            .filter(|&d| input[d].as_const().is_none())
            .collect();
        let statics: i64 = input.iter().filter_map(SizeExpr::as_const).product();
        let [d] = dynamic[..] else { return None };
        if statics <= 0 || known % statics != 0 {
            return None;
        }
        let mut target: Shape = input.iter().cloned().collect();
        target[d] = inferred.scale(known / statics);
        let same = SizeCheck::equal("reshape", &input[d], &target[d]);
        let node = super::guard::guard_node(&self.input_node(), target, vec![divides, same], &[])
            .unwrap_or_else(|e| panic!("{e}"));
        Some(Tensor::from_node(node, self.device()))
    }

    /// The same elements in a shape of `sizes`, which may be dynamic
    /// (sizes of this or other tensors, and sums and products of them).
    ///
    /// The element counts must be equal: as size expressions (`[n, 3]` into
    /// `[3 * n]` or `[n, 3, 1]`), or else checked when the program runs
    /// (`[n]` into `[n // 2, 2]`, a failed check is the step's error), and
    /// the result may have at most one
    /// dynamic dimension unless it only adds or removes size-1 dims (XLA
    /// cannot express more); otherwise it panics naming both shapes. A
    /// size that is always negative panics; one that may be negative
    /// (`n - 2`) is taken as 0 when it is.
    ///
    /// ```
    /// use lazyxla::{SymInt, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2])
    ///     .unwrap()
    ///     .mark_dynamic(0, 8);
    /// let n = x.size(0);
    /// let flat = x.reshape_sym(&[&n * 2]);
    /// assert_eq!(flat.shape_string(), "[<=16]");
    /// let back = flat.reshape_sym(&[n, SymInt::from(2)]);
    /// assert_eq!((&back - &x).abs().sum().item::<f32>().unwrap(), 0.0);
    /// ```
    #[track_caller]
    pub fn reshape_sym(&self, sizes: &[SymInt]) -> Tensor {
        let input = self.shape_exprs();
        let shape = size_args("reshape_sym", sizes);
        let numel = |s: &[SizeExpr]| s.iter().fold(SizeExpr::constant(1), |a, d| a.mul(d));
        let (from, to) = (numel(&input), numel(&shape));
        let mut candidates = vec![self.node()];
        candidates.extend(anchors_of(sizes));
        let x = match from == to {
            true => self.clone(),
            false => self.counting(&input, &from, &to, &candidates).unwrap_or_else(|| {
                let count = |n: &SizeExpr| SymInt::from_expr(n.clone()).describe();
                panic!(
                    "reshape_sym: cannot reshape {} ({} elements) into {} ({} elements): the element counts can never be equal, or the input has more than one dynamic dimension to check them on; pass sizes whose product is {}",
                    shape_string(&input),
                    count(&from),
                    shape_string(&shape),
                    count(&to),
                    count(&from)
                )
            }),
        };
        let exprs: Vec<SizeExpr> = sizes.iter().map(|s| s.expr.clone()).collect();
        let checks = super::guard::non_negative_checks("reshape_sym", &exprs)
            .unwrap_or_else(|e| panic!("{e}"));
        x.reshape_to(shape, &candidates)
            .checked(checks, &candidates)
    }

    /// This tensor, whose element count `from` may or may not equal `to`
    /// (another expression of the same value: a size read back from a
    /// computed tensor against the sizes it was computed from, `n // 2`
    /// pairs of a count `n`), checked equal to it when the program runs
    /// and given the count `to`. `None` when they can never be equal, or
    /// when `to` cannot be written on the input's one dynamic dimension.
    #[track_caller]
    fn counting(
        &self,
        input: &[SizeExpr],
        from: &SizeExpr,
        to: &SizeExpr,
        others: &[Arc<Node>],
    ) -> Option<Tensor> {
        if SizeCheck::equal("reshape_sym", from, to).decided() == Some(false) {
            return None;
        }
        let dynamic: Vec<usize> = (0..input.len())
            .filter(|&d| input[d].as_const().is_none())
            .collect();
        let statics: i64 = input.iter().filter_map(SizeExpr::as_const).product();
        let [d] = dynamic[..] else { return None };
        if statics <= 0 {
            return None;
        }
        let mut target: Shape = input.iter().cloned().collect();
        target[d] = to.floor_div(&SizeExpr::constant(statics));
        if target[d].scale(statics) != *to {
            return None;
        }
        let same = SizeCheck::equal("reshape_sym", &input[d], &target[d]);
        let node = super::guard::guard_node(&self.input_node(), target, vec![same], others)
            .unwrap_or_else(|e| panic!("{e}"));
        Some(Tensor::from_node(node, self.device()))
    }

    /// Reshape to size expressions; `others` may define their variables.
    #[track_caller]
    pub(crate) fn reshape_exprs(&self, shape: Shape, others: &[&Tensor]) -> Tensor {
        let candidates: Vec<_> = others.iter().map(|t| t.node()).collect();
        self.reshape_to(shape, &candidates)
    }

    /// Reshape to size expressions; `candidates` may define their variables.
    #[track_caller]
    fn reshape_to(&self, shape: Shape, candidates: &[Arc<Node>]) -> Tensor {
        if shape == self.shape_exprs() {
            return self.clone();
        }
        let deps = size_deps_for(&shape, candidates);
        Tensor::apply(Op::Reshape { shape }, &[self], deps)
    }

    /// All elements in one dimension.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::arange(6).reshape(&[2, 3]);
    /// assert_eq!(x.flatten().concrete_shape().unwrap(), vec![6]);
    /// ```
    #[track_caller]
    pub fn flatten(&self) -> Tensor {
        self.reshape(&[-1])
    }

    /// Dims `start..=end` merged into one, as `torch.flatten(x,
    /// start_dim, end_dim)` (negative dims count from the end); dynamic
    /// sizes multiply. A scalar becomes `[1]`.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::zeros(&[2, 3, 4, 5], DType::F32);
    /// assert_eq!(x.flatten_dims(1, 2).shape_string(), "[2, 12, 5]");
    /// assert_eq!(x.flatten_dims(1, -1).shape_string(), "[2, 60]");
    /// assert_eq!(x.flatten_dims(0, 0).shape_string(), "[2, 3, 4, 5]");
    /// ```
    #[track_caller]
    pub fn flatten_dims(&self, start: impl DimIndex, end: impl DimIndex) -> Tensor {
        let shape = self.shape_exprs();
        if shape.is_empty() {
            return self.reshape(&[1]);
        }
        let s = start.resolve("flatten_dims", &shape);
        let e = end.resolve("flatten_dims", &shape);
        if s > e {
            panic!(
                "flatten_dims: start dim {s} comes after end dim {e} (shape {})",
                shape_string(&shape)
            );
        }
        let sizes = self.sizes();
        let merged = sizes[s..=e]
            .iter()
            .fold(SymInt::from(1i64), |acc, d| &acc * d);
        let mut out: Vec<SymInt> = sizes[..s].to_vec();
        out.push(merged);
        out.extend_from_slice(&sizes[e + 1..]);
        self.reshape_sym(&out)
    }

    /// Dimensions reordered: output dim `i` is input dim `perm[i]`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::arange(6).reshape(&[1, 2, 3]);
    /// assert_eq!(x.permute(&[2, 0, 1]).concrete_shape().unwrap(), vec![3, 1, 2]);
    /// ```
    #[track_caller]
    pub fn permute<D: DimIndex>(&self, perm: &[D]) -> Tensor {
        let shape = self.shape_exprs();
        if perm.len() != shape.len() {
            panic!(
                "permute: {} dims given for a tensor of rank {} (shape {})",
                perm.len(),
                shape.len(),
                shape_string(&shape)
            );
        }
        let p: Vec<usize> = perm.iter().map(|d| d.resolve("permute", &shape)).collect();
        let mut seen = vec![false; p.len()];
        for &d in &p {
            if std::mem::replace(&mut seen[d], true) {
                panic!(
                    "permute: {:?} names dimension {d} twice; it must list each dim of the tensor (shape {}) once",
                    perm.iter().map(|d| d.signed()).collect::<Vec<_>>(),
                    shape_string(&shape)
                );
            }
        }
        if p.iter().enumerate().all(|(i, &d)| i == d) {
            return self.clone();
        }
        Tensor::apply(Op::Transpose { perm: p }, &[self], SmallVec::new())
    }

    /// Dimensions `d0` and `d1` swapped.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::arange(6).reshape(&[2, 3]);
    /// assert_eq!(x.transpose(0, 1).to_vec::<i64>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    /// ```
    #[track_caller]
    pub fn transpose(&self, d0: impl DimIndex, d1: impl DimIndex) -> Tensor {
        let shape = self.shape_exprs();
        let (a, b) = (
            d0.resolve("transpose", &shape),
            d1.resolve("transpose", &shape),
        );
        let mut perm: Vec<usize> = (0..shape.len()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// A size-1 dimension inserted at `dim` (in `0..=rank`).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::arange(3);
    /// assert_eq!(x.unsqueeze(0).concrete_shape().unwrap(), vec![1, 3]);
    /// assert_eq!(x.unsqueeze(-1).concrete_shape().unwrap(), vec![3, 1]);
    /// ```
    #[track_caller]
    pub fn unsqueeze(&self, dim: impl DimIndex) -> Tensor {
        let mut shape = self.shape_exprs();
        let d = resolve_in(dim.signed(), "unsqueeze", &shape, shape.len() + 1);
        shape.insert(d, SizeExpr::constant(1));
        self.reshape_exprs(shape, &[self])
    }

    /// Dimension `dim` removed if its size is 1; otherwise the tensor is
    /// returned unchanged (as in PyTorch; a dynamic dim is never removed).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::arange(3).reshape(&[1, 3]);
    /// assert_eq!(x.squeeze(0).concrete_shape().unwrap(), vec![3]);
    /// ```
    #[track_caller]
    pub fn squeeze(&self, dim: impl DimIndex) -> Tensor {
        let mut shape = self.shape_exprs();
        let d = dim.resolve("squeeze", &shape);
        if shape[d].as_const() != Some(1) {
            return self.clone();
        }
        shape.remove(d);
        self.reshape_exprs(shape, &[self])
    }

    /// This tensor repeated along size-1 dims to `sizes` (right-aligned,
    /// new leading dims allowed). A size of `-1` keeps the dim; sizes may be
    /// dynamic.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 2]).unwrap();
    /// let y = x.expand(&[3.into(), 2.into()]);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn expand(&self, sizes: &[SymInt]) -> Tensor {
        let input = self.shape_exprs();
        if sizes.len() < input.len() {
            panic!(
                "expand: {} sizes given for a tensor of rank {} (shape {})",
                sizes.len(),
                input.len(),
                shape_string(&input)
            );
        }
        let offset = sizes.len() - input.len();
        let target: Shape = sizes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if s.as_static() == Some(-1) && i >= offset {
                    return input[i - offset].clone();
                }
                if let Some(n) = s.as_static().filter(|&n| n < 0) {
                    panic!(
                        "expand: size {n} at position {i} of {sizes:?} is invalid for a tensor of shape {}; sizes are non-negative, and -1 (keep the size) is only allowed for the tensor's own {} trailing dims",
                        shape_string(&input),
                        input.len()
                    );
                }
                clamp_size(&s.expr)
            })
            .collect();
        if target == input {
            return self.clone();
        }
        // A size that may be negative is checked when the program runs.
        let exprs: Vec<SizeExpr> = sizes
            .iter()
            .filter(|s| s.as_static() != Some(-1))
            .map(|s| s.expr.clone())
            .collect();
        let checks =
            super::guard::non_negative_checks("expand", &exprs).unwrap_or_else(|e| panic!("{e}"));
        let mut candidates = vec![self.node()];
        candidates.extend(sizes.iter().flat_map(|s| s.anchors.iter().cloned()));
        let x =
            super::guard::unify_for_broadcast("expand", &self.input_node(), &target, &candidates)
                .unwrap_or_else(|e| panic!("{e}"));
        let deps = size_deps_for(&target, &candidates);
        let out = Tensor::from_node(x, self.device());
        let out = if out.shape_exprs() == target {
            out
        } else {
            Tensor::apply(
                Op::Broadcast {
                    shape: target.clone(),
                    dims: (offset..target.len()).collect(),
                },
                &[&out],
                deps,
            )
        };
        out.checked(checks, &candidates)
    }

    /// Tensors joined along `dim` (dtypes promote; other dims must match).
    /// Along a dynamic dim the size is the sum of the sizes.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![3.0f32], &[1]).unwrap();
    /// assert_eq!(Tensor::cat(&[&a, &b], 0).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], dim: impl DimIndex) -> Tensor {
        let first = tensors
            .first()
            .unwrap_or_else(|| panic!("cat: needs at least one tensor"));
        let d = dim.resolve("cat", &first.shape_exprs());
        let prio: Vec<_> = tensors
            .iter()
            .map(|t| (t.dtype(), Priority::Dimensioned))
            .collect();
        let dt = result_type(&prio);
        let mut converted: Vec<Tensor> = tensors.iter().map(|t| t.to_dtype(dt)).collect();
        if converted.len() == 1 {
            return converted[0].clone();
        }
        // Sizes off the axis: equal, or checked equal when the program runs
        // (each tensor takes the first one's, on tensors of one rank).
        let first = converted[0].clone();
        let lead = first.shape_exprs();
        for t in converted.iter_mut().skip(1) {
            let mut target = t.shape_exprs();
            if target.len() != lead.len() {
                continue; // inference names the rank mismatch
            }
            let mut refuted = false;
            for (k, size) in target.iter_mut().enumerate() {
                if k != d {
                    refuted |= SizeCheck::equal("cat", &lead[k], size).decided() == Some(false);
                    *size = lead[k].clone();
                }
            }
            if !refuted {
                // (A refuted pair is left to inference, which names both
                // operands' shapes.)
                *t = t.unify_to("cat", &target, &[&first]);
            }
        }
        let refs: Vec<&Tensor> = converted.iter().collect();
        Tensor::apply(Op::Concat { dim: d }, &refs, SmallVec::new())
    }

    /// Tensors of one shape stacked along a new dimension `dim`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// let b = Tensor::from_vec(vec![3.0f32, 4.0], &[2]).unwrap();
    /// let s = Tensor::stack(&[&a, &b], 0);
    /// assert_eq!(s.concrete_shape().unwrap(), vec![2, 2]);
    /// assert_eq!(s.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], dim: impl DimIndex) -> Tensor {
        let first = tensors
            .first()
            .unwrap_or_else(|| panic!("stack: needs at least one tensor"));
        let shape = first.shape_exprs();
        let d = resolve_in(dim.signed(), "stack", &shape, shape.len() + 1);
        for t in &tensors[1..] {
            let other = t.shape_exprs();
            if other.len() != shape.len() {
                panic!(
                    "stack: all tensors need the same shape; got {} and {} (different ranks)",
                    shape_string(&shape),
                    shape_string(&other)
                );
            }
            let refuted = shape
                .iter()
                .zip(&other)
                .find(|(x, y)| SizeCheck::equal("stack", x, y).decided() == Some(false));
            if let Some((x, y)) = refuted {
                panic!(
                    "{}",
                    crate::ir::infer::size_mismatch("stack", x, y, &shape, &other)
                );
            }
            // Sizes not proven equal are checked by `cat`.
        }
        let expanded: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(d)).collect();
        let refs: Vec<&Tensor> = expanded.iter().collect();
        Tensor::cat(&refs, d)
    }

    /// `len` elements from `start` along `dim`, as PyTorch's `narrow`:
    /// running past the end is an error. Along a dynamic dim the result
    /// has the static size `len`, and the program checks when it runs
    /// that the real size holds `start + len` elements (a failed check is
    /// an `Err` from `mark_step` or the read); use
    /// [`slice`](Tensor::slice) to take at most `len`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
    /// assert_eq!(x.narrow(0, 1, 2).to_vec::<f32>().unwrap(), [2.0, 3.0]);
    /// let real = x.gt_scalar(1.5).nonzero().flatten(); // [<=4], 3 real
    /// assert_eq!(real.narrow(0, 0, 2).to_vec::<i64>().unwrap(), [1, 2]);
    /// assert!(real.narrow(0, 0, 4).to_vec::<i64>().is_err()); // only 3
    /// ```
    #[track_caller]
    pub fn narrow(&self, dim: impl DimIndex, start: usize, len: usize) -> Tensor {
        let shape = self.shape_exprs();
        let d = dim.resolve("narrow", &shape);
        let sliced = Tensor::apply(Op::Slice { dim: d, start, len }, &[self], SmallVec::new());
        if shape[d].as_const().is_some() {
            return sliced;
        }
        let mut want = sliced.shape_exprs();
        want[d] = SizeExpr::constant(len as i64);
        sliced.unify_to("narrow", &want, &[])
    }

    /// The elements in `range` along `dim`, as Python's `x[start:end]`:
    /// the range is clamped to the size, so it never fails. Along a
    /// dynamic dim the result is dynamic, bounded by the range's length,
    /// and holds the real elements in the range: the first `k` of a
    /// `[<=N]` tensor (`x.slice(0, ..k)`, what detection code writes as
    /// `keep[:k]`) has `min(n, k)` elements.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![5i64, 6, 7, 8, 9], &[5]).unwrap();
    /// assert_eq!(x.slice(0, 1..3).to_vec::<i64>().unwrap(), [6, 7]);
    /// assert_eq!(x.slice(0, 3..).to_vec::<i64>().unwrap(), [8, 9]);
    /// assert_eq!(x.slice(0, ..10).to_vec::<i64>().unwrap(), [5, 6, 7, 8, 9]);
    /// let kept = x.gt_scalar(6.0).nonzero().flatten(); // [<=5], 3 real
    /// let first = kept.slice(0, ..2);
    /// assert_eq!(first.size(0).to_string(), "<=2");
    /// assert_eq!(first.to_vec::<i64>().unwrap(), [2, 3]);
    /// ```
    #[track_caller]
    pub fn slice(&self, dim: impl DimIndex, range: impl std::ops::RangeBounds<usize>) -> Tensor {
        use std::ops::Bound;
        let shape = self.shape_exprs();
        let d = dim.resolve("slice", &shape);
        let size = &shape[d];
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => usize::MAX,
        };
        let (start, end) = match size.as_const() {
            Some(n) => {
                let n = n as usize;
                (start.min(n), end.min(n))
            }
            None => (start, end.min(size.hi().max(0) as usize)),
        };
        let len = end.saturating_sub(start);
        Tensor::apply(Op::Slice { dim: d, start, len }, &[self], SmallVec::new())
    }

    /// The elements from `start` to `end` along `dim`, as Python's
    /// `x[start:end]` where the bounds may be sizes known only when the
    /// program runs (`x[:n]` with `n = lengths.size(0)`, a `SymInt`). The
    /// bounds are clamped to `[0, size]` (an `end` before `start` gives no
    /// elements), so it never fails; a negative static bound counts from
    /// the end. The result's size along `dim` is `end - start`, dynamic
    /// when a bound is, and one program serves every value. Gradients flow
    /// back to the selected elements.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![5i64, 6, 7, 8, 9], &[5]).unwrap();
    /// let kept = x.gt_scalar(6.5).nonzero().flatten(); // [<=5], 3 real
    /// let n = kept.size(0); // a size known when the program runs: 3
    /// let head = x.slice_sym(0, 0, &n); // x[:n]
    /// assert_eq!(head.size(0).to_string(), "<=5");
    /// assert_eq!(head.to_vec::<i64>().unwrap(), [5, 6, 7]);
    /// assert_eq!(x.slice_sym(0, 1, &n + 10).to_vec::<i64>().unwrap(), [6, 7, 8, 9]);
    /// assert_eq!(x.slice_sym(0, -2, 5).to_vec::<i64>().unwrap(), [8, 9]);
    /// ```
    #[track_caller]
    pub fn slice_sym(
        &self,
        dim: impl DimIndex,
        start: impl Into<SymInt>,
        end: impl Into<SymInt>,
    ) -> Tensor {
        let shape = self.shape_exprs();
        let d = dim.resolve("slice_sym", &shape);
        let size = self.size(d);
        let wrap = |b: SymInt| match b.as_static() {
            Some(v) if v < 0 => &size + v,
            _ => b,
        };
        let start = wrap(start.into()).max(0).min(&size);
        let end = wrap(end.into()).min(&size).max(&start);
        let len = &end - &start;
        if let (Some(s), Some(l)) = (start.as_static(), len.as_static()) {
            return self.narrow(d, s as usize, l as usize);
        }
        let index = &Tensor::arange_sym(&len) + &Tensor::scalar_sym(&start);
        self.index_select(d, &index)
    }
}
