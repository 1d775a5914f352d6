//! Loss functions (mean reduction, as PyTorch's defaults). All work on
//! dynamic inputs: the mean divides by the real number of elements.

use crate::dtype::DType;
use crate::tensor::Tensor;

/// Mean squared error.
///
/// ```
/// use lazyxla::{nn, Tensor};
/// let p = Tensor::from_vec(vec![1.0f32, 3.0], &[2]).unwrap();
/// let t = Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap();
/// assert_eq!(nn::mse_loss(&p, &t).item::<f32>().unwrap(), 2.0);
/// ```
#[track_caller]
pub fn mse_loss(pred: &Tensor, target: &Tensor) -> Tensor {
    (pred - target).square().mean()
}

/// Cross entropy of `logits: [N, C]` against class indices `target: [N]`.
///
/// ```
/// use lazyxla::{nn, Tensor};
/// let logits = Tensor::from_vec(vec![0.0f32, 0.0], &[1, 2]).unwrap();
/// let target = Tensor::from_vec(vec![1i64], &[1]).unwrap();
/// let l = nn::cross_entropy(&logits, &target).item::<f32>().unwrap();
/// assert!((l - std::f32::consts::LN_2).abs() < 1e-6);
/// ```
#[track_caller]
pub fn cross_entropy(logits: &Tensor, target: &Tensor) -> Tensor {
    if logits.rank() != 2 || target.rank() != 1 {
        panic!(
            "cross_entropy: expects logits [N, C] and class indices [N], got {} and {}",
            logits.shape_string(),
            target.shape_string()
        );
    }
    let t = if target.dtype().is_int() {
        target.clone()
    } else {
        target.to_dtype(DType::I64)
    };
    let picked = logits.log_softmax(1).gather(1, &t.unsqueeze(1));
    picked.neg().mean()
}

/// Binary cross entropy on logits, computed stably:
/// `max(x, 0) - x·t + log1p(exp(-|x|))`.
///
/// ```
/// use lazyxla::{nn, Tensor};
/// let logits = Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
/// let target = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
/// let l = nn::binary_cross_entropy_with_logits(&logits, &target).item::<f32>().unwrap();
/// assert!((l - std::f32::consts::LN_2).abs() < 1e-6);
/// ```
#[track_caller]
pub fn binary_cross_entropy_with_logits(logits: &Tensor, target: &Tensor) -> Tensor {
    let t = target.to_dtype(logits.dtype());
    let x = logits;
    // `log1p`, not `log(1 + e)`: exact for small `e`, and the forward's
    // `1 + e` is not a value the backward's `1 / (1 + e)` shares, which
    // XLA wrote out as an extra pass (the detector's objectness).
    let loss = &(&x.relu() - &(x * &t)) + &x.abs().neg().exp().log1p();
    loss.mean()
}

/// Smooth L1 (Huber with `beta = 1`).
///
/// ```
/// use lazyxla::{nn, Tensor};
/// let p = Tensor::from_vec(vec![0.5f32, 3.0], &[2]).unwrap();
/// let t = Tensor::zeros(&[2], lazyxla::DType::F32);
/// // 0.5 * 0.5^2 and 3 - 0.5, averaged
/// assert_eq!(nn::smooth_l1_loss(&p, &t).item::<f32>().unwrap(), (0.125 + 2.5) / 2.0);
/// ```
#[track_caller]
pub fn smooth_l1_loss(pred: &Tensor, target: &Tensor) -> Tensor {
    smooth_l1_loss_beta(pred, target, 1.0)
}

/// Smooth L1: `0.5·d²/beta` where `|d| < beta`, else `|d| - beta/2`.
///
/// ```
/// use lazyxla::{nn, Tensor};
/// let p = Tensor::from_vec(vec![3.0f32], &[1]).unwrap();
/// let t = Tensor::zeros(&[1], lazyxla::DType::F32);
/// assert_eq!(nn::smooth_l1_loss_beta(&p, &t, 2.0).item::<f32>().unwrap(), 2.0);
/// ```
#[track_caller]
pub fn smooth_l1_loss_beta(pred: &Tensor, target: &Tensor, beta: f64) -> Tensor {
    let d = (pred - target).abs();
    let quadratic = d.square() * (0.5 / beta);
    let linear = &d - beta * 0.5;
    d.lt_scalar(beta).where_cond(&quadratic, &linear).mean()
}

/// How a loss combines its elements, as PyTorch's `reduction` argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean (PyTorch's default).
    #[default]
    Mean,
    /// The sum.
    Sum,
    /// One loss per element, not reduced.
    None,
}

/// Negative log likelihood of `log_probs: [N, C]` (or `[C]`) at class
/// indices `target: [N]` (or `[]`), as `torch.nn.functional.nll_loss`:
/// `-log_probs[n, target[n]]`, combined by `reduction`. Targets equal to
/// -100 (PyTorch's `ignore_index`) are left out (and the mean divides by
/// the others).
///
/// ```
/// use lazyxla::nn::{nll_loss, Reduction};
/// use lazyxla::Tensor;
/// let lp = Tensor::from_vec(vec![-0.5f32, -1.0, -2.0, -0.1], &[2, 2]).unwrap();
/// let t = Tensor::from_vec(vec![1i64, 0], &[2]).unwrap();
/// assert_eq!(nll_loss(&lp, &t, Reduction::Mean).item::<f32>().unwrap(), 1.5);
/// assert_eq!(nll_loss(&lp, &t, Reduction::None).to_vec::<f32>().unwrap(), [1.0, 2.0]);
/// let ignored = Tensor::from_vec(vec![1i64, -100], &[2]).unwrap();
/// assert_eq!(nll_loss(&lp, &ignored, Reduction::Mean).item::<f32>().unwrap(), 1.0);
/// ```
#[track_caller]
pub fn nll_loss(log_probs: &Tensor, target: &Tensor, reduction: Reduction) -> Tensor {
    let ok = (log_probs.rank() == 2 && target.rank() == 1)
        || (log_probs.rank() == 1 && target.rank() == 0);
    if !ok || !log_probs.dtype().is_float() || !target.dtype().is_int() {
        panic!(
            "nll_loss: expects float log-probabilities [N, C] and integer class indices [N] (or [C] and []), got {}{} and {}{}",
            log_probs.dtype(),
            log_probs.shape_string(),
            target.dtype(),
            target.shape_string()
        );
    }
    if log_probs.rank() == 1 {
        // `[C]` and `[]`: one sample; unreduced, a `[]` loss as PyTorch.
        let l = nll_loss(&log_probs.unsqueeze(0), &target.unsqueeze(0), reduction);
        return match reduction {
            Reduction::None => l.squeeze(0),
            Reduction::Mean | Reduction::Sum => l,
        };
    }
    let t = target.to_dtype(DType::I64);
    let keep = t.ne_scalar(-100.0);
    let safe = keep.where_cond(&t, &t.zeros_like());
    let picked = log_probs.gather(1, &safe.unsqueeze(1)).squeeze(1).neg();
    // A select, not a product with the mask: an ignored row's loss is 0 even
    // where its log-probability is NaN or infinite, as PyTorch skips it.
    let losses = keep.where_cond(&picked, &picked.zeros_like());
    let w = keep.to_dtype(log_probs.dtype());
    match reduction {
        Reduction::None => losses,
        Reduction::Sum => losses.sum(),
        Reduction::Mean => &losses.sum() / &w.sum(),
    }
}

/// Binary cross entropy of probabilities `input` against `target` (same
/// shape, values in `[0, 1]`), as `torch.nn.functional.binary_cross_entropy`:
/// `-(t·log(p) + (1-t)·log(1-p))` with each log clamped at -100, combined
/// by `reduction`.
///
/// ```
/// use lazyxla::nn::{binary_cross_entropy, Reduction};
/// use lazyxla::Tensor;
/// let p = Tensor::from_vec(vec![0.5f32, 1.0], &[2]).unwrap();
/// let t = Tensor::from_vec(vec![1.0f32, 0.0], &[2]).unwrap();
/// let l = binary_cross_entropy(&p, &t, Reduction::None).to_vec::<f32>().unwrap();
/// assert!((l[0] - std::f32::consts::LN_2).abs() < 1e-6);
/// assert_eq!(l[1], 100.0); // log(0) clamped at -100
/// ```
#[track_caller]
pub fn binary_cross_entropy(input: &Tensor, target: &Tensor, reduction: Reduction) -> Tensor {
    if !input.dtype().is_float() || input.shape_string() != target.shape_string() {
        panic!(
            "binary_cross_entropy: expects float probabilities and a target of the same shape, got {}{} and {}{}",
            input.dtype(),
            input.shape_string(),
            target.dtype(),
            target.shape_string()
        );
    }
    let t = target.to_dtype(input.dtype());
    let log_p = input.log().clamp_min(-100.0);
    let log_q = (&input.neg() + 1.0).log().clamp_min(-100.0);
    let losses = (&(&t * &log_p) + &(&(&t.neg() + 1.0) * &log_q)).neg();
    match reduction {
        Reduction::None => losses,
        Reduction::Sum => losses.sum(),
        Reduction::Mean => losses.mean(),
    }
}
