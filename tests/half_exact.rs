//! With XLA's excess precision turned off
//! (`XLA_FLAGS=--xla_allow_excess_precision=false`), the XLA backend
//! rounds every half op as the reference backend does: correctly rounded
//! ops (`+ - * /`, `sqrt`) agree bit for bit. (Transcendentals differ
//! where XLA's f32 approximations differ from Rust's by an ulp, and
//! reductions where their f32 sums are taken in another order; and on
//! CPUs with half arithmetic a product feeding a sum, which XLA fuses into
//! one multiply-add, and a division by a constant, which it turns into a
//! product.) (By default XLA may keep f32 between fused half ops, as in
//! JAX; `tests/half.rs` covers that with a tolerance.) One test in its own
//! binary, since XLA reads `XLA_FLAGS` once, when the plugin starts.

mod common;

use lazyxla::{DType, Device, Tensor};

#[test]
fn xla_without_excess_precision_equals_the_reference() {
    let flags = std::env::var("XLA_FLAGS").unwrap_or_default();
    if !flags.contains("xla_allow_excess_precision") {
        std::env::set_var(
            "XLA_FLAGS",
            format!("{flags} --xla_allow_excess_precision=false"),
        );
    }
    let Some(pjrt) = common::pjrt_device() else {
        return;
    };
    let mut rng = common::Lcg(5);
    let a = rng.floats(32 * 16);
    for dtype in [DType::BF16, DType::F16] {
        let run = |d: &Device| {
            d.scoped(|| {
                let x = Tensor::from_vec(a.clone(), &[32, 16])
                    .unwrap()
                    .to_dtype(dtype);
                // On a CPU with half arithmetic (AVX512-FP16) XLA contracts
                // `a * b + c` into one fused multiply-add, rounded once, and
                // divides by a constant as a product with its rounded
                // reciprocal: so no rounded product feeds a sum (`x * 4` is
                // exact) and divisors are tensors.
                let h = &x * 4.0 - 2.0;
                let p = (&(&h * 3.7) * &h).sqrt();
                let y = &(&p + &x) / &(&x + 0.77) - &h;
                let z = (&y / &(&x + 0.5)).maximum(&h) - 0.1;
                (
                    y.to_dtype(DType::F32).to_vec::<f32>().unwrap(),
                    z.to_dtype(DType::F32).to_vec::<f32>().unwrap(),
                )
            })
        };
        let reference = run(&Device::reference());
        let xla = run(&pjrt);
        assert_eq!(xla.0, reference.0, "{dtype}");
        assert_eq!(xla.1, reference.1, "{dtype}");
    }
}
