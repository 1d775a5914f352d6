//! Collectives: ops that combine a tensor's values across the replicas of
//! a replicated device ([`Device::replicated`]). On one device (one
//! replica) each is the identity, and `replica_id` is 0.

use super::dim::{DimIndex, ResolveDim};
use super::Tensor;
use crate::device::Device;
use crate::ir::{Op, ReduceKind};
use smallvec::SmallVec;

/// How [`Tensor::all_reduce`] combines the replicas' values.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The mean (the sum divided by the replica count; float tensors).
    Mean,
    /// The largest (NaN wins, as `max`).
    Max,
    /// The smallest (NaN wins, as `min`).
    Min,
}

impl Tensor {
    /// How many replicas hold this tensor: its device's
    /// [`replica_count`](Device::replica_count).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// assert_eq!(x.replica_count(), 1); // not inside a replicated program
    /// ```
    #[track_caller]
    pub fn replica_count(&self) -> usize {
        self.device().replica_count()
    }

    /// This tensor combined elementwise across the replicas by `op`; every
    /// replica gets the result (one `stablehlo.all_reduce` in the step's
    /// program). On one device, the tensor itself.
    ///
    /// Panics when the tensor is dynamic: replicas may hold different
    /// sizes, and XLA cannot reduce a bounded operand across devices;
    /// reduce the dynamic dimensions first (`sum_dims`, `mean_dims`), or
    /// `pad_to_bound(fill)`. `Mean` needs a float tensor.
    ///
    /// ```
    /// use lazyxla::{parallel::ReduceOp, Device, Tensor};
    /// let r = Device::replicated(&Device::reference().scoped(lazyxla::devices)).unwrap();
    /// r.scoped(|| {
    ///     // Replica k holds k + 1.
    ///     let x = Tensor::replica_id().to_dtype(lazyxla::DType::F32) + 1.0;
    ///     let n = r.replica_count() as f32;
    ///     assert_eq!(x.all_reduce(ReduceOp::Max).item::<f32>().unwrap(), n);
    ///     assert_eq!(x.all_reduce(ReduceOp::Mean).item::<f32>().unwrap(), (n + 1.0) / 2.0);
    /// });
    /// ```
    #[track_caller]
    pub fn all_reduce(&self, op: ReduceOp) -> Tensor {
        let n = self.replica_count();
        match op {
            ReduceOp::Sum => self.all_reduce_over(ReduceKind::Sum, n),
            ReduceOp::Max => self.all_reduce_over(ReduceKind::Max, n),
            ReduceOp::Min => self.all_reduce_over(ReduceKind::Min, n),
            ReduceOp::Mean => {
                if !self.dtype().is_float() {
                    panic!(
                        "all_reduce(Mean) needs a float tensor, got {}{}; convert with to_dtype first, or use Sum",
                        self.dtype(),
                        self.shape_string()
                    );
                }
                let sum = self.all_reduce_over(ReduceKind::Sum, n);
                if n == 1 {
                    sum
                } else {
                    sum / n as f64
                }
            }
        }
    }

    /// Every replica's tensor concatenated along `dim`, in replica order;
    /// every replica gets the result (that dim grows by the replica
    /// count). Panics on a dynamic tensor (see [`Tensor::all_reduce`]).
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// lazyxla::set_cpu_device_count(2).unwrap();
    /// let r = Device::replicated(&Device::reference().scoped(lazyxla::devices)[..2]).unwrap();
    /// let ids = r.scoped(|| Tensor::replica_id().unsqueeze(0).all_gather(0));
    /// assert_eq!(ids.to_vec::<i64>().unwrap(), vec![0, 1]);
    /// ```
    #[track_caller]
    pub fn all_gather(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("all_gather", &self.shape_exprs());
        self.all_gather_over(d, self.replica_count())
    }

    /// The sum over the replicas, cut along `dim` into one block per
    /// replica: replica `r` gets block `r` (`dim` must divide by the
    /// replica count). Panics on a dynamic tensor (see
    /// [`Tensor::all_reduce`]).
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// lazyxla::set_cpu_device_count(2).unwrap();
    /// let r = Device::replicated(&Device::reference().scoped(lazyxla::devices)[..2]).unwrap();
    /// let x = Tensor::from_vec_on(vec![1.0f32, 2.0, 3.0, 4.0], &[4], &r).unwrap();
    /// let mine = r.scoped(|| x.reduce_scatter(0));
    /// assert_eq!(mine.to_vec::<f32>().unwrap(), vec![2.0, 4.0]); // replica 0's block
    /// ```
    #[track_caller]
    pub fn reduce_scatter(&self, dim: impl DimIndex) -> Tensor {
        let d = dim.resolve("reduce_scatter", &self.shape_exprs());
        self.reduce_scatter_over(d, self.replica_count())
    }

    /// The index of the replica computing it, an I64 scalar on the default
    /// device (0 on a device that is not replicated).
    ///
    /// ```
    /// assert_eq!(lazyxla::Tensor::replica_id().item::<i64>().unwrap(), 0);
    /// ```
    #[track_caller]
    pub fn replica_id() -> Tensor {
        Tensor::replica_id_on(&Device::default())
    }

    /// [`Tensor::replica_id`] on `device`.
    ///
    /// ```
    /// let id = lazyxla::Tensor::replica_id_on(&lazyxla::Device::reference());
    /// assert_eq!(id.item::<i64>().unwrap(), 0);
    /// ```
    #[track_caller]
    pub fn replica_id_on(device: &Device) -> Tensor {
        Tensor::try_apply_on(Op::ReplicaId, &[], SmallVec::new(), device)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `all_reduce` by `kind` over `replicas` replicas (also the gradient
    /// rules', which know the count from the op).
    #[track_caller]
    pub(crate) fn all_reduce_over(&self, kind: ReduceKind, replicas: usize) -> Tensor {
        Tensor::apply(Op::AllReduce { kind, replicas }, &[self], SmallVec::new())
    }

    /// `all_gather` along `dim` over `replicas` replicas.
    #[track_caller]
    pub(crate) fn all_gather_over(&self, dim: usize, replicas: usize) -> Tensor {
        Tensor::apply(Op::AllGather { dim, replicas }, &[self], SmallVec::new())
    }

    /// `reduce_scatter` along `dim` over `replicas` replicas.
    #[track_caller]
    pub(crate) fn reduce_scatter_over(&self, dim: usize, replicas: usize) -> Tensor {
        Tensor::apply(
            Op::ReduceScatter { dim, replicas },
            &[self],
            SmallVec::new(),
        )
    }
}
