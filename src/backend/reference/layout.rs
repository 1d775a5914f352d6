//! Reference kernels of the layout family: the operand's elements moved,
//! repeated, cut or renamed on exact sizes (so a dynamic dim is its real
//! size here, and padding never exists).

use super::err;
use crate::dtype::DType;
use crate::error::Result;
use crate::host::HostArray;
use crate::map_host_array;
use ndarray::{Axis, IxDyn};

/// `x` placed into `shape`: operand dim `i` becomes dim `map[i]`.
pub(super) fn broadcast(x: &HostArray, map: &[usize], sh: &[usize]) -> Result<HostArray> {
    let mut expanded = vec![1usize; sh.len()];
    for (i, &d) in map.iter().enumerate() {
        expanded[d] = x.shape()[i];
    }
    Ok(map_host_array!(x, a => {
        let r = a.to_shape(IxDyn(&expanded)).map_err(|e| err("broadcast", e.to_string()))?;
        r.broadcast(IxDyn(sh)).ok_or_else(|| err("broadcast", format!("cannot broadcast {:?} to {:?}", a.shape(), sh)))?.to_owned()
    }))
}

/// `x`'s elements in row-major order in the shape `sh`.
pub(super) fn reshape(x: &HostArray, sh: &[usize]) -> Result<HostArray> {
    Ok(map_host_array!(x, a => {
        a.to_shape(IxDyn(sh)).map_err(|e| err("reshape", format!("{:?} -> {:?}: {e}", a.shape(), sh)))?.to_owned()
    }))
}

/// `x` with output dim `i` its dim `perm[i]`.
pub(super) fn transpose(x: &HostArray, perm: &[usize]) -> HostArray {
    map_host_array!(x, a => a.clone().permuted_axes(IxDyn(perm)).as_standard_layout().into_owned())
}

/// `len` elements from `start` along `dim`; on exact sizes a dynamic dim
/// clamps (see `Op::Slice`).
pub(super) fn slice(x: &HostArray, dim: usize, start: usize, len: usize) -> HostArray {
    map_host_array!(x, a => {
        let n = a.shape()[dim];
        let from = start.min(n);
        a.slice_axis(Axis(dim), ndarray::Slice::from(from..start.saturating_add(len).min(n))).to_owned()
    })
}

/// `x` reversed along `dims`: on exact sizes, reversing the whole axis is
/// reversing the real elements.
pub(super) fn reverse(x: &HostArray, dims: &[usize]) -> HostArray {
    map_host_array!(x, a => {
        let mut v = a.view();
        for &d in dims {
            v.invert_axis(Axis(d));
        }
        v.as_standard_layout().into_owned()
    })
}

/// `x` renamed to the checked sizes `sh` (its own, once the checks held).
pub(super) fn guard(x: &HostArray, sh: &[usize]) -> Result<HostArray> {
    if x.shape() != sh {
        return Err(err(
            "guard",
            format!(
                "checked sizes {sh:?} differ from the operand's {:?}",
                x.shape()
            ),
        ));
    }
    Ok(x.clone())
}

/// `x` as the static array of its `bound` shape, `fill` past its sizes.
pub(super) fn pad_to_bound(x: &HostArray, bound: &[usize], fill: f64) -> Result<HostArray> {
    x.padded(bound, fill)
        .ok_or_else(|| err("pad_to_bound", "the value exceeds its bound"))
}

/// The operands joined along `dim`.
pub(super) fn concat(ins: &[&HostArray], dim: usize) -> Result<HostArray> {
    macro_rules! cat {
        ($v:ident) => {{
            let views = ins
                .iter()
                .map(|a| match a {
                    HostArray::$v(x) => Ok(x.view()),
                    _ => Err(err("concat", "dtypes differ")),
                })
                .collect::<Result<Vec<_>>>()?;
            HostArray::$v(
                ndarray::concatenate(Axis(dim), &views)
                    .map_err(|e| err("concat", e.to_string()))?,
            )
        }};
    }
    Ok(match ins[0].dtype() {
        DType::Bool => cat!(Bool),
        DType::I32 => cat!(I32),
        DType::I64 => cat!(I64),
        DType::F16 => cat!(F16),
        DType::BF16 => cat!(BF16),
        DType::F32 => cat!(F32),
        DType::F64 => cat!(F64),
    })
}
