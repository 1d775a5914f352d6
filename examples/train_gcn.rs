//! A 2-layer GCN (Kipf & Welling, PyG's `GCNConv` normalisation, written
//! without PyG: `examples/models/gcn.rs`) trained on a seeded synthetic
//! graph of Cora's size (2708 nodes, 1433 sparse binary features, 7
//! classes, 5278 undirected edges) with Adam, feature dropout and edge
//! dropout. Each step keeps a random subset of the edges, drawn on the
//! device and compacted with `nonzero`, so the edge count changes every
//! step; the training step compiles once. Loss and accuracy (training
//! and test nodes) are printed as they change.
//!
//! Run: `cargo run --release --example train_gcn`

#[path = "models/gcn.rs"]
pub mod gcn;

use gcn::{Gcn, GraphSpec, CORA, HIDDEN};
use lazyxla::nn::Module;
use lazyxla::optim::{Adam, Optimizer};
use lazyxla::{mark_step, metrics, no_grad, DType, Tensor};

/// What a run reports.
pub struct Report {
    /// The training loss of every step.
    pub losses: Vec<f32>,
    /// Test accuracy before and after training.
    pub test_accuracy: (f32, f32),
    /// Programs compiled for the training steps (the evaluations not
    /// counted).
    pub train_compiles: u64,
}

/// The fraction of `nodes` whose most likely class is their label.
fn accuracy(model: &Gcn, x: &Tensor, edges: &Tensor, nodes: &Tensor, labels: &Tensor) -> f32 {
    model.train(false);
    let acc = no_grad(|| {
        model.forward_many(&[x.clone(), edges.clone()])[0]
            .index_select(0, nodes)
            .argmax(1)
            .eq(labels)
            .to_dtype(DType::F32)
            .mean()
            .item::<f32>()
    });
    model.train(true);
    acc.expect("evaluation runs")
}

/// Trains for `steps` steps on the graph of `spec`, printing progress
/// when `verbose`.
pub fn run(spec: GraphSpec, steps: usize, verbose: bool) -> lazyxla::Result<Report> {
    lazyxla::manual_seed(42);
    let graph = gcn::synthetic_graph(spec, 2024);
    let n = spec.nodes;
    let x = Tensor::from_slice(&graph.features, &[n, spec.features])?;
    let edges = Tensor::from_slice(&graph.edge_index, &[2, graph.edge_index.len() / 2])?;
    let pick = |idx: &[i64]| -> lazyxla::Result<(Tensor, Tensor)> {
        let labels: Vec<i64> = idx.iter().map(|&i| graph.labels[i as usize]).collect();
        Ok((
            Tensor::from_slice(idx, &[idx.len()])?,
            Tensor::from_vec(labels, &[idx.len()])?,
        ))
    };
    let (train, train_y) = pick(&graph.train)?;
    let (test, test_y) = pick(&graph.test)?;
    let model = Gcn::new(spec, HIDDEN, 0.5, 0.2);
    let mut opt = Adam::new(model.parameters(), 0.01).weight_decay(5e-4);
    mark_step()?; // the initialisation runs once, not in the first step
    if verbose {
        println!(
            "train_gcn on the {} backend: {} nodes, {} features, {} directed edges, {} training nodes",
            lazyxla::Device::default().name(),
            n,
            spec.features,
            graph.edge_index.len() / 2,
            graph.train.len()
        );
    }
    let before = accuracy(&model, &x, &edges, &test, &test_y);
    let mut losses = Vec::with_capacity(steps);
    let mut train_compiles = 0;
    for step in 0..steps {
        let compiled = metrics::counter("UncachedCompile");
        opt.zero_grad();
        let out = model.forward_many(&[x.clone(), edges.clone()]).remove(0);
        let loss = gcn::loss(&out, &train, &train_y);
        loss.backward();
        opt.step();
        mark_step()?;
        losses.push(loss.item::<f32>()?);
        train_compiles += metrics::counter("UncachedCompile") - compiled;
        if verbose && (step + 1) % 25 == 0 {
            println!(
                "step {:3}: loss {:.4}, training accuracy {:.1}%, test accuracy {:.1}%",
                step + 1,
                losses[step],
                100.0 * accuracy(&model, &x, &edges, &train, &train_y),
                100.0 * accuracy(&model, &x, &edges, &test, &test_y)
            );
        }
    }
    let after = accuracy(&model, &x, &edges, &test, &test_y);
    Ok(Report {
        losses,
        test_accuracy: (before, after),
        train_compiles,
    })
}

#[allow(dead_code)]
fn main() -> lazyxla::Result<()> {
    let r = run(CORA, 200, true)?;
    println!(
        "loss {:.4} -> {:.4}, test accuracy {:.1}% -> {:.1}%, training programs compiled: {} (one for every edge count)",
        r.losses[0],
        r.losses[r.losses.len() - 1],
        100.0 * r.test_accuracy.0,
        100.0 * r.test_accuracy.1,
        r.train_compiles
    );
    println!("\n{}", metrics::report());
    Ok(())
}
