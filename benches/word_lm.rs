//! The word language model's training step at pytorch/examples' "medium"
//! setting (vocabulary 10,000, emsize = nhid = 650, 2 LSTM layers, batch
//! 20, bptt 35, tied decoder, dropout 0.5, clipping 0.25, SGD lr 20),
//! timed per step on random tokens; `benches/peers/word_lm_torch.py` times
//! PyTorch eager's `nn.LSTM` on the same step. Prints one JSON line.
//!
//! Run: `cargo bench --bench word_lm [-- STEPS]`

use lazyxla::nn::{self, Dropout, Embedding, Linear, Lstm, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, DType, Tensor};
use std::time::Instant;

const NTOKEN: usize = 10_000;
const NHID: usize = 650;
const BATCH: usize = 20;
const BPTT: usize = 35;

fn tokens(n: usize, seed: u64) -> Vec<i64> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % NTOKEN as u64) as i64
        })
        .collect()
}

fn main() -> lazyxla::Result<()> {
    let steps: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    lazyxla::manual_seed(1);
    let encoder = Embedding::new(NTOKEN, NHID, 1);
    let weight = encoder.parameters()[0].clone();
    nn::init::uniform_(&weight, -0.1, 0.1);
    let drop = Dropout::new(0.5, 2);
    let rnn = Lstm::new(NHID, NHID, 2, 3).dropout(0.5);
    let decoder = Linear::from_tensors(weight, Some(Tensor::zeros(&[NTOKEN], DType::F32)));
    let mut params = encoder.parameters();
    params.extend(rnn.parameters());
    params.extend(decoder.parameters().into_iter().skip(1));
    let mut opt = Sgd::new(params.clone(), 20.0);
    let zeros = || Tensor::from_vec(vec![0.0f32; 2 * BATCH * NHID], &[2, BATCH, NHID]).unwrap();
    let mut state = (zeros(), zeros());
    mark_step()?;
    let mut times = Vec::new();
    for step in 0..steps {
        let t = tokens((BPTT + 1) * BATCH, step as u64 + 7);
        let x = Tensor::from_vec(t[..BPTT * BATCH].to_vec(), &[BPTT, BATCH])?;
        let y = Tensor::from_vec(t[BATCH..].to_vec(), &[BPTT * BATCH])?;
        let start = Instant::now();
        opt.zero_grad();
        let emb = drop.forward(&encoder.forward(&x));
        let (out, s) = rnn.forward_with_state(&emb, Some((state.0.detach(), state.1.detach())));
        let logits = decoder
            .forward(&drop.forward(&out))
            .reshape(&[-1, NTOKEN as i64]);
        let loss = nn::cross_entropy(&logits, &y);
        loss.backward();
        nn::clip_grad_norm(&params, 0.25);
        opt.step();
        state = s;
        mark_step()?;
        let l = loss.item::<f32>()?;
        times.push(start.elapsed().as_secs_f64());
        assert!(l.is_finite());
    }
    let rest = &times[1..];
    let mean = rest.iter().sum::<f64>() / rest.len().max(1) as f64;
    println!(
        "{{\"impl\": \"lazyxla\", \"first_step_s\": {:.3}, \"step_ms\": {:.1}, \"steps\": {steps}, \"compiles\": {}}}",
        times[0],
        mean * 1e3,
        metrics::counter("UncachedCompile")
    );
    Ok(())
}
