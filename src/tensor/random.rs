//! Random numbers drawn on the device from a seed state, as PyTorch's
//! global generator: [`manual_seed`], [`Tensor::rand_like`],
//! [`Tensor::randn_like`], [`Tensor::rand_sym`], [`Tensor::randn_sym`].
//!
//! Each draw is one `Op::RandomUniform` (a counter-based generator whose
//! values are identical on every backend) on a seed that advances with
//! every draw. Outside a captured step the seed is a fresh scalar per
//! draw (`manual_seed`'s value mixed with a draw counter); while a step
//! is recorded (`capture`) it is device state of the
//! step (one I64 scalar per device) that the step's program advances, so
//! every replay draws new numbers. [`manual_seed`] resets both, so a run
//! is reproducible.

use super::Tensor;
use crate::device::Device;
use crate::dtype::DType;
use crate::ir::Op;
use crate::symint::{Shape, SizeExpr};
use crate::SymInt;
use parking_lot::Mutex;
use smallvec::SmallVec;

/// The generator's state.
struct State {
    /// The seed given to [`manual_seed`].
    seed: u64,
    /// Draws outside captured steps since then.
    draws: u64,
    /// The device state of captured steps, one per device (by name).
    captured: Vec<(String, Tensor)>,
}

static STATE: Mutex<State> = Mutex::new(State {
    seed: 0x853c_49e6_748f_ea9b,
    draws: 0,
    captured: Vec::new(),
});

/// A 64-bit mix of `seed` and `k` (SplitMix64's finaliser).
fn mix(seed: u64, k: u64) -> i64 {
    let mut z = seed ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as i64
}

/// Seeds the generator that [`Tensor::rand_like`], [`Tensor::randn_like`],
/// [`Tensor::rand_sym`], [`Tensor::randn_sym`] and `nn::init` draw from,
/// as PyTorch's `torch.manual_seed`: the draws that follow are the same
/// in every run (and on every backend), in eager code and in captured
/// steps (whose device seed state is set back too).
///
/// ```
/// use lazyxla::Tensor;
/// let x = Tensor::zeros(&[4], lazyxla::DType::F32);
/// lazyxla::manual_seed(7);
/// let a = x.rand_like().to_vec::<f32>().unwrap();
/// lazyxla::manual_seed(7);
/// assert_eq!(x.rand_like().to_vec::<f32>().unwrap(), a);
/// ```
#[track_caller]
pub fn manual_seed(seed: u64) {
    let mut s = STATE.lock();
    s.seed = seed;
    s.draws = 0;
    for (_, t) in &s.captured {
        t.assign(&seed_on(mix(seed, u64::MAX), t.device()));
    }
}

/// The device seed state of captured steps on `device`, made if there is
/// none yet (before a step is recorded: a tensor the step made would be
/// one it leaks).
#[track_caller]
pub(crate) fn prepare_random_state(device: &Device) -> Tensor {
    let mut s = STATE.lock();
    let name = device.name().to_string();
    if let Some((_, t)) = s.captured.iter().find(|(n, _)| *n == name) {
        return t.clone();
    }
    let t = seed_on(mix(s.seed, u64::MAX), device);
    s.captured.push((name, t.clone()));
    t
}

/// The seed of the next draw on `device` (an I64 scalar there).
#[track_caller]
pub(crate) fn next_seed(device: &Device) -> Tensor {
    if super::capture_mode::capture_recording() {
        let state = prepare_random_state(device);
        // A new handle on the current value: `assign` changes the state
        // and its clones.
        let now = state.detach();
        state.assign(&(&now + 1));
        return now;
    }
    let mut s = STATE.lock();
    s.draws += 1;
    let seed = mix(s.seed, s.draws);
    drop(s);
    seed_on(seed, device)
}

/// An I64 scalar holding `v` on `device`.
#[track_caller]
fn seed_on(v: i64, device: &Device) -> Tensor {
    Tensor::from_vec_on(vec![v], &[], device).expect("one element fits shape []")
}

/// Uniform values in `[0, 1)` of `sizes` (dynamic sizes allowed: drawn at
/// their bounds and cropped), on `device`.
#[track_caller]
fn uniform(op: &'static str, sizes: &[SymInt], dtype: DType, device: &Device) -> Tensor {
    if !dtype.is_float() {
        panic!("{op}: random values are floats, {dtype} was asked for");
    }
    let bound: Shape = sizes
        .iter()
        .map(|s| {
            if s.upper_bound() < 0 {
                panic!("{op}: a size must not be negative, got {s}");
            }
            SizeExpr::constant(s.upper_bound())
        })
        .collect();
    let seed = next_seed(device);
    let mut u = Tensor::try_apply_on(
        Op::RandomUniform {
            dtype,
            shape: bound,
        },
        &[&seed],
        SmallVec::new(),
        device,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (d, s) in sizes.iter().enumerate() {
        if s.is_dynamic() {
            u = u.slice_sym(d, 0, s);
        }
    }
    u
}

/// Standard normal values from two uniform draws (Box-Muller).
#[track_caller]
fn normal(op: &'static str, sizes: &[SymInt], dtype: DType, device: &Device) -> Tensor {
    let u1 = uniform(op, sizes, dtype, device);
    let u2 = uniform(op, sizes, dtype, device);
    // `1 - u` is in (0, 1]: its log is finite.
    let r = (&u1.neg() + 1.0).log().mul_scalar(-2.0).sqrt();
    &r * &u2.mul_scalar(2.0 * std::f64::consts::PI).cos()
}

impl Tensor {
    /// Uniform random values in `[0, 1)` with this tensor's shape (dynamic
    /// sizes included), float dtype (F32 for an integer or bool tensor)
    /// and device, drawn on the device as PyTorch's `torch.rand_like`;
    /// see [`manual_seed`](crate::manual_seed). In a captured step every
    /// replay draws new values.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let u = Tensor::zeros(&[1000], DType::F32).rand_like();
    /// let v = u.to_vec::<f32>().unwrap();
    /// assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
    /// let mean = v.iter().sum::<f32>() / 1000.0;
    /// assert!((mean - 0.5).abs() < 0.05);
    /// ```
    #[track_caller]
    pub fn rand_like(&self) -> Tensor {
        uniform(
            "rand_like",
            &self.sizes(),
            self.float_dtype(),
            self.device(),
        )
    }

    /// Standard normal random values with this tensor's shape, float
    /// dtype and device, drawn on the device as `torch.randn_like`.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let v = Tensor::zeros(&[2000], DType::F32).randn_like().to_vec::<f32>().unwrap();
    /// let mean = v.iter().sum::<f32>() / 2000.0;
    /// let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / 2000.0;
    /// assert!(mean.abs() < 0.1 && (var - 1.0).abs() < 0.15);
    /// ```
    #[track_caller]
    pub fn randn_like(&self) -> Tensor {
        normal(
            "randn_like",
            &self.sizes(),
            self.float_dtype(),
            self.device(),
        )
    }

    /// Uniform random values in `[0, 1)` of `sizes`, which may be dynamic
    /// (`x.size(0)` of a tensor of dynamic size), drawn on the default
    /// device; see [`rand_like`](Tensor::rand_like).
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![3.0f32, 0.0, 5.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // 2, known when the program runs
    /// let u = Tensor::rand_sym(&[n, 4.into()], DType::F32);
    /// assert_eq!(u.shape_string(), "[<=3, 4]");
    /// assert_eq!(u.to_vec::<f32>().unwrap().len(), 8);
    /// ```
    #[track_caller]
    pub fn rand_sym(sizes: &[SymInt], dtype: DType) -> Tensor {
        uniform("rand_sym", sizes, dtype, &Device::default())
    }

    /// Standard normal random values of `sizes` (dynamic allowed), drawn
    /// on the default device; see [`randn_like`](Tensor::randn_like).
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let z = Tensor::randn_sym(&[3.into(), 2.into()], DType::F64);
    /// assert_eq!(z.shape_string(), "[3, 2]");
    /// assert_eq!(z.dtype(), DType::F64);
    /// ```
    #[track_caller]
    pub fn randn_sym(sizes: &[SymInt], dtype: DType) -> Tensor {
        normal("randn_sym", sizes, dtype, &Device::default())
    }

    /// This tensor's dtype if float, else F32.
    fn float_dtype(&self) -> DType {
        match self.dtype() {
            d if d.is_float() => d,
            _ => DType::F32,
        }
    }
}
