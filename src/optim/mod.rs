//! Optimizers. Updates are lazy ops assigned back into the parameters, so
//! forward, backward and update of a step run as one compiled program at
//! `mark_step()`, and parameters and optimizer state stay on the device.
//! All state (moments, step count) and the learning rate are device data
//! from the start, so every step has the same program structure and
//! changing the rate ([`Optimizer::set_lr`], a
//! [scheduler](lr_scheduler)) never recompiles.
//!
//! `Sgd`, `Adam` and `AdamW`: `step()` assigns the update into each
//! parameter under `no_grad`. `set_lr` assigns a new scalar in place (a
//! captured step reads it as state), so the schedulers (`lr_scheduler`,
//! PyTorch's closed forms) never recompile. `state_dict` gives detached
//! tensors under PyTorch's flattened names; `load_state_dict` validates
//! every key first, then assigns.
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

mod adam;
pub mod lr_scheduler;
mod sgd;

pub use adam::{Adam, AdamW};
pub use sgd::Sgd;

use crate::tensor::Tensor;
use crate::{DType, Device, Error, Result};

/// What every optimizer does.
///
/// Checkpoints: [`state_dict`](Optimizer::state_dict) gives the state
/// under PyTorch's flattened names (`state.{i}.momentum_buffer`,
/// `state.{i}.exp_avg`, `state.{i}.exp_avg_sq`, `state.{i}.step`,
/// `param_groups.0.lr`), where `i` indexes the parameters in the order
/// the optimizer was given them; [`load_state_dict`](Optimizer::load_state_dict)
/// takes it back.
pub trait Optimizer {
    /// Records the update of every parameter that has a gradient.
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![2.0f32], &[1]).unwrap().requires_grad(true);
    /// let mut opt = Sgd::new(vec![w.clone()], 0.5);
    /// (&w * &w).sum().backward(); // grad 4
    /// opt.step();
    /// assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.0]);
    /// ```
    fn step(&mut self);

    /// Forgets the gradients of all parameters.
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![2.0f32], &[1]).unwrap().requires_grad(true);
    /// let mut opt = Sgd::new(vec![w.clone()], 0.5);
    /// (&w * &w).sum().backward();
    /// opt.zero_grad();
    /// assert!(w.grad().is_none());
    /// ```
    fn zero_grad(&mut self);

    /// The learning rate the next [`step`](Optimizer::step) uses.
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Adam}, Tensor};
    /// let w = Tensor::from_vec(vec![2.0f32], &[1]).unwrap().requires_grad(true);
    /// assert_eq!(Adam::new(vec![w], 0.001).lr(), 0.001);
    /// ```
    fn lr(&self) -> f64;

    /// Sets the learning rate of the next steps. The rate is a device
    /// scalar that the update reads, not a constant of the program, so a
    /// new rate compiles nothing: neither in a `mark_step()` loop nor in a
    /// [`capture`](crate::capture)d step, which reads it as state. Call it
    /// between steps, outside a captured function (inside, the rate would
    /// be a constant of the recording and an error).
    ///
    /// A step already recorded and not yet run keeps the rate it read.
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Sgd}, Tensor, mark_step};
    /// let w = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true);
    /// let mut opt = Sgd::new(vec![w.clone()], 0.1);
    /// for lr in [0.1, 0.2, 0.3] {
    ///     opt.set_lr(lr);
    ///     opt.zero_grad();
    ///     w.sum().backward(); // grad 1
    ///     opt.step();
    ///     mark_step().unwrap();
    /// }
    /// assert_eq!(opt.lr(), 0.3);
    /// assert!((w.item::<f32>().unwrap() - 0.4).abs() < 1e-6);
    /// assert_eq!(lazyxla::metrics::counter("UncachedCompile"), 1);
    /// ```
    fn set_lr(&mut self, lr: f64);

    /// The optimizer's state and changing hyper-parameters under PyTorch's
    /// flattened names, as detached tensors: later steps do not change
    /// them. Nothing is read to the host; save them with
    /// `lazyxla::safetensors::save` or keep them in memory.
    ///
    /// `param_groups.0.lr` is an `f64` scalar. `state.{i}.step` is the
    /// step count in the state's precision (`f64` when a parameter is
    /// `f64`, else `f32`); all parameters share one count.
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Adam}, Tensor};
    /// let w = Tensor::from_vec(vec![2.0f32, 1.0], &[2]).unwrap().requires_grad(true);
    /// let opt = Adam::new(vec![w], 0.01);
    /// let names: Vec<String> = opt.state_dict().into_iter().map(|(k, _)| k).collect();
    /// assert_eq!(
    ///     names,
    ///     ["state.0.exp_avg", "state.0.exp_avg_sq", "state.0.step", "param_groups.0.lr"]
    /// );
    /// ```
    fn state_dict(&self) -> Vec<(String, Tensor)>;

    /// Takes back what [`state_dict`](Optimizer::state_dict) gave (from an
    /// optimizer of the same kind over parameters of the same shapes and
    /// dtypes). Each moment must have its parameter's dtype and shape; the
    /// step count and the rate must be float scalars (an `f32` step count,
    /// as PyTorch saves it, is converted). A missing or unexpected key, or
    /// a wrong shape or dtype, is an error naming the key, and then
    /// nothing changes. Reads the rate to the host (for
    /// [`lr`](Optimizer::lr)); the rest stays on the device.
    ///
    /// ```
    /// use lazyxla::{optim::{Optimizer, Sgd}, Tensor};
    /// let w = Tensor::from_vec(vec![2.0f32], &[1]).unwrap().requires_grad(true);
    /// let saved = Sgd::new(vec![w.clone()], 0.5).momentum(0.9).state_dict();
    /// let mut opt = Sgd::new(vec![w.clone()], 0.1).momentum(0.9);
    /// opt.load_state_dict(&saved).unwrap();
    /// assert_eq!(opt.lr(), 0.5);
    /// let err = opt.load_state_dict(&saved[1..]).unwrap_err();
    /// assert!(err.to_string().contains("state.0.momentum_buffer"));
    /// ```
    fn load_state_dict(&mut self, state: &[(String, Tensor)]) -> Result<()>;
}

/// The device of the optimizer's state: the first parameter's.
#[track_caller]
fn state_device(params: &[Tensor]) -> Device {
    params
        .first()
        .map(|p| p.device().clone())
        .unwrap_or_default()
}

/// The precision of scalar state (rate, step count): `f64` when a
/// parameter is, so `f64` training is exact, else `f32`.
#[track_caller]
fn scalar_dtype(params: &[Tensor]) -> DType {
    if params.iter().any(|p| p.dtype() == DType::F64) {
        DType::F64
    } else {
        DType::F32
    }
}

/// A scalar tensor of `dtype` (`f64`, else `f32`) holding `v` on `device`.
#[track_caller]
fn scalar_on(v: f64, dtype: DType, device: &Device) -> Tensor {
    match dtype {
        DType::F64 => Tensor::from_vec_on(vec![v], &[], device),
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 | DType::I64 | DType::Bool => {
            Tensor::from_vec_on(vec![v as f32], &[], device)
        }
    }
    .expect("one element fits shape []")
}

#[track_caller]
fn zeros_like_data(p: &Tensor) -> Tensor {
    let shape = p.upper_bounds();
    let n: usize = shape.iter().product();
    // State has the parameter's dtype, as PyTorch's (a half parameter
    // keeps half moments).
    let state = match p.dtype() {
        DType::F64 => Tensor::from_vec_on(vec![0.0f64; n], &shape, p.device()),
        DType::F16 => Tensor::from_vec_on(vec![half::f16::ZERO; n], &shape, p.device()),
        DType::BF16 => Tensor::from_vec_on(vec![half::bf16::ZERO; n], &shape, p.device()),
        DType::F32 | DType::I32 | DType::I64 | DType::Bool => {
            Tensor::from_vec_on(vec![0.0f32; n], &shape, p.device())
        }
    }
    .expect("length matches");
    // The state of a parameter split over a mesh is split as it is
    // (`parallel::fully_shard`): each device holds its part only.
    if let Err(e) = crate::sharding::split_like(&state, p) {
        panic!("{e}");
    }
    state
}

/// The learning rate: on the host for [`Optimizer::lr`], and as a device
/// scalar that the update reads, so a new rate is new data, not a new
/// program.
#[derive(Debug)]
struct LearningRate {
    value: f64,
    tensor: Tensor,
}

impl LearningRate {
    #[track_caller]
    fn new(params: &[Tensor], lr: f64) -> LearningRate {
        LearningRate {
            value: lr,
            tensor: scalar_on(lr, scalar_dtype(params), &state_device(params)),
        }
    }

    #[track_caller]
    fn set(&mut self, lr: f64) {
        self.value = lr;
        // In place, so a captured step that read the rate reads the new one.
        let t = &self.tensor;
        t.assign(&scalar_on(lr, t.dtype(), t.device()));
    }

    /// The rate as an operand of an update in `dtype`.
    #[track_caller]
    fn as_dtype(&self, dtype: DType) -> Tensor {
        self.tensor.to_dtype(dtype)
    }

    /// The state-dict entry: the host value, exactly.
    #[track_caller]
    fn entry(&self) -> (String, Tensor) {
        let device = self.tensor.device();
        (LR_KEY.into(), scalar_on(self.value, DType::F64, device))
    }
}

const LR_KEY: &str = "param_groups.0.lr";

/// A detached copy of a state tensor for a state dict: later assigns to
/// `t` do not reach it.
#[track_caller]
fn saved(key: String, t: &Tensor) -> (String, Tensor) {
    (key, t.detach())
}

/// Checks a state dict against what an optimizer needs before anything
/// changes: every lookup validates, [`finish`](StateLoader::finish)
/// rejects keys nobody asked for.
struct StateLoader<'a> {
    entries: &'a [(String, Tensor)],
    used: Vec<bool>,
}

impl<'a> StateLoader<'a> {
    #[track_caller]
    fn new(entries: &'a [(String, Tensor)]) -> StateLoader<'a> {
        StateLoader {
            entries,
            used: vec![false; entries.len()],
        }
    }

    #[track_caller]
    fn get(&mut self, key: &str, want: &str) -> Result<&'a Tensor> {
        let Some(i) = self.entries.iter().position(|(k, _)| k == key) else {
            return Err(Error::invalid(
                "load_state_dict",
                format!(
                    "the state dict has no `{key}` (expected {want}); pass the state_dict() of \
                     an optimizer of the same kind over parameters of the same shapes"
                ),
            ));
        };
        self.used[i] = true;
        Ok(&self.entries[i].1)
    }

    /// The entry `key`, which must have `mine`'s dtype and shape, on
    /// `mine`'s device.
    #[track_caller]
    fn like(&mut self, key: &str, mine: &Tensor) -> Result<Tensor> {
        let want = format!("{}{}", mine.dtype(), mine.shape_string());
        let t = self.get(key, &want)?;
        let got = format!("{}{}", t.dtype(), t.shape_string());
        if t.dtype() != mine.dtype() {
            return Err(Error::dtype(
                "load_state_dict",
                format!("`{key}` is {got} but the optimizer holds {want} there"),
            ));
        }
        if t.shape_string() != mine.shape_string() {
            return Err(Error::shape(
                "load_state_dict",
                format!("`{key}` is {got} but the optimizer holds {want} there"),
            ));
        }
        moved(t, mine.device())
    }

    /// The float scalar `key` converted to `dtype`, on `device`.
    #[track_caller]
    fn scalar(&mut self, key: &str, dtype: DType, device: &Device) -> Result<Tensor> {
        let t = self.get(key, "a float scalar")?;
        check_float_scalar(key, t)?;
        Ok(moved(t, device)?.to_dtype(dtype))
    }

    /// The learning rate, read to the host.
    #[track_caller]
    fn lr(&mut self) -> Result<f64> {
        let t = self.get(LR_KEY, "a float scalar")?;
        check_float_scalar(LR_KEY, t)?;
        if t.dtype() == DType::F64 {
            t.item::<f64>()
        } else {
            t.to_dtype(DType::F32).item::<f32>().map(f64::from)
        }
    }

    #[track_caller]
    fn finish(self) -> Result<()> {
        match self.used.iter().position(|u| !u) {
            Some(i) => Err(Error::invalid(
                "load_state_dict",
                format!(
                    "unexpected key `{}`: this optimizer has no such state (is the state dict \
                     from another kind of optimizer, or over other parameters?)",
                    self.entries[i].0
                ),
            )),
            None => Ok(()),
        }
    }
}

#[track_caller]
fn check_float_scalar(key: &str, t: &Tensor) -> Result<()> {
    if t.rank() != 0 {
        return Err(Error::shape(
            "load_state_dict",
            format!(
                "`{key}` is {}{} but must be a scalar (shape [])",
                t.dtype(),
                t.shape_string()
            ),
        ));
    }
    if !t.dtype().is_float() {
        return Err(Error::dtype(
            "load_state_dict",
            format!("`{key}` is {}[] but must be a float scalar", t.dtype()),
        ));
    }
    Ok(())
}

/// `t` detached, on `device` (copied there when it lives elsewhere).
#[track_caller]
fn moved(t: &Tensor, device: &Device) -> Result<Tensor> {
    if t.device() == device {
        Ok(t.detach())
    } else {
        t.to_device(device)
    }
}
