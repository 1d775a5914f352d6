//! Soak: 10,000 training steps of `train_detector` on the default device
//! (XLA when a PJRT plugin is installed), once recorded lazily every step
//! and ended with `mark_step()`, once captured with `lazyxla::capture` and
//! replayed. At steps 100, 1,000, 5,000 and 10,000 it prints the process's
//! resident memory, the live IR nodes, the live device buffers, the live
//! tensors (registry length), the elapsed time and the mean step time
//! since the previous row (the first row's includes compiling); at the
//! end, whether they stayed flat from step 1,000 on. Exits non-zero when
//! nodes or buffers grew (a leak); resident memory is reported, not
//! enforced (the allocator and the plugin may keep some).
//!
//! Run: `cargo bench --bench soak` (`SOAK_STEPS=2000` for a shorter run).

#[allow(dead_code)]
#[path = "../examples/train_detector.rs"]
mod detector;

use lazyxla::optim::Adam;
use lazyxla::{debug, mark_step, metrics, Device, Tensor};
use std::time::{Duration, Instant};

/// Resident memory growth from the baseline row to the last one that is
/// still called flat.
const RSS_SLACK: f64 = 0.03;

/// The process's resident set size in KiB (`VmRSS` of /proc/self/status;
/// 0 where there is none).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One measurement.
struct Row {
    step: usize,
    rss_kib: u64,
    nodes: usize,
    buffers: u64,
    registry: usize,
    elapsed: Duration,
}

/// The steps measured: 100, 1,000, 5,000, 10,000 as far as `steps`, and
/// `steps` itself.
fn checkpoints(steps: usize) -> Vec<usize> {
    let mut c: Vec<usize> = [100, 1_000, 5_000, 10_000]
        .into_iter()
        .filter(|&s| s < steps)
        .collect();
    c.push(steps);
    c
}

/// Runs `step` (given the step's index) `steps` times, printing a row at
/// each checkpoint. The device is synchronised before each measurement,
/// so that what a row counts does not depend on how far ahead the host
/// runs.
fn soak(mode: &str, steps: usize, step: &mut dyn FnMut(usize)) -> Vec<Row> {
    let marks = checkpoints(steps);
    let mut rows: Vec<Row> = Vec::new();
    let start = Instant::now();
    for i in 0..steps {
        step(i);
        if marks.contains(&(i + 1)) {
            Device::default().synchronize().unwrap();
            let elapsed = start.elapsed();
            let row = Row {
                step: i + 1,
                rss_kib: rss_kib(),
                nodes: debug::live_node_count(),
                buffers: metrics::counter("LiveBuffers"),
                registry: debug::registry_len(),
                elapsed,
            };
            let (prev_step, prev_elapsed) = rows
                .last()
                .map_or((0, Duration::ZERO), |r| (r.step, r.elapsed));
            let per_step =
                (elapsed - prev_elapsed).as_secs_f64() * 1e6 / (row.step - prev_step) as f64;
            println!(
                "{mode:<8} {:>6} {:>9} {:>6} {:>8} {:>8} {:>9.2} {:>11.1}",
                row.step,
                row.rss_kib,
                row.nodes,
                row.buffers,
                row.registry,
                elapsed.as_secs_f64(),
                per_step,
            );
            rows.push(row);
        }
    }
    rows
}

/// Compares the row at step 1,000 (or the first) with the last one;
/// prints the verdict and returns false when nodes or buffers grew.
fn verdict(mode: &str, rows: &[Row]) -> bool {
    let base = rows.iter().find(|r| r.step == 1_000).unwrap_or(&rows[0]);
    let last = rows.last().unwrap();
    let rss_growth = last.rss_kib as f64 / base.rss_kib.max(1) as f64 - 1.0;
    let flat = |ok: bool| if ok { "flat" } else { "GREW" };
    let (nodes_ok, buffers_ok) = (last.nodes <= base.nodes, last.buffers <= base.buffers);
    println!(
        "{mode}: steps {}..{}: rss {:+.2}% ({}), nodes {} -> {} ({}), buffers {} -> {} ({}), \
         registry {} -> {} ({})",
        base.step,
        last.step,
        100.0 * rss_growth,
        if rss_growth <= RSS_SLACK {
            "flat"
        } else {
            "GREW"
        },
        base.nodes,
        last.nodes,
        flat(nodes_ok),
        base.buffers,
        last.buffers,
        flat(buffers_ok),
        base.registry,
        last.registry,
        flat(last.registry <= base.registry),
    );
    nodes_ok && buffers_ok
}

fn main() {
    let steps: usize = std::env::var("SOAK_STEPS")
        .ok()
        .map(|s| s.parse().expect("SOAK_STEPS: a number of steps"))
        .unwrap_or(10_000);
    assert!(steps > 0, "SOAK_STEPS: at least one step");
    println!(
        "soak: {steps} train_detector steps per mode on {}",
        Device::default().name()
    );
    println!(
        "{:<8} {:>6} {:>9} {:>6} {:>8} {:>8} {:>9} {:>11}",
        "mode", "step", "rss_kib", "nodes", "buffers", "registry", "elapsed_s", "us/step"
    );
    let images: Vec<detector::Image> = (0..16).map(detector::image).collect();

    // Recorded every step, as a training loop without capture runs.
    let lazy = {
        let model = detector::Detector::new(3);
        let mut opt = Adam::new(model.parameters(), 0.02);
        let rows = soak("lazy", steps, &mut |i| {
            let _ = detector::train_step(&model, &mut opt, &images[i % images.len()]);
            mark_step().unwrap();
        });
        // One more step, whose loss is read after the measurements.
        let (loss, _) = detector::train_step(&model, &mut opt, &images[steps % images.len()]);
        mark_step().unwrap();
        println!(
            "lazy: loss after {} steps {:.4}",
            steps + 1,
            loss.item::<f32>().unwrap()
        );
        rows
    };
    let lazy_compiles = metrics::counter("UncachedCompile");

    // Captured once and replayed with each image as inputs.
    let captured = {
        let model = detector::Detector::new(3);
        let mut opt = Adam::new(model.parameters(), 0.02);
        let mut step = lazyxla::capture(|x: &[Tensor]| {
            let (loss, positives) =
                detector::train_step(&model, &mut opt, &detector::Image::from_inputs(x));
            vec![loss, positives]
        });
        let inputs: Vec<[Tensor; 3]> = images.iter().map(detector::Image::inputs).collect();
        let rows = soak("captured", steps, &mut |i| {
            let _ = step.run(&inputs[i % inputs.len()]).unwrap();
        });
        let last = step.run(&inputs[steps % inputs.len()]).unwrap();
        println!(
            "captured: loss after {} steps {:.4}, {} recordings",
            steps + 1,
            last[0].item::<f32>().unwrap(),
            step.recordings()
        );
        rows
    };
    println!(
        "compiles: {lazy_compiles} lazy, {} captured",
        metrics::counter("UncachedCompile") - lazy_compiles
    );

    let ok = verdict("lazy", &lazy) & verdict("captured", &captured);
    if !ok {
        eprintln!("soak: live nodes or buffers grew");
        std::process::exit(1);
    }
}
