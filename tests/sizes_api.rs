//! Sizes as values and as arguments: `SymBool` comparisons decided from
//! bounds or by materializing, `zeros_sym`/`ones_sym`/`full_sym` and
//! `reshape_sym` with dynamic sizes, and a captured step's `max_graphs`.

mod common;

use common::panic_message;
use lazyxla::metrics::counter;
use lazyxla::{capture, mark_step, DType, Error, SymInt, Tensor};

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

backend_test! {
    fn filled_tensors_take_dynamic_sizes() {
        let x = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 3.0, 0.0], &[5]).unwrap();
        let idx = x.nonzero(); // [<=5, 1], 3 rows
        let n = idx.size(0);
        let z = Tensor::zeros_sym(&[n.clone(), SymInt::from(2)], DType::F32);
        assert_eq!(z.shape_string(), "[<=5, 2]");
        assert!(z.size(0) == n, "the dim is the same size: {:?} and {n:?}", z.size(0));
        let o = Tensor::ones_sym(std::slice::from_ref(&n), DType::I64);
        let f = Tensor::full_sym(&[&n + 1], 2.5, DType::F32);
        assert_eq!(f.shape_string(), "[<=6]");
        // Nothing has run: each result computes what defines its size.
        assert_eq!(counter("ExecuteGraph"), 0);
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 6]);
        assert_eq!(f.to_vec::<f32>().unwrap(), vec![2.5; 4]);
        // Equal sizes meet in elementwise ops.
        let shifted = &idx + &o.unsqueeze(1);
        assert_eq!(shifted.to_vec::<i64>().unwrap(), vec![1, 3, 4]);
        assert_eq!(o.size(0).materialize().unwrap(), 3);
        // Sizes of a mark_dynamic input, in one program with it.
        let y = Tensor::from_vec(vec![1.0f32; 6], &[3, 2]).unwrap().mark_dynamic(0, 8);
        let w = Tensor::full_sym(&y.sizes(), 4.0, DType::F32);
        assert_eq!(w.shape_string(), "[<=8, 2]");
        let sum = &w + &y;
        mark_step().unwrap();
        assert_eq!(sum.to_vec::<f32>().unwrap(), vec![5.0; 6]);
        // A size that may be negative is clamped (3 - 2 = 1 here).
        let m = Tensor::ones_sym(&[&n - 2], DType::F32);
        assert_eq!(m.shape_string(), "[<=3]");
        assert_eq!(m.to_vec::<f32>().unwrap(), vec![1.0]);
        // Rank 0 and static sizes.
        assert_eq!(Tensor::full_sym(&[], 3.0, DType::F32).item::<f32>().unwrap(), 3.0);
        assert_eq!(Tensor::zeros_sym(&[SymInt::from(2)], DType::I64).to_vec::<i64>().unwrap(), vec![0, 0]);
    }
}

backend_test! {
    fn negative_sizes_are_rejected_with_the_position() {
        let msg = panic_message(|| {
            let _ = Tensor::zeros_sym(&[SymInt::from(2), SymInt::from(-1)], DType::F32);
        });
        assert!(msg.contains("zeros_sym") && msg.contains("-1") && msg.contains("position 1"), "{msg}");
        let n = three_of_five();
        let msg = panic_message(|| {
            let _ = Tensor::ones_sym(&[&n - 6], DType::F32);
        });
        assert!(msg.contains("ones_sym") && msg.contains("[-6, -1]") && msg.contains("negative"), "{msg}");
        let x = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
        let msg = panic_message(|| {
            let _ = x.reshape_sym(&[SymInt::from(-4)]);
        });
        assert!(msg.contains("reshape_sym") && msg.contains("-4"), "{msg}");
    }
}

backend_test! {
    fn reshape_to_dynamic_sizes() {
        let data: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let x = Tensor::from_vec(data.clone(), &[3, 2]).unwrap().mark_dynamic(0, 8);
        let n = x.size(0);
        let flat = x.reshape_sym(&[&n * 2]);
        assert_eq!(flat.shape_string(), "[<=16]");
        let back = flat.reshape_sym(&[n.clone(), SymInt::from(2)]);
        assert_eq!(back.shape_string(), "[<=8, 2]");
        let units = back.reshape_sym(&[SymInt::from(1), n.clone(), SymInt::from(2), SymInt::from(1)]);
        assert_eq!(units.shape_string(), "[1, <=8, 2, 1]");
        assert_eq!((&back - &x).abs().sum().item::<f32>().unwrap(), 0.0);
        assert_eq!(flat.to_vec::<f32>().unwrap(), data);
        assert_eq!(units.to_vec::<f32>().unwrap(), data);
        // The same shape gives the same tensor.
        assert!(x.reshape_sym(&x.sizes()).shape_string() == x.shape_string());
        // A size no program has computed yet: the reshape computes it.
        let m = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 0.0, 3.0, 4.0], &[2, 3]).unwrap().nonzero();
        assert_eq!(m.shape_string(), "[<=6, 2]");
        let pairs = m.reshape_sym(&[m.size(0) * 2]);
        assert_eq!(pairs.shape_string(), "[<=12]");
        assert_eq!(pairs.to_vec::<i64>().unwrap(), vec![0, 0, 0, 2, 1, 1, 1, 2]);
    }
}

backend_test! {
    fn reshape_errors_name_the_shapes() {
        let x = Tensor::from_vec(vec![1.0f32; 6], &[3, 2]).unwrap().mark_dynamic(0, 8);
        let msg = panic_message(|| {
            let _ = x.reshape_sym(&[x.size(0)]);
        });
        assert!(msg.contains("reshape_sym") && msg.contains("[<=8, 2]") && msg.contains("[<=8]"), "{msg}");
        // Two dynamic dims out of one: XLA cannot express it.
        let a = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap().mark_dynamic(0, 4);
        let b = Tensor::from_vec(vec![1.0f32; 2], &[2]).unwrap().mark_dynamic(0, 4);
        let t = Tensor::zeros_sym(&[a.size(0) * b.size(0)], DType::F32);
        assert_eq!(t.to_vec::<f32>().unwrap().len(), 6);
        let msg = panic_message(|| {
            let _ = t.reshape_sym(&[a.size(0), b.size(0)]);
        });
        assert!(msg.contains("[<=16]") && msg.contains("[<=4, <=4]") && msg.contains("more than one dynamic dimension"), "{msg}");
    }
}

backend_test! {
    fn max_graphs_refuses_a_new_graph_and_keeps_the_recorded_ones() {
        let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let mut step = capture(|x: &[Tensor]| {
            w.assign(&(&w + &x[0].sum()));
            vec![&x[0] * 2.0]
        })
        .max_graphs(1);
        let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let out = step.run(std::slice::from_ref(&a)).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![4.0, 5.0]);
        // A new input shape would be a second graph.
        let b = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
        let executed = counter("ExecuteGraph");
        let err = step.run(std::slice::from_ref(&b)).unwrap_err();
        assert!(matches!(err, Error::GraphLimit { limit: 1 }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("max_graphs(1)") && msg.contains("max_graphs(n)"), "{msg}");
        assert_eq!(counter("ExecuteGraph"), executed, "the refused call ran something");
        assert_eq!(step.recordings(), 1);
        // Nothing was lost: the state, the input and the last result.
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![4.0, 5.0]);
        assert_eq!(b.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        // The recorded graph still replays.
        let replays = counter("StepReplay");
        let again = step.run(&[a]).unwrap();
        assert_eq!(counter("StepReplay"), replays + 1);
        assert_eq!(again[0].to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        assert_eq!(w.to_vec::<f32>().unwrap(), vec![7.0, 8.0]);
        // A higher limit, or none, records the second graph.
        let mut two = capture(|x: &[Tensor]| vec![&x[0] + 1.0]).max_graphs(2);
        let mut unlimited = capture(|x: &[Tensor]| vec![&x[0] + 1.0]);
        for len in [2, 3] {
            let x = Tensor::from_vec(vec![0.0f32; len], &[len]).unwrap();
            assert_eq!(two.run(std::slice::from_ref(&x)).unwrap()[0].to_vec::<f32>().unwrap(), vec![1.0; len]);
            unlimited.run(&[x]).unwrap();
        }
        assert_eq!((two.recordings(), unlimited.recordings()), (2, 2));
        let x = Tensor::from_vec(vec![0.0f32; 4], &[4]).unwrap();
        assert!(matches!(two.run(&[x]), Err(Error::GraphLimit { limit: 2 })));
    }
}

backend_test! {
    fn a_count_that_may_divide_is_checked_when_the_program_runs() {
        // `[n]` into `[n // 2, 2]`: right for an even n, a failed step
        // for an odd one, never a panic while recording.
        let pairs = |len: usize| {
            let x = Tensor::from_vec((0..len as i64).collect(), &[len]).unwrap().mark_dynamic(0, 6);
            let n = x.size(0);
            x.reshape_sym(&[n.div_floor(2), SymInt::from(2)])
        };
        let even = pairs(4);
        assert_eq!(even.shape_string(), "[<=3, 2]");
        assert_eq!(even.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
        let err = pairs(5).to_vec::<i64>().unwrap_err().to_string();
        assert!(err.contains("reshape_sym") && err.contains('5') && err.contains('4'), "{err}");
        // A size read back from a computed tensor against the sizes it was
        // computed from.
        let a = Tensor::from_vec(vec![1.0f32; 3], &[3]).unwrap().mark_dynamic(0, 4);
        let t = Tensor::ones_sym(&[a.size(0) * 2], DType::F32);
        assert_eq!(t.to_vec::<f32>().unwrap().len(), 6);
        let back = t.reshape_sym(&[a.size(0), SymInt::from(2)]);
        assert_eq!(back.sum_dims(&[1], false).to_vec::<f32>().unwrap(), vec![2.0; 3]);
    }
}

backend_test! {
    fn narrow_past_the_real_size_says_what_was_asked_and_what_to_use() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 0.0, 3.0], &[4]).unwrap();
        let real = x.gt_scalar(0.5).nonzero().flatten(); // [<=4], 3 real
        let err = real.narrow(0, 3, 1).to_vec::<i64>().unwrap_err().to_string();
        assert!(err.starts_with("narrow"), "{err}");
        assert!(err.contains("1 elements were asked for") && err.contains("only 0 from the start"), "{err}");
        assert!(err.contains("slice(dim, start..start + len)") && !err.contains("pad_to_bound"), "{err}");
    }
}
