//! The host cost of recording lazy ops, per op: what a lazy step pays
//! before its program starts (issue 21's detect step records about a
//! hundred nodes a step). Each op is recorded and its result dropped
//! without a sync, in a loop; nothing runs on a device (recording is the
//! same on every backend, so no plugin is needed).
//!
//! Run: `cargo bench --bench record`. Prints `RESULT record <case>
//! ns=<f>` per case, the median of 5 rounds.

use lazyxla::Tensor;
use std::time::Instant;

/// A case: its name, how many ops a round records, and the recording.
type Case<'a> = (&'static str, usize, Box<dyn FnMut() + 'a>);

fn per_op(n: usize, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

fn main() {
    let a = Tensor::from_vec(vec![1.0f32; 4096], &[4096]).unwrap();
    let b = Tensor::from_vec(vec![2.0f32; 4096], &[4096]).unwrap();
    let x = Tensor::from_vec(vec![0.5f32; 4096 * 16], &[4096, 16]).unwrap();
    let w = Tensor::from_vec(vec![0.1f32; 64], &[4, 16])
        .unwrap()
        .requires_grad(true);
    let cases: [Case; 5] = [
        (
            "binary",
            200_000,
            Box::new(|| drop(std::hint::black_box(&a * &b))),
        ),
        (
            "with_scalar",
            200_000,
            Box::new(|| drop(std::hint::black_box(&a * 0.5))),
        ),
        (
            "unary",
            200_000,
            Box::new(|| drop(std::hint::black_box(a.exp()))),
        ),
        (
            "linear_forward",
            50_000,
            Box::new(|| drop(std::hint::black_box(x.matmul(&w.transpose(0, 1))))),
        ),
        (
            "linear_forward_backward",
            20_000,
            Box::new(|| {
                x.matmul(&w.transpose(0, 1)).sum().backward();
                w.zero_grad();
            }),
        ),
    ];
    for (name, n, mut f) in cases {
        println!("RESULT record {name} ns={:.0}", per_op(n, &mut f));
    }
}
