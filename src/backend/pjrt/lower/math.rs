//! Elementwise ops with the reference interpreter's exact semantics
//! (`backend/reference/elementwise.rs`, `kernels.rs`): integer division by
//! zero gives -1 and remainder by zero the dividend, remainder takes the
//! divisor's sign, max/min propagate NaN, conversions follow Rust's `as`,
//! and random bits are those of `ir/random.rs`. `erf` is XLA's own
//! (`chlo.erf`), within a few ulp of the reference's.
//!
//! `unary` and `binary` expand the `stablehlo:` column of the op table
//! (`ir::elementwise`): a StableHLO op name, or one of the methods here
//! that lower an op to several.

use super::emit::{Elt, Ty, V};
use super::Ctx;
use crate::ir::elementwise::{binary_ops, unary_ops};
use crate::ir::{BinaryOp, CmpOp, UnaryOp};

/// A row's `stablehlo:` column applied: an op name is that StableHLO op on
/// the operands, an identifier the `Ctx` method of that name.
macro_rules! lower_row {
    ($ctx:ident, $hlo:literal, $x:ident) => {
        $ctx.b.un($hlo, $x)
    };
    ($ctx:ident, $hlo:literal, $a:ident, $b:ident) => {
        $ctx.b.bin($hlo, $a, $b)
    };
    ($ctx:ident, $method:ident, $($x:ident),+) => {
        $ctx.$method($($x),+)
    };
}

macro_rules! lower_unary {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        impl Ctx<'_> {
            /// `u` of `x`, from the op table (`ir::elementwise`).
            pub(super) fn unary(&mut self, u: UnaryOp, x: &V) -> V {
                match u {
                    $( UnaryOp::$Var => lower_row!(self, $hlo, x), )*
                }
            }
        }
    };
}
unary_ops!(lower_unary);

macro_rules! lower_binary {
    ($( $(#[$attr:meta])* $Var:ident = $name:literal, $rule:ident,
        reference: $kernel:expr, stablehlo: $hlo:tt, grad: $grad:tt; )*) => {
        impl Ctx<'_> {
            /// `op` of `a` and `b`, from the op table (`ir::elementwise`).
            pub(super) fn binary(&mut self, op: BinaryOp, a: &V, b: &V) -> V {
                match op {
                    $( BinaryOp::$Var => lower_row!(self, $hlo, a, b), )*
                }
            }
        }
    };
}
binary_ops!(lower_binary);

impl Ctx<'_> {
    /// A constant of `x`'s bound shape and element type.
    fn like(&mut self, x: &V, v: f64) -> V {
        self.b.splat(v, &x.ty)
    }

    fn is_nan(&mut self, x: &V) -> V {
        self.b.cmp(CmpOp::Ne, x, x)
    }

    /// 1/sqrt(x), as the reference computes it.
    fn rsqrt(&mut self, x: &V) -> V {
        let s = self.b.un("sqrt", x);
        let one = self.like(x, 1.0);
        self.b.bin("divide", &one, &s)
    }

    /// 1 / (1 + exp(-x)), the reference's formula.
    fn sigmoid(&mut self, x: &V) -> V {
        let n = self.b.un("negate", x);
        let e = self.b.un("exponential", &n);
        let one = self.like(x, 1.0);
        let d = self.b.bin("add", &one, &e);
        self.b.bin("divide", &one, &d)
    }

    /// StableHLO's `sign` for integers; for floats +-1 for nonzero and
    /// the operand itself for +-0 and NaN, as the reference.
    fn sign(&mut self, x: &V) -> V {
        if !x.ty.elt.is_float() {
            return self.b.un("sign", x);
        }
        let zero = self.like(x, 0.0);
        let one = self.like(x, 1.0);
        let m1 = self.like(x, -1.0);
        let gt = self.b.cmp(CmpOp::Gt, x, &zero);
        let lt = self.b.cmp(CmpOp::Lt, x, &zero);
        let r = self.b.select(&lt, &m1, x);
        self.b.select(&gt, &one, &r)
    }

    /// A Bool result of `x`'s shape.
    fn is_finite(&mut self, x: &V) -> V {
        self.b.op("is_finite", &[x], "", x.ty.with_elt(Elt::I1))
    }

    /// Floats: `divide`. Integers: x / 0 = -1; MIN / -1 = MIN (wrapping),
    /// never a trap.
    fn divide(&mut self, a: &V, b: &V) -> V {
        if a.ty.elt.is_float() {
            return self.b.bin("divide", a, b);
        }
        let (zero_d, m1_d, safe) = self.safe_divisor(b);
        let q = self.b.bin("divide", a, &safe);
        let zero = self.like(a, 0.0);
        let neg = self.b.bin("subtract", &zero, a);
        let q = self.b.select(&m1_d, &neg, &q);
        let m1 = self.like(a, -1.0);
        self.b.select(&zero_d, &m1, &q)
    }

    /// The remainder with the divisor's sign; an integer remainder by 0
    /// is the dividend, by -1 is 0.
    fn remainder(&mut self, a: &V, b: &V) -> V {
        let zero = self.like(a, 0.0);
        let (zero_d, r, divisor) = if a.ty.elt.is_float() {
            (None, self.b.bin("remainder", a, b), b.clone())
        } else {
            let (zero_d, m1_d, safe) = self.safe_divisor(b);
            let r = self.b.bin("remainder", a, &safe);
            let r = self.b.select(&m1_d, &zero, &r);
            (Some(zero_d), r, safe)
        };
        // The sign of the divisor: r + b when r != 0 and the signs differ.
        let nz = self.b.cmp(CmpOp::Ne, &r, &zero);
        let rn = self.b.cmp(CmpOp::Lt, &r, &zero);
        let bn = self.b.cmp(CmpOp::Lt, &divisor, &zero);
        let differ = self.b.cmp(CmpOp::Ne, &rn, &bn);
        let fix = self.b.bin("and", &nz, &differ);
        let rb = self.b.bin("add", &r, &divisor);
        let r = self.b.select(&fix, &rb, &r);
        match zero_d {
            Some(z) => self.b.select(&z, a, &r),
            None => r,
        }
    }

    /// NaN-propagating maximum.
    fn maximum(&mut self, a: &V, b: &V) -> V {
        self.pick(CmpOp::Gt, a, b)
    }

    /// NaN-propagating minimum.
    fn minimum(&mut self, a: &V, b: &V) -> V {
        self.pick(CmpOp::Lt, a, b)
    }

    /// `a` if `a` is NaN or `a dir b`, else `b` (NaN-propagating max/min,
    /// exactly the reference's rule).
    pub(super) fn pick(&mut self, dir: CmpOp, a: &V, b: &V) -> V {
        let better = self.b.cmp(dir, a, b);
        let take = if a.ty.elt.is_float() {
            let nan = self.is_nan(a);
            self.b.bin("or", &nan, &better)
        } else {
            better
        };
        self.b.select(&take, a, b)
    }

    /// For an integer divisor: (is zero, is -1, the divisor with both
    /// replaced by 1).
    fn safe_divisor(&mut self, b: &V) -> (V, V, V) {
        let zero = self.like(b, 0.0);
        let m1 = self.like(b, -1.0);
        let one = self.like(b, 1.0);
        let z = self.b.cmp(CmpOp::Eq, b, &zero);
        let n = self.b.cmp(CmpOp::Eq, b, &m1);
        let either = self.b.bin("or", &z, &n);
        let safe = self.b.select(&either, &one, b);
        (z, n, safe)
    }

    pub(super) fn compare(&mut self, c: CmpOp, a: &V, b: &V) -> V {
        self.b.cmp(c, a, b)
    }

    /// Rust `as` conversion: to Bool is `!= 0` (NaN is true); float to
    /// integer truncates toward zero and saturates, NaN giving 0; integer
    /// narrowing wraps.
    pub(super) fn convert(&mut self, x: &V, to: Elt) -> V {
        let from = x.ty.elt;
        if from == to {
            return x.clone();
        }
        if to == Elt::I1 {
            let zero = self.like(x, 0.0);
            return self.b.cmp(CmpOp::Ne, x, &zero);
        }
        if from.is_float() && matches!(to, Elt::I32 | Elt::I64) {
            let (lo, hi) = match to {
                Elt::I32 => (i32::MIN as f64, 2f64.powi(31)),
                _ => (i64::MIN as f64, 2f64.powi(63)),
            };
            let lo_f = self.like(x, lo);
            let hi_f = self.like(x, hi);
            let c = self.b.convert(x, to);
            let ty = x.ty.with_elt(to);
            let min = self.b.splat_lit(&to.lowest(), &ty);
            let max = self.b.splat_lit(&to.highest(), &ty);
            let zero = self.b.splat(0.0, &ty);
            let below = self.b.cmp(CmpOp::Lt, x, &lo_f);
            let above = self.b.cmp(CmpOp::Ge, x, &hi_f);
            let nan = self.is_nan(x);
            let r = self.b.select(&below, &min, &c);
            let r = self.b.select(&above, &max, &r);
            return self.b.select(&nan, &zero, &r);
        }
        self.b.convert(x, to)
    }

    /// `erf` through CHLO (`chlo.erf`), which XLA expands into its own
    /// rational approximation (a few ulp in f32, as JAX's `erf`): a
    /// handful of operations an element, where a series evaluated in f64
    /// took hundreds and dominated GELU.
    fn erf(&mut self, x: &V) -> V {
        self.b.chlo("erf", &[x], x.ty.clone())
    }

    /// `ir::random::uniform` for element `i` (row-major) under the
    /// i64 scalar `seed`, in ui32 arithmetic.
    pub(super) fn random_uniform(&mut self, seed: &V, ty: &Ty) -> V {
        let mask = self.b.scalar(u32::MAX as f64, Elt::I64);
        let lo = self.b.bin("and", seed, &mask);
        let lo = self.b.convert(&lo, Elt::U32);
        let c32 = self.b.scalar(32.0, Elt::I64);
        let hi = self.b.bin("shift_right_arithmetic", seed, &c32);
        let hi = self.b.bin("and", &hi, &mask);
        let hi = self.b.convert(&hi, Elt::U32);
        let mh = self.mix32(&hi);
        let s = self.b.bin("xor", &lo, &mh);
        let s = self.mix32(&s);
        let flat = Ty::fixed(Elt::U32, &[ty.numel()]);
        let i = self.b.iota(&flat, 0);
        let golden = self.b.splat(0x9e37_79b9u32 as f64, &flat);
        let h = self.b.bin("multiply", &i, &golden);
        let sb = self.b.fill(&s, &flat);
        let h = self.b.bin("xor", &h, &sb);
        let bits = self.mix32(&h);
        let eight = self.b.splat(8.0, &flat);
        let top = self.b.bin("shift_right_logical", &bits, &eight);
        let f = self.b.convert(&top, Elt::F64);
        let scale = self.b.splat(1.0 / (1u64 << 24) as f64, &f.ty);
        let u = self.b.bin("multiply", &f, &scale);
        let u = self.b.convert(&u, ty.elt);
        self.b.reshape(&u, ty.bound())
    }

    /// Wellons' lowbias32 hash in ui32 ops.
    fn mix32(&mut self, x: &V) -> V {
        let mut x = x.clone();
        for (shift, mul) in [(16u32, 0x7feb_352du32), (15, 0x846c_a68b)] {
            let s = self.b.splat(shift as f64, &x.ty);
            let t = self.b.bin("shift_right_logical", &x, &s);
            x = self.b.bin("xor", &x, &t);
            let m = self.b.splat(mul as f64, &x.ty);
            x = self.b.bin("multiply", &x, &m);
        }
        let s = self.b.splat(16.0, &x.ty);
        let t = self.b.bin("shift_right_logical", &x, &s);
        self.b.bin("xor", &x, &t)
    }
}
