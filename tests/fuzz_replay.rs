//! Replay fuzzing: random training steps (a small network whose shape,
//! activation, dynamic zone, loss and optimizer are drawn) run for several
//! calls with new inputs, lazily (`mark_step`) and under `capture`, on both
//! backends. Every call must give the same loss, parameters and optimizer
//! state each way (floats within 1e-5 relative). Inputs may change size
//! between calls (a dynamic batch), and a step may make a size check that
//! fails on some call (two selections that must have one size): then both
//! ways fail the call, and it changes nothing.
//!
//! `PROPTEST_CASES` sets the number of cases (40 when unset, in CI);
//! `scripts/fuzz.sh 10000 2 replay` runs 10,000.

mod common;

use lazyxla::optim::{Adam, AdamW, Optimizer, Sgd};
use lazyxla::{capture, mark_step, DType, Device, Tensor};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct RSpec {
    cols: usize,
    hidden: usize,
    /// tanh, sigmoid, gelu, x * sigmoid(x).
    act: u8,
    /// 0: none; 1: the loss also sums the hidden units above a threshold
    /// (a zone); 2: it also takes the difference of two selections of the
    /// input by two masks, checked equal in size when the step runs (it
    /// fails on the calls where they differ).
    zone: u8,
    /// SGD with momentum, Adam, AdamW.
    opt: u8,
    /// Rows of each call's batch; `dynamic` marks dim 0 with the largest.
    rows: Vec<usize>,
    dynamic: bool,
    seed: u64,
}

fn rspec() -> impl Strategy<Value = RSpec> {
    (
        1usize..4,
        1usize..5,
        0u8..4,
        0u8..3,
        0u8..3,
        proptest::collection::vec(1usize..5, 4),
        any::<bool>(),
        0u64..1000,
    )
        .prop_map(|(cols, hidden, act, zone, opt, rows, dynamic, seed)| {
            // Without a dynamic batch every call has the first size.
            let rows = match dynamic {
                true => rows,
                false => vec![rows[0]; rows.len()],
            };
            RSpec {
                cols,
                hidden,
                act,
                zone,
                opt,
                rows,
                dynamic,
                seed,
            }
        })
}

/// Values in halves shifted off the thresholds, from a seed.
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % 9) as f32 * 0.5 - 2.0 + 0.1
        })
        .collect()
}

struct Net {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Net {
    fn new(spec: &RSpec) -> Net {
        let p = |n: usize, shape: &[usize], k: u64| {
            let v: Vec<f32> = data(n, spec.seed * 7 + k).iter().map(|x| x * 0.3).collect();
            Tensor::from_vec(v, shape).unwrap().requires_grad(true)
        };
        Net {
            w1: p(spec.cols * spec.hidden, &[spec.cols, spec.hidden], 1),
            b1: p(spec.hidden, &[spec.hidden], 2),
            w2: p(spec.hidden, &[spec.hidden, 1], 3),
        }
    }

    fn params(&self) -> Vec<Tensor> {
        vec![self.w1.clone(), self.b1.clone(), self.w2.clone()]
    }

    /// The loss of one batch `x: [n, cols]` with targets `y: [n, 1]`.
    fn loss(&self, spec: &RSpec, x: &Tensor, y: &Tensor) -> Tensor {
        let z = &x.matmul(&self.w1) + &self.b1;
        let h = match spec.act {
            0 => z.tanh(),
            1 => z.sigmoid(),
            2 => z.gelu(),
            _ => &z * &z.sigmoid(),
        };
        let d = &h.matmul(&self.w2) - y;
        let mut loss = d.square().mean();
        match spec.zone {
            1 => {
                let m = h.gt_scalar(0.3);
                loss = &loss + &(h.masked_select(&m).sum() * 0.1);
            }
            2 => {
                let (m1, m2) = (x.gt_scalar(0.3), x.lt_scalar(-0.3));
                let (a, b) = (x.masked_select(&m1), x.masked_select(&m2));
                loss = &loss + &((&a - &b).sum() * 0.01);
            }
            _ => {}
        }
        loss
    }
}

fn optimizer(spec: &RSpec, params: Vec<Tensor>) -> Box<dyn Optimizer> {
    match spec.opt {
        0 => Box::new(Sgd::new(params, 0.1).momentum(0.9)),
        1 => Box::new(Adam::new(params, 0.05)),
        _ => Box::new(AdamW::new(params, 0.05).weight_decay(0.1)),
    }
}

/// The inputs of call `k`.
fn batch(spec: &RSpec, k: usize) -> (Tensor, Tensor) {
    let n = spec.rows[k];
    let x = Tensor::from_vec(
        data(n * spec.cols, spec.seed * 31 + k as u64),
        &[n, spec.cols],
    )
    .unwrap();
    let y = Tensor::from_vec(data(n, spec.seed * 17 + k as u64), &[n, 1]).unwrap();
    match spec.dynamic {
        true => {
            let bound = spec.rows.iter().copied().max().unwrap_or(n);
            let x = x.mark_dynamic(0, bound);
            let y = y.mark_dynamic_as(0, &x, 0);
            (x, y)
        }
        false => (x, y),
    }
}

/// Per call, the loss (or the error's text) then the parameters and the
/// optimizer's state after it, all as f64.
type Run = Vec<(Result<f64, String>, Vec<Vec<f64>>)>;

fn state(net: &Net, opt: &dyn Optimizer) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = net
        .params()
        .iter()
        .map(|t| t.to_dtype(DType::F64).to_vec::<f64>().unwrap())
        .collect();
    for (_, t) in opt.state_dict() {
        out.push(t.to_dtype(DType::F64).to_vec::<f64>().unwrap());
    }
    out
}

/// The spec's calls, lazily or captured.
fn run(spec: &RSpec, captured: bool) -> Run {
    let net = Net::new(spec);
    let mut opt = optimizer(spec, net.params());
    let mut out = Vec::new();
    if captured {
        let mut step = capture(|i: &[Tensor]| {
            opt.zero_grad();
            let loss = net.loss(spec, &i[0], &i[1]);
            loss.backward();
            opt.step();
            vec![loss]
        });
        for k in 0..spec.rows.len() {
            let (x, y) = batch(spec, k);
            let r = step
                .run(&[x, y])
                .and_then(|l| l[0].item::<f32>())
                .map(|l| l as f64)
                .map_err(|e| error_text(&e));
            out.push((r, Vec::new()));
        }
        drop(step);
        // The state once all calls ran (read after the step is gone, as the
        // step holds the optimizer).
        let last = state(&net, opt.as_ref());
        if let Some(l) = out.last_mut() {
            l.1 = last;
        }
        return out;
    }
    for k in 0..spec.rows.len() {
        let (x, y) = batch(spec, k);
        let before = (spec.zone == 2).then(|| state(&net, opt.as_ref()));
        opt.zero_grad();
        let loss = net.loss(spec, &x, &y);
        loss.backward();
        opt.step();
        let r = mark_step()
            .and_then(|()| loss.item::<f32>())
            .map(|l| l as f64)
            .map_err(|e| error_text(&e));
        if let (Err(e), Some(before)) = (&r, before) {
            // A failed step changes nothing.
            assert_eq!(
                state(&net, opt.as_ref()),
                before,
                "after the failed call {k}: {e}"
            );
        }
        out.push((r, Vec::new()));
    }
    let last = state(&net, opt.as_ref());
    if let Some(l) = out.last_mut() {
        l.1 = last;
    }
    out
}

/// An error without the process-wide numbers of size variables.
fn error_text(e: &lazyxla::Error) -> String {
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
    out
}

fn same(a: &Run, b: &Run, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.len(), b.len());
    for (k, ((la, sa), (lb, sb))) in a.iter().zip(b).enumerate() {
        match (la, lb) {
            (Ok(x), Ok(y)) => prop_assert!(
                (x - y).abs() <= 1e-5 * (1.0 + y.abs()),
                "{}: call {} loss {} against {}",
                what,
                k,
                x,
                y
            ),
            (Err(x), Err(y)) => prop_assert!(
                x.starts_with("sub") && y.starts_with("sub"),
                "{}: call {} failed with {} against {}",
                what,
                k,
                x,
                y
            ),
            _ => prop_assert!(false, "{}: call {}: {:?} against {:?}", what, k, la, lb),
        }
        prop_assert_eq!(sa.len(), sb.len());
        for (t, (x, y)) in sa.iter().zip(sb).enumerate() {
            prop_assert_eq!(x.len(), y.len());
            for (p, q) in x.iter().zip(y) {
                prop_assert!(
                    (p - q).abs() <= 1e-5 * (1.0 + q.abs()),
                    "{}: call {} state tensor {}: {:?} against {:?}",
                    what,
                    k,
                    t,
                    x,
                    y
                );
            }
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    #[test]
    fn captured_steps_replay_as_the_lazy_steps_run(spec in rspec()) {
        let Some(pjrt) = common::pjrt_device() else { return Ok(()) };
        let _g = common::lock();
        let reference = Device::reference();
        let lazy = reference.scoped(|| run(&spec, false));
        same(&reference.scoped(|| run(&spec, true)), &lazy, "reference, captured against lazy")?;
        same(&pjrt.scoped(|| run(&spec, false)), &lazy, "pjrt lazy against reference")?;
        same(&pjrt.scoped(|| run(&spec, true)), &lazy, "pjrt captured against reference")?;
    }
}
