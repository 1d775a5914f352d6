//! Reads the PyTorch fixtures that `tests/fixtures/gen.py` writes (layout in
//! `tests/fixtures/README.md`) and compares lazyxla tensors with them.
//!
//! A fixture file holds the cases of one op family. A case's tensors are
//! named `<case>/<role>`: its inputs (`x`, `weight`), its outputs (`out`,
//! `values`, `out.0`), `g.<output>` (a fixed random upstream gradient) and
//! `grad.<input>` (PyTorch's gradient of `sum(out * g.out)`, summed over the
//! outputs). The file's metadata maps each case name to its other
//! arguments, `key=value` words (`stride=2,1 groups=1`).
//!
//! ```ignore
//! let fx = Fixture::load("conv");
//! for c in fx.cases("conv1d") {
//!     let (x, w) = (c.input("x"), c.input("weight"));
//!     let out = x.conv1d(&w, None, c.usize("stride"), 0, 1, 1);
//!     c.check_step(&[("out", &out)], &[("x", &x), ("weight", &w)]);
//! }
//! ```

use lazyxla::Tensor;
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;

/// How close a float value must be to PyTorch's.
#[derive(Clone, Copy, Debug)]
pub enum Tol {
    /// `|got - want| <= tol * (1 + |want|)`: absolute near zero, relative
    /// for large values (values of order 1, as the op cases have).
    Mixed(f32),
    /// `|got - want| <= tol * max |want|` over the tensor: relative to the
    /// tensor's own scale (gradients of 1e-2 are held to 1e-2 * tol, not
    /// to an absolute tol).
    Scaled(f32),
}

/// The op cases' tolerance. PyTorch's values are computed in float64, so
/// this bounds lazyxla's float32 rounding (observed: about 1e-6 at most).
pub const TOL: Tol = Tol::Mixed(1e-5);

/// A stored tensor's elements.
#[derive(Clone, Debug)]
pub enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// A stored tensor.
#[derive(Clone, Debug)]
pub struct Entry {
    pub shape: Vec<usize>,
    pub data: Data,
}

impl Entry {
    /// A lazyxla tensor holding these values (F32, I64 or Bool).
    pub fn tensor(&self) -> Tensor {
        match &self.data {
            Data::F32(v) => Tensor::from_vec(v.clone(), &self.shape),
            Data::I64(v) => Tensor::from_vec(v.clone(), &self.shape),
            Data::Bool(v) => Tensor::from_vec(v.clone(), &self.shape),
        }
        .expect("a stored tensor's length matches its shape")
    }

    /// The float values (panics for another dtype).
    pub fn f32(&self) -> &[f32] {
        match &self.data {
            Data::F32(v) => v,
            d => panic!("expected F32 data, got {d:?}"),
        }
    }
}

/// One fixture file: `tests/fixtures/<name>.safetensors`.
pub struct Fixture {
    pub name: String,
    tensors: BTreeMap<String, Entry>,
    meta: BTreeMap<String, String>,
}

impl Fixture {
    /// Reads `tests/fixtures/<name>.safetensors`.
    pub fn load(name: &str) -> Fixture {
        let path = format!(
            "{}/tests/fixtures/{name}.safetensors",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let (_, header) = SafeTensors::read_metadata(&bytes)
            .unwrap_or_else(|e| panic!("{path}: not a safetensors file: {e}"));
        let meta = header
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let file = SafeTensors::deserialize(&bytes).expect("header already read");
        let mut tensors = BTreeMap::new();
        for (key, view) in file.tensors() {
            let raw = view.data();
            let data = match view.dtype() {
                Dtype::F32 => Data::F32(
                    raw.chunks_exact(4)
                        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                        .collect(),
                ),
                Dtype::I64 => Data::I64(
                    raw.chunks_exact(8)
                        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                        .collect(),
                ),
                Dtype::BOOL => Data::Bool(raw.iter().map(|&b| b != 0).collect()),
                d => panic!("{path}: tensor {key} has dtype {d:?}; fixtures use F32, I64, BOOL"),
            };
            let shape = view.shape().to_vec();
            tensors.insert(key, Entry { shape, data });
        }
        Fixture {
            name: name.to_string(),
            tensors,
            meta,
        }
    }

    /// The cases named `<op>.<variant>`, in name order (at least one).
    pub fn cases(&self, op: &str) -> Vec<Case<'_>> {
        let prefix = format!("{op}.");
        let cases: Vec<Case> = self
            .meta
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .map(|k| self.case(k))
            .collect();
        assert!(
            !cases.is_empty(),
            "fixture {} has no case of {op}",
            self.name
        );
        cases
    }

    /// The case `name` (panics when there is none).
    pub fn case(&self, name: &str) -> Case<'_> {
        let words = self
            .meta
            .get(name)
            .unwrap_or_else(|| panic!("fixture {} has no case {name}", self.name));
        let params = words
            .split_whitespace()
            .map(|w| {
                let (k, v) = w
                    .split_once('=')
                    .unwrap_or_else(|| panic!("case {name}: bad metadata word {w:?}"));
                (k.to_string(), v.to_string())
            })
            .collect();
        Case {
            fx: self,
            name: name.to_string(),
            params,
            tol: TOL,
        }
    }

    /// A metadata value of the file.
    pub fn meta(&self, key: &str) -> &str {
        self.meta
            .get(key)
            .unwrap_or_else(|| panic!("fixture {} has no metadata {key}", self.name))
    }

    /// Whether the file holds tensor `key`.
    pub fn has(&self, key: &str) -> bool {
        self.tensors.contains_key(key)
    }

    /// The stored tensor `key`.
    pub fn entry(&self, key: &str) -> &Entry {
        self.tensors
            .get(key)
            .unwrap_or_else(|| panic!("fixture {} has no tensor {key}", self.name))
    }

    /// The stored tensor `key` as a lazyxla tensor.
    pub fn tensor(&self, key: &str) -> Tensor {
        self.entry(key).tensor()
    }

    /// The names after `prefix` of the tensors whose names start with it
    /// (`names_under("grad/")` lists the parameter names).
    pub fn names_under(&self, prefix: &str) -> Vec<String> {
        self.tensors
            .keys()
            .filter_map(|k| k.strip_prefix(prefix).map(str::to_string))
            .collect()
    }

    /// Asserts that `got` has tensor `key`'s shape and values: within
    /// `tol` for floats (NaN matches NaN, infinities match exactly),
    /// exactly for integers and bools.
    pub fn check(&self, key: &str, got: &Tensor, tol: Tol) {
        let want = self.entry(key);
        let shape = got
            .concrete_shape()
            .unwrap_or_else(|e| panic!("{}: {key}: reading the shape failed: {e}", self.name));
        assert_eq!(shape, want.shape, "{}: {key}: shape", self.name);
        match &want.data {
            Data::F32(w) => {
                let g = got
                    .to_vec::<f32>()
                    .unwrap_or_else(|e| panic!("{}: {key}: reading failed: {e}", self.name));
                assert_values_close(&format!("{}: {key}", self.name), &g, w, tol);
            }
            Data::I64(w) => {
                let g = got
                    .to_vec::<i64>()
                    .unwrap_or_else(|e| panic!("{}: {key}: reading failed: {e}", self.name));
                assert_eq!(&g, w, "{}: {key}", self.name);
            }
            Data::Bool(w) => {
                let g = got
                    .to_vec::<bool>()
                    .unwrap_or_else(|e| panic!("{}: {key}: reading failed: {e}", self.name));
                assert_eq!(&g, w, "{}: {key}", self.name);
            }
        }
    }
}

/// Asserts `got` is within `tol` of `want` elementwise, naming the first
/// element that is off and the largest error.
pub fn assert_values_close(what: &str, got: &[f32], want: &[f32], tol: Tol) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want
        .iter()
        .filter(|w| w.is_finite())
        .fold(0.0f32, |m, w| m.max(w.abs()));
    // The error of one element, in units of the tolerance's denominator.
    let off = |g: f32, w: f32| {
        if g.is_nan() || w.is_nan() {
            if g.is_nan() && w.is_nan() {
                0.0
            } else {
                f32::INFINITY
            }
        } else if g == w {
            0.0 // equal infinities
        } else {
            match tol {
                Tol::Mixed(_) => (g - w).abs() / (1.0 + w.abs()),
                Tol::Scaled(_) => (g - w).abs() / scale.max(f32::MIN_POSITIVE),
            }
        }
    };
    let (limit, bound) = match tol {
        Tol::Mixed(t) => (t, "(1 + |want|)".to_string()),
        Tol::Scaled(t) => (t, format!("max |want| = {scale:e}")),
    };
    let worst = (0..got.len())
        .map(|i| (i, off(got[i], want[i])))
        .fold((0, 0.0f32), |a, b| if b.1 > a.1 { b } else { a });
    if worst.1 > limit {
        let first = (0..got.len())
            .find(|&i| off(got[i], want[i]) > limit)
            .unwrap();
        panic!(
            "{what}: element {first}: got {}, want {} (largest error {:.3e} at element {}: got {}, want {}; tolerance {limit:e} * {bound})",
            got[first], want[first], worst.1, worst.0, got[worst.0], want[worst.0]
        );
    }
}

/// One case of a fixture: its tensors by role and its arguments.
pub struct Case<'a> {
    pub fx: &'a Fixture,
    pub name: String,
    params: BTreeMap<String, String>,
    tol: Tol,
}

impl Case<'_> {
    /// The same case compared within `tol` instead of [`TOL`].
    pub fn with_tol(mut self, tol: Tol) -> Self {
        self.tol = tol;
        self
    }

    fn key(&self, role: &str) -> String {
        format!("{}/{role}", self.name)
    }

    /// Whether the case has a tensor in `role`.
    pub fn has(&self, role: &str) -> bool {
        self.fx.has(&self.key(role))
    }

    /// The stored tensor in `role`.
    pub fn entry(&self, role: &str) -> &Entry {
        self.fx.entry(&self.key(role))
    }

    /// The tensor in `role` (never requires grad).
    pub fn tensor(&self, role: &str) -> Tensor {
        self.fx.tensor(&self.key(role))
    }

    /// The input in `role`, requiring grad when the case has its gradient.
    pub fn input(&self, role: &str) -> Tensor {
        let t = self.tensor(role);
        if self.has(&format!("grad.{role}")) {
            t.requires_grad(true)
        } else {
            t
        }
    }

    /// [`input`](Case::input) when the case has `role` (an optional bias).
    pub fn maybe_input(&self, role: &str) -> Option<Tensor> {
        self.has(role).then(|| self.input(role))
    }

    fn param(&self, key: &str) -> &str {
        self.params
            .get(key)
            .unwrap_or_else(|| panic!("case {} has no argument {key}", self.name))
    }

    /// A word argument (`reduction=mean` gives `"mean"`).
    pub fn text(&self, key: &str) -> &str {
        self.param(key)
    }

    /// Integer arguments (`stride=2,1` gives `[2, 1]`).
    pub fn ints(&self, key: &str) -> Vec<i64> {
        self.param(key)
            .split(',')
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|e| panic!("case {}: {key}={v}: {e}", self.name))
            })
            .collect()
    }

    /// One integer argument.
    pub fn int(&self, key: &str) -> i64 {
        match self.ints(key)[..] {
            [v] => v,
            ref v => panic!("case {}: {key} is {v:?}, not one integer", self.name),
        }
    }

    /// One non-negative integer argument.
    pub fn usize(&self, key: &str) -> usize {
        usize::try_from(self.int(key)).expect("a non-negative argument")
    }

    /// A pair of non-negative integers (`padding=1,0`).
    pub fn pair(&self, key: &str) -> (usize, usize) {
        match self.ints(key)[..] {
            [a, b] => (a as usize, b as usize),
            ref v => panic!("case {}: {key} is {v:?}, not a pair", self.name),
        }
    }

    /// A list of non-negative integers.
    pub fn usizes(&self, key: &str) -> Vec<usize> {
        self.ints(key).into_iter().map(|v| v as usize).collect()
    }

    /// A float argument.
    pub fn f64(&self, key: &str) -> f64 {
        let v = self.param(key);
        v.parse()
            .unwrap_or_else(|e| panic!("case {}: {key}={v}: {e}", self.name))
    }

    /// A flag argument (`true` or `false`).
    pub fn flag(&self, key: &str) -> bool {
        match self.param(key) {
            "true" => true,
            "false" => false,
            v => panic!("case {}: {key}={v} is not a flag", self.name),
        }
    }

    /// Asserts `got` equals the tensor in `role`.
    pub fn check(&self, role: &str, got: &Tensor) {
        self.fx.check(&self.key(role), got, self.tol);
    }

    /// Checks a forward and backward pass: each of `outputs` against the
    /// stored one, and the gradients of `sum(out * g.out)` (over the
    /// outputs that have a `g.`) for each of `inputs` against the stored
    /// `grad.`. Every stored `g.` and `grad.` must be used, so that a test
    /// cannot silently skip an output or a gradient. The backward pass is
    /// recorded before any value is read (a read output keeps no graph).
    pub fn check_step(&self, outputs: &[(&str, &Tensor)], inputs: &[(&str, &Tensor)]) {
        let stored = |prefix: &str| self.fx.names_under(&format!("{}/{prefix}", self.name));
        let mut loss: Option<Tensor> = None;
        for role in stored("g.") {
            let out = outputs
                .iter()
                .find(|(r, _)| *r == role)
                .unwrap_or_else(|| {
                    panic!("case {}: the test does not check output {role}", self.name)
                })
                .1;
            let term = (out * &self.tensor(&format!("g.{role}"))).sum();
            loss = Some(match loss {
                Some(l) => &l + &term,
                None => term,
            });
        }
        let grads = stored("grad.");
        match &loss {
            Some(loss) => loss.backward(),
            None => assert!(grads.is_empty(), "case {}: gradients without g", self.name),
        }
        for (role, t) in outputs {
            self.check(role, t);
        }
        for role in grads {
            let t = inputs
                .iter()
                .find(|(r, _)| *r == role)
                .unwrap_or_else(|| {
                    panic!(
                        "case {}: the test does not check the gradient of {role}",
                        self.name
                    )
                })
                .1;
            let g = t
                .grad()
                .unwrap_or_else(|| panic!("case {}: {role} got no gradient", self.name));
            self.check(&format!("grad.{role}"), &g);
        }
    }
}
