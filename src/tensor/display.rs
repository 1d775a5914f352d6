//! `Display` for tensors, as PyTorch prints them: past 1000 elements only
//! the first and last 3 entries of each dim, one number format for the
//! whole tensor (integers as `1.`, else 4 decimals, else scientific when
//! the magnitudes span too much), entries right-aligned, a matrix row per
//! line.

use super::Tensor;
use crate::host::Element;
use crate::DType;
use ndarray::{ArrayViewD, Axis};
use std::fmt;

/// Past this many elements a tensor is summarized.
const THRESHOLD: usize = 1000;
/// Entries kept at each end of a summarized dim.
const EDGE: usize = 3;

impl fmt::Display for Tensor {
    /// Prints the values (forcing execution), e.g.
    /// `tensor([[1, 2],\n        [3, 4]], dtype=i64)`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.5, -2.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(x.to_string(), "tensor([[ 1.0000,  0.5000],\n        [-2.0000,  4.0000]], dtype=f32)");
    /// let big = Tensor::from_vec((0..2000i64).collect(), &[40, 50]).unwrap();
    /// assert!(big.to_string().len() < 500); // 15,000 characters in full
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_host() {
            Ok(h) => {
                let body = crate::with_host_array!(&h, a => render(a.view()));
                write!(f, "tensor({body}, dtype={})", self.dtype())
            }
            Err(e) => write!(f, "tensor(<error: {e}>)"),
        }
    }
}

/// The bracketed body: `[..]` nested by dim, `...` where summarized.
#[track_caller]
fn render<T: Element>(a: ArrayViewD<'_, T>) -> String {
    let summarize = a.len() > THRESHOLD;
    let mut shown = Vec::new();
    collect(&a, summarize, &mut shown);
    let format = Format::choose::<T>(&shown);
    let width = shown
        .iter()
        .map(|&v| format.show(v).len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    write_dim(&a, summarize, &format, width, "tensor(".len() + 1, &mut out);
    out
}

/// The values printed, in order.
#[track_caller]
fn collect<T: Element>(a: &ArrayViewD<'_, T>, summarize: bool, out: &mut Vec<f64>) {
    if a.ndim() == 0 {
        out.push(a.iter().next().expect("one element").to_f64());
        return;
    }
    for i in kept(a.len_of(Axis(0)), summarize).into_iter().flatten() {
        collect(&a.index_axis(Axis(0), i), summarize, out);
    }
}

/// The indices of a dim of `n` to print, `None` standing for `...`.
#[track_caller]
fn kept(n: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && n > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain([None])
            .chain((n - EDGE..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    }
}

#[track_caller]
fn write_dim<T: Element>(
    a: &ArrayViewD<'_, T>,
    summarize: bool,
    format: &Format,
    width: usize,
    indent: usize,
    out: &mut String,
) {
    if a.ndim() == 0 {
        let v = format.show(a.iter().next().expect("one element").to_f64());
        out.push_str(&format!("{v:>width$}"));
        return;
    }
    // Entries of a row on one line; rows of a matrix one per line, and a
    // blank line between matrices.
    let sep = match a.ndim() {
        1 => ", ".to_string(),
        d => format!(",{}{}", "\n".repeat(d - 1), " ".repeat(indent)),
    };
    out.push('[');
    for (k, i) in kept(a.len_of(Axis(0)), summarize).into_iter().enumerate() {
        if k > 0 {
            out.push_str(&sep);
        }
        match i {
            Some(i) => write_dim(
                &a.index_axis(Axis(0), i),
                summarize,
                format,
                width,
                indent + 1,
                out,
            ),
            None => out.push_str("..."),
        }
    }
    out.push(']');
}

/// One number format for every entry of a tensor.
enum Format {
    Bool,
    Int,
    /// Floats that are all whole numbers: `1.`, `-2.`.
    Whole,
    Fixed,
    Scientific,
}

impl Format {
    #[track_caller]
    fn choose<T: Element>(values: &[f64]) -> Format {
        match T::DTYPE {
            DType::Bool => return Format::Bool,
            DType::I32 | DType::I64 => return Format::Int,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => {}
        }
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if finite.iter().all(|v| v.fract() == 0.0) {
            let big = finite.iter().any(|v| v.abs() >= 1e8);
            return if big {
                Format::Scientific
            } else {
                Format::Whole
            };
        }
        let nonzero: Vec<f64> = finite
            .iter()
            .map(|v| v.abs())
            .filter(|&v| v > 0.0)
            .collect();
        let max = nonzero.iter().copied().fold(0.0, f64::max);
        let min = nonzero.iter().copied().fold(f64::INFINITY, f64::min);
        if max / min > 1000.0 || max > 1e8 || min < 1e-4 {
            Format::Scientific
        } else {
            Format::Fixed
        }
    }

    #[track_caller]
    fn show(&self, v: f64) -> String {
        if v.is_nan() {
            return "nan".into();
        }
        if v.is_infinite() {
            return if v > 0.0 { "inf" } else { "-inf" }.into();
        }
        match self {
            Format::Bool => (v != 0.0).to_string(),
            Format::Int => format!("{}", v as i64),
            Format::Whole => format!("{v:.0}."),
            Format::Fixed => format!("{v:.4}"),
            Format::Scientific => {
                // Rust writes `1.2340e5`; PyTorch `1.2340e+05`.
                let s = format!("{v:.4e}");
                let (mantissa, exp) = s.split_once('e').expect("an exponent");
                let e: i32 = exp.parse().expect("an integer exponent");
                format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
            }
        }
    }
}
