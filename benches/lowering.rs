//! lazyxla's lowering against JAX's, on the same compiler: the step
//! program lazyxla compiles for a workload (`workloads/`), and the
//! StableHLO JAX lowers for the same step (`peers/jax_models.py
//! --export`, generated at run time, not committed), both compiled on the
//! PJRT plugin lazyxla loads and run directly through the FFI. So a gap
//! here is the lowering's, not the compiler version's, nor the runtime's.
//!
//! Run: `cargo bench --bench lowering -- WORKLOAD [ROUNDS [EXECUTIONS]]`
//! with WORKLOAD `resnet`, `transformer`, `mlp` or `detect`. JAX comes
//! from `peers/python.sh` (`$PYTHON`, else the benchmarks' own venv);
//! `JAX_HLO_DIR=DIR` reuses an earlier export from DIR instead. The
//! texts are kept in the export directory (printed), lazyxla's beside
//! them with `LAZYXLA_DUMP=DIR`; `XLA_FLAGS=--xla_dump_to=DIR
//! --xla_dump_hlo_as_text` dumps both optimized programs.
//!
//! Each program runs as consecutive training steps do: pipelined (start
//! one execution, then wait for the previous one) and chained (the
//! updated parameters and optimizer state that one execution returns are
//! the next one's arguments). The two alternate in rounds; the report
//! gives per-execution medians of wall and process CPU time and the
//! median of the rounds' ratios. Prints
//! `RESULT <workload> lowering lazyxla_ms=<f> jax_ms=<f> ratio=<f>
//! lazyxla_cpu_ms=<f> jax_cpu_ms=<f> cpu_ratio=<f>`.

mod workloads;

use lazyxla::debug::pjrt_ffi::{Buffer, Client, ElementType, Event, Executable};
use lazyxla::Device;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use workloads::cpu_ms;

/// A compiled step program with its arguments, ready to run chained.
struct Program {
    exe: Arc<Executable>,
    args: Vec<Arc<Buffer>>,
    /// `feed[i] = Some(j)`: argument `i` of a step is result `j` of the
    /// step before.
    feed: Vec<Option<usize>>,
}

/// lazyxla's program for `name`: two consecutive steps recorded on the
/// default PJRT device, the feed read off the buffers the second step
/// took from the first.
fn lazyxla_program(name: &str) -> Program {
    let (device, recorder) =
        lazyxla::debug::pjrt_recording(&Device::default()).expect("a PJRT plugin (see README)");
    device.scoped(|| {
        let mut step = workloads::workload(name, 4).expect("a known workload");
        for i in 0..2 {
            step(i);
        }
        recorder.start();
        step(2);
        step(3);
        let mut last = recorder.last();
        recorder.stop();
        assert_eq!(last.len(), 2, "one PJRT execution per step");
        let (second, first) = (last.pop().unwrap(), last.pop().unwrap());
        assert!(
            Arc::ptr_eq(&first.exe, &second.exe),
            "both steps ran the same program"
        );
        // Identities are addresses, which a later upload may reuse: a
        // match counts only where the result's type and shape are the
        // argument's.
        let refs: Vec<&Buffer> = second.args.iter().map(|b| &**b).collect();
        let outs = second.exe.execute(&refs).unwrap();
        let same =
            |a: &Buffer, o: &Buffer| a.element_type() == o.element_type() && a.dims() == o.dims();
        let feed = second
            .arg_ids
            .iter()
            .zip(&second.args)
            .map(|(a, arg)| {
                first
                    .output_ids
                    .iter()
                    .position(|o| o == a)
                    .filter(|&j| same(arg, &outs[j]))
            })
            .collect();
        drop(outs);
        Program {
            exe: second.exe,
            args: second.args,
            feed,
        }
    })
}

/// Exports JAX's program for `name` into a directory (or finds it in
/// `JAX_HLO_DIR`) and returns the directory.
fn jax_export(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("JAX_HLO_DIR") {
        return PathBuf::from(dir);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::process::Command::new("bash")
        .arg(root.join("benches/peers/python.sh"))
        .output()
        .expect("bash");
    assert!(python.status.success(), "benches/peers/python.sh failed");
    let python = String::from_utf8(python.stdout).unwrap();
    let dir = std::env::temp_dir().join("lazyxla-jax-hlo");
    let status = std::process::Command::new(python.trim())
        .arg(root.join("benches/peers/jax_models.py"))
        .args(["--export", name])
        .arg(&dir)
        .status()
        .expect("python");
    assert!(status.success(), "the JAX export failed");
    dir
}

/// JAX's program for `name` from `dir`, compiled on `client`.
fn jax_program(client: &Client, dir: &Path, name: &str) -> Program {
    let text = std::fs::read_to_string(dir.join(format!("{name}.mlir"))).unwrap();
    let exe = client.compile(&text).unwrap_or_else(|e| {
        panic!("the plugin rejects JAX's program: {}", e.message);
    });
    let spec = std::fs::read_to_string(dir.join(format!("{name}.args"))).unwrap();
    let mut args = Vec::new();
    let mut feed_count = 0;
    for line in spec.lines() {
        let mut words = line.split_whitespace();
        let ty = match words.next() {
            Some("f32") => ElementType::F32,
            Some("s32") => ElementType::S32,
            Some("pred") => ElementType::Pred,
            Some("feed") => {
                feed_count = words.next().unwrap().parse().unwrap();
                continue;
            }
            other => panic!("unknown argument type {other:?}"),
        };
        let dims: Vec<i64> = words.map(|d| d.parse().unwrap()).collect();
        let bytes = std::fs::read(dir.join(format!("{name}.arg{}.bin", args.len()))).unwrap();
        args.push(Arc::new(
            client.buffer_from_host(&bytes, ty, &dims, 0).unwrap(),
        ));
    }
    let feed = (0..args.len())
        .map(|i| (i < feed_count).then_some(i))
        .collect();
    Program {
        exe: Arc::new(exe),
        args,
        feed,
    }
}

/// Runs `n` chained, pipelined executions: (wall ms, CPU ms) per one.
fn run(p: &Program, n: usize) -> (f64, f64) {
    let cpu = cpu_ms();
    let start = Instant::now();
    let mut in_flight: Option<Event> = None;
    let mut previous: Option<Vec<Buffer>> = None;
    for _ in 0..n {
        let refs: Vec<&Buffer> = p
            .args
            .iter()
            .zip(&p.feed)
            .map(|(a, f)| match (f, &previous) {
                (Some(j), Some(prev)) => &prev[*j],
                _ => &**a,
            })
            .collect();
        let (out, done) = p.exe.execute_async(&refs).unwrap();
        drop(refs);
        if let Some(previous_done) = in_flight.replace(done) {
            previous_done.wait().unwrap();
        }
        previous = Some(out);
    }
    if let Some(done) = in_flight {
        done.wait().unwrap();
    }
    let wall = start.elapsed().as_secs_f64() * 1e3 / n as f64;
    (wall, (cpu_ms() - cpu) / n as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let name = args.first().map(String::as_str).unwrap_or("mlp");
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(11);
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let ours = lazyxla_program(name);
    let dir = jax_export(name);
    let theirs = jax_program(&ours.exe.client(), &dir, name);
    println!(
        "{name} on {}: lazyxla {} arguments, {} results; JAX {} arguments, {} results \
         (JAX's text in {})",
        lazyxla::debug::pjrt_plugin_path()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        ours.args.len(),
        ours.exe.num_outputs(),
        theirs.args.len(),
        theirs.exe.num_outputs(),
        dir.display()
    );
    // `LOWERING_ONLY=lazyxla|jax`: run one side alone (for `perf`).
    if let Ok(side) = std::env::var("LOWERING_ONLY") {
        let p = if side == "jax" { &theirs } else { &ours };
        let (wall, cpu) = run(p, rounds * n);
        println!("ONLY {side}: {wall:.3} ms, {cpu:.3} CPU ms per execution");
        return;
    }
    // Warm-up: XLA's thread pool, caches, the first-use allocations.
    run(&ours, n);
    run(&theirs, n);
    let mut rows = Vec::new();
    for r in 0..rounds {
        // Alternate which side goes first, so drifts hit both alike.
        let (a, b) = if r % 2 == 0 {
            (run(&ours, n), run(&theirs, n))
        } else {
            let b = run(&theirs, n);
            (run(&ours, n), b)
        };
        rows.push([a.0, b.0, a.1, b.1]);
    }
    let col = |i: usize| median(rows.iter().map(|r| r[i]).collect());
    let ratio = |i: usize, j: usize| median(rows.iter().map(|r| r[i] / r[j]).collect());
    println!(
        "RESULT {name} lowering lazyxla_ms={:.3} jax_ms={:.3} ratio={:.3} \
         lazyxla_cpu_ms={:.3} jax_cpu_ms={:.3} cpu_ratio={:.3}",
        col(0),
        col(1),
        ratio(0, 1),
        col(2),
        col(3),
        ratio(2, 3)
    );
}
