//! Sharded programs fuzzed against the reference backend: random programs
//! over a 4-device mesh (1-D `[4]` or 2-D `[2, 2]`) whose inputs are split
//! by random specs and whose pending values get random sharding
//! constraints (`Op::Sharding`), run for two steps with the first input
//! updated in place (an aliased, donated, sharded parameter on XLA). XLA's
//! partitioned program must give the reference backend's values (it runs
//! the whole program) within float tolerance, and every updated value
//! must keep the placement it was given.
//!
//! `PROPTEST_CASES` sets the number of cases (24 by default, for CI);
//! `scripts/fuzz.sh N 1 sharding` runs N.

mod common;

use common::assert_close;
use lazyxla::sharding::Mesh;
use lazyxla::{mark_step, Device, Tensor};
use proptest::prelude::*;

const N: usize = 8;

#[derive(Clone, Debug)]
enum Step {
    /// Operand, kind: `tanh`, `sin`, `neg`, `x * 0.5`.
    Unary(usize, u8),
    /// Operands, kind: `+`, `-`, `*`.
    Binary(usize, usize, u8),
    /// `a . b / N`.
    MatMul(usize, usize),
    Transpose(usize),
    /// `x - mean(x, dim)`, kept to `[N, N]`.
    Center(usize, u8),
    /// A sharding constraint on the operand: a spec index (`specs`).
    Constrain(usize, u8),
}

#[derive(Clone, Debug)]
struct Spec {
    two_d: bool,
    /// The specs of the two inputs (indices into `specs`).
    inputs: [u8; 2],
    steps: Vec<Step>,
    seed: u64,
}

/// The specs a `[N, N]` value can have on the mesh.
fn specs(two_d: bool) -> Vec<[Option<&'static str>; 2]> {
    match two_d {
        false => vec![[None, None], [Some("x"), None], [None, Some("x")]],
        true => vec![
            [None, None],
            [Some("x"), None],
            [None, Some("y")],
            [Some("x"), Some("y")],
            [Some("y"), Some("x")],
        ],
    }
}

fn step() -> impl Strategy<Value = Step> {
    let i = 0usize..32;
    prop_oneof![
        (i.clone(), 0u8..4).prop_map(|(a, k)| Step::Unary(a, k)),
        (i.clone(), i.clone(), 0u8..3).prop_map(|(a, b, k)| Step::Binary(a, b, k)),
        (i.clone(), i.clone()).prop_map(|(a, b)| Step::MatMul(a, b)),
        i.clone().prop_map(Step::Transpose),
        (i.clone(), 0u8..2).prop_map(|(a, d)| Step::Center(a, d)),
        (i, 0u8..5).prop_map(|(a, s)| Step::Constrain(a, s)),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        (0u8..5, 0u8..5),
        prop::collection::vec(step(), 1..10),
        any::<u64>(),
    )
        .prop_map(|(two_d, (a, b), steps, seed)| Spec {
            two_d,
            inputs: [a, b],
            steps,
            seed,
        })
}

fn values(seed: u64) -> Vec<f32> {
    let mut g = common::Lcg(seed | 1);
    (0..N * N)
        .map(|_| (g.next() % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

/// The program on `devices`: two steps, each updating input `a` to
/// `tanh` of the last value; the values of `a` and of the last value
/// after them, and the tiles of `a`'s sharding after each step.
fn evaluate(spec: &Spec, devices: &[Device]) -> (Vec<f32>, Vec<f32>, Vec<Vec<usize>>) {
    let (shape, axes): (&[usize], &[&str]) = match spec.two_d {
        true => (&[2, 2], &["x", "y"]),
        false => (&[4], &["x"]),
    };
    let mesh = Mesh::new(&devices[..4], shape, axes).unwrap();
    let all = specs(spec.two_d);
    let pick_spec = |k: u8| all[k as usize % all.len()];
    let input = |k: usize| {
        let host = Tensor::from_vec(values(spec.seed + k as u64), &[N, N]).unwrap();
        host.mark_sharding(&mesh, &pick_spec(spec.inputs[k]))
            .unwrap()
    };
    let (a, b) = (input(0), input(1));
    let mut tiles = Vec::new();
    let mut last = None;
    for _ in 0..2 {
        let mut pool = vec![a.clone(), b.clone()];
        for s in &spec.steps {
            let at = |i: usize| pool[i % pool.len()].clone();
            let v = match *s {
                Step::Unary(i, k) => match k {
                    0 => at(i).tanh(),
                    1 => at(i).sin(),
                    2 => -&at(i),
                    _ => &at(i) * 0.5,
                },
                Step::Binary(i, j, k) => match k {
                    0 => &at(i) + &at(j),
                    1 => &at(i) - &at(j),
                    _ => &at(i) * &at(j),
                },
                Step::MatMul(i, j) => &at(i).matmul(&at(j)) * (1.0 / N as f64),
                Step::Transpose(i) => at(i).transpose(0, 1),
                Step::Center(i, d) => {
                    let x = at(i);
                    &x - &x.mean_dims(&[d as usize], true)
                }
                Step::Constrain(i, k) => at(i).mark_sharding(&mesh, &pick_spec(k)).unwrap(),
            };
            pool.push(v);
        }
        let out = pool.last().unwrap().clone();
        a.assign(&out.tanh());
        mark_step().unwrap();
        tiles.push(a.sharding().map_or(vec![1, 1], |s| s.tiles().to_vec()));
        last = Some(out);
    }
    let last = last.unwrap().to_vec::<f32>().unwrap();
    (a.to_vec::<f32>().unwrap(), last, tiles)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    #[test]
    fn sharded_programs_match_the_reference(spec in spec()) {
        let Some(pjrt) = common::pjrt_device() else { return Ok(()) };
        let _g = common::lock();
        common::fresh_process_state();
        let want = Device::reference().scoped(|| evaluate(&spec, &lazyxla::devices()));
        let got = pjrt.scoped(|| evaluate(&spec, &lazyxla::devices()));
        assert_close(&got.0, &want.0, 1e-4);
        assert_close(&got.1, &want.1, 1e-4);
        // The update keeps the placement the input was given.
        let first = got.2[0].clone();
        prop_assert!(got.2.iter().all(|t| *t == first), "{:?}", got.2);
        prop_assert_eq!(&got.2, &want.2);
    }
}
