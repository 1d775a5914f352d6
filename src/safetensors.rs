//! Named tensors in the safetensors format, the files PyTorch's
//! `safetensors.torch.save_file`/`load_file` read and write: a
//! checkpoint of `Module::named_parameters()` and `named_buffers()`, or of
//! an optimizer's `state_dict()`.
//!
//! ```
//! use lazyxla::{safetensors, Tensor};
//! let dir = std::env::temp_dir().join(format!("lazyxla-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("weights.safetensors");
//! let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
//! safetensors::save(&path, &[("w".to_string(), w)]).unwrap();
//! let back = safetensors::load(&path).unwrap();
//! assert_eq!(back[0].0, "w");
//! assert_eq!(back[0].1.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::{DType, Device, Tensor};
use ::safetensors::tensor::{Dtype, Metadata, TensorView};
use ::safetensors::SafeTensors;
use std::path::Path;

/// Writes `tensors` (their real values, read from the device) to `path`.
/// Names must be distinct. Dynamic tensors are written at their real
/// sizes.
///
/// ```
/// use lazyxla::{safetensors, Tensor};
/// let path = std::env::temp_dir().join(format!("lazyxla-doc-save-{}.safetensors", std::process::id()));
/// let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// safetensors::save(&path, &[("w".to_string(), w)]).unwrap();
/// let back = safetensors::load(&path).unwrap();
/// assert_eq!(back[0].0, "w");
/// assert_eq!(back[0].1.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn save(path: impl AsRef<Path>, tensors: &[(String, Tensor)]) -> Result<()> {
    let path = path.as_ref();
    let mut arrays = Vec::with_capacity(tensors.len());
    for (i, (name, t)) in tensors.iter().enumerate() {
        if tensors[..i].iter().any(|(n, _)| n == name) {
            return Err(Error::invalid(
                "safetensors::save",
                format!("the name {name:?} is given twice; names must be distinct"),
            ));
        }
        arrays.push((name.clone(), t.to_host()?));
    }
    let bytes: Vec<Vec<u8>> = arrays.iter().map(|(_, a)| a.to_bytes()).collect();
    let mut views = Vec::with_capacity(arrays.len());
    for ((name, a), b) in arrays.iter().zip(&bytes) {
        let view = TensorView::new(dtype_to_file(a.dtype()), a.shape().to_vec(), b)
            .map_err(|e| io_error("safetensors::save", path, e))?;
        views.push((name.clone(), view));
    }
    ::safetensors::serialize_to_file(views, None, path)
        .map_err(|e| io_error("safetensors::save", path, e))
}

/// Reads every tensor of a safetensors file, in the file's order, onto
/// the default device. Supported dtypes: BOOL, I32, I64, F16, BF16, F32, F64.
///
/// ```
/// use lazyxla::{safetensors, Tensor};
/// let path = std::env::temp_dir().join(format!("lazyxla-doc-load-{}.safetensors", std::process::id()));
/// let i = Tensor::from_vec(vec![3i64, 4], &[1, 2]).unwrap();
/// safetensors::save(&path, &[("i".to_string(), i)]).unwrap();
/// let (name, t) = &safetensors::load(&path).unwrap()[0];
/// assert_eq!(name, "i");
/// assert_eq!(t.concrete_shape().unwrap(), vec![1, 2]);
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let op = "safetensors::load";
    let bytes = std::fs::read(path).map_err(|e| io_error(op, path, e))?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| io_error(op, path, e))?;
    let (_, metadata): (usize, Metadata) =
        SafeTensors::read_metadata(&bytes).map_err(|e| io_error(op, path, e))?;
    let device = Device::default();
    let mut out = Vec::with_capacity(file.len());
    for name in metadata.offset_keys() {
        let view = file.tensor(&name).map_err(|e| io_error(op, path, e))?;
        let dtype = dtype_from_file(view.dtype()).ok_or_else(|| {
            Error::dtype(
                op,
                format!(
                    "{name:?} in {} is {:?}; lazyxla reads BOOL, I32, I64, F16, BF16, F32 and F64",
                    path.display(),
                    view.dtype()
                ),
            )
        })?;
        let host = HostArray::from_bytes(dtype, view.shape(), view.data());
        out.push((name, Tensor::from_host(host, &device)?));
    }
    Ok(out)
}

fn dtype_to_file(d: DType) -> Dtype {
    match d {
        DType::Bool => Dtype::BOOL,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
    }
}

fn dtype_from_file(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::BOOL => DType::Bool,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        _ => return None,
    })
}

fn io_error(op: &'static str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io {
        op,
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
