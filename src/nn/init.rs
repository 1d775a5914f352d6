//! In-place initialisations with PyTorch's meaning (`torch.nn.init`),
//! drawn from the device generator that
//! [`manual_seed`](crate::manual_seed) seeds. Each fills the tensor's
//! value (without recording a gradient) and returns it.
//!
//! ```
//! use lazyxla::nn::init;
//! use lazyxla::{DType, Tensor};
//! let w = Tensor::zeros(&[64, 32], DType::F32).requires_grad(true);
//! init::xavier_uniform_(&w, 1.0);
//! let bound = (6.0f32 / 96.0).sqrt();
//! assert!(w.to_vec::<f32>().unwrap().iter().all(|v| v.abs() <= bound));
//! ```

use crate::tensor::no_grad;
use crate::Tensor;

/// Which fan `kaiming_*` keeps the variance of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FanMode {
    /// The forward pass (PyTorch's default).
    #[default]
    FanIn,
    /// The backward pass.
    FanOut,
}

/// `t`'s value replaced by `value` (no gradient recorded).
#[track_caller]
fn fill(t: &Tensor, value: Tensor) -> Tensor {
    no_grad(|| t.assign(&value.to_dtype(t.dtype())));
    t.clone()
}

/// Fills `t` with values drawn uniformly from `[a, b)`.
///
/// ```
/// use lazyxla::{nn::init, DType, Tensor};
/// let t = init::uniform_(&Tensor::zeros(&[100], DType::F32), -2.0, -1.0);
/// assert!(t.to_vec::<f32>().unwrap().iter().all(|&v| (-2.0..-1.0).contains(&v)));
/// ```
#[track_caller]
pub fn uniform_(t: &Tensor, a: f64, b: f64) -> Tensor {
    if a.is_nan() || b.is_nan() || a > b {
        panic!("init::uniform_: the bounds must satisfy a <= b, got a = {a}, b = {b}");
    }
    no_grad(|| fill(t, &t.rand_like().mul_scalar(b - a) + a))
}

/// Fills `t` with normal values of mean `mean` and standard deviation
/// `std`.
///
/// ```
/// use lazyxla::{nn::init, DType, Tensor};
/// let t = init::normal_(&Tensor::zeros(&[2000], DType::F32), 3.0, 0.5);
/// let v = t.to_vec::<f32>().unwrap();
/// assert!((v.iter().sum::<f32>() / 2000.0 - 3.0).abs() < 0.05);
/// ```
#[track_caller]
pub fn normal_(t: &Tensor, mean: f64, std: f64) -> Tensor {
    if std.is_nan() || std < 0.0 {
        panic!("init::normal_: std must not be negative, got {std}");
    }
    no_grad(|| fill(t, &t.randn_like().mul_scalar(std) + mean))
}

/// Fills `t` with `value`.
///
/// ```
/// use lazyxla::{nn::init, DType, Tensor};
/// assert_eq!(init::constant_(&Tensor::zeros(&[2], DType::F32), 0.5).to_vec::<f32>().unwrap(), [0.5, 0.5]);
/// ```
#[track_caller]
pub fn constant_(t: &Tensor, value: f64) -> Tensor {
    no_grad(|| fill(t, t.full_like(value)))
}

/// Fills `t` with zeros.
///
/// ```
/// use lazyxla::{nn::init, DType, Tensor};
/// assert_eq!(init::zeros_(&Tensor::ones(&[2], DType::F32)).to_vec::<f32>().unwrap(), [0.0, 0.0]);
/// ```
#[track_caller]
pub fn zeros_(t: &Tensor) -> Tensor {
    constant_(t, 0.0)
}

/// Fills `t` with ones.
///
/// ```
/// use lazyxla::{nn::init, DType, Tensor};
/// assert_eq!(init::ones_(&Tensor::zeros(&[2], DType::F32)).to_vec::<f32>().unwrap(), [1.0, 1.0]);
/// ```
#[track_caller]
pub fn ones_(t: &Tensor) -> Tensor {
    constant_(t, 1.0)
}

/// `(fan_in, fan_out)` of a weight `[out, in, k..]`, as PyTorch's
/// `_calculate_fan_in_and_fan_out`.
#[track_caller]
fn fans(op: &str, t: &Tensor) -> (f64, f64) {
    let b = t.upper_bounds();
    if b.len() < 2 || t.sizes().iter().any(|s| s.is_dynamic()) {
        panic!(
            "init::{op}: the fans need a weight of at least 2 static dims, got {}",
            t.shape_string()
        );
    }
    let receptive: usize = b[2..].iter().product();
    ((b[1] * receptive) as f64, (b[0] * receptive) as f64)
}

/// The gain PyTorch's `calculate_gain` recommends for `nonlinearity`
/// (`"linear"`, `"conv1d"`, `"conv2d"`, `"sigmoid"`: 1, `"tanh"`: 5/3,
/// `"relu"`: √2, `"leaky_relu"`: √(2 / (1 + param²)), `"selu"`: 3/4).
///
/// ```
/// use lazyxla::nn::init::calculate_gain;
/// assert_eq!(calculate_gain("tanh", 0.0), 5.0 / 3.0);
/// assert_eq!(calculate_gain("relu", 0.0), 2f64.sqrt());
/// ```
#[track_caller]
pub fn calculate_gain(nonlinearity: &str, param: f64) -> f64 {
    match nonlinearity {
        "linear" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d"
        | "conv_transpose3d" | "sigmoid" => 1.0,
        "tanh" => 5.0 / 3.0,
        "relu" => 2f64.sqrt(),
        "leaky_relu" => (2.0 / (1.0 + param * param)).sqrt(),
        "selu" => 0.75,
        other => panic!(
            "init::calculate_gain: unknown nonlinearity {other:?}; expected linear, conv1d, conv2d, sigmoid, tanh, relu, leaky_relu or selu"
        ),
    }
}

/// Xavier/Glorot uniform: `U(-a, a)` with `a = gain·√(6 / (fan_in + fan_out))`.
///
/// ```
/// use lazyxla::{nn::init, DType, Tensor};
/// let w = init::xavier_uniform_(&Tensor::zeros(&[3, 5], DType::F32), 1.0);
/// assert!(w.to_vec::<f32>().unwrap().iter().all(|v| v.abs() <= (6.0f32 / 8.0).sqrt()));
/// ```
#[track_caller]
pub fn xavier_uniform_(t: &Tensor, gain: f64) -> Tensor {
    let (fi, fo) = fans("xavier_uniform_", t);
    let a = gain * (6.0 / (fi + fo)).sqrt();
    uniform_(t, -a, a)
}

/// Xavier/Glorot normal: `N(0, std²)` with `std = gain·√(2 / (fan_in + fan_out))`.
///
/// ```
/// use lazyxla::{nn::init, DType, Tensor};
/// let w = init::xavier_normal_(&Tensor::zeros(&[40, 60], DType::F32), 1.0);
/// let v = w.to_vec::<f32>().unwrap();
/// let var = v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32;
/// assert!((var - 0.02).abs() < 0.003);
/// ```
#[track_caller]
pub fn xavier_normal_(t: &Tensor, gain: f64) -> Tensor {
    let (fi, fo) = fans("xavier_normal_", t);
    normal_(t, 0.0, gain * (2.0 / (fi + fo)).sqrt())
}

/// The standard deviation of `kaiming_*`.
#[track_caller]
fn kaiming_std(op: &str, t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> f64 {
    let (fi, fo) = fans(op, t);
    let fan = match mode {
        FanMode::FanIn => fi,
        FanMode::FanOut => fo,
    };
    calculate_gain(nonlinearity, a) / fan.sqrt()
}

/// Kaiming/He uniform: `U(-b, b)` with `b = gain·√(3 / fan)`, `gain =
/// calculate_gain(nonlinearity, a)`. PyTorch's defaults are `a = 0`,
/// `FanIn`, `"leaky_relu"`; `nn.Linear` uses `a = √5`.
///
/// ```
/// use lazyxla::nn::init::{self, FanMode};
/// use lazyxla::{DType, Tensor};
/// let w = init::kaiming_uniform_(&Tensor::zeros(&[8, 6], DType::F32), 0.0, FanMode::FanIn, "relu");
/// assert!(w.to_vec::<f32>().unwrap().iter().all(|v| v.abs() <= 1.0)); // √(2)·√(3/6)
/// ```
#[track_caller]
pub fn kaiming_uniform_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Tensor {
    let std = kaiming_std("kaiming_uniform_", t, a, mode, nonlinearity);
    let b = 3f64.sqrt() * std;
    uniform_(t, -b, b)
}

/// Kaiming/He normal: `N(0, std²)` with `std = gain / √fan`.
///
/// ```
/// use lazyxla::nn::init::{self, FanMode};
/// use lazyxla::{DType, Tensor};
/// let w = init::kaiming_normal_(&Tensor::zeros(&[50, 50], DType::F32), 0.0, FanMode::FanOut, "relu");
/// let v = w.to_vec::<f32>().unwrap();
/// let var = v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32;
/// assert!((var - 0.04).abs() < 0.005);
/// ```
#[track_caller]
pub fn kaiming_normal_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> Tensor {
    let std = kaiming_std("kaiming_normal_", t, a, mode, nonlinearity);
    normal_(t, 0.0, std)
}
