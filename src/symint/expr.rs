//! Size expressions in a canonical linear form, with interval bounds.
//!
//! An expression is `c + Σ kᵢ·atomᵢ`: an integer constant plus integer
//! multiples of atoms, where an atom is a variable or a non-linear operation
//! (product of two non-constant expressions, floor division, remainder, min,
//! max). Terms are kept sorted and merged, so `a + b` and `b + a`, or
//! `x * 2 + x` and `3 * x`, are structurally equal. Equality of sizes in the
//! runtime is exactly equality of this form.
//!
//! Bounds are computed by interval arithmetic treating atoms as independent,
//! which is sound (never excludes a possible value) for every operator,
//! including subtraction, floor division and remainder.

use super::var::VarRef;
use std::fmt;
use std::sync::Arc;

/// A size expression (immutable, cheap to clone).
///
/// Canonical: `Const` exactly when there are no terms, so derived equality
/// is equality of the linear form. Constants, which most dimensions are,
/// take no allocation and no reference count: shapes are cloned and
/// dropped for every recorded op.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum SizeExpr {
    /// A known size.
    Const(i64),
    /// At least one term.
    Linear(Arc<Linear>),
}

#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Linear {
    constant: i64,
    /// Sorted by atom, no zero coefficients, no repeated atoms. Inline
    /// for one term: most dynamic sizes are a variable, possibly scaled
    /// or offset, and building one must cost a single allocation.
    terms: Terms,
    lo: i64,
    hi: i64,
}

type Terms = smallvec::SmallVec<[(Atom, i64); 1]>;

/// A non-linear building block of an expression, with its bounds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Atom {
    pub op: AtomOp,
    pub lo: i64,
    pub hi: i64,
}

/// The operation an atom stands for; binary operands of commutative
/// operations are stored sorted.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum AtomOp {
    Var(VarRef),
    Mul(SizeExpr, SizeExpr),
    FloorDiv(SizeExpr, SizeExpr),
    Rem(SizeExpr, SizeExpr),
    Min(SizeExpr, SizeExpr),
    Max(SizeExpr, SizeExpr),
}

fn floor_div(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// Python's `%`: the result has the sign of the divisor.
fn py_rem(a: i64, b: i64) -> i64 {
    a - b * floor_div(a, b)
}

fn sat_mul(a: i64, b: i64) -> i64 {
    a.saturating_mul(b)
}

impl SizeExpr {
    fn build(constant: i64, terms: Terms) -> SizeExpr {
        if terms.is_empty() {
            return SizeExpr::Const(constant);
        }
        let (mut lo, mut hi) = (constant, constant);
        for (atom, k) in &terms {
            let (a, b) = (sat_mul(atom.lo, *k), sat_mul(atom.hi, *k));
            lo = lo.saturating_add(a.min(b));
            hi = hi.saturating_add(a.max(b));
        }
        SizeExpr::Linear(Arc::new(Linear {
            constant,
            terms,
            lo,
            hi,
        }))
    }

    /// A constant.
    pub fn constant(c: i64) -> SizeExpr {
        SizeExpr::build(c, Terms::new())
    }

    /// A variable.
    pub fn var(v: VarRef) -> SizeExpr {
        let (lo, hi) = (v.0.lo, v.0.hi);
        SizeExpr::atom(Atom {
            op: AtomOp::Var(v),
            lo,
            hi,
        })
    }

    fn atom(a: Atom) -> SizeExpr {
        if a.lo == a.hi {
            // An atom whose bounds meet is a constant (e.g. `min(x, 0)` for
            // `x >= 0`); folding keeps equality checks simple.
            return SizeExpr::constant(a.lo);
        }
        SizeExpr::build(0, smallvec::smallvec![(a, 1)])
    }

    /// The smallest possible value.
    pub fn lo(&self) -> i64 {
        match self {
            SizeExpr::Const(c) => *c,
            SizeExpr::Linear(l) => l.lo,
        }
    }

    /// The largest possible value.
    pub fn hi(&self) -> i64 {
        match self {
            SizeExpr::Const(c) => *c,
            SizeExpr::Linear(l) => l.hi,
        }
    }

    /// `Some(c)` when the expression is the constant `c`.
    pub fn as_const(&self) -> Option<i64> {
        match self {
            SizeExpr::Const(c) => Some(*c),
            SizeExpr::Linear(_) => None,
        }
    }

    fn constant_part(&self) -> i64 {
        match self {
            SizeExpr::Const(c) => *c,
            SizeExpr::Linear(l) => l.constant,
        }
    }

    fn terms(&self) -> &[(Atom, i64)] {
        match self {
            SizeExpr::Const(_) => &[],
            SizeExpr::Linear(l) => &l.terms,
        }
    }

    /// `Some(v)` when the expression is exactly one variable.
    pub fn as_var(&self) -> Option<&VarRef> {
        match (self.constant_part(), self.terms()) {
            (
                0,
                [(
                    Atom {
                        op: AtomOp::Var(v), ..
                    },
                    1,
                )],
            ) => Some(v),
            _ => None,
        }
    }

    /// Every variable the expression mentions, each once, in order of
    /// appearance.
    pub fn vars(&self) -> Vec<VarRef> {
        let mut out = Vec::new();
        self.collect_vars(&mut out);
        out
    }

    fn collect_vars(&self, out: &mut Vec<VarRef>) {
        for (atom, _) in self.terms() {
            match &atom.op {
                AtomOp::Var(v) => {
                    if !out.contains(v) {
                        out.push(v.clone())
                    }
                }
                AtomOp::Mul(a, b)
                | AtomOp::FloorDiv(a, b)
                | AtomOp::Rem(a, b)
                | AtomOp::Min(a, b)
                | AtomOp::Max(a, b) => {
                    a.collect_vars(out);
                    b.collect_vars(out);
                }
            }
        }
    }

    /// Evaluates with `value(v)` giving each variable's value.
    pub fn eval(&self, value: &mut impl FnMut(&VarRef) -> i64) -> i64 {
        let mut total = self.constant_part();
        for (atom, k) in self.terms() {
            let x = match &atom.op {
                AtomOp::Var(v) => value(v),
                AtomOp::Mul(a, b) => a.eval(value) * b.eval(value),
                AtomOp::FloorDiv(a, b) => {
                    let d = b.eval(value);
                    if d == 0 {
                        0
                    } else {
                        floor_div(a.eval(value), d)
                    }
                }
                AtomOp::Rem(a, b) => {
                    let d = b.eval(value);
                    if d == 0 {
                        0
                    } else {
                        py_rem(a.eval(value), d)
                    }
                }
                AtomOp::Min(a, b) => a.eval(value).min(b.eval(value)),
                AtomOp::Max(a, b) => a.eval(value).max(b.eval(value)),
            };
            total += k * x;
        }
        total
    }

    /// The terms, for lowering: the constant and `(atom, coefficient)` pairs.
    #[allow(dead_code)] // read by the PJRT lowering
    pub fn parts(&self) -> (i64, &[(Atom, i64)]) {
        (self.constant_part(), self.terms())
    }

    /// `self + other`.
    pub fn add(&self, other: &SizeExpr) -> SizeExpr {
        let mut terms: Terms = Terms::with_capacity(self.terms().len() + other.terms().len());
        let (mut i, mut j) = (0, 0);
        let (a, b) = (self.terms(), other.terms());
        while i < a.len() || j < b.len() {
            let take_a = j >= b.len() || (i < a.len() && a[i].0 < b[j].0);
            let take_b = i >= a.len() || (j < b.len() && b[j].0 < a[i].0);
            if take_a {
                terms.push(a[i].clone());
                i += 1;
            } else if take_b {
                terms.push(b[j].clone());
                j += 1;
            } else {
                let k = a[i].1 + b[j].1;
                if k != 0 {
                    terms.push((a[i].0.clone(), k));
                }
                i += 1;
                j += 1;
            }
        }
        SizeExpr::build(self.constant_part() + other.constant_part(), terms)
    }

    /// `k * self` for an integer `k`.
    pub fn scale(&self, k: i64) -> SizeExpr {
        if k == 0 {
            return SizeExpr::constant(0);
        }
        let terms = self
            .terms()
            .iter()
            .map(|(a, c)| (a.clone(), c * k))
            .collect();
        SizeExpr::build(self.constant_part() * k, terms)
    }

    /// `self - other`.
    pub fn sub(&self, other: &SizeExpr) -> SizeExpr {
        self.add(&other.scale(-1))
    }

    /// `self * other`.
    pub fn mul(&self, other: &SizeExpr) -> SizeExpr {
        match (self.as_const(), other.as_const()) {
            (Some(a), _) => other.scale(a),
            (_, Some(b)) => self.scale(b),
            _ => {
                let corners = [
                    sat_mul(self.lo(), other.lo()),
                    sat_mul(self.lo(), other.hi()),
                    sat_mul(self.hi(), other.lo()),
                    sat_mul(self.hi(), other.hi()),
                ];
                let (x, y) = sorted(self, other);
                SizeExpr::atom(Atom {
                    op: AtomOp::Mul(x, y),
                    lo: *corners.iter().min().expect("four corners"),
                    hi: *corners.iter().max().expect("four corners"),
                })
            }
        }
    }

    /// Floor division (rounds toward negative infinity, like Python's `//`).
    ///
    /// Bounds: on each sign-constant part of the divisor's interval (zero
    /// excluded: dividing by zero is an error when evaluated), `a / b` is
    /// monotone in each argument, so its extremes lie at the corners.
    pub fn floor_div(&self, other: &SizeExpr) -> SizeExpr {
        if let (Some(a), Some(b)) = (self.as_const(), other.as_const()) {
            assert!(b != 0, "SymInt::div_floor: division by zero");
            return SizeExpr::constant(floor_div(a, b));
        }
        if let Some(k) = other.as_const() {
            // Exact division of a linear form: `(6*s0 + 3) // 3 = 2*s0 + 1`.
            if self.constant_part() % k == 0 && self.terms().iter().all(|(_, c)| c % k == 0) {
                let terms = self
                    .terms()
                    .iter()
                    .map(|(a, c)| (a.clone(), c / k))
                    .collect();
                return SizeExpr::build(self.constant_part() / k, terms);
            }
        }
        let mut candidates = Vec::new();
        for (blo, bhi) in nonzero_parts(other.lo(), other.hi()) {
            for a in [self.lo(), self.hi()] {
                for b in [blo, bhi] {
                    candidates.push(floor_div(a, b));
                }
            }
        }
        let (lo, hi) = if candidates.is_empty() {
            (0, 0)
        } else {
            (
                *candidates.iter().min().expect("nonempty"),
                *candidates.iter().max().expect("nonempty"),
            )
        };
        SizeExpr::atom(Atom {
            op: AtomOp::FloorDiv(self.clone(), other.clone()),
            lo,
            hi,
        })
    }

    /// Remainder with the sign of the divisor (Python's `%`).
    ///
    /// Bounds: for a positive divisor `b`, the result lies in `[0, b.hi-1]`,
    /// and equals `a` when `0 <= a < b` is certain; a negative divisor
    /// mirrors this.
    pub fn rem(&self, other: &SizeExpr) -> SizeExpr {
        if let (Some(a), Some(b)) = (self.as_const(), other.as_const()) {
            assert!(b != 0, "SymInt::rem: division by zero");
            return SizeExpr::constant(py_rem(a, b));
        }
        if self.lo() >= 0 && other.lo() > 0 && self.hi() < other.lo() {
            return self.clone();
        }
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        for (blo, bhi) in nonzero_parts(other.lo(), other.hi()) {
            if blo > 0 {
                lo = lo.min(0);
                let mut h = bhi - 1;
                if self.lo() >= 0 {
                    h = h.min(self.hi());
                }
                hi = hi.max(h);
            } else {
                hi = hi.max(0);
                let mut l = blo + 1;
                if self.hi() <= 0 {
                    l = l.max(self.lo());
                }
                lo = lo.min(l);
            }
        }
        if lo > hi {
            (lo, hi) = (0, 0);
        }
        SizeExpr::atom(Atom {
            op: AtomOp::Rem(self.clone(), other.clone()),
            lo,
            hi,
        })
    }

    /// The smaller of two expressions.
    pub fn minimum(&self, other: &SizeExpr) -> SizeExpr {
        if self == other || self.hi() <= other.lo() {
            return self.clone();
        }
        if other.hi() <= self.lo() {
            return other.clone();
        }
        let (x, y) = sorted(self, other);
        SizeExpr::atom(Atom {
            lo: self.lo().min(other.lo()),
            hi: self.hi().min(other.hi()),
            op: AtomOp::Min(x, y),
        })
    }

    /// The larger of two expressions.
    pub fn maximum(&self, other: &SizeExpr) -> SizeExpr {
        if self == other || self.hi() <= other.lo() {
            return other.clone();
        }
        if other.hi() <= self.lo() {
            return self.clone();
        }
        let (x, y) = sorted(self, other);
        SizeExpr::atom(Atom {
            lo: self.lo().max(other.lo()),
            hi: self.hi().max(other.hi()),
            op: AtomOp::Max(x, y),
        })
    }

    /// The expression with each variable `v` for which `f` gives a value
    /// replaced by it (a loop's body instantiated on other operands).
    pub fn substitute(&self, f: &mut dyn FnMut(&VarRef) -> Option<SizeExpr>) -> SizeExpr {
        let mut acc = SizeExpr::constant(self.constant_part());
        for (atom, k) in self.terms() {
            let x = match &atom.op {
                AtomOp::Var(v) => f(v).unwrap_or_else(|| SizeExpr::var(v.clone())),
                AtomOp::Mul(a, b) => a.substitute(f).mul(&b.substitute(f)),
                AtomOp::FloorDiv(a, b) => a.substitute(f).floor_div(&b.substitute(f)),
                AtomOp::Rem(a, b) => a.substitute(f).rem(&b.substitute(f)),
                AtomOp::Min(a, b) => a.substitute(f).minimum(&b.substitute(f)),
                AtomOp::Max(a, b) => a.substitute(f).maximum(&b.substitute(f)),
            };
            acc = acc.add(&x.scale(*k));
        }
        acc
    }

    /// Formats with `name(v)` naming each variable.
    pub fn fmt_with(
        &self,
        f: &mut dyn fmt::Write,
        name: &mut dyn FnMut(&VarRef) -> String,
    ) -> fmt::Result {
        let (constant, terms) = (self.constant_part(), self.terms());
        if terms.is_empty() {
            return write!(f, "{constant}");
        }
        for (i, (atom, k)) in terms.iter().enumerate() {
            let (sign, mag) = if *k < 0 { ("-", -k) } else { ("+", *k) };
            if i == 0 {
                if *k < 0 {
                    f.write_str("-")?;
                }
            } else {
                write!(f, " {sign} ")?;
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            match &atom.op {
                AtomOp::Var(v) => f.write_str(&name(v))?,
                AtomOp::Mul(a, b) => bin(f, name, a, "*", b)?,
                AtomOp::FloorDiv(a, b) => bin(f, name, a, "//", b)?,
                AtomOp::Rem(a, b) => bin(f, name, a, "%", b)?,
                AtomOp::Min(a, b) => call(f, name, "min", a, b)?,
                AtomOp::Max(a, b) => call(f, name, "max", a, b)?,
            }
        }
        if constant != 0 {
            let sign = if constant < 0 { "-" } else { "+" };
            write!(f, " {sign} {}", constant.abs())?;
        }
        Ok(())
    }
}

fn bin(
    f: &mut dyn fmt::Write,
    name: &mut dyn FnMut(&VarRef) -> String,
    a: &SizeExpr,
    op: &str,
    b: &SizeExpr,
) -> fmt::Result {
    f.write_str("(")?;
    a.fmt_with(f, name)?;
    write!(f, " {op} ")?;
    b.fmt_with(f, name)?;
    f.write_str(")")
}

fn call(
    f: &mut dyn fmt::Write,
    name: &mut dyn FnMut(&VarRef) -> String,
    op: &str,
    a: &SizeExpr,
    b: &SizeExpr,
) -> fmt::Result {
    write!(f, "{op}(")?;
    a.fmt_with(f, name)?;
    f.write_str(", ")?;
    b.fmt_with(f, name)?;
    f.write_str(")")
}

fn sorted(a: &SizeExpr, b: &SizeExpr) -> (SizeExpr, SizeExpr) {
    if a <= b {
        (a.clone(), b.clone())
    } else {
        (b.clone(), a.clone())
    }
}

/// The parts of `[lo, hi]` without zero: at most a negative and a positive
/// interval.
fn nonzero_parts(lo: i64, hi: i64) -> Vec<(i64, i64)> {
    let mut parts = Vec::new();
    if lo < 0 {
        parts.push((lo, hi.min(-1)));
    }
    if hi > 0 {
        parts.push((lo.max(1), hi));
    }
    parts
}

impl fmt::Display for SizeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.fmt_with(&mut s, &mut |v| format!("s{}", v.0.id))?;
        f.write_str(&s)
    }
}
