//! The recurrent layers and cells against PyTorch's (`nn.LSTM`, `nn.GRU`,
//! `nn.RNN`, their cells; `tests/fixtures/gen_recurrent.py`): outputs,
//! final states and the gradients of the input, the initial states and
//! every parameter (loaded by PyTorch's names), for one and two layers,
//! bidirectional, batch first, without biases, and packed sequences
//! (per-sequence lengths); and `nll_loss`, `binary_cross_entropy`,
//! `flatten_dims`. Both backends.

mod common;

use common::fixtures::{Case, Fixture, Tol};
use lazyxla::nn::{self, Gru, GruCell, Lstm, LstmCell, Module, Reduction, Rnn, RnnCell};
use lazyxla::{mark_step, Tensor};

/// Recurrences compound float32 rounding over the steps.
const TOL: Tol = Tol::Mixed(2e-5);

/// Loads the case's parameters into `m` by PyTorch's names (each must be
/// stored, and each stored one must be a parameter of `m`).
fn load(m: &dyn Module, c: &Case) -> Vec<(String, Tensor)> {
    let named = m.named_parameters();
    for (name, p) in &named {
        p.assign(&c.tensor(name));
    }
    named
}

/// Runs the layer case `c` on `m` and checks it.
fn check_layer(
    c: &Case,
    run: impl Fn(&Tensor, Option<&Tensor>, Option<Tensor>, Option<Tensor>) -> Vec<(String, Tensor)>,
    m: &dyn Module,
) {
    let named = load(m, c);
    let x = c.input("x");
    let h0 = c.maybe_input("h0");
    let c0 = c.maybe_input("c0");
    let lengths = c.has("lengths").then(|| c.tensor("lengths"));
    let outs = run(&x, lengths.as_ref(), h0.clone(), c0.clone());
    let outs_ref: Vec<(&str, &Tensor)> = outs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut inputs: Vec<(&str, &Tensor)> = vec![("x", &x)];
    inputs.extend(h0.iter().map(|t| ("h0", t)));
    inputs.extend(c0.iter().map(|t| ("c0", t)));
    inputs.extend(named.iter().map(|(n, t)| (n.as_str(), t)));
    c.check_step(&outs_ref, &inputs);
}

fn layer_settings<M>(
    c: &Case,
    m: M,
    bidir: fn(M, bool) -> M,
    bf: fn(M, bool) -> M,
    bias: fn(M, bool) -> M,
) -> M {
    bias(
        bf(bidir(m, c.flag("bidirectional")), c.flag("batch_first")),
        c.flag("bias"),
    )
}

backend_test! {
    fn lstm_layers_match_torch() {
        let fx = Fixture::load("recurrent");
        for c in fx.cases("lstm") {
            let c = c.with_tol(TOL);
            let m = Lstm::new(c.usize("input"), c.usize("hidden"), c.usize("layers"), 0);
            let m = layer_settings(&c, m, Lstm::bidirectional, Lstm::batch_first, Lstm::bias);
            check_layer(&c, |x, lengths, h0, c0| {
                let state = h0.zip(c0);
                let (out, (h, cn)) = match lengths {
                    Some(l) => m.forward_with_lengths(x, l, state),
                    None => m.forward_with_state(x, state),
                };
                vec![("out".into(), out), ("h".into(), h), ("c".into(), cn)]
            }, &m);
            mark_step().unwrap();
        }
    }
}

backend_test! {
    fn gru_layers_match_torch() {
        let fx = Fixture::load("recurrent");
        for c in fx.cases("gru") {
            let c = c.with_tol(TOL);
            let m = Gru::new(c.usize("input"), c.usize("hidden"), c.usize("layers"), 0);
            let m = layer_settings(&c, m, Gru::bidirectional, Gru::batch_first, Gru::bias);
            check_layer(&c, |x, lengths, h0, _| {
                let (out, h) = match lengths {
                    Some(l) => m.forward_with_lengths(x, l, h0),
                    None => m.forward_with_state(x, h0),
                };
                vec![("out".into(), out), ("h".into(), h)]
            }, &m);
            mark_step().unwrap();
        }
    }
}

backend_test! {
    fn rnn_layers_match_torch() {
        let fx = Fixture::load("recurrent");
        for c in fx.cases("rnn") {
            let c = c.with_tol(TOL);
            let m = Rnn::new(c.usize("input"), c.usize("hidden"), c.usize("layers"), 0)
                .nonlinearity(c.text("nonlinearity"));
            let m = layer_settings(&c, m, Rnn::bidirectional, Rnn::batch_first, Rnn::bias);
            check_layer(&c, |x, lengths, h0, _| {
                let (out, h) = match lengths {
                    Some(l) => m.forward_with_lengths(x, l, h0),
                    None => m.forward_with_state(x, h0),
                };
                vec![("out".into(), out), ("h".into(), h)]
            }, &m);
            mark_step().unwrap();
        }
    }
}

backend_test! {
    fn cells_match_torch() {
        let fx = Fixture::load("recurrent");
        for c in fx.cases("lstm_cell") {
            let c = c.with_tol(TOL);
            let m = LstmCell::new(c.usize("input"), c.usize("hidden"), 0);
            check_layer(&c, |x, _, h0, c0| {
                let (h, cn) = m.forward_with_state(x, h0.zip(c0));
                vec![("h".into(), h), ("c".into(), cn)]
            }, &m);
        }
        for c in fx.cases("gru_cell") {
            let c = c.with_tol(TOL);
            let m = GruCell::new(c.usize("input"), c.usize("hidden"), 0);
            check_layer(&c, |x, _, h0, _| vec![("h".into(), m.forward_with_state(x, h0))], &m);
        }
        for c in fx.cases("rnn_cell") {
            let c = c.with_tol(TOL);
            let m = RnnCell::new(c.usize("input"), c.usize("hidden"), 0)
                .nonlinearity(c.text("nonlinearity"));
            check_layer(&c, |x, _, h0, _| vec![("h".into(), m.forward_with_state(x, h0))], &m);
        }
    }
}

backend_test! {
    fn the_layers_take_several_inputs_through_forward_many() {
        let fx = Fixture::load("recurrent");
        let c = fx.case("lstm.two_layers_state").with_tol(TOL);
        let m = Lstm::new(3, 5, 2, 0);
        load(&m, &c);
        let outs = m.forward_many(&[c.tensor("x"), c.tensor("h0"), c.tensor("c0")]);
        assert_eq!(outs.len(), 3);
        c.check("out", &outs[0]);
        c.check("h", &outs[1]);
        c.check("c", &outs[2]);
    }
}

fn reduction(c: &Case) -> Reduction {
    match c.text("reduction") {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        _ => Reduction::None,
    }
}

backend_test! {
    fn losses_and_flatten_match_torch() {
        let fx = Fixture::load("recurrent");
        for c in fx.cases("nll_loss") {
            let (lp, t) = (c.input("lp"), c.tensor("target"));
            let out = nn::nll_loss(&lp, &t, reduction(&c));
            c.check_step(&[("out", &out)], &[("lp", &lp)]);
        }
        for c in fx.cases("binary_cross_entropy") {
            let (p, t) = (c.input("p"), c.tensor("t"));
            let out = nn::binary_cross_entropy(&p, &t, reduction(&c));
            c.check_step(&[("out", &out)], &[("p", &p)]);
        }
        let c = fx.case("flatten.middle");
        let x = c.input("x");
        let out = x.flatten_dims(c.usize("start"), c.usize("end"));
        c.check_step(&[("out", &out)], &[("x", &x)]);
    }
}
