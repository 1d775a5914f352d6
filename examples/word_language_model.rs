//! pytorch/examples' word language model, ported: an embedding, a 2-layer
//! `nn::Lstm` with dropout, a decoder whose weight is the embedding's
//! (tied), truncated backpropagation through time (the state is carried
//! from batch to batch and `detach`ed), gradient clipping, and sequence
//! lengths that vary per batch as the original's (`bptt` mostly, `bptt /
//! 2` sometimes, then jittered). The sequence dim is marked dynamic, so
//! one training program serves every length; each LSTM layer is one
//! device loop. Validation perplexity is printed after each epoch.
//!
//! The corpus is synthetic (a seeded Markov chain over a small
//! vocabulary) so that the example runs in seconds; the model learns its
//! transitions and the perplexity falls well below the vocabulary size.
//!
//! Run: `cargo run --release --example word_language_model`

use lazyxla::nn::{self, Dropout, Embedding, Linear, Lstm, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, no_grad, Tensor};

const NTOKEN: usize = 48;
const NHID: usize = 32; // = emsize: the decoder is tied to the embedding
const BATCH: usize = 8;
const BPTT: usize = 12;
/// The bound of the dynamic sequence dim (the longest jittered length).
const MAX_LEN: usize = BPTT + 8;

/// A seeded xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `n` tokens of a Markov chain in which each token is followed by one
/// of three successors (most often the first).
fn corpus(n: usize, seed: u64) -> Vec<i64> {
    let mut r = Rng(seed | 1);
    let mut t = 0usize;
    (0..n)
        .map(|_| {
            let u = r.next();
            let k = if u < 0.6 {
                1
            } else if u < 0.85 {
                7
            } else {
                20
            };
            t = (t * 5 + k) % NTOKEN;
            t as i64
        })
        .collect()
}

/// The original's `batchify`: the stream cut into `BATCH` columns,
/// `[rows, BATCH]`, as host rows.
fn batchify(data: &[i64]) -> Vec<Vec<i64>> {
    let rows = data.len() / BATCH;
    (0..rows)
        .map(|r| (0..BATCH).map(|c| data[c * rows + r]).collect())
        .collect()
}

/// Rows `i..i + len` as the input and rows `i + 1..i + 1 + len` as the
/// targets, the sequence dim marked dynamic (bound `MAX_LEN`).
fn get_batch(rows: &[Vec<i64>], i: usize, len: usize) -> (Tensor, Tensor) {
    let len = len.min(rows.len() - 1 - i);
    let flat = |from: usize| -> Vec<i64> { rows[from..from + len].concat() };
    let x = Tensor::from_vec(flat(i), &[len, BATCH])
        .unwrap()
        .mark_dynamic(0, MAX_LEN);
    let y = Tensor::from_vec(flat(i + 1), &[len, BATCH])
        .unwrap()
        .mark_dynamic_as(0, &x, 0);
    (x, y)
}

struct RnnModel {
    encoder: Embedding,
    drop: Dropout,
    rnn: Lstm,
    decoder: Linear,
}

impl RnnModel {
    fn new() -> RnnModel {
        let encoder = Embedding::new(NTOKEN, NHID, 1);
        // Tied weights: the decoder's weight is the embedding's tensor.
        let weight = encoder.parameters()[0].clone();
        nn::init::uniform_(&weight, -0.1, 0.1);
        let bias = Tensor::zeros(&[NTOKEN], lazyxla::DType::F32);
        RnnModel {
            encoder,
            drop: Dropout::new(0.2, 3),
            rnn: Lstm::new(NHID, NHID, 2, 2).dropout(0.2),
            decoder: Linear::from_tensors(weight, Some(bias)),
        }
    }

    /// Logits `[T * B, NTOKEN]` and the new state, as the original's
    /// `forward(input, hidden)`.
    fn forward_with_state(
        &self,
        x: &Tensor,
        state: (Tensor, Tensor),
    ) -> (Tensor, (Tensor, Tensor)) {
        let emb = self.drop.forward(&self.encoder.forward(x));
        let (out, state) = self.rnn.forward_with_state(&emb, Some(state));
        let out = self.drop.forward(&out);
        (
            self.decoder.forward(&out).reshape(&[-1, NTOKEN as i64]),
            state,
        )
    }

    /// Zero states, as data (the states every later batch gets are data
    /// too, so the first batch runs the same program).
    fn init_hidden(&self) -> (Tensor, Tensor) {
        let z = || Tensor::from_vec(vec![0.0f32; 2 * BATCH * NHID], &[2, BATCH, NHID]).unwrap();
        (z(), z())
    }
}

impl Module for RnnModel {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.forward_with_state(x, self.init_hidden()).0
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("encoder".into(), &self.encoder),
            ("drop".into(), &self.drop),
            ("rnn".into(), &self.rnn),
            ("decoder".into(), &self.decoder),
        ]
    }
}

/// The mean loss over `rows`, evaluated in `BPTT` chunks.
fn evaluate(model: &RnnModel, rows: &[Vec<i64>]) -> lazyxla::Result<f64> {
    model.train(false);
    let mut state = model.init_hidden();
    let (mut total, mut count) = (0.0, 0usize);
    let mut i = 0;
    while i + 1 < rows.len() {
        let (x, y) = get_batch(rows, i, BPTT);
        let n = BPTT.min(rows.len() - 1 - i);
        let loss = no_grad(|| {
            let (logits, s) = model.forward_with_state(&x, state.clone());
            state = s;
            nn::cross_entropy(&logits, &y.flatten())
        });
        mark_step()?;
        total += loss.item::<f32>()? as f64 * (n * BATCH) as f64;
        count += n * BATCH;
        i += BPTT;
    }
    model.train(true);
    Ok(total / count as f64)
}

/// What a run reports: the validation perplexity after each epoch, the
/// sequence lengths the batches had, and the programs compiled for
/// training and evaluation.
pub struct Report {
    pub valid_ppl: Vec<f64>,
    pub lengths: Vec<usize>,
    pub compiles: u64,
}

/// Trains for `epochs` epochs, printing a line per epoch when `verbose`.
pub fn run(epochs: usize, verbose: bool) -> lazyxla::Result<Report> {
    lazyxla::manual_seed(1111);
    let train = batchify(&corpus(8000, 7));
    let valid = batchify(&corpus(1600, 8));
    let model = RnnModel::new();
    mark_step()?; // the initialisation runs once, not in the first step
    let compiled_before = metrics::counter("UncachedCompile");
    let params = model.parameters();
    let mut opt = Sgd::new(params.clone(), 20.0); // the original's lr, with clipping
    if verbose {
        println!(
            "word_language_model on the {} backend: {} parameters (decoder tied), {} training rows",
            lazyxla::Device::default().name(),
            params.len(),
            train.len()
        );
    }
    let mut r = Rng(42);
    let mut report = Report {
        valid_ppl: Vec::new(),
        lengths: Vec::new(),
        compiles: 0,
    };
    for epoch in 1..=epochs {
        let mut state = model.init_hidden();
        let (mut i, mut batches, mut total) = (0usize, 0usize, 0.0f64);
        let start = std::time::Instant::now();
        while i + 1 < train.len() {
            // The original's variable length: bptt (or half), jittered.
            let base = if r.next() < 0.95 {
                BPTT as f64
            } else {
                BPTT as f64 / 2.0
            };
            let jitter = (r.next() - 0.5) * 6.0;
            let len = ((base + jitter).round() as usize).clamp(2, MAX_LEN);
            let (x, y) = get_batch(&train, i, len);
            report.lengths.push(len.min(train.len() - 1 - i));
            // Truncated BPTT: the state carries on, its history does not.
            let detached = (state.0.detach(), state.1.detach());
            opt.zero_grad();
            let (logits, s) = model.forward_with_state(&x, detached);
            let loss = nn::cross_entropy(&logits, &y.flatten());
            loss.backward();
            nn::clip_grad_norm(&params, 0.25);
            opt.step();
            state = s;
            mark_step()?;
            total += loss.item::<f32>()? as f64;
            batches += 1;
            i += len;
        }
        let val = evaluate(&model, &valid)?;
        report.valid_ppl.push(val.exp());
        if verbose {
            println!(
                "epoch {epoch}: {batches} batches in {:.1}s, train loss {:.3}, valid loss {val:.3}, valid ppl {:.2}",
                start.elapsed().as_secs_f64(),
                total / batches as f64,
                val.exp()
            );
        }
    }
    report.compiles = metrics::counter("UncachedCompile") - compiled_before;
    Ok(report)
}

#[allow(dead_code)]
fn main() -> lazyxla::Result<()> {
    let report = run(3, true)?;
    println!(
        "programs compiled for training and evaluation: {} (one each, for every length)",
        report.compiles
    );
    Ok(())
}
