//! SPMD programs on the XLA backend: the shardings XLA chose for a
//! program's results, and host data split into pieces and assembled
//! from them.
//!
//! The results' shardings are read as PJRT's own C API client reads
//! them (`GetOutputShardings`): from the optimized module
//! (`PJRT_Executable_OptimizedProgram`), a serialized `HloModuleProto`
//! whose field 12, `spmd_output_sharding`, is an `xla.OpSharding` (a
//! `TUPLE` of one per result). The few fields read here are decoded by
//! hand, as `ffi::compile_options` encodes its own.
//!
//! `OpSharding`: `type` (1: `REPLICATED` 0, `MAXIMAL` 1, `TUPLE` 2,
//! `OTHER` 3, `MANUAL` 4), `tile_assignment_dimensions` (3),
//! `tile_assignment_devices` (4), `tuple_shardings` (5),
//! `replicate_on_last_tile_dim` (6), `last_tile_dims` (8),
//! `iota_reshape_dims` (9), `iota_transpose_perm` (10).

use super::ffi::Executable;
use crate::error::{Error, Result};
use crate::ir::sharding::Sharding;
use std::sync::Arc;

/// One decoded protobuf field: its number and its value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// The fields of a protobuf message, in order.
fn fields(mut b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&x, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(x & 0x7f) << shift;
            if x < 0x80 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let tag = varint(&mut b)?;
        let value = match tag & 7 {
            0 => Field::Varint(varint(&mut b)?),
            1 => {
                let (v, rest) = b.split_at_checked(8)?;
                b = rest;
                Field::Bytes(v)
            }
            2 => {
                let n = usize::try_from(varint(&mut b)?).ok()?;
                let (v, rest) = b.split_at_checked(n)?;
                b = rest;
                Field::Bytes(v)
            }
            5 => {
                let (v, rest) = b.split_at_checked(4)?;
                b = rest;
                Field::Bytes(v)
            }
            _ => return None,
        };
        out.push((tag >> 3, value));
    }
    Some(out)
}

/// The integers of a repeated integer field, packed or not.
fn ints(fs: &[(u64, Field<'_>)], number: u64) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    for (n, f) in fs {
        if *n != number {
            continue;
        }
        match f {
            Field::Varint(v) => out.push(*v),
            Field::Bytes(mut b) => {
                while !b.is_empty() {
                    let mut v = 0u64;
                    let mut shift = 0;
                    loop {
                        let (&x, rest) = b.split_first()?;
                        b = rest;
                        v |= u64::from(x & 0x7f) << shift;
                        shift += 7;
                        if x < 0x80 {
                            break;
                        }
                    }
                    out.push(v);
                }
            }
        }
    }
    Some(out)
}

/// The last value of a length-delimited field.
fn bytes<'a>(fs: &[(u64, Field<'a>)], number: u64) -> Option<&'a [u8]> {
    fs.iter().rev().find_map(|(n, f)| match (n, f) {
        (n, Field::Bytes(b)) if *n == number => Some(*b),
        _ => None,
    })
}

/// A sharding as XLA wrote it (`OpSharding`): `None` for a value whole
/// on every device; an error naming what is not a tiled sharding of `n`
/// devices.
fn op_sharding(b: &[u8], n: usize) -> std::result::Result<Option<Sharding>, String> {
    let fs = fields(b).ok_or("an OpSharding that does not decode")?;
    let kind = ints(&fs, 1).and_then(|v| v.last().copied()).unwrap_or(0);
    match kind {
        0 => return Ok(None),
        3 => {}
        1 => return Err("a value on one device only (MAXIMAL)".into()),
        4 => return Err("a manually partitioned value (MANUAL)".into()),
        k => return Err(format!("an OpSharding of type {k}")),
    }
    let bad = || "an OpSharding whose tile assignment does not decode".to_string();
    let mut dims: Vec<usize> = ints(&fs, 3)
        .ok_or_else(bad)?
        .into_iter()
        .map(|d| d as usize)
        .collect();
    let count: usize = dims.iter().product();
    let mut devices: Vec<usize> = ints(&fs, 4)
        .ok_or_else(bad)?
        .into_iter()
        .map(|d| d as usize)
        .collect();
    if devices.is_empty() {
        let reshape: Vec<usize> = ints(&fs, 9)
            .ok_or_else(bad)?
            .into_iter()
            .map(|d| d as usize)
            .collect();
        let perm: Vec<usize> = ints(&fs, 10)
            .ok_or_else(bad)?
            .into_iter()
            .map(|d| d as usize)
            .collect();
        devices = iota_devices(&reshape, &perm).ok_or_else(bad)?;
    }
    if devices.len() != count || count != n {
        return Err(format!(
            "a tile assignment of {} devices for a program of {n}",
            devices.len()
        ));
    }
    // Trailing subgroup dims: replicated ones only.
    let mut trailing = ints(&fs, 8).ok_or_else(bad)?;
    let replicate_last = ints(&fs, 6).and_then(|v| v.last().copied()).unwrap_or(0) != 0;
    if replicate_last {
        trailing = vec![0];
    }
    if let Some(k) = trailing.iter().find(|&&k| k != 0) {
        return Err(format!(
            "a subgroup of type {k} (only replicated ones are read)"
        ));
    }
    let replicas: usize = (0..trailing.len())
        .map(|_| dims.pop().unwrap_or(1))
        .product();
    Sharding::new(dims, replicas, devices)
        .map(Some)
        .ok_or_else(|| "a tile assignment that names a device twice".into())
}

/// The devices of an iota tile assignment: `0..N` reshaped to `reshape`
/// and transposed by `perm`, row-major.
fn iota_devices(reshape: &[usize], perm: &[usize]) -> Option<Vec<usize>> {
    if reshape.len() != perm.len() {
        return None;
    }
    let n: usize = reshape.iter().product();
    let mut strides = vec![1usize; reshape.len()];
    for d in (0..reshape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * reshape[d + 1];
    }
    let out_dims: Vec<usize> = perm
        .iter()
        .map(|&p| reshape.get(p).copied())
        .collect::<Option<_>>()?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut rest = i;
        let mut src = 0;
        for k in (0..out_dims.len()).rev() {
            let idx = rest % out_dims[k];
            rest /= out_dims[k];
            src += idx * strides[perm[k]];
        }
        out.push(src);
    }
    Some(out)
}

/// The sharding XLA chose for each of the `outputs` results of `exe`, a
/// program of `n` partitions (`None`: whole on every device).
pub(super) fn output_shardings(
    exe: &Executable,
    n: usize,
    outputs: usize,
) -> Result<Vec<Option<Arc<Sharding>>>> {
    let fail = |m: String| {
        Error::internal(
            "pjrt compile",
            format!("reading the shardings XLA chose for the results: {m}"),
        )
    };
    let (format, code) = exe
        .optimized_program()
        .map_err(|e| fail(format!("PJRT_Executable_OptimizedProgram: {}", e.message)))?;
    let module = match format.as_str() {
        "hlo_with_config" => {
            let fs = fields(&code).ok_or_else(|| fail("the module does not decode".into()))?;
            bytes(&fs, 1).ok_or_else(|| fail("no module in the config".into()))?
        }
        _ => &code[..],
    };
    let fs = fields(module).ok_or_else(|| fail("the module does not decode".into()))?;
    let Some(sharding) = bytes(&fs, 12) else {
        return Err(fail("the module has no spmd_output_sharding".into()));
    };
    let top = fields(sharding).ok_or_else(|| fail("the sharding does not decode".into()))?;
    let kind = ints(&top, 1).and_then(|v| v.last().copied()).unwrap_or(0);
    let each: Vec<&[u8]> = match kind {
        2 => top
            .iter()
            .filter_map(|(k, f)| match (k, f) {
                (5, Field::Bytes(b)) => Some(*b),
                _ => None,
            })
            .collect(),
        _ => vec![sharding; outputs],
    };
    if each.len() != outputs {
        return Err(fail(format!(
            "{} shardings for {outputs} results",
            each.len()
        )));
    }
    each.iter()
        .map(|b| op_sharding(b, n).map(|s| s.map(Arc::new)).map_err(fail))
        .collect()
}

/// What a failed compile of a sharded `program` means, when XLA's
/// `message` is the one its dynamic padder gives for a split dynamic dim
/// (measured on both CPU plugins, see the `sharding::dynamic` module): the
/// constraints that split one, by node, dim and bound.
pub(super) fn explain(program: &crate::ir::program::Program, message: &str) -> Option<String> {
    if !message.contains("Dynamic dimension propagation") {
        return None;
    }
    let splits: Vec<String> = program
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match &n.op {
            crate::ir::Op::Sharding(s) => Some((i, n, s)),
            _ => None,
        })
        .flat_map(|(i, n, s)| {
            n.shape
                .iter()
                .zip(s.tiles())
                .enumerate()
                .filter(|(_, (e, &t))| e.as_const().is_none() && t > 1)
                .map(move |(d, (e, t))| {
                    format!(
                        "node {i} (mark_sharding) splits dim {d} of size <={} over {t} devices",
                        e.hi()
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if splits.is_empty() {
        return None;
    }
    Some(format!(
        "a sharded program splits a dynamic dim that it packs (a nonzero or masked_select result that is read, sliced or indexed), which XLA's partitioner cannot split: {}; leave that dim whole",
        splits.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_tiled_and_iota_shardings() {
        // type OTHER, dims [2,1,2] packed, devices 0..4 packed, replicate last.
        let b = [0x08, 3, 0x1a, 3, 2, 1, 2, 0x22, 4, 0, 1, 2, 3, 0x30, 1];
        let s = op_sharding(&b, 4).unwrap().unwrap();
        assert_eq!((s.tiles(), s.replicas()), (&[2usize, 1][..], 2));
        // type OTHER, dims [2,2], iota reshape [2,2] transposed.
        let b = [0x08, 3, 0x1a, 2, 2, 2, 0x4a, 2, 2, 2, 0x52, 2, 1, 0];
        let s = op_sharding(&b, 4).unwrap().unwrap();
        assert_eq!(s.hlo(), "{devices=[2,2]0,2,1,3}");
        assert!(op_sharding(&[0x08, 0], 4).unwrap().is_none());
        assert!(op_sharding(&[0x08, 1], 4).is_err());
    }
}
