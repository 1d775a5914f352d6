//! Which parameters a sync's program aliases to its results (the old value
//! of a tensor the step updates, aliased to its new value) and which of
//! those it donates: the ones nothing can read once the program starts
//! (DESIGN.md "Donated buffers").
//!
//! The proof is by reference counts, taken under the sync lock before the
//! program is keyed. Every reference to a node of the traced graph is
//! either accounted for inside the sync (an operand edge from another
//! node of the graph, a root held by a tensor this sync rebinds, the
//! value a rebound tensor had before its `assign`), or comes from outside
//! (a tensor or size the user still holds, a kept gradient history, a
//! captured step's recording, another thread's pending graph). A node held
//! from outside may be computed again later, and so may everything it
//! reads; a parameter that nothing held from outside reads, whose device
//! data no other node or handle shares, is read by this program alone.
//!
//! - **How it is expressed.** The main function's argument carries
//!   `tf.aliasing_output = k : i32` (the result's position among the
//!   function's results, what JAX's `donate_argnums` emits), and an
//!   execution donates an aliased argument unless it is listed in
//!   `PJRT_ExecuteOptions.non_donatable_input_indices` (the FFI lists
//!   every argument it is not asked to donate). Measured on both CPU
//!   plugins (`tests/pjrt_ffi.rs`): the result has the donated argument's
//!   address, and the argument is deleted (reading it is PJRT's "Buffer
//!   has been deleted or donated" error); an aliased argument that is not
//!   donated keeps its value and the result gets fresh memory (XLA's copy
//!   protection).
//! - **What is aliased** depends on the graph alone, so every step of one
//!   structure has the same pairs and compiles once, donating or not:
//!   - *updates*: a tensor rebound to result `j` was `assign`ed over the
//!     data leaf that is parameter `k`, both static with one dtype and
//!     shape;
//!   - *extensions*: result `j` is (through size checks) a `cat` along a
//!     dynamic dim whose first part is parameter `k`, whose buffer has the
//!     shape of result `j`'s and room for every part at its bound
//!     (bucketed bounds give a cache that grows a
//!     step one buffer per bucket). The lowering appends the later parts
//!     in that buffer (`lower/backing.rs`); donated, XLA writes them in
//!     place and the step never copies the cache.
//!
//!   Pending work computed in the same program may read the old value
//!   (XLA orders the read first).
//! - **Captured steps.** The recording's sync aliases as a lazy step does;
//!   the variant notes each aliased parameter that is the old value of a
//!   tensor it assigns (`Variant::donations`). A replay donates one when
//!   the tensor's node and data are held by the tensor alone
//!   (`Tensor::holds_alone`, the test its in-place result binding makes).
//!   Replicated steps (`DataParallel`) donate the same argument positions
//!   on every replica.
//! - **Sharded steps.** An aliased result of an SPMD program carries its
//!   parameter's sharding (the lowering writes it), so each device's
//!   piece of the update lands in its piece of the old value. The sync
//!   computes an update through a constraint to its old placement
//!   (`runtime::sync`), which the tensors do not hold: for such a
//!   *pinned* root they are counted on the constraint's operand.
//! - **When not.** A program with run-time size checks aliases no update
//!   and donates no `assign`ed old value: a failed check gives the
//!   assigned tensors their old values back, which needs the old buffers
//!   (choosing this over `select(checks_ok, new, old)` per result keeps
//!   the lowering as it is; such steps keep their old memory cost). An
//!   extension's parameter that nothing holds is never given back, so it
//!   is donated with checks too (a decode step's cache is capped by a
//!   checked `with_bound`). The reference backend (`Backend::donates` is
//!   false) and `LAZYXLA_PJRT_DONATE=0` (for comparisons) alias nothing.
//! - **After the start.** A donated parameter's device data is marked
//!   (`DeviceData::mark_donated`): any later use is an error, never a read
//!   of a deleted buffer. Such a use can only come from another thread
//!   recording on the tensor while it syncs, which the proof cannot see. A
//!   failed compile donates nothing; a program that fails while running
//!   leaves the donated tensors holding its error. A buffer over lent host
//!   memory may be donated: only its lender holds that memory, and the
//!   lender lives until the plugin is done with it.
//!
//! Counted by `DonatedBuffer`.

use super::device_data::DeviceData;
use crate::ir::{Node, Op};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Who, besides the graph itself, holds a sync's roots and old values:
/// what the tensor layer tells the runtime about the tensors it rebinds.
pub(crate) struct Holders<'a> {
    /// Per root, in order: how many distinct tensors hold it as their
    /// value; this sync rebinds each of them to the root's result.
    pub tensors: Vec<usize>,
    /// `(root, old)`: a tensor rebound to root `root` was `assign`ed since
    /// it last held the data leaf `old`. The tensor's own slot holds one
    /// reference to `old`, this list another.
    pub updates: Vec<(usize, Arc<Node>)>,
    /// Per root (empty: none): whether the sync computes it through a
    /// placement constraint it added (an SPMD update keeps its value's
    /// sharding, `runtime::sync`), so its tensors hold the constraint's
    /// operand and the sync's own list holds the constraint.
    pub pinned: Vec<bool>,
    /// How many roots are the gradient of a tensor being synced
    /// (`Tensor::grad`): results of the program only because they are
    /// still alive at the sync (README, "Memory"); in the compile log.
    /// Asked only when the program compiles: it reads every synced
    /// tensor's gradient slot.
    pub gradients: Box<dyn Fn() -> usize + 'a>,
}

/// What a sync's program donates.
#[derive(Default)]
pub(super) struct Choice {
    /// The program's `(parameter, output)` pairs (`Program::aliases`), by
    /// position in `params` and among the roots: each update whose old
    /// value is a parameter of the program with its root's dtype and
    /// static shape. They depend on the graph alone, so every step of one
    /// structure has the same pairs and compiles once.
    pub aliases: Vec<(usize, usize)>,
    /// The parameters among those this execution donates (sorted): each
    /// read by nothing held from outside the sync, its data in no other
    /// node or handle. An aliased parameter left out keeps its buffer: XLA
    /// then copies it into a fresh result buffer and runs as if that copy
    /// had been donated (its documented copy protection; measured on both
    /// CPU plugins in `tests/pjrt_ffi.rs`).
    pub donate: smallvec::SmallVec<[usize; 4]>,
}

/// The traced graph a sync's program is made from (see `canonical`).
pub(super) struct Graph<'a> {
    pub order: &'a [&'a Arc<Node>],
    pub index: &'a FxHashMap<*const Node, usize>,
    /// The parameters, by node position, and their data.
    pub params: &'a [usize],
    pub params_data: &'a [Arc<DeviceData>],
    /// The shape of the buffer each root is written into.
    pub out_buffers: &'a [Vec<usize>],
    /// The program makes run-time size checks.
    pub checked: bool,
}

/// Chooses what a sync's program aliases and donates (see [`Choice`]).
pub(super) fn choose(g: &Graph, roots: &[Arc<Node>], holders: &Holders) -> Choice {
    let (order, index, params, params_data) = (g.order, g.index, g.params, g.params_data);
    let mut pairs: Vec<(usize, usize, usize)> = Vec::new();
    // Every lookup below is by position, never a scan: a step with
    // thousands of parameters and updates chooses in linear time.
    // `params` lists node positions in ascending order (the trace pushes
    // them as it walks the order), so a binary search finds a parameter.
    let param_of = |n: &Arc<Node>| {
        let &i = index.get(&Arc::as_ptr(n))?;
        params.binary_search(&i).ok().map(|k| (k, i))
    };
    // A pair takes its parameter and its root once.
    let mut taken_param = vec![false; params.len()];
    let mut taken_root = vec![false; roots.len()];
    // A failed check gives assigned tensors their old values back: a
    // checked program aliases no update, and never donates an old value.
    let mut old_param = vec![false; params.len()];
    for (_, old) in &holders.updates {
        if let Some((k, _)) = param_of(old) {
            old_param[k] = true;
        }
    }
    for (j, old) in holders.updates.iter().filter(|_| !g.checked) {
        let (Some((k, i)), Some(root)) = (param_of(old), roots.get(*j)) else {
            continue;
        };
        let is_static = old.shape.iter().all(|e| e.as_const().is_some());
        let taken = taken_param[k] || taken_root[*j];
        if is_static && !taken && root.dtype == old.dtype && root.shape == old.shape {
            pairs.push((k, *j, i));
            (taken_param[k], taken_root[*j]) = (true, true);
        }
    }
    for (j, root) in roots.iter().enumerate() {
        let Some((first, dim, need)) = extended(root) else {
            continue;
        };
        let Some((k, i)) = param_of(first) else {
            continue;
        };
        let taken = taken_param[k] || taken_root[j];
        let buffer = params_data[k].bounds();
        let same_buffer = g.out_buffers.get(j).map(|b| &b[..]) == Some(buffer);
        // Room for every part at its bound: the lowering appends in place
        // (else aliasing would only make XLA copy the parameter).
        let room = buffer.get(dim).is_some_and(|&b| b as i64 >= need);
        if !taken && !old_param[k] && same_buffer && room && root.dtype == order[i].dtype {
            pairs.push((k, j, i));
            (taken_param[k], taken_root[j]) = (true, true);
        }
    }
    pairs.sort_unstable();
    let aliases = pairs.iter().map(|&(k, j, _)| (k, j)).collect();
    if pairs.is_empty() || holders.tensors.len() != roots.len() {
        return Choice {
            aliases,
            donate: Default::default(),
        };
    }
    let outside = held_from_outside(order, index, roots, holders);
    let donate = pairs
        .iter()
        .filter(|&&(k, _, i)| {
            // One reference from its node, one from `params_data`: so no
            // other node or handle holds the data, and no other parameter
            // (its node and its entry would count two more).
            outside.as_ref().is_some_and(|o| !o[i]) && Arc::strong_count(&params_data[k]) == 2
        })
        .map(|&(k, _, _)| k)
        .collect();
    Choice { aliases, donate }
}

/// The value `root` extends in its buffer: `root` is, through size
/// checks, a `cat` along a dynamic dim whose first part is that value (a
/// cache that grows a step: the lowering appends in place, `lower/backing.rs`).
/// With the dim and the parts' bounds along it, summed.
fn extended(root: &Arc<Node>) -> Option<(&Arc<Node>, usize, i64)> {
    let mut n = root;
    while let Op::Guard { .. } = n.op {
        n = n.inputs.first()?;
    }
    match n.op {
        Op::Concat { dim } => {
            let first = n.inputs.first()?;
            let need = n
                .inputs
                .iter()
                .map(|p| p.shape.get(dim).map_or(0, |e| e.hi()))
                .sum();
            first
                .shape
                .get(dim)?
                .as_const()
                .is_none()
                .then_some((first, dim, need))
        }
        _ => None,
    }
}

/// Per node of the graph: true when something outside the sync may read
/// it after the program (see the module docs); `None` when a root is not
/// in the graph.
fn held_from_outside(
    order: &[&Arc<Node>],
    index: &FxHashMap<*const Node, usize>,
    roots: &[Arc<Node>],
    holders: &Holders,
) -> Option<Vec<bool>> {
    // References the sync accounts for, per node of the graph.
    let mut inside = vec![0usize; order.len()];
    for n in order {
        for d in edges(n) {
            if let Some(&i) = index.get(&d) {
                inside[i] += 1;
            }
        }
    }
    let mut outside = vec![false; order.len()];
    for (j, (r, &tensors)) in roots.iter().zip(&holders.tensors).enumerate() {
        let &i = index.get(&Arc::as_ptr(r))?;
        // The sync's list of roots, and the tensors it rebinds.
        let held = match holders.pinned.get(j).copied().unwrap_or(false) {
            true => {
                inside[i] += 1;
                let operand = r.inputs.first()?;
                index.get(&Arc::as_ptr(operand)).copied()?
            }
            false => i,
        };
        inside[held] += 1 + tensors;
        // Its result keeps it as a gradient history (`Node::with_grad_history`).
        outside[held] |= order[held].keeps_history_after_sync();
    }
    for (_, old) in &holders.updates {
        if let Some(&i) = index.get(&Arc::as_ptr(old)) {
            inside[i] += 2;
        }
    }
    for (i, n) in order.iter().enumerate() {
        // Fewer references than counted would be a miscount: not proven.
        outside[i] |= Arc::strong_count(n) != inside[i];
    }
    // What a node held from outside reads may be computed again.
    for i in (0..order.len()).rev() {
        if outside[i] {
            for d in edges(order[i]) {
                if let Some(&k) = index.get(&d) {
                    outside[k] = true;
                }
            }
        }
    }
    Some(outside)
}

/// The nodes `n` holds: operands, size dependencies, gradient history.
fn edges(n: &Node) -> impl Iterator<Item = *const Node> + '_ {
    n.inputs
        .iter()
        .chain(&n.size_deps)
        .chain(n.grad_history.iter())
        .map(Arc::as_ptr)
}

#[cfg(test)]
mod tests {
    use super::Holders;
    use crate::runtime::canonical::trace_unkeyed;
    use crate::{Device, Tensor};

    /// Traces `w`'s pending update as a sync of `w` alone would, and
    /// returns the program's aliases, the donated parameters and its
    /// StableHLO text.
    fn choose_for(w: &Tensor) -> (Vec<(usize, usize)>, Vec<usize>, String) {
        let roots = vec![w.node()];
        let holders = Holders {
            tensors: vec![1],
            updates: vec![(0, w.assigned_from().expect("assigned"))],
            pinned: Vec::new(),
            gradients: Box::new(|| 0),
        };
        let mut traced = trace_unkeyed(&roots, &[], &[]).unwrap();
        traced.donate(&roots, &holders);
        let text = crate::backend::pjrt::lower_text(&traced.program()).unwrap();
        (traced.aliases.clone(), traced.donated.to_vec(), text)
    }

    #[test]
    fn an_update_aliases_its_old_value_and_donates_it_when_unshared() {
        Device::reference().scoped(|| {
            let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
            w.assign(&(&w * 2.0));
            let (aliases, donated, text) = choose_for(&w);
            assert_eq!(aliases, vec![(0, 0)]);
            assert_eq!(donated, vec![0]);
            assert!(
                text.contains("%arg0: tensor<2xf32> {tf.aliasing_output = 0 : i32}"),
                "{text}"
            );
        });
    }

    #[test]
    fn a_held_old_value_is_aliased_but_not_donated() {
        Device::reference().scoped(|| {
            let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
            let old = w.detach();
            w.assign(&(&w * 2.0));
            let (aliases, donated, _) = choose_for(&w);
            assert_eq!(aliases, vec![(0, 0)], "the program is the same");
            assert!(donated.is_empty());
            drop(old);
            let (_, donated, _) = choose_for(&w);
            assert_eq!(donated, vec![0], "released: donated");
        });
    }
}
