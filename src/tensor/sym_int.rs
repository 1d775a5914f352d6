//! `SymInt`: a tensor size that is either a known integer or a symbolic
//! expression over data-dependent sizes, with correct lower and upper
//! bounds, anchored to the graph nodes that can compute it.

use crate::ir::Node;
use crate::symint::SizeExpr;
use crate::Result;
use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

/// A size: a static integer, or an expression over dynamic sizes with
/// bounds.
///
/// Arithmetic (`+ - *`, [`div_floor`](SymInt::div_floor),
/// [`rem`](SymInt::rem), [`min`](SymInt::min), [`max`](SymInt::max)) never
/// runs anything; it builds an expression whose bounds are computed by
/// interval arithmetic. [`materialize`](SymInt::materialize) runs just what
/// the value needs and caches it.
///
/// ```
/// use lazyxla::SymInt;
/// let a = SymInt::from(7);
/// assert_eq!(a.to_string(), "7");
/// assert_eq!((a.clone() * 2 + 1).as_static(), Some(15));
/// ```
#[derive(Clone)]
pub struct SymInt {
    pub(crate) expr: SizeExpr,
    /// Graph nodes that can compute the variables of `expr` that no program
    /// has computed yet; they keep those nodes alive while the user holds
    /// the size. Never stored inside a graph node (that would be a cycle).
    pub(crate) anchors: SmallVec<[Arc<Node>; 1]>,
}

impl SymInt {
    #[track_caller]
    pub(crate) fn new(expr: SizeExpr, anchors: SmallVec<[Arc<Node>; 1]>) -> SymInt {
        let mut s = SymInt { expr, anchors };
        s.prune_anchors();
        s
    }

    #[track_caller]
    pub(crate) fn from_expr(expr: SizeExpr) -> SymInt {
        SymInt {
            expr,
            anchors: SmallVec::new(),
        }
    }

    /// Drops anchors once no variable needs one (static, or all computed).
    #[track_caller]
    fn prune_anchors(&mut self) {
        if self
            .expr
            .vars()
            .iter()
            .all(crate::runtime::size_values::is_bound)
        {
            self.anchors.clear();
        }
    }

    /// True when the size depends on data.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert!(n.is_dynamic());
    /// assert!(!x.size(0).is_dynamic());
    /// ```
    #[track_caller]
    pub fn is_dynamic(&self) -> bool {
        self.expr.as_const().is_none()
    }

    /// The value when the size is static.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.as_static(), None);
    /// assert_eq!(x.size(0).as_static(), Some(3));
    /// ```
    #[track_caller]
    pub fn as_static(&self) -> Option<i64> {
        self.expr.as_const()
    }

    /// The largest value the size can take.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.upper_bound(), 3);
    /// ```
    #[track_caller]
    pub fn upper_bound(&self) -> i64 {
        self.expr.hi()
    }

    /// The smallest value the size can take.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.lower_bound(), 0);
    /// ```
    #[track_caller]
    pub fn lower_bound(&self) -> i64 {
        self.expr.lo()
    }

    /// The real value: runs what it needs (only the sizes, not the tensors),
    /// counts `SizeMaterialization`, and caches the answer so that asking
    /// again runs nothing.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.materialize().unwrap(), 2);
    /// ```
    #[track_caller]
    pub fn materialize(&self) -> Result<i64> {
        crate::tensor::at_site("materialize", || {
            super::sync::verify()?;
            crate::runtime::materialize::materialize(&self.expr, &self.anchors)
        })
    }

    #[track_caller]
    fn combine(&self, other: &SymInt, expr: SizeExpr) -> SymInt {
        SymInt::new(expr, anchors_of([self, other]))
    }

    #[track_caller]
    fn unary(&self, expr: SizeExpr) -> SymInt {
        SymInt::new(expr, self.anchors.clone())
    }

    /// Floor division, as Python's `//`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.div_floor(2).upper_bound(), 1);
    /// assert_eq!(n.div_floor(2).materialize().unwrap(), 1);
    /// ```
    #[track_caller]
    pub fn div_floor(&self, other: impl Into<SymInt>) -> SymInt {
        let o = other.into();
        self.combine(&o, self.expr.floor_div(&o.expr))
    }

    /// Remainder with the sign of the divisor, as Python's `%`.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.rem(2).materialize().unwrap(), 0);
    /// ```
    #[track_caller]
    pub fn rem(&self, other: impl Into<SymInt>) -> SymInt {
        let o = other.into();
        self.combine(&o, self.expr.rem(&o.expr))
    }

    /// The smaller of two sizes.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.min(1).materialize().unwrap(), 1);
    /// assert_eq!(n.min(1).upper_bound(), 1);
    /// ```
    #[track_caller]
    pub fn min(&self, other: impl Into<SymInt>) -> SymInt {
        let o = other.into();
        self.combine(&o, self.expr.minimum(&o.expr))
    }

    /// The larger of two sizes.
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// assert_eq!(n.max(1).lower_bound(), 1);
    /// assert_eq!(n.max(1).materialize().unwrap(), 2);
    /// ```
    #[track_caller]
    pub fn max(&self, other: impl Into<SymInt>) -> SymInt {
        let o = other.into();
        self.combine(&o, self.expr.maximum(&o.expr))
    }

    /// The size expression with bounds, e.g. `s3 + 1 in [1, 6]` (for
    /// messages; variable names are process-wide ids).
    ///
    /// ```
    /// use lazyxla::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]).unwrap();
    /// let n = x.nonzero().size(0); // data-dependent: <=3
    /// println!("{}", n.describe()); // e.g. `s3 in [0, 3]`
    /// assert_eq!(x.size(0).describe(), "3");
    /// ```
    #[track_caller]
    pub fn describe(&self) -> String {
        if let Some(c) = self.as_static() {
            return c.to_string();
        }
        format!(
            "{} in [{}, {}]",
            self.expr,
            self.lower_bound(),
            self.upper_bound()
        )
    }
}

/// The anchors of `sizes`, each node once.
#[track_caller]
pub(crate) fn anchors_of<'a>(
    sizes: impl IntoIterator<Item = &'a SymInt>,
) -> SmallVec<[Arc<Node>; 1]> {
    let mut anchors: SmallVec<[Arc<Node>; 1]> = SmallVec::new();
    for a in sizes.into_iter().flat_map(|s| &s.anchors) {
        if !anchors.iter().any(|b| Arc::ptr_eq(a, b)) {
            anchors.push(a.clone());
        }
    }
    anchors
}

impl From<i64> for SymInt {
    #[track_caller]
    fn from(v: i64) -> SymInt {
        SymInt::from_expr(SizeExpr::constant(v))
    }
}

impl From<usize> for SymInt {
    #[track_caller]
    fn from(v: usize) -> SymInt {
        SymInt::from(v as i64)
    }
}

impl From<i32> for SymInt {
    #[track_caller]
    fn from(v: i32) -> SymInt {
        SymInt::from(v as i64)
    }
}

impl From<&SymInt> for SymInt {
    #[track_caller]
    fn from(v: &SymInt) -> SymInt {
        v.clone()
    }
}

/// Structural equality after canonicalisation: `a + b == b + a`. It never
/// runs anything; two dynamic sizes that happen to have the same value but
/// different expressions are not equal.
impl PartialEq for SymInt {
    fn eq(&self, other: &SymInt) -> bool {
        self.expr == other.expr
    }
}
impl Eq for SymInt {}

impl fmt::Display for SymInt {
    /// `7` for a static size, `<=25` for a dynamic one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_static() {
            Some(c) => write!(f, "{c}"),
            None => write!(f, "<={}", self.upper_bound()),
        }
    }
}

impl fmt::Debug for SymInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

macro_rules! sym_binop {
    ($trait:ident, $method:ident, $f:expr) => {
        impl std::ops::$trait<SymInt> for SymInt {
            type Output = SymInt;
            fn $method(self, rhs: SymInt) -> SymInt {
                let e = ($f)(&self.expr, &rhs.expr);
                self.combine(&rhs, e)
            }
        }
        impl std::ops::$trait<&SymInt> for &SymInt {
            type Output = SymInt;
            fn $method(self, rhs: &SymInt) -> SymInt {
                let e = ($f)(&self.expr, &rhs.expr);
                self.combine(rhs, e)
            }
        }
        impl std::ops::$trait<&SymInt> for SymInt {
            type Output = SymInt;
            fn $method(self, rhs: &SymInt) -> SymInt {
                let e = ($f)(&self.expr, &rhs.expr);
                self.combine(rhs, e)
            }
        }
        impl std::ops::$trait<i64> for SymInt {
            type Output = SymInt;
            fn $method(self, rhs: i64) -> SymInt {
                let e = ($f)(&self.expr, &SizeExpr::constant(rhs));
                self.unary(e)
            }
        }
        impl std::ops::$trait<i64> for &SymInt {
            type Output = SymInt;
            fn $method(self, rhs: i64) -> SymInt {
                let e = ($f)(&self.expr, &SizeExpr::constant(rhs));
                self.unary(e)
            }
        }
        impl std::ops::$trait<SymInt> for i64 {
            type Output = SymInt;
            fn $method(self, rhs: SymInt) -> SymInt {
                let e = ($f)(&SizeExpr::constant(self), &rhs.expr);
                rhs.unary(e)
            }
        }
        impl std::ops::$trait<&SymInt> for i64 {
            type Output = SymInt;
            fn $method(self, rhs: &SymInt) -> SymInt {
                let e = ($f)(&SizeExpr::constant(self), &rhs.expr);
                rhs.unary(e)
            }
        }
    };
}

sym_binop!(Add, add, |a: &SizeExpr, b: &SizeExpr| a.add(b));
sym_binop!(Sub, sub, |a: &SizeExpr, b: &SizeExpr| a.sub(b));
sym_binop!(Mul, mul, |a: &SizeExpr, b: &SizeExpr| a.mul(b));
