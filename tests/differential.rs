//! Differential testing of the XLA backend against the reference
//! interpreter: random programs of at least 6 ops, with dynamic ops
//! (`nonzero`, `masked_select`, `unique`, `mark_dynamic` inputs),
//! reductions over dynamic dims, elementwise ops inside dynamic zones,
//! `cat`, `index_select` with dynamic indices, `conv2d` over a (maybe
//! dynamic) batch, `sort`, `topk` and `scatter` (add and overwrite),
//! pooling and scans, `matmul` (a batch times a matrix on either side,
//! maybe dynamic), and the model ops (clamps and activations, `isinf`,
//! `logsumexp`/`var`/`std`/`prod`/`any`/`all`, rearrangements and masks,
//! `flatten_dims`, `select`, upsampling, `nll_loss` and
//! `binary_cross_entropy`, device loops and `scan`, with bodies drawn
//! too), and the vision ops (`box_iou`,
//! `roi_align`, `nms`, `batched_nms` on boxes from a pool operand, maybe
//! dynamic), are built once per device
//! and must give the same shapes and values (integers and bools exactly,
//! floats within 1e-5 relative).
//!
//! The backends legitimately differ by an ulp or a few: XLA's CPU tanh
//! saturates to exactly ±1 from |x| ≈ 7.9 where the reference (like
//! PyTorch) gives 0.99999994 for tanh(9), summation orders differ, and
//! sigmoid and exp are approximated differently. Float results absorb that
//! in the 1e-5 tolerance, but a decision taken on such a value does not:
//! `[9, 12].tanh().unique()` has 2 elements on the reference and 1 on PJRT.
//! Hence the rule: every value that decides a size, an index or a Bool in
//! a generated program is first snapped away from the points where
//! backends may legitimately differ by a few ulps. Comparisons use
//! thresholds offset by 0.3 ([`threshold`]); `unique`, `nonzero`,
//! `argmax` and the sorts (`sort`, `topk`, the permutations `scatter`
//! uses) on float operands see a snapped copy, `floor(x * 4 + 0.37)`
//! ([`snapped`]). Integer and bool operands are exact and used as they
//! are. Float chains are kept well-conditioned too, so that no ulp grows
//! past the tolerance: every `exp` drawn sees an argument of at most 5
//! (`exp(a)` multiplies the relative error of `a` by `a`: `exp(50.8)`
//! differed by 2.7e-5), and a loop body squares its carry's tanh, not the
//! carry (nine squares are a 512th power). A mismatch is therefore a bug,
//! never an ulp. `PROPTEST_CASES` sets
//! the number of cases (200 when unset); `scripts/fuzz.sh` runs 10,000.
//!
//! Without a PJRT plugin the test reports a skip (or fails under
//! `LAZYXLA_REQUIRE_PJRT=1`, see `common`).

mod common;
#[path = "differential/loop_steps.rs"]
mod loop_steps;
#[path = "differential/model_steps.rs"]
mod model_steps;
#[path = "differential/vision_steps.rs"]
mod vision_steps;

use lazyxla::{mark_step, DType, Device, Tensor};
use loop_steps::{looped, looped_body, scanned};
use model_steps::{losses, matmuls, pointwise, rearranged, stats, upsampled};
use proptest::prelude::*;
use vision_steps::vision;

/// One step of a random program; operands are picked from the pool of
/// tensors built so far by index (modulo the pool size).
#[derive(Clone, Debug)]
enum Step {
    Unary(u8, usize),
    Scalar(u8, usize, i8),
    Binary(u8, usize, usize),
    Nonzero(usize),
    MaskedSelect(usize, i8),
    Unique(usize),
    SumDim(usize, u8),
    MaxDim(usize, u8),
    ArgMax(usize, u8),
    Cat(usize, usize),
    IndexSelectDynamic(usize, usize),
    PadToBound(usize),
    Where(usize, usize),
    Softmax(usize),
    Conv2d(usize, u8),
    /// Operand, flags: dim (bit 0), descending (bit 1), indices rather
    /// than values (bit 2).
    Sort(usize, u8),
    /// Operand, k, flags as for `Sort` (bit 1: largest).
    TopK(usize, u8, u8),
    /// Base, source, flags: dim (bit 0), overwrite rather than add (bit
    /// 1), descending permutation (bit 2).
    Scatter(usize, usize, u8),
    /// Max, average or adaptive pooling over a 2-D view (a dynamic dim
    /// becomes the batch).
    Pool(usize, u8),
    /// `cumsum` (even kind) or `cumprod` along a dim, dynamic ones too.
    Scan(usize, u8, u8),
    /// A pointwise model op: clamps, activations, `log1p`, `expm1`,
    /// rounding, float classes (`isnan`, `isfinite`, `isinf`).
    Pointwise(usize, u8),
    /// `nll_loss` or `binary_cross_entropy` of the first operand against
    /// a target made from the second, each reduction
    /// (`model_steps::losses`).
    Loss(usize, usize, u8),
    /// `logsumexp`, `var`, `std` along a dim (dynamic ones too), `prod`,
    /// `any`, `all`.
    Stats(usize, u8, u8),
    /// `flip`, `roll`, `pad`, `repeat`, `tril`, `triu`, `masked_fill`, a
    /// piece of `split` or `chunk`, `flatten_dims`, `select`, `one_hot`;
    /// the number sets the dim, shift, offset, fill or index.
    Rearrange(usize, u8, i8),
    /// Nearest or bilinear upsampling of a 2-D view (a dynamic dim
    /// becomes the batch).
    Upsample(usize, u8),
    /// Operand, kind: `x . x^T`, `x^T . x`, a batch times `x`, `x^T`
    /// times a batch.
    MatMul(usize, u8),
    /// A collective on one device (one replica, see
    /// `tests/ops_collective.rs` for several): `all_reduce` by sum, mean,
    /// max or min, `all_gather`, `reduce_scatter`, plus `replica_id`; a
    /// dynamic operand is reduced or padded first.
    Collective(usize, u8),
    /// A vision op on boxes built from the operand's rows (`box_iou`
    /// against fixed boxes, `roi_align` of fixed features, `nms` and
    /// `batched_nms`); the number picks the op and its options.
    Vision(usize, u8),
    /// Operand, start, length: a clamped `slice` along dim 0 (dynamic
    /// ones too); odd lengths rejoin the rest with `cat`.
    Slice(usize, u8, u8),
    /// A whole zone inside the step (`zone`): operands, kind, threshold.
    /// Only its reduction joins the pool, so no position of the zone is
    /// observed and XLA lowers it masked; bit 3 of the kind also keeps
    /// the zone's selection, which packs it.
    Zone(usize, usize, u8, i8),
    /// A device loop over the operand: a static count, a data-dependent
    /// one, a shrinking or a growing dynamic carry.
    Loop(usize, u8),
    /// A `fori_loop` whose body is drawn: operand, whether the carry is a
    /// dynamic selection of it, and the body's ops (`loop_steps::body`).
    LoopBody(usize, bool, Vec<u8>),
    /// A `scan` over the operand's rows (a static count) or over its
    /// snapped-positive elements (a dynamic count, with `slice_sym`);
    /// the number picks the body (`loop_steps::scanned`).
    ScanLoop(usize, u8),
}

#[derive(Clone, Debug)]
struct Spec {
    rows: usize,
    cols: usize,
    /// Values of the first input (small integers and halves: exact sums).
    a: Vec<i8>,
    b: Vec<i8>,
    /// `Some(extra)`: the first input's dim 0 is `mark_dynamic` with bound
    /// `rows + extra`.
    dynamic_input: Option<usize>,
    steps: Vec<Step>,
}

fn step() -> impl Strategy<Value = Step> {
    let i = 0usize..64;
    prop_oneof![
        (0u8..6, i.clone()).prop_map(|(k, a)| Step::Unary(k, a)),
        (0u8..4, i.clone(), -3i8..4).prop_map(|(k, a, v)| Step::Scalar(k, a, v)),
        (0u8..5, i.clone(), i.clone()).prop_map(|(k, a, b)| Step::Binary(k, a, b)),
        i.clone().prop_map(Step::Nonzero),
        (i.clone(), -2i8..3).prop_map(|(a, t)| Step::MaskedSelect(a, t)),
        i.clone().prop_map(Step::Unique),
        (i.clone(), 0u8..2).prop_map(|(a, d)| Step::SumDim(a, d)),
        (i.clone(), 0u8..2).prop_map(|(a, d)| Step::MaxDim(a, d)),
        (i.clone(), 0u8..2).prop_map(|(a, d)| Step::ArgMax(a, d)),
        (i.clone(), i.clone()).prop_map(|(a, b)| Step::Cat(a, b)),
        (i.clone(), i.clone()).prop_map(|(a, b)| Step::IndexSelectDynamic(a, b)),
        i.clone().prop_map(Step::PadToBound),
        (i.clone(), i.clone()).prop_map(|(a, b)| Step::Where(a, b)),
        (i.clone(), 0u8..8).prop_map(|(a, k)| Step::Conv2d(a, k)),
        i.clone().prop_map(Step::Softmax),
        (i.clone(), 0u8..8).prop_map(|(a, f)| Step::Sort(a, f)),
        (i.clone(), 0u8..4, 0u8..8).prop_map(|(a, k, f)| Step::TopK(a, k, f)),
        (i.clone(), i.clone(), 0u8..8).prop_map(|(a, b, f)| Step::Scatter(a, b, f)),
        (i.clone(), 0u8..6).prop_map(|(a, k)| Step::Pool(a, k)),
        (i.clone(), 0u8..2, 0u8..3).prop_map(|(a, k, d)| Step::Scan(a, k, d)),
        (i.clone(), 0u8..13).prop_map(|(a, k)| Step::Pointwise(a, k)),
        (i.clone(), i.clone(), 0u8..9).prop_map(|(a, b, k)| Step::Loss(a, b, k)),
        (i.clone(), 0u8..12, 0u8..2).prop_map(|(a, k, d)| Step::Stats(a, k, d)),
        (i.clone(), 0u8..11, -3i8..4).prop_map(|(a, k, v)| Step::Rearrange(a, k, v)),
        (i.clone(), 0u8..4).prop_map(|(a, k)| Step::Upsample(a, k)),
        (i.clone(), 0u8..4).prop_map(|(a, k)| Step::MatMul(a, k)),
        (i.clone(), 0u8..8).prop_map(|(a, k)| Step::Collective(a, k)),
        (i.clone(), 0u8..12).prop_map(|(a, k)| Step::Vision(a, k)),
        (i.clone(), 0u8..4, 0u8..6).prop_map(|(a, s, l)| Step::Slice(a, s, l)),
        (i.clone(), i.clone(), 0u8..16, -2i8..3).prop_map(|(a, b, k, t)| Step::Zone(a, b, k, t)),
        (i.clone(), 0u8..8).prop_map(|(a, k)| Step::Loop(a, k)),
        (i.clone(), 0u8..6).prop_map(|(a, k)| Step::ScanLoop(a, k)),
        (i, any::<bool>(), proptest::collection::vec(0u8..12, 1..5))
            .prop_map(|(a, d, ops)| Step::LoopBody(a, d, ops)),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (1usize..5, 1usize..4).prop_flat_map(|(rows, cols)| {
        let n = rows * cols;
        (
            Just(rows),
            Just(cols),
            proptest::collection::vec(-4i8..5, n),
            proptest::collection::vec(-4i8..5, n),
            proptest::option::of(0usize..3),
            proptest::collection::vec(step(), 6..12),
        )
            .prop_map(|(rows, cols, a, b, dynamic_input, steps)| Spec {
                rows,
                cols,
                a,
                b,
                dynamic_input,
                steps,
            })
    })
}

/// The threshold a generated comparison uses for `v`: off by 0.3, so off
/// every value that exact arithmetic on the inputs (halves and small
/// integers) or a saturated transcendental (tanh at ±1, sigmoid at 0 or 1,
/// then scaled and shifted) produces. At those values XLA's approximations
/// and the reference's libm legitimately differ by an ulp (XLA's tanh is
/// exactly -1 at -8, libm's is -0.99999976), which would flip a comparison
/// that is checked exactly; float results are still checked within 1e-5.
/// `unique`, `nonzero` and `argmax` get the same protection from
/// [`snapped`].
fn threshold(v: f64) -> f64 {
    v + 0.3
}

/// The copy of `x` that a data-dependent op (`unique`, `nonzero`, `argmax`,
/// the sort keys) sees when `x` is float: `floor(x * 4 + 0.37)`. The odd offset keeps the
/// bucket boundaries (x = k/4 - 0.0925) off every value that exact
/// arithmetic on halves and small integers produces and off the saturated
/// values (0, ±1, sigmoid's 0 and 1), so an ulp of difference between the
/// backends cannot move a value to another bucket: values within an ulp of
/// 1 tie on both backends, values within an ulp of 0 are 0 on both. Huge
/// values overflow to ±inf in `x * 4` on both. Integer and bool tensors are
/// returned as they are (exact on both).
fn snapped(x: &Tensor) -> Tensor {
    if matches!(x.dtype(), DType::F32 | DType::F64) {
        x.mul_scalar(4.0).add_scalar(0.37).floor()
    } else {
        x.clone()
    }
}

/// Applies one step; `None` when the step does not apply to its operands
/// (the op panics with a misuse message, which leaves the runtime usable).
/// A zone from a mask of `x` to a reduction (`Step::Zone`): the
/// reduction, then with bit 3 of `k` the selection itself (a result, so
/// the zone is packed). Kinds: a masked sum, a masked max of a difference
/// of two selections by one mask, rows of `x` by `nonzero` contracted with
/// themselves (a product over the zone), a masked mean scattered back
/// through the mask (`masked_scatter`), and gradients of the first two
/// through the zone.
fn zone(x: &Tensor, y: &Tensor, k: u8, t: i8) -> Vec<Tensor> {
    let f = |t: &Tensor| {
        if t.dtype() == DType::F32 {
            t.clone()
        } else {
            t.to_dtype(DType::F32)
        }
    };
    let (x, y) = (f(x), f(y));
    let m = x.gt_scalar(threshold(t as f64));
    let (out, zone) = match k % 8 {
        0 => {
            let z = x.masked_select(&m);
            ((&z * 2.0 + 1.0).sum(), z)
        }
        1 => {
            // `y` must have `x`'s shape: a panic otherwise falls back.
            let (a, b) = (x.masked_select(&m), y.masked_select(&m));
            let d = &a - &b;
            ((&d * &a).abs().max(), d)
        }
        2 | 3 => {
            assert_eq!(x.rank(), 2, "rows of a matrix");
            let key = x.sum_dims(&[1], false);
            let idx = key.ge_scalar(threshold(t as f64)).nonzero().flatten();
            let rows = x.index_select(0, &idx);
            let h = (&rows * 0.5).tanh();
            let p = if k % 8 == 2 {
                h.transpose(0, 1).matmul(&rows)
            } else {
                h.sum_dims(&[0], false) + rows.mean_dims(&[0], false)
            };
            (p, rows)
        }
        4 => {
            let z = x.masked_select(&m);
            let back = x.zeros_like().masked_scatter(&m, &(&z * 3.0));
            (&back + &z.mean(), z)
        }
        _ => {
            // The gradient of a zone's loss, backward through the zone.
            let w = x.detach().requires_grad(true);
            let z = w.masked_select(&m);
            let loss = if k % 8 == 5 {
                (&z * &z).sum()
            } else {
                (&z.clamp_max(10.0) * 0.5).exp().mean()
            };
            loss.backward();
            (w.grad().expect("a gradient"), z.detach())
        }
    };
    if k & 8 != 0 {
        vec![out, zone]
    } else {
        vec![out]
    }
}

/// Applies one step, giving every tensor it adds to the pool.
fn apply_all(pool: &[Tensor], s: &Step) -> Option<Vec<Tensor>> {
    if let Step::Zone(a, b, k, t) = s {
        let pick = |i: &usize| pool[*i % pool.len()].clone();
        let (x, y) = (pick(a), pick(b));
        let (k, t) = (*k, *t);
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| zone(&x, &y, k, t))).ok();
    }
    apply_one(pool, s).map(|t| vec![t])
}

/// Applies one step that adds one tensor.
fn apply_one(pool: &[Tensor], s: &Step) -> Option<Tensor> {
    let pick = |i: &usize| pool[*i % pool.len()].clone();
    let float = |t: &Tensor| {
        if t.dtype() == DType::F32 {
            t.clone()
        } else {
            t.to_dtype(DType::F32)
        }
    };
    let s = s.clone();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &s {
        Step::Unary(k, a) => {
            let x = float(&pick(a));
            match k {
                0 => x.relu(),
                1 => -&x,
                2 => x.abs(),
                3 => x.tanh(),
                4 => x.sigmoid(),
                _ => (&x.clamp_max(20.0) * 0.25).exp(),
            }
        }
        Step::Scalar(k, a, v) => {
            let x = pick(a);
            let v = *v as f64;
            match k {
                0 => &x + v,
                1 => &x * v,
                2 => x.gt_scalar(threshold(v)),
                _ => &x - v,
            }
        }
        Step::Binary(k, a, b) => {
            let (x, y) = (float(&pick(a)), float(&pick(b)));
            match k {
                0 => &x + &y,
                1 => &x * &y,
                2 => x.maximum(&y),
                3 => x.minimum(&y),
                _ => &x - &y,
            }
        }
        Step::Nonzero(a) => snapped(&pick(a)).nonzero(),
        Step::MaskedSelect(a, t) => {
            let x = pick(a);
            let m = float(&x).gt_scalar(threshold(*t as f64));
            x.masked_select(&m)
        }
        Step::Unique(a) => {
            let x = pick(a);
            if x.dtype() == DType::Bool {
                x.to_dtype(DType::I64).unique()
            } else {
                snapped(&x).unique()
            }
        }
        Step::SumDim(a, d) => {
            let x = float(&pick(a));
            let d = *d as usize % x.rank().max(1);
            if x.rank() == 0 {
                x.sum()
            } else {
                x.sum_dims(&[d], false)
            }
        }
        Step::MaxDim(a, d) => {
            let x = float(&pick(a));
            if x.rank() == 0 {
                x.max()
            } else {
                x.max_dims(&[*d as usize % x.rank()], false)
            }
        }
        Step::ArgMax(a, d) => {
            let src = pick(a);
            let x = float(&src);
            if x.rank() == 0 || x.upper_bounds().contains(&0) {
                x.sum()
            } else {
                // A float operand is snapped; an integer or bool one is
                // exact, and so is its float copy.
                let key = if matches!(src.dtype(), DType::F32 | DType::F64) {
                    snapped(&x)
                } else {
                    x
                };
                key.argmax(*d as usize % key.rank())
            }
        }
        Step::Cat(a, b) => {
            let (x, y) = (float(&pick(a)), float(&pick(b)));
            Tensor::cat(&[&x, &y], 0)
        }
        Step::IndexSelectDynamic(a, b) => {
            // Indices from nonzero of a per-row key of `x`, so in range for
            // dim 0 of `x` by construction; `b` picks the key's sign.
            let x = pick(a);
            let fx = float(&x);
            let key = if x.rank() >= 2 {
                fx.sum_dims(&[1], false)
            } else {
                fx
            };
            let key = if b % 2 == 0 { key } else { -&key };
            let idx = key.ge_scalar(threshold(0.0)).nonzero().flatten();
            x.index_select(0, &idx)
        }
        Step::PadToBound(a) => pick(a).pad_to_bound(-1.0),
        Step::Slice(a, s, l) => {
            let x = pick(a);
            if x.rank() == 0 {
                return x;
            }
            let (s, l) = (*s as usize, *l as usize);
            let part = x.slice(0, s..s + l);
            if l % 2 == 0 {
                part
            } else {
                Tensor::cat(&[&part, &x.slice(0, s + l..)], 0)
            }
        }
        Step::Where(a, b) => {
            let (x, y) = (float(&pick(a)), float(&pick(b)));
            x.gt_scalar(threshold(0.0)).where_cond(&x, &y)
        }
        Step::Softmax(a) => {
            let x = float(&pick(a));
            if x.rank() == 0 {
                x.clamp_max(5.0).exp()
            } else {
                x.softmax(x.rank() - 1)
            }
        }
        Step::Conv2d(a, k) => {
            // `[rows, cols]` as a batch of one-channel `1 x cols` images
            // (a dynamic batch stays dynamic), two filters of width 1 or 2
            // (exact products), stride 1 or 2, padding 0 or 1; summed back
            // to `[rows, cols']`. A kernel that does not fit panics.
            let x = float(&pick(a));
            assert_eq!(x.rank(), 2, "2-d operands only");
            let kw = 1 + *k as usize % 2;
            let (stride, pad) = (1 + (*k as usize / 2) % 2, (*k as usize / 4) % 2);
            let w = Tensor::from_vec([0.5f32, -1.0, 0.25, 1.5][..2 * kw].to_vec(), &[2, 1, 1, kw])
                .unwrap();
            x.unsqueeze(1)
                .unsqueeze(1)
                .conv2d(&w, None, (1, stride), (0, pad), (1, 1), 1)
                .sum_dims(&[1, 2], false)
        }
        Step::MatMul(a, k) => matmuls(&float(&pick(a)), *k),
        Step::Vision(a, k) => vision(&pick(a), *k),
        Step::Loop(a, k) => looped(&float(&pick(a)), *k),
        Step::LoopBody(a, dynamic, ops) => looped_body(&float(&pick(a)), *dynamic, ops),
        Step::ScanLoop(a, k) => scanned(&float(&pick(a)), *k),
        Step::Sort(a, f) => {
            // Panics on a scalar (no dim), which falls back to a unary step.
            let x = pick(a);
            let d = (*f & 1) as usize % x.rank().max(1);
            let idx = snapped(&x).argsort(d, f & 2 != 0);
            if f & 4 != 0 {
                idx
            } else {
                x.gather(d, &idx)
            }
        }
        Step::TopK(a, k, f) => {
            // k above a dynamic dim's real size fails the step alike on
            // both backends (a size check); above its bound it panics.
            let x = pick(a);
            let d = (*f & 1) as usize % x.rank().max(1);
            let (_, idx) = snapped(&x).topk(*k as usize, d, f & 2 != 0);
            if f & 4 != 0 {
                idx
            } else {
                x.gather(d, &idx)
            }
        }
        Step::Scatter(a, b, f) => {
            // The index is a sorting permutation of the base's key along
            // the dim: in range, and without duplicates for an overwrite
            // (whose winner XLA leaves unspecified); an add folds it onto
            // {0, 1} to make duplicates.
            let base = float(&pick(a));
            let d = (*f & 1) as usize % base.rank().max(1);
            let perm = snapped(&base).argsort(d, f & 4 != 0);
            let other = float(&pick(b));
            let src = if !other.is_dynamic()
                && !base.is_dynamic()
                && other.upper_bounds() == base.upper_bounds()
            {
                other
            } else {
                &base * -2.0 + 1.0
            };
            if f & 2 != 0 {
                base.scatter(d, &perm, &src)
            } else {
                let folded = perm.lt_scalar(2.0).where_cond(&perm, &perm.zeros_like());
                base.scatter_add(d, &folded, &src)
            }
        }
        Step::Pool(a, k) => pooled(&float(&pick(a)), *k),
        Step::Pointwise(a, k) => pointwise(&float(&pick(a)), *k),
        Step::Loss(a, b, k) => losses(&float(&pick(a)), &float(&pick(b)), *k),
        Step::Stats(a, k, d) => stats(&float(&pick(a)), *k, *d),
        Step::Rearrange(a, k, v) => rearranged(&pick(a), *k, *v),
        Step::Upsample(a, k) => upsampled(&float(&pick(a)), *k),
        Step::Scan(a, k, d) => {
            let x = pick(a);
            let d = *d as usize % x.rank().max(1);
            if k % 2 == 0 {
                x.cumsum(d)
            } else {
                x.cumprod(d)
            }
        }
        Step::Zone(..) => unreachable!("apply_all builds zones"),
        Step::Collective(a, k) => collective(&float(&pick(a)), *k),
    }));
    r.ok()
}

/// A collective of `x` on one device: the identity, lowered as XLA's
/// collectives over one replica. A dynamic `x` is summed over its
/// dynamic dims (odd `k`) or padded (even `k`) first, as the collectives
/// require.
fn collective(x: &Tensor, k: u8) -> Tensor {
    use lazyxla::parallel::ReduceOp;
    let x = if !x.is_dynamic() {
        x.clone()
    } else if k % 2 == 1 {
        let dims: Vec<usize> = (0..x.rank()).filter(|&d| x.size(d).is_dynamic()).collect();
        x.sum_dims(&dims, true)
    } else {
        x.pad_to_bound(0.5)
    };
    match k {
        0 => x.all_reduce(ReduceOp::Sum),
        1 => x.all_reduce(ReduceOp::Mean),
        2 => x.all_reduce(ReduceOp::Max),
        3 => x.all_reduce(ReduceOp::Min),
        4 => x.all_gather(0),
        5 => x.reduce_scatter(x.rank().saturating_sub(1)),
        _ => &x + &Tensor::replica_id().to_dtype(DType::F32),
    }
}

/// Pooling over `x` seen as NCHW: a static 2-D `[r, c]` as one `r x c`
/// image, a dynamic one (dim 0) as a batch of `1 x c` images, 1-D alike;
/// the result is 2-D again (as every generated tensor). `k` picks max,
/// average or adaptive pooling and the padding.
fn pooled(x: &Tensor, k: u8) -> Tensor {
    let (x4, batch) = match (x.rank(), x.is_dynamic()) {
        (2, false) => (x.unsqueeze(0).unsqueeze(0), false),
        (2, true) => (x.unsqueeze(1).unsqueeze(1), true),
        (1, false) => (x.unsqueeze(0).unsqueeze(0).unsqueeze(0), false),
        (1, true) => (x.unsqueeze(1).unsqueeze(1).unsqueeze(1), true),
        _ => panic!("pooled: 1-D or 2-D operands only"),
    };
    let b = x4.upper_bounds();
    let (h, w) = (b[2], b[3]);
    let kernel = (h.clamp(1, 2), w.clamp(1, 3));
    let padding = if k >= 3 {
        (kernel.0 / 2, kernel.1 / 2)
    } else {
        (0, 0)
    };
    let y = match k % 3 {
        0 => x4.max_pool2d(kernel, (1, 2), padding),
        1 => x4.avg_pool2d(kernel, (2, 1), padding),
        _ => x4.adaptive_avg_pool2d((h.div_ceil(2).max(1), (w + 1).min(3))),
    };
    if batch {
        y.squeeze(1).squeeze(1)
    } else {
        y.squeeze(0).squeeze(0)
    }
}

/// Builds the program of `spec` on the current default device; returns
/// every tensor it made (all are outputs).
fn build(spec: &Spec) -> Vec<Tensor> {
    let a: Vec<f32> = spec.a.iter().map(|&v| v as f32 * 0.5).collect();
    let b: Vec<f32> = spec.b.iter().map(|&v| v as f32).collect();
    let mut x = Tensor::from_vec(a, &[spec.rows, spec.cols]).unwrap();
    if let Some(extra) = spec.dynamic_input {
        x = x.mark_dynamic(0, spec.rows + extra);
    }
    let y = Tensor::from_vec(b, &[spec.rows, spec.cols]).unwrap();
    let mut pool = vec![x, y];
    for s in &spec.steps {
        let t = apply_all(&pool, s)
            .or_else(|| apply_all(&pool, &Step::Unary(3, pool.len() - 1)))
            .expect("a unary op always applies");
        pool.extend(t);
    }
    pool
}

/// A tensor's shape, dtype and values (as f64).
type Evaluated = (Vec<usize>, DType, Vec<f64>);

/// Shape and values of every tensor, as f64; or the step's error, with
/// size variables' process-wide numbers removed (`s17` → `s`), when a size
/// check recorded by an op that combines two dynamic sizes fails.
fn evaluate(spec: &Spec) -> Result<Vec<Evaluated>, String> {
    let pool = quietly(|| build(spec));
    if let Err(e) = mark_step() {
        let text = e.to_string();
        let mut out = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            out.push(c);
            if c == 's' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                    chars.next();
                }
            }
        }
        return Err(out);
    }
    Ok(pool
        .iter()
        .map(|t| {
            let shape = t.concrete_shape().unwrap();
            let v: Vec<f64> = match t.dtype() {
                DType::F32 => t
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as f64)
                    .collect(),
                DType::F64 => t.to_vec::<f64>().unwrap(),
                DType::F16 => t
                    .to_vec::<half::f16>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_f64())
                    .collect(),
                DType::BF16 => t
                    .to_vec::<half::bf16>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_f64())
                    .collect(),
                DType::I32 => t
                    .to_vec::<i32>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as f64)
                    .collect(),
                DType::I64 => t
                    .to_vec::<i64>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as f64)
                    .collect(),
                DType::Bool => t
                    .to_vec::<bool>()
                    .unwrap()
                    .iter()
                    .map(|&x| x as u8 as f64)
                    .collect(),
                other => panic!("the differential test has no {other:?} tensors"),
            };
            (shape, t.dtype(), v)
        })
        .collect())
}

/// Runs `f` without printing the panics it catches (a generated step that
/// does not apply panics with a misuse message); a panic that escapes `f`
/// is printed as usual, since the hook is restored as it unwinds.
fn quietly<R>(f: impl FnOnce() -> R) -> R {
    type Hook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send>;
    struct Restore(Option<Hook>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(h) = self.0.take() {
                std::panic::set_hook(h);
            }
        }
    }
    let _restore = Restore(Some(std::panic::take_hook()));
    std::panic::set_hook(Box::new(|_| {}));
    f()
}

fn ops_in(spec: &Spec) -> String {
    // Another test's `mark_step` would compute the pending values first
    // (it is process-wide), leaving program inputs where ops should be.
    let _g = common::lock();
    ops_in_locked(spec)
}

/// [`ops_in`] for a caller that holds `common::lock()` already.
fn ops_in_locked(spec: &Spec) -> String {
    let pool = quietly(|| Device::reference().scoped(|| build(spec)));
    let refs: Vec<&Tensor> = pool.iter().collect();
    lazyxla::debug::ir_text(&refs)
}

/// How many cases the proptest runs: `PROPTEST_CASES` when set (the
/// fuzz script, `scripts/fuzz.sh`, sets 10,000), else 200 (CI).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(200)
}

/// Runs `spec` on the reference backend and on `pjrt` and compares every
/// tensor: shapes and dtypes exactly, integers and bools exactly, floats
/// within 1e-5 relative. Shared by the proptest and the regressions.
fn compare(spec: &Spec, pjrt: &Device) -> Result<(), TestCaseError> {
    compare_on(spec, &Device::reference(), pjrt)
}

/// [`compare`] of `got` against `want` (the reference, unless the
/// reference itself is under test).
fn compare_on(spec: &Spec, want: &Device, got: &Device) -> Result<(), TestCaseError> {
    let _g = common::lock();
    let want = want.scoped(|| evaluate(spec));
    let got = got.scoped(|| evaluate(spec));
    let (got, want) = match (got, want) {
        (Ok(g), Ok(w)) => (g, w),
        (g, w) => {
            // A failed size check fails the step on both backends alike.
            prop_assert_eq!(g.err(), w.err(), "\n{}", ops_in_locked(spec));
            return Ok(());
        }
    };
    prop_assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        prop_assert_eq!(&g.0, &w.0, "tensor {} shape\n{}", i, ops_in_locked(spec));
        prop_assert_eq!(g.1, w.1);
        for (k, (x, y)) in g.2.iter().zip(&w.2).enumerate() {
            let exact = !matches!(g.1, DType::F32 | DType::F64);
            let ok = if exact || x == y {
                x == y
            } else {
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()) || (x.is_nan() && y.is_nan())
            };
            prop_assert!(
                ok,
                "tensor {} element {}: pjrt {} reference {} ({:?} vs {:?})\n{}",
                i,
                k,
                x,
                y,
                g.2,
                w.2,
                ops_in_locked(spec)
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    #[test]
    fn pjrt_matches_the_reference(spec in spec()) {
        let Some(pjrt) = common::pjrt_device() else { return Ok(()) };
        compare(&spec, &pjrt)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    /// The XLA lowering's passes (`lazyxla::debug::lowered_ir_text`) keep
    /// every value: the reference backend gives the same results for the
    /// program before and after them. Needs no plugin.
    #[test]
    fn lowering_passes_keep_the_reference_values(spec in spec()) {
        compare_on(&spec, &Device::reference(), &lazyxla::debug::reference_after_passes())?;
    }
}

/// Runs one fixed program through the same comparison as the proptest.
fn check_fixed(spec: Spec) {
    let Some(pjrt) = common::pjrt_device() else {
        return;
    };
    if let Err(e) = compare(&spec, &pjrt) {
        panic!("{e}");
    }
}

/// A one-row input `a` (halved, see `build`) and `b`, with `steps`.
fn fixed(a: Vec<i8>, b: Vec<i8>, steps: Vec<Step>) -> Spec {
    Spec {
        rows: 1,
        cols: a.len(),
        a,
        b,
        dynamic_input: None,
        steps,
    }
}

/// `[9, 12].tanh().unique()`: XLA's tanh saturates both to exactly 1.0 (one
/// distinct value), the reference gives 0.99999994 for tanh(9) (two). It
/// mismatched in shape (`[1]` vs `[2]`) before `unique` saw a snapped copy;
/// now both see `[4, 4]` and keep one value.
#[test]
fn unique_after_saturated_tanh() {
    // Pool: 0 = [[9, 12]], 1 = [[0, 0]], 2 = tanh(0), 3 = unique(2).
    check_fixed(fixed(
        vec![18, 24],
        vec![0, 0],
        vec![Step::Unary(3, 0), Step::Unique(2)],
    ));
}

/// `[9, 12].tanh().argmax(1)`: tied at 1.0 on XLA (index 0), 0.99999994 <
/// 1.0 on the reference (index 1), before `argmax` saw a snapped copy; now
/// both see the tie `[4, 4]` and give the first index, 0.
#[test]
fn argmax_after_saturated_tanh() {
    // Pool: 0 = [[9, 12]], 1 = [[0, 0]], 2 = tanh(0), 3 = argmax(2, dim 1).
    check_fixed(fixed(
        vec![18, 24],
        vec![0, 0],
        vec![Step::Unary(3, 0), Step::ArgMax(2, 1)],
    ));
}

/// `(tanh(9) - tanh(12)).nonzero()`: exactly 0 on XLA (no coordinates),
/// -6e-8 on the reference (one), before `nonzero` saw a snapped copy; now
/// both see `floor(0.37 - 2.4e-7) = 0` and find no coordinates.
#[test]
fn nonzero_after_saturated_tanh_difference() {
    // Pool: 0 = [[9]], 1 = [[12]], 2 = tanh(0), 3 = tanh(1), 4 = 2 - 3,
    // 5 = nonzero(4).
    check_fixed(fixed(
        vec![18],
        vec![12],
        vec![
            Step::Unary(3, 0),
            Step::Unary(3, 1),
            Step::Binary(4, 2, 3),
            Step::Nonzero(4),
        ],
    ));
}

/// Found by the 10,000-case run: `index_select` along a dimension whose
/// bound is 0 (`unique` of the empty coordinates of a 0-d `nonzero`) was
/// lowered to a gather with slice size 1 over a size-0 operand, which XLA
/// refuses to compile.
#[test]
fn index_select_along_a_dimension_of_bound_zero() {
    check_fixed(Spec {
        rows: 3,
        cols: 2,
        a: vec![0; 6],
        b: vec![0; 6],
        dynamic_input: None,
        steps: vec![
            Step::MaskedSelect(0, 0),
            Step::SumDim(8, 0),
            Step::Nonzero(59),
            Step::Unary(0, 0),
            Step::Unique(40),
            Step::IndexSelectDynamic(6, 0),
        ],
    });
}

/// `conv2d` over a `mark_dynamic` batch and over the dynamic rows of a
/// `nonzero`: one compiled program per backend, same values.
#[test]
fn conv2d_over_dynamic_batches() {
    // Pool: 0 = x ([<=5, 3]), 1 = y, 2 = conv(0; width 1, stride 2, pad 1),
    // 3 = nonzero(1) ([<=9, 2]), 4 = conv(3; width 2), 5 = sum of 4 over 0.
    let spec = Spec {
        rows: 3,
        cols: 3,
        a: vec![1, -2, 3, 0, 4, -1, 2, 2, -3],
        b: vec![0, 1, 0, 2, 0, -1, 3, 0, 1],
        dynamic_input: Some(2),
        steps: vec![
            Step::Conv2d(0, 6),
            Step::Nonzero(1),
            Step::Conv2d(3, 1),
            Step::SumDim(4, 0),
        ],
    };
    let ir = ops_in(&spec);
    assert_eq!(ir.matches("= convolution").count(), 2, "{ir}");
    check_fixed(spec);
}

/// The four matmul steps on a `mark_dynamic` input and on a masked
/// selection (dynamic free and contracted dims): one dot each, never a
/// batched one, and both backends agree.
#[test]
fn matmuls_over_dynamic_dims() {
    // Pool: 0 = x ([<=5, 3]), 1 = y, 2..5 = matmuls of 0, 6 = masked
    // select of 1 ([<=9]), 7..10 = matmuls of 6.
    let spec = Spec {
        rows: 3,
        cols: 3,
        a: vec![1, -2, 3, 0, 4, -1, 2, 2, -3],
        b: vec![0, 1, 0, 2, 0, -1, 3, 0, 1],
        dynamic_input: Some(2),
        steps: vec![
            Step::MatMul(0, 0),
            Step::MatMul(0, 1),
            Step::MatMul(0, 2),
            Step::MatMul(0, 3),
            Step::MaskedSelect(1, 0),
            Step::MatMul(6, 0),
            Step::MatMul(6, 1),
            Step::MatMul(6, 2),
            Step::MatMul(6, 3),
        ],
    };
    let ir = ops_in(&spec);
    assert_eq!(ir.matches("= dot_general[batch=0 ").count(), 8, "{ir}");
    assert!(!ir.contains("= dot_general[batch=1"), "{ir}");
    check_fixed(spec);
}

/// The sorting and scatter steps on a `mark_dynamic` input and a masked
/// selection: each applies (the program holds `argsort`, `scatter` and
/// `scatter_add`) and both backends agree, ties and padding included.
#[test]
fn sorts_and_scatters_in_dynamic_zones() {
    let spec = Spec {
        rows: 3,
        cols: 2,
        a: vec![1, -2, 1, 3, 0, 1],
        b: vec![2, 2, -1, 0, 4, 1],
        dynamic_input: Some(1),
        steps: vec![
            // Pool: 0 = a [<=4, 2], 1 = b [3, 2], 2 = masked_select(0).
            Step::MaskedSelect(0, -2),
            Step::Sort(2, 0b010),
            Step::Sort(2, 0b100),
            Step::TopK(2, 1, 0b110),
            Step::Sort(0, 0b001),
            Step::Sort(0, 0b110),
            Step::TopK(0, 2, 0b001),
            Step::Scatter(0, 1, 0b011),
            Step::Scatter(2, 1, 0b100),
            Step::Scatter(1, 1, 0b110),
        ],
    };
    let text = ops_in(&spec);
    for op in ["argsort", "= scatter[", "= scatter_add["] {
        assert!(text.contains(op), "{op} missing:\n{text}");
    }
    check_fixed(spec);
}

/// The model-op steps in dynamic zones (a `mark_dynamic` input and a
/// masked selection): each applies, and both backends agree, padding
/// never reaching a result.
#[test]
fn model_ops_in_dynamic_zones() {
    let spec = Spec {
        rows: 3,
        cols: 2,
        a: vec![1, -2, 3, 4, 0, 1],
        b: vec![2, 2, -1, 0, 4, 1],
        dynamic_input: Some(2),
        steps: vec![
            // Pool: 0 = a [<=5, 2], 1 = b [3, 2], 2 = masked_select(0).
            Step::MaskedSelect(0, -2),
            Step::Stats(0, 0, 0),
            Step::Stats(2, 1, 0),
            Step::Stats(0, 8, 0),
            Step::Stats(2, 3, 0),
            Step::Stats(0, 5, 1),
            Step::Rearrange(2, 0, 0),
            Step::Rearrange(0, 1, 2),
            Step::Rearrange(2, 2, -1),
            Step::Rearrange(0, 3, 2),
            Step::Rearrange(0, 4, 0),
            Step::Rearrange(0, 6, 1),
            Step::Rearrange(0, 7, 1),
            Step::Rearrange(2, 8, 0),
            Step::Pointwise(2, 2),
            Step::Pointwise(0, 6),
            Step::Upsample(0, 1),
            Step::Upsample(0, 2),
        ],
    };
    let text = ops_in(&spec);
    for op in ["reverse[", "reduce_prod", "log1p", "index_select"] {
        assert!(text.contains(op), "{op} missing:\n{text}");
    }
    check_fixed(spec);
}

/// The loop steps on a `mark_dynamic` input and a masked selection: each
/// kind applies (the program holds a `fori_loop` or `while_loop` per
/// step) and both backends agree, a dynamic carry compared with a
/// captured operand of another size (a check inside the body) included.
#[test]
fn loops_in_dynamic_zones() {
    let loops = |bound_k: u8| Spec {
        rows: 3,
        cols: 2,
        a: vec![1, -2, 3, 0, 4, -1],
        b: vec![0, 1, 2, -2, 0, 3],
        dynamic_input: Some(1),
        steps: vec![
            // Pool: 0 = a [<=4, 2], 1 = b [3, 2], 2 = masked_select(1).
            Step::MaskedSelect(1, -1),
            Step::Loop(0, 0),
            Step::Loop(1, 1),
            Step::Loop(2, 2),
            Step::Loop(0, 2),
            Step::Loop(1, 3 + bound_k),
            Step::Loop(2, 0),
            Step::Loop(2, 1),
        ],
    };
    for (bound_k, fails) in [(0, true), (4, false)] {
        let spec = loops(bound_k);
        let ir = ops_in(&spec);
        assert_eq!(ir.matches("= fori_loop").count(), 3, "{ir}");
        assert_eq!(ir.matches("= while_loop").count(), 4, "{ir}");
        // Three rows into a bound of 2 fail the step; a bound of 3 holds.
        let result = {
            let _g = common::lock();
            Device::reference().scoped(|| evaluate(&spec))
        };
        assert_eq!(result.is_err(), fails, "{:?}", result.err());
        check_fixed(spec);
    }
}

/// Found by the proptest: XLA's CPU compiler threw a C++ exception (the
/// process aborted) on a program that sliced an empty range out of a
/// concatenate with an empty operand, beside a dynamic zone and a matrix
/// product. The lowering now emits no op for an empty value.
#[test]
fn an_empty_slice_of_a_concatenate_with_an_empty_part() {
    let spec = Spec {
        rows: 2,
        cols: 1,
        a: vec![0, 0],
        b: vec![0, -1],
        dynamic_input: None,
        steps: vec![
            Step::SumDim(32, 1),
            Step::IndexSelectDynamic(13, 10),
            Step::Slice(30, 0, 3),
            Step::MatMul(62, 0),
            Step::SumDim(5, 0),
            Step::Slice(25, 3, 4),
            Step::MaxDim(54, 1),
            Step::Scalar(0, 7, 1),
        ],
    };
    let ir = ops_in(&spec);
    assert!(ir.contains("f32[0] = slice"), "{ir}");
    check_fixed(spec);
}

/// Loops whose bodies are drawn (`Step::LoopBody`), over static and
/// dynamic carries, on a `mark_dynamic` input: each applies (one
/// `fori_loop` per step) and both backends agree.
#[test]
fn loops_with_drawn_bodies() {
    let spec = Spec {
        rows: 3,
        cols: 2,
        a: vec![1, -2, 3, 0, 4, -1],
        b: vec![0, 1, 2, -2, 0, 3],
        dynamic_input: Some(1),
        steps: vec![
            Step::LoopBody(0, false, vec![0, 3, 7]),
            Step::LoopBody(1, true, vec![8, 2, 11, 4]),
            Step::LoopBody(0, true, vec![5, 6, 9, 1]),
            Step::LoopBody(1, false, vec![4, 6, 10]),
        ],
    };
    let ir = ops_in(&spec);
    assert_eq!(ir.matches("= fori_loop").count(), 4, "{ir}");
    check_fixed(spec);
}

/// Found by the forward fuzzer (`scripts/fuzz.sh`): a zone lowered as a
/// mask over a 1-D value (`masked_select` whose flattening changes
/// nothing) shared the value's SSA name, so the zone's masked extents became the value's own,
/// and a `max` of the whole value skipped every unselected position
/// (XLA gave -inf where the zone selected nothing).
#[test]
fn a_masked_zone_of_a_1d_value_leaves_the_value_unmasked() {
    check_fixed(Spec {
        rows: 4,
        cols: 3,
        a: vec![0; 12],
        b: vec![0; 12],
        dynamic_input: None,
        steps: vec![
            Step::SumDim(0, 0),
            Step::Loss(32, 0, 0),
            Step::Zone(3, 0, 4, 0),
            Step::MaxDim(53, 0),
            Step::Unary(0, 0),
            Step::Unary(0, 0),
        ],
    });
}

/// Found by the forward fuzzer: `topk` with k = 0 leaves no classes, and
/// the generator's `nll_loss` over them drew targets out of range (the
/// reference failed its gather, XLA clamped it). Over no classes the
/// generator now draws a binary cross-entropy.
#[test]
fn a_loss_over_no_classes_is_a_valid_program() {
    check_fixed(Spec {
        rows: 2,
        cols: 3,
        a: vec![0; 6],
        b: vec![0; 6],
        dynamic_input: None,
        steps: vec![
            Step::Unary(0, 0),
            Step::TopK(0, 0, 1),
            Step::Unary(0, 0),
            Step::Scan(63, 0, 0),
            Step::Loss(47, 0, 0),
            Step::Unary(0, 0),
        ],
    });
}

/// Found by the forward fuzzer: an empty zone makes a mean 0/0 = NaN, so
/// every row given to `nll_loss` is NaN, and every target is ignored
/// (-100). PyTorch skips ignored rows (loss 0); `nll_loss` multiplied the
/// NaN by its mask, which the reference kept as NaN and XLA rewrote as a
/// select (0). It selects now.
#[test]
fn an_ignored_nan_row_adds_nothing_to_nll_loss() {
    check_fixed(Spec {
        rows: 1,
        cols: 3,
        a: vec![0, 0, 0],
        b: vec![0, 0, -1],
        dynamic_input: None,
        steps: vec![
            Step::Zone(0, 0, 4, 0),
            Step::Unary(0, 0),
            Step::Loss(26, 21, 1),
            Step::Unary(0, 0),
            Step::Unary(0, 0),
            Step::Unary(0, 0),
        ],
    });
}
