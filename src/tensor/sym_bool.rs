//! `SymBool`: the result of comparing two sizes, decided from their bounds
//! when they allow only one answer and by materializing the sizes
//! otherwise.

use super::sym_int::anchors_of;
use super::SymInt;
use crate::ir::CmpOp;
use crate::Result;
use std::fmt;

/// A comparison of two sizes ([`SymInt::sym_eq`], [`SymInt::sym_lt`], ..).
///
/// Building one runs nothing. [`as_static`](SymBool::as_static) answers
/// when the sizes' bounds decide it (`n <= 25` for `n` in `[0, 25]`, or
/// `a == a`); [`to_bool`](SymBool::to_bool) answers always, running what
/// the sizes need when the bounds do not decide.
///
/// ```
/// use lazyxla::Tensor;
/// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
/// let n = x.nonzero().size(0); // in [0, 3]
/// assert_eq!(n.sym_le(3).as_static(), Some(true));
/// assert_eq!(n.sym_eq(2).as_static(), None);
/// assert!(n.sym_eq(2).to_bool().unwrap()); // runs the sizes once
/// assert_eq!(n.sym_le(3).to_string(), format!("{} <= 3", n.describe()));
/// ```
#[derive(Clone)]
pub struct SymBool {
    cmp: CmpOp,
    lhs: SymInt,
    rhs: SymInt,
}

/// The comparisons of sizes are those of tensors (`ir::CmpOp`), applied
/// to integers.
trait SizeCmp: Sized {
    /// The operator as printed.
    fn symbol(self) -> &'static str;
    /// The comparison that holds exactly when this one does not.
    fn negated(self) -> Self;
    /// The answer for `lhs - rhs` in `[lo, hi]`, when all agree.
    fn decide(self, lo: i64, hi: i64) -> Option<bool>;
    /// The comparison of two values.
    fn apply(self, a: i64, b: i64) -> bool;
}

impl SizeCmp for CmpOp {
    #[track_caller]
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    #[track_caller]
    fn negated(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
        }
    }

    /// The answer for a difference `lhs - rhs` known to lie in `[lo, hi]`,
    /// when every value there gives the same one.
    #[track_caller]
    fn decide(self, lo: i64, hi: i64) -> Option<bool> {
        let (always, never) = match self {
            CmpOp::Eq => (lo == 0 && hi == 0, lo > 0 || hi < 0),
            CmpOp::Ne => (lo > 0 || hi < 0, lo == 0 && hi == 0),
            CmpOp::Lt => (hi < 0, lo >= 0),
            CmpOp::Le => (hi <= 0, lo > 0),
            CmpOp::Gt => (lo > 0, hi <= 0),
            CmpOp::Ge => (lo >= 0, hi < 0),
        };
        if always {
            Some(true)
        } else if never {
            Some(false)
        } else {
            None
        }
    }

    #[track_caller]
    fn apply(self, a: i64, b: i64) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

impl SymBool {
    #[track_caller]
    fn new(cmp: CmpOp, lhs: &SymInt, rhs: SymInt) -> SymBool {
        SymBool {
            cmp,
            lhs: lhs.clone(),
            rhs,
        }
    }

    /// The answer when the sizes' bounds decide it, without running
    /// anything: from the bounds of `lhs - rhs` (terms common to both sides
    /// cancel, so `n + 1 > n` is decided) and of each side. `None` when
    /// both answers are possible.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap().mark_dynamic(0, 25);
    /// let n = x.size(0); // in [0, 25]
    /// assert_eq!(n.sym_le(25).as_static(), Some(true));
    /// assert_eq!(n.sym_lt(0).as_static(), Some(false));
    /// assert_eq!(n.sym_eq(&n).as_static(), Some(true));
    /// assert_eq!((&n + 1).sym_gt(&n).as_static(), Some(true));
    /// assert_eq!(n.sym_gt(3).as_static(), None);
    /// ```
    #[track_caller]
    pub fn as_static(&self) -> Option<bool> {
        let (l, r) = (&self.lhs.expr, &self.rhs.expr);
        let d = l.sub(r);
        // Both intervals hold the difference; their intersection is tighter
        // than either alone.
        let lo = d.lo().max(l.lo().saturating_sub(r.hi()));
        let hi = d.hi().min(l.hi().saturating_sub(r.lo()));
        self.cmp.decide(lo, hi)
    }

    /// The answer: [`as_static`](SymBool::as_static)'s when the bounds
    /// decide (nothing runs), else the sizes' values compared. Those are
    /// materialized as [`SymInt::materialize`] does: one
    /// `SizeMaterialization`, running only what computes the sizes, and
    /// cached, so asking again about the same sizes runs nothing.
    ///
    /// Errors: those of running the program that computes the sizes.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 0.0], &[4]).unwrap();
    /// let n = x.nonzero().size(0);
    /// assert!(n.sym_lt(3).to_bool().unwrap());
    /// assert!(!n.sym_ne(2).to_bool().unwrap());
    /// ```
    #[track_caller]
    pub fn to_bool(&self) -> Result<bool> {
        crate::tensor::at_site("to_bool", || {
            if let Some(b) = self.as_static() {
                return Ok(b);
            }
            let anchors = anchors_of([&self.lhs, &self.rhs]);
            let exprs = [self.lhs.expr.clone(), self.rhs.expr.clone()];
            super::sync::verify()?;
            let v = crate::runtime::materialize::materialize_all(&exprs, &anchors)?;
            Ok(self.cmp.apply(v[0], v[1]))
        })
    }

    /// The negated comparison (`a < b` becomes `a >= b`); runs nothing.
    /// `!b` does the same.
    ///
    /// ```
    /// use lazyxla::SymInt;
    /// let b = SymInt::from(3).sym_lt(5).not();
    /// assert_eq!(b.to_string(), "3 >= 5");
    /// assert_eq!(b.as_static(), Some(false));
    /// ```
    #[track_caller]
    pub fn not(&self) -> SymBool {
        SymBool {
            cmp: self.cmp.negated(),
            lhs: self.lhs.clone(),
            rhs: self.rhs.clone(),
        }
    }
}

impl std::ops::Not for SymBool {
    type Output = SymBool;
    #[track_caller]
    fn not(self) -> SymBool {
        SymBool::not(&self)
    }
}

impl std::ops::Not for &SymBool {
    type Output = SymBool;
    #[track_caller]
    fn not(self) -> SymBool {
        SymBool::not(self)
    }
}

impl fmt::Display for SymBool {
    /// Both sizes with their bounds and the operator, e.g.
    /// `s0 in [0, 25] <= 25`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            self.lhs.describe(),
            self.cmp.symbol(),
            self.rhs.describe()
        )
    }
}

impl fmt::Debug for SymBool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

macro_rules! comparisons {
    ($($(#[$doc:meta])* $name:ident => $cmp:ident,)*) => {
        impl SymInt {
            $(
                $(#[$doc])*
                pub fn $name(&self, other: impl Into<SymInt>) -> SymBool {
                    SymBool::new(CmpOp::$cmp, self, other.into())
                }
            )*
        }
    };
}

comparisons! {
    /// `self == other` as a [`SymBool`] (runs nothing).
    ///
    /// ```
    /// let n = lazyxla::SymInt::from(4);
    /// assert_eq!(n.sym_eq(4).as_static(), Some(true));
    /// ```
    sym_eq => Eq,
    /// `self != other` as a [`SymBool`] (runs nothing).
    sym_ne => Ne,
    /// `self < other` as a [`SymBool`] (runs nothing).
    sym_lt => Lt,
    /// `self <= other` as a [`SymBool`] (runs nothing).
    sym_le => Le,
    /// `self > other` as a [`SymBool`] (runs nothing).
    sym_gt => Gt,
    /// `self >= other` as a [`SymBool`] (runs nothing).
    sym_ge => Ge,
}

#[cfg(test)]
mod tests {
    use super::{CmpOp, SizeCmp};

    /// Every operator's decision over small intervals agrees with checking
    /// every value in them.
    #[test]
    fn decisions_match_every_value_of_the_interval() {
        let ops = [
            CmpOp::Eq,
            CmpOp::Ne,
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Gt,
            CmpOp::Ge,
        ];
        for op in ops {
            for lo in -3..=3 {
                for hi in lo..=3 {
                    let answers: Vec<bool> = (lo..=hi).map(|d| op.apply(d, 0)).collect();
                    let want = if answers.iter().all(|&a| a) {
                        Some(true)
                    } else if answers.iter().all(|&a| !a) {
                        Some(false)
                    } else {
                        None
                    };
                    assert_eq!(op.decide(lo, hi), want, "{op:?} on [{lo}, {hi}]");
                    assert_eq!(
                        op.negated().decide(lo, hi),
                        want.map(|b| !b),
                        "{op:?} negated"
                    );
                }
            }
        }
    }
}
