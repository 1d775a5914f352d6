//! Neural-network building blocks: the [`Module`] trait, layers with
//! PyTorch's default initialisations (seeded), activations and losses.
//!
//! Each module lists its own parameters, buffers and named children;
//! `named_parameters`, `named_buffers`, `parameters` and `train` walk that
//! tree with PyTorch's dotted names (`layer1.0.conv1.weight`, `Sequential`
//! children `0`, `1`, ..). `Linear`, `Embedding`, `LayerNorm`,
//! convolutions, pools, `BatchNorm2d`, `GroupNorm`, `RmsNorm`,
//! `MultiheadAttention` with PyTorch's initialisations, `Dropout`,
//! activations, `Sequential`, `scaled_dot_product_attention`; losses
//! `mse_loss`, `cross_entropy`, `binary_cross_entropy_with_logits`,
//! `smooth_l1_loss`; `clip_grad_norm`, which scales gradients by a lazy
//! factor (no host read); `load_state_dict`.
//!
//! Parameters and buffers are created as device data, so the first step
//! has the same structure as the rest. BatchNorm's running statistics are
//! device state that training `assign`s in the step's own program (batch
//! statistics detached, the real count of a dynamic batch), like an
//! optimizer's moments. Dropout draws its mask in the graph from a seed
//! tensor: a fresh scalar per eager call (a device state advanced in place
//! would chain updates across reads and recompile), device state inside a
//! captured step (a scalar would be a constant).
//!
//! ```
//! use lazyxla::nn::{Linear, Module};
//! use lazyxla::Tensor;
//! let layer = Linear::new(4, 2, 0);
//! let y = layer.forward(&Tensor::ones(&[3, 4], lazyxla::DType::F32));
//! assert_eq!(y.upper_bounds(), vec![3, 2]);
//! assert_eq!(layer.parameters().len(), 2);
//! ```

mod attention;
mod cells;
mod clip;
mod conv;
pub mod init;
mod layers;
mod loss;
mod norm;
mod pool;
mod recurrent;
mod state_dict;

pub use attention::{scaled_dot_product_attention, MultiheadAttention};
pub use cells::{GruCell, LstmCell, RnnCell};
pub use clip::clip_grad_norm;
pub use conv::{Conv1d, Conv2d, ConvTranspose2d};
pub use layers::{Dropout, Embedding, Gelu, LayerNorm, Linear, Relu, Sequential, Sigmoid, Tanh};
pub use loss::{
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, mse_loss, nll_loss,
    smooth_l1_loss, smooth_l1_loss_beta, Reduction,
};
pub use norm::{BatchNorm2d, GroupNorm, RmsNorm};
pub use pool::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d};
pub use recurrent::{Gru, Lstm, Rnn};
pub use state_dict::load_state_dict;

use crate::Tensor;

/// A layer or model: a forward function, its own parameters and buffers,
/// and its children.
///
/// A module states only what it holds itself: [`own_parameters`],
/// [`own_buffers`] and [`named_children`]. The provided methods walk the
/// tree from those, as PyTorch's `nn.Module` does: [`named_parameters`]
/// gives dotted names (`layer1.0.conv1.weight`), [`parameters`] the
/// tensors alone, [`named_buffers`] the running statistics, and
/// [`train`] switches the whole tree between training and evaluation.
///
/// A model written by hand lists its children by field name:
///
/// ```
/// use lazyxla::nn::{BatchNorm2d, Conv2d, Module, Sequential};
/// use lazyxla::{DType, Tensor};
///
/// struct Block {
///     conv1: Conv2d,
///     bn1: BatchNorm2d,
/// }
///
/// impl Module for Block {
///     fn forward(&self, x: &Tensor) -> Tensor {
///         self.bn1.forward(&self.conv1.forward(x)).relu()
///     }
///     fn named_children(&self) -> Vec<(String, &dyn Module)> {
///         vec![("conv1".into(), &self.conv1), ("bn1".into(), &self.bn1)]
///     }
/// }
///
/// let block = || Block {
///     conv1: Conv2d::new(2, 2, (3, 3), 0).padding((1, 1)).bias(false),
///     bn1: BatchNorm2d::new(2),
/// };
/// struct Net {
///     layer1: Sequential,
/// }
/// impl Module for Net {
///     fn forward(&self, x: &Tensor) -> Tensor {
///         self.layer1.forward(x)
///     }
///     fn named_children(&self) -> Vec<(String, &dyn Module)> {
///         vec![("layer1".into(), &self.layer1)]
///     }
/// }
/// let net = Net { layer1: Sequential::new().add(block()).add(block()) };
/// let names: Vec<String> = net.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names[0], "layer1.0.conv1.weight");
/// assert_eq!(names[1], "layer1.0.bn1.weight");
/// assert_eq!(net.named_buffers()[0].0, "layer1.0.bn1.running_mean");
/// net.train(false); // every BatchNorm now uses its running statistics
/// let y = net.forward(&Tensor::ones(&[1, 2, 4, 4], DType::F32));
/// assert_eq!(y.upper_bounds(), vec![1, 2, 4, 4]);
/// ```
///
/// [`own_parameters`]: Module::own_parameters
/// [`own_buffers`]: Module::own_buffers
/// [`named_children`]: Module::named_children
/// [`named_parameters`]: Module::named_parameters
/// [`parameters`]: Module::parameters
/// [`named_buffers`]: Module::named_buffers
/// [`train`]: Module::train
pub trait Module {
    /// Applies the module to `x`.
    fn forward(&self, x: &Tensor) -> Tensor;

    /// The parameters this module holds itself, not those of its
    /// children, named as PyTorch names them (`weight`, `bias`). Each
    /// requires grad. Default: none.
    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// The buffers (state that is not trained, such as running
    /// statistics) this module holds itself. Default: none.
    #[track_caller]
    fn own_buffers(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// The direct sub-modules, each under the name that prefixes its
    /// parameters (a field name; `0`, `1`, .. in a [`Sequential`]), in
    /// the order PyTorch registers them. Default: none.
    #[track_caller]
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        Vec::new()
    }

    /// Every parameter of the tree with its dotted name: own parameters
    /// first, then each child's under `child.`; a tensor reached twice
    /// (a tied weight) is listed once, under its first name, as PyTorch.
    #[track_caller]
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut all = self.own_parameters();
        for (name, child) in self.named_children() {
            all.extend(prefixed(&name, child.named_parameters()));
        }
        dedup(all)
    }

    /// Every buffer of the tree with its dotted name
    /// (`1.running_mean`), in the order of
    /// [`named_parameters`](Module::named_parameters).
    #[track_caller]
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut all = self.own_buffers();
        for (name, child) in self.named_children() {
            all.extend(prefixed(&name, child.named_buffers()));
        }
        dedup(all)
    }

    /// The tensors an optimizer updates (each requires grad), in the order
    /// of [`named_parameters`](Module::named_parameters).
    #[track_caller]
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Applies the module to several inputs and gives several outputs, for
    /// modules whose forward takes more than one tensor (PyTorch's
    /// `forward(input, hidden)`): a recurrent layer takes `[x]`, `[x, h0]`
    /// or `[x, h0, c0]` and gives `[output, h_n(, c_n)]`. The default
    /// takes exactly one input through [`forward`](Module::forward).
    ///
    /// ```
    /// use lazyxla::nn::{Linear, Module};
    /// use lazyxla::{DType, Tensor};
    /// let layer = Linear::new(4, 2, 0);
    /// let ys = layer.forward_many(&[Tensor::ones(&[3, 4], DType::F32)]);
    /// assert_eq!(ys[0].shape_string(), "[3, 2]");
    /// ```
    #[track_caller]
    fn forward_many(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        match inputs {
            [x] => vec![self.forward(x)],
            _ => panic!(
                "forward_many: this module takes one input, {} were given",
                inputs.len()
            ),
        }
    }

    /// Forgets the accumulated gradient of every parameter, as PyTorch's
    /// `module.zero_grad()` (with `set_to_none=True`).
    ///
    /// ```
    /// use lazyxla::nn::{Linear, Module};
    /// use lazyxla::{DType, Tensor};
    /// let layer = Linear::new(2, 1, 0);
    /// layer.forward(&Tensor::ones(&[1, 2], DType::F32)).sum().backward();
    /// assert!(layer.parameters()[0].grad().is_some());
    /// layer.zero_grad();
    /// assert!(layer.parameters().iter().all(|p| p.grad().is_none()));
    /// ```
    #[track_caller]
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.zero_grad();
        }
    }

    /// Switches training (`true`, every module's initial mode) or
    /// evaluation (`false`): [`BatchNorm2d`] then uses its running
    /// statistics and [`Dropout`] passes its input through. The default
    /// switches every child; a module with a mode of its own overrides
    /// it (and switches its children too, if it has any).
    #[track_caller]
    fn train(&self, on: bool) {
        for (_, child) in self.named_children() {
            child.train(on);
        }
    }
}

/// `prefix.name` for each name.
#[track_caller]
fn prefixed(prefix: &str, named: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    named
        .into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// The first entry for each tensor (by identity, not value).
#[track_caller]
fn dedup(named: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    let mut seen = rustc_hash::FxHashSet::default();
    named
        .into_iter()
        .filter(|(_, t)| seen.insert(t.id()))
        .collect()
}

/// `(name, tensor)` with an owned name, for `own_parameters` lists.
#[track_caller]
fn named(name: &str, t: &Tensor) -> (String, Tensor) {
    (name.to_string(), t.clone())
}

/// `max(x, 0)`.
///
/// ```
/// let x = lazyxla::Tensor::from_vec(vec![-1.0f32, 2.0], &[2]).unwrap();
/// assert_eq!(lazyxla::nn::relu(&x).to_vec::<f32>().unwrap(), vec![0.0, 2.0]);
/// ```
#[track_caller]
pub fn relu(x: &Tensor) -> Tensor {
    x.relu()
}

/// GELU (exact, erf form).
///
/// ```
/// let x = lazyxla::Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
/// assert!(lazyxla::nn::gelu(&x).item::<f32>().unwrap().abs() < 1e-6);
/// ```
#[track_caller]
pub fn gelu(x: &Tensor) -> Tensor {
    x.gelu()
}

/// Logistic sigmoid.
///
/// ```
/// let x = lazyxla::Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
/// assert!((lazyxla::nn::sigmoid(&x).item::<f32>().unwrap() - 0.5).abs() < 1e-6);
/// ```
#[track_caller]
pub fn sigmoid(x: &Tensor) -> Tensor {
    x.sigmoid()
}

/// Hyperbolic tangent.
///
/// ```
/// let x = lazyxla::Tensor::from_vec(vec![0.0f32], &[1]).unwrap();
/// assert!(lazyxla::nn::tanh(&x).item::<f32>().unwrap().abs() < 1e-6);
/// ```
#[track_caller]
pub fn tanh(x: &Tensor) -> Tensor {
    x.tanh()
}
