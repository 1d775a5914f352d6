//! Sizes as values and as arguments: `SymBool` comparisons decided from
//! bounds or by materializing, `zeros_sym`/`ones_sym`/`full_sym` and
//! `reshape_sym` with dynamic sizes, and a captured step's `max_graphs`.

mod common;

use lazyxla::metrics::counter;
use lazyxla::{mark_step, SymInt, Tensor};

/// The counters that would move if anything ran or was read.
fn activity() -> Vec<u64> {
    ["ExecuteGraph", "SizeMaterialization", "TransferFromDevice"]
        .iter()
        .map(|n| counter(n))
        .collect()
}

/// A size of 3 with bounds [0, 5], not computed yet.
fn three_of_five() -> SymInt {
    Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0, 0.0], &[5])
        .unwrap()
        .nonzero()
        .size(0)
}

backend_test! {
    fn comparisons_decided_by_bounds_run_nothing() {
        let n = three_of_five();
        assert_eq!((n.lower_bound(), n.upper_bound()), (0, 5));
        let before = activity();
        assert_eq!(n.sym_le(5).as_static(), Some(true));
        assert!(n.sym_le(5).to_bool().unwrap());
        assert!(n.sym_le(25).to_bool().unwrap());
        assert!(!n.sym_lt(0).to_bool().unwrap());
        assert!(n.sym_ge(0).to_bool().unwrap());
        assert!(n.sym_ne(6).to_bool().unwrap());
        assert!(!n.sym_gt(5).to_bool().unwrap());
        // The same expression, and differences that cancel to a constant.
        assert!(n.sym_eq(&n).to_bool().unwrap());
        assert!((&n + 1).sym_gt(&n).to_bool().unwrap());
        assert!(!(&n * 2).sym_eq(&n * 2 + 1).to_bool().unwrap());
        assert!((&n + &n).sym_eq(&n * 2).to_bool().unwrap());
        // Negation flips the decision.
        assert_eq!(n.sym_le(5).not().as_static(), Some(false));
        assert_eq!((!n.sym_lt(0)).as_static(), Some(true));
        // Static sizes.
        assert!(SymInt::from(2).sym_lt(3).to_bool().unwrap());
        assert_eq!(activity(), before, "a decided comparison ran something");
        // Printed with both sides' bounds.
        let x = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap().mark_dynamic(0, 25);
        let b = x.size(0).sym_le(25);
        let text = b.to_string();
        assert!(text.starts_with('s') && text.ends_with(" in [0, 25] <= 25"), "{text}");
        assert_eq!(format!("{b:?}"), text);
        assert_eq!(n.sym_ne(&n + 1).to_string(), format!("{} != {}", n.describe(), (&n + 1).describe()));
    }
}

backend_test! {
    fn undecided_comparisons_materialize_once() {
        let n = three_of_five();
        let b = n.sym_eq(3);
        assert_eq!(b.as_static(), None);
        assert_eq!(counter("ExecuteGraph"), 0);
        assert!(b.to_bool().unwrap());
        assert_eq!(counter("SizeMaterialization"), 1);
        assert_eq!(counter("ExecuteGraph"), 1);
        // The value is cached: asking again, about the same size in
        // another comparison, or negated, runs and counts nothing.
        let before = activity();
        assert!(b.to_bool().unwrap());
        assert!(!n.sym_gt(3).to_bool().unwrap());
        assert!(n.sym_lt(4).to_bool().unwrap());
        assert!(!b.not().to_bool().unwrap());
        assert_eq!(activity(), before);
        // Two undecided sizes: only the new one is materialized.
        let m = Tensor::from_vec(vec![1i64, 1, 0], &[3]).unwrap().nonzero().size(0);
        let lt = n.sym_lt(&m);
        assert_eq!(lt.as_static(), None);
        assert!(!lt.to_bool().unwrap());
        assert!(n.sym_gt(&m).to_bool().unwrap());
        assert_eq!(counter("SizeMaterialization"), 2);
        assert_eq!(counter("ExecuteGraph"), 2);
    }
}

backend_test! {
    fn a_computed_size_is_read_without_running() {
        let x = Tensor::from_vec(vec![0.0f32, 1.0, 1.0, 0.0], &[4]).unwrap();
        let nz = x.nonzero();
        mark_step().unwrap();
        let executed = counter("ExecuteGraph");
        let n = nz.size(0);
        assert!(n.sym_eq(2).to_bool().unwrap());
        assert_eq!(counter("ExecuteGraph"), executed, "the size was computed by mark_step");
        assert_eq!(counter("SizeMaterialization"), 1);
        // A size given by mark_dynamic is known from the start.
        let y = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap().mark_dynamic(0, 8);
        let before = activity();
        assert!(y.size(0).sym_ge(3).to_bool().unwrap());
        assert_eq!(activity(), before);
    }
}
