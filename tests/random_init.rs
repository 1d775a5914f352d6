//! Random numbers drawn on the device (`rand_like`, `randn_like`,
//! `rand_sym`, `randn_sym`, `manual_seed`), in eager code and in captured
//! steps; `nn::init`; `Module::zero_grad`. Both backends.

mod common;

use lazyxla::nn::init::{self, FanMode};
use lazyxla::nn::{Linear, Module, Sequential, Tanh};
use lazyxla::{capture, manual_seed, mark_step, DType, SymInt, Tensor};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn mean_var(v: &[f32]) -> (f32, f32) {
    let n = v.len() as f32;
    let m = v.iter().sum::<f32>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / n)
}

backend_test! {
    fn draws_are_new_each_call_and_reproducible_from_a_seed() {
        let x = Tensor::zeros(&[500], DType::F32);
        manual_seed(3);
        let (a, b) = (f32s(&x.rand_like()), f32s(&x.rand_like()));
        assert_ne!(a, b, "each draw is new");
        assert!(a.iter().all(|v| (0.0..1.0).contains(v)));
        let (m, var) = mean_var(&a);
        assert!((m - 0.5).abs() < 0.05 && (var - 1.0 / 12.0).abs() < 0.02, "{m} {var}");
        manual_seed(3);
        assert_eq!(f32s(&x.rand_like()), a, "the same seed, the same draws");
        assert_eq!(f32s(&x.rand_like()), b);
        manual_seed(4);
        assert_ne!(f32s(&x.rand_like()), a);
        let z = f32s(&Tensor::zeros(&[4000], DType::F64).randn_like().to_dtype(DType::F32));
        let (m, var) = mean_var(&z);
        assert!(m.abs() < 0.06 && (var - 1.0).abs() < 0.08, "{m} {var}");
        // Integer tensors give F32 draws.
        assert_eq!(Tensor::zeros(&[2], DType::I64).rand_like().dtype(), DType::F32);
    }
}

backend_test! {
    fn a_captured_step_draws_new_numbers_every_replay() {
        let run = || {
            let mut step = capture(|x: &[Tensor]| vec![&x[0] + &x[0].randn_like()]);
            let x = Tensor::zeros(&[8], DType::F32);
            let outs: Vec<Vec<f32>> = (0..4).map(|_| f32s(&step.run(std::slice::from_ref(&x)).unwrap()[0])).collect();
            assert_eq!(step.recordings(), 1);
            outs
        };
        manual_seed(11);
        let first = run();
        for i in 1..4 {
            assert_ne!(first[i], first[i - 1], "replay {i} draws new numbers");
        }
        manual_seed(11);
        assert_eq!(run(), first, "manual_seed resets the captured state too");
    }
}

backend_test! {
    fn symbolic_shapes_are_drawn_at_their_real_size() {
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 0.0, 3.0], &[5]).unwrap();
        let n: SymInt = x.nonzero().size(0);
        let u = Tensor::rand_sym(&[n.clone(), SymInt::from(2)], DType::F32);
        assert_eq!(u.shape_string(), "[<=5, 2]");
        assert_eq!(u.to_vec::<f32>().unwrap().len(), 6);
        let z = Tensor::randn_sym(&[n], DType::F32);
        assert_eq!(z.size(0).materialize().unwrap(), 3);
        let dynamic = x.masked_select(&x.gt_scalar(0.5));
        assert_eq!(dynamic.rand_like().size(0).materialize().unwrap(), 3);
        mark_step().unwrap();
    }
}

backend_test! {
    fn init_functions_follow_torch() {
        manual_seed(5);
        let w = Tensor::zeros(&[64, 48], DType::F32).requires_grad(true);
        init::uniform_(&w, -0.3, 0.7);
        let v = f32s(&w);
        assert!(v.iter().all(|x| (-0.3..0.7).contains(x)));
        assert!((mean_var(&v).0 - 0.2).abs() < 0.02);
        init::normal_(&w, 1.0, 2.0);
        let (m, var) = mean_var(&f32s(&w));
        assert!((m - 1.0).abs() < 0.1 && (var - 4.0).abs() < 0.3, "{m} {var}");
        // Xavier: var = gain^2 * 2 / (fan_in + fan_out).
        init::xavier_uniform_(&w, 2.0);
        let bound = 2.0 * (6.0f32 / 112.0).sqrt();
        let v = f32s(&w);
        assert!(v.iter().all(|x| x.abs() <= bound) && v.iter().any(|x| x.abs() > 0.9 * bound));
        init::xavier_normal_(&w, 1.0);
        let (_, var) = mean_var(&f32s(&w));
        assert!((var - 2.0 / 112.0).abs() < 0.003, "{var}");
        // Kaiming: std = gain / sqrt(fan); conv weights count the kernel.
        let c = Tensor::zeros(&[16, 8, 3, 3], DType::F32);
        init::kaiming_normal_(&c, 0.0, FanMode::FanIn, "relu");
        let (_, var) = mean_var(&f32s(&c));
        assert!((var - 2.0 / 72.0).abs() < 0.005, "{var}");
        init::kaiming_uniform_(&c, 5f64.sqrt(), FanMode::FanOut, "leaky_relu");
        let bound = (1.0f32 / 3.0).sqrt() * (3.0f32 / 144.0).sqrt();
        let v = f32s(&c);
        assert!(v.iter().all(|x| x.abs() <= bound) && v.iter().any(|x| x.abs() > 0.9 * bound));
        // Still a leaf that trains.
        (&w * &w).sum().backward();
        assert!(w.grad().is_some());
        let msg = common::panic_message(|| {
            init::xavier_uniform_(&Tensor::zeros(&[3], DType::F32), 1.0);
        });
        assert!(msg.contains("at least 2 static dims"), "{msg}");
        let msg = common::panic_message(|| {
            init::kaiming_normal_(&w, 0.0, FanMode::FanIn, "swish");
        });
        assert!(msg.contains("unknown nonlinearity"), "{msg}");
    }
}

backend_test! {
    fn zero_grad_forgets_every_gradient_of_the_tree() {
        let net = Sequential::new().add(Linear::new(2, 3, 0)).add(Tanh).add(Linear::new(3, 1, 1));
        let head = Linear::new(1, 1, 2);
        let x = Tensor::ones(&[4, 2], DType::F32);
        head.forward(&net.forward(&x)).sum().backward();
        assert_eq!(net.parameters().len(), 4);
        assert!(net.parameters().iter().all(|p| p.grad().is_some()));
        net.zero_grad();
        assert!(net.parameters().iter().all(|p| p.grad().is_none()));
        assert!(head.parameters().iter().all(|p| p.grad().is_some()), "another module's are kept");
    }
}
