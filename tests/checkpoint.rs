//! Checkpoints: safetensors round trips of every dtype, PyTorch's own
//! file of a small ResNet giving PyTorch's logits in lazyxla, and
//! `load_state_dict`'s errors (which change nothing).

mod common;

#[allow(dead_code)]
#[path = "../examples/models/resnet.rs"]
mod resnet;

use common::assert_close;
use lazyxla::nn::{self, Linear, Module};
use lazyxla::{safetensors, DType, Tensor};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn get<'a>(named: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &named
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .1
}

backend_test! {
    fn every_dtype_round_trips() {
        let x = Tensor::from_vec(vec![1.5f32, -2.0, f32::NAN, 0.0], &[2, 2]).unwrap();
        let named = vec![
            ("f32".to_string(), &x * 2.0),
            ("f64".into(), Tensor::from_vec(vec![1e300f64, -0.5], &[2]).unwrap()),
            ("i32".into(), Tensor::from_vec(vec![i32::MIN, 7], &[1, 2]).unwrap()),
            ("i64".into(), Tensor::from_vec(vec![i64::MAX], &[]).unwrap()),
            ("bool".into(), x.gt_scalar(0.0)),
            // A dynamic value is written at its real size.
            ("selected".into(), x.masked_select(&x.lt_scalar(1.0))),
            ("empty".into(), Tensor::zeros(&[0, 3], DType::F32)),
        ];
        let scratch = common::scratch();
        let path = scratch.path().join("all.safetensors");
        safetensors::save(&path, &named).unwrap();
        let back = safetensors::load(&path).unwrap();
        assert_eq!(back.len(), named.len());
        for (name, t) in &named {
            let b = get(&back, name);
            assert_eq!(b.dtype(), t.dtype(), "{name}");
            assert_eq!(b.concrete_shape().unwrap(), t.concrete_shape().unwrap(), "{name}");
            let f64s = |t: &Tensor| t.to_dtype(DType::F64).to_vec::<f64>().unwrap();
            let (got, want) = (f64s(b), f64s(t));
            let same = got.iter().zip(&want).all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
            assert!(same, "{name}: {got:?} vs {want:?}");
        }
        assert_eq!(get(&back, "i64").to_vec::<i64>().unwrap(), vec![i64::MAX]);
        let err = safetensors::save(&path, &[("a".into(), x.clone()), ("a".into(), x)]).unwrap_err();
        assert!(err.to_string().contains("\"a\""), "{err}");
        let err = safetensors::load(scratch.path().join("missing.safetensors")).unwrap_err();
        assert!(err.to_string().contains("missing.safetensors"), "{err}");
    }
}

backend_test! {
    fn a_pytorch_checkpoint_gives_pytorchs_logits() {
        // Written by `safetensors.torch.save_file` (tests/fixtures/gen_checkpoint.py).
        let state = safetensors::load(fixture("resnet_checkpoint.safetensors")).unwrap();
        let io = safetensors::load(fixture("resnet_checkpoint_io.safetensors")).unwrap();
        let model = resnet::SmallResNet::new(10, 1);
        nn::load_state_dict(&model, &state, true).unwrap();
        model.train(false);
        let logits = lazyxla::no_grad(|| model.forward(get(&io, "x")));
        let want = get(&io, "logits").to_vec::<f32>().unwrap();
        assert_close(&logits.to_vec::<f32>().unwrap(), &want, 1e-5);

        // Saved by lazyxla and loaded again: the same model.
        let mut named = model.named_parameters();
        named.extend(model.named_buffers());
        let scratch = common::scratch();
        let path = scratch.path().join("resnet.safetensors");
        safetensors::save(&path, &named).unwrap();
        if let Ok(out) = std::env::var("LAZYXLA_WRITE_CHECKPOINT") {
            // For `gen_checkpoint.py --check`: PyTorch reads lazyxla's file.
            std::fs::copy(&path, out).unwrap();
        }
        let again = resnet::SmallResNet::new(10, 2);
        nn::load_state_dict(&again, &safetensors::load(&path).unwrap(), true).unwrap();
        again.train(false);
        let logits = lazyxla::no_grad(|| again.forward(get(&io, "x")));
        assert_close(&logits.to_vec::<f32>().unwrap(), &want, 1e-5);
    }
}

backend_test! {
    fn a_bad_state_dict_changes_nothing() {
        let model = Linear::new(3, 2, 0);
        let before: Vec<Vec<f32>> =
            model.parameters().iter().map(|p| p.to_vec::<f32>().unwrap()).collect();
        let unchanged = || {
            for (p, b) in model.parameters().iter().zip(&before) {
                assert_eq!(&p.to_vec::<f32>().unwrap(), b);
            }
        };
        let bias = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        // The bias is right, the weight has the wrong shape: neither loads.
        let wrong = Tensor::from_vec(vec![0.0f32; 6], &[3, 2]).unwrap();
        let named = vec![("bias".to_string(), bias.clone()), ("weight".into(), wrong)];
        let err = nn::load_state_dict(&model, &named, false).unwrap_err().to_string();
        assert!(err.contains("\"weight\"") && err.contains("[3, 2]") && err.contains("[2, 3]"), "{err}");
        unchanged();
        let wrong = Tensor::from_vec(vec![0.0f64; 6], &[2, 3]).unwrap();
        let err = nn::load_state_dict(&model, &[("weight".into(), wrong)], false).unwrap_err();
        assert!(err.to_string().contains("f64") && err.to_string().contains("f32"), "{err}");
        // Strict: a missing and an unexpected key are both named.
        let named = vec![("bias".to_string(), bias.clone()), ("extra".into(), bias.clone())];
        let err = nn::load_state_dict(&model, &named, true).unwrap_err().to_string();
        assert!(err.contains("weight") && err.contains("extra"), "{err}");
        unchanged();
        // Not strict: the bias alone loads.
        nn::load_state_dict(&model, &named, false).unwrap();
        assert_eq!(model.parameters()[1].to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        assert_eq!(model.parameters()[0].to_vec::<f32>().unwrap(), before[0]);
    }
}
