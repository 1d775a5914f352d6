//! Whole workloads of the model-ops issue, timed as `peers/jax_models.py`
//! times the same workloads in JAX, so `peers/compare.sh` can run both
//! side by side and print ratios.
//!
//! Run: `cargo bench --bench models -- WORKLOAD [STEPS]` with WORKLOAD
//! one of `workloads::NAMES` (`mlp_bf16` is lazyxla only: f32 against
//! bf16 compute). Prints
//! `RESULT <workload> lazyxla first_ms=<f> step_ms=<f> cpu_ms=<f> compile_ms=<f> rss_mb=<f> compiles=<n>`:
//! the first step (compile included; the runtime started before it),
//! the median step after warm-up (upload, step, results read), the
//! process CPU time per timed step, the first step's time in XLA's
//! compiler (or in loading it from `LAZYXLA_CACHE_DIR`), and the peak
//! resident set, and the programs compiled in the whole run. Host data
//! generation is excluded, as on the JAX side.
//! `MATMUL_PRECISION=highest|high|medium` sets
//! `lazyxla::set_float32_matmul_precision` first (default "highest", as
//! PyTorch; JAX's default on a GPU is TensorFloat-32, lazyxla's "medium",
//! and `JAX_DEFAULT_MATMUL_PRECISION=highest` is the JAX side's "highest").

mod workloads;

use std::time::Instant;
use workloads::cpu_ms;

/// Runs step 0 (first, compile included), three warm-up steps, then
/// `steps` timed steps over inputs 1..=steps: (first ms, median ms, CPU
/// ms per step, ms the first step spent compiling).
fn timed(steps: usize, mut step: impl FnMut(usize) -> f64) -> (f64, f64, f64, f64) {
    // The plugin is loaded and its client made before the clock starts,
    // as `import jax` and `jax.devices()` do on the JAX side: the first
    // step measures compiling and running, not starting the runtime.
    std::hint::black_box(lazyxla::devices());
    let compiled = || lazyxla::metrics::timer_total("CompileTime").as_secs_f64() * 1e3;
    let before = compiled();
    let t = Instant::now();
    std::hint::black_box(step(0));
    let first = t.elapsed().as_secs_f64() * 1e3;
    let compile = compiled() - before;
    // Three warm-up steps, on the inputs of steps 1..=steps (fewer than
    // three steps repeat them).
    for i in 0..3 {
        std::hint::black_box(step(1 + i % steps));
    }
    let mut times = Vec::with_capacity(steps);
    let cpu = cpu_ms();
    for i in 0..steps {
        let t = Instant::now();
        std::hint::black_box(step(1 + i % steps));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = (cpu_ms() - cpu) / steps as f64;
    times.sort_by(f64::total_cmp);
    (first, times[times.len() / 2], cpu, compile)
}

fn main() {
    // `cargo bench` passes `--bench`; the workload is the first other word.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let workload = args.first().map(String::as_str).unwrap_or("topk");
    let steps = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50)
        .max(1);
    if let Ok(level) = std::env::var("MATMUL_PRECISION") {
        if let Err(e) = lazyxla::set_float32_matmul_precision(&level) {
            eprintln!("MATMUL_PRECISION: {e}");
            std::process::exit(2);
        }
    }
    let Some(step) = workloads::workload(workload, steps) else {
        eprintln!("unknown workload {workload}: use {}", workloads::NAMES);
        std::process::exit(2);
    };
    let (first, step, cpu, compile) = timed(steps, step);
    println!(
        "RESULT {workload} lazyxla first_ms={first:.2} step_ms={step:.3} cpu_ms={cpu:.3} compile_ms={compile:.2} rss_mb={:.0} compiles={}",
        peak_rss_mb(),
        lazyxla::metrics::counter("UncachedCompile")
    );
}

/// The process's peak resident set (`VmHWM`), in MiB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
