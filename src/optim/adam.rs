//! Adam and AdamW.

use super::{
    saved, scalar_dtype, scalar_on, state_device, zeros_like_data, LearningRate, Optimizer,
    StateLoader,
};
use crate::tensor::Tensor;
use crate::{no_grad, Result};

/// Adam (`decoupled = false`) and AdamW (`decoupled = true`).
#[derive(Debug)]
struct AdamCore {
    params: Vec<Tensor>,
    lr: LearningRate,
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
    #[track_caller]
    fn new(params: Vec<Tensor>, lr: f64, weight_decay: f64, decoupled: bool) -> AdamCore {
        AdamCore {
            m: params.iter().map(zeros_like_data).collect(),
            v: params.iter().map(zeros_like_data).collect(),
            // In the parameters' precision, so f64 training is exact.
            t: scalar_on(0.0, scalar_dtype(&params), &state_device(&params)),
            lr: LearningRate::new(&params, lr),
            params,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay,
            decoupled,
        }
    }

    #[track_caller]
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
                let lr = self.lr.as_dtype(p.dtype());
                let mut p_new = p.clone();
                if self.weight_decay != 0.0 {
                    if self.decoupled {
                        p_new = p * &(1.0 - &(&lr * self.weight_decay));
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
                p.assign(&(&p_new - &(&update * &lr)));
            }
        })
    }

    #[track_caller]
    fn zero_grad(&mut self) {
        self.params.iter().for_each(Tensor::zero_grad);
    }

    #[track_caller]
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(3 * self.params.len() + 1);
        for (i, (m, v)) in self.m.iter().zip(&self.v).enumerate() {
            out.push(saved(format!("state.{i}.exp_avg"), m));
            out.push(saved(format!("state.{i}.exp_avg_sq"), v));
            out.push(saved(format!("state.{i}.step"), &self.t));
        }
        out.push(self.lr.entry());
        out
    }

    #[track_caller]
    fn load_state_dict(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        let mut l = StateLoader::new(state);
        let mut moments = Vec::with_capacity(self.m.len());
        let mut step = None;
        for (i, (m, v)) in self.m.iter().zip(&self.v).enumerate() {
            let m = l.like(&format!("state.{i}.exp_avg"), m)?;
            let v = l.like(&format!("state.{i}.exp_avg_sq"), v)?;
            let t = l.scalar(&format!("state.{i}.step"), self.t.dtype(), self.t.device())?;
            // All parameters share one count: the first one's is taken.
            step.get_or_insert(t);
            moments.push((m, v));
        }
        let lr = l.lr()?;
        l.finish()?;
        for ((m, v), (new_m, new_v)) in self.m.iter().zip(&self.v).zip(&moments) {
            m.assign(new_m);
            v.assign(new_v);
        }
        if let Some(t) = step {
            self.t.assign(&t);
        }
        self.lr.set(lr);
        Ok(())
    }
}

/// Implements [`Optimizer`] for a wrapper of [`AdamCore`].
macro_rules! adam_optimizer {
    ($t:ty) => {
        impl Optimizer for $t {
            #[track_caller]
            fn step(&mut self) {
                self.0.step()
            }
            #[track_caller]
            fn zero_grad(&mut self) {
                self.0.zero_grad()
            }
            #[track_caller]
            fn lr(&self) -> f64 {
                self.0.lr.value
            }
            #[track_caller]
            fn set_lr(&mut self, lr: f64) {
                self.0.lr.set(lr)
            }
            #[track_caller]
            fn state_dict(&self) -> Vec<(String, Tensor)> {
                self.0.state_dict()
            }
            #[track_caller]
            fn load_state_dict(&mut self, state: &[(String, Tensor)]) -> Result<()> {
                self.0.load_state_dict(state)
            }
        }
    };
}

/// Adam with L2 weight decay added to the gradient.
///
/// Its [`state_dict`](Optimizer::state_dict) holds `state.{i}.exp_avg`,
/// `state.{i}.exp_avg_sq` and `state.{i}.step` per parameter, and
/// `param_groups.0.lr`.
///
/// ```
/// use lazyxla::{optim::{Adam, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
/// let mut opt = Adam::new(vec![w.clone()], 0.1);
/// w.sum().backward();
/// opt.step(); // the first step moves by lr·sign(g)
/// assert!((w.item::<f32>().unwrap() - 0.9).abs() < 1e-6);
/// ```
#[derive(Debug)]
pub struct Adam(AdamCore);

impl Adam {
    /// Adam with betas (0.9, 0.999), eps 1e-8, no weight decay.
    ///
    /// ```
    /// use lazyxla::{optim::{Adam, Optimizer}, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// assert_eq!(Adam::new(vec![w], 0.1).lr(), 0.1);
    /// ```
    #[track_caller]
    pub fn new(params: Vec<Tensor>, lr: f64) -> Adam {
        Adam(AdamCore::new(params, lr, 0.0, false))
    }

    /// With L2 weight decay.
    ///
    /// ```
    /// use lazyxla::{optim::Adam, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// let _opt = Adam::new(vec![w], 0.1).weight_decay(1e-4);
    /// ```
    #[track_caller]
    pub fn weight_decay(mut self, wd: f64) -> Adam {
        self.0.weight_decay = wd;
        self
    }

    /// With other betas.
    ///
    /// ```
    /// use lazyxla::{optim::Adam, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// let _opt = Adam::new(vec![w], 0.1).betas(0.8, 0.99);
    /// ```
    #[track_caller]
    pub fn betas(mut self, b1: f64, b2: f64) -> Adam {
        self.0.betas = (b1, b2);
        self
    }
}

adam_optimizer!(Adam);

/// AdamW: Adam with decoupled weight decay (default 0.01, as PyTorch).
///
/// Its state dict has [`Adam`]'s names.
///
/// ```
/// use lazyxla::{optim::{AdamW, Optimizer}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
/// let mut opt = AdamW::new(vec![w.clone()], 0.1).weight_decay(0.0);
/// w.sum().backward();
/// opt.step();
/// assert!((w.item::<f32>().unwrap() - 0.9).abs() < 1e-6);
/// ```
#[derive(Debug)]
pub struct AdamW(AdamCore);

impl AdamW {
    /// AdamW with betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
    ///
    /// ```
    /// use lazyxla::{optim::{AdamW, Optimizer}, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// assert_eq!(AdamW::new(vec![w], 0.1).lr(), 0.1);
    /// ```
    #[track_caller]
    pub fn new(params: Vec<Tensor>, lr: f64) -> AdamW {
        AdamW(AdamCore::new(params, lr, 0.01, true))
    }

    /// With another weight decay.
    ///
    /// ```
    /// use lazyxla::{optim::AdamW, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// let _opt = AdamW::new(vec![w], 0.1).weight_decay(0.1);
    /// ```
    #[track_caller]
    pub fn weight_decay(mut self, wd: f64) -> AdamW {
        self.0.weight_decay = wd;
        self
    }
}

adam_optimizer!(AdamW);
