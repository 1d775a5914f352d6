//! Reference kernels of the elementwise ops: the `reference:` column of
//! the table in `ir::elementwise`, applied per dtype.
//!
//! Every (op, dtype) pair is an arm: a dtype the op's rule admits runs
//! the row's kernel, one it does not is an error naming both (inference
//! rejects such a node first, so only a malformed program meets it), and
//! a half is an error too, since `eval::run` widens halves to f32 before
//! any kernel sees them. No arm falls through to another op's kernel.

use super::err;
use super::kernels::{self, Num};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::elementwise::{binary_ops, compare_ops, unary_ops};
use crate::ir::{BinaryOp, CmpOp, UnaryOp};
use ndarray::ArrayD;

/// The error of an (op, dtype) pair the op's rule does not admit.
fn unsupported(op: &'static str, dtype: DType) -> Error {
    err(op, format!("does not accept dtype {dtype}"))
}

/// The error of a kernel handed a half, which `eval::run` widens to f32
/// first.
pub(super) fn half_kernel(op: &'static str) -> Error {
    err(
        op,
        "halves are evaluated in f32; this kernel should not see one",
    )
}

/// An `f64` kernel (typed here, so a row's closure needs no annotation).
fn f64_fn(f: impl Fn(f64) -> f64) -> impl Fn(f64) -> f64 {
    f
}

/// An `f64` kernel of two operands.
fn f64_fn2(f: impl Fn(f64, f64) -> f64) -> impl Fn(f64, f64) -> f64 {
    f
}

/// A `bool` test of an `f64`.
fn f64_test(f: impl Fn(f64) -> bool) -> impl Fn(f64) -> bool {
    f
}

/// `$kernel` applied to one array, per the op's dtype rule.
macro_rules! unary_kernel {
    (Numeric, $op:expr, $k:expr, $x:expr) => {
        match $x {
            HostArray::I32(a) => HostArray::I32(a.mapv($k)),
            HostArray::I64(a) => HostArray::I64(a.mapv($k)),
            HostArray::F32(a) => HostArray::F32(a.mapv($k)),
            HostArray::F64(a) => HostArray::F64(a.mapv($k)),
            HostArray::Bool(_) => return Err(unsupported($op, DType::Bool)),
            HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($op)),
        }
    };
    (Float, $op:expr, $k:expr, $x:expr) => {{
        let k = f64_fn($k);
        match $x {
            HostArray::F32(a) => HostArray::F32(a.mapv(|v| k(v as f64) as f32)),
            HostArray::F64(a) => HostArray::F64(a.mapv(k)),
            HostArray::Bool(_) | HostArray::I32(_) | HostArray::I64(_) => {
                return Err(unsupported($op, $x.dtype()))
            }
            HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($op)),
        }
    }};
    (FloatTest, $op:expr, $k:expr, $x:expr) => {{
        let k = f64_test($k);
        match $x {
            HostArray::F32(a) => HostArray::Bool(a.mapv(|v| k(v as f64))),
            HostArray::F64(a) => HostArray::Bool(a.mapv(k)),
            HostArray::Bool(_) | HostArray::I32(_) | HostArray::I64(_) => {
                return Err(unsupported($op, $x.dtype()))
            }
            HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($op)),
        }
    }};
    (Logical, $op:expr, $k:expr, $x:expr) => {
        match $x {
            HostArray::Bool(a) => HostArray::Bool(a.mapv($k)),
            HostArray::I32(_) | HostArray::I64(_) | HostArray::F32(_) | HostArray::F64(_) => {
                return Err(unsupported($op, $x.dtype()))
            }
            HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($op)),
        }
    };
}

macro_rules! unary_eval {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        /// `u` applied to each element of `x`.
        pub(super) fn unary(u: UnaryOp, x: &HostArray) -> Result<HostArray> {
            Ok(match u {
                $( UnaryOp::$Var => unary_kernel!($rule, $name, $kernel, x), )*
            })
        }
    };
}
unary_ops!(unary_eval);

/// The second operand as a `HostArray::$V` like the first (`$x`), or
/// the error saying that their dtypes differ.
macro_rules! same {
    ($V:ident, $op:expr, $x:expr, $y:expr) => {
        match $y {
            HostArray::$V(q) => q,
            y => return Err(differ($op, $x, y)),
        }
    };
}

/// `$kernel` applied to two arrays of one dtype, per the op's dtype rule:
/// exhaustive over the first operand's dtype.
macro_rules! binary_kernel {
    (Numeric, $op:expr, $k:expr, $x:expr, $y:expr) => {
        match $x {
            HostArray::I32(p) => HostArray::I32(kernels::zip(p, same!(I32, $op, $x, $y), $k)),
            HostArray::I64(p) => HostArray::I64(kernels::zip(p, same!(I64, $op, $x, $y), $k)),
            HostArray::F32(p) => HostArray::F32(kernels::zip(p, same!(F32, $op, $x, $y), $k)),
            HostArray::F64(p) => HostArray::F64(kernels::zip(p, same!(F64, $op, $x, $y), $k)),
            HostArray::Bool(_) => return Err(unsupported($op, DType::Bool)),
            HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($op)),
        }
    };
    (Float, $op:expr, $k:expr, $x:expr, $y:expr) => {{
        let k = f64_fn2($k);
        match $x {
            HostArray::F32(p) => {
                HostArray::F32(kernels::zip(p, same!(F32, $op, $x, $y), |a, b| {
                    k(a as f64, b as f64) as f32
                }))
            }
            HostArray::F64(p) => HostArray::F64(kernels::zip(p, same!(F64, $op, $x, $y), k)),
            HostArray::Bool(_) | HostArray::I32(_) | HostArray::I64(_) => {
                return Err(unsupported($op, $x.dtype()))
            }
            HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($op)),
        }
    }};
    (Logical, $op:expr, $k:expr, $x:expr, $y:expr) => {
        match $x {
            HostArray::Bool(p) => HostArray::Bool(kernels::zip(p, same!(Bool, $op, $x, $y), $k)),
            HostArray::I32(_) | HostArray::I64(_) | HostArray::F32(_) | HostArray::F64(_) => {
                return Err(unsupported($op, $x.dtype()))
            }
            HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($op)),
        }
    };
}

/// The error of two operands of different dtypes.
fn differ(op: &'static str, x: &HostArray, y: &HostArray) -> Error {
    err(
        op,
        format!("operand dtypes differ: {} and {}", x.dtype(), y.dtype()),
    )
}

macro_rules! binary_eval {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        /// `b` applied to the elements of `x` and `y` pairwise.
        pub(super) fn binary(b: BinaryOp, x: &HostArray, y: &HostArray) -> Result<HostArray> {
            Ok(match b {
                $( BinaryOp::$Var => binary_kernel!($rule, $name, $kernel, x, y), )*
            })
        }
    };
}
binary_ops!(binary_eval);

macro_rules! compare_eval {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, reference: $kernel:expr; )*) => {
        /// `c` applied to the elements of `x` and `y` pairwise: Bool.
        pub(super) fn compare(c: CmpOp, x: &HostArray, y: &HostArray) -> Result<HostArray> {
            Ok(HostArray::Bool(match c {
                $( CmpOp::$Var => match x {
                    HostArray::Bool(p) => kernels::zip(p, same!(Bool, $name, x, y), $kernel),
                    HostArray::I32(p) => kernels::zip(p, same!(I32, $name, x, y), $kernel),
                    HostArray::I64(p) => kernels::zip(p, same!(I64, $name, x, y), $kernel),
                    HostArray::F32(p) => kernels::zip(p, same!(F32, $name, x, y), $kernel),
                    HostArray::F64(p) => kernels::zip(p, same!(F64, $name, x, y), $kernel),
                    HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel($name)),
                }, )*
            }))
        }
    };
}
compare_ops!(compare_eval);

/// `cond ? on_true : on_false` elementwise.
pub(super) fn select(
    cond: &HostArray,
    on_true: &HostArray,
    on_false: &HostArray,
) -> Result<HostArray> {
    let HostArray::Bool(c) = cond else {
        return Err(err("select", "condition must be bool"));
    };
    let (x, y) = (on_true, on_false);
    Ok(match x {
        HostArray::Bool(t) => HostArray::Bool(pick(c, t, same!(Bool, "select", x, y))),
        HostArray::I32(t) => HostArray::I32(pick(c, t, same!(I32, "select", x, y))),
        HostArray::I64(t) => HostArray::I64(pick(c, t, same!(I64, "select", x, y))),
        HostArray::F32(t) => HostArray::F32(pick(c, t, same!(F32, "select", x, y))),
        HostArray::F64(t) => HostArray::F64(pick(c, t, same!(F64, "select", x, y))),
        HostArray::F16(_) | HostArray::BF16(_) => return Err(half_kernel("select")),
    })
}

/// `t` where `c` holds, else `f`.
fn pick<T: Copy>(c: &ArrayD<bool>, t: &ArrayD<T>, f: &ArrayD<T>) -> ArrayD<T> {
    ndarray::Zip::from(c)
        .and(t)
        .and(f)
        .map_collect(|&c, &t, &f| if c { t } else { f })
}

/// The error function (Abramowitz and Stegun 7.1.26 is too coarse for
/// f64; this uses the complementary error function's continued series
/// through `libm`-free Taylor/asymptotic pieces with ~1e-15 accuracy).
pub(crate) fn erf(x: f64) -> f64 {
    // W. J. Cody's rational approximations would be longer; a Taylor series
    // converges fast for |x| < 3 and erf is 1 to double precision beyond 6.
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    if ax > 6.0 {
        return x.signum();
    }
    if ax < 3.0 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = x;
        let mut sum = x;
        let x2 = x * x;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
            if n > 200.0 {
                break;
            }
        }
        return sum * std::f64::consts::FRAC_2_SQRT_PI;
    }
    // Continued fraction for erfc on 3 <= |x| <= 6.
    let mut cf = 0.0;
    for k in (1..=60).rev() {
        cf = (k as f64 / 2.0) / (ax + cf);
    }
    let erfc = (-ax * ax).exp() / (ax + cf) / std::f64::consts::PI.sqrt();
    x.signum() * (1.0 - erfc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    fn i64s(v: Vec<i64>) -> HostArray {
        HostArray::I64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap())
    }

    #[test]
    fn a_pair_the_rule_does_not_admit_is_an_error_naming_op_and_dtype() {
        let e = unary(UnaryOp::Exp, &i64s(vec![1])).unwrap_err().to_string();
        assert!(e.contains("exp") && e.contains("i64"), "{e}");
        let x = i64s(vec![1, 2]);
        let e = binary(BinaryOp::And, &x, &x).unwrap_err().to_string();
        assert!(e.contains("and") && e.contains("i64"), "{e}");
        let f = HostArray::F32(ArrayD::from_elem(IxDyn(&[2]), 1.0));
        let e = binary(BinaryOp::Add, &x, &f).unwrap_err().to_string();
        assert!(e.contains("add") && e.contains("differ"), "{e}");
    }

    #[test]
    fn admitted_pairs_run_the_row_kernel() {
        let x = i64s(vec![-3, 0, 5]);
        let HostArray::I64(n) = unary(UnaryOp::Sign, &x).unwrap() else {
            panic!("sign keeps the dtype")
        };
        assert_eq!(n.iter().copied().collect::<Vec<_>>(), vec![-1, 0, 1]);
        let y = i64s(vec![2, 2, 2]);
        let HostArray::I64(r) = binary(BinaryOp::Rem, &x, &y).unwrap() else {
            panic!("rem keeps the dtype")
        };
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![1, 0, 1]);
        let HostArray::Bool(b) = compare(CmpOp::Lt, &x, &y).unwrap() else {
            panic!("a comparison is bool")
        };
        assert_eq!(
            b.iter().copied().collect::<Vec<_>>(),
            vec![true, true, false]
        );
    }
}
