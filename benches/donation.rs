//! Peak memory of a training step with and without donated buffers
//! (DESIGN.md "Donated buffers"): an MLP of about 100M parameters
//! (2048-4096-..-4096-2048: five 4096x4096 layers, 100.7M f32 parameters)
//! trained with Adam at batch 32, lazily
//! (`mark_step`) and captured (`lazyxla::capture`).
//!
//! Each configuration runs in a process of its own (the peak RSS,
//! `VmHWM` in /proc/self/status, is per process; `LAZYXLA_PJRT_DONATE=0`
//! turns donation off): this bench starts itself once per mode and
//! setting and prints one row each: the peak RSS once the model and the
//! optimizer state are on the device, the peak after the steps, what the
//! steps added, the median step time from the third step on, how many
//! buffers the steps donated and how many programs they compiled.
//!
//! Run: `cargo bench --bench donation` (`DONATION_STEPS=n` steps per run,
//! 6 when unset).

use lazyxla::nn::{self, Linear, Module, Relu, Sequential};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{capture, mark_step, Device, Tensor};
use std::process::Command;
use std::time::Instant;

const WIDTH: usize = 4096;
/// The 4096x4096 layers between the first and the last.
const WIDE_LAYERS: usize = 5;
const IO: usize = 2048;
const BATCH: usize = 32;

/// A field of /proc/self/status in KiB.
fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.0}", kib as f64 / 1024.0)
}

/// One configuration, in this process: prints its row's fields.
fn child(mode: &str, steps: usize) {
    let mut net = Sequential::new().add(Linear::new(IO, WIDTH, 1)).add(Relu);
    for l in 1..=WIDE_LAYERS {
        net = net.add(Linear::new(WIDTH, WIDTH, 1 + l as u64)).add(Relu);
    }
    let net = net.add(Linear::new(WIDTH, IO, 99));
    let params: usize = net
        .parameters()
        .iter()
        .map(|p| p.upper_bounds().iter().product::<usize>())
        .sum();
    let mut opt = Adam::new(net.parameters(), 1e-4);
    let x = Tensor::randn(&[BATCH, IO], 7);
    let y = Tensor::from_vec((0..BATCH).map(|i| (i % IO) as i64).collect(), &[BATCH]).unwrap();
    // Parameters, moments and inputs on the device before the first step.
    mark_step().unwrap();
    let state: Vec<Tensor> = opt.state_dict().into_iter().map(|(_, t)| t).collect();
    for p in net.parameters().iter().chain(&state) {
        let _ = p.sum().to_dtype(lazyxla::DType::F32).item::<f32>().unwrap();
    }
    // Handles of the moments held here would keep them from being donated.
    drop(state);
    Device::default().synchronize().unwrap();
    let before = status_kib("VmHWM:");
    let compiles = lazyxla::metrics::counter("UncachedCompile");

    let mut times = Vec::with_capacity(steps);
    let mut loss_value = 0.0f32;
    if mode == "lazy" {
        for _ in 0..steps {
            let t = Instant::now();
            opt.zero_grad();
            let loss = nn::cross_entropy(&net.forward(&x), &y);
            loss.backward();
            opt.step();
            mark_step().unwrap();
            loss_value = loss.item::<f32>().unwrap();
            times.push(t.elapsed().as_secs_f64());
        }
    } else {
        let mut step = capture(|i: &[Tensor]| {
            opt.zero_grad();
            let loss = nn::cross_entropy(&net.forward(&i[0]), &i[1]);
            loss.backward();
            opt.step();
            vec![loss]
        });
        let inputs = [x.clone(), y.clone()];
        for _ in 0..steps {
            let t = Instant::now();
            let out = step.run(&inputs).unwrap();
            loss_value = out[0].item::<f32>().unwrap();
            times.push(t.elapsed().as_secs_f64());
        }
    }
    Device::default().synchronize().unwrap();
    let after = status_kib("VmHWM:");
    let mut steady: Vec<f64> = times.iter().skip(2).copied().collect();
    steady.sort_by(f64::total_cmp);
    let median = steady.get(steady.len() / 2).copied().unwrap_or(f64::NAN);
    println!(
        "ROW {} {} {} {} {:.0} {} {} {loss_value:.4}",
        mib(before),
        mib(after),
        mib(after.saturating_sub(before)),
        params,
        median * 1e3,
        lazyxla::metrics::counter("DonatedBuffer"),
        lazyxla::metrics::counter("UncachedCompile") - compiles,
    );
}

fn main() {
    let steps: usize = std::env::var("DONATION_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    if let Ok(mode) = std::env::var("DONATION_CHILD") {
        child(&mode, steps);
        return;
    }
    println!(
        "MLP {IO}-{WIDTH}x{}-{IO}, Adam, batch {BATCH}, {steps} steps, on {}",
        WIDE_LAYERS + 1,
        Device::default().name()
    );
    println!("| mode | donation | params | peak RSS before steps MiB | peak RSS after MiB | added by the steps MiB | step ms (median) | donated buffers | step compiles | last loss |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe().expect("the bench's own path");
    for mode in ["lazy", "captured"] {
        for donate in ["0", "1"] {
            let out = Command::new(&exe)
                .env("DONATION_CHILD", mode)
                .env("LAZYXLA_PJRT_DONATE", donate)
                .output()
                .expect("run the bench's child");
            let text = String::from_utf8_lossy(&out.stdout);
            let Some(row) = text.lines().find_map(|l| l.strip_prefix("ROW ")) else {
                eprintln!("{}", String::from_utf8_lossy(&out.stderr));
                panic!("the {mode} run (donation {donate}) printed no result");
            };
            let f: Vec<&str> = row.split_whitespace().collect();
            let on = if donate == "1" { "on" } else { "off" };
            println!(
                "| {mode} | {on} | {} | {} | {} | {} | {} | {} | {} | {} |",
                f[3], f[0], f[1], f[2], f[4], f[5], f[6], f[7]
            );
        }
    }
}
