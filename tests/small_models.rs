//! `examples/train_gcn.rs` and `examples/train_vae.rs` at reduced sizes,
//! on both backends: the GCN learns with edge dropout (a dynamic edge
//! count every step) and the VAE with a smaller last batch (a dynamic
//! batch dim), and each training step compiles one program.

mod common;

#[allow(dead_code)]
#[path = "../examples/train_gcn.rs"]
mod train_gcn;

#[allow(dead_code)]
#[path = "../examples/train_vae.rs"]
mod train_vae;

use lazyxla::{metrics, DType, Tensor};
use train_gcn::gcn::{self, GraphSpec};
use train_vae::vae::VaeConfig;

/// A graph small enough for the reference backend.
const SMALL_GRAPH: GraphSpec = GraphSpec {
    nodes: 300,
    features: 140,
    classes: 4,
    edges: 700,
    words: 10,
};

backend_test! {
    fn the_gcn_learns_with_edge_dropout_and_compiles_one_training_program() {
        let r = train_gcn::run(SMALL_GRAPH, 40, false).unwrap();
        assert_eq!(r.train_compiles, 1, "{}", metrics::report());
        let (first, last) = (r.losses[0], r.losses[r.losses.len() - 1]);
        assert!(last < 0.5 * first, "loss {first} -> {last}");
        let (before, after) = r.test_accuracy;
        assert!(after > 0.7 && after > before + 0.3, "test accuracy {before} -> {after}");
    }
}

backend_test! {
    fn dropped_edges_have_a_dynamic_count_that_changes_every_draw() {
        let g = gcn::synthetic_graph(SMALL_GRAPH, 3);
        let e = g.edge_index.len() / 2;
        let edges = Tensor::from_slice(&g.edge_index, &[2, e]).unwrap();
        lazyxla::manual_seed(5);
        let mut counts = std::collections::BTreeSet::new();
        let compiled = metrics::counter("UncachedCompile");
        for _ in 0..6 {
            let kept = gcn::kept_edges(&edges, &gcn::edge_keep_mask(&edges, 0.3));
            assert_eq!(kept.shape_string(), format!("[2, <={e}]"));
            // Every kept column is one of the graph's edges.
            let n = gcn::gcn_norm(&kept, SMALL_GRAPH.nodes);
            let deg_sum = n.weight.sum();
            lazyxla::mark_step().unwrap();
            let k = kept.size(1).materialize().unwrap() as usize;
            assert!(deg_sum.item::<f32>().unwrap() > 0.0);
            assert!((e / 2..e).contains(&k), "{k} of {e} edges kept");
            counts.insert(k);
        }
        assert!(counts.len() > 3, "kept edge counts {counts:?}");
        assert_eq!(metrics::counter("UncachedCompile") - compiled, 1);
    }
}

backend_test! {
    fn gcn_norm_weights_are_inverse_square_roots_of_degrees() {
        // A path 0 - 1 - 2 and an isolated node 3: degrees with self-loops
        // 2, 3, 2, 1 (counted at the targets).
        let edges = Tensor::from_vec(vec![0i64, 1, 1, 2, 1, 0, 2, 1], &[2, 4]).unwrap();
        let n = gcn::gcn_norm(&edges, 4);
        assert_eq!(n.row.to_vec::<i64>().unwrap(), [0, 1, 1, 2, 0, 1, 2, 3]);
        assert_eq!(n.col.to_vec::<i64>().unwrap(), [1, 0, 2, 1, 0, 1, 2, 3]);
        let d = [2.0f32, 3.0, 2.0, 1.0];
        let want: Vec<f32> = [(0, 1), (1, 0), (1, 2), (2, 1), (0, 0), (1, 1), (2, 2), (3, 3)]
            .iter()
            .map(|&(a, b): &(usize, usize)| 1.0 / (d[a] * d[b]).sqrt())
            .collect();
        common::assert_close(&n.weight.to_vec::<f32>().unwrap(), &want, 1e-6);
        // No edge at all: each node keeps its self-loop of weight 1.
        let none = Tensor::from_vec(Vec::<i64>::new(), &[2, 0]).unwrap();
        let n = gcn::gcn_norm(&none, 3);
        assert_eq!(n.weight.to_vec::<f32>().unwrap(), [1.0; 3]);
        assert_eq!(n.weight.dtype(), DType::F32);
    }
}

backend_test! {
    fn the_vae_learns_and_its_smaller_last_batch_runs_the_same_program() {
        let cfg = VaeConfig { c1: 4, c2: 8, latent: 4 };
        let r = train_vae::run(cfg, 200, 64, 6, false).unwrap();
        assert_eq!(r.batch_sizes, [64, 64, 64, 8]);
        assert_eq!(r.train_compiles, 1, "{}", metrics::report());
        let l = &r.epoch_losses;
        assert!(l[5] < l[0] && l.windows(2).all(|w| w[1] < w[0]), "training loss per image {l:?}");
        assert!(r.held_out.1 < 0.96 * r.held_out.0, "held-out loss {:?}, training {l:?}", r.held_out);
    }
}
