//! Bucketed bounds: the bound a dynamic size of device data gets when a
//! new step uses it, chosen from a few sizes instead of fixed once.
//!
//! Off by default. When on ([`set_size_buckets`]), a data leaf whose
//! dynamic size is `r` is used in a new step with the bound of its bucket,
//! the smallest of `min, 2·min, 4·min, .., max` that holds `r`, so a
//! program compiled for bucket 64 serves every size from 33 to 64 and does
//! at most twice the work the real size needs. Sizes above `max` keep the
//! bound they have.
//!
//! The buffer behind bucket `L` holds `L + 1` elements along that dim
//! ([`buffer_for`]): a program's dynamic result of bound `b` is written
//! into a buffer of `buffer_for(bucket(b - 1))`, so a value that grows by
//! one element a step (a cache that `cat`s the new key) keeps one buffer,
//! and one program, for a whole bucket; the step's program narrows it to
//! the bucket as it reads it, and appends the new element in that same
//! buffer, in place when it is donated (`runtime::donation`, extensions).
//! A buffer of another length (a value that
//! crossed into the next bucket) is copied into one of the bucket's length
//! first. The tensor layer applies the rule to leaves
//! (`tensor::bucket`); the sync applies it to results
//! (`runtime::sync`).
//!
//! When a step first uses a tensor holding device data with a dynamic dim
//! (an op records on it, or its sizes are asked for), the dim's real size
//! is read (waiting for the program that computed it). A program takes a
//! bucket's buffer as it is and narrows it to the bucket as it reads it
//! (`Program::param_buffers`, a static slice): the buffer's length is part
//! of the key. Data in a buffer of another length (a value that crossed
//! into the next bucket, host data) is copied through the host, once per
//! crossing. A rebinding keeps shared sizes shared: tensors whose sizes
//! were one variable get one new variable (per thread). A decode of 150
//! tokens after a 61-token prompt compiles the prompt's program and one per
//! bucket it passes (64, 128, 256: four in all).

use crate::{Error, Result};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The sizes dynamic bounds are rounded up to: powers of two from `min`,
/// capped at `max` (see [`set_size_buckets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SizeBuckets {
    min: usize,
    max: usize,
}

impl SizeBuckets {
    /// Buckets `min, 2·min, 4·min, ..` up to `max` (the last bucket is
    /// `max` itself when it is not such a power).
    ///
    /// ```
    /// use lazyxla::SizeBuckets;
    /// let b = SizeBuckets::powers_of_two(16, 256).unwrap();
    /// assert_eq!(b.bucket(33), Some(64));
    /// assert_eq!(b.bucket(3), Some(16));
    /// assert_eq!(b.bucket(300), None);
    /// assert!(SizeBuckets::powers_of_two(0, 8).is_err());
    /// ```
    pub fn powers_of_two(min: usize, max: usize) -> Result<SizeBuckets> {
        if min == 0 || max < min || max > i32::MAX as usize {
            return Err(Error::invalid(
                "SizeBuckets::powers_of_two",
                format!(
                    "the buckets {min}..{max} are empty: give 1 <= min <= max <= {} (e.g. 16..256)",
                    i32::MAX
                ),
            ));
        }
        Ok(SizeBuckets { min, max })
    }

    /// The smallest bucket.
    ///
    /// ```
    /// let b = lazyxla::SizeBuckets::powers_of_two(16, 256).unwrap();
    /// assert_eq!(b.min(), 16);
    /// ```
    pub fn min(&self) -> usize {
        self.min
    }

    /// The largest bucket.
    ///
    /// ```
    /// let b = lazyxla::SizeBuckets::powers_of_two(16, 200).unwrap();
    /// assert_eq!(b.max(), 200);
    /// assert_eq!(b.bucket(150), Some(200));
    /// ```
    pub fn max(&self) -> usize {
        self.max
    }

    /// The smallest bucket that holds a size of `n`, or `None` above the
    /// largest.
    ///
    /// ```
    /// let b = lazyxla::SizeBuckets::powers_of_two(16, 256).unwrap();
    /// assert_eq!(b.bucket(17), Some(32));
    /// assert_eq!(b.bucket(257), None);
    /// ```
    pub fn bucket(&self, n: usize) -> Option<usize> {
        if n > self.max {
            return None;
        }
        let mut b = self.min;
        while b < n {
            b = b.saturating_mul(2);
        }
        Some(b.min(self.max))
    }

    /// Parses `MIN..MAX` (the form of `LAZYXLA_SIZE_BUCKETS` and of the
    /// `generate` example's `--bound buckets:MIN..MAX`).
    ///
    /// ```
    /// use lazyxla::SizeBuckets;
    /// assert_eq!(SizeBuckets::parse("16..256").unwrap(), SizeBuckets::powers_of_two(16, 256).unwrap());
    /// assert!(SizeBuckets::parse("16-256").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<SizeBuckets> {
        let bad = || {
            Error::invalid(
                "SizeBuckets::parse",
                format!("{text:?} is not MIN..MAX with two positive integers (e.g. 16..256)"),
            )
        };
        let (lo, hi) = text.trim().split_once("..").ok_or_else(bad)?;
        let lo = lo.trim().parse().map_err(|_| bad())?;
        let hi = hi.trim().parse().map_err(|_| bad())?;
        SizeBuckets::powers_of_two(lo, hi)
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static SETTING: RwLock<Option<SizeBuckets>> = RwLock::new(None);
static FROM_ENV: OnceLock<()> = OnceLock::new();

/// Reads `LAZYXLA_SIZE_BUCKETS` once, before the first use of the setting.
fn init_from_env() {
    FROM_ENV.get_or_init(|| {
        let Ok(v) = std::env::var("LAZYXLA_SIZE_BUCKETS") else {
            return;
        };
        if matches!(v.trim(), "" | "off" | "0") {
            return;
        }
        match SizeBuckets::parse(&v) {
            Ok(b) => set(Some(b)),
            Err(e) => eprintln!("lazyxla: LAZYXLA_SIZE_BUCKETS ignored: {e}"),
        }
    });
}

fn set(b: Option<SizeBuckets>) {
    *SETTING.write() = b;
    ON.store(b.is_some(), Ordering::Release);
}

/// Turns bucketed bounds on (`Some(buckets)`) or off (`None`, the
/// default) for the steps recorded from now on, process-wide.
/// `LAZYXLA_SIZE_BUCKETS=16..256` turns them on from outside.
///
/// With buckets, a dynamic size of device data (a tensor a step computed,
/// or input marked with `mark_dynamic`) is bounded by its bucket when the
/// next step uses it, so programs are compiled per bucket and work on at
/// most twice the real size; without, it keeps the bound it was computed
/// or marked with (one program for every size). See DESIGN.md, "Bucketed
/// bounds".
///
/// ```
/// use lazyxla::{SizeBuckets, Tensor};
/// lazyxla::set_size_buckets(Some(SizeBuckets::powers_of_two(4, 64).unwrap()));
/// let x = Tensor::from_vec(vec![1.0f32; 5], &[5]).unwrap().mark_dynamic(0, 64);
/// assert_eq!((&x * 2.0).shape_string(), "[<=8]"); // 5 fits the bucket 8
/// lazyxla::set_size_buckets(None);
/// ```
pub fn set_size_buckets(buckets: Option<SizeBuckets>) {
    init_from_env();
    set(buckets);
}

/// The buckets [`set_size_buckets`] set, if they are on.
///
/// ```
/// assert_eq!(lazyxla::size_buckets(), None); // off unless set
/// ```
pub fn size_buckets() -> Option<SizeBuckets> {
    init_from_env();
    if !ON.load(Ordering::Acquire) {
        return None;
    }
    *SETTING.read()
}

/// The length of the buffer a value of bucket `bucket` lives in along a
/// bucketed dim: one element of headroom (see the module docs).
pub(crate) fn buffer_for(bucket: usize) -> usize {
    bucket + 1
}

/// The buffer length a program writes a dynamic result of bound `bound`
/// into: its bucket's buffer ([`buffer_for`]), or the bound itself above
/// the largest bucket or with buckets off.
pub(crate) fn result_buffer(buckets: Option<SizeBuckets>, bound: usize) -> usize {
    match buckets.and_then(|b| b.bucket(bound.saturating_sub(1))) {
        Some(l) => buffer_for(l).max(bound),
        None => bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_double_from_the_minimum_and_stop_at_the_maximum() {
        let b = SizeBuckets::powers_of_two(16, 200).unwrap();
        let got: Vec<_> = [0, 1, 16, 17, 32, 33, 128, 129, 200, 201]
            .iter()
            .map(|&n| b.bucket(n))
            .collect();
        assert_eq!(
            got,
            [
                Some(16),
                Some(16),
                Some(16),
                Some(32),
                Some(32),
                Some(64),
                Some(128),
                Some(200),
                Some(200),
                None
            ]
        );
    }

    /// A value that grows by one a step stays in its bucket's buffer: the
    /// result of a step on bucket `L` (bound `L + 1`) is written into the
    /// buffer of bucket `L` again.
    #[test]
    fn a_result_one_past_its_bucket_keeps_the_bucket_s_buffer() {
        let b = Some(SizeBuckets::powers_of_two(16, 256).unwrap());
        assert_eq!(result_buffer(b, 65), 65);
        assert_eq!(result_buffer(b, 64), 65);
        assert_eq!(result_buffer(b, 66), 129);
        assert_eq!(result_buffer(b, 256), 257);
        assert_eq!(result_buffer(b, 257), 257);
        assert_eq!(result_buffer(b, 300), 300);
        assert_eq!(result_buffer(None, 64), 64);
    }
}
