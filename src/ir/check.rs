//! Size checks: conditions on sizes that recording could not decide, so
//! the program decides them when it runs.
//!
//! An op whose operands must agree on a size (`a - b`, a matmul's
//! contraction, `cat` off its axis) proves it from the size expressions
//! when it can, rejects it at once when the bounds or constants make it
//! impossible, and otherwise records a [`SizeCheck`] in an `Op::Guard`
//! node. Every program that computes a value downstream of the guard
//! evaluates the check on the device; a failed check is an error of the
//! step ([`SizeCheck::failure`]), and the runtime binds none of the step's
//! results. The same mechanism turns a possibly-negative computed size and
//! a dynamic element count that must divide into checks, where a silent
//! clamp would give a wrong shape.

use crate::error::Error;
use crate::symint::SizeExpr;

/// What a check asserts of its two sizes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CheckKind {
    /// `lhs == rhs`.
    Equal,
    /// `lhs >= 0` (`rhs` is 0).
    NonNegative,
    /// `lhs` is a multiple of `rhs` (a positive constant).
    MultipleOf,
    /// `lhs <= rhs` (a constant): a size within a declared bound.
    AtMost,
}

/// One recorded condition on sizes, with the op that needs it (for the
/// message when it fails).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SizeCheck {
    /// The op that recorded the check.
    pub op: &'static str,
    /// The condition.
    pub kind: CheckKind,
    /// The first size.
    pub lhs: SizeExpr,
    /// The second size.
    pub rhs: SizeExpr,
}

impl SizeCheck {
    /// `lhs == rhs`.
    pub fn equal(op: &'static str, lhs: &SizeExpr, rhs: &SizeExpr) -> SizeCheck {
        SizeCheck {
            op,
            kind: CheckKind::Equal,
            lhs: lhs.clone(),
            rhs: rhs.clone(),
        }
    }

    /// `size >= 0`.
    pub fn non_negative(op: &'static str, size: &SizeExpr) -> SizeCheck {
        SizeCheck {
            op,
            kind: CheckKind::NonNegative,
            lhs: size.clone(),
            rhs: SizeExpr::constant(0),
        }
    }

    /// `count` is a multiple of `k` (> 0).
    pub fn multiple_of(op: &'static str, count: &SizeExpr, k: i64) -> SizeCheck {
        SizeCheck {
            op,
            kind: CheckKind::MultipleOf,
            lhs: count.clone(),
            rhs: SizeExpr::constant(k),
        }
    }

    /// `size <= bound`.
    pub fn at_most(op: &'static str, size: &SizeExpr, bound: i64) -> SizeCheck {
        SizeCheck {
            op,
            kind: CheckKind::AtMost,
            lhs: size.clone(),
            rhs: SizeExpr::constant(bound),
        }
    }

    /// Whether the check holds for the values `l` and `r` of its sizes.
    pub fn holds(&self, l: i64, r: i64) -> bool {
        match self.kind {
            CheckKind::Equal => l == r,
            CheckKind::NonNegative => l >= 0,
            CheckKind::MultipleOf => r > 0 && l.rem_euclid(r) == 0,
            CheckKind::AtMost => l <= r,
        }
    }

    /// The answer when the expressions and their bounds decide it, without
    /// running anything: `Some(true)` needs no check, `Some(false)` is an
    /// error at recording time.
    pub fn decided(&self) -> Option<bool> {
        let (l, r) = (&self.lhs, &self.rhs);
        match self.kind {
            CheckKind::Equal => {
                if l == r {
                    Some(true)
                } else if l.hi() < r.lo() || r.hi() < l.lo() {
                    Some(false)
                } else {
                    match (l.as_const(), r.as_const()) {
                        (Some(a), Some(b)) => Some(a == b),
                        _ => None,
                    }
                }
            }
            CheckKind::NonNegative => {
                if l.lo() >= 0 {
                    Some(true)
                } else if l.hi() < 0 {
                    Some(false)
                } else {
                    None
                }
            }
            CheckKind::MultipleOf => match (l.as_const(), r.as_const()) {
                (Some(a), Some(b)) => Some(self.holds(a, b)),
                (None, Some(1)) => Some(true),
                // `k * x` is a multiple of `k` whatever `x` is.
                (None, Some(b)) if b > 0 && l.floor_div(r).mul(r) == *l => Some(true),
                _ => None,
            },
            CheckKind::AtMost => {
                if l.hi() <= r.lo() {
                    Some(true)
                } else if l.lo() > r.hi() {
                    Some(false)
                } else {
                    None
                }
            }
        }
    }

    /// What the check asserts, for messages: `s3 in [0, 64] == s5 in [0, 64]`.
    pub fn describe(&self) -> String {
        let (l, r) = (describe(&self.lhs), describe(&self.rhs));
        match self.kind {
            CheckKind::Equal => format!("the sizes {l} and {r} must be equal"),
            CheckKind::NonNegative => format!("the size {l} must not be negative"),
            CheckKind::MultipleOf => format!("the element count {l} must be a multiple of {r}"),
            CheckKind::AtMost => format!("the size {l} must be at most {r}"),
        }
    }

    /// The short form the printer shows: `s0 == s1`, `s0 - 2 >= 0`.
    pub fn condition(&self, expr: &mut impl FnMut(&SizeExpr) -> String) -> String {
        match self.kind {
            CheckKind::Equal => format!("{} == {}", expr(&self.lhs), expr(&self.rhs)),
            CheckKind::NonNegative => format!("{} >= 0", expr(&self.lhs)),
            CheckKind::MultipleOf => format!("{} % {} == 0", expr(&self.lhs), expr(&self.rhs)),
            CheckKind::AtMost => format!("{} <= {}", expr(&self.lhs), expr(&self.rhs)),
        }
    }

    /// The error for a check that did not hold when the program ran, with
    /// the values its sizes had (`l`, `r`).
    pub fn failure(&self, l: i64, r: i64) -> Error {
        if let ("narrow", CheckKind::Equal) = (self.op, self.kind) {
            // `narrow`'s check: the elements there from its start against
            // the length it asked for.
            return Error::SizeCheckFailed {
                op: self.op,
                message: format!(
                    "{l} elements were asked for, but the dynamic dim holds only {r} from the start \
                     (the check: {}); narrow takes exactly its length: check the size first \
                     (`size(dim).sym_ge(start + len)`), or take at most that many with \
                     `slice(dim, start..start + len)`",
                    self.describe()
                ),
            };
        }
        let values = match self.kind {
            CheckKind::Equal => format!("they are {l} and {r}"),
            CheckKind::NonNegative => format!("it is {l}"),
            CheckKind::MultipleOf | CheckKind::AtMost => format!("it is {l}"),
        };
        let fix = match self.kind {
            CheckKind::Equal => {
                "derive both operands from the same dynamic tensor (or mask), or `pad_to_bound` both"
            }
            CheckKind::NonNegative => "check the size (e.g. with `sym_ge`) before using it",
            CheckKind::MultipleOf => "choose sizes that divide the element count",
            CheckKind::AtMost => "raise the bound (`with_bound`, or the bound of a loop carry's initial value)",
        };
        Error::SizeCheckFailed {
            op: self.op,
            message: format!(
                "{}, but {values} when the program runs; {fix}",
                self.describe()
            ),
        }
    }
}

/// `s3 + 1 in [1, 6]`, or `5` for a constant.
fn describe(e: &SizeExpr) -> String {
    match e.as_const() {
        Some(c) => c.to_string(),
        None => format!("{e} in [{}, {}]", e.lo(), e.hi()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symint::VarRef;

    #[test]
    fn bounds_decide_what_they_can() {
        let a = SizeExpr::var(VarRef::fresh(0, 10));
        let b = SizeExpr::var(VarRef::fresh(0, 10));
        let far = SizeExpr::var(VarRef::fresh(20, 30));
        assert_eq!(SizeCheck::equal("t", &a, &a).decided(), Some(true));
        assert_eq!(SizeCheck::equal("t", &a, &b).decided(), None);
        assert_eq!(SizeCheck::equal("t", &a, &far).decided(), Some(false));
        let c = |v| SizeExpr::constant(v);
        assert_eq!(SizeCheck::equal("t", &c(3), &c(4)).decided(), Some(false));
        assert_eq!(SizeCheck::non_negative("t", &a).decided(), Some(true));
        assert_eq!(SizeCheck::non_negative("t", &a.sub(&c(2))).decided(), None);
        assert_eq!(SizeCheck::non_negative("t", &c(-1)).decided(), Some(false));
        assert_eq!(
            SizeCheck::multiple_of("t", &a.scale(3), 3).decided(),
            Some(true)
        );
        assert_eq!(SizeCheck::multiple_of("t", &a.scale(3), 2).decided(), None);
        assert!(SizeCheck::multiple_of("t", &a, 4).holds(8, 4));
        assert!(!SizeCheck::multiple_of("t", &a, 4).holds(9, 4));
    }
}
