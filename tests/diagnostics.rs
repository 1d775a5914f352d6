//! Why a program compiled, which reads ran programs, and graphs that
//! grow: each cause provoked, with the op names and the file and line
//! the log gives (`lazyxla::debug::compile_log`, `metrics::report`).

mod common;

use lazyxla::debug::{self, CompileCause};
use lazyxla::metrics::counter;
use lazyxla::nn::{Linear, Module};
use lazyxla::{capture, mark_step, no_grad, DType, Error, Tensor};

const FILE: &str = "tests/diagnostics.rs";

/// The causes logged at `line` of this file since `from` entries.
fn causes_at(from: usize, line: u32) -> Vec<CompileCause> {
    debug::compile_log()[from..]
        .iter()
        .filter(|e| e.site.ends_with(&format!("{FILE}:{line}")))
        .map(|e| e.cause.clone())
        .collect()
}

/// Automatic dynamic dims on for one test, off again after it.
struct AutomaticDynamic;

impl AutomaticDynamic {
    fn on() -> AutomaticDynamic {
        lazyxla::set_automatic_dynamic(true);
        AutomaticDynamic
    }
}

impl Drop for AutomaticDynamic {
    fn drop(&mut self) {
        lazyxla::set_automatic_dynamic(false);
    }
}

backend_test! {
    fn each_compile_names_its_cause_and_the_lines_involved() {
        let from = debug::compile_log().len();
        let w = Tensor::from_vec(vec![1.0f32; 4], &[4]).unwrap();
        // The first program at a site, then an input of another size.
        let mut site = 0;
        let mut made = 0;
        for n in [4usize, 6] {
            let x = Tensor::from_vec(vec![1.0f32; n], &[n]).unwrap(); made = line!();
            let _y = &x * 2.0;
            site = line!(); mark_step().unwrap();
        }
        let causes = causes_at(from, site);
        assert_eq!(causes[0], CompileCause::FirstAtSite);
        match &causes[1] {
            CompileCause::InputChanged { input: 0, created_at, before, now, bound_only: false } => {
                assert_eq!(created_at, &format!("{FILE}:{made}"));
                assert_eq!((before.as_str(), now.as_str()), ("f32[4]", "f32[6]"));
            }
            other => panic!("{other:?}"),
        }
        // A constant that changed: where it was written, both values.
        let mut site = 0;
        let mut written = 0;
        for lr in [0.1, 0.05] {
            let u = &w * lr; written = line!();
            site = line!(); u.sum().item::<f32>().unwrap();
        }
        match &causes_at(from, site)[1] {
            CompileCause::ConstantChanged { value, before, at } => {
                assert_eq!((value.as_str(), before.as_str()), ("0.05:f32", "0.1:f32"));
                assert_eq!(at, &format!("{FILE}:{written}"));
            }
            other => panic!("{other:?}"),
        }
        // Another op: both ops and where each was recorded.
        let mut site = 0;
        let mut lines = Vec::new();
        for relu in [true, false] {
            let u = if relu { w.relu() } else { w.exp() }; lines.push(line!());
            site = line!(); u.sum().item::<f32>().unwrap();
        }
        match &causes_at(from, site)[1] {
            CompileCause::GraphChanged { op, at, cached_op, cached_at } => {
                assert!(op.starts_with("exp") && cached_op.starts_with("max"), "{op} / {cached_op}");
                assert_eq!(at, &format!("{FILE}:{}", lines[1]));
                assert_eq!(cached_at, &format!("{FILE}:{}", lines[0]));
            }
            other => panic!("{other:?}"),
        }
        // Another bound.
        let mut site = 0;
        for bound in [8, 16] {
            let x = Tensor::from_vec(vec![1.0f32; 5], &[5]).unwrap().mark_dynamic(0, bound);
            site = line!(); x.sum().item::<f32>().unwrap();
        }
        assert!(matches!(&causes_at(from, site)[1], CompileCause::InputChanged { bound_only: true, now, .. } if now == "f32[s0<=16]"), "{:?}", causes_at(from, site));
        // Each entry names its site and size, and prints as a sentence.
        let e = debug::compile_log().last().unwrap().to_string();
        assert!(e.contains(&format!("item at {FILE}:{site}")) && e.contains("nodes"), "{e}");
    }
}

backend_test! {
    fn an_evicted_program_and_a_recaptured_step_say_so() {
        let from = debug::compile_log().len();
        debug::set_compile_cache_capacity(1);
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let mut site = 0;
        for k in [1.5, 2.5, 1.5] {
            // A different literal each time: the third is the first again.
            site = line!(); (&x * k).sum().item::<f32>().unwrap();
        }
        debug::set_compile_cache_capacity(256);
        assert_eq!(causes_at(from, site)[2], CompileCause::Evicted);
        // A captured step called with another input shape.
        let mut step = capture(|i: &[Tensor]| vec![i[0].sum()]);
        let mut site = 0;
        for n in [3usize, 5] {
            let i = Tensor::from_vec(vec![1.0f32; n], &[n]).unwrap();
            site = line!(); step.run(&[i]).unwrap();
        }
        match &causes_at(from, site)[..] {
            [CompileCause::FirstAtSite, CompileCause::Recaptured(why)] => {
                assert!(why.contains("input 0 is f32[5], recorded for f32[3]"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }
}

backend_test! {
    fn reads_that_run_a_program_are_counted_by_line() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let mut site = 0;
        for _ in 0..3 {
            site = line!(); (&x * 3.0).sum().item::<f32>().unwrap();
        }
        let report = lazyxla::metrics::report();
        assert!(report.contains("reads that ran a program before mark_step"), "{report}");
        assert!(report.contains(&format!("3  item at {FILE}:{site}")), "{report}");
        assert!(report.contains("compiles by cause"), "{report}");
    }
}

backend_test! {
    fn an_evaluation_loop_that_reads_every_batch_keeps_one_program() {
        // pytorch/examples' word language model's evaluation: a state
        // carried from batch to batch (detached), the loss read with
        // `item()` every batch, no `mark_step`.
        let cell = Linear::new(8, 8, 0);
        let mut h = Tensor::from_vec(vec![0.0f32; 4 * 8], &[4, 8]).unwrap();
        let mut nodes = Vec::new();
        let before = counter("UncachedCompile");
        no_grad(|| {
            for b in 0..50 {
                let x = Tensor::from_vec(vec![b as f32 / 50.0; 4 * 8], &[4, 8]).unwrap();
                h = (cell.forward(&x) + cell.forward(&h)).tanh().detach();
                let loss = h.square().mean();
                assert!(loss.item::<f32>().unwrap().is_finite());
                nodes.push(lazyxla::debug::live_node_count());
            }
        });
        assert_eq!(counter("UncachedCompile") - before, 1, "one program for every batch");
        assert_eq!(nodes[10], nodes[49], "flat memory: the graph does not grow");
    }
}

backend_test! {
    fn a_graph_that_grows_is_named_then_refused() {
        let mut x = Tensor::from_vec(vec![1.0f32, -1.0, 2.0], &[3]).unwrap();
        let mut grown = 0;
        let mut site = 0;
        for _ in 0..6 {
            // Never computed: only its count of positives is read.
            x = (&x * 1.5).sin(); grown = line!();
            site = line!(); x.gt_scalar(0.0).nonzero().size(0).materialize().unwrap();
        }
        let w = debug::warnings();
        let w = w.iter().find(|w| w.contains(&format!("{FILE}:{site}"))).expect("a warning");
        assert!(w.contains(&format!("recorded at {FILE}:{grown}")) && w.contains("mark_step()"), "{w}");
        // Past the limit: an error before XLA, and everything stays usable.
        debug::set_graph_limits(0, 4);
        let mut err = None;
        for _ in 0..10 {
            x = (&x * 1.5).sin();
            if let Err(e) = x.gt_scalar(0.0).nonzero().size(0).materialize() {
                err = Some(e);
                break;
            }
        }
        debug::set_graph_limits(0, 64);
        match err {
            Some(Error::GrowingGraph { message, .. }) => assert!(message.contains("detach()"), "{message}"),
            other => panic!("{other:?}"),
        }
        mark_step().unwrap();
        assert_eq!(x.to_vec::<f32>().unwrap().len(), 3);
    }
}

backend_test! {
    fn a_dim_that_changes_size_becomes_dynamic() {
        let _a = AutomaticDynamic::on();
        let w = Tensor::from_vec(vec![0.5f32; 3], &[3, 1]).unwrap();
        let before = counter("UncachedCompile");
        let mut shapes = Vec::new();
        for (i, n) in [32usize, 20, 32, 20, 17, 25, 30].into_iter().enumerate() {
            let x = Tensor::from_vec(vec![1.0f32; n * 3], &[n, 3]).unwrap();
            shapes.push(x.shape_string());
            let y = x.matmul(&w).sum();
            assert_eq!(y.item::<f32>().unwrap(), 1.5 * n as f32, "batch {i}");
        }
        // Two sizes compiled as they were; then one program for every
        // size of the bucket.
        assert_eq!(counter("UncachedCompile") - before, 3);
        assert_eq!(shapes[..3], ["[32, 3]", "[20, 3]", "[<=32, 3]"]);
        // An op that needs the size static gets it specialized: a
        // convolution over a height that changed.
        for h in [8usize, 9, 10] {
            let img = Tensor::from_vec(vec![1.0f32; h * 4], &[1, 1, h, 4]).unwrap();
            let k = Tensor::ones(&[1, 1, 3, 3], DType::F32);
            let out = img.conv2d(&k, None, (1, 1), (0, 0), (1, 1), 1);
            assert_eq!(out.concrete_shape().unwrap(), [1, 1, h - 2, 2]);
            assert_eq!(out.sum().item::<f32>().unwrap(), 9.0 * ((h - 2) * 2) as f32);
        }
    }
}
