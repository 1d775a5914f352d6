//! The pass deciding which zones the XLA lowering keeps masked
//! (`Program::masked_zones`): a dynamic dim whose packed order nothing
//! observes keeps its source's layout.
//!
//! `nonzero(x)` and `masked_select(v, x)` give a dim of size `s`, the
//! number of true elements of `x`, whose real elements lie packed at its
//! front in order: a prefix sum and a scatter (`backend::pjrt::lower`,
//! `dynamic.rs`). When no use of `s` depends on where its elements lie,
//! the zone is lowered *masked* instead: the dim keeps the layout of `x`
//! flattened (the same bound `N`, the same static buffer), its real
//! elements at the positions where `x` is true and its padding where `x`
//! is false (`lower/masked.rs` writes it). No prefix sum, no scatter,
//! forward or backward.
//!
//! The uses that keep a zone masked ([`uses_ok`]): elementwise ops,
//! broadcasts into it, transposes, reshapes that keep the dim's layout,
//! reductions and contractions over it (their padding fill reads the
//! mask, as it reads a prefix's size), `index_select` and `index_add`
//! indexed by it, `masked_scatter` back through the same mask, size
//! expressions of it. Anything that observes a position packs it: being a
//! program result (a read), an index into it, a slice, concat, reverse,
//! sort, scan, window or `argmax` along it, a loop carrying or capturing
//! it, a nested `nonzero`, an `iota` of its size, a guard that renames
//! it, or a dim that is an expression of it (`s + 1`) rather than `s`
//! itself.
//!
//! The choice depends on the program alone, so the compile cache, keyed
//! by the program, keys it too. On the reference backend, which holds no
//! padding, a masked zone is a zone like any other: the pass changes no
//! value. `LAZYXLA_PJRT_ZONES=packed` packs every zone (read once per
//! process, for measurements, like `LAZYXLA_PJRT_PACK`).

use crate::ir::program::Program;
use crate::ir::{Family, Op};
use crate::symint::SizeExpr;
use std::collections::{HashMap, HashSet};

/// Whether this process packs every zone (see the module docs).
fn packed_only() -> bool {
    static PACKED: std::sync::LazyLock<bool> =
        std::sync::LazyLock::new(|| std::env::var("LAZYXLA_PJRT_ZONES").as_deref() == Ok("packed"));
    *PACKED
}

/// The variable id of `e` when it is exactly one variable.
pub(crate) fn var_id(e: &SizeExpr) -> Option<u64> {
    e.as_var().map(|v| v.0.id)
}

/// The dims of `shape` whose size is exactly variable `v`.
fn dims_of(shape: &[SizeExpr], v: u64) -> Vec<usize> {
    (0..shape.len())
        .filter(|&d| var_id(&shape[d]) == Some(v))
        .collect()
}

/// The variables whose zones `program` keeps masked, sorted.
pub(crate) fn masked_zones(program: &Program) -> Vec<u64> {
    // Each candidate with its first defining node (`nonzero` or
    // `masked_select`).
    let mut cand: HashMap<u64, usize> = HashMap::new();
    if packed_only() {
        return Vec::new();
    }
    for (i, n) in program.nodes.iter().enumerate() {
        if matches!(n.op, Op::Nonzero | Op::MaskedSelect) {
            if let Some(v) = n.shape.first().and_then(var_id) {
                cand.entry(v).or_insert(i);
            }
        }
    }
    if cand.is_empty() {
        return Vec::new();
    }
    let mut bad: HashSet<u64> = HashSet::new();
    for &o in &program.outputs {
        for e in program.nodes[o].shape.iter() {
            bad.extend(e.vars().iter().map(|v| v.0.id));
        }
    }
    for (i, n) in program.nodes.iter().enumerate() {
        let mut shapes: Vec<&[SizeExpr]> = vec![&n.shape];
        shapes.extend(n.inputs.iter().map(|&j| &program.nodes[j].shape[..]));
        let mut mentioned: Vec<u64> = Vec::new();
        for s in &shapes {
            for e in s.iter() {
                for v in e.vars() {
                    let id = v.0.id;
                    if !cand.contains_key(&id) {
                        continue;
                    }
                    if var_id(e) != Some(id) {
                        // An expression of the variable, not the variable.
                        bad.insert(id);
                    }
                    if !mentioned.contains(&id) {
                        mentioned.push(id);
                    }
                }
            }
        }
        for v in mentioned {
            if !uses_ok(program, i, v, &cand) {
                bad.insert(v);
            }
        }
    }
    let mut zones: Vec<u64> = cand.into_keys().filter(|v| !bad.contains(v)).collect();
    zones.sort_unstable();
    zones
}

/// Whether node `i` uses the candidate variable `v` (in its shape or its
/// operands') without observing where the real elements lie. `false` is
/// always correct (the zone is packed), so an op of a family answers
/// `false` unless it is named here.
fn uses_ok(program: &Program, i: usize, v: u64, cand: &HashMap<u64, usize>) -> bool {
    let n = &program.nodes[i];
    let input = |k: usize| &program.nodes[n.inputs[k]].shape[..];
    match n.op.family() {
        // Position by position.
        Family::Elementwise => true,
        // Reductions and products over the zone read its mask as their
        // padding fill; an index along it observes positions.
        Family::Reduction => match &n.op {
            Op::Reduce { .. } => true,
            Op::ArgReduce { dim, .. } => !dims_of(input(0), v).contains(dim),
            _ => false,
        },
        Family::Contraction => matches!(n.op, Op::Dot(_)),
        // A size of the zone, not an iota over it.
        Family::Source { .. } => matches!(n.op, Op::SizeOf(_)),
        Family::Layout { .. } => match &n.op {
            Op::Transpose { .. } | Op::Sharding(_) | Op::FillPadding { .. } => true,
            Op::Broadcast { dims, .. } => dims_of(input(0), v)
                .iter()
                .all(|&k| var_id(&n.shape[dims[k]]) == Some(v)),
            Op::Reshape { shape } => {
                let from = input(0);
                let ((xd, xy), (td, ty)) = (layout(from), layout(shape));
                same_padded_layout(from, (&xd, &xy), shape, (&td, &ty))
            }
            Op::Guard { shape, .. } => dims_of(input(0), v) == dims_of(shape, v),
            // Slice, concat, reverse and padding observe positions.
            _ => false,
        },
        Family::Indexing => match &n.op {
            Op::IndexSelect { dim } => !dims_of(input(0), v).contains(dim),
            Op::IndexAdd { .. } => dims_of(input(0), v).is_empty(),
            Op::MaskedScatter => {
                // Back through the mask that made the source.
                let src = dims_of(input(2), v) == [0];
                let def = &program.nodes[cand[&v]];
                src && matches!(def.op, Op::MaskedSelect)
                    && def.inputs[1] == n.inputs[1]
                    && dims_of(input(0), v).is_empty()
                    && dims_of(input(1), v).is_empty()
            }
            // Gather, scatter and sort observe positions.
            _ => false,
        },
        // A nested `nonzero` of an unmasked operand starts a zone of its
        // own; one of the zone (or `unique`) packs it.
        Family::Dynamic => {
            matches!(n.op, Op::Nonzero | Op::MaskedSelect)
                && n.inputs.iter().all(|&j| {
                    program.nodes[j]
                        .shape
                        .iter()
                        .all(|e| !e.vars().iter().any(|w| w.0.id == v))
                })
        }
        Family::Window | Family::Collective | Family::Loop { .. } => false,
    }
}

/// The buffer layout of a value of `shape` before any zone is masked:
/// each dim's bound, and whether it has padding.
fn layout(shape: &[SizeExpr]) -> (Vec<i64>, Vec<bool>) {
    let dims = shape
        .iter()
        .map(|e| e.as_const().unwrap_or_else(|| e.hi()).max(0))
        .collect();
    (dims, shape.iter().map(|e| e.as_const().is_none()).collect())
}

/// True when reshaping the padded buffer of `x` (shape `from`, buffer
/// dims and which are dynamic `xt`) by bounds gives the padded buffer of
/// the result (shape `to`, buffer `tt`): every dynamic dim of one meets a
/// dynamic dim of the other with the same size expression and the same
/// bound, after equally many elements of bounds, and sizes-1 dims and
/// splits or merges of static dims account for the rest (`[16, s, 64] ->
/// [16, s, 4, 16]`, `[16, s] -> [16, s, 1]`). The lowering asks it of
/// lowered types, where a masked dim is static.
pub(crate) fn same_padded_layout(
    from: &[SizeExpr],
    (x_dims, x_dyn): (&[i64], &[bool]),
    to: &[SizeExpr],
    (t_dims, t_dyn): (&[i64], &[bool]),
) -> bool {
    let dyn_dims = |dy: &[bool]| (0..dy.len()).filter(|&d| dy[d]).collect::<Vec<_>>();
    let (da, db) = (dyn_dims(x_dyn), dyn_dims(t_dyn));
    let numel = |d: &[i64]| d.iter().product::<i64>();
    if da.is_empty() || da.len() != db.len() || numel(x_dims) != numel(t_dims) {
        return false;
    }
    let before = |d: &[i64], k: usize| numel(&d[..k]);
    da.iter().zip(&db).all(|(&i, &j)| {
        from[i] == to[j] && x_dims[i] == t_dims[j] && before(x_dims, i) == before(t_dims, j)
    })
}

/// The pass: `Program::masked_zones` set; `None` when no zone is masked.
pub(crate) fn run(program: &Program, _pinned: &mut [usize]) -> Option<Program> {
    let zones = masked_zones(program);
    if zones == program.masked_zones {
        return None;
    }
    Some(Program {
        masked_zones: zones,
        ..program.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{before_after, program_of};
    use crate::{Device, Tensor};

    /// A zone only summed is masked; one that is read (a program result)
    /// observes where its elements lie and is packed.
    #[test]
    fn a_zone_nothing_observes_is_masked_and_a_read_one_is_not() {
        Device::reference().scoped(|| {
            let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0], &[4]).unwrap();
            let kept = x.masked_select(&x.gt_scalar(0.0));
            let total = (&kept * 2.0).sum();
            let p = program_of(&[&total]);
            let text = before_after(&p, &|p| super::run(p, &mut Vec::new()));
            assert_eq!(text.matches(", masked").count(), 1, "{text}");
            insta::assert_snapshot!("zone_masks_summed_zone", text);
            let read = program_of(&[&total, &kept]);
            assert_eq!(super::run(&read, &mut Vec::new()), None);
        });
    }
}
