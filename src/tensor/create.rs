//! Creating tensors. Nothing runs: host data is copied to the device, and
//! constant-filled tensors are recorded as ops.

use super::sym_int::anchors_of;
use super::{size_deps_for, Tensor};
use crate::device::Device;
use crate::dtype::DType;
use crate::host::Element;
use crate::host::HostArray;
use crate::ir::{Lit, Node, Op};
use crate::runtime::device_data::DeviceData;
use crate::symint::{Shape, SizeExpr};
use crate::SymInt;
use crate::{Error, Result};
use ndarray::ArrayD;
use smallvec::SmallVec;
use std::sync::Arc;

impl Tensor {
    /// A tensor holding `data` (row-major) with `shape`, on the default
    /// device.
    ///
    /// ```
    /// let t = lazyxla::Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]).unwrap();
    /// assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4]);
    /// ```
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        Tensor::from_vec_on(data, shape, &Device::default())
    }

    /// [`from_vec`](Tensor::from_vec) on a chosen device.
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// let t = Tensor::from_vec_on(vec![1.0f32, 2.0], &[2], &Device::reference()).unwrap();
    /// assert_eq!(t.device().name(), Device::reference().name());
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn from_vec_on<T: Element>(
        data: Vec<T>,
        shape: &[usize],
        device: &Device,
    ) -> Result<Tensor> {
        check_fills("from_vec", data.len(), shape)?;
        let a = ArrayD::from_shape_vec(ndarray::IxDyn(shape), data)
            .map_err(|e| Error::invalid("from_vec", e.to_string()))?;
        Tensor::from_host(T::into_host(a), device)
    }

    /// A tensor copied from a slice: the one copy this data needs, where
    /// `from_vec(data.to_vec(), ..)` makes two (the plugin copies a `Vec`
    /// again when it uploads it; large data copied here is laid out so
    /// that a CPU plugin uses it in place).
    ///
    /// ```
    /// let data = vec![1.0f32; 4096 * 16];
    /// let t = lazyxla::Tensor::from_slice(&data, &[4096, 16]).unwrap();
    /// assert_eq!(t.sum().item::<f32>().unwrap(), 65536.0);
    /// ```
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_slice_on(data, shape, &Device::default())
    }

    /// [`from_slice`](Tensor::from_slice) on a chosen device.
    ///
    /// ```
    /// use lazyxla::{Device, Tensor};
    /// let t = Tensor::from_slice_on(&[1i32, 2, 3], &[3], &Device::reference()).unwrap();
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn from_slice_on<T: Element>(
        data: &[T],
        shape: &[usize],
        device: &Device,
    ) -> Result<Tensor> {
        check_fills("from_slice", data.len(), shape)?;
        let a = crate::host::aligned_copy(data, shape)
            .ok_or_else(|| Error::invalid("from_slice", format!("shape {shape:?}")))?;
        Tensor::from_host(T::into_host(a), device)
    }

    /// A tensor of rank 0 holding `v` (device data, so changing `v` between
    /// steps does not recompile).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let s = lazyxla::Tensor::scalar(2.5f32);
    /// assert_eq!(s.rank(), 0);
    /// assert_eq!(s.item::<f32>().unwrap(), 2.5);
    /// ```
    #[track_caller]
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::from_vec(vec![v], &[]).expect("one element fits shape []")
    }

    /// A static tensor of exact host data (uploaded when first needed).
    #[track_caller]
    pub(crate) fn from_host(host: HostArray, device: &Device) -> Result<Tensor> {
        let shape: Vec<usize> = host.shape().to_vec();
        let dtype = host.dtype();
        let exprs = static_shape(&shape);
        let data = DeviceData::from_host(
            device.clone(),
            Arc::new(host),
            shape.clone(),
            smallvec::smallvec![None; shape.len()],
        );
        let t = Tensor::data(device, dtype, exprs, data);
        Ok(t.automatic_dynamic(std::panic::Location::caller()))
    }

    /// A tensor backed by device data.
    #[track_caller]
    pub(crate) fn data(device: &Device, dtype: DType, shape: Shape, data: DeviceData) -> Tensor {
        Tensor::from_node(
            crate::runtime::device_data::leaf(dtype, shape, data),
            device,
        )
    }

    /// A tensor of `shape` filled with `value` (recorded, not uploaded).
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// assert_eq!(Tensor::full(&[2, 2], 7.0, DType::F32).to_vec::<f32>().unwrap(), vec![7.0; 4]);
    /// ```
    #[track_caller]
    pub fn full(shape: &[usize], value: f64, dtype: DType) -> Tensor {
        let exprs = static_shape(shape);
        Tensor::full_exprs(exprs, value, dtype, SmallVec::new(), &Device::default())
    }

    /// Zeros.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// assert_eq!(Tensor::zeros(&[3], DType::I64).to_vec::<i64>().unwrap(), vec![0, 0, 0]);
    /// ```
    #[track_caller]
    pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full(shape, 0.0, dtype)
    }

    /// Ones.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// assert_eq!(Tensor::ones(&[2], DType::F32).to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn ones(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full(shape, 1.0, dtype)
    }

    /// A tensor of `sizes` filled with `value`, where sizes may be dynamic
    /// (`x.size(0)` of a `nonzero()` result, sums and products of sizes):
    /// the result's dims are dynamic with those sizes' bounds. Nothing runs.
    ///
    /// Panics when a size is always negative. A size that may be negative
    /// (`n - 2`) is taken as 0 when it is.
    ///
    /// ```
    /// use lazyxla::{DType, SymInt, Tensor};
    /// let x = Tensor::from_vec(vec![3.0f32, 0.0, 5.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // 2, at most 3
    /// let t = Tensor::full_sym(&[n, SymInt::from(2)], 7.0, DType::F32);
    /// assert_eq!(t.shape_string(), "[<=3, 2]");
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![7.0; 4]);
    /// ```
    #[track_caller]
    pub fn full_sym(sizes: &[SymInt], value: f64, dtype: DType) -> Tensor {
        Tensor::filled("full_sym", sizes, value, dtype)
    }

    /// Zeros of `sizes`, which may be dynamic (see
    /// [`full_sym`](Tensor::full_sym)).
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1i64, 0, 4, 2], &[4]).unwrap();
    /// let z = Tensor::zeros_sym(&[x.nonzero().size(0) + 1], DType::I64);
    /// assert_eq!(z.shape_string(), "[<=5]");
    /// assert_eq!(z.to_vec::<i64>().unwrap(), vec![0; 4]);
    /// ```
    #[track_caller]
    pub fn zeros_sym(sizes: &[SymInt], dtype: DType) -> Tensor {
        Tensor::filled("zeros_sym", sizes, 0.0, dtype)
    }

    /// Ones of `sizes`, which may be dynamic (see
    /// [`full_sym`](Tensor::full_sym)).
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap().mark_dynamic(0, 8);
    /// let o = Tensor::ones_sym(&x.sizes(), DType::F32);
    /// assert_eq!(o.shape_string(), "[<=8]");
    /// assert_eq!((&o + &x).to_vec::<f32>().unwrap(), vec![2.0; 3]);
    /// ```
    #[track_caller]
    pub fn ones_sym(sizes: &[SymInt], dtype: DType) -> Tensor {
        Tensor::filled("ones_sym", sizes, 1.0, dtype)
    }

    /// The value of a size as an I64 scalar tensor, computed on the device
    /// when the program runs (nothing is read back): a dynamic size used
    /// in arithmetic, as PyTorch code uses `x.size(0)` in a formula.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![3.0f32, 0.0, 5.0, 1.0], &[4]).unwrap();
    /// let n = x.nonzero().size(0); // 3, at most 4
    /// let wanted = Tensor::scalar_sym(&(8 - n)); // [] I64, 5 when it runs
    /// let rank = Tensor::arange(8);
    /// let keep = rank.lt(&wanted);
    /// assert_eq!(keep.to_dtype(DType::I64).sum().item::<i64>().unwrap(), 5);
    /// ```
    #[track_caller]
    pub fn scalar_sym(size: &SymInt) -> Tensor {
        let anchors = anchors_of(std::iter::once(size));
        let deps = size_deps_for(std::slice::from_ref(&size.expr), &anchors);
        Tensor::try_apply_on(Op::SizeOf(size.expr.clone()), &[], deps, &Device::default())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A tensor of this tensor's shape (dynamic dims included), dtype and
    /// device, filled with `value`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(x.full_like(3.0).to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn full_like(&self, value: f64) -> Tensor {
        self.full_like_dtype(value, self.dtype())
    }

    /// Like [`full_like`](Tensor::full_like) with another dtype.
    ///
    /// ```
    /// use lazyxla::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(x.full_like_dtype(1.0, DType::I64).to_vec::<i64>().unwrap(), vec![1, 1]);
    /// ```
    #[track_caller]
    pub fn full_like_dtype(&self, value: f64, dtype: DType) -> Tensor {
        let node = self.node();
        let deps = size_deps_for(&node.shape, std::slice::from_ref(&node));
        Tensor::full_exprs(node.shape.clone(), value, dtype, deps, self.device())
    }

    /// Zeros shaped like this tensor.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(x.zeros_like().to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn zeros_like(&self) -> Tensor {
        self.full_like(0.0)
    }

    /// Ones shaped like this tensor.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    /// assert_eq!(x.ones_like().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn ones_like(&self) -> Tensor {
        self.full_like(1.0)
    }

    /// [`full_sym`](Tensor::full_sym) for `op`, which messages name.
    #[track_caller]
    fn filled(op: &'static str, sizes: &[SymInt], value: f64, dtype: DType) -> Tensor {
        let shape = size_args(op, sizes);
        let anchors = anchors_of(sizes);
        let deps = size_deps_for(&shape, &anchors);
        let exprs: Vec<SizeExpr> = sizes.iter().map(|s| s.expr.clone()).collect();
        let checks =
            super::guard::non_negative_checks(op, &exprs).unwrap_or_else(|e| panic!("{e}"));
        Tensor::full_exprs(shape, value, dtype, deps, &Device::default()).checked(checks, &anchors)
    }

    #[track_caller]
    pub(crate) fn full_exprs(
        shape: Shape,
        value: f64,
        dtype: DType,
        deps: SmallVec<[Arc<Node>; 1]>,
        device: &Device,
    ) -> Tensor {
        let s = Tensor::scalar_op(value, dtype, device);
        if shape.is_empty() {
            return s;
        }
        Tensor::try_apply_on(
            Op::Broadcast {
                shape,
                dims: vec![],
            },
            &[&s],
            deps,
            device,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// An inline scalar constant (part of the program, not a parameter).
    #[track_caller]
    pub(crate) fn scalar_op(value: f64, dtype: DType, device: &Device) -> Tensor {
        Tensor::try_apply_on(
            Op::Scalar {
                value: Lit(value),
                dtype,
            },
            &[],
            SmallVec::new(),
            device,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `[0, 1, .., end-1]` as I64.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// assert_eq!(Tensor::arange(4).to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn arange(end: i64) -> Tensor {
        Tensor::arange_sym(&SymInt::from(end.max(0)))
    }

    /// `[0, 1, .., n-1]` as I64 where `n` may be a dynamic size; the result
    /// is dynamic with `n`'s bound.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // dynamic: <=3
    /// let r = Tensor::arange_sym(&n);
    /// assert_eq!(r.size(0).to_string(), "<=3");
    /// assert_eq!(r.to_vec::<i64>().unwrap(), vec![0, 1]);
    /// ```
    #[track_caller]
    pub fn arange_sym(n: &SymInt) -> Tensor {
        let checks = super::guard::non_negative_checks("arange_sym", std::slice::from_ref(&n.expr))
            .unwrap_or_else(|e| panic!("{e}"));
        let e = clamp_size(&n.expr);
        let deps = size_deps_for(std::slice::from_ref(&e), &n.anchors);
        Tensor::try_apply_on(
            Op::Iota {
                dtype: DType::I64,
                shape: smallvec::smallvec![e],
                dim: 0,
            },
            &[],
            deps,
            &Device::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .checked(checks, &n.anchors)
    }

    /// Uniform random F32 values in `[0, 1)` from a seeded generator
    /// (generated on the host and uploaded; the same seed gives the same
    /// values on every backend).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let r = Tensor::rand(&[100], 7).to_vec::<f32>().unwrap();
    /// assert!(r.iter().all(|&x| (0.0..1.0).contains(&x)));
    /// assert_eq!(r, Tensor::rand(&[100], 7).to_vec::<f32>().unwrap());
    /// ```
    #[track_caller]
    pub fn rand(shape: &[usize], seed: u64) -> Tensor {
        let mut g = SplitMix64(seed);
        host_random("rand", shape, || g.next_f64() as f32)
    }

    /// Standard normal F32 values from a seeded generator (Box-Muller).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let r = Tensor::randn(&[2, 3], 7);
    /// assert_eq!(r.concrete_shape().unwrap(), vec![2, 3]);
    /// assert_eq!(r.to_vec::<f32>().unwrap(), Tensor::randn(&[2, 3], 7).to_vec::<f32>().unwrap());
    /// ```
    #[track_caller]
    pub fn randn(shape: &[usize], seed: u64) -> Tensor {
        let mut g = SplitMix64(seed);
        host_random("randn", shape, || {
            let u1 = g.next_f64().max(f64::MIN_POSITIVE);
            let u2 = g.next_f64();
            ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
        })
    }

    /// A copy of this tensor's value on another device (runs what it needs
    /// first). Between devices of one PJRT client (or reference devices)
    /// a computed static value is copied device to device
    /// (`TransferBetweenDevices`, no host transfer); otherwise it goes
    /// through the host. To a [`Device::replicated`] one, every replica
    /// gets the value; from one, the first replica's value is copied.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// lazyxla::set_cpu_device_count(2).unwrap();
    /// let devices = lazyxla::Device::reference().scoped(lazyxla::devices);
    /// let a = Tensor::from_vec_on(vec![1.0f32, 2.0], &[2], &devices[0]).unwrap();
    /// let b = (&a * 2.0).to_device(&devices[1]).unwrap();
    /// assert_eq!(b.device(), &devices[1]);
    /// assert_eq!(b.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if self.device().same(device) {
            return Ok(self.clone());
        }
        if let Some(t) = self.copy_between_devices(device)? {
            return Ok(t);
        }
        let host = self.to_host()?;
        Tensor::from_host(host, device)
    }

    /// [`Tensor::to_device`] device to device, when the backends can and
    /// the value is computed and static (`None` otherwise).
    #[track_caller]
    fn copy_between_devices(&self, device: &Device) -> Result<Option<Tensor>> {
        if self.is_dynamic() {
            return Ok(None);
        }
        if self.is_pending() {
            super::sync::sync_tensors(std::slice::from_ref(self))?;
        }
        // The step that computed it must have passed its size checks.
        super::sync::verify()?;
        let node = self.node();
        let Some(data) = crate::runtime::device_data::of(&node) else {
            return Ok(None);
        };
        if data.host_copy().is_some() {
            // Never uploaded: the host copy serves the new device.
            return Ok(None);
        }
        let buffer = data.buffer()?;
        let Some(copy) = device
            .backend()
            .copy_from(self.device().backend(), buffer)?
        else {
            return Ok(None);
        };
        crate::metrics::inc(crate::metrics::Counter::TransferBetweenDevices);
        let sizes = smallvec::smallvec![None; node.shape.len()];
        let data = DeviceData::on_device(device.clone(), copy, sizes, data.bounds().into());
        Ok(Some(Tensor::data(
            device,
            self.dtype(),
            node.shape.clone(),
            data,
        )))
    }
}

/// The sizes of a static shape given as `usize`s. A size above `i64::MAX`
/// saturates, so that inference rejects the shape as too large instead of
/// seeing a wrapped negative size.
#[track_caller]
pub(crate) fn static_shape(shape: &[usize]) -> Shape {
    shape
        .iter()
        .map(|&s| SizeExpr::constant(i64::try_from(s).unwrap_or(i64::MAX)))
        .collect()
}
/// Checks that `len` host elements fill `shape` exactly.
#[track_caller]
fn check_fills(op: &'static str, len: usize, shape: &[usize]) -> Result<()> {
    let n = host_numel(op, shape)?;
    if len != n {
        return Err(Error::invalid(
            op,
            format!("{len} elements cannot fill shape {shape:?} ({n} elements); pass a shape whose product is the data length"),
        ));
    }
    Ok(())
}

/// The element count of a host shape, or an error when it overflows.
#[track_caller]
fn host_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| {
            Error::invalid(
                op,
                format!("the shape {shape:?} has more elements than a 64-bit count holds; use smaller sizes"),
            )
        })
}

/// A host-generated F32 tensor of `shape` from `next`; panics with a
/// message (never aborts) when its element count or memory is too large.
#[track_caller]
fn host_random(op: &'static str, shape: &[usize], next: impl FnMut() -> f32) -> Tensor {
    let n = host_numel(op, shape).unwrap_or_else(|e| panic!("{e}"));
    let mut data: Vec<f32> = Vec::new();
    if data.try_reserve_exact(n).is_err() {
        panic!(
            "{op}: cannot allocate {n} f32 values for shape {shape:?} on the host; use a smaller shape"
        );
    }
    data.extend(std::iter::repeat_with(next).take(n));
    Tensor::from_vec(data, shape).unwrap_or_else(|e| panic!("{e}"))
}

pub(crate) use super::guard::clamp_size;

/// Sizes given as arguments to `op`, as shape expressions. A size that is
/// always negative panics; one that may be negative (`n - 2`) is clamped
/// at 0 and needs a check (`guard::non_negative_checks`) so that the clamp
/// never hides a negative size.
#[track_caller]
pub(crate) fn size_args(op: &str, sizes: &[SymInt]) -> Shape {
    sizes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if s.upper_bound() < 0 {
                panic!(
                    "{op}: the size {} at position {i} of {sizes:?} is negative; sizes must be at least 0",
                    s.describe()
                );
            }
            clamp_size(&s.expr)
        })
        .collect()
}

/// A small, well-known seeded generator (SplitMix64) so that random
/// tensors are reproducible across platforms and backends.
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    #[track_caller]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    #[track_caller]
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl<T: Element> From<ArrayD<T>> for Tensor {
    /// Uploads the array to the default device (panics if the device
    /// rejects it).
    #[track_caller]
    fn from(a: ArrayD<T>) -> Tensor {
        Tensor::from_host(
            T::into_host(a.as_standard_layout().into_owned()),
            &Device::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }
}
