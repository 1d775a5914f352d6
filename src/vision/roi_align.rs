//! RoIAlign (torchvision's `roi_align`): bilinear samples averaged over
//! each output bin of each region of interest.
//!
//! Sampling is separable: a sample's weight on pixel `(h, w)` is a weight
//! on row `h` (from its y) times a weight on column `w` (from its x), and
//! torchvision's rules (out-of-range samples give 0, coordinates clamped
//! to the map, the average over the grid) each act on one axis. So each
//! RoI gets two small matrices, `Ay: [oh, H]` and `Ax: [ow, W]`, holding
//! the summed interpolation weights of its samples divided by the grid
//! size, built by two scatter-adds of the samples' two neighbours; the
//! result is `Ay · image · Axᵀ`, two matrix products. The first contracts
//! the image's rows and its batch (`Ay` spread over a one-hot of the RoI's
//! batch index, so no `[K, C, H, W]` gather of images is made), the second
//! the columns. The gradient with respect to the features is the
//! products' (transposed products); the boxes get none, as in torchvision.
//!
//! Cost for `K` RoIs on `[N, C, H, W]` features: `K·oh·N·H·C·W`
//! multiply-adds for the first product and `K·oh·C·W·ow` for the second;
//! memory `K·oh·C·W` for the intermediate. The sampling grid only sizes
//! the small weight construction (`[K, oh, grid]`), so the adaptive grid
//! costs no more in the products than a fixed one.
//!
//! The adaptive grid (`sampling_ratio <= 0`, `ceil(roi / out)` samples per
//! bin, varying per RoI) has a static bound: samples of a bin wider than a
//! pixel are more than 1/2 apart, so at most `2H + 2` of them land in
//! `[-1, H]`; each bin enumerates `2H + 6` candidates from the first one
//! inside, masked by the real grid, and divides by the real grid size.

use super::{image_dims, rois_dims};
use crate::dtype::DType;
use crate::tensor::{SymInt, Tensor};

/// torchvision's `roi_align`: for each region of interest `k` (a row of
/// `rois`: batch index, then `x1, y1, x2, y2` in image coordinates), the
/// features of image `rois[k, 0]` of `input` (`[N, C, H, W]`, float)
/// averaged over each of `output = (oh, ow)` bins, `[K, C, oh, ow]`.
///
/// - Box coordinates are scaled by `spatial_scale` (the feature map's
///   size over the image's); with `aligned` a pixel's centre is at
///   `+0.5` (0.5 is subtracted), without it a RoI is at least 1x1.
/// - Each bin averages `sampling_ratio x sampling_ratio` bilinear
///   samples at the centres of a regular grid (`sampling_ratio > 0`, 2 in
///   Mask R-CNN), or, for `sampling_ratio <= 0`, `ceil(roi_height / oh) x
///   ceil(roi_width / ow)` samples, a grid that varies per RoI.
/// - A sample outside `[-1, H] x [-1, W]` reads 0; inside, coordinates
///   below 0 read the first row (column), at or past `H - 1` the last.
///
/// The number of RoIs may be dynamic (`[<=K, 5]` from `nonzero` or
/// `nms`): the result is `[<=K, C, oh, ow]` and padding RoIs reach
/// neither the results nor the gradient. The gradient flows to `input`
/// only; `rois` get none (as torchvision). A batch index outside
/// `0..N` gives zeros. `input`'s dims must be static.
///
/// The adaptive grid (`sampling_ratio <= 0`) is exact with a static
/// bound: a bin of size `b > 1` takes `ceil(b)` samples spaced
/// `b / ceil(b) > 1/2` apart, so at most `2·H + 2` of them fall inside
/// `[-1, H]`, where they can read anything; the others read 0 and only
/// count in the average. So each bin enumerates `2·H + 6` candidate
/// samples from (just before) the first one inside the map, masked by
/// the real grid: exact while a bin's grid has under 2^24 samples.
///
/// ```
/// use lazyxla::{vision, Tensor};
/// // One 1x1x4x4 image holding 0..16; one RoI over its whole area.
/// let x = Tensor::from_vec((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]).unwrap();
/// let rois = Tensor::from_vec(vec![0.0f32, 0.0, 0.0, 4.0, 4.0], &[1, 5]).unwrap();
/// let y = vision::roi_align(&x, &rois, (2, 2), 1.0, 2, true);
/// assert_eq!(y.upper_bounds(), vec![1, 1, 2, 2]);
/// assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.5, 4.5, 10.5, 12.5]);
/// ```
#[track_caller]
pub fn roi_align(
    input: &Tensor,
    rois: &Tensor,
    output: (usize, usize),
    spatial_scale: f64,
    sampling_ratio: i64,
    aligned: bool,
) -> Tensor {
    let op = "roi_align";
    let (n, c, h, w) = image_dims(op, input);
    rois_dims(op, input, rois);
    let (oh, ow) = output;
    if oh == 0 || ow == 0 {
        panic!("{op}: the output size {output:?} must be positive");
    }
    input.device().scoped(|| {
        let rois = rois.detach();
        let col = |k: usize| rois.narrow(1, k, 1); // [K, 1]
        let offset = if aligned { 0.5 } else { 0.0 };
        let start = |k: usize| &(&col(k) * spatial_scale) - offset;
        let (x1, y1, x2, y2) = (start(1), start(2), start(3), start(4));
        let (mut roi_w, mut roi_h) = (&x2 - &x1, &y2 - &y1);
        if !aligned {
            roi_w = roi_w.clamp_min(1.0);
            roi_h = roi_h.clamp_min(1.0);
        }
        let k = rois.size(0);
        let ay = axis_weights(&y1, &roi_h, oh, h, sampling_ratio, &k); // [K, oh, H]
        let ax = axis_weights(&x1, &roi_w, ow, w, sampling_ratio, &k); // [K, ow, W]

        // Rows: Ay spread over the RoI's image, against [N*H, C*W].
        let batch = col(0).to_dtype(DType::I64); // truncated, as torchvision
        let one_hot = batch
            .eq(&iota(n, DType::I64).unsqueeze(0))
            .to_dtype(input.dtype());
        let ay = &ay.unsqueeze(2) * &one_hot.unsqueeze(1).unsqueeze(3); // [K, oh, N, H]
        let ay = ay.reshape_sym(&[&k * oh as i64, SymInt::from(n * h)]);
        let feats = input
            .permute(&[0, 2, 1, 3])
            .reshape(&[(n * h) as i64, (c * w) as i64]);
        let rows = ay.matmul(&feats); // [K*oh, C*W]
                                      // Columns: [K, oh*C, W] against each RoI's Axᵀ.
        let rows = rows.reshape_sym(&[k.clone(), SymInt::from(oh * c), SymInt::from(w)]);
        let out = rows.matmul(&ax.transpose(1, 2)); // [K, oh*C, ow]
        out.reshape_sym(&[k, SymInt::from(oh), SymInt::from(c), SymInt::from(ow)])
            .permute(&[0, 2, 1, 3])
    })
}

/// `[0, 1, .., n-1]` of `dtype`.
#[track_caller]
fn iota(n: usize, dtype: DType) -> Tensor {
    Tensor::arange(n as i64).to_dtype(dtype)
}

/// One axis of the sampling: for each RoI (its `start: [K, 1]` and
/// `size: [K, 1]` in feature pixels) the `[K, n_out, n_in]` weights of
/// each output bin on each input row, the bin's samples' bilinear
/// weights summed and divided by the grid size, as torchvision's
/// `bilinear_interpolate` and the average of its kernel compute them.
#[track_caller]
fn axis_weights(
    start: &Tensor,
    size: &Tensor,
    n_out: usize,
    n_in: usize,
    sampling_ratio: i64,
    k: &SymInt,
) -> Tensor {
    let dt = start.dtype();
    let bin = (size / n_out as f64).unsqueeze(2); // [K, 1, 1]
    let p = iota(n_out, dt).reshape(&[1, n_out as i64, 1]);
    let base = &start.unsqueeze(2) + &(&p * &bin); // [K, n_out, 1]
                                                   // The samples' indices in the grid, the grid size, and which indices
                                                   // are in the grid.
    let (iy, grid, in_grid) = if sampling_ratio > 0 {
        let g = sampling_ratio as usize;
        let iy = iota(g, dt).reshape(&[1, 1, g as i64]);
        let grid = Tensor::full(&[], g as f64, dt);
        (iy, grid, None)
    } else {
        // The adaptive grid `ceil(bin)`: candidates from just before the
        // first sample at or after -1 (spacing `bin / grid`), enough of
        // them to cover [-1, n_in] (see `roi_align`'s docs).
        let grid = bin.ceil();
        let spacing = &bin / &grid;
        let first = (&(&(-&base - 1.0) / &spacing) - 0.5).floor() - 1.0;
        let candidates = 2 * n_in + 6;
        let j = iota(candidates, dt).reshape(&[1, 1, candidates as i64]);
        let iy = &first.clamp_min(0.0) + &j; // [K, n_out, candidates]
        let in_grid = iy.lt(&grid);
        (iy, grid, Some(in_grid))
    };
    // torchvision: start + p * bin + (iy + 0.5) * bin / grid.
    let y = &base + &(&(&(&iy + 0.5) * &bin) / &grid);
    let mut valid = y.ge_scalar(-1.0).logical_and(&y.le_scalar(n_in as f64));
    if let Some(g) = in_grid {
        valid = valid.logical_and(&g);
    }
    let zero = Tensor::full(&[], 0.0, dt);
    let y = valid.where_cond(&y, &zero).clamp_min(0.0);
    let low = y.floor();
    let last = (n_in - 1) as f64;
    let at_end = low.ge_scalar(last);
    let frac = at_end.where_cond(&zero, &(&y - &low));
    let last_t = Tensor::full(&[], last, dt);
    let i_low = at_end.where_cond(&last_t, &low).to_dtype(DType::I64);
    let i_high = at_end
        .where_cond(&last_t, &(&low + 1.0))
        .to_dtype(DType::I64);
    // Empty grids (a non-positive adaptive size) have no valid samples.
    let count = grid.clamp_min(1.0);
    let w_low = &valid.where_cond(&frac.rsub_scalar(1.0), &zero) / &count;
    let w_high = &valid.where_cond(&frac, &zero) / &count;
    let sizes = [k.clone(), SymInt::from(n_out), SymInt::from(n_in)];
    Tensor::zeros_sym(&sizes, dt)
        .scatter_add(2, &i_low, &w_low)
        .scatter_add(2, &i_high, &w_high)
}
