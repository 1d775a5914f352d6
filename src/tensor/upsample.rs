//! Upsampling NCHW images: `upsample_nearest2d` and
//! `upsample_bilinear2d`, with PyTorch's source-index formulas.
//!
//! Source indices and weights depend only on static sizes, so they are
//! computed on the host and the op is gathers along H and W
//! (`index_select`) and elementwise weighting; an integer nearest scale
//! is a broadcast and a reshape instead. Gradients come from the gathers'
//! rules (scatter-adds). The batch and channel dims may be dynamic; H and
//! W must be static.

use super::Tensor;
use crate::error::Error;
use crate::host::HostArray;
use crate::symint::{Shape, SizeExpr};

impl Tensor {
    /// Nearest-neighbour upsampling (or downsampling) of the last two dims
    /// of an NCHW tensor to `(h, w)`, as PyTorch's `upsample_nearest2d`
    /// (`F.interpolate(mode="nearest")`): output row `i` reads input row
    /// `min(floor(i * (H / h)), H - 1)`, the ratio in f32 as PyTorch
    /// computes it; columns alike. Any dtype.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
    /// let y = x.upsample_nearest2d((3, 4));
    /// assert_eq!(y.upper_bounds(), vec![1, 1, 3, 4]);
    /// assert_eq!(
    ///     y.to_vec::<f32>().unwrap(),
    ///     vec![1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]
    /// );
    /// ```
    #[track_caller]
    pub fn upsample_nearest2d(&self, size: (usize, usize)) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.upsample_nearest2d(size);
        }
        let (h_in, w_in) = self.image_dims("upsample_nearest2d", size);
        let (rows, cols) = (nearest(h_in, size.0), nearest(w_in, size.1));
        let factor = |src: &[usize], n_out: usize, n_in: usize| {
            let k = n_out / n_in;
            (n_out.is_multiple_of(n_in) && src.iter().enumerate().all(|(i, &s)| s == i / k))
                .then_some(k)
        };
        let dynamic_after_batch = self.shape_exprs()[1..]
            .iter()
            .any(|d| d.as_const().is_none());
        match (
            factor(&rows, size.0, h_in),
            factor(&cols, size.1, w_in),
            dynamic_after_batch,
        ) {
            (Some(1), Some(1), _) => self.clone(),
            (Some(kh), Some(kw), false) => self.repeat_pixels(kh, kw),
            _ => {
                let y = self.select_along(2, &rows, h_in);
                y.select_along(3, &cols, w_in)
            }
        }
    }

    /// Bilinear upsampling (or downsampling) of the last two dims of an
    /// NCHW float tensor to `(h, w)`, as PyTorch's `upsample_bilinear2d`
    /// (`F.interpolate(mode="bilinear")`). Output row `i` reads the source
    /// coordinate `i * (H - 1) / (h - 1)` with `align_corners` (0 when
    /// `h == 1`), else `max((i + 0.5) * H / h - 0.5, 0)`, and mixes the
    /// two rows around it by distance (the second clamped to `H - 1`);
    /// columns alike, rows first. The gradient spreads back with the same
    /// weights.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0], &[1, 1, 2, 2]).unwrap();
    /// let y = x.upsample_bilinear2d((3, 3), true);
    /// assert_eq!(
    ///     y.to_vec::<f32>().unwrap(),
    ///     vec![0.0, 0.5, 1.0, 1.0, 1.5, 2.0, 2.0, 2.5, 3.0]
    /// );
    /// let z = x.upsample_bilinear2d((1, 4), false).to_vec::<f32>().unwrap();
    /// assert_eq!(z, vec![1.0, 1.25, 1.75, 2.0]);
    /// ```
    #[track_caller]
    pub fn upsample_bilinear2d(&self, size: (usize, usize), align_corners: bool) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.upsample_bilinear2d(size, align_corners);
        }
        let op = "upsample_bilinear2d";
        self.require_float(op);
        let (h_in, w_in) = self.image_dims(op, size);
        let y = self.interpolate_along(2, &linear(h_in, size.0, align_corners), h_in);
        y.interpolate_along(3, &linear(w_in, size.1, align_corners), w_in)
    }

    /// The static H and W of an NCHW tensor to resize to `size`, checked
    /// as PyTorch checks them.
    #[track_caller]
    fn image_dims(&self, op: &'static str, size: (usize, usize)) -> (usize, usize) {
        if self.rank() != 4 {
            panic!(
                "{}",
                Error::shape(
                    op,
                    format!(
                        "expects a 4-D (N, C, H, W) input, got shape {}; unsqueeze(0) a single image",
                        self.shape_string()
                    )
                )
            );
        }
        let shape = self.shape_exprs();
        let dim = |d: usize| match shape[d].as_const() {
            Some(n) => n as usize,
            None => panic!(
                "{}",
                Error::DynamicUnsupported {
                    op,
                    dim: d,
                    shape: self.shape_string()
                }
            ),
        };
        let (h, w) = (dim(2), dim(3));
        if h == 0 || w == 0 || size.0 == 0 || size.1 == 0 {
            panic!(
                "{}",
                Error::invalid(
                    op,
                    format!(
                        "the input's H and W (shape {}) and the output size {size:?} must be positive",
                        self.shape_string()
                    )
                )
            );
        }
        (h, w)
    }

    /// Each pixel repeated `kh x kw` times: `[N, C, H, 1, W, 1]`
    /// broadcast to `[N, C, H, kh, W, kw]`, reshaped to
    /// `[N, C, H*kh, W*kw]` (only the batch may be dynamic: the reshape
    /// keeps it major).
    #[track_caller]
    fn repeat_pixels(&self, kh: usize, kw: usize) -> Tensor {
        let s = self.shape_exprs();
        let c = |k: usize| SizeExpr::constant(k as i64);
        let (n, ch, h, w) = (&s[0], &s[1], &s[2], &s[3]);
        let spread: Shape = [n, ch, h, &c(1), w, &c(1)].into_iter().cloned().collect();
        let tiled: Shape = [n, ch, h, &c(kh), w, &c(kw)].into_iter().cloned().collect();
        let out: Shape = [n.clone(), ch.clone(), h.mul(&c(kh)), w.mul(&c(kw))]
            .into_iter()
            .collect();
        self.reshape_exprs(spread, &[self])
            .broadcast_to(&tiled, &[self])
            .reshape_exprs(out, &[self])
    }

    /// `index_select` of the host indices `src` along `dim` (of size
    /// `n_in`), skipped when it is the identity.
    #[track_caller]
    fn select_along(&self, dim: usize, src: &[usize], n_in: usize) -> Tensor {
        if src.len() == n_in && src.iter().enumerate().all(|(i, &s)| s == i) {
            return self.clone();
        }
        let idx: Vec<i64> = src.iter().map(|&s| s as i64).collect();
        self.select_host(dim, idx)
    }

    #[track_caller]
    fn select_host(&self, dim: usize, idx: Vec<i64>) -> Tensor {
        let n = idx.len();
        let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[n]), idx).expect("1-D");
        let t =
            Tensor::from_host(HostArray::I64(a), self.device()).unwrap_or_else(|e| panic!("{e}"));
        self.index_select(dim, &t)
    }

    /// The linear mix along `dim` (2 or 3) of the rows (columns) `taps`
    /// names: `x[i0] * w0 + x[i1] * w1`.
    #[track_caller]
    fn interpolate_along(&self, dim: usize, taps: &[Tap], n_in: usize) -> Tensor {
        if taps.len() == n_in
            && taps
                .iter()
                .enumerate()
                .all(|(i, t)| t.i0 == i && t.w1 == 0.0)
        {
            return self.clone();
        }
        let weights = |w: Vec<f64>| {
            let n = w.len();
            let shape: &[usize] = if dim == 2 { &[n, 1] } else { &[n] };
            let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), w).expect("sizes match");
            Tensor::from_host(HostArray::F64(a).cast(self.dtype()), self.device())
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let first = self.select_host(dim, taps.iter().map(|t| t.i0 as i64).collect());
        let second = self.select_host(dim, taps.iter().map(|t| t.i1 as i64).collect());
        let w0 = weights(taps.iter().map(|t| 1.0 - t.w1).collect());
        let w1 = weights(taps.iter().map(|t| t.w1).collect());
        &(&first * &w0) + &(&second * &w1)
    }
}

/// PyTorch's nearest source index of each of `n_out` positions over
/// `n_in`: the same index, half of it for an exact doubling, else
/// `min(floor(i * (n_in / n_out)), n_in - 1)` with the ratio and the
/// product in f32.
#[track_caller]
fn nearest(n_in: usize, n_out: usize) -> Vec<usize> {
    (0..n_out)
        .map(|i| {
            if n_out == n_in {
                i
            } else if n_out == 2 * n_in {
                i / 2
            } else {
                let scale = n_in as f32 / n_out as f32;
                ((i as f32 * scale).floor() as usize).min(n_in - 1)
            }
        })
        .collect()
}

/// One output position of a linear interpolation: the two source
/// positions and the second's weight (the first's is `1 - w1`).
struct Tap {
    i0: usize,
    i1: usize,
    w1: f64,
}

/// PyTorch's linear taps (`area_pixel_compute_source_index`) for `n_out`
/// positions over `n_in`.
#[track_caller]
fn linear(n_in: usize, n_out: usize, align_corners: bool) -> Vec<Tap> {
    let scale = if align_corners {
        if n_out > 1 {
            (n_in - 1) as f64 / (n_out - 1) as f64
        } else {
            0.0
        }
    } else {
        n_in as f64 / n_out as f64
    };
    (0..n_out)
        .map(|i| {
            let src = if align_corners {
                scale * i as f64
            } else {
                (scale * (i as f64 + 0.5) - 0.5).max(0.0)
            };
            let i0 = (src.floor() as usize).min(n_in - 1);
            let i1 = (i0 + 1).min(n_in - 1);
            let w1 = if i1 == i0 {
                0.0
            } else {
                (src - i0 as f64).clamp(0.0, 1.0)
            };
            Tap { i0, i1, w1 }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_indices_follow_pytorch() {
        assert_eq!(nearest(2, 4), vec![0, 0, 1, 1]);
        assert_eq!(nearest(3, 5), vec![0, 0, 1, 1, 2]);
        assert_eq!(nearest(5, 2), vec![0, 2]);
        assert_eq!(nearest(4, 4), vec![0, 1, 2, 3]);
    }

    #[test]
    fn linear_taps_follow_pytorch() {
        let t = linear(2, 4, false);
        let src: Vec<(usize, usize, f64)> = t.iter().map(|t| (t.i0, t.i1, t.w1)).collect();
        assert_eq!(
            src,
            vec![(0, 1, 0.0), (0, 1, 0.25), (0, 1, 0.75), (1, 1, 0.0)]
        );
        let t = linear(3, 1, true);
        assert_eq!((t[0].i0, t[0].w1), (0, 0.0));
    }
}
