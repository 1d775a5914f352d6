//! Splitting a batch across the replicas of a replicated device, and
//! reading every replica's value back.

use crate::device::Device;
use crate::host::{Element, HostArray};
use crate::runtime::device_data::{self, DeviceData, SizeCells};
use crate::runtime::size_cell::SizeCell;
use crate::runtime::size_values;
use crate::symint::{SizeExpr, VarRef};
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

/// `t` split along dim 0 across the replicas of `device` (see
/// [`shard_all`]).
///
/// ```
/// use lazyxla::{parallel, Device, Tensor};
/// lazyxla::set_cpu_device_count(2).unwrap();
/// let r = Device::replicated(&Device::reference().scoped(lazyxla::devices)[..2]).unwrap();
/// let x = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[3, 2]).unwrap();
/// let s = parallel::shard(&x, &r).unwrap();
/// assert_eq!(s.shape_string(), "[<=2, 2]"); // 2 rows, then 1
/// let parts = parallel::replica_values::<f32>(&s).unwrap();
/// assert_eq!(parts, vec![vec![0.0, 1.0, 2.0, 3.0], vec![4.0, 5.0]]);
/// ```
pub fn shard(t: &Tensor, device: &Device) -> Result<Tensor> {
    Ok(shard_all(std::slice::from_ref(t), device)?.remove(0))
}

/// `tensors` (one batch: the same number of rows each) split along dim 0
/// across the replicas of `device`: replica `r` gets rows
/// `[start_r, start_r + n_r)`, the first `B % n` replicas one row more
/// than the others. When the replica count divides the batch, the parts
/// are static; otherwise dim 0 is dynamic (as `mark_dynamic`) with the
/// bound `ceil(B / n)` and each replica's own size, shared by every
/// tensor of the batch, so one program serves every remainder. Each part
/// is uploaded straight to its replica's device (one transfer per
/// replica); a value computed on a device is read to the host first.
pub fn shard_all(tensors: &[Tensor], device: &Device) -> Result<Vec<Tensor>> {
    let n = device.replica_count();
    let Some(first) = tensors.first() else {
        return Ok(Vec::new());
    };
    let rows = batch_rows(first)?;
    for t in tensors {
        let r = batch_rows(t)?;
        if r != rows {
            return Err(Error::shape(
                "shard",
                format!(
                    "the batch's tensors must have the same number of rows (dim 0): {} has {r}, {} has {rows}",
                    t.shape_string(),
                    first.shape_string()
                ),
            ));
        }
    }
    let counts: Vec<usize> = (0..n)
        .map(|r| rows / n + usize::from(r < rows % n))
        .collect();
    let bound = rows.div_ceil(n).max(usize::from(rows > 0));
    let even = counts.iter().all(|&c| c == bound);
    // One size variable for the whole batch: its tensors meet in
    // elementwise ops with no check.
    let var = (!even)
        .then(|| -> Result<VarRef> {
            let sizes: Vec<i64> = counts.iter().map(|&c| c as i64).collect();
            let buffer = device.backend().upload_sizes(&sizes)?;
            let v = VarRef::fresh(0, bound as i64);
            size_values::bind(&v, Arc::new(SizeCell::on_device(buffer, device.clone())));
            Ok(v)
        })
        .transpose()?;
    tensors
        .iter()
        .map(|t| split(t, device, &counts, bound, var.as_ref()))
        .collect()
}

/// The number of rows (static dim 0) of a batch tensor.
fn batch_rows(t: &Tensor) -> Result<usize> {
    let shape = t.shape_exprs();
    match shape.first().map(|d| d.as_const()) {
        Some(Some(r)) => Ok(r as usize),
        Some(None) => Err(Error::DynamicUnsupported {
            op: "shard",
            dim: 0,
            shape: t.shape_string(),
        }),
        None => Err(Error::shape(
            "shard",
            "a scalar has no rows to split; pass tensors of rank 1 or more",
        )),
    }
}

/// `t`'s rows cut into `counts`, one part per replica, uploaded at `bound`.
fn split(
    t: &Tensor,
    device: &Device,
    counts: &[usize],
    bound: usize,
    var: Option<&VarRef>,
) -> Result<Tensor> {
    let shape = t.shape_exprs();
    if let Some(d) = shape.iter().skip(1).position(|d| d.as_const().is_none()) {
        return Err(Error::DynamicUnsupported {
            op: "shard",
            dim: d + 1,
            shape: t.shape_string(),
        });
    }
    let node = t.node();
    let host = match device_data::of(&node).and_then(|d| d.host_copy()) {
        Some(h) => h,
        None => Arc::new(t.to_host()?),
    };
    let mut start = 0;
    let parts: Vec<HostArray> = counts
        .iter()
        .map(|&c| {
            let part = crate::map_host_array!(&*host, a => a
                .slice_axis(ndarray::Axis(0), ndarray::Slice::from(start..start + c))
                .to_owned());
            start += c;
            part
        })
        .collect();
    let mut dims: Vec<usize> = host.shape().to_vec();
    dims[0] = bound;
    let buffer = device.backend().upload_replicas(&parts, &dims)?;
    crate::metrics::inc(crate::metrics::Counter::TransferToDevice);
    let mut new_shape = shape.clone();
    let mut sizes: SizeCells = smallvec::smallvec![None; shape.len()];
    match var {
        Some(v) => {
            new_shape[0] = SizeExpr::var(v.clone());
            sizes[0] = size_values::cell(v);
        }
        None => new_shape[0] = SizeExpr::constant(bound as i64),
    }
    let data = DeviceData::on_device(device.clone(), buffer, sizes, dims.into_iter().collect());
    Ok(Tensor::data(device, t.dtype(), new_shape, data))
}

/// Every replica's elements of `t` (row-major, real elements only), read
/// to the host: replica `r`'s at index `r`. On a device that is not
/// replicated, the one value.
///
/// ```
/// use lazyxla::{parallel, Device, Tensor};
/// lazyxla::set_cpu_device_count(2).unwrap();
/// let r = Device::replicated(&Device::reference().scoped(lazyxla::devices)[..2]).unwrap();
/// let ids = r.scoped(|| Tensor::replica_id());
/// assert_eq!(parallel::replica_values::<i64>(&ids).unwrap(), vec![vec![0], vec![1]]);
/// ```
pub fn replica_values<T: Element>(t: &Tensor) -> Result<Vec<Vec<T>>> {
    if T::DTYPE != t.dtype() {
        return Err(Error::dtype(
            "replica_values",
            format!(
                "the tensor holds {} but {} was asked for; call to_dtype first",
                t.dtype(),
                T::DTYPE
            ),
        ));
    }
    if t.is_pending() {
        crate::tensor::sync::sync_tensors(std::slice::from_ref(t))?;
    }
    crate::tensor::sync::verify()?;
    let node = t.node();
    let data = device_data::of(&node)
        .ok_or_else(|| Error::internal("replica_values", "a computed tensor without data"))?;
    let n = t.device().replica_count();
    let hosts: Vec<HostArray> = match data.host_copy() {
        Some(h) => vec![(*h).clone(); n],
        None => {
            let backend = data.device.backend();
            let mut shapes: Vec<Vec<usize>> = vec![Vec::with_capacity(node.shape.len()); n];
            for (d, e) in node.shape.iter().enumerate() {
                let per_replica = match (e.as_const(), &data.sizes[d]) {
                    (Some(c), _) => vec![c; n],
                    (None, Some(cell)) => match cell.device_buffer() {
                        Some(b) => backend.read_sizes(b)?,
                        None => vec![cell.get()?; n],
                    },
                    (None, None) => {
                        return Err(Error::internal(
                            "replica_values",
                            "a dynamic dim without a size",
                        ))
                    }
                };
                for (s, v) in shapes.iter_mut().zip(per_replica) {
                    s.push(v.max(0) as usize);
                }
            }
            let out = backend.download_replicas(data.buffer()?, &shapes)?;
            crate::metrics::inc(crate::metrics::Counter::TransferFromDevice);
            out
        }
    };
    hosts
        .iter()
        .map(|h| {
            T::from_host(h)
                .map(|a| a.iter().copied().collect())
                .ok_or_else(|| {
                    Error::internal("replica_values", "the backend returned another dtype")
                })
        })
        .collect()
}
