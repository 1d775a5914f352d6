//! Neural-network building blocks: the [`Module`] trait, layers with
//! PyTorch's default initialisations (seeded), activations and losses.
//!
//! ```
//! use lazyxla::nn::{Linear, Module};
//! use lazyxla::Tensor;
//! let layer = Linear::new(4, 2, 0);
//! let y = layer.forward(&Tensor::ones(&[3, 4], lazyxla::DType::F32));
//! assert_eq!(y.upper_bounds(), vec![3, 2]);
//! assert_eq!(layer.parameters().len(), 2);
//! ```

mod conv;
mod layers;
mod loss;
mod pool;

pub use conv::{Conv1d, Conv2d, ConvTranspose2d};
pub use layers::{Dropout, Embedding, Gelu, LayerNorm, Linear, Relu, Sequential, Sigmoid, Tanh};
pub use loss::{
    binary_cross_entropy_with_logits, cross_entropy, mse_loss, smooth_l1_loss, smooth_l1_loss_beta,
};
pub use pool::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d};

use crate::Tensor;

/// A layer or model: a forward function and its trainable parameters.
pub trait Module {
    /// Applies the module to `x`.
    fn forward(&self, x: &Tensor) -> Tensor;
    /// The tensors an optimizer updates (each requires grad).
    fn parameters(&self) -> Vec<Tensor>;
}

/// `max(x, 0)`.
pub fn relu(x: &Tensor) -> Tensor {
    x.relu()
}

/// GELU (exact, erf form).
pub fn gelu(x: &Tensor) -> Tensor {
    x.gelu()
}

/// Logistic sigmoid.
pub fn sigmoid(x: &Tensor) -> Tensor {
    x.sigmoid()
}

/// Hyperbolic tangent.
pub fn tanh(x: &Tensor) -> Tensor {
    x.tanh()
}
