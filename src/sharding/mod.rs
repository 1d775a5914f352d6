//! Sharding over a device mesh: one SPMD program split by XLA's
//! partitioner (GSPMD) over several devices, for values larger than one
//! device (PyTorch/XLA's `xs.Mesh` and `xs.mark_sharding`, JAX's
//! `NamedSharding`).
//!
//! A [`Mesh`] names the axes of a grid of devices. On its device
//! ([`Mesh::device`], [`Mesh::scoped`]) every program is compiled once
//! for all of them (`num_partitions`, `use_spmd_partitioning`, the mesh
//! order as the device assignment). [`Tensor::mark_sharding`] splits a
//! value over the mesh: computed data is cut on the host and each device
//! receives its piece (no device holds the whole); a pending value gets
//! a sharding constraint inside the program (XLA's `Sharding` custom
//! call). Every other value is whole on every device. XLA propagates the
//! shardings through the program and chooses its results' (read back
//! from the compiled program), so the results of one step feed the next
//! where they are, with no gather to the host; reading a sharded tensor
//! assembles its pieces on the host. A tensor updated in place
//! (`assign`, an optimizer's step) keeps the placement of the value it
//! replaces (its new value is constrained to it), so a parameter stays
//! split as it was marked and the next step is the same program.
//!
//! The reference backend keeps the same pieces on its devices and runs
//! the unpartitioned program on the whole values they make (the oracle of
//! the differential tests); its results are split where the program
//! constrains them.
//!
//! An uneven split pads the last pieces (XLA's convention): a dim of 10
//! over 4 devices has pieces of 3, 3, 3 and 1 real rows.
//!
//! ```
//! use lazyxla::{sharding::Mesh, Device, Tensor};
//! lazyxla::set_cpu_device_count(4).unwrap();
//! let devices = Device::reference().scoped(lazyxla::devices);
//! let mesh = Mesh::new(&devices, &[4], &["data"]).unwrap();
//! let x = Tensor::from_vec((0..16).map(|v| v as f32).collect(), &[8, 2]).unwrap();
//! let x = x.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
//! assert_eq!(x.sharding().unwrap().tiles(), &[4, 1]);
//! let w = mesh.scoped(|| Tensor::ones(&[2, 3], lazyxla::DType::F32));
//! let y = x.matmul(&w); // one program over the 4 devices
//! assert_eq!(y.to_vec::<f32>().unwrap()[..3], [1.0, 1.0, 1.0]);
//! ```
//!
//! # Dynamic sizes
//!
//! See [`dynamic`] for what XLA's partitioner does with bounded dynamic
//! dims, measured on both CPU plugins, and what is supported.

pub mod dynamic;
mod memory;

pub use crate::ir::sharding::Sharding;
pub use memory::MemoryStats;

use crate::device::Device;
use crate::runtime::device_data::DeviceData;
use crate::tensor::Tensor;
use crate::{Error, Result};
use std::sync::Arc;

/// A grid of devices with named axes (PyTorch/XLA's `Mesh`): device
/// `devices[i]` sits at the row-major position `i` of `shape`.
#[derive(Clone)]
pub struct Mesh {
    devices: Vec<Device>,
    shape: Vec<usize>,
    axes: Vec<String>,
    /// The device of the mesh's SPMD programs.
    device: Device,
}

impl Mesh {
    /// A mesh of `shape` over `devices` (row-major), its axes named
    /// `axis_names`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the device count is not the
    /// product of `shape`, a device is named twice, the axis names are
    /// not one per axis or repeat a name, or the devices are not devices
    /// of one client ([`crate::devices`]).
    ///
    /// ```
    /// use lazyxla::{sharding::Mesh, Device};
    /// lazyxla::set_cpu_device_count(4).unwrap();
    /// let d = Device::reference().scoped(lazyxla::devices);
    /// let mesh = Mesh::new(&d, &[2, 2], &["data", "model"]).unwrap();
    /// assert_eq!(mesh.shape(), &[2, 2]);
    /// let e = Mesh::new(&d, &[2, 4], &["data", "model"]).err().unwrap();
    /// assert!(e.to_string().contains("8 devices"), "{e}");
    /// ```
    pub fn new(devices: &[Device], shape: &[usize], axis_names: &[&str]) -> Result<Mesh> {
        let invalid = |m: String| Error::invalid("Mesh::new", m);
        let want: usize = shape.iter().product();
        if shape.is_empty() || want != devices.len() {
            return Err(invalid(format!(
                "a mesh of shape {shape:?} has {want} devices, but {} were given; give one device per mesh position",
                devices.len()
            )));
        }
        if axis_names.len() != shape.len() {
            return Err(invalid(format!(
                "{} axis names for a mesh of {} axes (shape {shape:?}); name each axis once",
                axis_names.len(),
                shape.len()
            )));
        }
        for (i, a) in axis_names.iter().enumerate() {
            if axis_names[..i].contains(a) {
                return Err(invalid(format!(
                    "the axis name {a:?} is given twice ({axis_names:?})"
                )));
            }
        }
        let device = Device::spmd(devices, "Mesh::new")?;
        Ok(Mesh {
            devices: devices.to_vec(),
            shape: shape.to_vec(),
            axes: axis_names.iter().map(|s| s.to_string()).collect(),
            device,
        })
    }

    /// The devices, row-major over [`Mesh::shape`].
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The size of each axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The axes' names.
    pub fn axis_names(&self) -> Vec<&str> {
        self.axes.iter().map(String::as_str).collect()
    }

    /// The device of the mesh's programs: values on it are whole on every
    /// mesh device unless sharded, and every program on it runs on all
    /// of them at once.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Runs `f` with the mesh's device as the default for constructors
    /// (a model created inside lives on the mesh, whole on every device,
    /// until sharded).
    ///
    /// ```
    /// use lazyxla::{sharding::Mesh, Device, Tensor};
    /// lazyxla::set_cpu_device_count(2).unwrap();
    /// let d = Device::reference().scoped(lazyxla::devices);
    /// let mesh = Mesh::new(&d[..2], &[2], &["x"]).unwrap();
    /// let t = mesh.scoped(|| Tensor::zeros(&[2], lazyxla::DType::F32));
    /// assert_eq!(t.device(), mesh.device());
    /// ```
    pub fn scoped<R>(&self, f: impl FnOnce() -> R) -> R {
        self.device.scoped(f)
    }

    /// The sharding of a value whose dim `d` is split over the mesh axis
    /// `spec[d]` (`None`: not split); it is whole along the axes no dim
    /// names.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] naming an axis that is not the mesh's,
    /// or one named for two dims.
    pub fn sharding(&self, spec: &[Option<&str>]) -> Result<Sharding> {
        let invalid = |m: String| Error::invalid("mark_sharding", m);
        let mut axis_of = Vec::with_capacity(spec.len());
        for (d, s) in spec.iter().enumerate() {
            let Some(name) = s else {
                axis_of.push(None);
                continue;
            };
            let a = self.axes.iter().position(|x| x == name).ok_or_else(|| {
                invalid(format!(
                    "dim {d} names the axis {name:?}, which the mesh does not have (its axes are {:?})",
                    self.axes
                ))
            })?;
            if axis_of.contains(&Some(a)) {
                return Err(invalid(format!(
                    "the axis {name:?} splits two dims ({spec:?}); name each axis at most once"
                )));
            }
            axis_of.push(Some(a));
        }
        let unused: Vec<usize> = (0..self.shape.len())
            .filter(|a| !axis_of.contains(&Some(*a)))
            .collect();
        let tiles: Vec<usize> = axis_of
            .iter()
            .map(|a| a.map_or(1, |a| self.shape[a]))
            .collect();
        let replicas: usize = unused.iter().map(|&a| self.shape[a]).product();
        // Row-major strides of the mesh positions.
        let mut stride = vec![1usize; self.shape.len()];
        for a in (0..self.shape.len().saturating_sub(1)).rev() {
            stride[a] = stride[a + 1] * self.shape[a + 1];
        }
        // The tile assignment, row-major over [tiles..., replicas].
        let mut all: Vec<usize> = tiles.clone();
        all.push(replicas);
        let count: usize = all.iter().product();
        let mut devices = Vec::with_capacity(count);
        for i in 0..count {
            let mut rest = i;
            let mut idx = vec![0usize; all.len()];
            for k in (0..all.len()).rev() {
                idx[k] = rest % all[k];
                rest /= all[k];
            }
            let mut p = 0;
            for (d, a) in axis_of.iter().enumerate() {
                if let Some(a) = a {
                    p += idx[d] * stride[*a];
                }
            }
            let mut r = idx[all.len() - 1];
            for &a in unused.iter().rev() {
                p += (r % self.shape[a]) * stride[a];
                r /= self.shape[a];
            }
            devices.push(p);
        }
        Sharding::new(tiles, replicas, devices).ok_or_else(|| {
            Error::internal("mark_sharding", "a tile assignment naming a device twice")
        })
    }
}

/// `t`'s value (read whole to the host) as data on `device` split by
/// `sharding`: each device of the mesh receives only its piece.
#[track_caller]
fn split_data(t: &Tensor, device: &Device, sharding: &Arc<Sharding>) -> Result<Tensor> {
    let node = t.node();
    if node.shape.iter().any(|e| e.as_const().is_none()) {
        return Err(Error::invalid(
            "mark_sharding",
            format!(
                "the computed value of shape {} has dynamic sizes; shard it while it is pending (a constraint in its program), or mark it static first",
                t.shape_string()
            ),
        ));
    }
    let host = crate::tensor::at_site("mark_sharding", || t.to_host())?;
    let bounds: Vec<usize> = host.shape().to_vec();
    let buffer = match sharding.is_replicated() {
        true => device.backend().upload(&host, &bounds)?,
        false => device.backend().upload_sharded(&host, sharding)?,
    };
    crate::metrics::inc(crate::metrics::Counter::TransferToDevice);
    let sizes = smallvec::smallvec![None; bounds.len()];
    let data = DeviceData::on_device(device.clone(), buffer, sizes, bounds.into());
    Ok(Tensor::data(device, t.dtype(), node.shape.clone(), data))
}

/// Splits `t` in place as `like`'s data is split, when both are on one
/// SPMD device and `like` is split (optimizer state created for a
/// sharded parameter, see `parallel::fully_shard`); otherwise leaves it.
#[track_caller]
pub(crate) fn split_like(t: &Tensor, like: &Tensor) -> Result<()> {
    let Some(s) = crate::runtime::device_data::of(&like.node()).and_then(DeviceData::sharding)
    else {
        return Ok(());
    };
    if !t.device().same(like.device()) || t.sharding().as_ref() == Some(&*s) {
        return Ok(());
    }
    let data = split_data(t, t.device(), &s)?;
    t.restore_to(data.node());
    Ok(())
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let axes: Vec<String> = self
            .axes
            .iter()
            .zip(&self.shape)
            .map(|(a, n)| format!("{a}={n}"))
            .collect();
        write!(f, "Mesh([{}] on {})", axes.join(", "), self.device)
    }
}

impl Tensor {
    /// This tensor split over `mesh`: dim `d` over the mesh axis
    /// `spec[d]`, or not split for `None` (PyTorch/XLA's
    /// `mark_sharding`). Computed data is cut on the host and each mesh
    /// device receives only its piece; a pending value on the mesh's
    /// device becomes a sharding constraint inside its program (XLA
    /// moves the data there). A tensor on the mesh's device is sharded
    /// in place (every handle, a parameter's gradient flag included,
    /// sees it) and returned; one on another device is left as it was,
    /// and the result is a new tensor on [`Mesh::device`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when `spec` has not one entry per dim
    /// (naming both counts), names an axis the mesh does not have, names
    /// one axis twice, or has a computed value of dynamic sizes (split it
    /// while pending; see [`dynamic`]).
    ///
    /// ```
    /// use lazyxla::{sharding::Mesh, Device, Tensor};
    /// lazyxla::set_cpu_device_count(2).unwrap();
    /// let d = Device::reference().scoped(lazyxla::devices);
    /// let mesh = Mesh::new(&d[..2], &[2], &["x"]).unwrap();
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
    /// let s = t.mark_sharding(&mesh, &[Some("x")]).unwrap();
    /// assert_eq!(s.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    /// assert!(t.mark_sharding(&mesh, &[Some("y")]).is_err());
    /// ```
    #[track_caller]
    pub fn mark_sharding(&self, mesh: &Mesh, spec: &[Option<&str>]) -> Result<Tensor> {
        let node = self.node();
        if spec.len() != node.shape.len() {
            return Err(Error::invalid(
                "mark_sharding",
                format!(
                    "a spec of {} entries for a tensor of rank {} (shape {}); give one entry per dim",
                    spec.len(),
                    node.shape.len(),
                    self.shape_string()
                ),
            ));
        }
        let sharding = Arc::new(mesh.sharding(spec)?);
        let on_mesh = self.device().same(mesh.device());
        if on_mesh && self.is_pending() {
            let op = crate::ir::Op::Sharding(sharding);
            let constrained = Tensor::try_apply(op, &[self], smallvec::SmallVec::new())?;
            self.assign(&constrained);
            return Ok(self.clone());
        }
        let data = split_data(self, mesh.device(), &sharding)?;
        if on_mesh {
            // In place, as PyTorch/XLA's: every handle sees the pieces.
            self.restore_to(data.node());
            return Ok(self.clone());
        }
        Ok(data)
    }

    /// How the tensor is split over a mesh: the sharding of its data, or
    /// the constraint of a pending [`Tensor::mark_sharding`]; `None` for a
    /// value whole on its device (or devices). A program's results have
    /// the sharding XLA chose for them.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    /// assert!(t.sharding().is_none());
    /// ```
    pub fn sharding(&self) -> Option<Sharding> {
        let node = self.node();
        if let crate::ir::Op::Sharding(s) = &node.op {
            return Some((**s).clone());
        }
        crate::runtime::device_data::of(&node)
            .and_then(DeviceData::sharding)
            .map(|s| (*s).clone())
    }
}
