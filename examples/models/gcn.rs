//! A 2-layer graph convolutional network (Kipf & Welling) written as a
//! PyTorch user writes it without PyTorch Geometric, with PyG's `GCNConv`
//! normalisation, and a seeded synthetic graph of Cora's size; shared by
//! `train_gcn`, the `small_models` benchmark (whose PyTorch side,
//! `benches/peers/gcn_vae_torch.py`, generates the same graph by the same
//! rule) and the PyTorch fixture test.
//!
//! A layer computes `Â X W + b` with `Â = D^-1/2 (A + I) D^-1/2`: self-loops
//! are added, each edge's weight is `deg(src)^-1/2 · deg(dst)^-1/2` (the
//! degrees counted at the targets), messages `(X W)[src] · weight` are
//! gathered by edge source and summed into the targets with `index_add`.
//! Training drops edges (PyG's `dropout_edge`): a Bool mask drawn on the
//! device keeps each directed edge with probability `1 - p`, and `nonzero`
//! compacts the kept columns of `edge_index`, so the number of edges is a
//! dynamic size `[2, <=E]` and one program serves every step.

#![allow(dead_code)]

use lazyxla::nn::{self, init, Dropout, Linear, Module};
use lazyxla::{DType, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};

/// The sizes of a synthetic graph.
#[derive(Clone, Copy, Debug)]
pub struct GraphSpec {
    pub nodes: usize,
    pub features: usize,
    pub classes: usize,
    /// Undirected edges; `edge_index` holds both directions of each.
    pub edges: usize,
    /// Active (1.0) features drawn per node (duplicates collapse).
    pub words: usize,
}

/// Cora's sizes: 2708 nodes, 1433 binary bag-of-words features (about 18
/// a node), 7 classes, 5278 undirected edges (10,556 directed entries).
pub const CORA: GraphSpec = GraphSpec {
    nodes: 2708,
    features: 1433,
    classes: 7,
    edges: 5278,
    words: 18,
};

/// Hidden units (Kipf & Welling's 16).
pub const HIDDEN: usize = 16;

/// A seeded xorshift64 generator; `benches/peers/gcn_vae_torch.py`
/// implements the same one, so both sides draw the same data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_f64() * n as f64) as usize
    }
}

/// A graph as host data.
pub struct Graph {
    pub spec: GraphSpec,
    /// `[nodes, features]`, row-major, 0 or 1.
    pub features: Vec<f32>,
    pub labels: Vec<i64>,
    /// `[2, 2 * edges]`: sources, then targets; each undirected edge
    /// `(u, v)` as the columns `u -> v` and `v -> u`.
    pub edge_index: Vec<i64>,
    /// 20 nodes of each class, from the nodes before the test set.
    pub train: Vec<i64>,
    /// The last 1000 nodes (the last third of a graph under 2000 nodes).
    pub test: Vec<i64>,
}

/// A homophilous graph with class-dependent features, from `seed`: each
/// node's class is uniform; a node's words come from its class's block
/// of the vocabulary with probability 0.3, else from anywhere; an edge
/// joins a uniform node to a node of its class with probability 0.8,
/// else to any node (no self-loops, no duplicates).
pub fn synthetic_graph(spec: GraphSpec, seed: u64) -> Graph {
    let mut r = Rng(seed.max(1));
    let n = spec.nodes;
    let labels: Vec<i64> = (0..n).map(|_| r.below(spec.classes) as i64).collect();
    let block = spec.features / spec.classes;
    let mut features = vec![0.0f32; n * spec.features];
    for (i, &c) in labels.iter().enumerate() {
        for _ in 0..spec.words {
            let w = if r.next_f64() < 0.3 {
                c as usize * block + r.below(block)
            } else {
                r.below(spec.features)
            };
            features[i * spec.features + w] = 1.0;
        }
    }
    let mut by_class = vec![Vec::new(); spec.classes];
    for (i, &c) in labels.iter().enumerate() {
        by_class[c as usize].push(i);
    }
    let mut seen = std::collections::HashSet::new();
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    while seen.len() < spec.edges {
        let u = r.below(n);
        let v = if r.next_f64() < 0.8 {
            let same = &by_class[labels[u] as usize];
            same[r.below(same.len())]
        } else {
            r.below(n)
        };
        if u != v && seen.insert((u.min(v), u.max(v))) {
            src.extend([u as i64, v as i64]);
            dst.extend([v as i64, u as i64]);
        }
    }
    let test_len = if n >= 2000 { 1000 } else { n / 3 };
    let test_start = n - test_len;
    let mut train = Vec::new();
    for class in &by_class {
        train.extend(
            class
                .iter()
                .filter(|&&i| i < test_start)
                .take(20)
                .map(|&i| i as i64),
        );
    }
    train.sort_unstable();
    src.extend(dst);
    Graph {
        spec,
        features,
        labels,
        edge_index: src,
        train,
        test: (test_start as i64..n as i64).collect(),
    }
}

/// PyG's `gcn_norm` for a graph without self-loops: the edges with a
/// self-loop per node appended, and each one's weight
/// `deg(src)^-1/2 · deg(dst)^-1/2`, degrees counted at the targets
/// (a degree of 0 gives weight 0, as PyG's `masked_fill` of `inf`).
pub struct Normalized {
    /// Sources `[<=E + N]`.
    pub row: Tensor,
    /// Targets `[<=E + N]`.
    pub col: Tensor,
    /// Edge weights `[<=E + N]`.
    pub weight: Tensor,
}

/// [`Normalized`] for `edge_index` (`[2, E]`, any `E`, dynamic too) over
/// `nodes` nodes.
pub fn gcn_norm(edge_index: &Tensor, nodes: usize) -> Normalized {
    let loops = Tensor::arange(nodes as i64);
    let [row, col] = <[Tensor; 2]>::try_from(edge_index.unbind(0)).expect("edge_index is [2, E]");
    let row = Tensor::cat(&[&row, &loops], 0);
    let col = Tensor::cat(&[&col, &loops], 0);
    let deg = Tensor::zeros(&[nodes], DType::F32).index_add(0, &col, &col.ones_like());
    let dis = deg.pow(-0.5);
    let dis = dis.masked_fill(&dis.isinf(), 0.0);
    let weight = &dis.index_select(0, &row) * &dis.index_select(0, &col);
    Normalized { row, col, weight }
}

/// PyG's `dropout_edge`: the columns of `edge_index` kept where `keep`
/// (Bool `[E]`) is true, compacted by `nonzero`: `[2, <=E]`.
pub fn kept_edges(edge_index: &Tensor, keep: &Tensor) -> Tensor {
    edge_index.index_select(1, &keep.nonzero().flatten())
}

/// A keep mask for `edge_index`'s columns drawn on the device: each kept
/// with probability `1 - p`.
pub fn edge_keep_mask(edge_index: &Tensor, p: f64) -> Tensor {
    Tensor::rand_sym(&[edge_index.size(1)], DType::F32).ge_scalar(p)
}

/// PyG's `GCNConv` (parameter names `lin.weight`, `bias`): a linear map
/// without bias (Glorot-initialised), propagation over the normalised
/// edges, then the bias (zeros at first).
pub struct GcnConv {
    pub lin: Linear,
    pub bias: Tensor,
}

impl GcnConv {
    /// Initialised from the generator `lazyxla::manual_seed` seeds.
    pub fn new(inputs: usize, outputs: usize) -> GcnConv {
        let weight = Tensor::zeros(&[outputs, inputs], DType::F32);
        init::xavier_uniform_(&weight, 1.0);
        GcnConv {
            lin: Linear::from_tensors(weight, None),
            bias: Tensor::zeros(&[outputs], DType::F32).requires_grad(true),
        }
    }

    /// `Â X W + b` over the normalised edges `g`.
    pub fn propagate(&self, x: &Tensor, g: &Normalized) -> Tensor {
        let h = self.lin.forward(x);
        let messages = &h.index_select(0, &g.row) * &g.weight.unsqueeze(1);
        &h.zeros_like().index_add(0, &g.col, &messages) + &self.bias
    }
}

impl Module for GcnConv {
    /// A graph convolution needs its edges: use [`GcnConv::propagate`].
    fn forward(&self, _x: &Tensor) -> Tensor {
        panic!("GcnConv::forward needs the graph: call propagate(&x, &gcn_norm(&edge_index, n))")
    }

    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![("bias".into(), self.bias.clone())]
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![("lin".into(), &self.lin)]
    }
}

/// The 2-layer GCN: dropout, `conv1`, ReLU, dropout, `conv2`,
/// log-softmax; in training, each step first drops edges with
/// probability `edge_p`.
pub struct Gcn {
    pub conv1: GcnConv,
    pub conv2: GcnConv,
    drop: Dropout,
    edge_p: f64,
    training: AtomicBool,
}

impl Gcn {
    /// Feature dropout `p` (0.5 in Kipf & Welling), edge dropout
    /// `edge_p`.
    pub fn new(spec: GraphSpec, hidden: usize, p: f64, edge_p: f64) -> Gcn {
        Gcn {
            conv1: GcnConv::new(spec.features, hidden),
            conv2: GcnConv::new(hidden, spec.classes),
            drop: Dropout::new(p, 11),
            edge_p,
            training: AtomicBool::new(true),
        }
    }

    /// Log-probabilities `[N, classes]` over exactly the edges given
    /// (no edge dropout; feature dropout in training).
    pub fn forward_edges(&self, x: &Tensor, edge_index: &Tensor) -> Tensor {
        let g = gcn_norm(edge_index, x.upper_bounds()[0]);
        let h = self.conv1.propagate(&self.drop.forward(x), &g).relu();
        let h = self.conv2.propagate(&self.drop.forward(&h), &g);
        h.log_softmax(1)
    }

    /// PyTorch's `model(x, edge_index)`: in training, each directed edge
    /// is kept with probability `1 - edge_p` (drawn on the device).
    pub fn forward_graph(&self, x: &Tensor, edge_index: &Tensor) -> Tensor {
        if self.training.load(Ordering::Relaxed) && self.edge_p > 0.0 {
            let keep = edge_keep_mask(edge_index, self.edge_p);
            self.forward_edges(x, &kept_edges(edge_index, &keep))
        } else {
            self.forward_edges(x, edge_index)
        }
    }
}

impl Module for Gcn {
    /// A GCN needs its edges: use `forward_many(&[x, edge_index])`.
    fn forward(&self, _x: &Tensor) -> Tensor {
        panic!("Gcn::forward needs the graph: call forward_many(&[x, edge_index])")
    }

    /// `[x, edge_index]` to `[log-probabilities]`.
    fn forward_many(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        match inputs {
            [x, edge_index] => vec![self.forward_graph(x, edge_index)],
            _ => panic!(
                "Gcn::forward_many takes [x, edge_index], got {} tensors",
                inputs.len()
            ),
        }
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![("conv1".into(), &self.conv1), ("conv2".into(), &self.conv2)]
    }

    fn train(&self, on: bool) {
        self.training.store(on, Ordering::Relaxed);
        self.drop.train(on);
    }
}

/// The training loss: the negative log-likelihood of the labels of the
/// training nodes.
pub fn loss(log_probs: &Tensor, train: &Tensor, labels: &Tensor) -> Tensor {
    nn::nll_loss(
        &log_probs.index_select(0, train),
        labels,
        nn::Reduction::Mean,
    )
}
