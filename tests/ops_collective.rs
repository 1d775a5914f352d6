//! The collectives (`all_reduce`, `all_gather`, `reduce_scatter`,
//! `replica_id`) on a replicated device of every device of the client,
//! both backends: forward values per replica, gradients, the identity on
//! one device, the bounded-operand rule, and transfers between devices.

mod common;

use common::{assert_close, panic_message};
use lazyxla::parallel::{self, ReduceOp};
use lazyxla::{metrics, DType, Device, Tensor};

/// Every device of the scoped backend's client, replicated.
fn replicated() -> Device {
    Device::replicated(&lazyxla::devices()).unwrap()
}

/// On every replica `r` of `d`: `[r + 1, 10 (r + 1)]` as f32.
fn per_replica(d: &Device) -> Tensor {
    d.scoped(|| {
        let r = Tensor::replica_id().to_dtype(DType::F32) + 1.0;
        Tensor::stack(&[&r, &(&r * 10.0)], 0)
    })
}

backend_test! {
    fn every_replica_gets_the_reduction() {
        let d = replicated();
        let n = d.replica_count();
        assert!(n >= 2, "the client has {n} devices");
        let x = per_replica(&d);
        let s: f32 = (1..=n).map(|r| r as f32).sum();
        let cases = [
            (ReduceOp::Sum, vec![s, 10.0 * s]),
            (ReduceOp::Mean, vec![s / n as f32, 10.0 * s / n as f32]),
            (ReduceOp::Max, vec![n as f32, 10.0 * n as f32]),
            (ReduceOp::Min, vec![1.0, 10.0]),
        ];
        for (op, want) in cases {
            let y = d.scoped(|| x.all_reduce(op));
            let got = parallel::replica_values::<f32>(&y).unwrap();
            assert_eq!(got.len(), n);
            for v in &got {
                assert_close(v, &want, 1e-6);
            }
        }
        // Integers sum exactly.
        let ids = d.scoped(|| Tensor::replica_id().all_reduce(ReduceOp::Sum));
        assert_eq!(ids.item::<i64>().unwrap(), (n * (n - 1) / 2) as i64);
    }
}

backend_test! {
    fn gather_and_scatter_follow_replica_order() {
        let d = replicated();
        let n = d.replica_count();
        let x = per_replica(&d).reshape(&[1, 2]);
        let rows = d.scoped(|| x.all_gather(0));
        assert_eq!(rows.upper_bounds(), vec![n, 2]);
        let want: Vec<f32> = (1..=n).flat_map(|r| [r as f32, 10.0 * r as f32]).collect();
        for v in parallel::replica_values::<f32>(&rows).unwrap() {
            assert_eq!(v, want);
        }
        let cols = d.scoped(|| x.all_gather(1));
        assert_eq!(cols.upper_bounds(), vec![1, 2 * n]);
        // reduce_scatter: the sum of every replica's [n, 2], replica r
        // keeping row r.
        let big = d.scoped(|| {
            let id = Tensor::replica_id().to_dtype(DType::F32);
            Tensor::ones(&[n, 2], DType::F32) * &id + Tensor::arange(n as i64 * 2).to_dtype(DType::F32).reshape(&[n as i64, 2])
        });
        let mine = d.scoped(|| big.reduce_scatter(0));
        assert_eq!(mine.upper_bounds(), vec![1, 2]);
        let ids_sum = (n * (n - 1) / 2) as f32;
        for (r, v) in parallel::replica_values::<f32>(&mine).unwrap().iter().enumerate() {
            let base = (2 * r) as f32 * n as f32;
            assert_close(v, &[base + ids_sum, base + n as f32 + ids_sum], 1e-6);
        }
        let ids = parallel::replica_values::<i64>(&d.scoped(Tensor::replica_id)).unwrap();
        assert_eq!(ids, (0..n as i64).map(|r| vec![r]).collect::<Vec<_>>());
    }
}

backend_test! {
    fn collectives_on_one_device_are_the_identity() {
        let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 4.0], &[2, 2]).unwrap();
        assert_eq!(x.replica_count(), 1);
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
            assert_eq!(x.all_reduce(op).to_vec::<f32>().unwrap(), vec![1.0, -2.0, 3.0, 4.0]);
        }
        assert_eq!(x.all_gather(1).to_vec::<f32>().unwrap(), vec![1.0, -2.0, 3.0, 4.0]);
        assert_eq!(x.reduce_scatter(0).to_vec::<f32>().unwrap(), vec![1.0, -2.0, 3.0, 4.0]);
        assert_eq!(Tensor::replica_id().item::<i64>().unwrap(), 0);
    }
}

backend_test! {
    fn gradients_sum_over_replicas() {
        // Replica r's loss sum(a_r * all_reduce(a)), a_r = w c_r: its
        // gradient reaches a_r directly (A = sum_s a_s = S w) and through
        // the all_reduce (the sum over replicas of a_s, again A), so
        // replica r's gradient of w is 2 S c_r w. Summed over the
        // replicas, that is the gradient of the total, 2 S^2 w.
        let d = replicated();
        let n = d.replica_count() as f32;
        let w = d.scoped(|| Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true));
        d.scoped(|| {
            let c = Tensor::replica_id().to_dtype(DType::F32) + 1.0;
            let a = &w * &c;
            (&a * &a.all_reduce(ReduceOp::Sum)).sum().backward();
        });
        let s = n * (n + 1.0) / 2.0;
        let g = w.grad().unwrap();
        for (r, v) in parallel::replica_values::<f32>(&g).unwrap().iter().enumerate() {
            let c = r as f32 + 1.0;
            assert_close(v, &[2.0 * s * c, 4.0 * s * c], 1e-5);
        }
        let total = d.scoped(|| g.all_reduce(ReduceOp::Sum));
        assert_close(&total.to_vec::<f32>().unwrap(), &[2.0 * s * s, 4.0 * s * s], 1e-5);
        // all_gather's gradient is reduce_scatter's: each replica's block
        // of sum(gather(x) * k) is dL/dx = sum_r k[block].
        let x = d.scoped(|| Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true));
        let k: Vec<f32> = (0..d.replica_count()).map(|i| i as f32 + 1.0).collect();
        d.scoped(|| {
            let kt = Tensor::from_vec(k.clone(), &[k.len()]).unwrap();
            (&x.all_gather(0) * &kt).sum().backward();
        });
        let got = parallel::replica_values::<f32>(&x.grad().unwrap()).unwrap();
        for (r, v) in got.iter().enumerate() {
            assert_close(v, &[n * k[r]], 1e-6);
        }
        // Max: the replica holding the maximum gets every replica's g.
        let m = d.scoped(|| Tensor::from_vec(vec![1.0f32], &[1]).unwrap().requires_grad(true));
        d.scoped(|| {
            let c = Tensor::replica_id().to_dtype(DType::F32);
            (&m * &c).all_reduce(ReduceOp::Max).sum().backward();
        });
        let got = parallel::replica_values::<f32>(&m.grad().unwrap()).unwrap();
        let last = got.len() - 1;
        for (r, v) in got.iter().enumerate() {
            let want = if r == last { n * last as f32 } else { 0.0 };
            assert_close(v, &[want], 1e-6);
        }
    }
}

backend_test! {
    fn a_bounded_operand_is_refused_with_the_way_out() {
        let d = replicated();
        let x = d.scoped(|| Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap());
        let sel = d.scoped(|| x.masked_select(&x.gt_scalar(0.5)));
        let msg = panic_message(|| {
            d.scoped(|| sel.all_reduce(ReduceOp::Sum));
        });
        assert!(msg.contains("all_reduce_sum") && msg.contains("[<=3]"), "{msg}");
        assert!(msg.contains("reduce the dynamic dimensions first"), "{msg}");
        // Reduced first, it works: the sum of every replica's selection.
        let n = d.replica_count() as f32;
        let total = d.scoped(|| sel.sum().all_reduce(ReduceOp::Sum));
        assert_close(&[total.item::<f32>().unwrap()], &[3.0 * n], 1e-6);
        let msg = panic_message(|| {
            d.scoped(|| sel.all_gather(0));
        });
        assert!(msg.contains("all_gather"), "{msg}");
    }
}

backend_test! {
    fn bad_replica_lists_are_errors_naming_the_counts() {
        let all = lazyxla::devices();
        let dup = [all[0].clone(), all[1].clone(), all[0].clone(), all[1].clone()];
        let e = Device::replicated(&dup).unwrap_err().to_string();
        assert!(e.contains("4 replicas need 4 distinct devices, but 2 are distinct"), "{e}");
        assert!(Device::replicated(&[]).is_err());
        let n = all.len();
        let e = parallel::DataParallel::with_replicas(n + 4).err().unwrap().to_string();
        assert!(e.contains(&format!("{} replicas", n + 4)) && e.contains(&format!("there are {n} devices")), "{e}");
        // The same devices give the same replicated device.
        assert_eq!(Device::replicated(&all).unwrap(), Device::replicated(&all).unwrap());
    }
}

backend_test! {
    fn transfers_between_devices_stay_on_the_devices() {
        let all = lazyxla::devices();
        let a = Tensor::from_vec_on(vec![1.0f32, 2.0, 3.0], &[3], &all[0]).unwrap();
        let b = (&a * 2.0).to_device(&all[1]).unwrap();
        assert_eq!(b.device(), &all[1]);
        let c = (&b + 1.0).to_device(&all[0]).unwrap();
        let d = replicated();
        let r = (&c * 1.0).to_device(&d).unwrap();
        let back = d.scoped(|| r.all_reduce(ReduceOp::Sum)).to_device(&all[1]).unwrap();
        lazyxla::mark_step().unwrap();
        assert_eq!(metrics::counter("TransferFromDevice"), 0);
        assert!(metrics::counter("TransferBetweenDevices") >= 4);
        let n = d.replica_count() as f32;
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![3.0, 5.0, 7.0]);
        assert_eq!(back.to_vec::<f32>().unwrap(), vec![3.0 * n, 5.0 * n, 7.0 * n]);
        for v in parallel::replica_values::<f32>(&r).unwrap() {
            assert_eq!(v, vec![3.0, 5.0, 7.0]);
        }
    }
}

backend_test! {
    fn a_shard_gives_each_replica_its_rows() {
        let d = replicated();
        let n = d.replica_count();
        let rows = 2 * n + 1;
        let x = Tensor::from_vec((0..rows as i64).collect(), &[rows]).unwrap();
        let s = parallel::shard(&x, &d).unwrap();
        assert_eq!(s.shape_string(), "[<=3]");
        let parts = parallel::replica_values::<i64>(&s).unwrap();
        assert_eq!(parts[0], vec![0, 1, 2]);
        assert_eq!(parts[1], vec![3, 4]);
        assert_eq!(parts.concat(), (0..rows as i64).collect::<Vec<_>>());
        // Per-replica sizes feed programs as they are: each replica sums
        // its own rows, then the replicas add up.
        let total = d.scoped(|| s.sum().all_reduce(ReduceOp::Sum));
        assert_eq!(total.item::<i64>().unwrap(), (rows * (rows - 1) / 2) as i64);
    }
}

backend_test! {
    fn the_printer_and_the_lowering_name_the_replicas() {
        let d = replicated();
        let n = d.replica_count();
        let x = per_replica(&d);
        let y = d.scoped(|| x.all_reduce(ReduceOp::Max) + x.all_gather(0).sum());
        let ir = lazyxla::debug::ir_text(&[&y]);
        assert!(ir.contains(&format!("all_reduce_max[replicas={n}]")), "{ir}");
        assert!(ir.contains(&format!("all_gather[dim=0 replicas={n}]")), "{ir}");
        assert!(ir.contains("replica_id"), "{ir}");
        let hlo = lazyxla::debug::stablehlo_text(&[&y]).unwrap();
        let group = (0..n).map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
        assert!(hlo.contains("\"stablehlo.all_reduce\""), "{hlo}");
        assert!(hlo.contains(&format!("replica_groups = dense<[[{group}]]>")), "{hlo}");
        assert!(hlo.contains("\"stablehlo.replica_id\""), "{hlo}");
    }
}
