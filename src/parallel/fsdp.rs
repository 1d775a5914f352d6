//! FSDP-style sharding ([`fully_shard`]): every parameter split along
//! one mesh axis, and the optimizer state made for it split alike.

use crate::nn::Module;
use crate::sharding::Mesh;
use crate::{Error, Result};

/// Splits every parameter of `model` along its dim 0 over the mesh axis
/// `axis` (PyTorch's FSDP2 `fully_shard`, through XLA's partitioner as
/// PyTorch/XLA's SPMD FSDP does): each device of the axis holds a
/// quarter of every parameter on a 4-device axis (the last pieces padded
/// when dim 0 does not divide). Optimizer state created afterwards for a
/// parameter (Adam's moments, SGD's momentum) is split as the parameter
/// is. A step then runs as one SPMD program in which XLA gathers each
/// weight where it is used and splits the gradients back. Scalars stay
/// whole. The parameters are sharded in place.
///
/// The model must have been created on the mesh's device
/// ([`Mesh::scoped`]).
///
/// # Errors
///
/// [`Error::InvalidArgument`] naming the axis when the mesh has no such
/// axis, or naming a parameter that is not on the mesh's device; nothing
/// is changed then.
///
/// ```
/// use lazyxla::prelude::*;
/// use lazyxla::{parallel::fully_shard, sharding::Mesh};
/// lazyxla::set_cpu_device_count(4).unwrap();
/// let devices = Device::reference().scoped(lazyxla::devices);
/// let mesh = Mesh::new(&devices, &[4], &["data"]).unwrap();
/// let model = mesh.scoped(|| nn::Linear::new(4, 8, 0));
/// fully_shard(&model, &mesh, "data").unwrap();
/// assert_eq!(model.weight.sharding().unwrap().tiles(), &[4, 1]);
/// ```
pub fn fully_shard(model: &impl Module, mesh: &Mesh, axis: &str) -> Result<()> {
    mesh.sharding(&[Some(axis)])?;
    let params = model.parameters();
    if let Some(p) = params.iter().find(|p| !p.device().same(mesh.device())) {
        return Err(Error::invalid(
            "fully_shard",
            format!(
                "a parameter of shape {} is on {}, not on the mesh's device {}; create the model inside `mesh.scoped(..)`",
                p.shape_string(),
                p.device(),
                mesh.device()
            ),
        ));
    }
    for p in params.iter().filter(|p| p.rank() > 0) {
        let mut spec = vec![None; p.rank()];
        spec[0] = Some(axis);
        p.mark_sharding(mesh, &spec)?;
    }
    Ok(())
}
