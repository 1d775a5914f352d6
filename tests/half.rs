//! Half precision: `DType::F16` and `DType::BF16` on both backends. Round
//! trips, arithmetic against the host computation rounded to the half
//! type, PyTorch's promotion, matmul and conv2d against f32, gradients,
//! safetensors and a small mixed-precision training loop.

mod common;

use common::assert_close;
use half::{bf16, f16};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, safetensors, DType, Tensor};

fn bf(v: &[f32]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f32(x)).collect()
}

fn hf(v: &[f32]) -> Vec<f16> {
    v.iter().map(|&x| f16::from_f32(x)).collect()
}

fn read_f32(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).to_vec::<f32>().unwrap()
}

/// Tolerances (relative, as `assert_close`) of one rounding in each type.
const BF16_TOL: f32 = 1.0 / 128.0;
const F16_TOL: f32 = 1.0 / 1024.0;

backend_test! {
    fn round_trips() {
        let v = [1.0f32, -2.5, 3.140625, 0.0, 65504.0, 1e-3];
        let b = Tensor::from_vec(bf(&v), &[2, 3]).unwrap();
        assert_eq!(b.dtype(), DType::BF16);
        assert_eq!(b.to_vec::<bf16>().unwrap(), bf(&v));
        let h = Tensor::from_vec(hf(&v), &[6]).unwrap();
        assert_eq!(h.dtype(), DType::F16);
        assert_eq!(h.to_vec::<f16>().unwrap(), hf(&v));
        // to_dtype both ways: f32 -> half rounds to nearest, half -> f32
        // is exact.
        let f = Tensor::from_vec(v.to_vec(), &[6]).unwrap();
        assert_eq!(f.to_dtype(DType::BF16).to_vec::<bf16>().unwrap(), bf(&v));
        assert_eq!(f.to_dtype(DType::F16).to_vec::<f16>().unwrap(), hf(&v));
        let back: Vec<f32> = bf(&v).iter().map(|x| x.to_f32()).collect();
        assert_eq!(read_f32(&b.reshape(&[6])), back);
        assert_eq!(
            b.to_dtype(DType::F16).to_vec::<f16>().unwrap(),
            back.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>()
        );
        assert_eq!(
            h.to_dtype(DType::F64).to_vec::<f64>().unwrap(),
            hf(&v).iter().map(|x| x.to_f64()).collect::<Vec<_>>()
        );
        assert_eq!(
            h.to_dtype(DType::I64).to_vec::<i64>().unwrap(),
            vec![1, -2, 3, 0, 65504, 0]
        );
        let i = Tensor::from_vec(vec![1i64, -7, 300], &[3]).unwrap();
        assert_eq!(
            i.to_dtype(DType::BF16).to_vec::<bf16>().unwrap(),
            bf(&[1.0, -7.0, 300.0])
        );
        assert_eq!(Tensor::zeros(&[2], DType::F16).to_vec::<f16>().unwrap(), hf(&[0.0, 0.0]));
        assert_eq!(
            Tensor::full(&[1], 2.5, DType::BF16).item::<bf16>().unwrap(),
            bf16::from_f32(2.5)
        );
    }
}

backend_test! {
    fn arithmetic_rounds_to_the_half_type() {
        let mut rng = common::Lcg(7);
        let a = rng.floats(64);
        let b = rng.floats(64);
        for (dtype, tol) in [(DType::BF16, BF16_TOL), (DType::F16, F16_TOL)] {
            // Host: the operands rounded to the half type, each op in f32
            // and rounded again.
            let round = |x: f32| match dtype {
                DType::BF16 => bf16::from_f32(x).to_f32(),
                _ => f16::from_f32(x).to_f32(),
            };
            let ah: Vec<f32> = a.iter().map(|&x| round(x)).collect();
            let bh: Vec<f32> = b.iter().map(|&x| round(x)).collect();
            let ta = Tensor::from_vec(a.clone(), &[64]).unwrap().to_dtype(dtype);
            let tb = Tensor::from_vec(b.clone(), &[64]).unwrap().to_dtype(dtype);
            let y = (&(&ta * &tb) + &ta).exp() * 0.5;
            assert_eq!(y.dtype(), dtype);
            let want: Vec<f32> = ah
                .iter()
                .zip(&bh)
                .map(|(&x, &z)| round(round(round(round(x * z) + x).exp()) * 0.5))
                .collect();
            assert_close(&read_f32(&y), &want, tol);
            // A sum accumulates in f32 and rounds once.
            let s = ta.sum();
            assert_eq!(s.dtype(), dtype);
            let want_s = round(ah.iter().sum::<f32>());
            assert_close(&read_f32(&s), &[want_s], tol);
            // Comparisons, max and relu stay exact.
            let m = ta.maximum(&tb);
            let want_m: Vec<f32> = ah.iter().zip(&bh).map(|(x, z)| x.max(*z)).collect();
            assert_eq!(read_f32(&m), want_m);
            let gt = ta.gt(&tb).to_vec::<bool>().unwrap();
            assert_eq!(gt, ah.iter().zip(&bh).map(|(x, z)| x > z).collect::<Vec<_>>());
        }
    }
}

backend_test! {
    fn promotion_follows_pytorch() {
        let b = Tensor::from_vec(bf(&[1.0, 2.0]), &[2]).unwrap();
        let h = Tensor::from_vec(hf(&[1.0, 2.0]), &[2]).unwrap();
        let f = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let d = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
        let i = Tensor::from_vec(vec![1i64, 2], &[2]).unwrap();
        let f0 = Tensor::from_vec(vec![3.0f32], &[]).unwrap();
        assert_eq!((&b + &f).dtype(), DType::F32);
        assert_eq!((&h + &f).dtype(), DType::F32);
        assert_eq!((&h + &b).dtype(), DType::F32);
        assert_eq!((&b + &d).dtype(), DType::F64);
        assert_eq!((&b + &i).dtype(), DType::BF16);
        assert_eq!((&h + &i).dtype(), DType::F16);
        // A Rust number or a zero-dim float tensor does not widen a half.
        assert_eq!((&b * 2.5).dtype(), DType::BF16);
        assert_eq!((&h + 1.0).dtype(), DType::F16);
        assert_eq!((&b + &f0).dtype(), DType::BF16);
        assert_eq!((&h / &f0).dtype(), DType::F16);
        // Zero-dim half and an int tensor: the half's category wins.
        let b0 = Tensor::from_vec(bf(&[3.0]), &[]).unwrap();
        assert_eq!((&i + &b0).dtype(), DType::BF16);
        assert_eq!(read_f32(&(&h + &b)), vec![2.0, 4.0]);
        assert_eq!(read_f32(&(&b * 2.5)), vec![2.5, 5.0]);
    }
}

backend_test! {
    fn matmul_and_conv2d_in_bf16_match_f32() {
        let mut rng = common::Lcg(11);
        let a = rng.floats(8 * 32);
        let b = rng.floats(32 * 5);
        let fa = Tensor::from_vec(a, &[8, 32]).unwrap();
        let fb = Tensor::from_vec(b, &[32, 5]).unwrap();
        let want = fa.matmul(&fb).to_vec::<f32>().unwrap();
        let got = fa.to_dtype(DType::BF16).matmul(&fb.to_dtype(DType::BF16));
        assert_eq!(got.dtype(), DType::BF16);
        // Operands rounded (2^-8 each) over 32 terms, then the result.
        let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
        for (g, w) in read_f32(&got).iter().zip(&want) {
            assert!((g - w).abs() <= 0.02 * scale, "{g} vs {w}");
        }

        let x = rng.floats(2 * 3 * 6 * 6);
        let w = rng.floats(4 * 3 * 3 * 3);
        let fx = Tensor::from_vec(x, &[2, 3, 6, 6]).unwrap();
        let fw = Tensor::from_vec(w, &[4, 3, 3, 3]).unwrap();
        let want = fx.conv2d(&fw, None, (1, 1), (1, 1), (1, 1), 1).to_vec::<f32>().unwrap();
        let got = fx
            .to_dtype(DType::BF16)
            .conv2d(&fw.to_dtype(DType::BF16), None, (1, 1), (1, 1), (1, 1), 1);
        assert_eq!(got.dtype(), DType::BF16);
        let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
        for (g, w) in read_f32(&got).iter().zip(&want) {
            assert!((g - w).abs() <= 0.02 * scale, "{g} vs {w}");
        }
    }
}

backend_test! {
    fn gradients_flow_in_bf16() {
        let w = Tensor::from_vec(bf(&[3.0, -1.5, 0.25]), &[3])
            .unwrap()
            .requires_grad(true);
        (&w * &w).sum().backward();
        let g = w.grad().unwrap();
        assert_eq!(g.dtype(), DType::BF16);
        assert_eq!(g.to_vec::<bf16>().unwrap(), bf(&[6.0, -3.0, 0.5]));
        // Through a cast: an f32 leaf gets an f32 gradient.
        let v = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap().requires_grad(true);
        (v.to_dtype(DType::F16) * 3.0).sum().backward();
        let g = v.grad().unwrap();
        assert_eq!(g.dtype(), DType::F32);
        assert_eq!(g.to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
    }
}

#[test]
fn safetensors_round_trips_halves() {
    let dir = common::scratch();
    let path = dir.path().join("halves.safetensors");
    let b = Tensor::from_vec(bf(&[1.0, -2.0, 0.1, 3e38]), &[2, 2]).unwrap();
    let h = Tensor::from_vec(hf(&[0.5, -65504.0, 1e-4]), &[3]).unwrap();
    safetensors::save(&path, &[("b".into(), b.clone()), ("h".into(), h.clone())]).unwrap();
    let back = safetensors::load(&path).unwrap();
    assert_eq!(back[0].0, "b");
    assert_eq!(back[0].1.dtype(), DType::BF16);
    assert_eq!(back[0].1.upper_bounds(), vec![2, 2]);
    assert_eq!(
        back[0].1.to_vec::<bf16>().unwrap(),
        b.to_vec::<bf16>().unwrap()
    );
    assert_eq!(back[1].0, "h");
    assert_eq!(back[1].1.dtype(), DType::F16);
    assert_eq!(
        back[1].1.to_vec::<f16>().unwrap(),
        h.to_vec::<f16>().unwrap()
    );
}

backend_test! {
    fn bf16_training_loop_loss_falls() {
        // y = x @ w_true; f32 weights, forward and backward in bf16.
        let mut rng = common::Lcg(3);
        let xs: Vec<f32> = rng.floats(16 * 4).iter().map(|v| 2.0 * v - 1.0).collect();
        let x = Tensor::from_vec(xs, &[16, 4]).unwrap();
        let w_true = Tensor::from_vec(vec![1.0f32, -2.0, 0.5, 3.0], &[4, 1]).unwrap();
        let y = x.matmul(&w_true).to_dtype(DType::BF16);
        let xb = x.to_dtype(DType::BF16);
        let w = Tensor::zeros(&[4, 1], DType::F32).requires_grad(true);
        let mut opt = Sgd::new(vec![w.clone()], 0.3);
        let mut losses = Vec::new();
        for _ in 0..30 {
            opt.zero_grad();
            let pred = xb.matmul(&w.to_dtype(DType::BF16));
            let diff = &pred - &y;
            let loss = (&diff * &diff).mean();
            assert_eq!(loss.dtype(), DType::BF16);
            loss.backward();
            assert_eq!(w.grad().unwrap().dtype(), DType::F32);
            opt.step();
            mark_step().unwrap();
            losses.push(loss.to_dtype(DType::F32).item::<f32>().unwrap());
        }
        assert_eq!(w.dtype(), DType::F32);
        assert!(
            losses[29] < 0.1 * losses[0],
            "loss did not fall: {losses:?}"
        );
    }
}

backend_test! {
    fn optimizers_update_half_parameters() {
        for dtype in [DType::BF16, DType::F16] {
            let w = Tensor::from_vec(vec![1.0f32, -2.0], &[2])
                .unwrap()
                .to_dtype(dtype)
                .detach()
                .requires_grad(true);
            let u = w.detach().requires_grad(true);
            let mut sgd = Sgd::new(vec![w.clone()], 0.25).momentum(0.5);
            let mut adam = lazyxla::optim::Adam::new(vec![u.clone()], 0.5);
            for _ in 0..2 {
                sgd.zero_grad();
                adam.zero_grad();
                (&w * &w).sum().backward();
                (&u * &u).sum().backward();
                sgd.step();
                adam.step();
                mark_step().unwrap();
            }
            assert_eq!(w.dtype(), dtype);
            assert_eq!(u.dtype(), dtype);
            // SGD with momentum: w1 = w0 - 0.25 * 2 w0 = 0.5 w0; then
            // v = 0.5 * 2 w0 + 2 w1 = 2 w0, w2 = w1 - 0.5 w0 = 0.
            assert_eq!(read_f32(&w), vec![0.0, 0.0]);
            // Adam moves each weight by about lr a step, toward zero.
            let got = read_f32(&u);
            assert!((got[0] - 0.0).abs() < 0.05 && (got[1] + 1.0).abs() < 0.05, "{got:?}");
        }
    }
}

backend_test! {
    fn dynamic_half_tensors() {
        let host: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
        let x = Tensor::from_vec(host.clone(), &[4, 3])
            .unwrap()
            .to_dtype(DType::BF16)
            .mark_dynamic(0, 8);
        assert!(x.is_dynamic());
        let s = x.sum_dims(&[0], false);
        assert_eq!(read_f32(&s), vec![9.0, 11.0, 13.0]);
        // Reductions over the dynamic dim read their identity in its
        // padding (filled in the half type, read widened to f32).
        let m = x.neg().max_dims(&[0], false);
        assert_eq!(read_f32(&m), vec![0.0, -0.5, -1.0]);
        let a = x.neg().argmax(0);
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![0, 0, 0]);
        let g = x.transpose(0, 1).matmul(&x); // contracts the dynamic dim
        assert_eq!(read_f32(&g)[..3], [31.5, 36.0, 40.5]);
        let w = Tensor::ones(&[3, 2], DType::BF16);
        let y = x.matmul(&w);
        assert_eq!(y.dtype(), DType::BF16);
        assert_eq!(read_f32(&y), vec![1.5, 1.5, 6.0, 6.0, 10.5, 10.5, 15.0, 15.0]);
    }
}

#[test]
fn half_tensors_print() {
    let b = Tensor::from_vec(bf(&[1.5, -2.0]), &[2]).unwrap();
    let s = b.to_string();
    assert!(
        s.contains("1.5000") && s.contains("-2.0000") && s.contains("bf16"),
        "{s}"
    );
    let h = Tensor::from_vec(hf(&[1.0, 2.0]), &[2]).unwrap();
    assert!(h.to_string().contains("f16"), "{}", h);
}

#[test]
fn xla_accumulates_half_products_in_f32() {
    let a = Tensor::ones(&[4, 8], DType::BF16);
    let b = Tensor::ones(&[8, 2], DType::BF16);
    let x = Tensor::ones(&[1, 2, 5, 5], DType::F16);
    let w = Tensor::ones(&[3, 2, 3, 3], DType::F16);
    let y = a.matmul(&b);
    let z = x.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1);
    let s = a.sum();
    let text = lazyxla::debug::stablehlo_text(&[&y, &z, &s]).unwrap();
    let line = |op: &str| {
        text.lines()
            .find(|l| l.contains(op))
            .unwrap_or_else(|| panic!("no {op} in\n{text}"))
            .to_string()
    };
    for op in ["dot_general", "convolution"] {
        let l = line(op);
        assert!(l.contains("f32") && !l.contains("f16"), "{l}");
    }
    // The sum's reduction runs over the f32 widening of the operand.
    assert!(
        text.contains("(tensor<4x8xf32>, tensor<f32>) -> tensor<f32>"),
        "{text}"
    );
    assert!(
        text.contains("tensor<4x2xbf16>") && text.contains("xf16>"),
        "{text}"
    );
}

backend_test! {
    fn ops_on_halves_match_f32_within_a_rounding() {
        let mut rng = common::Lcg(19);
        let v: Vec<f32> = rng.floats(2 * 4 * 4).iter().map(|x| 4.0 * x - 2.0).collect();
        for (dtype, tol) in [(DType::BF16, BF16_TOL), (DType::F16, F16_TOL)] {
            let h = Tensor::from_vec(v.clone(), &[2, 1, 4, 4]).unwrap().to_dtype(dtype);
            // The same values in f32: the half's exact widening.
            let f = h.to_dtype(DType::F32);
            let idx = Tensor::from_vec(vec![3i64, 0, 2], &[3]).unwrap();
            type Case = (&'static str, fn(&Tensor, &Tensor) -> Tensor, f32);
            let cases: [Case; 12] = [
                ("softmax", |x, _| x.softmax(-1), 2.0),
                ("log_softmax", |x, _| x.log_softmax(-1), 4.0),
                ("cumsum", |x, _| x.cumsum(-1), 4.0),
                ("mean_dims", |x, _| x.mean_dims(&[2, 3], false), 2.0),
                ("var", |x, _| x.var(-1, false), 4.0),
                ("max_pool2d", |x, _| x.max_pool2d((2, 2), (2, 2), (0, 0)), 0.0),
                ("avg_pool2d", |x, _| x.avg_pool2d((2, 2), (1, 1), (0, 0)), 2.0),
                ("sort", |x, _| x.sort(-1, true).0, 0.0),
                ("topk", |x, _| x.topk(2, -1, true).0, 0.0),
                ("index_select", |x, i| x.index_select(-1, i), 0.0),
                ("masked_fill", |x, _| x.masked_fill(&x.gt_scalar(0.5), -1.0), 0.0),
                ("gelu", |x, _| x.gelu(), 2.0),
            ];
            for (name, op, k) in cases {
                let got = op(&h, &idx);
                assert_eq!(got.dtype(), dtype, "{name}");
                let want = op(&f, &idx).to_vec::<f32>().unwrap();
                let got = read_f32(&got);
                let ok = got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| (g - w).abs() <= k.max(1.0) * tol * (1.0 + w.abs()));
                assert!(ok, "{name} {dtype}: {got:?} vs {want:?}");
            }
            assert_eq!(
                h.argmax(-1).to_vec::<i64>().unwrap(),
                f.argmax(-1).to_vec::<i64>().unwrap()
            );
            assert_eq!(
                h.argsort(-1, false).to_vec::<i64>().unwrap(),
                f.argsort(-1, false).to_vec::<i64>().unwrap()
            );
        }
    }
}
