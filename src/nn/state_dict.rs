//! Loading named values into a model: [`load_state_dict`].

use super::Module;
use crate::error::{Error, Result};
use crate::ir::node::shape_string;
use crate::{no_grad, Tensor};

/// Sets the model's parameters and buffers from `named` values (as from
/// [`crate::safetensors::load`] or PyTorch's `state_dict()`), matched by
/// their dotted names ([`Module::named_parameters`],
/// [`Module::named_buffers`]).
///
/// Every value must have its tensor's dtype and shape (bounds included).
/// With `strict`, every name of the model must be given and every given
/// name must belong to the model, as in PyTorch; without it, missing and
/// unexpected names are skipped. On any error nothing is changed. The
/// values are assigned, not uploaded: the next step reads them.
///
/// ```
/// use lazyxla::nn::{self, Linear, Module};
/// use lazyxla::Tensor;
/// let model = Linear::new(2, 1, 0);
/// let w = Tensor::from_vec(vec![0.5f32, -1.0], &[1, 2]).unwrap();
/// let b = Tensor::from_vec(vec![2.0f32], &[1]).unwrap();
/// nn::load_state_dict(&model, &[("weight".into(), w), ("bias".into(), b)], true).unwrap();
/// let y = model.forward(&Tensor::from_vec(vec![2.0f32, 1.0], &[1, 2]).unwrap());
/// assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0]);
/// let bad = Tensor::from_vec(vec![0.0f32; 3], &[1, 3]).unwrap();
/// let err = nn::load_state_dict(&model, &[("weight".into(), bad)], false).unwrap_err();
/// assert!(err.to_string().contains("weight"));
/// ```
#[track_caller]
pub fn load_state_dict(
    model: &(impl Module + ?Sized),
    named: &[(String, Tensor)],
    strict: bool,
) -> Result<()> {
    const OP: &str = "load_state_dict";
    let mut own = model.named_parameters();
    own.extend(model.named_buffers());
    let mut plan = Vec::with_capacity(own.len());
    let mut missing = Vec::new();
    for (name, target) in &own {
        let Some((_, value)) = named.iter().find(|(n, _)| n == name) else {
            missing.push(name.clone());
            continue;
        };
        if value.dtype() != target.dtype() {
            return Err(Error::dtype(
                OP,
                format!(
                    "{name:?}: the value is {} but the model's tensor is {}; convert it with to_dtype first",
                    value.dtype(),
                    target.dtype()
                ),
            ));
        }
        let (have, want) = (value.shape_exprs(), target.shape_exprs());
        if have != want {
            return Err(Error::shape(
                OP,
                format!(
                    "{name:?}: the value has shape {} but the model's tensor has shape {}",
                    shape_string(&have),
                    shape_string(&want)
                ),
            ));
        }
        plan.push((target, value));
    }
    if strict {
        let unexpected: Vec<&str> = named
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !own.iter().any(|(o, _)| o == n))
            .collect();
        if !missing.is_empty() || !unexpected.is_empty() {
            return Err(Error::invalid(
                OP,
                format!(
                    "missing keys {missing:?}, unexpected keys {unexpected:?} (strict); pass strict = false to load only the names both have"
                ),
            ));
        }
    }
    no_grad(|| {
        for (target, value) in plan {
            target.assign(value);
        }
    });
    Ok(())
}
