//! Data-parallel training on 4 devices (`lazyxla::parallel::DataParallel`)
//! against the same training on one device with the full batch, on both
//! backends (the reference backend runs the 4 replicas as threads).
//!
//! Acceptance: 10 data-parallel steps equal 10 full-batch steps within
//! 1e-5, compile once and read nothing back; an uneven last batch (10
//! rows on 4 devices) matches; a per-replica dynamic zone (masked_select
//! of the positives of each shard) matches; a bad device list is an
//! error naming both counts.

mod common;

use common::{assert_close, Lcg};
use lazyxla::nn::{self, Linear, Module};
use lazyxla::optim::{Adam, Optimizer, Sgd};
use lazyxla::parallel::{self, DataParallel, GradientAverage, ReduceOp};
use lazyxla::{mark_step, metrics, DType, Device, Tensor};

const IN: usize = 6;
const OUT: usize = 2;

/// A two-layer perceptron, seeded: the same weights on every backend and
/// device.
struct Mlp {
    l1: Linear,
    l2: Linear,
}

impl Mlp {
    fn new() -> Mlp {
        Mlp {
            l1: Linear::new(IN, 8, 11),
            l2: Linear::new(8, OUT, 12),
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        self.l2.forward(&self.l1.forward(x).tanh())
    }

    fn params(&self) -> Vec<Tensor> {
        let mut p = self.l1.parameters();
        p.extend(self.l2.parameters());
        p
    }
}

/// Batch `k` of `rows` rows: inputs `[rows, IN]`, targets `[rows, OUT]`,
/// labels `[rows, 1]` (1 for about a third of the rows), from host data.
fn batch(k: u64, rows: usize) -> Vec<Tensor> {
    let mut g = Lcg(1000 + k);
    let mut u = move || (g.next() % 2001) as f32 / 1000.0 - 1.0;
    let x: Vec<f32> = (0..rows * IN).map(|_| u()).collect();
    let y: Vec<f32> = (0..rows * OUT).map(|_| u()).collect();
    let labels: Vec<f32> = (0..rows)
        .map(|_| if u() > 0.3 { 1.0 } else { 0.0 })
        .collect();
    vec![
        Tensor::from_vec(x, &[rows, IN]).unwrap(),
        Tensor::from_vec(y, &[rows, OUT]).unwrap(),
        Tensor::from_vec(labels, &[rows, 1]).unwrap(),
    ]
}

/// A mean over rows: the full batch's loss is the rows-weighted mean of
/// the replicas' (`GradientAverage::Rows`).
fn regression_loss(m: &Mlp, b: &[Tensor]) -> Tensor {
    nn::mse_loss(&m.forward(&b[0]), &b[1])
}

/// A loss over the positive rows only (a dynamic zone in each replica):
/// the squared error of the selected outputs, divided by the number of
/// selected values over ALL replicas (an `all_reduce` of the count; on one
/// device, the count itself), so the replicas' gradients add up
/// (`GradientAverage::Sum`).
fn positives_loss(m: &Mlp, b: &[Tensor]) -> Tensor {
    let pred = m.forward(&b[0]);
    let mask = b[2].gt_scalar(0.5); // [rows, 1], broadcast over the outputs
    let err = &pred.masked_select(&mask) - &b[1].masked_select(&mask); // [<=rows*OUT]
    let count = (mask.to_dtype(DType::F32).sum() * OUT as f64).all_reduce(ReduceOp::Sum);
    err.square().sum() / count.maximum(&count.ones_like())
}

/// The parameters after training on one device with the full batches of
/// `rows`, and each step's loss.
fn single_device<O: Optimizer>(
    rows: &[usize],
    opt: impl FnOnce(Vec<Tensor>) -> O,
    loss: fn(&Mlp, &[Tensor]) -> Tensor,
) -> (Vec<Vec<f32>>, Vec<f32>) {
    let model = Mlp::new();
    let params = model.params();
    let mut opt = opt(params.clone());
    let mut losses = Vec::new();
    for (k, &n) in rows.iter().enumerate() {
        let b = batch(k as u64, n);
        opt.zero_grad();
        let l = loss(&model, &b);
        l.backward();
        opt.step();
        mark_step().unwrap();
        losses.push(l.item::<f32>().unwrap());
    }
    let values = params.iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
    (values, losses)
}

/// Checks that every replica holds the same parameters (bit for bit) and
/// that they match `want` within 1e-5.
fn assert_replicas_match(params: &[Tensor], want: &[Vec<f32>]) {
    for (p, w) in params.iter().zip(want) {
        let replicas = parallel::replica_values::<f32>(p).unwrap();
        assert_eq!(replicas.len(), 4);
        for r in &replicas[1..] {
            assert_eq!(r, &replicas[0], "replicas diverged");
        }
        assert_close(&replicas[0], w, 1e-5);
    }
}

backend_test! {
    fn ten_steps_on_four_devices_equal_ten_full_batch_steps() {
        let rows = [16usize; 10];
        let (want, want_losses) = single_device(&rows, |p| Adam::new(p, 0.01), regression_loss);

        let dp = DataParallel::with_replicas(4).unwrap();
        let model = dp.scoped(Mlp::new);
        let params = model.params();
        let mut opt = dp.scoped(|| Adam::new(params.clone(), 0.01));
        metrics::reset();
        let mut losses = Vec::new();
        {
            let mut step = dp.train_step(&params, &mut opt, |b: &[Tensor]| regression_loss(&model, b));
            for (k, &n) in rows.iter().enumerate() {
                losses.push(step.run(&batch(k as u64, n)).unwrap());
            }
        }
        // Nothing was read, everything stayed on the devices, and the
        // step compiled once (the first recording has no gradients yet,
        // the second does: the same program).
        assert_eq!(metrics::counter("TransferFromDevice"), 0);
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        assert_eq!(metrics::counter("ExecuteGraph"), 10);
        assert!(params.iter().all(|p| p.device() == dp.device()));
        assert_replicas_match(&params, &want);
        let got: Vec<f32> = losses.iter().map(|l| l.item::<f32>().unwrap()).collect();
        assert_close(&got, &want_losses, 1e-5);
    }
}

backend_test! {
    fn an_uneven_last_batch_matches_one_device() {
        // 12 rows (3 per device), then 10, 9 and 11: shards of at most 3
        // rows with per-replica sizes (3, 3, 2, 2 for 10). Both ways of
        // reducing: one all_reduce per gradient, and all packed into one.
        let rows = [12usize, 10, 9, 11];
        let (want, want_losses) =
            single_device(&rows, |p| Sgd::new(p, 0.1).momentum(0.9), regression_loss);
        for packed in [false, true] {
            let dp = DataParallel::with_replicas(4).unwrap().packed(packed);
            let model = dp.scoped(Mlp::new);
            let params = model.params();
            let mut opt = dp.scoped(|| Sgd::new(params.clone(), 0.1).momentum(0.9));
            metrics::reset();
            let mut losses = Vec::new();
            for (k, &n) in rows.iter().enumerate() {
                let loss = dp
                    .run(&params, &mut opt, &batch(k as u64, n), |b| regression_loss(&model, b))
                    .unwrap();
                losses.push(loss);
            }
            assert_eq!(metrics::counter("TransferFromDevice"), 0);
            // One program for the even batch, one for every uneven one.
            assert_eq!(metrics::counter("UncachedCompile"), 2);
            assert_replicas_match(&params, &want);
            let got: Vec<f32> = losses.iter().map(|l| l.item::<f32>().unwrap()).collect();
            assert_close(&got, &want_losses, 1e-5);
        }
    }
}

backend_test! {
    fn a_dynamic_zone_in_each_replica_matches_one_device() {
        // Each replica selects its shard's positive rows (masked_select:
        // a different count on every replica), and the loss divides by the
        // count over all replicas; the gradients are static and add up.
        let rows = [16usize, 16, 16, 10, 16];
        let (want, want_losses) = single_device(&rows, |p| Adam::new(p, 0.02), positives_loss);

        let dp = DataParallel::with_replicas(4).unwrap().average(GradientAverage::Sum);
        let model = dp.scoped(Mlp::new);
        let params = model.params();
        let mut opt = dp.scoped(|| Adam::new(params.clone(), 0.02));
        metrics::reset();
        let mut losses = Vec::new();
        {
            let mut step = dp.train_step(&params, &mut opt, |b: &[Tensor]| positives_loss(&model, b));
            for (k, &n) in rows.iter().enumerate() {
                losses.push(step.run(&batch(k as u64, n)).unwrap());
            }
        }
        assert_eq!(metrics::counter("TransferFromDevice"), 0);
        assert_replicas_match(&params, &want);
        let got: Vec<f32> = losses.iter().map(|l| l.item::<f32>().unwrap()).collect();
        assert_close(&got, &want_losses, 1e-5);
    }
}

backend_test! {
    fn bad_device_lists_are_errors_naming_both_counts() {
        let all = lazyxla::devices();
        assert!(all.len() >= 2);
        let twice = [all[0].clone(), all[1].clone(), all[0].clone(), all[1].clone()];
        let e = DataParallel::new(&twice).err().unwrap().to_string();
        assert!(e.contains("4 replicas need 4 distinct devices, but 2 are distinct"), "{e}");
        let too_many = all.len() * 2;
        let e = DataParallel::with_replicas(too_many).err().unwrap().to_string();
        assert!(
            e.contains(&format!("{too_many} replicas")) && e.contains(&format!("there are {} devices", all.len())),
            "{e}"
        );
        assert!(DataParallel::new(&[]).is_err());
        // A replicated device is no member of another.
        let r = Device::replicated(&all[..2]).unwrap();
        assert!(DataParallel::new(&[r, all[2].clone()]).is_err());
        // The process goes on: a good list still trains.
        let dp = DataParallel::new(&all[..2]).unwrap();
        let w = dp.scoped(|| Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true));
        let mut opt = dp.scoped(|| Sgd::new(vec![w.clone()], 0.5));
        let x = Tensor::from_vec(vec![1.0f32, 1.0, 2.0, 2.0], &[2, 2]).unwrap();
        dp.run(std::slice::from_ref(&w), &mut opt, &[x], |b| (&b[0] * &w).sum_dims(&[1], false).mean())
            .unwrap();
        // Rows-weighted: the gradient of the full batch's mean, (1 + 2) / 2.
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.25, 1.25]);
    }
}

#[test]
fn several_cpu_devices_dispatch_asynchronously_whatever_is_asked() {
    let _g = common::lock();
    let Some(d) = common::pjrt_device() else {
        return;
    };
    d.scoped(|| {
        let e = lazyxla::set_cpu_async_dispatch(false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("4 CPU devices") && e.contains("at the same time"),
            "{e}"
        );
        assert!(lazyxla::set_cpu_async_dispatch(true).is_ok());
    });
}
