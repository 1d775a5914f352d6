//! Recurrent layers with PyTorch's meaning, parameters and layout:
//! [`Lstm`], [`Gru`], [`Rnn`] (cells in `nn::cells`).
//!
//! # How a layer runs
//!
//! Each layer and direction is one device loop: the input projection
//! `x W_ihᵀ + b_ih` of every step is one matrix product before the loop,
//! and a [`scan`](crate::scan) over the steps carries the state (`h`, and
//! `c` for an LSTM) and stacks each step's `h` (the reverse direction
//! scans from the last step to the first). Nothing is unrolled on the
//! host: the program's size does not grow with the sequence, and a
//! sequence dim marked dynamic (`mark_dynamic(0, bound)`) runs its real
//! steps only, with one program for every length.
//!
//! # Per-sequence lengths
//!
//! [`Lstm::forward_with_lengths`] (and the others') takes an I64 `[B]`
//! tensor of lengths, PyTorch's packed sequences: at step `t` the state
//! of a sequence with `t >= length` stays as it is and its output is
//! zero, so outputs past a sequence's length are zero and the final state
//! is the one at the sequence's end (for the reverse direction, each
//! sequence starts at its own last step, as `pack_padded_sequence` does).
//!
//! Dropout between layers (`.dropout(p)`, training only) draws its masks
//! on the device ([`manual_seed`](crate::manual_seed)).

use super::cells::{step, Kind};
use super::layers::uniform;
use super::{named, Module};
use crate::tensor::{scan_with, TripCount};
use crate::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};

/// The weights of one layer in one direction.
#[derive(Debug)]
pub(super) struct Weights {
    pub w_ih: Tensor,
    pub w_hh: Tensor,
    pub b_ih: Option<Tensor>,
    pub b_hh: Option<Tensor>,
}

impl Weights {
    /// PyTorch's initialisation: every tensor `U(-k, k)`, `k = 1/√hidden`.
    pub(super) fn new(kind: Kind, input: usize, hidden: usize, bias: bool, seed: u64) -> Weights {
        let k = 1.0 / (hidden.max(1) as f64).sqrt();
        let g = kind.gates() * hidden;
        let p = |shape: &[usize], salt: u64| {
            uniform(
                shape,
                -k,
                k,
                seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt,
            )
            .requires_grad(true)
        };
        Weights {
            w_ih: p(&[g, input], 1),
            w_hh: p(&[g, hidden], 2),
            b_ih: bias.then(|| p(&[g], 3)),
            b_hh: bias.then(|| p(&[g], 4)),
        }
    }

    /// The parameters under PyTorch's names, with `suffix` (`_l0`,
    /// `_l1_reverse`, or none for a cell).
    pub(super) fn named(&self, suffix: &str) -> Vec<(String, Tensor)> {
        let mut v = vec![
            named(&format!("weight_ih{suffix}"), &self.w_ih),
            named(&format!("weight_hh{suffix}"), &self.w_hh),
        ];
        v.extend(
            self.b_ih
                .iter()
                .map(|b| named(&format!("bias_ih{suffix}"), b)),
        );
        v.extend(
            self.b_hh
                .iter()
                .map(|b| named(&format!("bias_hh{suffix}"), b)),
        );
        v
    }
}

/// A stack of recurrent layers (the state behind [`Lstm`], [`Gru`] and
/// [`Rnn`]).
#[derive(Debug)]
struct Stack {
    kind: Kind,
    input_size: usize,
    hidden_size: usize,
    num_layers: usize,
    bias: bool,
    batch_first: bool,
    dropout: f64,
    bidirectional: bool,
    seed: u64,
    /// Index `layer * directions + direction`.
    weights: Vec<Weights>,
    training: AtomicBool,
}

impl Stack {
    fn new(
        kind: Kind,
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        seed: u64,
    ) -> Stack {
        if num_layers == 0 || hidden_size == 0 {
            panic!(
                "{}: num_layers and hidden_size must be positive, got {num_layers} and {hidden_size}",
                kind.name()
            );
        }
        let mut s = Stack {
            kind,
            input_size,
            hidden_size,
            num_layers,
            bias: true,
            batch_first: false,
            dropout: 0.0,
            bidirectional: false,
            seed,
            weights: Vec::new(),
            training: AtomicBool::new(true),
        };
        s.build();
        s
    }

    fn dirs(&self) -> usize {
        1 + self.bidirectional as usize
    }

    /// New weights for the current settings.
    fn build(&mut self) {
        let d = self.dirs();
        self.weights = (0..self.num_layers * d)
            .map(|j| {
                let input = if j < d {
                    self.input_size
                } else {
                    self.hidden_size * d
                };
                Weights::new(
                    self.kind,
                    input,
                    self.hidden_size,
                    self.bias,
                    self.seed.wrapping_add(j as u64),
                )
            })
            .collect();
    }

    fn named(&self) -> Vec<(String, Tensor)> {
        let d = self.dirs();
        self.weights
            .iter()
            .enumerate()
            .flat_map(|(j, w)| {
                let rev = if j % d == 1 { "_reverse" } else { "" };
                w.named(&format!("_l{}{rev}", j / d))
            })
            .collect()
    }

    /// The output and final states (`h`, and `c` for an LSTM) of `x`.
    #[track_caller]
    fn run(
        &self,
        x: &Tensor,
        lengths: Option<&Tensor>,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> (Tensor, Vec<Tensor>) {
        let op = self.kind.name();
        let (d, hsz) = (self.dirs(), self.hidden_size);
        if !x.dtype().is_float() || !(x.rank() == 2 || x.rank() == 3) {
            panic!(
                "{op}: the input must be a float [T, B, {}] (or [B, T, ..] with batch_first, or unbatched [T, ..]), got {}{}",
                self.input_size,
                x.dtype(),
                x.shape_string()
            );
        }
        let unbatched = x.rank() == 2;
        let x = match (unbatched, self.batch_first) {
            (true, _) => x.unsqueeze(1),
            (false, true) => x.transpose(0, 1),
            (false, false) => x.clone(),
        };
        let feat = x.size(2).as_static();
        if feat != Some(self.input_size as i64) {
            panic!(
                "{op}: the input has {} features per step, the layer takes {}",
                x.size(2),
                self.input_size
            );
        }
        let batch = x.size(1);
        let b = batch.as_static().unwrap_or_else(|| {
            panic!("{op}: the batch size must be static, got {batch}; mark the sequence dim dynamic instead")
        }) as usize;
        let lengths = lengths.map(|l| {
            if !l.dtype().is_int() || l.shape_string() != format!("[{b}]") {
                panic!(
                    "{op}: lengths must be an integer tensor of one length per sequence ([{b}]), got {}{}",
                    l.dtype(),
                    l.shape_string()
                );
            }
            l.to_dtype(crate::DType::I64).unsqueeze(1)
        });
        let states = self.kind.states();
        let want = format!("[{}, {b}, {hsz}]", self.num_layers * d);
        let want1 = format!("[{}, {hsz}]", self.num_layers * d);
        let state = |s: Option<&Tensor>, what: &str| -> Option<Tensor> {
            let s = s?;
            let ok = match unbatched {
                true => s.shape_string() == want1,
                false => s.shape_string() == want,
            };
            if !ok {
                panic!(
                    "{op}: the initial {what} must be {}, got {}",
                    if unbatched { &want1 } else { &want },
                    s.shape_string()
                );
            }
            Some(if unbatched { s.unsqueeze(1) } else { s.clone() })
        };
        let h0 = state(h0, "hidden state h_0");
        let c0 = state(c0, "cell state c_0");
        let zeros = || x.device().scoped(|| Tensor::zeros(&[b, hsz], x.dtype()));
        let pick = |s: &Option<Tensor>, j: usize| {
            s.as_ref()
                .map_or_else(zeros, |s| s.narrow(0, j, 1).squeeze(0))
        };
        let mut input = x.clone();
        let mut finals: Vec<Vec<Tensor>> = vec![Vec::new(); states];
        for layer in 0..self.num_layers {
            if layer > 0 && self.dropout > 0.0 && self.training.load(Ordering::Relaxed) {
                let keep = input
                    .rand_like()
                    .ge_scalar(self.dropout)
                    .to_dtype(input.dtype());
                input = &(&input * &keep) * (1.0 / (1.0 - self.dropout));
            }
            let mut outs = Vec::with_capacity(d);
            for dir in 0..d {
                let j = layer * d + dir;
                let w = &self.weights[j];
                let mut init = vec![pick(&h0, j)];
                if states == 2 {
                    init.push(pick(&c0, j));
                }
                let (fin, ys) = run_direction(
                    self.kind,
                    w,
                    &input,
                    &init,
                    TripCount::from(&x.size(0)),
                    dir == 1,
                    lengths.as_ref(),
                );
                for (k, f) in fin.into_iter().enumerate() {
                    finals[k].push(f);
                }
                outs.push(ys);
            }
            input = match outs.len() {
                1 => outs.pop().expect("one direction"),
                _ => Tensor::cat(&outs.iter().collect::<Vec<_>>(), 2),
            };
        }
        let mut out = input;
        if unbatched {
            out = out.squeeze(1);
        } else if self.batch_first {
            out = out.transpose(0, 1);
        }
        let finals = finals
            .iter()
            .map(|f| {
                let s = Tensor::stack(&f.iter().collect::<Vec<_>>(), 0);
                if unbatched {
                    s.squeeze(1)
                } else {
                    s
                }
            })
            .collect();
        (out, finals)
    }
}

/// One layer in one direction: the final carries and the stacked `h`.
#[track_caller]
fn run_direction(
    kind: Kind,
    w: &Weights,
    x: &Tensor,
    init: &[Tensor],
    trip: TripCount,
    reverse: bool,
    lengths: Option<&Tensor>,
) -> (Vec<Tensor>, Tensor) {
    // Every step's input projection in one product.
    let mut xw = x.matmul(&w.w_ih.transpose(0, 1));
    if let Some(b) = &w.b_ih {
        xw = &xw + b;
    }
    let whh = w.w_hh.transpose(0, 1);
    let (fin, ys) = scan_with(trip, init, &[xw], reverse, |t, carry, row| {
        let mut gh = carry[0].matmul(&whh);
        if let Some(b) = &w.b_hh {
            gh = &gh + b;
        }
        let new = step(kind, &row[0], &gh, carry);
        match lengths {
            None => {
                let y = new[0].clone();
                (new, vec![y])
            }
            Some(len) => {
                // Sequences already ended keep their state; their output is 0.
                // Selects, so a non-finite step past a sequence's end (its
                // padding is never read by PyTorch) cannot leak into it.
                let m = len.gt(t); // [B, 1]
                let kept: Vec<Tensor> = new
                    .iter()
                    .zip(carry)
                    .map(|(n, old)| m.where_cond(n, old))
                    .collect();
                let y = m.where_cond(&new[0], &new[0].zeros_like());
                (kept, vec![y])
            }
        }
    });
    (fin, ys.into_iter().next().expect("one stacked output"))
}

macro_rules! recurrent {
    ($name:ident, $kind:expr, $torch:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name(Stack);

        impl $name {
            /// Processes both directions of the sequence (outputs
            /// concatenated, `[.., 2 * hidden]`), as PyTorch's `bidirectional`.
            #[track_caller]
            pub fn bidirectional(mut self, on: bool) -> $name {
                self.0.bidirectional = on;
                self.0.build();
                self
            }

            /// Inputs and outputs `[B, T, ..]` instead of `[T, B, ..]`
            /// (the states stay `[layers * directions, B, hidden]`).
            #[track_caller]
            pub fn batch_first(mut self, on: bool) -> $name {
                self.0.batch_first = on;
                self
            }

            /// Dropout with probability `p` on the outputs of each layer
            /// but the last, in training mode.
            #[track_caller]
            pub fn dropout(mut self, p: f64) -> $name {
                if !(0.0..1.0).contains(&p) {
                    panic!("{}: dropout must be in [0, 1), got {p}", $torch);
                }
                self.0.dropout = p;
                self
            }

            /// With (`true`, the default) or without the biases `b_ih`, `b_hh`.
            #[track_caller]
            pub fn bias(mut self, on: bool) -> $name {
                self.0.bias = on;
                self.0.build();
                self
            }
        }

        impl Module for $name {
            /// The output `[T, B, directions * hidden]` from zero states.
            #[track_caller]
            fn forward(&self, x: &Tensor) -> Tensor {
                self.0.run(x, None, None, None).0
            }

            /// `[x]`, `[x, h_0]` (or `[x, h_0, c_0]` for an LSTM) to
            /// `[output, h_n]` (`[output, h_n, c_n]`).
            #[track_caller]
            fn forward_many(&self, inputs: &[Tensor]) -> Vec<Tensor> {
                let states = $kind.states();
                if inputs.is_empty() || inputs.len() > 1 + states {
                    panic!(
                        "{}: forward_many takes the input and up to {states} states, {} were given",
                        $torch,
                        inputs.len()
                    );
                }
                let (out, fin) = self.0.run(&inputs[0], None, inputs.get(1), inputs.get(2));
                std::iter::once(out).chain(fin).collect()
            }

            #[track_caller]
            fn own_parameters(&self) -> Vec<(String, Tensor)> {
                self.0.named()
            }

            #[track_caller]
            fn train(&self, on: bool) {
                self.0.training.store(on, Ordering::Relaxed);
            }
        }
    };
}

recurrent!(
    Lstm,
    Kind::Lstm,
    "Lstm",
    "A multi-layer LSTM, as `torch.nn.LSTM`: gates in the order i, f, g,
o (`weight_ih_l0: [4 * hidden, input]`), parameters `weight_ih_l{k}`,
`weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}` (`_reverse` for the
second direction), state `(h, c)`, each `[layers * directions, B,
hidden]`. One device loop per layer and direction (see the module docs).

```
use lazyxla::nn::{Lstm, Module};
use lazyxla::{DType, Tensor};
let lstm = Lstm::new(3, 4, 2, 0);
let x = Tensor::ones(&[5, 2, 3], DType::F32); // [T, B, input]
let (out, (h, c)) = lstm.forward_with_state(&x, None);
assert_eq!(out.shape_string(), \"[5, 2, 4]\");
assert_eq!(h.shape_string(), \"[2, 2, 4]\");
assert_eq!(c.shape_string(), \"[2, 2, 4]\");
assert_eq!(lstm.named_parameters()[0].0, \"weight_ih_l0\");
```"
);

recurrent!(
    Gru,
    Kind::Gru,
    "Gru",
    "A multi-layer GRU, as `torch.nn.GRU`: gates in the order r, z, n
(`weight_ih_l0: [3 * hidden, input]`), `n = tanh(x W_inᵀ + b_in + r ⊙ (h
W_hnᵀ + b_hn))`, state `h: [layers * directions, B, hidden]`.

```
use lazyxla::nn::{Gru, Module};
use lazyxla::{DType, Tensor};
let gru = Gru::new(3, 4, 1, 0).batch_first(true).bidirectional(true);
let x = Tensor::ones(&[2, 5, 3], DType::F32); // [B, T, input]
let (out, h) = gru.forward_with_state(&x, None);
assert_eq!(out.shape_string(), \"[2, 5, 8]\");
assert_eq!(h.shape_string(), \"[2, 2, 4]\");
assert_eq!(gru.named_parameters()[4].0, \"weight_ih_l0_reverse\");
```"
);

recurrent!(
    Rnn,
    Kind::RnnTanh,
    "Rnn",
    "A multi-layer Elman RNN, as `torch.nn.RNN`: `h' = tanh(x W_ihᵀ + b_ih
+ h W_hhᵀ + b_hh)` (or relu, [`nonlinearity`](Rnn::nonlinearity)),
state `h: [layers * directions, B, hidden]`.

```
use lazyxla::nn::{Module, Rnn};
use lazyxla::{DType, Tensor};
let rnn = Rnn::new(3, 4, 1, 0).nonlinearity(\"relu\");
let x = Tensor::ones(&[5, 2, 3], DType::F32);
let (out, h) = rnn.forward_with_state(&x, None);
assert_eq!(out.shape_string(), \"[5, 2, 4]\");
assert_eq!(h.shape_string(), \"[1, 2, 4]\");
```"
);

impl Lstm {
    /// An LSTM of `num_layers` layers from `input_size` to `hidden_size`
    /// features, initialised as PyTorch (`U(-k, k)`, `k = 1/√hidden`)
    /// from `seed`.
    ///
    /// ```
    /// use lazyxla::nn::{Lstm, Module};
    /// assert_eq!(Lstm::new(3, 4, 1, 0).parameters().len(), 4);
    /// ```
    #[track_caller]
    pub fn new(input_size: usize, hidden_size: usize, num_layers: usize, seed: u64) -> Lstm {
        Lstm(Stack::new(
            Kind::Lstm,
            input_size,
            hidden_size,
            num_layers,
            seed,
        ))
    }

    /// The output and final state `(h_n, c_n)` from the initial state
    /// `(h_0, c_0)` (zeros when `None`), as PyTorch's `lstm(x, (h0, c0))`.
    ///
    /// ```
    /// use lazyxla::nn::Lstm;
    /// use lazyxla::{DType, Tensor};
    /// let lstm = Lstm::new(2, 3, 1, 0);
    /// let x = Tensor::ones(&[4, 1, 2], DType::F32);
    /// let (_, state) = lstm.forward_with_state(&x, None);
    /// let (out, _) = lstm.forward_with_state(&x, Some(state)); // carried on
    /// assert_eq!(out.shape_string(), "[4, 1, 3]");
    /// ```
    #[track_caller]
    pub fn forward_with_state(
        &self,
        x: &Tensor,
        state: Option<(Tensor, Tensor)>,
    ) -> (Tensor, (Tensor, Tensor)) {
        let (h0, c0) = state.unzip();
        let (out, mut fin) = self.0.run(x, None, h0.as_ref(), c0.as_ref());
        let c = fin.pop().expect("c");
        (out, (fin.pop().expect("h"), c))
    }

    /// As [`forward_with_state`](Lstm::forward_with_state) with one length
    /// per sequence (I64 `[B]`, PyTorch's packed sequences): outputs past
    /// a sequence's length are zero and its final state is the one at its
    /// last step.
    ///
    /// ```
    /// use lazyxla::nn::Lstm;
    /// use lazyxla::{DType, Tensor};
    /// let lstm = Lstm::new(2, 3, 1, 0);
    /// let x = Tensor::ones(&[4, 2, 2], DType::F32);
    /// let lengths = Tensor::from_vec(vec![4i64, 2], &[2]).unwrap();
    /// let (out, (h, _)) = lstm.forward_with_lengths(&x, &lengths, None);
    /// let out = out.to_vec::<f32>().unwrap(); // [T, B, H]
    /// assert!(out[3 * 6 + 3..].iter().all(|&v| v == 0.0)); // step 3 of sequence 1
    /// // Sequence 1's final state is its output at step 1.
    /// let h = h.to_vec::<f32>().unwrap();
    /// assert!(h[3..].iter().zip(&out[6 + 3..6 + 6]).all(|(a, b)| (a - b).abs() < 1e-6));
    /// ```
    #[track_caller]
    pub fn forward_with_lengths(
        &self,
        x: &Tensor,
        lengths: &Tensor,
        state: Option<(Tensor, Tensor)>,
    ) -> (Tensor, (Tensor, Tensor)) {
        let (h0, c0) = state.unzip();
        let (out, mut fin) = self.0.run(x, Some(lengths), h0.as_ref(), c0.as_ref());
        let c = fin.pop().expect("c");
        (out, (fin.pop().expect("h"), c))
    }
}

macro_rules! single_state {
    ($name:ident, $kind:expr, $torch:literal) => {
        impl $name {
            #[doc = concat!("A ", $torch, " of `num_layers` layers from `input_size` to `hidden_size` features, initialised as PyTorch (`U(-k, k)`, `k = 1/√hidden`) from `seed`.")]
            ///
            /// ```
            /// use lazyxla::nn::{Gru, Module, Rnn};
            /// assert_eq!(Gru::new(3, 4, 2, 0).parameters().len(), 8);
            /// assert_eq!(Rnn::new(3, 4, 1, 0).bias(false).parameters().len(), 2);
            /// ```
            #[track_caller]
            pub fn new(input_size: usize, hidden_size: usize, num_layers: usize, seed: u64) -> $name {
                $name(Stack::new($kind, input_size, hidden_size, num_layers, seed))
            }

            /// The output and final state `h_n` from the initial state
            /// `h_0` (zeros when `None`).
            ///
            /// ```
            /// use lazyxla::nn::Gru;
            /// use lazyxla::{DType, Tensor};
            /// let gru = Gru::new(2, 3, 1, 0);
            /// let (out, h) = gru.forward_with_state(&Tensor::ones(&[4, 1, 2], DType::F32), None);
            /// let (h, out) = (h.to_vec::<f32>().unwrap(), out.to_vec::<f32>().unwrap());
            /// assert!(h.iter().zip(&out[9..]).all(|(a, b)| (a - b).abs() < 1e-6));
            /// ```
            #[track_caller]
            pub fn forward_with_state(&self, x: &Tensor, state: Option<Tensor>) -> (Tensor, Tensor) {
                let (out, mut fin) = self.0.run(x, None, state.as_ref(), None);
                (out, fin.pop().expect("h"))
            }

            /// As `forward_with_state` with one length per sequence (I64
            /// `[B]`): outputs past a sequence's length are zero, its final
            /// state the one at its last step.
            ///
            /// ```
            /// use lazyxla::nn::Rnn;
            /// use lazyxla::{DType, Tensor};
            /// let rnn = Rnn::new(2, 3, 1, 0);
            /// let lengths = Tensor::from_vec(vec![1i64], &[1]).unwrap();
            /// let (out, h) = rnn.forward_with_lengths(&Tensor::ones(&[3, 1, 2], DType::F32), &lengths, None);
            /// let out = out.to_vec::<f32>().unwrap();
            /// assert!(out[3..].iter().all(|&v| v == 0.0));
            /// let h = h.to_vec::<f32>().unwrap();
            /// assert!(h.iter().zip(&out[..3]).all(|(a, b)| (a - b).abs() < 1e-6));
            /// ```
            #[track_caller]
            pub fn forward_with_lengths(&self, x: &Tensor, lengths: &Tensor, state: Option<Tensor>) -> (Tensor, Tensor) {
                let (out, mut fin) = self.0.run(x, Some(lengths), state.as_ref(), None);
                (out, fin.pop().expect("h"))
            }
        }
    };
}

single_state!(Gru, Kind::Gru, "GRU");
single_state!(Rnn, Kind::RnnTanh, "RNN");

impl Rnn {
    /// The nonlinearity: `"tanh"` (the default) or `"relu"`.
    ///
    /// ```
    /// use lazyxla::nn::Rnn;
    /// let rnn = Rnn::new(2, 3, 1, 0).nonlinearity("relu");
    /// ```
    #[track_caller]
    pub fn nonlinearity(mut self, f: &str) -> Rnn {
        self.0.kind = match f {
            "tanh" => Kind::RnnTanh,
            "relu" => Kind::RnnRelu,
            other => panic!("Rnn: unknown nonlinearity {other:?}; expected \"tanh\" or \"relu\""),
        };
        self
    }
}
