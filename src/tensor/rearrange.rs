//! Rearranging elements: `pad`, `split`, `chunk`, `repeat`, `flip`,
//! `roll`, `select`, `unbind`.
//!
//! All but `flip` are compositions of slices, concatenations,
//! broadcasts and gathers, whose lowerings already keep a dynamic dim's
//! padding out of the result; `flip` is `Op::Reverse` (one
//! `stablehlo.reverse`, plus a shift along a dynamic dim). `split` and
//! `chunk` need a static dim: how many tensors they return depends on its
//! size. `select` is a slice of length one with the dim dropped, and
//! `unbind` is every such slice of a static dim.

use super::dim::{DimIndex, ResolveDim};
use super::Tensor;
use crate::error::Error;
use crate::ir::node::shape_string;
use crate::ir::Op;
use crate::symint::{Shape, SizeExpr};
use smallvec::SmallVec;

/// A `usize` size as an expression (saturating, so an absurd size is
/// rejected by inference as too large instead of wrapping negative).
#[track_caller]
fn size(n: usize) -> SizeExpr {
    SizeExpr::constant(i64::try_from(n).unwrap_or(i64::MAX))
}

impl Tensor {
    /// `self` padded with `value`: `pads[d] = (before, after)` elements
    /// are added around dim `d`, for the leading `pads.len()` dims (from
    /// dim 0, unlike PyTorch's `F.pad`, which lists the last dim first).
    /// `value` is converted to the dtype. A dynamic dim may be padded: the
    /// result's size is `before + n + after`, with the real elements in
    /// between. The gradient is the unpadded part of the output's.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).unwrap();
    /// let y = x.pad(&[(1, 0), (0, 1)], -1.0);
    /// assert_eq!(y.upper_bounds(), vec![3, 3]);
    /// assert_eq!(y.to_vec::<i64>().unwrap(), vec![-1, -1, -1, 1, 2, -1, 3, 4, -1]);
    /// ```
    #[track_caller]
    pub fn pad(&self, pads: &[(usize, usize)], value: f64) -> Tensor {
        if pads.len() > self.rank() {
            panic!(
                "{}",
                Error::invalid(
                    "pad",
                    format!(
                        "{} (before, after) pairs given for a tensor of rank {} (shape {}); give at most one pair per dim, from dim 0",
                        pads.len(),
                        self.rank(),
                        self.shape_string()
                    )
                )
            );
        }
        let mut x = self.clone();
        for (d, &(before, after)) in pads.iter().enumerate() {
            if before == 0 && after == 0 {
                continue;
            }
            let filled = |n: usize| {
                let mut shape = x.shape_exprs();
                shape[d] = size(n);
                x.filled_like(shape, value)
            };
            let mut parts = Vec::with_capacity(3);
            if before > 0 {
                parts.push(filled(before));
            }
            parts.push(x.clone());
            if after > 0 {
                parts.push(filled(after));
            }
            let refs: Vec<&Tensor> = parts.iter().collect();
            x = Tensor::cat(&refs, d);
        }
        x
    }

    /// A constant tensor of `shape` (whose dynamic sizes are this
    /// tensor's) with this tensor's dtype and device.
    #[track_caller]
    fn filled_like(&self, shape: Shape, value: f64) -> Tensor {
        let node = self.node();
        let deps = super::size_deps_for(&shape, std::slice::from_ref(&node));
        Tensor::full_exprs(shape, value, self.dtype(), deps, self.device())
    }

    /// Pieces of `size` elements along `dim` (PyTorch's `split` with one
    /// size): the last may be smaller; a dim of size 0 gives one empty
    /// piece. The dim must be static (the number of pieces depends on its
    /// size): on a dynamic dim this panics suggesting `pad_to_bound(fill)`
    /// or `materialize()`. Other dims may be dynamic. A `size` of 0
    /// panics unless the dim is empty.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((0..5).collect::<Vec<i64>>(), &[5]).unwrap();
    /// let parts = x.split(2, 0);
    /// assert_eq!(parts.len(), 3);
    /// assert_eq!(parts[2].to_vec::<i64>().unwrap(), vec![4]);
    /// ```
    #[track_caller]
    pub fn split(&self, size: usize, dim: impl DimIndex) -> Vec<Tensor> {
        if let Some(x) = self.with_automatic_static() {
            return x.split(size, dim);
        }
        let (d, n) = self.static_dim("split", dim);
        if size == 0 {
            if n != 0 {
                panic!(
                    "{}",
                    Error::invalid(
                        "split",
                        format!(
                            "a split size of 0 needs an empty dim, but dim {d} of shape {} has size {n}; pass a positive size",
                            self.shape_string()
                        )
                    )
                );
            }
            return vec![self.clone()];
        }
        if size >= n {
            return vec![self.clone()];
        }
        (0..n)
            .step_by(size)
            .map(|start| self.narrow(d, start, size.min(n - start)))
            .collect()
    }

    /// `chunks` pieces along `dim` as PyTorch's `chunk`: pieces of
    /// `ceil(n / chunks)` elements, the last smaller, so there may be
    /// fewer than `chunks` of them (an empty dim gives `chunks` empty
    /// pieces). The dim must be static, as for [`split`](Tensor::split);
    /// `chunks` must be positive.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((0..6).collect::<Vec<i64>>(), &[2, 3]).unwrap();
    /// let parts = x.chunk(2, 1);
    /// assert_eq!(parts.len(), 2);
    /// assert_eq!(parts[0].to_vec::<i64>().unwrap(), vec![0, 1, 3, 4]);
    /// assert_eq!(parts[1].to_vec::<i64>().unwrap(), vec![2, 5]);
    /// ```
    #[track_caller]
    pub fn chunk(&self, chunks: usize, dim: impl DimIndex) -> Vec<Tensor> {
        if let Some(x) = self.with_automatic_static() {
            return x.chunk(chunks, dim);
        }
        let (d, n) = self.static_dim("chunk", dim);
        if chunks == 0 {
            panic!(
                "{}",
                Error::invalid(
                    "chunk",
                    format!(
                        "the number of chunks must be positive, got 0 (shape {})",
                        self.shape_string()
                    )
                )
            );
        }
        if n == 0 {
            return vec![self.clone(); chunks];
        }
        self.split(n.div_ceil(chunks), d)
    }

    /// `dim` resolved and its static size, or a panic naming `op` when it
    /// is dynamic.
    #[track_caller]
    fn static_dim(&self, op: &'static str, dim: impl DimIndex) -> (usize, usize) {
        let shape = self.shape_exprs();
        let d = dim.resolve(op, &shape);
        match shape[d].as_const() {
            Some(n) => (d, n as usize),
            None => panic!(
                "{}",
                Error::DynamicUnsupported {
                    op,
                    dim: d,
                    shape: shape_string(&shape)
                }
            ),
        }
    }

    /// `self` tiled `repeats[i]` times along each dim (PyTorch's
    /// `repeat`): `repeats` has at least one entry per dim, and extra
    /// leading entries add leading dims. A static tensor is broadcast
    /// into place and reshaped (one copy, whatever the counts); a tensor
    /// with dynamic dims is concatenated with itself, so its cost grows
    /// with the counts, and a dynamic dim repeated `r` times has `r` times
    /// its size. The gradient sums over the copies.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    /// let y = x.repeat(&[2, 2]);
    /// assert_eq!(y.upper_bounds(), vec![2, 4]);
    /// assert_eq!(y.to_vec::<i64>().unwrap(), vec![1, 2, 1, 2, 1, 2, 1, 2]);
    /// ```
    #[track_caller]
    pub fn repeat(&self, repeats: &[usize]) -> Tensor {
        let r = self.rank();
        if repeats.len() < r {
            panic!(
                "{}",
                Error::invalid(
                    "repeat",
                    format!(
                        "{} repeat counts given for a tensor of rank {} (shape {}); give one per dim (extra leading counts add dims)",
                        repeats.len(),
                        r,
                        self.shape_string()
                    )
                )
            );
        }
        let mut shape: Shape = (0..repeats.len() - r).map(|_| size(1)).collect();
        shape.extend(self.shape_exprs());
        let x = self.reshape_exprs(shape.clone(), &[self]);
        if repeats.iter().all(|&k| k == 1) {
            return x;
        }
        if !x.is_dynamic() {
            // [.., n, ..] -> [.., 1, n, ..] -> [.., k, n, ..] -> [.., k*n, ..]
            let mut spread = Shape::new();
            let mut tiled = Shape::new();
            for (n, &k) in shape.iter().zip(repeats) {
                spread.extend([size(1), n.clone()]);
                tiled.extend([size(k), n.clone()]);
            }
            let out: Shape = shape
                .iter()
                .zip(repeats)
                .map(|(n, &k)| n.mul(&size(k)))
                .collect();
            let t = x.reshape_exprs(spread, &[&x]).broadcast_to(&tiled, &[&x]);
            return t.reshape_exprs(out, &[&x]);
        }
        let mut out = x;
        for (d, &k) in repeats.iter().enumerate() {
            out = match k {
                1 => out,
                // An empty index: size 0 along `d`, whether `d` is dynamic.
                0 => {
                    let none = out.device().scoped(|| Tensor::arange(0));
                    out.index_select(d, &none)
                }
                _ => Tensor::cat(&vec![&out; k], d),
            };
        }
        out
    }

    /// The elements in reverse order along each of `dims` (PyTorch's
    /// `flip`). Along a dynamic dim only the real elements are reversed.
    /// A dim listed twice panics, as in PyTorch.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((0..6).collect::<Vec<i64>>(), &[2, 3]).unwrap();
    /// assert_eq!(x.flip(&[1]).to_vec::<i64>().unwrap(), vec![2, 1, 0, 5, 4, 3]);
    /// let v = x.flatten().masked_select(&x.flatten().lt_scalar(4.0)); // 4 of at most 6
    /// assert_eq!(v.flip(&[0]).to_vec::<i64>().unwrap(), vec![3, 2, 1, 0]);
    /// ```
    #[track_caller]
    pub fn flip(&self, dims: &[usize]) -> Tensor {
        let shape = self.shape_exprs();
        let mut ds: Vec<usize> = dims.iter().map(|&d| d.resolve("flip", &shape)).collect();
        ds.sort_unstable();
        if let Some(w) = ds.windows(2).find(|w| w[0] == w[1]) {
            panic!(
                "{}",
                Error::invalid(
                    "flip",
                    format!(
                        "dim {} appears more than once in {dims:?} (shape {}); list each dim once",
                        w[0],
                        shape_string(&shape)
                    )
                )
            );
        }
        if ds.is_empty() {
            return self.clone();
        }
        Tensor::apply(Op::Reverse { dims: ds }, &[self], SmallVec::new())
    }

    /// The elements shifted `shift` places along `dim`, those pushed past
    /// the end coming back at the start (PyTorch's `roll` with one dim;
    /// a negative shift rolls the other way). Along a dynamic dim the real
    /// elements roll among themselves: element `i` goes to
    /// `(i + shift) mod n`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((0..5).collect::<Vec<i64>>(), &[5]).unwrap();
    /// assert_eq!(x.roll(2, 0).to_vec::<i64>().unwrap(), vec![3, 4, 0, 1, 2]);
    /// assert_eq!(x.roll(-1, 0).to_vec::<i64>().unwrap(), vec![1, 2, 3, 4, 0]);
    /// let v = x.masked_select(&x.gt_scalar(0.0)); // [1, 2, 3, 4] of at most 5
    /// assert_eq!(v.roll(1, 0).to_vec::<i64>().unwrap(), vec![4, 1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn roll(&self, shift: i64, dim: impl DimIndex) -> Tensor {
        let shape = self.shape_exprs();
        let d = dim.resolve("roll", &shape);
        match shape[d].as_const() {
            Some(0) => self.clone(),
            Some(n) => {
                // Two slices swapped: the last `s` elements, then the rest.
                let s = shift.rem_euclid(n) as usize;
                let n = n as usize;
                if s == 0 {
                    return self.clone();
                }
                Tensor::cat(&[&self.narrow(d, n - s, s), &self.narrow(d, 0, n - s)], d)
            }
            None => {
                // Output `i` reads `(i - shift) mod n`, computed as
                // `(i + n - shift mod n) mod n` so that nothing overflows.
                let n = shape[d].clone();
                let count = self.size_value(n.clone());
                let i = self.device().scoped(|| Tensor::arange_sym(&self.size(d)));
                let s = self.shift_scalar(shift).remainder(&count);
                let idx = (&(&i + &count) - &s).remainder(&count);
                self.index_select(d, &idx)
            }
        }
    }

    /// The slice at `index` along `dim` with that dim removed, as
    /// PyTorch's `x.select(dim, index)` (Python's `x[index]` for dim 0,
    /// `edge_index[1]`); a negative index counts from the end. Along a
    /// static dim an index out of range panics; along a dynamic dim a
    /// non-negative index is checked against the real size when the
    /// program runs (as [`narrow`](Tensor::narrow)), and so is a negative
    /// one, which counts back from the real size.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let e = Tensor::from_vec(vec![0i64, 1, 2, 1, 2, 0], &[2, 3]).unwrap();
    /// assert_eq!(e.select(0, 1).to_vec::<i64>().unwrap(), [1, 2, 0]);
    /// assert_eq!(e.select(1, -1).to_vec::<i64>().unwrap(), [2, 0]);
    /// let kept = e.select(0, 0).gt_scalar(0.0).nonzero().flatten(); // [<=3], 2 real
    /// assert_eq!(kept.select(0, -1).item::<i64>().unwrap(), 2);
    /// ```
    #[track_caller]
    pub fn select(&self, dim: impl DimIndex, index: i64) -> Tensor {
        let shape = self.shape_exprs();
        let d = dim.resolve("select", &shape);
        match shape[d].as_const() {
            Some(n) => {
                if index < -n || index >= n {
                    panic!(
                        "select: index {index} is out of range for dim {d} of size {n} (shape {})",
                        shape_string(&shape)
                    );
                }
                self.narrow(d, index.rem_euclid(n) as usize, 1).squeeze(d)
            }
            None if index >= 0 => self.narrow(d, index as usize, 1).squeeze(d),
            // From the real end: the real elements reversed (padding
            // stays behind them), then narrowed, which checks the size.
            None => self
                .flip(&[d])
                .narrow(d, (-(index + 1)) as usize, 1)
                .squeeze(d),
        }
    }

    /// Every slice along the static `dim`, that dim removed, as PyTorch's
    /// `unbind` (what Python writes as `row, col = edge_index`).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let e = Tensor::from_vec(vec![0i64, 1, 2, 1, 2, 0], &[2, 3]).unwrap();
    /// let [row, col] = <[Tensor; 2]>::try_from(e.unbind(0)).unwrap();
    /// assert_eq!(row.to_vec::<i64>().unwrap(), [0, 1, 2]);
    /// assert_eq!(col.to_vec::<i64>().unwrap(), [1, 2, 0]);
    /// ```
    #[track_caller]
    pub fn unbind(&self, dim: impl DimIndex) -> Vec<Tensor> {
        let (d, n) = self.static_dim("unbind", dim);
        (0..n as i64).map(|i| self.select(d, i)).collect()
    }

    /// `shift` as an I64 scalar on this tensor's device: an inline
    /// constant when an f64 holds it exactly, else device data.
    #[track_caller]
    fn shift_scalar(&self, shift: i64) -> Tensor {
        const EXACT: i64 = 1 << 53;
        if (-EXACT..=EXACT).contains(&shift) {
            Tensor::scalar_op(shift as f64, crate::DType::I64, self.device())
        } else {
            Tensor::from_vec_on(vec![shift], &[], self.device()).unwrap_or_else(|e| panic!("{e}"))
        }
    }
}
