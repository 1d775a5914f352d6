//! Reading values: these force execution of what the value needs.

use super::sync;
use super::Tensor;
use crate::host::Element;
use crate::host::HostArray;
use crate::metrics;
use crate::runtime::materialize;
use crate::SymInt;
use crate::{Error, Result};
use ndarray::ArrayD;
use std::sync::Arc;

impl Tensor {
    /// Computes the tensor if needed and copies its real elements to the
    /// host.
    #[track_caller]
    pub(crate) fn to_host(&self) -> Result<HostArray> {
        let (host, read) = self.download(true)?;
        // The step that computed the value may not have had its size
        // checks read yet: read them now, after the transfer has waited
        // for its program. A failed step restores a tensor it assigned (then
        // read the restored value), leaves a read computed with other
        // tensors pending (then compute it alone), or fails its results.
        match sync::verify() {
            Ok(()) => Ok(host),
            Err(e) if Arc::ptr_eq(&read, &self.node()) => Err(e),
            Err(_) => {
                let (host, read) = self.download(false)?;
                match sync::verify() {
                    Ok(()) => Ok(host),
                    Err(e) if Arc::ptr_eq(&read, &self.node()) => Err(e),
                    Err(_) => self.download(false).map(|(host, _)| host),
                }
            }
        }
    }

    /// [`Tensor::to_host`] without the step's size checks; also returns the
    /// node read. With `sharing`, a pending tensor is computed with the
    /// live tensors that share its pending work (`sync::with_sharing`).
    #[track_caller]
    fn download(&self, sharing: bool) -> Result<(HostArray, Arc<crate::ir::Node>)> {
        if self.is_pending() {
            match sharing {
                true => sync::sync_read(&sync::with_sharing(self))?,
                false => sync::sync_tensors(std::slice::from_ref(self))?,
            }
        }
        let node = self.node();
        let data = crate::runtime::device_data::of(&node).ok_or_else(|| {
            match crate::ir::loops::placeholder_of(&node) {
                Some(p) => crate::ir::loops::escaped("read", p),
                None => Error::internal("read", "a computed tensor without data"),
            }
        })?;
        if let Some(h) = data.host_copy() {
            return Ok(((*h).clone(), node.clone()));
        }
        let mut shape = Vec::with_capacity(node.shape.len());
        for (d, e) in node.shape.iter().enumerate() {
            shape.push(match (e.as_const(), &data.sizes[d]) {
                (Some(c), _) => c as usize,
                (None, Some(cell)) => cell.get()? as usize,
                (None, None) => {
                    return Err(Error::internal("read", "a dynamic dim without a size"))
                }
            });
        }
        let buffer = data.buffer()?;
        let host = data.device.backend().download(buffer, &shape)?;
        metrics::inc(metrics::Counter::TransferFromDevice);
        Ok((host, node.clone()))
    }

    /// The elements in row-major order (a dynamic tensor gives its real
    /// elements only). `T` must be the tensor's dtype.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!((&x * 2).to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
    /// ```
    #[track_caller]
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        crate::tensor::at_site("to_vec", || {
            Ok(self.to_ndarray::<T>()?.iter().copied().collect())
        })
    }

    /// The value as an ndarray of the real shape.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// let a = x.to_ndarray::<f32>().unwrap();
    /// assert_eq!(a.shape(), &[2, 2]);
    /// assert_eq!(a[&[1, 0][..]], 3.0);
    /// ```
    #[track_caller]
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        crate::tensor::at_site("to_ndarray", || {
            if T::DTYPE != self.dtype() {
                return Err(Error::dtype(
                    "to_vec",
                    format!(
                        "the tensor holds {} but {} was asked for; call to_dtype({:?}) first",
                        self.dtype(),
                        T::DTYPE,
                        T::DTYPE
                    ),
                ));
            }
            let host = self.to_host()?;
            T::from_host(&host)
                .cloned()
                .ok_or_else(|| Error::internal("to_vec", "backend returned another dtype"))
        })
    }

    /// The single element of a tensor with one element.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.sum().item::<f32>().unwrap(), 10.0);
    /// ```
    #[track_caller]
    pub fn item<T: Element>(&self) -> Result<T> {
        crate::tensor::at_site("item", || {
            let v = self.to_vec::<T>()?;
            if v.len() != 1 {
                return Err(Error::invalid(
                    "item",
                    format!(
                        "the tensor has {} elements (shape {}); item needs exactly one",
                        v.len(),
                        self.shape_string()
                    ),
                ));
            }
            Ok(v[0])
        })
    }

    /// The real sizes, materialising dynamic ones (counts
    /// `SizeMaterialization` once per call that has to run or read
    /// anything).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let nz = x.nonzero();
    /// assert_eq!(nz.shape_string(), "[<=3, 1]");
    /// assert_eq!(nz.concrete_shape().unwrap(), vec![2, 1]);
    /// ```
    #[track_caller]
    pub fn concrete_shape(&self) -> Result<Vec<usize>> {
        crate::tensor::at_site("concrete_shape", || {
            let sizes = self.sizes();
            let dynamic: Vec<&SymInt> = sizes.iter().filter(|s| s.is_dynamic()).collect();
            if dynamic.is_empty() {
                return Ok(sizes
                    .iter()
                    .map(|s| s.as_static().unwrap_or(0) as usize)
                    .collect());
            }
            let exprs: Vec<_> = sizes.iter().map(|s| s.expr.clone()).collect();
            let mut anchors: Vec<Arc<crate::ir::Node>> = Vec::new();
            for a in sizes.iter().flat_map(|s| &s.anchors) {
                if !anchors.iter().any(|b| Arc::ptr_eq(a, b)) {
                    anchors.push(a.clone());
                }
            }
            let values = materialize::materialize_all(&exprs, &anchors)?;
            Ok(values.into_iter().map(|v| v.max(0) as usize).collect())
        })
    }
}
