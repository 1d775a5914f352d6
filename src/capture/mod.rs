//! Captured steps: a step function recorded once and replayed.
//!
//! A lazy step records every op again each time it runs, then traces and
//! keys the graph to find its compiled program. For a small program that
//! host work costs more than the program (a few hundred nodes take about
//! 100 µs to record and trace; `benches/README.md`). A captured step
//! records the function once, keeps the program and where each of its
//! parameters and results lives (an input, a tensor that existed before
//! the step, a gradient, a constant), and from then on only runs the
//! program and rebinds the results: the same idea as `jax.jit` or a CUDA
//! graph, with lazyxla's lazy semantics for everything else.
//!
//! Invariant: a replay has exactly the effect that running the function
//! eagerly and then `mark_step()` would have, as long as the function's
//! host-side behaviour depends only on what the guards check: the inputs'
//! dtypes, static sizes and bounds, and the dtypes, shapes and gradient
//! presence of the tensors it reads and writes. Anything else is recorded
//! as a constant (see [`CapturedStep`]).
//!
//! - **Recording** (`record.rs`): run the function between two syncs; it
//!   must compute and read nothing (a read would split the step into two
//!   programs: an error says to read after `run`). What it left pending is
//!   returned tensors, tensors that existed before (parameters, moments,
//!   the Dropout seed) and their gradients; anything else escaped the step
//!   and is an error. Each parameter is traced to where a replay finds it:
//!   input `k`, the value or gradient of a tensor that existed before, or a
//!   constant. A computed size becomes a new variable per replay (a caller
//!   may still hold the last one's).
//! - **Replay** (`replay.rs`): check that the state fits, gather the
//!   parameters, start the program, rebind state and gradients, return the
//!   results; nothing is recorded, traced or hashed. A result that exactly
//!   one tensor receives moves *in place* into that tensor's data leaf when
//!   `Arc::get_mut` proves nothing else shares it; a value someone still
//!   holds keeps what it was, as in eager code. The hooks for this
//!   (`tensor/replay_hooks.rs`) serve `capture` alone (`tests/layers.rs`).
//! - **Variants**: keyed by the inputs' dtypes, static sizes, bounds,
//!   shared size variables and aliasing. A replay also needs every tensor
//!   it reads to exist with its recorded dtype and shape, and every
//!   gradient it writes present or absent as when recorded; otherwise the
//!   step is recorded again (at most 16 variants, or `max_graphs(n)`). So a
//!   loop that clears gradients first records twice.
//! - **Semantics** (JAX's rules): host data and plain numbers inside the
//!   step are constants of the recording; what changes belongs in an input
//!   or in a tensor that exists before the first call. Inputs are
//!   read-only. Errors before a replay's start leave every tensor as it
//!   was.

mod record;
mod replay;

use crate::backend::ExecutableRef;
use crate::device::Device;
use crate::dtype::DType;
use crate::ir::leaf::LeafData;
use crate::ir::Node;
use crate::runtime::device_data::{Bounds, DeviceData};
use crate::tensor::{Tensor, TensorInner};
use crate::Result;
use smallvec::SmallVec;
use std::sync::{Arc, Weak};

/// True while a captured step is being recorded on this thread, for code
/// whose eager form would make a constant of the recording (Dropout's
/// per-call seed).
pub(crate) fn is_recording() -> bool {
    crate::tensor::capture_mode::capture_recording()
}

/// Runs `f` with [`is_recording`] true (reset even if `f` panics).
fn recording<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            crate::tensor::capture_mode::set_capture_recording(self.0);
        }
    }
    let _reset = Reset(crate::tensor::capture_mode::set_capture_recording(true));
    f()
}

/// How many variants (input signatures and state layouts) a step keeps;
/// the oldest is dropped beyond that.
const MAX_VARIANTS: usize = 16;

/// Records `step` once and replays its compiled program on later calls.
///
/// `step` receives the inputs of a call and returns the tensors it wants
/// back. The first call with a given input signature runs `step` lazily,
/// as eager code would run, computes everything it left pending in one
/// program, and remembers that program. Later calls with the same
/// signature do not run `step`: they run the program on the new inputs
/// and give every tensor the step wrote (optimizer updates, gradients)
/// its new value, exactly as `step` followed by `mark_step()` would.
///
/// The rules, as for `jax.jit`:
/// - Everything that changes between calls must be an input or a tensor
///   that exists before the first call (model parameters, optimizer
///   state). Tensors `step` creates from host data (`from_vec`, `scalar`)
///   and plain numbers (`x * 0.5`) are constants of the recording.
/// - `step` must not read values (`item`, `to_vec`, a size's
///   `materialize`) or call `mark_step`: the capture fails with an error
///   saying so. Read the returned tensors after `run` instead.
/// - A tensor `step` creates and keeps alive after it returns must be
///   returned or be a gradient; anything else is an error (it would not
///   be updated by replays).
/// - A new input signature (dtype, static sizes, bounds, which dynamic
///   dimensions are declared equal) or a change in the tensors it reads
///   (shape, dtype, whether a gradient exists) records `step` again; the
///   compile cache still compiles each program structure once. A training
///   loop that clears gradients at the start of its step is recorded
///   twice: on the first call no gradient exists yet, on the second one
///   does.
///
/// A replay writes the results into the tensors it updates in place, and
/// into the tensors it returned last time if the caller has dropped
/// them, so a loop that reads its outputs and lets them go allocates no
/// tensors. The step keeps the tensors its last call returned until its
/// next call (or until it is dropped), and so their device memory.
///
/// ```
/// use lazyxla::{capture, Tensor};
/// let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
/// let mut step = capture(|inputs: &[Tensor]| {
///     w.assign(&(&w + &inputs[0])); // state updated in place
///     vec![w.sum()]
/// });
/// for k in 0..3 {
///     let x = Tensor::from_vec(vec![k as f32; 2], &[2]).unwrap();
///     let out = step.run(&[x]).unwrap();
///     println!("{}", out[0].item::<f32>().unwrap());
/// }
/// assert_eq!(w.to_vec::<f32>().unwrap(), vec![4.0, 5.0]);
/// assert_eq!(step.recordings(), 1);
/// ```
pub struct CapturedStep<F> {
    step: F,
    variants: Vec<Variant>,
    recordings: usize,
    /// The most recordings allowed (`None`: no limit).
    max_graphs: Option<usize>,
}

impl<F> std::fmt::Debug for CapturedStep<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedStep")
            .field("recordings", &self.recordings)
            .field("variants", &self.variants.len())
            .field("max_graphs", &self.max_graphs)
            .finish_non_exhaustive()
    }
}

/// Wraps `step` into a [`CapturedStep`]: recorded on its first call,
/// replayed afterwards.
///
/// ```
/// use lazyxla::{capture, Tensor};
/// let mut double = capture(|x: &[Tensor]| vec![&x[0] * 2]);
/// let y = double.run(&[Tensor::from_vec(vec![1.0f32], &[1]).unwrap()]).unwrap();
/// assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![2.0]);
/// ```
pub fn capture<F>(step: F) -> CapturedStep<F>
where
    F: FnMut(&[Tensor]) -> Vec<Tensor>,
{
    CapturedStep {
        step,
        variants: Vec::new(),
        recordings: 0,
        max_graphs: None,
    }
}

impl<F> CapturedStep<F>
where
    F: FnMut(&[Tensor]) -> Vec<Tensor>,
{
    /// Limits the step to `n` distinct graphs (PyTorch/XLA's
    /// `max_different_graphs`): a call that would record another one
    /// returns [`Error::GraphLimit`](crate::Error::GraphLimit) without
    /// running the step function (pending inputs are computed, as for any
    /// call), so every tensor keeps its value and the graphs already
    /// recorded keep replaying. Each recording counts (see
    /// [`recordings`](CapturedStep::recordings)). Without it there is no
    /// limit.
    ///
    /// ```
    /// use lazyxla::{capture, Error, Tensor};
    /// let mut step = capture(|x: &[Tensor]| vec![&x[0] * 2.0]).max_graphs(1);
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// step.run(&[a.clone()]).unwrap();
    /// let b = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap(); // a new shape
    /// assert!(matches!(step.run(&[b]), Err(Error::GraphLimit { limit: 1 })));
    /// assert_eq!(step.run(&[a]).unwrap()[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    /// ```
    pub fn max_graphs(mut self, n: usize) -> Self {
        self.max_graphs = Some(n);
        self
    }

    /// Runs the step on `inputs` and returns what it returns. Its work is
    /// started on the device (as after `mark_step`); reading a result
    /// waits for it.
    ///
    /// Errors: the capture rules above, the
    /// [`max_graphs`](CapturedStep::max_graphs) limit, and the errors of
    /// `mark_step`. On an error every live tensor keeps a valid value.
    ///
    /// ```
    /// use lazyxla::{capture, Tensor};
    /// let mut add_one = capture(|x: &[Tensor]| vec![&x[0] + 1]);
    /// for k in 0..3 {
    ///     let x = Tensor::from_vec(vec![k as f32], &[1]).unwrap();
    ///     assert_eq!(add_one.run(&[x]).unwrap()[0].item::<f32>().unwrap(), k as f32 + 1.0);
    /// }
    /// assert_eq!(add_one.recordings(), 1);
    /// ```
    #[track_caller]
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        crate::tensor::at_site("capture", || self.run_at_site(inputs))
    }

    fn run_at_site(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut nodes: Vec<Arc<Node>> = inputs.iter().map(Tensor::node).collect();
        if nodes.iter().any(|n| n.leaf_data().is_none()) {
            crate::tensor::sync::sync_tensors(inputs)?;
        }
        // Inputs get their buckets' bounds before the signature is taken,
        // not while the step records (`set_size_buckets`).
        for t in inputs {
            t.apply_buckets();
        }
        nodes = inputs.iter().map(Tensor::node).collect();
        let signature = Signature::of(inputs, &nodes)?;
        // Only the variant that runs keeps its returned tensors: a step
        // called with many signatures holds one call's outputs, not one per
        // signature.
        let mut replayed = None;
        for v in &mut self.variants {
            if replayed.is_some() || v.signature != signature {
                v.kept = Kept::default();
                continue;
            }
            let mut kept = std::mem::take(&mut v.kept);
            replayed = replay::replay(v, &mut kept, inputs, &nodes)?;
            if replayed.is_some() {
                v.kept = kept;
            }
        }
        if let Some(out) = replayed {
            return Ok(out);
        }
        if let Some(limit) = self.max_graphs.filter(|&n| self.recordings >= n) {
            return Err(crate::Error::GraphLimit { limit });
        }
        if let Some(why) = self.why_record(&signature) {
            crate::runtime::diagnose::recapture(why);
        }
        self.variants.retain(|v| !v.is_stale());
        let recorded = record::record(&mut self.step, inputs, signature);
        crate::runtime::diagnose::recapture_done();
        let (variant, out) = recorded?;
        self.recordings += 1;
        if self.variants.len() == MAX_VARIANTS {
            self.variants.remove(0);
        }
        self.variants.push(variant);
        Ok(out)
    }

    /// Why a call with `signature` records the step again (`None` for
    /// the first recording), for the compile log.
    fn why_record(&self, signature: &Signature) -> Option<String> {
        let last = self.variants.last()?;
        if self.variants.iter().any(|v| v.signature == *signature) {
            return Some(
                "a tensor the step reads changed since it was recorded (its shape or dtype, \
                 or whether it has a gradient)"
                    .into(),
            );
        }
        Some(signature.change_from(&last.signature))
    }

    /// How many times the step function ran to be recorded (each new
    /// input signature or state layout records it once).
    ///
    /// ```
    /// use lazyxla::{capture, Tensor};
    /// let mut neg = capture(|x: &[Tensor]| vec![x[0].neg()]);
    /// neg.run(&[Tensor::from_vec(vec![1.0f32], &[1]).unwrap()]).unwrap();
    /// neg.run(&[Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap()]).unwrap(); // a new shape
    /// assert_eq!(neg.recordings(), 2);
    /// ```
    pub fn recordings(&self) -> usize {
        self.recordings
    }
}

/// What a variant is recorded for: the inputs' types, shapes and aliasing.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Signature {
    device: usize,
    inputs: Vec<InputSig>,
}

#[derive(Clone, Debug, PartialEq)]
struct InputSig {
    dtype: DType,
    dims: SmallVec<[DimSig; 4]>,
    /// The first input holding the same data (itself when none before).
    alias: usize,
}

/// One dimension of an input: its size, or its bound and the group of
/// dynamic dimensions declared to have the same size.
#[derive(Clone, Copy, Debug, PartialEq)]
enum DimSig {
    Static(i64),
    /// A dynamic dim: its bound, its group of inputs sharing one size,
    /// and the length of its buffer (longer than the bound with bucketed
    /// bounds, `runtime::buckets`).
    Dynamic {
        bound: i64,
        group: usize,
        buffer: usize,
    },
}

impl Signature {
    /// What differs from `before`, for a message: the first input whose
    /// dtype, sizes, bounds or aliasing changed.
    fn change_from(&self, before: &Signature) -> String {
        if self.inputs.len() != before.inputs.len() {
            return format!(
                "it is called with {} inputs, recorded with {}",
                self.inputs.len(),
                before.inputs.len()
            );
        }
        let describe = |i: &InputSig| {
            let dims: Vec<String> = i
                .dims
                .iter()
                .map(|d| match d {
                    DimSig::Static(n) => n.to_string(),
                    DimSig::Dynamic { bound, .. } => format!("<={bound}"),
                })
                .collect();
            format!("{}[{}]", i.dtype, dims.join(", "))
        };
        for (k, (a, b)) in self.inputs.iter().zip(&before.inputs).enumerate() {
            if a != b {
                let (now, was) = (describe(a), describe(b));
                if now == was {
                    return format!(
                        "input {k} ({now}) shares its data or sizes with other inputs differently"
                    );
                }
                return format!(
                    "input {k} is {now}, recorded for {was} (mark_dynamic the dims that vary)"
                );
            }
        }
        "it runs on another device".into()
    }

    /// The signature of computed inputs (`nodes` are their nodes).
    fn of(inputs: &[Tensor], nodes: &[Arc<Node>]) -> Result<Signature> {
        let Some(device) = inputs.first().map(Tensor::device) else {
            return Ok(Signature {
                device: Device::default_id(),
                inputs: Vec::new(),
            });
        };
        let mut groups: SmallVec<[u64; 4]> = SmallVec::new();
        let mut sigs = Vec::with_capacity(inputs.len());
        for (k, (t, n)) in inputs.iter().zip(nodes).enumerate() {
            if !t.device().same(device) {
                return Err(crate::Error::DeviceMismatch {
                    op: "capture",
                    lhs: device.name().to_string(),
                    rhs: t.device().name().to_string(),
                });
            }
            let buffers = crate::runtime::device_data::of(n).map(DeviceData::bounds);
            let dims = n
                .shape
                .iter()
                .enumerate()
                .map(|(d, e)| match e.as_const() {
                    Some(c) => DimSig::Static(c),
                    None => {
                        // A compound size gets a group of its own.
                        let id = e
                            .as_var()
                            .map_or(u64::MAX - groups.len() as u64, |v| v.0.id);
                        let group = groups.iter().position(|&g| g == id).unwrap_or_else(|| {
                            groups.push(id);
                            groups.len() - 1
                        });
                        DimSig::Dynamic {
                            bound: e.hi(),
                            group,
                            buffer: buffers.and_then(|b| b.get(d).copied()).unwrap_or(0),
                        }
                    }
                })
                .collect();
            let data = n.leaf_data().map(LeafData::ptr);
            let alias = nodes[..k]
                .iter()
                .position(|m| m.leaf_data().map(LeafData::ptr) == data)
                .unwrap_or(k);
            sigs.push(InputSig {
                dtype: n.dtype,
                dims,
                alias,
            });
        }
        Ok(Signature {
            device: device.id(),
            inputs: sigs,
        })
    }
}

/// One recording of the step: its program and where everything goes.
pub(super) struct Variant {
    signature: Signature,
    device: Device,
    /// `None` when the step computed nothing.
    program: Option<ExecutableRef>,
    /// True when the program makes size checks: a replay reads their
    /// status (its last output) before it binds anything, since results
    /// move into tensors in place and could not be given back.
    checked: bool,
    /// The program's parameters, in order.
    params: Vec<Param>,
    /// The size arguments of the program: (input, dimension).
    arg_sizes: Vec<(usize, usize)>,
    /// The program's results, in order.
    outputs: Vec<OutputTemplate>,
    /// Bounds `(lo, hi)` of the sizes each replay computes anew.
    fresh: Vec<(i64, i64)>,
    /// Tensors that existed before the step and that the step assigned:
    /// (tensor, result index).
    assigned: Vec<(Weak<TensorInner>, usize)>,
    /// Gradients the step set or cleared.
    grads: Vec<GradUpdate>,
    /// The parameters the program donates to its results
    /// (`Program::aliases`): each the value of a tensor in `assigned`
    /// whose new value is the result its parameter aliases. A replay
    /// donates those whose tensor alone holds them (`replay::donations`).
    /// Sorted, as `Program::aliases` is (`ExecArgs::donate` needs it).
    donations: Vec<usize>,
    /// What `run` returns.
    returned: Vec<Returned>,
    /// What the last replay left for the next one. Only the variant that
    /// ran last keeps anything.
    kept: Kept,
}

/// What a variant's last replay leaves for its next one.
#[derive(Default)]
struct Kept {
    /// Per returned value, the tensor the last replay returned there when
    /// its result may move in place: the next replay reuses it if the
    /// caller has dropped it. Keeping it holds its buffer until then; only
    /// the variant that ran last keeps any, so a step holds at most one
    /// call's returned values, as a caller holding them would.
    returned: Vec<Option<Tensor>>,
}

impl Variant {
    /// Sets [`OutputTemplate::in_place`] once every destination is known.
    fn mark_in_place(&mut self) {
        let mut uses = vec![0usize; self.outputs.len()];
        let assigned = self.assigned.iter().map(|&(_, i)| i);
        let grads = self.grads.iter().filter_map(|g| g.set);
        let returned = self.returned.iter().filter_map(|r| match r {
            Returned::Output(i) => Some(*i),
            _ => None,
        });
        for i in assigned.chain(grads).chain(returned) {
            uses[i] += 1;
        }
        for (o, u) in self.outputs.iter_mut().zip(uses) {
            o.in_place = u == 1;
        }
    }

    /// True when a tensor the program reads no longer exists.
    fn is_stale(&self) -> bool {
        self.params.iter().any(|p| match &p.source {
            ParamSource::State(w) | ParamSource::GradOf(w) => w.strong_count() == 0,
            ParamSource::Input(_) | ParamSource::Const(_) => false,
        })
    }
}

/// A program parameter: where its data comes from on a replay, and for a
/// tensor's current value, the type it must still have.
struct Param {
    source: ParamSource,
    guard: Option<StateGuard>,
}

#[derive(Clone)]
enum ParamSource {
    /// Input `k` of the call.
    Input(usize),
    /// The current value of a tensor that existed before the step.
    State(Weak<TensorInner>),
    /// The current gradient of such a tensor.
    GradOf(Weak<TensorInner>),
    /// Data the step created (a constant of the recording).
    Const(Arc<DeviceData>),
}

/// The dtype and, per dimension, (static size, bound) a state value had
/// when recorded.
#[derive(Clone)]
struct StateGuard {
    dtype: DType,
    dims: SmallVec<[(Option<i64>, i64); 4]>,
}

impl StateGuard {
    fn of(n: &Node) -> StateGuard {
        StateGuard {
            dtype: n.dtype,
            dims: n.shape.iter().map(|e| (e.as_const(), e.hi())).collect(),
        }
    }

    /// True when `n` has the recorded dtype and shape.
    fn admits(&self, n: &Node) -> bool {
        has_type(n, self.dtype, &self.dims, |e, &(c, hi)| {
            e.as_const() == c && e.hi() == hi
        })
    }
}

/// A gradient the step wrote: set to a result, or cleared (`set: None`).
/// `had_grad` is whether the tensor had a gradient when recorded.
struct GradUpdate {
    owner: Weak<TensorInner>,
    had_grad: bool,
    set: Option<usize>,
}

/// One value `run` returns.
enum Returned {
    /// Result `i` of the program.
    Output(usize),
    /// Input `k`, returned as it is.
    Input(usize),
    /// A tensor that existed before the step (returned as the same handle,
    /// which holds its updated value).
    Same(Tensor),
    /// A value the step created without computing it.
    Const(Arc<Node>),
}

/// A program result's dtype and how each dimension's size is named.
struct OutputTemplate {
    dtype: DType,
    dims: SmallVec<[DimTemplate; 4]>,
    /// Received by exactly one tensor: one that existed before the step
    /// (its new value), one gradient, or one value `run` returns. A replay
    /// may then move the result into that tensor's node and data in place
    /// (see `Tensor::write_result`).
    in_place: bool,
    /// Where the result's buffer is among the program's outputs; its sizes
    /// follow it (see `ExecOutputs`).
    at: usize,
    /// The static shape of the result's buffer (`DeviceData::bounds`).
    bounds: Bounds,
}

impl OutputTemplate {
    /// How many outputs the result takes: its buffer and one size per
    /// dynamic dimension.
    fn outputs(&self) -> usize {
        let dynamic = self
            .dims
            .iter()
            .filter(|d| !matches!(d, DimTemplate::Static(_)));
        1 + dynamic.count()
    }

    /// True when `n` has this result's dtype, rank and static sizes, and
    /// is dynamic where the result is: its node may take the result in
    /// place.
    fn fits(&self, n: &Node) -> bool {
        has_type(n, self.dtype, &self.dims, |e, d| match d {
            DimTemplate::Static(c) => e.as_const() == Some(*c),
            DimTemplate::Input { .. } | DimTemplate::Fresh(_) => e.as_const().is_none(),
        }) && crate::runtime::device_data::of(n).is_some_and(|d| d.bounds() == &self.bounds[..])
    }
}

/// True when `n` has `dtype` and one dimension per entry of `dims`, each
/// accepted by `dim_fits`.
fn has_type<T>(
    n: &Node,
    dtype: DType,
    dims: &[T],
    dim_fits: impl Fn(&crate::symint::SizeExpr, &T) -> bool,
) -> bool {
    n.dtype == dtype
        && n.shape.len() == dims.len()
        && n.shape.iter().zip(dims).all(|(e, d)| dim_fits(e, d))
}

enum DimTemplate {
    Static(i64),
    /// The size of dimension `dim` of input `input` (the same variable).
    Input {
        input: usize,
        dim: usize,
    },
    /// A size the program computes; `Fresh(i)` results share a variable.
    Fresh(usize),
}
