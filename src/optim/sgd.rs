//! Stochastic gradient descent.

use super::{saved, zeros_like_data, LearningRate, Optimizer, StateLoader};
use crate::tensor::Tensor;
use crate::{no_grad, Result};

/// Stochastic gradient descent with optional momentum and weight decay
/// (PyTorch's formulation: `v = m·v + g`, `p -= lr·v`).
///
/// Its [`state_dict`](Optimizer::state_dict) holds
/// `state.{i}.momentum_buffer` per parameter (with momentum only) and
/// `param_groups.0.lr`.
///
/// ```
/// use lazyxla::{optim::{Optimizer, Sgd}, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
/// let mut opt = Sgd::new(vec![w.clone()], 0.1).momentum(0.9).weight_decay(1e-4);
/// w.sum().backward();
/// opt.step();
/// assert_eq!(opt.state_dict().len(), 2);
/// ```
#[derive(Debug)]
pub struct Sgd {
    params: Vec<Tensor>,
    lr: LearningRate,
    momentum: f64,
    weight_decay: f64,
    velocity: Vec<Tensor>,
}

impl Sgd {
    /// Plain SGD.
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// assert_eq!(Sgd::new(vec![w], 0.1).lr(), 0.1);
    /// ```
    #[track_caller]
    pub fn new(params: Vec<Tensor>, lr: f64) -> Sgd {
        Sgd {
            lr: LearningRate::new(&params, lr),
            params,
            momentum: 0.0,
            weight_decay: 0.0,
            velocity: Vec::new(),
        }
    }

    /// With momentum `m` (a velocity buffer per parameter, zeros at first).
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// let opt = Sgd::new(vec![w], 0.1).momentum(0.9);
    /// assert_eq!(opt.state_dict()[0].0, "state.0.momentum_buffer");
    /// ```
    #[track_caller]
    pub fn momentum(mut self, m: f64) -> Sgd {
        self.momentum = m;
        self.velocity = self.params.iter().map(zeros_like_data).collect();
        self
    }

    /// With L2 weight decay (`g += wd·p`).
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// let mut opt = Sgd::new(vec![w.clone()], 0.5).weight_decay(1.0);
    /// (&w * 0.0).sum().backward(); // grad 0, decay 1·w
    /// opt.step();
    /// assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.5]);
    /// ```
    #[track_caller]
    pub fn weight_decay(mut self, wd: f64) -> Sgd {
        self.weight_decay = wd;
        self
    }
}

impl Optimizer for Sgd {
    #[track_caller]
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
                p.assign(&(p - &(&g * &self.lr.as_dtype(p.dtype()))));
            }
        })
    }

    #[track_caller]
    fn zero_grad(&mut self) {
        self.params.iter().for_each(Tensor::zero_grad);
    }

    #[track_caller]
    fn lr(&self) -> f64 {
        self.lr.value
    }

    #[track_caller]
    fn set_lr(&mut self, lr: f64) {
        self.lr.set(lr);
    }

    #[track_caller]
    fn state_dict(&self) -> Vec<(String, Tensor)> {
        let mut out: Vec<(String, Tensor)> = (self.velocity.iter().enumerate())
            .map(|(i, v)| saved(format!("state.{i}.momentum_buffer"), v))
            .collect();
        out.push(self.lr.entry());
        out
    }

    #[track_caller]
    fn load_state_dict(&mut self, state: &[(String, Tensor)]) -> Result<()> {
        let mut l = StateLoader::new(state);
        let velocity = (self.velocity.iter().enumerate())
            .map(|(i, v)| l.like(&format!("state.{i}.momentum_buffer"), v))
            .collect::<Result<Vec<_>>>()?;
        let lr = l.lr()?;
        l.finish()?;
        for (v, new) in self.velocity.iter().zip(&velocity) {
            v.assign(new);
        }
        self.lr.set(lr);
        Ok(())
    }
}
