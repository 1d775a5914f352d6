//! Learning-rate schedules with PyTorch's closed-form formulas. A
//! scheduler drives [`Optimizer::set_lr`], so a new rate each step
//! compiles nothing.
//!
//! Like PyTorch's, a scheduler reads the optimizer's rate when it is made
//! (the base rate `lr0`), sets the rate of epoch 0, and each
//! [`step`](LrScheduler::step) advances one epoch and sets that epoch's
//! rate. Call `step` after the optimizer's, outside a
//! [`capture`](crate::capture)d function.
//!
//! ```
//! use lazyxla::optim::lr_scheduler::{CosineAnnealingLr, LinearWarmup, LrScheduler};
//! use lazyxla::optim::{Optimizer, Sgd};
//! use lazyxla::{mark_step, Tensor};
//! let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
//! let mut opt = Sgd::new(vec![w.clone()], 0.1);
//! // 2 warm-up steps from 0.5·lr0, then a cosine over 8 steps.
//! let cosine = CosineAnnealingLr::new(&mut opt, 8, 0.0).unwrap();
//! let mut sched = LinearWarmup::followed_by(&mut opt, 0.5, 2, cosine).unwrap();
//! assert_eq!(opt.lr(), 0.05);
//! for _ in 0..10 {
//!     opt.zero_grad();
//!     w.sum().backward();
//!     opt.step();
//!     mark_step().unwrap();
//!     sched.step(&mut opt);
//! }
//! assert_eq!(sched.epoch(), 10);
//! assert!(opt.lr().abs() < 1e-12); // the end of the cosine
//! assert_eq!(lazyxla::metrics::counter("UncachedCompile"), 1);
//! ```

use super::Optimizer;
use crate::{Error, Result};

/// A learning-rate schedule: the rate as a function of the epoch (the
/// number of [`step`](LrScheduler::step) calls so far).
pub trait LrScheduler {
    /// The rate at `epoch`, in closed form (PyTorch's
    /// `_get_closed_form_lr`).
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::{LrScheduler, StepLr};
    /// use lazyxla::optim::Sgd;
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
    /// let sched = StepLr::new(&mut opt, 2, 0.5).unwrap();
    /// assert_eq!(sched.lr_at(5), 0.25);
    /// ```
    fn lr_at(&self, epoch: usize) -> f64;

    /// How many times [`step`](LrScheduler::step) has run.
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::{LrScheduler, StepLr};
    /// use lazyxla::optim::Sgd;
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
    /// let mut sched = StepLr::new(&mut opt, 2, 0.5).unwrap();
    /// sched.step(&mut opt);
    /// assert_eq!(sched.epoch(), 1);
    /// ```
    fn epoch(&self) -> usize;

    /// Advances one epoch and sets `opt`'s rate to the new epoch's.
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::{LrScheduler, StepLr};
    /// use lazyxla::optim::{Optimizer, Sgd};
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
    /// let mut sched = StepLr::new(&mut opt, 1, 0.5).unwrap();
    /// sched.step(&mut opt);
    /// assert_eq!(opt.lr(), 0.5);
    /// ```
    #[track_caller]
    fn step(&mut self, opt: &mut dyn Optimizer) {
        self.set_epoch(self.epoch() + 1, opt);
    }

    /// Jumps to `epoch` and sets `opt`'s rate to that epoch's: resuming a
    /// run needs only the epoch, since every rate has a closed form (what
    /// PyTorch's scheduler `state_dict` holds as `last_epoch`).
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::{CosineAnnealingLr, LrScheduler};
    /// use lazyxla::optim::{Optimizer, Sgd};
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
    /// let mut sched = CosineAnnealingLr::new(&mut opt, 10, 0.0).unwrap();
    /// sched.set_epoch(5, &mut opt); // resumed after 5 saved epochs
    /// assert_eq!(sched.epoch(), 5);
    /// assert!((opt.lr() - 0.5).abs() < 1e-12);
    /// ```
    fn set_epoch(&mut self, epoch: usize, opt: &mut dyn Optimizer);

    /// The rate of the current epoch.
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::{LrScheduler, StepLr};
    /// use lazyxla::optim::Sgd;
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
    /// assert_eq!(StepLr::new(&mut opt, 1, 0.5).unwrap().lr(), 1.0);
    /// ```
    #[track_caller]
    fn lr(&self) -> f64 {
        self.lr_at(self.epoch())
    }
}

/// PyTorch's `StepLR`: `lr0 · gamma^(epoch / step_size)` (integer division).
///
/// ```
/// use lazyxla::optim::lr_scheduler::{LrScheduler, StepLr};
/// use lazyxla::optim::Sgd;
/// use lazyxla::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 0.1);
/// let sched = StepLr::new(&mut opt, 10, 0.1).unwrap();
/// assert_eq!(sched.lr_at(9), 0.1);
/// assert!((sched.lr_at(10) - 0.01).abs() < 1e-15);
/// ```
#[derive(Debug, Clone)]
pub struct StepLr {
    base_lr: f64,
    step_size: usize,
    gamma: f64,
    epoch: usize,
}

impl StepLr {
    /// Decays `opt`'s current rate by `gamma` every `step_size` epochs.
    /// `step_size` 0 is an error.
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::StepLr;
    /// use lazyxla::optim::Sgd;
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 0.1);
    /// assert!(StepLr::new(&mut opt, 0, 0.1).is_err());
    /// ```
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, step_size: usize, gamma: f64) -> Result<StepLr> {
        if step_size == 0 {
            return Err(Error::invalid(
                "StepLr",
                "step_size must be at least 1 (the number of epochs between decays)",
            ));
        }
        let s = StepLr {
            base_lr: opt.lr(),
            step_size,
            gamma,
            epoch: 0,
        };
        opt.set_lr(s.lr_at(0));
        Ok(s)
    }
}

impl LrScheduler for StepLr {
    #[track_caller]
    fn lr_at(&self, epoch: usize) -> f64 {
        self.base_lr * self.gamma.powf((epoch / self.step_size) as f64)
    }
    #[track_caller]
    fn epoch(&self) -> usize {
        self.epoch
    }
    #[track_caller]
    fn set_epoch(&mut self, epoch: usize, opt: &mut dyn Optimizer) {
        self.epoch = epoch;
        opt.set_lr(self.lr());
    }
}

/// PyTorch's `CosineAnnealingLR` in closed form:
/// `eta_min + (lr0 - eta_min) · (1 + cos(π · epoch / t_max)) / 2`
/// (periodic beyond `t_max`, as PyTorch's closed form).
///
/// ```
/// use lazyxla::optim::lr_scheduler::{CosineAnnealingLr, LrScheduler};
/// use lazyxla::optim::Sgd;
/// use lazyxla::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
/// let sched = CosineAnnealingLr::new(&mut opt, 10, 0.0).unwrap();
/// assert!((sched.lr_at(5) - 0.5).abs() < 1e-12);
/// ```
#[derive(Debug, Clone)]
pub struct CosineAnnealingLr {
    base_lr: f64,
    t_max: usize,
    eta_min: f64,
    epoch: usize,
}

impl CosineAnnealingLr {
    /// Anneals `opt`'s current rate to `eta_min` over `t_max` epochs.
    /// `t_max` 0 is an error.
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::CosineAnnealingLr;
    /// use lazyxla::optim::Sgd;
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 0.1);
    /// assert!(CosineAnnealingLr::new(&mut opt, 0, 0.0).is_err());
    /// ```
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, t_max: usize, eta_min: f64) -> Result<CosineAnnealingLr> {
        if t_max == 0 {
            return Err(Error::invalid(
                "CosineAnnealingLr",
                "t_max must be at least 1 (the number of epochs of the half cosine)",
            ));
        }
        let s = CosineAnnealingLr {
            base_lr: opt.lr(),
            t_max,
            eta_min,
            epoch: 0,
        };
        opt.set_lr(s.lr_at(0));
        Ok(s)
    }
}

impl LrScheduler for CosineAnnealingLr {
    #[track_caller]
    fn lr_at(&self, epoch: usize) -> f64 {
        let x = std::f64::consts::PI * epoch as f64 / self.t_max as f64;
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + x.cos()) / 2.0
    }
    #[track_caller]
    fn epoch(&self) -> usize {
        self.epoch
    }
    #[track_caller]
    fn set_epoch(&mut self, epoch: usize, opt: &mut dyn Optimizer) {
        self.epoch = epoch;
        opt.set_lr(self.lr());
    }
}

/// A linear warm-up (PyTorch's `LinearLR` with `end_factor` 1):
/// `lr0 · (start_factor + (1 - start_factor) · min(epoch, warmup) / warmup)`,
/// then, with [`followed_by`](LinearWarmup::followed_by), another
/// schedule from its epoch 0 (PyTorch's `SequentialLR` with the milestone
/// at `warmup`).
///
/// ```
/// use lazyxla::optim::lr_scheduler::{LinearWarmup, LrScheduler};
/// use lazyxla::optim::{Optimizer, Sgd};
/// use lazyxla::Tensor;
/// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
/// let sched = LinearWarmup::new(&mut opt, 0.25, 3).unwrap();
/// assert_eq!(opt.lr(), 0.25);
/// assert_eq!(sched.lr_at(1), 0.5);
/// assert_eq!(sched.lr_at(7), 1.0);
/// ```
pub struct LinearWarmup {
    base_lr: f64,
    start_factor: f64,
    warmup: usize,
    after: Option<Box<dyn LrScheduler>>,
    epoch: usize,
}

impl std::fmt::Debug for LinearWarmup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinearWarmup")
            .field("base_lr", &self.base_lr)
            .field("start_factor", &self.start_factor)
            .field("warmup", &self.warmup)
            .field("followed_by_another", &self.after.is_some())
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl LinearWarmup {
    /// Warms `opt`'s current rate up from `start_factor` times it over
    /// `warmup` epochs, then keeps it. `start_factor` must lie in (0, 1],
    /// as PyTorch requires; `warmup` 0 means no warm-up.
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::LinearWarmup;
    /// use lazyxla::optim::Sgd;
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
    /// assert!(LinearWarmup::new(&mut opt, 0.0, 3).is_err());
    /// ```
    #[track_caller]
    pub fn new(opt: &mut dyn Optimizer, start_factor: f64, warmup: usize) -> Result<LinearWarmup> {
        LinearWarmup::make(opt, start_factor, warmup, None)
    }

    /// Warms up as [`new`](LinearWarmup::new), then hands over to `after`
    /// at its epoch 0. Make `after` first, from the same optimizer, so
    /// that both read the same base rate (the borrow checker keeps you
    /// from making it inside this call).
    ///
    /// ```
    /// use lazyxla::optim::lr_scheduler::{LinearWarmup, LrScheduler, StepLr};
    /// use lazyxla::optim::Sgd;
    /// use lazyxla::Tensor;
    /// let mut opt = Sgd::new(vec![Tensor::scalar(0.0f32)], 1.0);
    /// let decay = StepLr::new(&mut opt, 1, 0.5).unwrap();
    /// let sched = LinearWarmup::followed_by(&mut opt, 0.5, 2, decay).unwrap();
    /// let rates: Vec<f64> = (0..5).map(|e| sched.lr_at(e)).collect();
    /// assert_eq!(rates, [0.5, 0.75, 1.0, 0.5, 0.25]);
    /// ```
    #[track_caller]
    pub fn followed_by(
        opt: &mut dyn Optimizer,
        start_factor: f64,
        warmup: usize,
        after: impl LrScheduler + 'static,
    ) -> Result<LinearWarmup> {
        LinearWarmup::make(opt, start_factor, warmup, Some(Box::new(after)))
    }

    #[track_caller]
    fn make(
        opt: &mut dyn Optimizer,
        start_factor: f64,
        warmup: usize,
        after: Option<Box<dyn LrScheduler>>,
    ) -> Result<LinearWarmup> {
        if !(start_factor > 0.0 && start_factor <= 1.0) {
            return Err(Error::invalid(
                "LinearWarmup",
                format!("start_factor must lie in (0, 1], got {start_factor}"),
            ));
        }
        let s = LinearWarmup {
            base_lr: opt.lr(),
            start_factor,
            warmup,
            after,
            epoch: 0,
        };
        opt.set_lr(s.lr_at(0));
        Ok(s)
    }
}

impl LrScheduler for LinearWarmup {
    #[track_caller]
    fn lr_at(&self, epoch: usize) -> f64 {
        if epoch >= self.warmup {
            if let Some(after) = &self.after {
                return after.lr_at(epoch - self.warmup);
            }
            if self.warmup == 0 {
                return self.base_lr;
            }
        }
        let ramp = (1.0 - self.start_factor) * epoch.min(self.warmup) as f64 / self.warmup as f64;
        self.base_lr * (self.start_factor + ramp)
    }
    #[track_caller]
    fn epoch(&self) -> usize {
        self.epoch
    }
    #[track_caller]
    fn set_epoch(&mut self, epoch: usize, opt: &mut dyn Optimizer) {
        self.epoch = epoch;
        opt.set_lr(self.lr());
    }
}
