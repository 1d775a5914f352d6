//! Bounds and canonicalisation of size expressions, operator by operator.

use super::*;
use crate::SymInt;

fn var(lo: i64, hi: i64) -> SymInt {
    SymInt::from_expr(SizeExpr::var(VarRef::fresh(lo, hi)))
}

fn bounds(s: &SymInt) -> (i64, i64) {
    (s.lower_bound(), s.upper_bound())
}

#[test]
fn static_sizes_fold() {
    let a = SymInt::from(7);
    assert_eq!(a.to_string(), "7");
    assert!(!a.is_dynamic());
    assert_eq!((a.clone() * 3 - 1).as_static(), Some(20));
    assert_eq!(SymInt::from(-7).div_floor(2).as_static(), Some(-4));
    assert_eq!(SymInt::from(-7).rem(3).as_static(), Some(2));
    assert_eq!(SymInt::from(7).rem(-3).as_static(), Some(-2));
    assert_eq!(SymInt::from(4).min(9).as_static(), Some(4));
    assert_eq!(SymInt::from(4).max(9).as_static(), Some(9));
}

#[test]
fn display_shows_the_bound() {
    let x = var(0, 25);
    assert_eq!(x.to_string(), "<=25");
    assert!(x.is_dynamic());
    assert_eq!((x.clone() + 1).to_string(), "<=26");
}

#[test]
fn addition_and_multiplication_bounds() {
    let x = var(0, 10);
    let y = var(2, 5);
    assert_eq!(bounds(&(&x + &y)), (2, 15));
    assert_eq!(bounds(&(&x * &y)), (0, 50));
    assert_eq!(bounds(&(x.clone() * 3 + 1)), (1, 31));
    assert_eq!(bounds(&(x.clone() * -2)), (-20, 0));
    let n = var(-3, 4);
    assert_eq!(bounds(&(&n * &n)), (-12, 16));
}

#[test]
fn subtraction_uses_both_bounds() {
    // PyTorch/XLA takes bounds from upper bounds only and gets this wrong.
    let x = var(0, 10);
    assert_eq!(bounds(&(10 - x.clone())), (0, 10));
    assert_eq!(bounds(&(x.clone() - 10)), (-10, 0));
    let y = var(3, 4);
    assert_eq!(bounds(&(&x - &y)), (-4, 7));
    // x - x cancels to the constant 0.
    assert_eq!((&x - &x).as_static(), Some(0));
}

#[test]
fn floor_division_bounds() {
    let x = var(0, 10);
    assert_eq!(bounds(&x.div_floor(3)), (0, 3));
    assert_eq!(bounds(&x.div_floor(-3)), (-4, 0));
    let d = var(0, 4); // may be zero at run time; bounds exclude it
    assert_eq!(bounds(&x.div_floor(d.clone())), (0, 10));
    let neg = var(-7, 5);
    assert_eq!(bounds(&neg.div_floor(2)), (-4, 2));
    let both = var(-2, 3);
    assert_eq!(bounds(&SymInt::from(6).div_floor(both)), (-6, 6));
    // Exact division of a linear form simplifies.
    assert_eq!(((x.clone() * 6 + 3).div_floor(3)), x.clone() * 2 + 1);
}

#[test]
fn remainder_bounds() {
    let x = var(0, 10);
    assert_eq!(bounds(&x.rem(3)), (0, 2));
    assert_eq!(bounds(&x.rem(-3)), (-2, 0));
    let small = var(0, 2);
    // 0 <= x < 3 is certain, so x % 3 is x.
    assert_eq!(small.rem(3), small);
    let y = var(1, 4);
    assert_eq!(bounds(&x.rem(y)), (0, 3));
    let neg = var(-5, 5);
    assert_eq!(bounds(&neg.rem(4)), (0, 3));
}

#[test]
fn min_max_bounds() {
    let x = var(0, 10);
    let y = var(3, 7);
    assert_eq!(bounds(&x.min(y.clone())), (0, 7));
    assert_eq!(bounds(&x.max(y.clone())), (3, 10));
    assert_eq!(x.min(20), x, "a bound that decides min folds it");
    assert_eq!(x.max(-1), x);
    assert_eq!(x.min(y.clone()), y.min(x.clone()), "min is commutative");
}

#[test]
fn canonical_equality() {
    let a = var(0, 5);
    let b = var(0, 5);
    assert_eq!(&a + &b, &b + &a);
    assert_eq!(a.clone() * 2 + a.clone(), a.clone() * 3);
    assert_eq!(&a * &b, &b * &a);
    assert_eq!((&a + 1) + &b, (&b + &a) + 1);
    assert_ne!(a, b, "two variables are different sizes");
    assert_ne!(&a + 1, a.clone());
}

#[test]
fn bounds_are_sound_for_every_value() {
    // Exhaustively check that every operator's bounds contain every value.
    let (lo_x, hi_x, lo_y, hi_y) = (-3i64, 6i64, -4i64, 5i64);
    let vx = VarRef::fresh(lo_x, hi_x);
    let vy = VarRef::fresh(lo_y, hi_y);
    let x = SymInt::from_expr(SizeExpr::var(vx.clone()));
    let y = SymInt::from_expr(SizeExpr::var(vy.clone()));
    let exprs = vec![
        &x + &y,
        &x - &y,
        &x * &y,
        x.div_floor(y.clone()),
        x.rem(y.clone()),
        x.min(y.clone()),
        x.max(y.clone()),
        (&x - &y).rem(3),
        (10 - x.clone()).div_floor(y.clone()),
    ];
    for e in &exprs {
        for a in lo_x..=hi_x {
            for b in lo_y..=hi_y {
                if b == 0 {
                    continue;
                }
                let v = e.expr.eval(&mut |v| if v == &vx { a } else { b });
                assert!(
                    e.lower_bound() <= v && v <= e.upper_bound(),
                    "{e:?} = {v} at x={a}, y={b} is outside its bounds"
                );
            }
        }
    }
}

#[test]
fn substitution_rebuilds_the_canonical_form() {
    let (a, b, c) = (
        VarRef::fresh(0, 10),
        VarRef::fresh(0, 10),
        VarRef::fresh(1, 4),
    );
    let (ea, eb, ec) = (
        SizeExpr::var(a.clone()),
        SizeExpr::var(b.clone()),
        SizeExpr::var(c.clone()),
    );
    // 2a + 3 + min(a, c) + (a * c) // 2, with a := b + 1.
    let e = ea
        .scale(2)
        .add(&SizeExpr::constant(3))
        .add(&ea.minimum(&ec))
        .add(&ea.mul(&ec).floor_div(&SizeExpr::constant(2)));
    let b1 = eb.add(&SizeExpr::constant(1));
    let got = e.substitute(&mut |v| (v == &a).then(|| b1.clone()));
    let want = b1
        .scale(2)
        .add(&SizeExpr::constant(3))
        .add(&b1.minimum(&ec))
        .add(&b1.mul(&ec).floor_div(&SizeExpr::constant(2)));
    assert_eq!(got, want);
    assert!(!got.vars().contains(&a));
    // Values agree with evaluating the original at a = b + 1.
    for bv in 0..=9 {
        for cv in 1..=4 {
            let mut sub = |v: &VarRef| if v == &b { bv } else { cv };
            let mut orig = |v: &VarRef| if v == &a { bv + 1 } else { cv };
            assert_eq!(got.eval(&mut sub), e.eval(&mut orig));
        }
    }
    // Nothing to substitute: the same expression.
    assert_eq!(e.substitute(&mut |_| None), e);
}
