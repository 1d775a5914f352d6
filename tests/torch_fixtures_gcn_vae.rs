//! The GCN and VAE ports of `examples/models` against PyTorch
//! (`tests/fixtures/gen_gcn_vae.py`): the GCN's log-probabilities and
//! training loss with edges dropped by a given mask (lazyxla's dynamic
//! edge count against PyTorch's `edge_index[:, keep]`), the VAE's
//! reconstruction, `mu`, `logvar` and loss with the noise given (a static
//! and a dynamic batch), each with the gradients of every parameter by
//! PyTorch's names; and `select`, `unbind`. Both backends, within the
//! op cases' tolerance (observed: about 1e-6).

mod common;

#[path = "../examples/models/gcn.rs"]
mod gcn;
#[path = "../examples/models/vae.rs"]
mod vae;

use common::fixtures::{Case, Fixture};
use gcn::{Gcn, GraphSpec};
use lazyxla::nn::Module;
use lazyxla::{mark_step, Tensor};
use vae::{Vae, VaeConfig};

/// Sets `m`'s parameters to the case's, by PyTorch's names (each must be
/// stored), and gives them with their names.
fn load(m: &dyn Module, c: &Case) -> Vec<(String, Tensor)> {
    let named = m.named_parameters();
    for (name, p) in &named {
        p.assign(&c.tensor(name));
    }
    named
}

fn with_names<'a>(
    first: &[(&'a str, &'a Tensor)],
    named: &'a [(String, Tensor)],
) -> Vec<(&'a str, &'a Tensor)> {
    let mut all = first.to_vec();
    all.extend(named.iter().map(|(n, t)| (n.as_str(), t)));
    all
}

backend_test! {
    fn select_and_unbind_match_torch() {
        let fx = Fixture::load("gcn_vae");
        for c in fx.cases("select") {
            let x = c.input("x");
            let out = x.select(c.usize("dim"), c.int("index"));
            c.check_step(&[("out", &out)], &[("x", &x)]);
        }
        let c = fx.case("unbind.dim1");
        let x = c.input("x");
        let outs = x.unbind(c.usize("dim"));
        let roles: Vec<String> = (0..outs.len()).map(|i| format!("out.{i}")).collect();
        let named: Vec<(&str, &Tensor)> = roles.iter().map(String::as_str).zip(&outs).collect();
        c.check_step(&named, &[("x", &x)]);
        mark_step().unwrap();
    }
}

backend_test! {
    fn gcn_with_dropped_edges_matches_torch() {
        let fx = Fixture::load("gcn_vae");
        for c in fx.cases("gcn") {
            let spec = GraphSpec {
                nodes: c.usize("nodes"),
                features: c.usize("features"),
                classes: c.usize("classes"),
                edges: 0,
                words: 0,
            };
            let model = Gcn::new(spec, c.usize("hidden"), 0.0, 0.0);
            let named = load(&model, &c);
            let x = c.input("x");
            let edges = c.tensor("edge_index");
            let kept = gcn::kept_edges(&edges, &c.tensor("keep"));
            assert!(kept.size(1).is_dynamic());
            let out = model.forward_edges(&x, &kept);
            let loss = gcn::loss(&out, &c.tensor("train"), &c.tensor("labels"));
            c.check_step(&[("out", &out), ("loss", &loss)], &with_names(&[("x", &x)], &named));
            if c.tensor("keep").to_vec::<bool>().unwrap().iter().all(|&k| k) {
                // Every edge kept: the static edge list gives the same.
                c.check("out", &model.forward_edges(&x.detach(), &edges));
            }
            mark_step().unwrap();
        }
    }
}

backend_test! {
    fn vae_loss_and_gradients_match_torch_for_a_static_and_a_dynamic_batch() {
        let fx = Fixture::load("gcn_vae");
        let c = fx.case("vae.tiny");
        let cfg = VaeConfig {
            c1: c.usize("c1"),
            c2: c.usize("c2"),
            latent: c.usize("latent"),
        };
        for dynamic in [false, true] {
            let model = Vae::new(cfg, 0);
            let named = load(&model, &c);
            let (mut x, mut eps) = (c.tensor("x"), c.input("eps"));
            if dynamic {
                x = x.mark_dynamic(0, c.usize("batch") + 2);
                eps = eps.mark_dynamic_as(0, &x, 0).detach().requires_grad(true);
            }
            let (recon, mu, logvar) = model.forward_parts(&x, Some(&eps));
            assert_eq!(recon.is_dynamic(), dynamic);
            let loss = vae::loss(&recon, &x, &mu, &logvar);
            let outs = [("recon", &recon), ("mu", &mu), ("logvar", &logvar), ("loss", &loss)];
            c.check_step(&outs, &with_names(&[("eps", &eps)], &named));
            mark_step().unwrap();
        }
    }
}
