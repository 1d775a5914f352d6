//! Host arrays: dense, row-major data on the CPU tagged with its dtype.
//!
//! This is what crosses the boundary between the user and a backend
//! (`upload`/`download`) and what the reference backend computes on.

use crate::dtype::DType;
use ndarray::ArrayD;
use std::fmt;

/// A dense host array of one of the supported dtypes.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HostArray {
    /// Booleans.
    Bool(ArrayD<bool>),
    /// 32-bit integers.
    I32(ArrayD<i32>),
    /// 64-bit integers.
    I64(ArrayD<i64>),
    /// 16-bit IEEE half floats.
    F16(ArrayD<half::f16>),
    /// 16-bit brain floats.
    BF16(ArrayD<half::bf16>),
    /// 32-bit floats.
    F32(ArrayD<f32>),
    /// 64-bit floats.
    F64(ArrayD<f64>),
}

/// Runs `$body` with `$a` bound to the typed array inside a [`HostArray`].
#[macro_export]
#[doc(hidden)]
macro_rules! with_host_array {
    ($x:expr, $a:ident => $body:expr) => {
        match $x {
            $crate::host::HostArray::Bool($a) => $body,
            $crate::host::HostArray::I32($a) => $body,
            $crate::host::HostArray::I64($a) => $body,
            $crate::host::HostArray::F16($a) => $body,
            $crate::host::HostArray::BF16($a) => $body,
            $crate::host::HostArray::F32($a) => $body,
            $crate::host::HostArray::F64($a) => $body,
        }
    };
}

/// Like [`with_host_array!`] but rewraps the typed result in the same variant.
#[macro_export]
#[doc(hidden)]
macro_rules! map_host_array {
    ($x:expr, $a:ident => $body:expr) => {
        match $x {
            $crate::host::HostArray::Bool($a) => $crate::host::HostArray::Bool($body),
            $crate::host::HostArray::I32($a) => $crate::host::HostArray::I32($body),
            $crate::host::HostArray::I64($a) => $crate::host::HostArray::I64($body),
            $crate::host::HostArray::F16($a) => $crate::host::HostArray::F16($body),
            $crate::host::HostArray::BF16($a) => $crate::host::HostArray::BF16($body),
            $crate::host::HostArray::F32($a) => $crate::host::HostArray::F32($body),
            $crate::host::HostArray::F64($a) => $crate::host::HostArray::F64($body),
        }
    };
}

impl HostArray {
    /// The dtype of the elements.
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// assert_eq!(HostArray::full(DType::I32, &[2], 1.0).dtype(), DType::I32);
    /// ```
    pub fn dtype(&self) -> DType {
        match self {
            HostArray::Bool(_) => DType::Bool,
            HostArray::I32(_) => DType::I32,
            HostArray::I64(_) => DType::I64,
            HostArray::F16(_) => DType::F16,
            HostArray::BF16(_) => DType::BF16,
            HostArray::F32(_) => DType::F32,
            HostArray::F64(_) => DType::F64,
        }
    }

    /// The exact shape.
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// assert_eq!(HostArray::full(DType::F32, &[2, 3], 0.0).shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        with_host_array!(self, a => a.shape())
    }

    /// An array of the given dtype and shape filled with `value`.
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// let a = HostArray::full(DType::F64, &[2], 1.5);
    /// assert_eq!(a.to_f64_vec(), vec![1.5, 1.5]);
    /// ```
    pub fn full(dtype: DType, shape: &[usize], value: f64) -> HostArray {
        let sh = ndarray::IxDyn(shape);
        match dtype {
            DType::Bool => HostArray::Bool(ArrayD::from_elem(sh, value != 0.0)),
            DType::I32 => HostArray::I32(ArrayD::from_elem(sh, value as i32)),
            DType::I64 => HostArray::I64(ArrayD::from_elem(sh, value as i64)),
            DType::F16 => HostArray::F16(ArrayD::from_elem(sh, half::f16::from_f64(value))),
            DType::BF16 => HostArray::BF16(ArrayD::from_elem(sh, half::bf16::from_f64(value))),
            DType::F32 => HostArray::F32(ArrayD::from_elem(sh, value as f32)),
            DType::F64 => HostArray::F64(ArrayD::from_elem(sh, value)),
        }
    }

    /// Converts every element to `dtype` with Rust's `as` semantics
    /// (floats to integers truncate toward zero; nonzero to bool is `true`).
    /// Halves convert through `f32` (exact) or `f64`, rounding to nearest
    /// even when narrowing.
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// let a = HostArray::full(DType::F32, &[2], 2.0).cast(DType::I64);
    /// assert_eq!(a.dtype(), DType::I64);
    /// assert_eq!(a.to_f64_vec(), vec![2.0, 2.0]);
    /// ```
    pub fn cast(&self, dtype: DType) -> HostArray {
        fn conv<T: Copy, U>(a: &ArrayD<T>, f: impl Fn(T) -> U) -> ArrayD<U> {
            a.mapv(f)
        }
        macro_rules! to {
            ($a:expr, $t:ty) => {
                match dtype {
                    DType::Bool => HostArray::Bool(conv($a, |x: $t| x as f64 != 0.0)),
                    DType::I32 => HostArray::I32(conv($a, |x: $t| x as i32)),
                    DType::I64 => HostArray::I64(conv($a, |x: $t| x as i64)),
                    DType::F16 => HostArray::F16(conv($a, |x: $t| half::f16::from_f64(x as f64))),
                    DType::BF16 => {
                        HostArray::BF16(conv($a, |x: $t| half::bf16::from_f64(x as f64)))
                    }
                    DType::F32 => HostArray::F32(conv($a, |x: $t| x as f32)),
                    DType::F64 => HostArray::F64(conv($a, |x: $t| x as f64)),
                }
            };
        }
        match self {
            HostArray::Bool(a) => {
                let i = conv(a, |x: bool| x as u8);
                to!(&i, u8)
            }
            HostArray::I32(a) => to!(a, i32),
            HostArray::I64(a) => to!(a, i64),
            // Every half is exactly an f32, so going through f32 loses
            // nothing (and f32 -> f64 -> half rounds once).
            HostArray::F16(a) => {
                let f = conv(a, |x: half::f16| x.to_f32());
                to!(&f, f32)
            }
            HostArray::BF16(a) => {
                let f = conv(a, |x: half::bf16| x.to_f32());
                to!(&f, f32)
            }
            HostArray::F32(a) => to!(a, f32),
            HostArray::F64(a) => to!(a, f64),
        }
    }

    /// A copy at the larger shape `bound`, the elements in its leading
    /// corner and `fill` elsewhere. `None` when `bound` is smaller than the
    /// array in some dimension or has another rank.
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// let a = HostArray::full(DType::F32, &[1, 2], 1.0);
    /// let p = a.padded(&[2, 2], 0.0).unwrap();
    /// assert_eq!(p.to_f64_vec(), vec![1.0, 1.0, 0.0, 0.0]);
    /// assert!(a.padded(&[1, 1], 0.0).is_none());
    /// ```
    pub fn padded(&self, bound: &[usize], fill: f64) -> Option<HostArray> {
        if bound.len() != self.shape().len() || bound.iter().zip(self.shape()).any(|(b, s)| b < s) {
            return None;
        }
        let mut out = HostArray::full(self.dtype(), bound, fill);
        let sh = self.shape().to_vec();
        macro_rules! pad {
            ($o:expr, $x:expr) => {{
                $o.slice_each_axis_mut(|ax| ndarray::Slice::from(0..sh[ax.axis.index()]))
                    .assign($x);
            }};
        }
        match (&mut out, self) {
            (HostArray::Bool(o), HostArray::Bool(a)) => pad!(o, a),
            (HostArray::I32(o), HostArray::I32(a)) => pad!(o, a),
            (HostArray::I64(o), HostArray::I64(a)) => pad!(o, a),
            (HostArray::F16(o), HostArray::F16(a)) => pad!(o, a),
            (HostArray::BF16(o), HostArray::BF16(a)) => pad!(o, a),
            (HostArray::F32(o), HostArray::F32(a)) => pad!(o, a),
            (HostArray::F64(o), HostArray::F64(a)) => pad!(o, a),
            _ => unreachable!("full() made the same dtype"),
        }
        Some(out)
    }

    /// The elements as `f64` in row-major order (for printing and tests).
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// assert_eq!(HostArray::full(DType::Bool, &[2], 1.0).to_f64_vec(), vec![1.0, 1.0]);
    /// ```
    pub fn to_f64_vec(&self) -> Vec<f64> {
        use crate::host::Element;
        with_host_array!(self, a => a.iter().map(|x| x.to_f64()).collect())
    }

    /// The raw little-endian bytes in row-major order (bool as one byte).
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// let a = HostArray::full(DType::I32, &[2], 1.0);
    /// assert_eq!(a.to_bytes(), vec![1, 0, 0, 0, 1, 0, 0, 0]);
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            HostArray::Bool(a) => a.iter().map(|&b| b as u8).collect(),
            HostArray::I32(a) => a.iter().flat_map(|x| x.to_le_bytes()).collect(),
            HostArray::I64(a) => a.iter().flat_map(|x| x.to_le_bytes()).collect(),
            HostArray::F16(a) => a.iter().flat_map(|x| x.to_le_bytes()).collect(),
            HostArray::BF16(a) => a.iter().flat_map(|x| x.to_le_bytes()).collect(),
            HostArray::F32(a) => a.iter().flat_map(|x| x.to_le_bytes()).collect(),
            HostArray::F64(a) => a.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// The elements' bytes in place, in the machine's byte order, when the
    /// array is row-major and contiguous (what an upload hands to the
    /// plugin without building a copy); `None` otherwise.
    pub(crate) fn native_bytes(&self) -> Option<&[u8]> {
        fn view<T>(a: &ArrayD<T>) -> Option<&[u8]> {
            let s = a.as_slice()?;
            // SAFETY: bool, i32, i64, f16, bf16, f32 and f64 (the halves are
            // `repr(transparent)` over `u16`) have no padding bytes and
            // every byte of them is initialised; the view borrows `a`.
            Some(unsafe {
                std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s))
            })
        }
        with_host_array!(self, a => view(a))
    }

    /// An array of `shape` whose bytes (the machine's byte order, row-major)
    /// `fill` writes in place: a download lands in the array's own memory,
    /// not in a byte buffer converted element by element. Bool arrays are
    /// filled through a byte buffer, since a `bool` may only hold 0 or 1.
    pub(crate) fn filled_with<E>(
        dtype: DType,
        shape: &[usize],
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<HostArray, E> {
        fn typed<T: Default + Clone, E>(
            shape: &[usize],
            fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
        ) -> Result<ArrayD<T>, E> {
            let mut v = vec![T::default(); shape.iter().product()];
            // SAFETY: i32, i64, f16, bf16, f32 and f64 are valid for every bit pattern
            // and have no padding; the view is dropped before `v` moves.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(
                    v.as_mut_ptr().cast::<u8>(),
                    std::mem::size_of_val(&v[..]),
                )
            };
            fill(bytes)?;
            Ok(ArrayD::from_shape_vec(ndarray::IxDyn(shape), v).expect("length matches shape"))
        }
        Ok(match dtype {
            DType::Bool => {
                let mut bytes = vec![0u8; shape.iter().product()];
                fill(&mut bytes)?;
                HostArray::Bool(
                    ArrayD::from_shape_vec(
                        ndarray::IxDyn(shape),
                        bytes.iter().map(|&b| b != 0).collect(),
                    )
                    .expect("length matches shape"),
                )
            }
            DType::I32 => HostArray::I32(typed(shape, fill)?),
            DType::I64 => HostArray::I64(typed(shape, fill)?),
            DType::F16 => HostArray::F16(typed(shape, fill)?),
            DType::BF16 => HostArray::BF16(typed(shape, fill)?),
            DType::F32 => HostArray::F32(typed(shape, fill)?),
            DType::F64 => HostArray::F64(typed(shape, fill)?),
        })
    }

    /// Builds an array from little-endian bytes in row-major order.
    ///
    /// ```
    /// use lazyxla::{host::HostArray, DType};
    /// let a = HostArray::from_bytes(DType::I32, &[2], &[1, 0, 0, 0, 2, 0, 0, 0]);
    /// assert_eq!(a.to_f64_vec(), vec![1.0, 2.0]);
    /// ```
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> HostArray {
        let sh = ndarray::IxDyn(shape);
        macro_rules! build {
            ($t:ty, $n:expr, $v:ident) => {{
                let data: Vec<$t> = bytes
                    .chunks_exact($n)
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size")))
                    .collect();
                HostArray::$v(ArrayD::from_shape_vec(sh, data).expect("byte count matches shape"))
            }};
        }
        match dtype {
            DType::Bool => HostArray::Bool(
                ArrayD::from_shape_vec(sh, bytes.iter().map(|&b| b != 0).collect())
                    .expect("byte count matches shape"),
            ),
            DType::I32 => build!(i32, 4, I32),
            DType::I64 => build!(i64, 8, I64),
            DType::F16 => build!(half::f16, 2, F16),
            DType::BF16 => build!(half::bf16, 2, BF16),
            DType::F32 => build!(f32, 4, F32),
            DType::F64 => build!(f64, 8, F64),
        }
    }
}

/// The alignment at which the CPU plugins use host memory in place rather
/// than copy it (measured: 64 bytes, with both plugins).
pub(crate) const LEND_ALIGN: usize = 64;

/// Host data at least this large is laid out at [`LEND_ALIGN`] by
/// `Tensor::from_slice` and lent to a CPU plugin instead of copied; below
/// it a copy costs less than the plugin's callback.
pub(crate) const LEND_MIN_BYTES: usize = 32 * 1024;

/// A copy of `data` in an array of `shape` whose elements start at a
/// multiple of [`LEND_ALIGN`], when `data` is at least [`LEND_MIN_BYTES`]
/// (else a plain copy). The caller checked that `shape` holds `data`.
///
/// The copy's start is also chosen at least [`LEND_ALIGN`] bytes past the
/// source's offset within a 4 KiB page: when the destination sits 1 to 31
/// bytes past the source modulo 4 KiB, every load of the copy waits on a
/// store to the same page offset (4K aliasing), and copying 256 KiB of
/// data not in cache takes 2.5x (16 to 31 bytes) to 5x (1 to 15 bytes) as
/// long (`benches/host_copy.rs` on an AMD EPYC: 38–47 and 78–81 against
/// 15–18 µs). Which offset a process gets depends on where its
/// allocations fall, so without this a process could run every step's
/// upload at that speed.
pub(crate) fn aligned_copy<T: Copy>(data: &[T], shape: &[usize]) -> Option<ArrayD<T>> {
    let size = std::mem::size_of::<T>();
    let plain = || ArrayD::from_shape_vec(ndarray::IxDyn(shape), data.to_vec()).ok();
    if std::mem::size_of_val(data) < LEND_MIN_BYTES || !LEND_ALIGN.is_multiple_of(size) {
        return plain();
    }
    let mut v: Vec<T> = Vec::with_capacity(data.len() + 2 * LEND_ALIGN / size);
    // Bytes before the first aligned address (a whole number of elements:
    // the allocation is aligned to `T`, whose size divides `LEND_ALIGN`),
    // then one alignment step more if that address would alias the source.
    let mut skip = (v.as_ptr() as usize).wrapping_neg() % LEND_ALIGN;
    let past_source = (v.as_ptr() as usize + skip).wrapping_sub(data.as_ptr() as usize) % 4096;
    if (1..LEND_ALIGN).contains(&past_source) {
        skip += LEND_ALIGN;
    }
    let skip = skip / size;
    v.extend(std::iter::repeat_n(data[0], skip));
    v.extend_from_slice(data);
    ndarray::Array1::from_vec(v)
        .slice_move(ndarray::s![skip..])
        .into_shape_with_order(ndarray::IxDyn(shape))
        .ok()
}

/// A Rust type that can be the element of a tensor.
///
/// Implemented for `f32`, `f64`, `half::f16`, `half::bf16`, `i32`, `i64`
/// and `bool`.
pub trait Element: Copy + Send + Sync + fmt::Debug + PartialEq + 'static + sealed::Sealed {
    /// The dtype this type maps to.
    const DTYPE: DType;
    /// Lossy conversion to `f64`, used for printing and scalars.
    fn to_f64(self) -> f64;
    /// Conversion from `f64` (truncating for integers).
    fn from_f64(v: f64) -> Self;
    /// Wraps an array of this type into the dtype-tagged host array.
    fn into_host(a: ndarray::ArrayD<Self>) -> HostArray;
    /// Borrows the array of this type out of a host array, if the dtype matches.
    fn from_host(a: &HostArray) -> Option<&ndarray::ArrayD<Self>>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
    impl Sealed for bool {}
}

macro_rules! element {
    ($t:ty, $d:ident, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            fn into_host(a: ndarray::ArrayD<Self>) -> HostArray {
                HostArray::$d(a)
            }
            fn from_host(a: &HostArray) -> Option<&ndarray::ArrayD<Self>> {
                match a {
                    HostArray::$d(x) => Some(x),
                    _ => None,
                }
            }
        }
    };
}

element!(f32, F32, |x: f32| x as f64, |v: f64| v as f32);
element!(f64, F64, |x: f64| x, |v: f64| v);
element!(
    half::f16,
    F16,
    |x: half::f16| x.to_f64(),
    half::f16::from_f64
);
element!(
    half::bf16,
    BF16,
    |x: half::bf16| x.to_f64(),
    half::bf16::from_f64
);
element!(i32, I32, |x: i32| x as f64, |v: f64| v as i32);
element!(i64, I64, |x: i64| x as f64, |v: f64| v as i64);
element!(bool, Bool, |x: bool| if x { 1.0 } else { 0.0 }, |v: f64| v
    != 0.0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_aligned_copy_starts_at_the_lending_alignment() {
        let data: Vec<f32> = (0..LEND_MIN_BYTES).map(|i| i as f32).collect();
        for start in [0, 1, 3] {
            let part = &data[start..start + LEND_MIN_BYTES / 4 * 2];
            let a = aligned_copy(part, &[2, LEND_MIN_BYTES / 4]).unwrap();
            let bytes = f32::into_host(a).native_bytes().unwrap().as_ptr() as usize;
            assert_eq!(bytes % LEND_ALIGN, 0);
        }
        // Never 1 to 63 bytes past the source's offset in its page (4K
        // aliasing), from sources at every 4-byte offset.
        for start in 0..32 {
            let part = &data[start..start + LEND_MIN_BYTES / 4];
            let a = aligned_copy(part, &[LEND_MIN_BYTES / 4]).unwrap();
            let past = (a.as_ptr() as usize).wrapping_sub(part.as_ptr() as usize) % 4096;
            assert!(
                !(1..LEND_ALIGN).contains(&past),
                "{past} bytes past the source"
            );
            assert_eq!(a.as_slice().unwrap(), part);
        }
        let a = aligned_copy(&data[1..9], &[2, 4]).unwrap();
        assert_eq!(a.as_slice().unwrap(), &data[1..9]);
        let a = aligned_copy(&data[..LEND_MIN_BYTES], &[LEND_MIN_BYTES]).unwrap();
        assert_eq!(a.as_slice().unwrap(), &data[..LEND_MIN_BYTES]);
    }
}
