//! Optimizers. Updates are lazy ops assigned back into the parameters, so
//! forward, backward and update of a step run as one compiled program at
//! `mark_step()`, and parameters and optimizer state stay on the device.
//! All state (moments, step count) is device data from the start, so
//! every step has the same program structure.
//!
//! ```
//! use lazyxla::{optim::{Optimizer, Sgd}, Tensor, mark_step};
//! let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
//! let mut opt = Sgd::new(vec![w.clone()], 0.1);
//! for _ in 0..3 {
//!     opt.zero_grad();
//!     (&w * &w).sum().backward();
//!     opt.step();
//!     mark_step().unwrap();
//! }
//! assert!((w.item::<f32>().unwrap() - 0.512).abs() < 1e-6);
//! ```

use crate::tensor::Tensor;
use crate::{no_grad, DType};

/// What every optimizer does.
pub trait Optimizer {
    /// Records the update of every parameter that has a gradient.
    fn step(&mut self);
    /// Forgets the gradients of all parameters.
    fn zero_grad(&mut self);
}

fn zeros_like_data(p: &Tensor) -> Tensor {
    let shape = p.upper_bounds();
    let n: usize = shape.iter().product();
    match p.dtype() {
        DType::F64 => Tensor::from_vec(vec![0.0f64; n], &shape),
        _ => Tensor::from_vec(vec![0.0f32; n], &shape),
    }
    .expect("length matches")
}

/// Stochastic gradient descent with optional momentum and weight decay
/// (PyTorch's formulation: `v = m·v + g`, `p -= lr·v`).
pub struct Sgd {
    params: Vec<Tensor>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    velocity: Vec<Tensor>,
}

impl Sgd {
    /// Plain SGD.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Sgd {
        Sgd {
            params,
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
            velocity: Vec::new(),
        }
    }

    /// With momentum `m`.
    pub fn momentum(mut self, m: f64) -> Sgd {
        self.momentum = m;
        self.velocity = self.params.iter().map(zeros_like_data).collect();
        self
    }

    /// With L2 weight decay.
    pub fn weight_decay(mut self, wd: f64) -> Sgd {
        self.weight_decay = wd;
        self
    }
}

impl Optimizer for Sgd {
    fn step(&mut self) {
        no_grad(|| {
            for (i, p) in self.params.iter().enumerate() {
                let Some(mut g) = p.grad() else { continue };
                if self.weight_decay != 0.0 {
                    g = &g + &(p * self.weight_decay);
                }
                if self.momentum != 0.0 {
                    let v = &(&self.velocity[i] * self.momentum) + &g;
                    self.velocity[i].assign(&v);
                    g = v;
                }
                p.assign(&(p - &(&g * self.lr)));
            }
        })
    }

    fn zero_grad(&mut self) {
        self.params.iter().for_each(Tensor::zero_grad);
    }
}

/// Adam (`decoupled = false`) and AdamW (`decoupled = true`).
struct AdamCore {
    params: Vec<Tensor>,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    decoupled: bool,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    /// The step count, a device scalar so the bias correction changes
    /// without recompiling.
    t: Tensor,
}

impl AdamCore {
    fn new(params: Vec<Tensor>, lr: f64, weight_decay: f64, decoupled: bool) -> AdamCore {
        AdamCore {
            m: params.iter().map(zeros_like_data).collect(),
            v: params.iter().map(zeros_like_data).collect(),
            // In the parameters' precision, so f64 training is exact.
            t: if params.iter().any(|p| p.dtype() == DType::F64) {
                Tensor::scalar(0.0f64)
            } else {
                Tensor::scalar(0.0f32)
            },
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay,
            decoupled,
        }
    }

    fn step(&mut self) {
        no_grad(|| {
            let (b1, b2) = self.betas;
            let t = &self.t + 1.0;
            self.t.assign(&t);
            // 1 - beta^t, computed on the device from the step count.
            let bc1 = 1.0 - &(&t * b1.ln()).exp();
            let bc2 = 1.0 - &(&t * b2.ln()).exp();
            for (i, p) in self.params.iter().enumerate() {
                let Some(mut g) = p.grad() else { continue };
                let mut p_new = p.clone();
                if self.weight_decay != 0.0 {
                    if self.decoupled {
                        p_new = p * (1.0 - self.lr * self.weight_decay);
                    } else {
                        g = &g + &(p * self.weight_decay);
                    }
                }
                let m = &(&self.m[i] * b1) + &(&g * (1.0 - b1));
                let v = &(&self.v[i] * b2) + &(&g.square() * (1.0 - b2));
                self.m[i].assign(&m);
                self.v[i].assign(&v);
                let m_hat = &m / &bc1.to_dtype(m.dtype());
                let v_hat = &v / &bc2.to_dtype(v.dtype());
                let update = &m_hat / &(v_hat.sqrt() + self.eps);
                p.assign(&(&p_new - &(&update * self.lr)));
            }
        })
    }

    fn zero_grad(&mut self) {
        self.params.iter().for_each(Tensor::zero_grad);
    }
}

/// Adam with L2 weight decay added to the gradient.
pub struct Adam(AdamCore);

impl Adam {
    /// Adam with betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn new(params: Vec<Tensor>, lr: f64) -> Adam {
        Adam(AdamCore::new(params, lr, 0.0, false))
    }

    /// With L2 weight decay.
    pub fn weight_decay(mut self, wd: f64) -> Adam {
        self.0.weight_decay = wd;
        self
    }

    /// With other betas.
    pub fn betas(mut self, b1: f64, b2: f64) -> Adam {
        self.0.betas = (b1, b2);
        self
    }
}

impl Optimizer for Adam {
    fn step(&mut self) {
        self.0.step()
    }
    fn zero_grad(&mut self) {
        self.0.zero_grad()
    }
}

/// AdamW: Adam with decoupled weight decay (default 0.01, as PyTorch).
pub struct AdamW(AdamCore);

impl AdamW {
    /// AdamW with betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
    pub fn new(params: Vec<Tensor>, lr: f64) -> AdamW {
        AdamW(AdamCore::new(params, lr, 0.01, true))
    }

    /// With another weight decay.
    pub fn weight_decay(mut self, wd: f64) -> AdamW {
        self.0.weight_decay = wd;
        self
    }
}

impl Optimizer for AdamW {
    fn step(&mut self) {
        self.0.step()
    }
    fn zero_grad(&mut self) {
        self.0.zero_grad()
    }
}
