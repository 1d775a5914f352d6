//! Gradient clipping.

use crate::{no_grad, DType, Tensor};

/// PyTorch's `clip_grad_norm_`: scales the gradients of `params` in place
/// so that their total L2 norm (over all gradients together) is at most
/// `max_norm`, and returns that total norm before clipping.
///
/// The scale is `max_norm / (total + 1e-6)`, clamped to at most 1, and
/// multiplies every gradient (an `assign`, so every handle of a gradient
/// sees it). Everything is lazy: the norm is a scalar tensor computed with
/// the step, no value goes to the host, and the same program serves steps
/// that clip and steps that do not. The norm is computed in `f64` when a
/// gradient is `f64`, else in `f32`. Parameters without a gradient are
/// skipped; with none at all the norm is `0.0f32`.
///
/// ```
/// use lazyxla::{nn::clip_grad_norm, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap().requires_grad(true);
/// (&w * 3.0).sum().backward(); // grad [3, 3]
/// let b = Tensor::from_vec(vec![0.0f32], &[1]).unwrap().requires_grad(true);
/// (&b * 4.0).sum().backward(); // grad [4]
/// // Total norm sqrt(9 + 9 + 16) = sqrt(34), scaled down to 1.
/// let total = clip_grad_norm(&[w.clone(), b.clone()], 1.0);
/// assert!((total.item::<f32>().unwrap() - 34f32.sqrt()).abs() < 1e-5);
/// let g: Vec<f32> = w.grad().unwrap().to_vec().unwrap();
/// assert!((g[0] - 3.0 / 34f32.sqrt()).abs() < 1e-5);
/// ```
#[track_caller]
pub fn clip_grad_norm(params: &[Tensor], max_norm: f64) -> Tensor {
    no_grad(|| {
        let grads: Vec<Tensor> = params.iter().filter_map(Tensor::grad).collect();
        let dtype = if grads.iter().any(|g| g.dtype() == DType::F64) {
            DType::F64
        } else {
            DType::F32
        };
        let squares = grads.iter().map(|g| g.to_dtype(dtype).square().sum());
        let Some(sum) = squares.reduce(|a, b| &a + &b) else {
            return Tensor::scalar(0.0f32);
        };
        let total = sum.sqrt();
        let scale = (max_norm / &(&total + 1e-6)).minimum(&total.full_like(1.0));
        for g in &grads {
            g.assign(&(g * &scale.to_dtype(g.dtype())));
        }
        total
    })
}
