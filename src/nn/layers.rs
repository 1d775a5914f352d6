//! Layers. Parameters are created as device data (not as lazy ops), so the
//! first training step has the same program structure as every later one.

use super::{named, Module};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::Op;
use crate::tensor::SymInt;
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Host-generated uniform values in `[lo, hi)`, uploaded as data.
#[track_caller]
pub(super) fn uniform(shape: &[usize], lo: f64, hi: f64, seed: u64) -> Tensor {
    let mut g = crate::tensor::SplitMix64(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| (lo + (hi - lo) * g.next_f64()) as f32)
        .collect();
    Tensor::from_vec(v, shape).expect("length matches")
}

#[track_caller]
pub(super) fn filled(shape: &[usize], value: f32) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(vec![value; n], shape).expect("length matches")
}

/// `y = x Wᵀ + b` with `W: [out, in]`, initialised as PyTorch does
/// (uniform in `±1/sqrt(in)` for weight and bias).
#[derive(Debug)]
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Tensor,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer with bias; `seed` makes the initialisation reproducible.
    ///
    /// ```
    /// use lazyxla::nn::{Linear, Module};
    /// use lazyxla::Tensor;
    /// let fc = Linear::new(3, 2, 0);
    /// let y = fc.forward(&Tensor::ones(&[4, 3], lazyxla::DType::F32));
    /// assert_eq!(y.concrete_shape().unwrap(), vec![4, 2]);
    /// ```
    #[track_caller]
    pub fn new(in_features: usize, out_features: usize, seed: u64) -> Linear {
        let bound = 1.0 / (in_features.max(1) as f64).sqrt();
        Linear {
            weight: uniform(&[out_features, in_features], -bound, bound, seed).requires_grad(true),
            bias: Some(
                uniform(&[out_features], -bound, bound, seed ^ 0x5eed_b1a5).requires_grad(true),
            ),
        }
    }

    /// A layer from given tensors (they are marked as requiring grad).
    ///
    /// ```
    /// use lazyxla::nn::{Linear, Module};
    /// use lazyxla::Tensor;
    /// let w = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 2.0], &[2, 2]).unwrap();
    /// let fc = Linear::from_tensors(w, None);
    /// let x = Tensor::from_vec(vec![3.0f32, 4.0], &[1, 2]).unwrap();
    /// assert_eq!(fc.forward(&x).to_vec::<f32>().unwrap(), vec![3.0, 8.0]);
    /// ```
    #[track_caller]
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Linear {
        Linear {
            weight: weight.requires_grad(true),
            bias: bias.map(|b| b.requires_grad(true)),
        }
    }
}

impl Module for Linear {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = x.matmul(&self.weight.transpose(0, 1));
        match &self.bias {
            Some(b) => &y + b,
            None => y,
        }
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        let mut p = vec![named("weight", &self.weight)];
        p.extend(self.bias.iter().map(|b| named("bias", b)));
        p
    }
}

/// A lookup table of `num` vectors of size `dim`, initialised N(0, 1)
/// (PyTorch's `nn.Embedding`).
///
/// The indices may have any rank and dynamic dims (a batch of
/// `[B, <=T]` token ids from `mark_dynamic`); the result is `[.., dim]`
/// with the indices' sizes.
///
/// ```
/// use lazyxla::nn::{Embedding, Module};
/// use lazyxla::Tensor;
/// let emb = Embedding::new(10, 3, 0);
/// let ids = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap().mark_dynamic(1, 8);
/// let y = emb.forward(&ids);
/// assert_eq!(y.shape_string(), "[2, <=8, 3]");
/// assert_eq!(y.concrete_shape().unwrap(), vec![2, 3, 3]);
/// ```
#[derive(Debug)]
pub struct Embedding {
    /// `[num, dim]`.
    pub weight: Tensor,
}

impl Embedding {
    /// A table with a seeded initialisation.
    ///
    /// ```
    /// use lazyxla::nn::{Embedding, Module};
    /// use lazyxla::Tensor;
    /// let emb = Embedding::new(10, 4, 0);
    /// let ids = Tensor::from_vec(vec![1i64, 7], &[2]).unwrap();
    /// assert_eq!(emb.forward(&ids).concrete_shape().unwrap(), vec![2, 4]);
    /// ```
    #[track_caller]
    pub fn new(num: usize, dim: usize, seed: u64) -> Embedding {
        Embedding {
            weight: Tensor::randn(&[num, dim], seed).requires_grad(true),
        }
    }
}

impl Module for Embedding {
    /// `x` holds integer indices of any shape; the result appends `dim`.
    /// Panics on float indices.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        if !x.dtype().is_int() {
            panic!(
                "{}",
                Error::dtype(
                    "Embedding",
                    format!(
                        "the indices must be integers (I64 or I32), got {}{}; convert them with to_dtype(DType::I64)",
                        x.dtype(),
                        x.shape_string()
                    )
                )
            );
        }
        if x.rank() == 1 {
            return self.weight.index_select(0, x);
        }
        let mut sizes = x.sizes();
        sizes.push(self.weight.size(1));
        if !x.is_dynamic() {
            return self
                .weight
                .index_select(0, &x.flatten())
                .reshape_sym(&sizes);
        }
        // A reshape gives at most one dynamic dim (XLA's limit), so look up
        // the bound-shaped indices (padding is index 0, a valid row) and
        // keep the real positions of each dynamic dim: no padded row
        // reaches the result or, backwards, the table's gradient.
        let bounds: Vec<SymInt> = x.upper_bounds().into_iter().map(SymInt::from).collect();
        let mut rows = self
            .weight
            .index_select(0, &x.pad_to_bound(0.0).flatten())
            .reshape_sym(&[&bounds[..], &sizes[x.rank()..]].concat());
        for (d, s) in sizes[..x.rank()].iter().enumerate() {
            if s.is_dynamic() {
                rows = rows.index_select(d, &Tensor::arange_sym(s));
            }
        }
        rows
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![named("weight", &self.weight)]
    }
}

/// Normalises over the last dimension, then scales and shifts
/// (weight ones, bias zeros, eps 1e-5, as PyTorch).
#[derive(Debug)]
pub struct LayerNorm {
    /// `[dim]`.
    pub weight: Tensor,
    /// `[dim]`.
    pub bias: Tensor,
    /// Added to the variance.
    pub eps: f64,
}

impl LayerNorm {
    /// A layer norm over a last dimension of size `dim`.
    ///
    /// ```
    /// use lazyxla::nn::{LayerNorm, Module};
    /// use lazyxla::Tensor;
    /// let ln = LayerNorm::new(2);
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0], &[1, 2]).unwrap();
    /// let y = ln.forward(&x).to_vec::<f32>().unwrap();
    /// assert!((y[0] + 1.0).abs() < 1e-3 && (y[1] - 1.0).abs() < 1e-3);
    /// ```
    #[track_caller]
    pub fn new(dim: usize) -> LayerNorm {
        LayerNorm {
            weight: filled(&[dim], 1.0).requires_grad(true),
            bias: filled(&[dim], 0.0).requires_grad(true),
            eps: 1e-5,
        }
    }
}

impl Module for LayerNorm {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        let mean = x.mean_dims(&[-1], true);
        let centered = x - &mean;
        let var = centered.square().mean_dims(&[-1], true);
        let normed = &centered * &(var + self.eps).rsqrt();
        &(&normed * &self.weight) + &self.bias
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![named("weight", &self.weight), named("bias", &self.bias)]
    }
}

/// Zeroes elements with probability `p` in training mode and scales the
/// rest by `1/(1-p)`. The mask is drawn in the graph from a seed tensor
/// that advances every call, so steps differ but compile once. Inside a
/// captured step (`lazyxla::capture`) the seed is device state advanced
/// in the graph, so every replay draws a new mask.
#[derive(Debug)]
pub struct Dropout {
    p: f64,
    seed: u64,
    /// Eager calls so far: each call's seed is a fresh scalar, so a loop
    /// that only reads values never builds a chain of pending updates.
    calls: AtomicU64,
    /// The seed of captured steps: device data that the step's program
    /// advances (a host scalar would be a constant of the recording).
    captured_seed: Tensor,
    training: AtomicBool,
}

impl Dropout {
    /// Dropout with probability `p` and a base seed.
    ///
    /// ```
    /// use lazyxla::nn::{Dropout, Module};
    /// use lazyxla::Tensor;
    /// let drop = Dropout::new(0.5, 0);
    /// drop.train(false);
    /// let x = Tensor::ones(&[4], lazyxla::DType::F32);
    /// assert_eq!(drop.forward(&x).to_vec::<f32>().unwrap(), vec![1.0; 4]);
    /// ```
    #[track_caller]
    pub fn new(p: f64, seed: u64) -> Dropout {
        assert!(
            (0.0..1.0).contains(&p),
            "Dropout: p must be in [0, 1), got {p}"
        );
        Dropout {
            p,
            seed,
            calls: AtomicU64::new(0),
            captured_seed: Tensor::scalar(seed.wrapping_mul(0x5851_f42d) as i64 ^ 0x2545_f491),
            training: AtomicBool::new(true),
        }
    }
}

impl Module for Dropout {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        if !self.training.load(Ordering::Relaxed) || self.p == 0.0 {
            return x.clone();
        }
        let seed = if crate::capture::is_recording() {
            // A new handle on the current value: `assign` changes the
            // tensor and its clones.
            let seed = self.captured_seed.detach();
            self.captured_seed.assign(&(&seed + 1));
            seed
        } else {
            let call = self.calls.fetch_add(1, Ordering::Relaxed);
            Tensor::scalar(self.seed.wrapping_mul(0x9e37_79b9).wrapping_add(call) as i64)
        };
        let bound: crate::symint::Shape = x
            .upper_bounds()
            .iter()
            .map(|&b| crate::symint::SizeExpr::constant(b as i64))
            .collect();
        let dtype = if x.dtype().is_float() {
            x.dtype()
        } else {
            DType::F32
        };
        let u = Tensor::try_apply_on(
            Op::RandomUniform {
                dtype,
                shape: bound,
            },
            &[&seed],
            SmallVec::new(),
            x.device(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // Crop a bound-shaped draw to the real sizes of a dynamic input.
        let mut u = u;
        for (d, s) in x.sizes().iter().enumerate() {
            if s.is_dynamic() {
                u = u.index_select(d, &Tensor::arange_sym(s));
            }
        }
        let keep = u.ge_scalar(self.p).to_dtype(dtype);
        &(x * &keep) * (1.0 / (1.0 - self.p))
    }

    /// Training drops elements; evaluation passes the input through.
    #[track_caller]
    fn train(&self, on: bool) {
        self.training.store(on, Ordering::Relaxed);
    }
}

macro_rules! activation {
    ($name:ident, $method:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;
        impl Module for $name {
            #[track_caller]
            fn forward(&self, x: &Tensor) -> Tensor {
                x.$method()
            }
        }
    };
}

activation!(Relu, relu, "`max(x, 0)` as a module.");
activation!(Gelu, gelu, "GELU as a module.");
activation!(Sigmoid, sigmoid, "Sigmoid as a module.");
activation!(Tanh, tanh, "Tanh as a module.");

/// Modules applied in order.
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Module + Send + Sync>>,
}

impl std::fmt::Debug for Sequential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequential")
            .field("layers", &self.layers.len())
            .finish()
    }
}

impl Sequential {
    /// An empty sequence.
    ///
    /// ```
    /// use lazyxla::nn::{Linear, Module, Relu, Sequential};
    /// let net = Sequential::new().add(Linear::new(4, 8, 0)).add(Relu).add(Linear::new(8, 2, 1));
    /// let y = net.forward(&lazyxla::Tensor::ones(&[3, 4], lazyxla::DType::F32));
    /// assert_eq!(y.concrete_shape().unwrap(), vec![3, 2]);
    /// ```
    #[track_caller]
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// Appends a module.
    ///
    /// ```
    /// use lazyxla::nn::{Linear, Module, Sequential, Tanh};
    /// let net = Sequential::new().add(Linear::new(2, 2, 0)).add(Tanh);
    /// assert_eq!(net.parameters().len(), 2);
    /// ```
    #[track_caller]
    pub fn add(mut self, m: impl Module + Send + Sync + 'static) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }
}

impl Module for Sequential {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.layers.iter().fold(x.clone(), |h, m| m.forward(&h))
    }

    /// The layers, named `0`, `1`, .. in order, as PyTorch's
    /// `nn.Sequential`.
    #[track_caller]
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        self.layers
            .iter()
            .enumerate()
            .map(|(i, m)| (i.to_string(), &**m as &dyn Module))
            .collect()
    }
}
