//! Generic array kernels for the interpreter.
//!
//! The reference sums floats pairwise (`sum`), as XLA and NumPy do, so
//! the oracle is at least as precise as XLA. Transcendentals legitimately
//! differ by an ulp between backends (XLA's CPU `tanh` is exactly 1.0 from
//! |x| ≈ 7.9, libm's and PyTorch's from ≈ 9.0); the reference keeps
//! PyTorch's answer, and the differential test steers clear of such values.
//! An index out of range is an error here; on XLA a gather clamps it and a
//! scatter drops the update.

use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn};

/// Arithmetic on the numeric element types, with XLA's semantics where
/// they differ from Rust's (integer division by zero gives -1 or the
/// dividend instead of panicking; shifts wrap).
pub(crate) trait Num:
    Copy + PartialOrd + Default + Send + Sync + std::fmt::Debug + 'static
{
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn rem(self, o: Self) -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! num_float {
    ($t:ty) => {
        impl Num for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn rem(self, o: Self) -> Self {
                // Sign of the divisor, as PyTorch's remainder.
                let r = self % o;
                if r != 0.0 && ((r < 0.0) != (o < 0.0)) {
                    r + o
                } else {
                    r
                }
            }
            fn lowest() -> Self {
                <$t>::NEG_INFINITY
            }
            fn highest() -> Self {
                <$t>::INFINITY
            }
            fn neg(self) -> Self {
                -self
            }
            fn abs(self) -> Self {
                self.abs()
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else {
                    self
                }
            }
        }
    };
}

macro_rules! num_int {
    ($t:ty) => {
        impl Num for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    -1
                } else {
                    self.wrapping_div(o)
                }
            }
            fn rem(self, o: Self) -> Self {
                if o == 0 {
                    return self;
                }
                let r = self.wrapping_rem(o);
                if r != 0 && ((r < 0) != (o < 0)) {
                    r + o
                } else {
                    r
                }
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn highest() -> Self {
                <$t>::MAX
            }
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
            fn sign(self) -> Self {
                self.signum()
            }
            fn is_nan(self) -> bool {
                false
            }
        }
    };
}

num_float!(f32);
num_float!(f64);
num_int!(i32);
num_int!(i64);

/// `a op b` elementwise for equal shapes.
pub(crate) fn zip<T: Copy, U>(a: &ArrayD<T>, b: &ArrayD<T>, f: impl Fn(T, T) -> U) -> ArrayD<U> {
    ndarray::Zip::from(a).and(b).map_collect(|&x, &y| f(x, y))
}

/// Reduces `dims` (sorted) with `f` from `init`.
pub(crate) fn reduce<T: Copy>(
    a: &ArrayD<T>,
    dims: &[usize],
    init: T,
    f: impl Fn(T, T) -> T,
) -> ArrayD<T> {
    let mut out = a.clone();
    for &d in dims.iter().rev() {
        out = out.fold_axis(Axis(d), init, |&acc, &x| f(acc, x));
    }
    out
}

/// Sums `dims` (sorted) pairwise, as XLA and NumPy do for floats: the
/// rounding error grows with the logarithm of the count, not the count
/// (a naive f32 sum of 1.0 and 10⁷ values of 1e-8 stays 1.0).
pub(crate) fn sum<T: Num>(a: &ArrayD<T>, dims: &[usize]) -> ArrayD<T> {
    if dims.is_empty() {
        return a.clone();
    }
    // Kept dims first, reduced dims last: each output is one contiguous run.
    let kept: Vec<usize> = (0..a.ndim()).filter(|d| !dims.contains(d)).collect();
    let perm: Vec<usize> = kept.iter().chain(dims).copied().collect();
    let lanes = a.view().permuted_axes(IxDyn(&perm));
    let lanes = lanes.as_standard_layout();
    let flat = lanes.as_slice().expect("standard layout");
    let out_shape: Vec<usize> = kept.iter().map(|&d| a.shape()[d]).collect();
    let run: usize = dims.iter().map(|&d| a.shape()[d]).product();
    let out: Vec<T> = if run == 0 {
        vec![T::default(); out_shape.iter().product()]
    } else {
        flat.chunks(run).map(pairwise_sum).collect()
    };
    ArrayD::from_shape_vec(IxDyn(&out_shape), out).expect("shape matches")
}

/// The sum of `v` by halves, with a plain loop below 16 elements.
fn pairwise_sum<T: Num>(v: &[T]) -> T {
    if v.len() <= 16 {
        return v.iter().fold(T::default(), |acc, &x| acc.add(x));
    }
    let (lo, hi) = v.split_at(v.len() / 2);
    pairwise_sum(lo).add(pairwise_sum(hi))
}

/// Index of the first extremum along `dim`, PyTorch's way: the first NaN
/// wins over every number (NaN propagates, as in `max`); otherwise
/// `better(x, best)` says when `x` replaces the current best.
pub(crate) fn arg_reduce<T: Num>(
    a: &ArrayD<T>,
    dim: usize,
    better: impl Fn(T, T) -> bool,
) -> ArrayD<i64> {
    a.map_axis(Axis(dim), |lane| {
        let mut best = 0usize;
        for (i, &x) in lane.iter().enumerate().skip(1) {
            let b = lane[best];
            if !b.is_nan() && (x.is_nan() || better(x, b)) {
                best = i;
            }
        }
        best as i64
    })
}

/// The stable sorting permutation of each lane along `dim`, PyTorch's
/// order: NaN is larger than every number (and equal to NaN), equal
/// elements keep their order, ascending or `descending`.
pub(crate) fn argsort<T: PartialOrd + Copy>(
    a: &ArrayD<T>,
    dim: usize,
    descending: bool,
) -> ArrayD<i64> {
    #[allow(clippy::eq_op)]
    let nan = |x: &T| x != x;
    let order = |x: &T, y: &T| x.partial_cmp(y).unwrap_or_else(|| nan(x).cmp(&nan(y)));
    let mut out = ArrayD::<i64>::zeros(a.raw_dim());
    let mut perm: Vec<usize> = Vec::new();
    ndarray::Zip::from(a.lanes(Axis(dim)))
        .and(out.lanes_mut(Axis(dim)))
        .for_each(|lane, mut o| {
            perm.clear();
            perm.extend(0..lane.len());
            // `sort_by` is stable: ties keep the lower index first.
            if descending {
                perm.sort_by(|&i, &j| order(&lane[j], &lane[i]));
            } else {
                perm.sort_by(|&i, &j| order(&lane[i], &lane[j]));
            }
            for (o, &p) in o.iter_mut().zip(&perm) {
                *o = p as i64;
            }
        });
    out
}

/// The first `k` entries of each lane of `a` along `dim`; a lane shorter
/// than `k` (a dynamic size the program checks, see `Op::Argsort`) is
/// filled with zeros, never read past.
pub(crate) fn first_along(a: &ArrayD<i64>, dim: usize, k: usize) -> ArrayD<i64> {
    let mut shape = a.shape().to_vec();
    let n = shape[dim];
    shape[dim] = k;
    let mut out = ArrayD::<i64>::zeros(shape);
    let take = k.min(n);
    out.slice_axis_mut(Axis(dim), ndarray::Slice::from(0..take))
        .assign(&a.slice_axis(Axis(dim), ndarray::Slice::from(0..take)));
    out
}

/// `dot_general` with `dot`'s dims: both operands are laid out as
/// `[batch, free, contracted]` and `[batch, contracted, free]` (contracted
/// dims in pair order), flattened to `[B, m, k]` and `[B, k, n]`, and
/// multiplied; the result `[B, m, n]` has the shape `[batch.., lhs
/// free.., rhs free..]`.
pub(crate) fn dot_general<T: Num>(a: &ArrayD<T>, b: &ArrayD<T>, dot: &crate::ir::Dot) -> ArrayD<T> {
    let nb = dot.batch;
    let (lf, rf) = (dot.lhs_free(a.ndim()), dot.rhs_free(b.ndim()));
    let pa: Vec<usize> = (0..nb)
        .chain(lf.iter().copied())
        .chain(dot.lhs_contract.iter().copied())
        .collect();
    let pb: Vec<usize> = (0..nb)
        .chain(dot.rhs_contract.iter().copied())
        .chain(rf.iter().copied())
        .collect();
    let size =
        |x: &ArrayD<T>, dims: &[usize]| dims.iter().map(|&d| x.shape()[d]).product::<usize>();
    let batch = size(a, &(0..nb).collect::<Vec<_>>());
    let (m, k, n) = (size(a, &lf), size(a, &dot.lhs_contract), size(b, &rf));
    let av: Vec<T> = a.view().permuted_axes(IxDyn(&pa)).iter().copied().collect();
    let bv: Vec<T> = b.view().permuted_axes(IxDyn(&pb)).iter().copied().collect();
    let mut out = vec![T::default(); batch * m * n];
    for bi in 0..batch {
        let (ao, bo, oo) = (bi * m * k, bi * k * n, bi * m * n);
        for i in 0..m {
            for p in 0..k {
                let x = av[ao + i * k + p];
                let row = &bv[bo + p * n..bo + p * n + n];
                let dst = &mut out[oo + i * n..oo + i * n + n];
                for (d, &y) in dst.iter_mut().zip(row) {
                    *d = d.add(x.mul(y));
                }
            }
        }
    }
    let mut shape = a.shape()[..nb].to_vec();
    shape.extend(lf.iter().map(|&d| a.shape()[d]));
    shape.extend(rf.iter().map(|&d| b.shape()[d]));
    ArrayD::from_shape_vec(IxDyn(&shape), out).expect("shape matches")
}

/// Coordinates of nonzero elements in row-major order, `[count, rank]`.
pub(crate) fn nonzero<T: Copy>(a: &ArrayD<T>, is_nonzero: impl Fn(T) -> bool) -> ArrayD<i64> {
    let rank = a.ndim();
    let mut coords = Vec::new();
    let mut count = 0;
    for (idx, &x) in a.indexed_iter() {
        if is_nonzero(x) {
            coords.extend((0..rank).map(|d| idx[d] as i64));
            count += 1;
        }
    }
    ArrayD::from_shape_vec(IxDyn(&[count, rank]), coords).expect("shape matches")
}

/// Elements where `mask` holds, row-major.
pub(crate) fn masked_select<T: Copy>(a: &ArrayD<T>, mask: &ArrayD<bool>) -> ArrayD<T> {
    let v: Vec<T> = a
        .iter()
        .zip(mask.iter())
        .filter(|(_, &m)| m)
        .map(|(&x, _)| x)
        .collect();
    let n = v.len();
    ArrayD::from_shape_vec(IxDyn(&[n]), v).expect("shape matches")
}

/// Sorted distinct values (NaNs, which equal nothing, sort last and stay
/// distinct, as `torch.unique` does).
pub(crate) fn unique<T: Num>(a: &ArrayD<T>) -> ArrayD<T> {
    let mut v: Vec<T> = a.iter().copied().collect();
    v.sort_by(|x, y| {
        x.partial_cmp(y)
            .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan()))
    });
    v.dedup_by(|x, y| x == y);
    let n = v.len();
    ArrayD::from_shape_vec(IxDyn(&[n]), v).expect("shape matches")
}

/// How often each value of `u` occurs in `a`.
pub(crate) fn unique_counts<T: Num>(a: &ArrayD<T>, u: &ArrayD<T>) -> ArrayD<i64> {
    u.mapv(|x| a.iter().filter(|&&y| y == x).count() as i64)
}

/// Positions of `a` with `index[p]` substituted at `dim`, for gather and
/// scatter.
pub(crate) fn with_index(p: &IxDyn, dim: usize, i: usize) -> IxDyn {
    let mut q = p.clone();
    q[dim] = i;
    q
}

/// Checks an index against a size and converts it.
pub(crate) fn check_index(op: &'static str, i: i64, size: usize) -> crate::error::Result<usize> {
    if i < 0 || i as usize >= size {
        Err(super::err(
            op,
            format!("{op}: index {i} is out of range for a dimension of size {size}"),
        ))
    } else {
        Ok(i as usize)
    }
}

/// A view as a dynamic-dim array view (helper for slicing params).
pub(crate) fn slice_to<T: Clone>(a: &ArrayD<T>, sizes: &[usize]) -> ArrayD<T> {
    let view: ArrayViewD<'_, T> =
        a.slice_each_axis(|ax| ndarray::Slice::from(0..sizes[ax.axis.index()]));
    view.to_owned()
}
