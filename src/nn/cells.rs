//! One step of a recurrent layer: the cells [`LstmCell`], [`GruCell`],
//! [`RnnCell`] (PyTorch's `nn.LSTMCell`, `nn.GRUCell`, `nn.RNNCell`) and
//! the step that the layers of `nn::recurrent` scan.

use super::recurrent::Weights;
use super::Module;
use crate::Tensor;

/// Which recurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Lstm,
    Gru,
    RnnTanh,
    RnnRelu,
}

impl Kind {
    /// The number of gates (rows of `weight_ih` per hidden unit).
    pub(super) fn gates(self) -> usize {
        match self {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::RnnTanh | Kind::RnnRelu => 1,
        }
    }

    /// The number of state tensors (`h`, and `c` for an LSTM).
    pub(super) fn states(self) -> usize {
        match self {
            Kind::Lstm => 2,
            Kind::Gru | Kind::RnnTanh | Kind::RnnRelu => 1,
        }
    }

    /// The user-facing name, for messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Lstm => "Lstm",
            Kind::Gru => "Gru",
            Kind::RnnTanh | Kind::RnnRelu => "Rnn",
        }
    }
}

/// One step: the new state from the input projection `gi = x W_ihᵀ +
/// b_ih`, the hidden projection `gh = h W_hhᵀ + b_hh` and the state (`h`,
/// and `c` for an LSTM), with PyTorch's gate orders (LSTM i, f, g, o; GRU
/// r, z, n).
#[track_caller]
pub(super) fn step(kind: Kind, gi: &Tensor, gh: &Tensor, state: &[Tensor]) -> Vec<Tensor> {
    match kind {
        Kind::Lstm => {
            let g = (gi + gh).chunk(4, -1);
            let (i, f) = (g[0].sigmoid(), g[1].sigmoid());
            let (c_in, o) = (g[2].tanh(), g[3].sigmoid());
            let c = &(&f * &state[1]) + &(&i * &c_in);
            let h = &o * &c.tanh();
            vec![h, c]
        }
        Kind::Gru => {
            let a = gi.chunk(3, -1);
            let b = gh.chunk(3, -1);
            let r = (&a[0] + &b[0]).sigmoid();
            let z = (&a[1] + &b[1]).sigmoid();
            let n = (&a[2] + &(&r * &b[2])).tanh();
            // (1 - z) n + z h
            vec![&n + &(&z * &(&state[0] - &n))]
        }
        Kind::RnnTanh => vec![(gi + gh).tanh()],
        Kind::RnnRelu => vec![(gi + gh).relu()],
    }
}

/// The new state of a cell from `x: [B, input]` (or `[input]`) and its
/// state (zeros when `None`).
#[track_caller]
fn cell(
    kind: Kind,
    w: &Weights,
    hidden: usize,
    x: &Tensor,
    state: Option<Vec<Tensor>>,
) -> Vec<Tensor> {
    let op = kind.name();
    let input = w.w_ih.upper_bounds()[1];
    let ok = x.dtype().is_float()
        && (x.rank() == 1 || x.rank() == 2)
        && x.size(-1).as_static() == Some(input as i64);
    if !ok {
        panic!(
            "{op}Cell: the input must be a float [B, {input}] or [{input}], got {}{}",
            x.dtype(),
            x.shape_string()
        );
    }
    let unbatched = x.rank() == 1;
    let x = if unbatched { x.unsqueeze(0) } else { x.clone() };
    let b = x.upper_bounds()[0];
    let state: Vec<Tensor> = match state {
        None => (0..kind.states())
            .map(|_| x.device().scoped(|| Tensor::zeros(&[b, hidden], x.dtype())))
            .collect(),
        Some(s) => s
            .into_iter()
            .map(|s| {
                let s = if unbatched { s.unsqueeze(0) } else { s };
                if s.shape_string() != format!("[{b}, {hidden}]") {
                    panic!(
                        "{op}Cell: a state must be [{b}, {hidden}] (as the input's batch), got {}",
                        s.shape_string()
                    );
                }
                s
            })
            .collect(),
    };
    let mut gi = x.matmul(&w.w_ih.transpose(0, 1));
    if let Some(bias) = &w.b_ih {
        gi = &gi + bias;
    }
    let mut gh = state[0].matmul(&w.w_hh.transpose(0, 1));
    if let Some(bias) = &w.b_hh {
        gh = &gh + bias;
    }
    let out = step(kind, &gi, &gh, &state);
    match unbatched {
        true => out.iter().map(|t| t.squeeze(0)).collect(),
        false => out,
    }
}

macro_rules! cell_type {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name {
            kind: Kind,
            hidden: usize,
            w: Weights,
        }

        impl Module for $name {
            /// The new hidden state from zeros.
            #[track_caller]
            fn forward(&self, x: &Tensor) -> Tensor {
                cell(self.kind, &self.w, self.hidden, x, None).swap_remove(0)
            }

            /// `[x]` or `[x, h]` (`[x, h, c]` for an LSTM cell) to the new
            /// state `[h]` (`[h, c]`).
            #[track_caller]
            fn forward_many(&self, inputs: &[Tensor]) -> Vec<Tensor> {
                let n = self.kind.states();
                if inputs.len() != 1 && inputs.len() != 1 + n {
                    panic!("{}Cell: forward_many takes the input alone or with its {n} states, {} were given", self.kind.name(), inputs.len());
                }
                let state = (inputs.len() > 1).then(|| inputs[1..].to_vec());
                cell(self.kind, &self.w, self.hidden, &inputs[0], state)
            }

            #[track_caller]
            fn own_parameters(&self) -> Vec<(String, Tensor)> {
                self.w.named("")
            }
        }
    };
}

cell_type!(
    LstmCell,
    "One LSTM step, as `torch.nn.LSTMCell`: parameters `weight_ih: [4 *
hidden, input]`, `weight_hh`, `bias_ih`, `bias_hh`, gates i, f, g, o.

```
use lazyxla::nn::{LstmCell, Module};
use lazyxla::{DType, Tensor};
let cell = LstmCell::new(3, 4, 0);
let (h, c) = cell.forward_with_state(&Tensor::ones(&[2, 3], DType::F32), None);
assert_eq!(h.shape_string(), \"[2, 4]\");
let (h, _) = cell.forward_with_state(&Tensor::ones(&[2, 3], DType::F32), Some((h, c)));
assert_eq!(cell.named_parameters()[0].0, \"weight_ih\");
```"
);
cell_type!(
    GruCell,
    "One GRU step, as `torch.nn.GRUCell` (gates r, z, n).

```
use lazyxla::nn::{GruCell, Module};
use lazyxla::{DType, Tensor};
let cell = GruCell::new(3, 4, 0);
let h = cell.forward_with_state(&Tensor::ones(&[2, 3], DType::F32), None);
assert_eq!(h.shape_string(), \"[2, 4]\");
```"
);
cell_type!(
    RnnCell,
    "One Elman RNN step, as `torch.nn.RNNCell` (tanh, or relu with
[`nonlinearity`](RnnCell::nonlinearity)).

```
use lazyxla::nn::{Module, RnnCell};
use lazyxla::{DType, Tensor};
let cell = RnnCell::new(3, 4, 0).nonlinearity(\"relu\");
let h = cell.forward(&Tensor::ones(&[3], DType::F32));
assert!(h.to_vec::<f32>().unwrap().iter().all(|&v| v >= 0.0));
```"
);

impl LstmCell {
    /// An LSTM cell from `input` to `hidden` features, initialised as
    /// PyTorch from `seed`.
    ///
    /// ```
    /// use lazyxla::nn::{LstmCell, Module};
    /// assert_eq!(LstmCell::new(3, 4, 0).parameters()[1].shape_string(), "[16, 4]");
    /// ```
    #[track_caller]
    pub fn new(input: usize, hidden: usize, seed: u64) -> LstmCell {
        LstmCell {
            kind: Kind::Lstm,
            hidden,
            w: Weights::new(Kind::Lstm, input, hidden, true, seed),
        }
    }

    /// The new `(h, c)` from `x` and the state (zeros when `None`).
    ///
    /// ```
    /// use lazyxla::nn::LstmCell;
    /// use lazyxla::{DType, Tensor};
    /// let (h, c) = LstmCell::new(2, 3, 0).forward_with_state(&Tensor::ones(&[2], DType::F32), None);
    /// assert_eq!((h.shape_string(), c.shape_string()), ("[3]".into(), "[3]".into()));
    /// ```
    #[track_caller]
    pub fn forward_with_state(
        &self,
        x: &Tensor,
        state: Option<(Tensor, Tensor)>,
    ) -> (Tensor, Tensor) {
        let mut out = cell(
            self.kind,
            &self.w,
            self.hidden,
            x,
            state.map(|(h, c)| vec![h, c]),
        );
        let c = out.pop().expect("c");
        (out.pop().expect("h"), c)
    }
}

macro_rules! single_cell {
    ($name:ident, $kind:expr) => {
        impl $name {
            /// A cell from `input` to `hidden` features, initialised as
            /// PyTorch from `seed`.
            ///
            /// ```
            /// use lazyxla::nn::{GruCell, Module};
            /// assert_eq!(GruCell::new(3, 4, 0).parameters()[0].shape_string(), "[12, 3]");
            /// ```
            #[track_caller]
            pub fn new(input: usize, hidden: usize, seed: u64) -> $name {
                $name {
                    kind: $kind,
                    hidden,
                    w: Weights::new($kind, input, hidden, true, seed),
                }
            }

            /// The new `h` from `x` and `h` (zeros when `None`).
            ///
            /// ```
            /// use lazyxla::nn::RnnCell;
            /// use lazyxla::{DType, Tensor};
            /// let cell = RnnCell::new(2, 3, 0);
            /// let h = cell.forward_with_state(&Tensor::ones(&[1, 2], DType::F32), None);
            /// let h = cell.forward_with_state(&Tensor::ones(&[1, 2], DType::F32), Some(h));
            /// assert_eq!(h.shape_string(), "[1, 3]");
            /// ```
            #[track_caller]
            pub fn forward_with_state(&self, x: &Tensor, state: Option<Tensor>) -> Tensor {
                cell(self.kind, &self.w, self.hidden, x, state.map(|h| vec![h])).swap_remove(0)
            }
        }
    };
}

single_cell!(GruCell, Kind::Gru);
single_cell!(RnnCell, Kind::RnnTanh);

impl RnnCell {
    /// The nonlinearity: `"tanh"` (the default) or `"relu"`.
    ///
    /// ```
    /// use lazyxla::nn::RnnCell;
    /// let cell = RnnCell::new(2, 3, 0).nonlinearity("tanh");
    /// ```
    #[track_caller]
    pub fn nonlinearity(mut self, f: &str) -> RnnCell {
        self.kind = match f {
            "tanh" => Kind::RnnTanh,
            "relu" => Kind::RnnRelu,
            other => {
                panic!("RnnCell: unknown nonlinearity {other:?}; expected \"tanh\" or \"relu\"")
            }
        };
        self
    }
}
