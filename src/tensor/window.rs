//! Window ops: pooling and scans, built on `Op::ReduceWindow` (and, for
//! max pooling's gradient, `Op::SelectAndScatter`).

use super::dim::{DimIndex, ResolveDim};
use super::Tensor;
use crate::dtype::DType;
use crate::error::Error;
use crate::host::HostArray;
use crate::ir::{ArgKind, Op, Window, WindowKind};
use crate::symint::SizeExpr;
use smallvec::SmallVec;

/// Panics with `e`, named after the user-facing op `name` when it is
/// about a dynamic dim (inference names the primitive).
#[track_caller]
fn fail(name: &'static str, e: Error) -> ! {
    match e {
        Error::DynamicUnsupported { dim, shape, .. } => panic!(
            "{}",
            Error::DynamicUnsupported {
                op: name,
                dim,
                shape
            }
        ),
        e => panic!("{e}"),
    }
}

impl Tensor {
    /// `Op::ReduceWindow` over this tensor.
    #[track_caller]
    pub(crate) fn reduce_window(&self, name: &'static str, kind: WindowKind, w: Window) -> Tensor {
        Tensor::try_apply(
            Op::ReduceWindow { kind, window: w },
            &[self],
            SmallVec::new(),
        )
        .unwrap_or_else(|e| fail(name, e))
    }

    /// `Op::SelectAndScatter` of `source` over this tensor's windows.
    #[track_caller]
    pub(crate) fn select_and_scatter(&self, kind: ArgKind, source: &Tensor, w: Window) -> Tensor {
        Tensor::apply(
            Op::SelectAndScatter { kind, window: w },
            &[self, source],
            SmallVec::new(),
        )
    }

    /// The pooling window over the last two dims of an NCHW (or CHW)
    /// tensor, checked as PyTorch checks it.
    #[track_caller]
    fn pool_window(
        &self,
        op: &'static str,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Window {
        let r = self.rank();
        if r != 3 && r != 4 {
            panic!(
                "{}",
                Error::shape(
                    op,
                    format!(
                        "expects a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {}",
                        self.shape_string()
                    )
                )
            );
        }
        let shape = self.shape_exprs();
        for d in [r - 2, r - 1] {
            if shape[d].as_const().is_none() {
                // Windows span H and W; only the leading dims may be dynamic.
                fail(
                    op,
                    Error::DynamicUnsupported {
                        op,
                        dim: d,
                        shape: self.shape_string(),
                    },
                );
            }
        }
        let (k, s, p) = (
            [kernel.0, kernel.1],
            [stride.0, stride.1],
            [padding.0, padding.1],
        );
        let invalid = |m: String| -> ! { panic!("{}", Error::invalid(op, m)) };
        if k.contains(&0) || s.contains(&0) {
            invalid(format!(
                "kernel {kernel:?} and stride {stride:?} must be positive"
            ));
        }
        if p[0] > k[0] / 2 || p[1] > k[1] / 2 {
            invalid(format!(
                "padding {padding:?} must be at most half of the kernel {kernel:?}"
            ));
        }
        let mut w = Window::new(vec![1; r]);
        for i in 0..2 {
            let n = shape[r - 2 + i].as_const().unwrap_or(0) as usize;
            if n + 2 * p[i] < k[i] {
                invalid(format!(
                    "the kernel {kernel:?} is larger than the padded input (shape {}, padding {padding:?}): the output would be empty",
                    self.shape_string()
                ));
            }
            w.size[r - 2 + i] = k[i];
            w.stride[r - 2 + i] = s[i];
            w.padding[r - 2 + i] = (p[i], p[i]);
        }
        w
    }

    /// 2-D max pooling over the last two dims of an NCHW (or CHW) tensor,
    /// as PyTorch's `max_pool2d`: the padding is `-inf` (never chosen);
    /// the gradient goes to the first maximum of each window. The batch
    /// and channel dims may be dynamic; H and W must be static.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec((0..16).map(|v| v as f32).collect(), &[1, 1, 4, 4]).unwrap();
    /// let y = x.max_pool2d((2, 2), (2, 2), (0, 0));
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![5.0, 7.0, 13.0, 15.0]);
    /// ```
    #[track_caller]
    pub fn max_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.max_pool2d(kernel, stride, padding);
        }
        let w = self.pool_window("max_pool2d", kernel, stride, padding);
        self.reduce_window("max_pool2d", WindowKind::Max, w)
    }

    /// 2-D average pooling over the last two dims of an NCHW (or CHW)
    /// float tensor, as PyTorch's `avg_pool2d` with `count_include_pad`:
    /// each window's sum, zero padding included, over the kernel's area.
    /// The batch and channel dims may be dynamic; H and W must be static.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap();
    /// let y = x.avg_pool2d((2, 2), (1, 1), (1, 1));
    /// assert_eq!(y.upper_bounds(), vec![1, 1, 3, 3]);
    /// assert_eq!(y.to_vec::<f32>().unwrap()[4], 2.5);
    /// ```
    #[track_caller]
    pub fn avg_pool2d(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        padding: (usize, usize),
    ) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.avg_pool2d(kernel, stride, padding);
        }
        self.require_float("avg_pool2d");
        let w = self.pool_window("avg_pool2d", kernel, stride, padding);
        self.reduce_window("avg_pool2d", WindowKind::Sum, w)
            .div_scalar((kernel.0 * kernel.1) as f64)
    }

    /// 2-D adaptive average pooling to `(oh, ow)` over the last two dims
    /// of an NCHW (or CHW) float tensor, as PyTorch's
    /// `adaptive_avg_pool2d`: output row `i` averages input rows
    /// `floor(i*H/oh)` to `ceil((i+1)*H/oh)` (exclusive), columns alike.
    /// Divisible sizes are one average pooling; others are sums by 0/1
    /// matrices (`M_h x M_wᵀ`) divided by the window areas. The batch and
    /// channel dims may be dynamic; H and W must be static.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0], &[1, 1, 5]).unwrap();
    /// let y = x.adaptive_avg_pool2d((1, 2));
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn adaptive_avg_pool2d(&self, output: (usize, usize)) -> Tensor {
        if let Some(x) = self.with_automatic_static() {
            return x.adaptive_avg_pool2d(output);
        }
        let op = "adaptive_avg_pool2d";
        self.require_float(op);
        // Checks the rank and that H and W are static.
        self.pool_window(op, (1, 1), (1, 1), (0, 0));
        let r = self.rank();
        let shape = self.shape_exprs();
        let (h, w) = (
            shape[r - 2].as_const().unwrap_or(0) as usize,
            shape[r - 1].as_const().unwrap_or(0) as usize,
        );
        let (oh, ow) = output;
        if oh == 0 || ow == 0 || h == 0 || w == 0 {
            panic!(
                "{}",
                Error::invalid(
                    op,
                    format!(
                        "the output size {output:?} and the input's H and W (shape {}) must be positive",
                        self.shape_string()
                    )
                )
            );
        }
        if output == (1, 1) {
            // A global mean: a reduction forward and a broadcast backward,
            // where a whole-input window's gradient would be a window
            // reduction of the padded gradient, written out in full.
            return self.mean_dims(&[r as i64 - 2, r as i64 - 1], true);
        }
        if h % oh == 0 && w % ow == 0 {
            let k = (h / oh, w / ow);
            let win = self.pool_window(op, k, k, (0, 0));
            return self
                .reduce_window(op, WindowKind::Sum, win)
                .div_scalar((k.0 * k.1) as f64);
        }
        let (mh, ch) = adaptive_matrix(h, oh, self);
        let (mw, cw) = adaptive_matrix(w, ow, self);
        let count = ch.unsqueeze(1).matmul(&cw.unsqueeze(0));
        let rows = self.matmul(&mw.transpose(0, 1));
        mh.matmul(&rows).div(&count)
    }

    /// The cumulative sum along `dim`, as PyTorch's `cumsum` (bool and
    /// integers sum to I64). Along a dynamic dim the scan reads only the
    /// real elements before each position.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.cumsum(1).to_vec::<f32>().unwrap(), vec![1.0, 3.0, 3.0, 7.0]);
    /// ```
    #[track_caller]
    pub fn cumsum(&self, dim: impl DimIndex) -> Tensor {
        let x = match self.dtype() {
            DType::Bool | DType::I32 => self.to_dtype(DType::I64),
            _ => self.clone(),
        };
        x.scan("cumsum", WindowKind::Sum, dim)
    }

    /// The cumulative product along `dim`, as PyTorch's `cumprod` (bool
    /// and integers multiply in I64). The gradient is PyTorch's formula
    /// for nonzero inputs, `reverse_cumsum(g * out) / x`: a zero input
    /// gives a NaN gradient.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
    /// assert_eq!(x.cumprod(0).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 6.0, 24.0]);
    /// ```
    #[track_caller]
    pub fn cumprod(&self, dim: impl DimIndex) -> Tensor {
        let x = match self.dtype() {
            DType::Bool | DType::I32 => self.to_dtype(DType::I64),
            _ => self.clone(),
        };
        x.scan("cumprod", WindowKind::Product, dim)
    }

    /// An inclusive prefix scan along `dim`: a window as long as the
    /// dim's bound, ending at each position (low padding bound - 1).
    #[track_caller]
    fn scan(&self, op: &'static str, kind: WindowKind, dim: impl DimIndex) -> Tensor {
        if self.rank() == 0 {
            // PyTorch scans a 0-d tensor as one element.
            dim.resolve(op, &[SizeExpr::constant(1)]);
            return self.clone();
        }
        let shape = self.shape_exprs();
        let d = dim.resolve(op, &shape);
        let n = shape[d].hi().max(1) as usize;
        let mut w = Window::new(vec![1; shape.len()]);
        w.size[d] = n;
        w.padding[d] = (n - 1, 0);
        self.reduce_window(op, kind, w)
    }

    /// Panics, naming `op`, unless the tensor holds floats.
    #[track_caller]
    pub(super) fn require_float(&self, op: &'static str) {
        if !self.dtype().is_float() {
            panic!(
                "{}",
                Error::dtype(
                    op,
                    format!(
                        "needs a float tensor, got {}{}; convert with to_dtype first",
                        self.dtype(),
                        self.shape_string()
                    )
                )
            );
        }
    }
}

/// The 0/1 matrix `[out, n]` of PyTorch's adaptive windows (row `i`
/// covers `floor(i*n/out)..ceil((i+1)*n/out)`) and each window's length.
#[track_caller]
fn adaptive_matrix(n: usize, out: usize, like: &Tensor) -> (Tensor, Tensor) {
    let mut m = vec![0.0f64; out * n];
    let mut len = vec![0.0f64; out];
    for i in 0..out {
        let (start, end) = (i * n / out, ((i + 1) * n).div_ceil(out));
        for j in start..end {
            m[i * n + j] = 1.0;
        }
        len[i] = (end - start) as f64;
    }
    let data = |v: Vec<f64>, shape: &[usize]| {
        let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), v).expect("length matches");
        Tensor::from_host(HostArray::F64(a).cast(like.dtype()), like.device())
            .unwrap_or_else(|e| panic!("{e}"))
    };
    (data(m, &[out, n]), data(len, &[out]))
}
