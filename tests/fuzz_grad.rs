//! Gradient fuzzing: random differentiable programs (smooth float ops,
//! reductions, products, dynamic zones, a static device loop, a `scan`
//! over an operand's rows (a dynamic count when the inputs are dynamic),
//! size checks between two dynamic inputs) whose `backward()` gradients must
//! agree between XLA and the reference backend (within 1e-5 relative to
//! each input's largest gradient element, see `close`), and, for every
//! fourth case, agree in f64 with central finite
//! differences of the reference's forward value.
//!
//! Every op is smooth where the programs evaluate it: inputs are halves
//! shifted by 0.1 (never on a kink), the ops have no kinks (no `relu`,
//! `abs`, `max`), and the selections of a dynamic zone compare against
//! thresholds 0.3 away from any value the inputs produce, so a finite
//! difference of 1e-6 never moves an element across. `PROPTEST_CASES`
//! sets the number of cases (60 when unset, in CI); `scripts/fuzz.sh
//! grad` runs 10,000.

mod common;

use lazyxla::{fori_loop, scan, DType, Device, Tensor};
use proptest::prelude::*;

/// One step over the pool of float tensors built so far (operands by
/// index, modulo the pool's size).
#[derive(Clone, Debug)]
enum G {
    /// tanh, sigmoid, exp(x / 4), sin, square, softplus, x / (1 + x^2).
    Unary(u8, usize),
    /// add, sub, mul, `a / (1 + b^2)`; shapes that do not fit are skipped.
    Binary(u8, usize, usize),
    /// sum or mean along a dim (keepdim), softmax or log-softmax along it,
    /// logsumexp.
    Reduce(u8, usize, u8),
    /// `x . x^T` or `x^T . x`.
    MatMul(usize, u8),
    /// The elements above a threshold (a zone), scaled, summed.
    Zone(usize, i8),
    /// The rows whose sum is above a threshold (`nonzero`, `index_select`).
    Rows(usize, i8),
    /// `cat` along dim 0.
    Cat(usize, usize),
    /// A dynamic value padded to its bound.
    Pad(usize),
    /// A `fori_loop` of 3 iterations mixing the carry with the operand.
    Loop(usize, u8),
    /// A `scan` over the operand's rows (as many steps as it has rows, a
    /// dynamic count for a dynamic operand): a recurrence with a captured
    /// value, its stacked outputs plus the final carry.
    Scan(usize, u8),
}

#[derive(Clone, Debug)]
struct GSpec {
    rows: usize,
    cols: usize,
    a: Vec<i8>,
    b: Vec<i8>,
    /// Both inputs' dim 0 marked dynamic (their sizes checked equal when
    /// they meet), with this much headroom.
    dynamic: Option<usize>,
    steps: Vec<G>,
}

fn g() -> impl Strategy<Value = G> {
    let i = 0usize..32;
    prop_oneof![
        (0u8..7, i.clone()).prop_map(|(k, a)| G::Unary(k, a)),
        (0u8..4, i.clone(), i.clone()).prop_map(|(k, a, b)| G::Binary(k, a, b)),
        (0u8..5, i.clone(), 0u8..2).prop_map(|(k, a, d)| G::Reduce(k, a, d)),
        (i.clone(), 0u8..2).prop_map(|(a, k)| G::MatMul(a, k)),
        (i.clone(), -2i8..3).prop_map(|(a, t)| G::Zone(a, t)),
        (i.clone(), -2i8..3).prop_map(|(a, t)| G::Rows(a, t)),
        (i.clone(), i.clone()).prop_map(|(a, b)| G::Cat(a, b)),
        i.clone().prop_map(G::Pad),
        (i.clone(), 0u8..2).prop_map(|(a, k)| G::Loop(a, k)),
        (i, 0u8..2).prop_map(|(a, k)| G::Scan(a, k)),
    ]
}

fn gspec() -> impl Strategy<Value = GSpec> {
    (1usize..4, 1usize..4).prop_flat_map(|(rows, cols)| {
        let n = rows * cols;
        (
            Just(rows),
            Just(cols),
            proptest::collection::vec(-4i8..5, n),
            proptest::collection::vec(-4i8..5, n),
            proptest::option::of(0usize..2),
            proptest::collection::vec(g(), 3..8),
        )
            .prop_map(|(rows, cols, a, b, dynamic, steps)| GSpec {
                rows,
                cols,
                a,
                b,
                dynamic,
                steps,
            })
    })
}

fn pick(pool: &[Tensor], i: usize) -> &Tensor {
    &pool[i % pool.len()]
}

/// The step applied to the pool, or `None` where it does not fit.
fn apply(pool: &[Tensor], s: &G) -> Option<Tensor> {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match *s {
        G::Unary(k, a) => {
            let x = pick(pool, a);
            match k {
                0 => x.tanh(),
                1 => x.sigmoid(),
                2 => (x * 0.25).exp(),
                3 => x.sin(),
                4 => x.square(),
                5 => x.softplus(),
                _ => x / &(x.square() + 1.0),
            }
        }
        G::Binary(k, a, b) => {
            let (x, y) = (pick(pool, a), pick(pool, b));
            match k {
                0 => x + y,
                1 => x - y,
                2 => x * y,
                _ => x / &(y.square() + 1.0),
            }
        }
        G::Reduce(k, a, d) => {
            let x = pick(pool, a);
            let d = (d as usize) % x.rank().max(1);
            if x.rank() == 0 {
                return x * 2.0;
            }
            match k {
                0 => x.sum_dims(&[d], true),
                1 => x.mean_dims(&[d], true),
                2 => x.softmax(d),
                3 => x.log_softmax(d),
                _ => x.logsumexp(d, true),
            }
        }
        G::MatMul(a, k) => {
            let x = pick(pool, a);
            assert_eq!(x.rank(), 2);
            match k {
                0 => x.matmul(&x.transpose(0, 1)) * 0.25,
                _ => x.transpose(0, 1).matmul(x) * 0.25,
            }
        }
        G::Zone(a, t) => {
            let x = pick(pool, a);
            let keep = snapped(x).gt_scalar(t as f64 + 0.3);
            (&x.masked_select(&keep).tanh() * 1.5).sum()
        }
        G::Rows(a, t) => {
            let x = pick(pool, a);
            assert_eq!(x.rank(), 2);
            let keep = snapped(&x.sum_dims(&[1], false)).ge_scalar(t as f64 + 0.3);
            let idx = keep.nonzero().flatten();
            x.index_select(0, &idx).sigmoid().sum_dims(&[0], false)
        }
        G::Cat(a, b) => Tensor::cat(&[pick(pool, a), pick(pool, b)], 0),
        G::Pad(a) => {
            let x = pick(pool, a);
            assert!(x.is_dynamic());
            x.pad_to_bound(0.5)
        }
        G::Loop(a, k) => {
            let x = pick(pool, a).pad_to_bound(0.0);
            let out = fori_loop(3, std::slice::from_ref(&x), |i, c| {
                let f = i.to_dtype(x.dtype()) * 0.25;
                match k {
                    0 => vec![(&c[0] * 0.5 + &x * &f).tanh()],
                    _ => vec![&c[0] * &(&x * 0.5).sigmoid() + &f],
                }
            });
            out[0].clone()
        }
        G::Scan(a, k) => {
            let x = pick(pool, a);
            assert!(x.rank() == 2 && !x.size(1).is_dynamic());
            let w = (x.mean() * 0.5).tanh();
            let init = Tensor::zeros(&[x.upper_bounds()[1]], x.dtype());
            let (fin, ys) = scan(x.size(0), &[init], std::slice::from_ref(x), |i, c, r| {
                let f = i.to_dtype(x.dtype()) * 0.25;
                let h = match k {
                    0 => (&c[0] * 0.5 + &r[0] + &f).tanh(),
                    _ => &c[0] * &(&r[0] * 0.5).sigmoid() + &(&r[0] * &w),
                };
                (vec![h.clone()], vec![&h * 1.5])
            });
            &ys[0] + &fin[0]
        }
    }));
    out.ok()
}

/// The copy a selection compares: a value rounded to quarters, so that a
/// finite difference (or an ulp) never moves it across a threshold (which
/// is 0.3 away from every quarter).
fn snapped(x: &Tensor) -> Tensor {
    x.mul_scalar(4.0).floor().mul_scalar(0.25)
}

/// The program's loss and its inputs (which require grad), in `dtype`.
fn program(
    spec: &GSpec,
    dtype: DType,
    shift: Option<(usize, usize, f64)>,
) -> (Tensor, [Tensor; 2]) {
    let vals = |v: &[i8], which: usize| -> Vec<f64> {
        v.iter()
            .enumerate()
            .map(|(k, &x)| {
                let d = match shift {
                    Some((w, j, h)) if w == which && j == k => h,
                    _ => 0.0,
                };
                x as f64 * 0.5 + 0.1 + d
            })
            .collect()
    };
    let make = |v: Vec<f64>| {
        let t = Tensor::from_vec(v, &[spec.rows, spec.cols])
            .unwrap()
            .to_dtype(dtype);
        let t = match dtype {
            // A conversion is an op: make the input a leaf again.
            DType::F64 => t,
            _ => Tensor::from_vec(t.to_vec::<f32>().unwrap(), &[spec.rows, spec.cols]).unwrap(),
        };
        match spec.dynamic {
            Some(extra) => t.mark_dynamic(0, spec.rows + extra),
            None => t,
        }
        .requires_grad(true)
    };
    let (x, y) = (make(vals(&spec.a, 0)), make(vals(&spec.b, 1)));
    let mut pool = vec![x.clone(), y.clone()];
    for s in &spec.steps {
        if let Some(t) = quietly(|| apply(&pool, s)) {
            pool.push(t);
        }
    }
    // Every tensor reaches the loss, each with its own weight.
    let mut loss = Tensor::scalar(0.0f64).to_dtype(dtype);
    for (k, t) in pool.iter().enumerate() {
        loss = &loss + &(t.sum() * (0.3 + 0.1 * k as f64));
    }
    (loss, [x, y])
}

fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = f();
    std::panic::set_hook(prev);
    r
}

/// The gradients of both inputs (their real elements), or the step's
/// error (a size check between the two dynamic inputs).
fn gradients(spec: &GSpec, dtype: DType) -> Result<Vec<Vec<f64>>, String> {
    let (loss, inputs) = program(spec, dtype, None);
    loss.backward();
    lazyxla::mark_step().map_err(|e| e.to_string())?;
    inputs
        .iter()
        .map(|t| match t.grad() {
            None => Ok(vec![0.0; spec.rows * spec.cols]),
            Some(g) => values(&g.to_dtype(DType::F64)).map_err(|e| e.to_string()),
        })
        .collect()
}

fn values(t: &Tensor) -> lazyxla::Result<Vec<f64>> {
    t.to_vec::<f64>()
}

/// Central finite differences of the f64 loss on the reference backend.
fn finite_differences(spec: &GSpec) -> Vec<Vec<f64>> {
    let h = 1e-6;
    let loss = |shift| {
        let (l, _) = program(spec, DType::F64, Some(shift));
        l.item::<f64>().unwrap()
    };
    (0..2)
        .map(|w| {
            (0..spec.rows * spec.cols)
                .map(|j| (loss((w, j, h)) - loss((w, j, -h))) / (2.0 * h))
                .collect()
        })
        .collect()
}

/// Each input's gradient `got` against `want`, element by element within
/// `tol` of `1 +` the larger of the two elements or, with `normwise`, of
/// the gradient's largest element: an element that is a small difference
/// of large terms carries their rounding, which f32 programs summed in
/// another order (XLA's) do not share (a gradient of elements near 60
/// with one of -0.73 differing by 2e-5 between the backends, both within
/// f32 rounding of the f64 gradient).
fn close(got: &[Vec<f64>], want: &[Vec<f64>], tol: f64, normwise: bool) -> Result<(), String> {
    for (w, (g, v)) in got.iter().zip(want).enumerate() {
        let largest = match normwise {
            true => g.iter().chain(v).fold(0.0f64, |m, x| m.max(x.abs())),
            false => 0.0,
        };
        for (k, (a, b)) in g.iter().zip(v).enumerate() {
            let scale = 1.0 + b.abs().max(a.abs()).max(largest);
            if (a - b).abs() > tol * scale && !(a.is_nan() && b.is_nan()) {
                return Err(format!(
                    "input {w} element {k}: {a} against {b} ({g:?} vs {v:?})"
                ));
            }
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(60)
}

fn check(spec: &GSpec, pjrt: &Device, with_fd: bool) -> Result<(), TestCaseError> {
    let _g = common::lock();
    let text = || {
        let (loss, _) = Device::reference().scoped(|| program(spec, DType::F32, None));
        lazyxla::debug::ir_text(&[&loss])
    };
    let want = Device::reference().scoped(|| gradients(spec, DType::F32));
    let got = pjrt.scoped(|| gradients(spec, DType::F32));
    let (got, want) = match (got, want) {
        (Ok(g), Ok(w)) => (g, w),
        (g, w) => {
            prop_assert_eq!(g.is_err(), w.is_err(), "{:?} / {:?}\n{}", g, w, text());
            return Ok(());
        }
    };
    close(&got, &want, 1e-5, true)
        .map_err(|e| TestCaseError::fail(format!("pjrt against reference: {e}\n{}", text())))?;
    if with_fd {
        let fd = Device::reference().scoped(|| finite_differences(spec));
        for (name, d) in [("reference", Device::reference()), ("pjrt", pjrt.clone())] {
            let g = d
                .scoped(|| gradients(spec, DType::F64))
                .map_err(TestCaseError::fail)?;
            close(&g, &fd, 1e-5, false).map_err(|e| {
                TestCaseError::fail(format!(
                    "{name} f64 against finite differences: {e}\n{}",
                    text()
                ))
            })?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    #[test]
    fn gradients_agree_between_backends_and_with_finite_differences(spec in gspec(), fd in 0u8..4) {
        let Some(pjrt) = common::pjrt_device() else { return Ok(()) };
        check(&spec, &pjrt, fd == 0)?;
    }
}
