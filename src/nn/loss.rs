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
