//! Data parallelism: one training step run as `n` replicas, one per
//! device, in ONE compiled program (XLA's replica mode), the gradients
//! combined by one all-reduce inside it.
//!
//! The pieces: a replicated device ([`Device::replicated`]) on which
//! every tensor holds one value per replica and every program runs on all
//! devices at once; the collectives ([`Tensor::all_reduce`],
//! [`Tensor::all_gather`], [`Tensor::reduce_scatter`],
//! [`Tensor::replica_id`]); [`shard`], which splits a batch along dim 0;
//! and [`DataParallel`], which puts them together around a step.
//!
//! Model and optimizer are built under `dp.scoped(..)`: their tensors are
//! created on the replicated device, the same values uploaded once per
//! device. `shard_all` splits a batch along dim 0 (the first `B % N`
//! replicas one row more); when N does not divide B, dim 0 is dynamic with
//! bound `ceil(B / N)` and one per-replica size shared by the batch's
//! tensors, so every remainder runs one program. `DataParallel::step`
//! records zero_grad, the loss on each replica, backward,
//! `reduce_gradients` and the optimizer step; `run` adds `mark_step`,
//! `train_step` captures it. `reduce_gradients` `all_reduce`s each gradient
//! (weighted, see below) and packs the loss and, for uneven parts, the
//! replica's row count into one small vector for one more; XLA's
//! all-reduce combiner merges them all into one all-reduce of all
//! gradients in the compiled program, with no copy. `packed(true)` packs
//! every gradient into one vector for one `all_reduce` in the IR instead,
//! for a plugin that does not combine (the copies cost time on CPU). The
//! weighting is `GradientAverage`: `Rows` (default) by each replica's share
//! of the rows, exactly the full batch's gradient for a mean-over-rows loss
//! even when the batch does not divide; `Replicas` the plain mean (DDP,
//! `pmean`); `Sum` for a loss that normalizes itself over all replicas.
//! The optimizer then applies the same update on every replica, so
//! replicas stay bit-identical; nothing returns to the host. Dynamic zones
//! inside a replica are ordinary: what is reduced, the parameters'
//! gradients, is static. On the CPU plugin the N devices share the cores:
//! several CPU devices are a test bed for the path that spreads a step over
//! GPUs, not a speed-up.
//!
//! ```
//! use lazyxla::prelude::*;
//! use lazyxla::parallel::DataParallel;
//!
//! let dp = DataParallel::new(&Device::reference().scoped(lazyxla::devices)).unwrap();
//! // Created on the replicated device: every replica holds the same values.
//! let model = dp.scoped(|| nn::Linear::new(3, 1, 0));
//! let params = model.parameters();
//! let mut opt = dp.scoped(|| optim::Sgd::new(params.clone(), 0.1));
//! let x = Tensor::from_vec((0..24).map(|v| v as f32 / 24.0).collect(), &[8, 3]).unwrap();
//! let y = Tensor::from_vec(vec![1.0f32; 8], &[8, 1]).unwrap();
//! let mut step = dp.train_step(&params, &mut opt, |b: &[Tensor]| {
//!     nn::mse_loss(&model.forward(&b[0]), &b[1])
//! });
//! for _ in 0..3 {
//!     let loss = step.run(&[x.clone(), y.clone()]).unwrap(); // the full batch's loss
//!     assert!(loss.item::<f32>().unwrap().is_finite());
//! }
//! ```

mod fsdp;
mod shard;

pub use crate::tensor::ReduceOp;
pub use fsdp::fully_shard;
pub use shard::{replica_values, shard, shard_all};

use crate::capture::{capture, CapturedStep};
use crate::device::Device;
use crate::dtype::DType;
use crate::optim::Optimizer;
use crate::tensor::{no_grad, Tensor};
use crate::{Error, Result};

/// How [`DataParallel`] combines the replicas' gradients (and losses).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum GradientAverage {
    /// Each replica's gradient weighted by its share of the batch's rows
    /// (dim 0 of the first batch tensor): exactly the full batch's
    /// gradient for a loss that is a mean over rows (a `reduction="mean"`
    /// loss), also when the batch does not divide evenly. The default.
    #[default]
    Rows,
    /// The plain mean over replicas (PyTorch's DDP, JAX's `pmean`): the
    /// full batch's gradient when every replica has as many rows.
    Replicas,
    /// The sum: for a loss that the step itself normalizes over the whole
    /// batch, for example a sum over a per-replica selection divided by
    /// the selection's total size (`count.all_reduce(ReduceOp::Sum)`).
    Sum,
}

/// Data-parallel training over several devices of one client: parameters
/// and optimizer state created on its replicated device
/// ([`DataParallel::scoped`]) live on every device, identical, and stay
/// there; each step splits the batch along dim 0, runs forward and
/// backward on every replica, averages the gradients with one
/// all-reduce (XLA combines the gradients' collectives into one), and
/// applies the optimizer on every replica, all in one compiled program.
///
/// A per-replica dynamic zone (`nonzero`, `masked_select` on a shard)
/// works inside the step: what is reduced, the parameters' gradients, is
/// static. See the [module docs](self) for an example.
#[derive(Debug)]
pub struct DataParallel {
    device: Device,
    average: GradientAverage,
    packed: bool,
}

impl DataParallel {
    /// Replicas on `devices` (replica `r` on `devices[r]`).
    ///
    /// # Errors
    ///
    /// As [`Device::replicated`]: no devices, a device named twice (the
    /// message names the replica count and how many are distinct), or
    /// devices of different clients.
    pub fn new(devices: &[Device]) -> Result<DataParallel> {
        Ok(DataParallel {
            device: Device::replicated(devices)?,
            average: GradientAverage::default(),
            packed: false,
        })
    }

    /// Replicas on the first `n` of [`devices`](crate::devices).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming both counts when there are fewer
    /// than `n` devices (or `n` is 0).
    ///
    /// ```
    /// use lazyxla::{parallel::DataParallel, Device};
    /// Device::reference().scoped(|| {
    ///     let have = lazyxla::devices().len();
    ///     let e = DataParallel::with_replicas(have + 1).err().unwrap();
    ///     assert!(e.to_string().contains(&format!("{} replicas", have + 1)));
    /// });
    /// ```
    pub fn with_replicas(n: usize) -> Result<DataParallel> {
        let all = crate::devices();
        if n == 0 || n > all.len() {
            let names: Vec<&str> = all.iter().map(Device::name).collect();
            return Err(Error::invalid(
                "DataParallel",
                format!(
                    "{n} replicas were asked for, but there are {} devices ({}); ask for 1 to {}, or for more CPU devices call lazyxla::set_cpu_device_count({}) first thing in main (or start with LAZYXLA_CPU_DEVICES={})",
                    all.len(),
                    names.join(", "),
                    all.len(),
                    n.max(1),
                    n.max(1)
                ),
            ));
        }
        DataParallel::new(&all[..n])
    }

    /// Combines gradients by `average` (default [`GradientAverage::Rows`]).
    pub fn average(mut self, average: GradientAverage) -> DataParallel {
        self.average = average;
        self
    }

    /// Packs every gradient (and the loss and row count) into one vector
    /// for ONE `all_reduce` in the step's IR, instead of one per gradient
    /// (the default). XLA combines the default's collectives into one
    /// all-reduce of all gradients itself (its all-reduce combiner: the
    /// CPU plugin's optimized program has one, measured), with no copy;
    /// packing adds a copy of every gradient into the vector and back,
    /// which measured about twice the step time on the CPU plugin
    /// (`benches/README.md`). For plugins that do not combine.
    pub fn packed(mut self, on: bool) -> DataParallel {
        self.packed = on;
        self
    }

    /// The replicated device the replicas run on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The number of replicas.
    pub fn replicas(&self) -> usize {
        self.device.replica_count()
    }

    /// Runs `f` with the replicated device as the default device: build
    /// the model and the optimizer in it, so their tensors live on every
    /// replica (host data uploaded once per device, the same on each).
    pub fn scoped<R>(&self, f: impl FnOnce() -> R) -> R {
        self.device.scoped(f)
    }

    /// `t` on every replica (a device-to-device copy when `t` is computed
    /// on a device of the same client).
    pub fn replicate(&self, t: &Tensor) -> Result<Tensor> {
        t.to_device(&self.device)
    }

    /// `batch` split along dim 0, one part per replica (see [`shard_all`]);
    /// tensors already on the replicated device are kept as they are.
    pub fn shard(&self, batch: &[Tensor]) -> Result<Vec<Tensor>> {
        if batch.iter().all(|t| t.device().same(&self.device)) {
            return Ok(batch.to_vec());
        }
        shard_all(batch, &self.device)
    }

    /// Records one data-parallel training step on `shards` (this device's
    /// parts of a batch, from [`DataParallel::shard`]): clears the
    /// gradients, computes `loss_fn(shards)` on every replica, runs
    /// backward, combines the gradients of `params` across the replicas
    /// ([`DataParallel::reduce_gradients`]) and steps `opt`. Returns the
    /// loss combined as the gradients are (for `Rows`, the full batch's
    /// mean), the same on every replica. Nothing runs until `mark_step()`
    /// or a read, as for any step.
    pub fn step<O: Optimizer + ?Sized>(
        &self,
        params: &[Tensor],
        opt: &mut O,
        shards: &[Tensor],
        loss_fn: impl FnOnce(&[Tensor]) -> Tensor,
    ) -> Tensor {
        self.device.scoped(|| {
            opt.zero_grad();
            let loss = loss_fn(shards);
            assert!(
                loss.rank() == 0 && loss.dtype().is_float(),
                "DataParallel: the loss must be a float scalar, got {}{}; reduce it (mean, sum) first",
                loss.dtype(),
                loss.shape_string()
            );
            loss.backward();
            let total = self.reduce_gradients(params, &loss, shards.first());
            opt.step();
            total
        })
    }

    /// [`DataParallel::step`] on `batch` split across the replicas, then
    /// `mark_step()`: one program per call, compiled once per batch shape.
    pub fn run<O: Optimizer + ?Sized>(
        &self,
        params: &[Tensor],
        opt: &mut O,
        batch: &[Tensor],
        loss_fn: impl FnOnce(&[Tensor]) -> Tensor,
    ) -> Result<Tensor> {
        let shards = self.shard(batch)?;
        let loss = self.step(params, opt, &shards, loss_fn);
        crate::mark_step()?;
        Ok(loss)
    }

    /// [`DataParallel::step`] as a [`capture`](crate::capture)d step:
    /// recorded on its first calls, then replayed, with no host work per
    /// step beyond splitting the batch and starting the program.
    pub fn train_step<'a, O, F>(
        &'a self,
        params: &[Tensor],
        opt: &'a mut O,
        mut loss_fn: F,
    ) -> TrainStep<'a>
    where
        O: Optimizer + ?Sized,
        F: FnMut(&[Tensor]) -> Tensor + 'a,
    {
        let params = params.to_vec();
        let step: StepFn<'a> =
            Box::new(
                move |shards: &[Tensor]| vec![self.step(&params, opt, shards, |s| loss_fn(s))],
            );
        TrainStep {
            dp: self,
            step: capture(step),
        }
    }

    /// Combines the gradients of `params` across the replicas as
    /// [`GradientAverage`] says, and puts the result in place of each
    /// gradient. One `all_reduce` per gradient and one for the loss and
    /// row count, which XLA combines into ONE all-reduce in the compiled
    /// program (see [`DataParallel::packed`] for one in the IR), (every handle sees
    /// it; parameters without a gradient are skipped). `rows` is the
    /// replica's part of the batch, whose dim 0 gives the `Rows` weights
    /// (without it, `Rows` acts as `Replicas`). Returns `loss` combined
    /// the same way. A replica with no rows contributes nothing.
    ///
    /// Panics when a gradient is dynamic (XLA cannot reduce a bounded
    /// operand; a parameter's gradient is static).
    pub fn reduce_gradients(
        &self,
        params: &[Tensor],
        loss: &Tensor,
        rows: Option<&Tensor>,
    ) -> Tensor {
        if self.replicas() == 1 {
            // One replica: every average is the gradient itself.
            return loss.clone();
        }
        no_grad(|| {
            let grads: Vec<Tensor> = params.iter().filter_map(Tensor::grad).collect();
            // Rows weights only matter when the replicas' row counts may
            // differ (a dynamic dim 0); equal parts weigh 1/n each.
            let weight = match (self.average, rows) {
                (GradientAverage::Rows, Some(r)) if r.rank() > 0 && r.size(0).is_dynamic() => {
                    Some(r.size_value(r.shape_exprs()[0].clone()))
                }
                _ => None,
            };
            let mut dtypes: Vec<DType> = vec![loss.dtype()];
            for g in &grads {
                if !dtypes.contains(&g.dtype()) {
                    dtypes.push(g.dtype());
                }
            }
            let mut total = loss.clone();
            for dt in dtypes {
                let members: Vec<&Tensor> = grads.iter().filter(|g| g.dtype() == dt).collect();
                let with_loss = dt == loss.dtype();
                // What each replica contributes: n_r times each value for
                // `Rows` (0 for no rows: a mean over none is NaN), else
                // the value; then n_r itself, to divide by the total.
                let weigh = |t: &Tensor| match &weight {
                    Some(w) => w
                        .gt_scalar(0.0)
                        .where_cond(&(t * &w.to_dtype(dt)), &t.zeros_like()),
                    None => t.clone(),
                };
                let grads: Vec<Tensor> = members.iter().map(|g| weigh(g)).collect();
                let mut scalars: Vec<Tensor> = Vec::new();
                if with_loss {
                    scalars.push(weigh(&loss.reshape(&[1])));
                }
                if let Some(w) = &weight {
                    scalars.push(w.to_dtype(dt).reshape(&[1]));
                }
                let (grads, scalars) = if self.packed {
                    let all: Vec<Tensor> = grads.iter().chain(&scalars).cloned().collect();
                    let mut parts = unpack(&pack(&all).all_reduce(ReduceOp::Sum), &all);
                    let scalars = parts.split_off(grads.len());
                    (parts, scalars)
                } else {
                    let reduced = grads.iter().map(|g| g.all_reduce(ReduceOp::Sum)).collect();
                    let small = unpack(&pack(&scalars).all_reduce(ReduceOp::Sum), &scalars);
                    (reduced, small)
                };
                let rows_total = weight
                    .as_ref()
                    .and_then(|_| scalars.last())
                    .map(|n| n.reshape(&[]));
                let replicas = self.replicas() as f64;
                let average = self.average;
                let mean = |v: &Tensor| match (&rows_total, average) {
                    (Some(n), _) => v / n,
                    (None, GradientAverage::Sum) => v.clone(),
                    (None, _) => v / replicas,
                };
                for (g, v) in members.iter().zip(&grads) {
                    g.assign(&mean(v));
                }
                if with_loss {
                    total = mean(&scalars[0].reshape(&[]));
                }
            }
            total
        })
    }
}

/// `values` flattened into one vector, in order.
fn pack(values: &[Tensor]) -> Tensor {
    let flat: Vec<Tensor> = values.iter().map(Tensor::flatten).collect();
    let refs: Vec<&Tensor> = flat.iter().collect();
    Tensor::cat(&refs, 0)
}

/// The pieces of `packed` (from [`pack`]) in the shapes of `like`.
fn unpack(packed: &Tensor, like: &[Tensor]) -> Vec<Tensor> {
    let mut offset = 0;
    like.iter()
        .map(|t| {
            let shape: Vec<i64> = t.upper_bounds().iter().map(|&d| d as i64).collect();
            let numel = shape.iter().product::<i64>() as usize;
            let v = packed.narrow(0, offset, numel).reshape(&shape);
            offset += numel;
            v
        })
        .collect()
}

/// The step function a [`TrainStep`] captures.
type StepFn<'a> = Box<dyn FnMut(&[Tensor]) -> Vec<Tensor> + 'a>;

/// A [`DataParallel`] training step, captured: see
/// [`DataParallel::train_step`].
#[derive(Debug)]
pub struct TrainStep<'a> {
    dp: &'a DataParallel,
    step: CapturedStep<StepFn<'a>>,
}

impl TrainStep<'_> {
    /// Runs one step on `batch` (split across the replicas, see
    /// [`DataParallel::shard`]) and returns its loss, combined as the
    /// gradients are; the program runs on every device and nothing is
    /// read to the host.
    pub fn run(&mut self, batch: &[Tensor]) -> Result<Tensor> {
        let shards = self.dp.shard(batch)?;
        let device = self.dp.device.clone();
        let mut out = device.scoped(|| self.step.run(&shards))?;
        if out.is_empty() {
            return Err(Error::internal("DataParallel", "the step returned no loss"));
        }
        Ok(out.remove(0))
    }

    /// How many times the step was recorded (see
    /// [`CapturedStep::recordings`]).
    pub fn recordings(&self) -> usize {
        self.step.recordings()
    }
}
