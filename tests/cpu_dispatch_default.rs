//! The default dispatch of a one-device CPU client: short programs run
//! inside the sync that starts them (`ExecuteInline`), a program whose
//! last run took 1 ms or more runs on lazyxla's dispatch thread
//! (`ExecuteDispatched`) while the caller goes on, and its results wait
//! for it on first use. Values match the reference backend's whichever
//! way a step ran, including steps that chain dispatched results and drop
//! their inputs at once; a program may be left running at exit. A plugin too
//! old to honour the client option dispatches asynchronously, as before. A
//! binary of its own: the choice is fixed when the CPU client is made.

mod common;

use lazyxla::{metrics, Device, Tensor};

/// Whether the plugin honours the CPU client option that turns
/// asynchronous dispatch off: a product too large for XLA's "cheap
/// program" shortcut has completed when the execute call returns.
/// (`xla-cpu-pjrt` 0.81 accepts the option and ignores it.)
fn plugin_runs_inline() -> bool {
    use lazyxla::debug::pjrt_ffi::{Client, ElementType, OptionValue, Plugin};
    let path = lazyxla::debug::pjrt_plugin_path().expect("a PJRT plugin loaded");
    let plugin = Plugin::load(&path).unwrap();
    let Ok(client) = Client::with_options(plugin, &[("asynchronous", OptionValue::Bool(false))])
    else {
        return false;
    };
    let exe = client
        .compile(
            "func.func @main(%x: tensor<256x256xf32>) -> tensor<256x256xf32> {\n\
             %y = stablehlo.dot %x, %x : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>\n\
             return %y : tensor<256x256xf32>\n}",
        )
        .unwrap();
    let x = client
        .buffer_from_host(&vec![0u8; 256 * 256 * 4], ElementType::F32, &[256, 256], 0)
        .unwrap();
    let (_, done) = exe.execute_async(&[&x]).unwrap();
    let ready = done.is_ready();
    done.wait().unwrap();
    ready
}

const N: usize = 384;

/// A long step (a few ms: products of `N x N` matrices) and a short one
/// (a sum), `steps` times: the weights chain from step to step, and each
/// step's inputs are dropped as soon as it is synced. Returns the short
/// step's values and the final weights' sum.
fn steps(device: &Device, steps: usize) -> (Vec<f32>, f32) {
    device.scoped(|| {
        let init: Vec<f32> = (0..N * N)
            .map(|k| ((k * 7 % 13) as f32 - 6.0) * 1e-3)
            .collect();
        let mut w = Tensor::from_vec(init, &[N, N]).unwrap();
        let mut short = Vec::new();
        for s in 0..steps {
            let x: Vec<f32> = (0..N * N).map(|k| ((k + s) % 5) as f32 * 0.01).collect();
            let x = Tensor::from_vec(x, &[N, N]).unwrap();
            w = {
                let y = x.matmul(&w).matmul(&w.transpose(0, 1)).tanh();
                &w - &(y.matmul(&w) * 0.01)
            };
            drop(x);
            lazyxla::mark_step().unwrap();
            // A short program that reads the long one's result.
            let total = w.sum();
            short.push(total.item::<f32>().unwrap());
        }
        (short, w.sum().item::<f32>().unwrap())
    })
}

#[test]
fn long_programs_run_on_the_dispatch_thread_and_short_ones_inline() {
    let _g = common::lock();
    let Some(d) = common::pjrt_device() else {
        return;
    };
    let (runs, inline, dispatched) = (
        metrics::counter("ExecuteGraph"),
        metrics::counter("ExecuteInline"),
        metrics::counter("ExecuteDispatched"),
    );
    let (short, last) = steps(&d, 5);
    let (runs, inline, dispatched) = (
        metrics::counter("ExecuteGraph") - runs,
        metrics::counter("ExecuteInline") - inline,
        metrics::counter("ExecuteDispatched") - dispatched,
    );
    let (want_short, want_last) = steps(&Device::reference(), 5);
    common::assert_close(&short, &want_short, 1e-3);
    common::assert_close(&[last], &[want_last], 1e-3);
    if plugin_runs_inline() {
        // The long step's first run is inline (it measures the program);
        // its later ones, over 1 ms on any machine, are handed over.
        assert!(dispatched >= 3, "{dispatched} of {runs} dispatched");
        assert_eq!(
            inline + dispatched,
            runs,
            "{inline} inline, {dispatched} dispatched"
        );
        d.scoped(|| {
            let e = lazyxla::set_cpu_async_dispatch(true)
                .unwrap_err()
                .to_string();
            assert!(e.contains("already dispatches inline"), "{e}");
        });
    } else {
        assert_eq!((inline, dispatched), (0, 0));
    }
    // Results of long programs kept but never read: the process exits
    // with the last one running, or its buffers queued for destruction.
    d.scoped(|| {
        let a = Tensor::from_vec(vec![0.5f32; N * N], &[N, N]).unwrap();
        for _ in 0..4 {
            let b = a.matmul(&a).matmul(&a).sum();
            lazyxla::mark_step().unwrap();
            std::mem::forget(b);
        }
    });
}
