//! What sharding costs on one machine: an Adam training step of a
//! compute-heavy MLP (512-2048-2048-512, batch 512) on one device against
//! the same step sharded over a 4-device mesh, in two layouts:
//!
//! - `fsdp`: every parameter and its Adam moments split along dim 0 over
//!   the mesh (`parallel::fully_shard`), the batch split the same way;
//!   XLA's partitioner gathers each weight where it is used and
//!   reduce-scatters its gradient;
//! - `dp`: the parameters whole on every device and the batch split
//!   (data parallelism expressed as a sharding: the partitioner inserts
//!   the gradients' all-reduce).
//!
//! On the XLA CPU plugin the 4 devices share the machine's cores, so no
//! speed-up is expected: the ratio is what partitioning costs (target:
//! at most 1.2x of one device). Also prints the bytes each device holds
//! after the steps (`Device::memory_stats`): FSDP divides the model and
//! its optimizer state by 4. Alternating rounds, medians, wall and CPU
//! time; every step captured; inputs uploaded once. Runs on the PJRT
//! plugin when one loads, else the reference backend.
//!
//! `cargo bench --bench sharding` (`SHARD_ROUNDS=n` rounds, 7 when unset).

#[path = "workloads/cpu.rs"]
mod cpu;
#[path = "workloads/uniform.rs"]
mod uniform;

use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::sharding::Mesh;
use lazyxla::{capture, Device, Tensor};
use std::time::Instant;

const STEPS: usize = 5;
const BATCH: usize = 512;
const WIDTHS: [usize; 4] = [512, 2048, 2048, 512];

struct Mlp {
    layers: Vec<Linear>,
}

impl Mlp {
    fn new() -> Mlp {
        let layers = WIDTHS
            .windows(2)
            .zip(1u64..)
            .map(|(w, seed)| Linear::new(w[0], w[1], seed))
            .collect();
        Mlp { layers }
    }
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        let mut h = x.clone();
        for (k, l) in self.layers.iter().enumerate() {
            h = l.forward(&h);
            if k + 1 < self.layers.len() {
                h = h.tanh();
            }
        }
        h
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        self.layers
            .iter()
            .enumerate()
            .map(|(k, l)| (k.to_string(), l as &dyn Module))
            .collect()
    }
}

fn host_batch() -> (Tensor, Tensor) {
    let mut next = uniform::uniform();
    let (i, o) = (WIDTHS[0], WIDTHS[WIDTHS.len() - 1]);
    let x: Vec<f32> = (0..BATCH * i).map(|_| next()).collect();
    let y: Vec<f32> = (0..BATCH * o).map(|_| next()).collect();
    (
        Tensor::from_vec(x, &[BATCH, i]).unwrap(),
        Tensor::from_vec(y, &[BATCH, o]).unwrap(),
    )
}

/// One layout: its device, model, optimizer and inputs.
struct Setup {
    device: Device,
    model: Mlp,
    opt: Adam,
    inputs: [Tensor; 2],
}

fn setup(mesh: Option<&Mesh>, shard_params: bool) -> Setup {
    let (x, y) = host_batch();
    let device = match mesh {
        Some(m) => m.device().clone(),
        None => Device::default(),
    };
    let model = device.scoped(Mlp::new);
    if let (Some(m), true) = (mesh, shard_params) {
        lazyxla::parallel::fully_shard(&model, m, "data").unwrap();
    }
    let opt = device.scoped(|| Adam::new(model.parameters(), 1e-3));
    let inputs = match mesh {
        Some(m) => [
            x.mark_sharding(m, &[Some("data"), None]).unwrap(),
            y.mark_sharding(m, &[Some("data"), None]).unwrap(),
        ],
        None => [x.to_device(&device).unwrap(), y.to_device(&device).unwrap()],
    };
    Setup {
        device,
        model,
        opt,
        inputs,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The captured training step of `s`.
fn step_of(s: &mut Setup) -> lazyxla::CapturedStep<impl FnMut(&[Tensor]) -> Vec<Tensor> + '_> {
    let (model, opt) = (&s.model, &mut s.opt);
    capture(move |b: &[Tensor]| {
        opt.zero_grad();
        let loss = nn::mse_loss(&model.forward(&b[0]), &b[1]);
        loss.backward();
        opt.step();
        vec![loss]
    })
}

/// The bytes each of `devices` holds.
fn bytes_on(devices: &[Device]) -> Vec<usize> {
    devices
        .iter()
        .map(|d| d.memory_stats().live_bytes)
        .collect()
}

type Make<'a> = (&'static str, Option<&'a Mesh>, bool);

/// The bytes per device each layout adds (parameters, moments, inputs,
/// with no gradient kept), built and stepped alone.
fn footprint(layout: Make<'_>, devices: &[Device]) -> Vec<usize> {
    let before = bytes_on(devices);
    let mut s = setup(layout.1, layout.2);
    let inputs = s.inputs.clone();
    let device = s.device.clone();
    {
        let mut step = step_of(&mut s);
        for _ in 0..2 {
            device.scoped(|| step.run(&inputs).unwrap());
        }
    }
    s.opt.zero_grad();
    lazyxla::mark_step().unwrap();
    device.synchronize().unwrap();
    let used: Vec<usize> = bytes_on(devices)
        .iter()
        .zip(&before)
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    match layout.1 {
        Some(_) => used,
        None => used[..1].to_vec(),
    }
}

fn main() {
    lazyxla::set_cpu_device_count(4).unwrap();
    let rounds: usize = std::env::var("SHARD_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let devices = lazyxla::devices();
    let mesh = Mesh::new(&devices, &[4], &["data"]).unwrap();
    let layouts: [Make<'_>; 3] = [
        ("one device", None, false),
        ("fsdp, 4 devices", Some(&mesh), true),
        ("dp, 4 devices", Some(&mesh), false),
    ];
    let footprints: Vec<Vec<usize>> = layouts
        .iter()
        .map(|&l| footprint(l, mesh.devices()))
        .collect();
    let mut setups: Vec<Setup> = layouts.iter().map(|&(_, m, p)| setup(m, p)).collect();
    let inputs: Vec<[Tensor; 2]> = setups.iter().map(|s| s.inputs.clone()).collect();
    let on: Vec<Device> = setups.iter().map(|s| s.device.clone()).collect();
    let mut steps: Vec<_> = setups.iter_mut().map(step_of).collect();
    let mut run = |k: usize| -> (f64, f64) {
        let (t, c) = (Instant::now(), cpu::cpu_ms());
        for _ in 0..STEPS {
            on[k].scoped(|| steps[k].run(&inputs[k]).unwrap());
        }
        on[k].synchronize().unwrap();
        let n = STEPS as f64;
        (t.elapsed().as_secs_f64() * 1e3 / n, (cpu::cpu_ms() - c) / n)
    };
    // Warm up: record, compile, and reach the steady state (the second
    // call records again once gradients exist).
    for k in 0..layouts.len() {
        run(k);
        run(k);
    }
    let mut wall = vec![Vec::new(); layouts.len()];
    let mut cpu_t = vec![Vec::new(); layouts.len()];
    for _ in 0..rounds {
        for k in 0..layouts.len() {
            let (w, c) = run(k);
            wall[k].push(w);
            cpu_t[k].push(c);
        }
    }
    println!(
        "sharded MLP training step, Adam, batch {BATCH}, widths {WIDTHS:?}, on {}, {rounds} rounds of {STEPS} steps",
        on[0].name()
    );
    println!(
        "{:<18} {:>10} {:>10} {:>9} {:>9}  MB per device",
        "layout", "wall ms", "cpu ms", "wall/1", "cpu/1"
    );
    let (w1, c1) = (median(wall[0].clone()), median(cpu_t[0].clone()));
    for (k, (name, _, _)) in layouts.iter().enumerate() {
        let (w, c) = (median(wall[k].clone()), median(cpu_t[k].clone()));
        let mb: Vec<String> = footprints[k]
            .iter()
            .map(|b| format!("{:.1}", *b as f64 / 1e6))
            .collect();
        println!(
            "{name:<18} {w:>10.2} {c:>10.2} {:>8.2}x {:>8.2}x  [{}]",
            w / w1,
            c / c1,
            mb.join(", ")
        );
        println!(
            "RESULT sharding layout=\"{name}\" wall_ms={w:.3} cpu_ms={c:.3} wall_ratio={:.3} cpu_ratio={:.3} max_bytes_per_device={}",
            w / w1,
            c / c1,
            footprints[k].iter().max().unwrap_or(&0)
        );
    }
}
