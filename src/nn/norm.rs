//! Normalisation layers over channels: [`BatchNorm2d`] (running statistics
//! kept as device state), [`GroupNorm`] and [`RmsNorm`], with PyTorch's
//! defaults. All accept a dynamic batch dim: statistics count the real
//! elements, never the padding.

use super::layers::filled;
use super::{named, Module};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::check::SizeCheck;
use crate::tensor::{no_grad, SymInt, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

/// Panics unless `x` has a rank in `ranks` and `channels` static channels
/// in dim 1 (the layers' one input check, as a wrong width panics in
/// `Linear`'s matmul).
#[track_caller]
fn check_channels(
    op: &'static str,
    x: &Tensor,
    ranks: std::ops::RangeInclusive<usize>,
    layout: &str,
    channels: usize,
) {
    let ok = ranks.contains(&x.rank()) && x.size(1).as_static() == Some(channels as i64);
    if !ok {
        panic!(
            "{}",
            Error::shape(
                op,
                format!(
                    "expected an input {layout} with C = {channels} channels, got {}",
                    x.shape_string()
                )
            )
        );
    }
}

/// `[c]` reshaped to broadcast over dim 1 of a rank-`rank` input.
#[track_caller]
fn per_channel(t: &Tensor, rank: usize) -> Tensor {
    let mut shape = vec![1i64; rank];
    shape[1] = -1;
    t.reshape(&shape)
}

/// Batch normalisation over `[N, C, H, W]` (PyTorch's `nn.BatchNorm2d`):
/// weight 1, bias 0, `eps` 1e-5, `momentum` 0.1.
///
/// In training mode (the default) the input is normalised with the
/// batch's mean and biased variance over `N, H, W`, and the step also
/// updates the running statistics in place (`assign`, so inside the
/// step's own program: no host round trip, the same program every step):
/// `running = (1 - momentum)·running + momentum·batch`, with the
/// unbiased variance (`n / (n - 1)`, `n = N·H·W` the real count of a
/// dynamic batch), and `num_batches_tracked += 1`. In evaluation mode
/// ([`Module::train`]`(false)`) it uses the running statistics.
///
/// Training needs more than one value per channel, as in PyTorch: a
/// static `N·H·W < 2` panics; for a dynamic batch the program checks it
/// when it runs (a failed check is the step's `Err`, and the step
/// changes nothing).
///
/// ```
/// use lazyxla::nn::{BatchNorm2d, Module};
/// use lazyxla::{mark_step, Tensor};
/// let bn = BatchNorm2d::new(1);
/// let x = Tensor::from_vec(vec![1.0f32, 3.0], &[2, 1, 1, 1]).unwrap();
/// let y = bn.forward(&x);
/// mark_step().unwrap();
/// let v = y.to_vec::<f32>().unwrap();
/// assert!((v[0] + 1.0).abs() < 1e-4 && (v[1] - 1.0).abs() < 1e-4);
/// // mean 2 and unbiased variance 2, blended with momentum 0.1
/// assert_eq!(bn.running_mean.to_vec::<f32>().unwrap(), vec![0.2]);
/// assert!((bn.running_var.item::<f32>().unwrap() - 1.1).abs() < 1e-6);
/// assert_eq!(bn.num_batches_tracked.item::<i64>().unwrap(), 1);
/// bn.train(false);
/// let z = bn.forward(&x).to_vec::<f32>().unwrap(); // (x - 0.2) / sqrt(1.1 + 1e-5)
/// assert!((z[0] - 0.8 / (1.1f32 + 1e-5).sqrt()).abs() < 1e-5);
/// ```
#[derive(Debug)]
pub struct BatchNorm2d {
    /// `[C]`, ones.
    pub weight: Tensor,
    /// `[C]`, zeros.
    pub bias: Tensor,
    /// `[C]`, zeros: a buffer (no gradient).
    pub running_mean: Tensor,
    /// `[C]`, ones: a buffer (no gradient).
    pub running_var: Tensor,
    /// I64 scalar, 0: how many training batches updated the statistics.
    pub num_batches_tracked: Tensor,
    /// Added to the variance.
    pub eps: f64,
    /// The weight of the new batch in the running statistics.
    pub momentum: f64,
    channels: usize,
    training: AtomicBool,
}

impl BatchNorm2d {
    /// A layer over `channels` channels. Parameters and buffers are
    /// device data from the start, so the first step has the program of
    /// every later one.
    ///
    /// ```
    /// use lazyxla::nn::{BatchNorm2d, Module};
    /// let bn = BatchNorm2d::new(3);
    /// assert!(bn.is_training());
    /// let y = bn.forward(&lazyxla::Tensor::randn(&[2, 3, 4, 4], 0));
    /// assert_eq!(y.concrete_shape().unwrap(), vec![2, 3, 4, 4]);
    /// ```
    #[track_caller]
    pub fn new(channels: usize) -> BatchNorm2d {
        BatchNorm2d {
            weight: filled(&[channels], 1.0).requires_grad(true),
            bias: filled(&[channels], 0.0).requires_grad(true),
            running_mean: filled(&[channels], 0.0),
            running_var: filled(&[channels], 1.0),
            num_batches_tracked: Tensor::scalar(0i64),
            eps: 1e-5,
            momentum: 0.1,
            channels,
            training: AtomicBool::new(true),
        }
    }

    /// True in training mode (batch statistics), false in evaluation.
    ///
    /// ```
    /// use lazyxla::nn::{BatchNorm2d, Module};
    /// let bn = BatchNorm2d::new(3);
    /// bn.train(false);
    /// assert!(!bn.is_training());
    /// ```
    #[track_caller]
    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Relaxed)
    }

    /// `x` normalised with its own statistics; records the update of the
    /// running ones.
    #[track_caller]
    fn forward_train(&self, x: &Tensor) -> Tensor {
        let sizes = x.sizes();
        let count = &(&sizes[0] * &sizes[2]) * &sizes[3];
        let x = more_than_one_value(x, &count);
        let mean = x.mean_dims(&[0, 2, 3], true);
        let centered = &x - &mean;
        let var = centered.square().mean_dims(&[0, 2, 3], true);
        no_grad(|| self.update_running(&x, &mean, &var, &count));
        &centered * &(&var + self.eps).rsqrt()
    }

    /// The running statistics' update, from detached batch statistics
    /// (PyTorch updates them outside autograd: no gradient reaches the
    /// model through them, even when they are read again in this step).
    #[track_caller]
    fn update_running(&self, x: &Tensor, mean: &Tensor, var: &Tensor, count: &SymInt) {
        let c = self.channels as i64;
        let dt = self.running_mean.dtype();
        let mean = mean.detach().reshape(&[c]).to_dtype(dt);
        let var = var.detach().reshape(&[c]).to_dtype(dt);
        // Bessel's correction with the real count, which a dynamic batch
        // knows only when the program runs.
        let unbiased = match count.as_static() {
            Some(n) => &var * (n as f64 / (n - 1) as f64),
            None => {
                let n = x.size_value(count.expr.clone()).to_dtype(dt);
                &var * &(&n / &(&n - 1.0))
            }
        };
        let m = self.momentum;
        let blend = |old: &Tensor, new: &Tensor| &(old * (1.0 - m)) + &(new * m);
        self.running_mean.assign(&blend(&self.running_mean, &mean));
        self.running_var
            .assign(&blend(&self.running_var, &unbiased));
        self.num_batches_tracked
            .assign(&(&self.num_batches_tracked + 1i64));
    }
}

/// `x`, checked to hold more than one value per channel (`count >= 2`):
/// at once when the sizes decide it, else when the program runs.
#[track_caller]
fn more_than_one_value(x: &Tensor, count: &SymInt) -> Tensor {
    const OP: &str = "BatchNorm2d (training needs more than 1 value per channel, N*H*W - 2 >= 0)";
    let check = SizeCheck::non_negative(OP, &(count - 2).expr);
    match check.decided() {
        Some(true) => x.clone(),
        Some(false) => panic!(
            "{}",
            Error::shape(
                "BatchNorm2d",
                format!(
                    "expected more than 1 value per channel when training, got input {}; use a larger batch, or evaluation mode (train(false))",
                    x.shape_string()
                )
            )
        ),
        None => x.checked(vec![check], &[]),
    }
}

impl Module for BatchNorm2d {
    /// Panics unless `x` is `[N, C, H, W]` with this layer's `C` (static).
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        check_channels("BatchNorm2d", x, 4..=4, "[N, C, H, W]", self.channels);
        let normed = if self.is_training() {
            self.forward_train(x)
        } else {
            let mean = per_channel(&self.running_mean, 4);
            let var = per_channel(&self.running_var, 4);
            &(x - &mean) * &(&var + self.eps).rsqrt()
        };
        &(&normed * &per_channel(&self.weight, 4)) + &per_channel(&self.bias, 4)
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![named("weight", &self.weight), named("bias", &self.bias)]
    }

    #[track_caller]
    fn own_buffers(&self) -> Vec<(String, Tensor)> {
        vec![
            named("running_mean", &self.running_mean),
            named("running_var", &self.running_var),
            named("num_batches_tracked", &self.num_batches_tracked),
        ]
    }

    /// Training uses batch statistics (and updates the running ones);
    /// evaluation uses the running statistics.
    #[track_caller]
    fn train(&self, on: bool) {
        self.training.store(on, Ordering::Relaxed);
    }
}

/// Group normalisation over `[N, C, *]` (PyTorch's `nn.GroupNorm`): the
/// channels split into `groups` groups, each normalised over its channels
/// and all positions of one sample (biased variance), then a per-channel
/// weight (1) and bias (0); `eps` 1e-5. No running statistics, so
/// training and evaluation agree.
///
/// ```
/// use lazyxla::nn::{GroupNorm, Module};
/// use lazyxla::Tensor;
/// let gn = GroupNorm::new(2, 4);
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 9.0], &[1, 4]).unwrap();
/// let y = gn.forward(&x).to_vec::<f32>().unwrap();
/// let s = (1.0f32 + 1e-5).sqrt(); // groups (1, 3) and (5, 9): mean 2, 7
/// let want = [-1.0 / s, 1.0 / s, -2.0 / (4.0f32 + 1e-5).sqrt(), 2.0 / (4.0f32 + 1e-5).sqrt()];
/// assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-5));
/// ```
#[derive(Debug)]
pub struct GroupNorm {
    /// `[C]`, ones.
    pub weight: Tensor,
    /// `[C]`, zeros.
    pub bias: Tensor,
    /// Added to the variance.
    pub eps: f64,
    groups: usize,
    channels: usize,
}

impl GroupNorm {
    /// `groups` groups over `channels` channels. Panics unless `groups`
    /// is at least 1 and divides `channels` (PyTorch raises there too).
    ///
    /// ```
    /// use lazyxla::nn::{GroupNorm, Module};
    /// let gn = GroupNorm::new(2, 4);
    /// let y = gn.forward(&lazyxla::Tensor::randn(&[1, 4, 3, 3], 0));
    /// assert_eq!(y.concrete_shape().unwrap(), vec![1, 4, 3, 3]);
    /// ```
    #[track_caller]
    pub fn new(groups: usize, channels: usize) -> GroupNorm {
        if groups == 0 || !channels.is_multiple_of(groups) {
            panic!(
                "{}",
                Error::invalid(
                    "GroupNorm",
                    format!("num_channels {channels} must be divisible by num_groups {groups} (at least 1)")
                )
            );
        }
        GroupNorm {
            weight: filled(&[channels], 1.0).requires_grad(true),
            bias: filled(&[channels], 0.0).requires_grad(true),
            eps: 1e-5,
            groups,
            channels,
        }
    }
}

impl Module for GroupNorm {
    /// Panics unless `x` is `[N, C, *]` with this layer's `C` (static). A
    /// dynamic batch dim is supported; dims after C must be static (one
    /// reshape groups them, and a reshape keeps one dynamic dim).
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        check_channels("GroupNorm", x, 2..=usize::MAX, "[N, C, *]", self.channels);
        let sizes = x.sizes();
        let per_group = sizes[2..]
            .iter()
            .fold(SymInt::from(self.channels / self.groups), |a, s| a * s);
        let g = x.reshape_sym(&[sizes[0].clone(), SymInt::from(self.groups), per_group]);
        let mean = g.mean_dims(&[2], true);
        let centered = &g - &mean;
        let var = centered.square().mean_dims(&[2], true);
        let normed = (&centered * &(&var + self.eps).rsqrt()).reshape_sym(&sizes);
        let r = x.rank();
        &(&normed * &per_channel(&self.weight, r)) + &per_channel(&self.bias, r)
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![named("weight", &self.weight), named("bias", &self.bias)]
    }
}

/// Root-mean-square normalisation over the last dim (PyTorch's
/// `nn.RMSNorm(dim)`): `x / sqrt(mean(x²) + eps) · weight`, weight 1.
///
/// `eps: None` (the default, as PyTorch's `eps=None`) means the machine
/// epsilon of the input's float type (`torch.finfo(x.dtype).eps`):
/// `f32::EPSILON` (≈ 1.19e-7) for F32, `f64::EPSILON` for F64.
///
/// ```
/// use lazyxla::nn::{Module, RmsNorm};
/// use lazyxla::Tensor;
/// let norm = RmsNorm::new(2);
/// let x = Tensor::from_vec(vec![3.0f32, 4.0], &[1, 2]).unwrap();
/// let y = norm.forward(&x).to_vec::<f32>().unwrap(); // rms = sqrt(12.5)
/// assert!((y[0] - 3.0 / 12.5f32.sqrt()).abs() < 1e-6);
/// ```
#[derive(Debug)]
pub struct RmsNorm {
    /// `[dim]`, ones.
    pub weight: Tensor,
    /// Added to the mean square; `None`: the input type's epsilon.
    pub eps: Option<f64>,
    dim: usize,
}

impl RmsNorm {
    /// A layer over a last dim of size `dim`.
    ///
    /// ```
    /// use lazyxla::nn::{Module, RmsNorm};
    /// let y = RmsNorm::new(8).forward(&lazyxla::Tensor::randn(&[2, 8], 0));
    /// assert_eq!(y.concrete_shape().unwrap(), vec![2, 8]);
    /// ```
    #[track_caller]
    pub fn new(dim: usize) -> RmsNorm {
        RmsNorm {
            weight: filled(&[dim], 1.0).requires_grad(true),
            eps: None,
            dim,
        }
    }
}

/// `torch.finfo(dtype).eps` for the float type a mean over `dtype` has.
#[track_caller]
fn machine_epsilon(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON,
        DType::F16 => half::f16::EPSILON.to_f64(),
        DType::BF16 => half::bf16::EPSILON.to_f64(),
        DType::F32 | DType::I32 | DType::I64 | DType::Bool => f32::EPSILON as f64,
    }
}

impl Module for RmsNorm {
    /// Panics unless the last dim of `x` is this layer's `dim` (static).
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        if x.rank() == 0 || x.size(-1).as_static() != Some(self.dim as i64) {
            panic!(
                "{}",
                Error::shape(
                    "RmsNorm",
                    format!(
                        "expected an input whose last dim is {}, got {}",
                        self.dim,
                        x.shape_string()
                    )
                )
            );
        }
        let eps = self.eps.unwrap_or_else(|| machine_epsilon(x.dtype()));
        let ms = x.square().mean_dims(&[-1], true);
        &(x * &(&ms + eps).rsqrt()) * &self.weight
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![named("weight", &self.weight)]
    }
}
