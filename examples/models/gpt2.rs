//! GPT-2 as Hugging Face's `GPT2LMHeadModel`, loaded from the directory
//! `save_pretrained` writes (`config.json`, `model.safetensors`), with a
//! key-value cache that grows by `cat`: shared by the `generate` example,
//! its tests and the generation benchmark.
//!
//! Ported as a PyTorch user would: token and position embeddings, pre-norm
//! blocks of causal self-attention and a `gelu_new` MLP, a final norm and
//! the head tied to the token embedding. GPT-2's `Conv1D` stores its
//! weight as `[in, out]`, so a projection is `x @ weight + bias`. Dropout
//! is off (inference, and the training benchmark, which trains a randomly
//! initialised GPT-2 small through [`Gpt2::logits`]).

use lazyxla::nn::{self, Embedding, LayerNorm, Module};
use lazyxla::{DType, Error, Result, SymInt, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// The fields of GPT-2's `config.json` the model needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub vocab_size: usize,
    pub n_positions: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    /// The MLP's width (`n_inner`, null for `4 * n_embd`).
    pub n_inner: usize,
    pub layer_norm_epsilon: f64,
}

fn invalid(message: String) -> Error {
    Error::InvalidArgument {
        op: "gpt2",
        message,
    }
}

impl Config {
    /// Parses `config.json`. Only `gelu_new` (GPT-2's activation) and
    /// standard attention are supported; anything else is an error naming
    /// the field.
    pub fn from_file(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
            op: "gpt2 config",
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Config::parse(&text).map_err(|m| invalid(format!("{}: {m}", path.display())))
    }

    /// [`Config::from_file`] of the file's text; the error says what is wrong.
    pub fn parse(text: &str) -> std::result::Result<Config, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let size = |key: &str| -> std::result::Result<usize, String> {
            match v.get(key).and_then(serde_json::Value::as_u64) {
                Some(n) if n > 0 => Ok(n as usize),
                Some(_) => Err(format!("\"{key}\" must be positive")),
                None => Err(format!("\"{key}\" is missing or not a positive integer")),
            }
        };
        let n_embd = size("n_embd")?;
        let n_head = size("n_head")?;
        if n_embd % n_head != 0 {
            return Err(format!(
                "n_embd {n_embd} is not a multiple of n_head {n_head}"
            ));
        }
        let n_inner = match v.get("n_inner") {
            None | Some(serde_json::Value::Null) => 4 * n_embd,
            Some(_) => size("n_inner")?,
        };
        let activation = v
            .get("activation_function")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("gelu_new");
        if activation != "gelu_new" {
            return Err(format!(
                "activation_function {activation:?} is not supported (GPT-2 uses \"gelu_new\")"
            ));
        }
        for flag in ["scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"] {
            if v.get(flag).and_then(serde_json::Value::as_bool) == Some(true) {
                return Err(format!("{flag} = true is not supported"));
            }
        }
        if v.get("scale_attn_weights")
            .and_then(serde_json::Value::as_bool)
            == Some(false)
        {
            return Err("scale_attn_weights = false is not supported".into());
        }
        let layer_norm_epsilon = match v.get("layer_norm_epsilon") {
            None => 1e-5,
            Some(e) => e
                .as_f64()
                .filter(|e| *e > 0.0)
                .ok_or("\"layer_norm_epsilon\" must be a positive number")?,
        };
        Ok(Config {
            vocab_size: size("vocab_size")?,
            n_positions: size("n_positions")?,
            n_embd,
            n_layer: size("n_layer")?,
            n_head,
            n_inner,
            layer_norm_epsilon,
        })
    }
}

impl Config {
    /// GPT-2 small (124M parameters), as `GPT2Config()`'s defaults.
    pub fn gpt2_small() -> Config {
        Config {
            vocab_size: 50257,
            n_positions: 1024,
            n_embd: 768,
            n_layer: 12,
            n_head: 12,
            n_inner: 3072,
            layer_norm_epsilon: 1e-5,
        }
    }

    /// Every tensor of the model by name (without the `transformer.`
    /// prefix) with its shape.
    pub fn tensor_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (e, inner) = (self.n_embd, self.n_inner);
        let mut v = vec![
            ("wte.weight".to_string(), vec![self.vocab_size, e]),
            ("wpe.weight".to_string(), vec![self.n_positions, e]),
        ];
        for i in 0..self.n_layer {
            let b = format!("h.{i}");
            for (name, shape) in [
                ("ln_1.weight", vec![e]),
                ("ln_1.bias", vec![e]),
                ("attn.c_attn.weight", vec![e, 3 * e]),
                ("attn.c_attn.bias", vec![3 * e]),
                ("attn.c_proj.weight", vec![e, e]),
                ("attn.c_proj.bias", vec![e]),
                ("ln_2.weight", vec![e]),
                ("ln_2.bias", vec![e]),
                ("mlp.c_fc.weight", vec![e, inner]),
                ("mlp.c_fc.bias", vec![inner]),
                ("mlp.c_proj.weight", vec![inner, e]),
                ("mlp.c_proj.bias", vec![e]),
            ] {
                v.push((format!("{b}.{name}"), shape));
            }
        }
        v.push(("ln_f.weight".to_string(), vec![e]));
        v.push(("ln_f.bias".to_string(), vec![e]));
        v
    }
}

/// GPT-2's `Conv1D`: `x @ weight + bias` with `weight: [in, out]`.
pub struct Conv1D {
    pub weight: Tensor,
    pub bias: Tensor,
}

impl Module for Conv1D {
    fn forward(&self, x: &Tensor) -> Tensor {
        &x.matmul(&self.weight) + &self.bias
    }

    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![
            ("weight".into(), self.weight.clone()),
            ("bias".into(), self.bias.clone()),
        ]
    }
}

struct Attention {
    c_attn: Conv1D,
    c_proj: Conv1D,
}

struct Mlp {
    c_fc: Conv1D,
    c_proj: Conv1D,
}

struct Block {
    ln_1: LayerNorm,
    attn: Attention,
    ln_2: LayerNorm,
    mlp: Mlp,
    n_head: usize,
}

/// Per layer, the keys and values of the positions seen so far, each
/// `[batch, heads, <=max_len, head_dim]`: the sequence dim grows by the
/// step's tokens every step (a `cat`), so it is dynamic.
pub struct KvCache {
    pub layers: Vec<(Tensor, Tensor)>,
}

impl KvCache {
    /// The positions the cache holds.
    pub fn len(&self) -> SymInt {
        self.layers[0].0.size(2)
    }
}

/// What one forward pass over the newest tokens gives.
pub struct Output {
    /// `[batch, vocab]`: the logits at the last position.
    pub logits: Tensor,
    /// The cache with the new tokens' keys and values appended.
    pub cache: KvCache,
}

/// A GPT-2 language model.
pub struct Gpt2 {
    pub config: Config,
    wte: Embedding,
    wpe: Embedding,
    h: Vec<Block>,
    ln_f: LayerNorm,
}

impl Gpt2 {
    /// Loads `dir/config.json` and `dir/model.safetensors` as written by
    /// `transformers`' `save_pretrained`. Names may carry the
    /// `transformer.` prefix of `GPT2LMHeadModel`'s state dict or not
    /// (`GPT2Model`'s); `lm_head.weight`, if present, must equal the tied
    /// `wte.weight` in shape; the causal-mask buffers older files carry
    /// (`attn.bias`, `attn.masked_bias`) are ignored. A missing tensor or
    /// one whose shape does not match the config is an error naming the
    /// tensor and both shapes.
    pub fn from_pretrained(dir: &Path) -> Result<Gpt2> {
        let config = Config::from_file(&dir.join("config.json"))?;
        let file = dir.join("model.safetensors");
        let mut named: HashMap<String, Tensor> = HashMap::new();
        for (name, t) in lazyxla::safetensors::load(&file)? {
            let name = name
                .strip_prefix("transformer.")
                .unwrap_or(&name)
                .to_string();
            named.insert(name, t);
        }
        Gpt2::from_tensors(config, named, &file.display().to_string())
    }

    /// A randomly initialised model, as `transformers` initialises one:
    /// weights N(0, 0.02), biases 0, layer norms 1 and 0.
    pub fn random(config: Config, seed: u64) -> Gpt2 {
        let named = config
            .tensor_shapes()
            .into_iter()
            .enumerate()
            .map(|(i, (name, shape))| {
                let t = if name.contains("ln_") && name.ends_with(".weight") {
                    Tensor::ones(&shape, DType::F32)
                } else if shape.len() == 1 {
                    Tensor::zeros(&shape, DType::F32)
                } else {
                    Tensor::randn(&shape, seed.wrapping_add(i as u64)) * 0.02
                };
                (name, t)
            })
            .collect();
        Gpt2::from_tensors(config, named, "Gpt2::random").expect("shapes from the config")
    }

    /// The model from its tensors by name (without the `transformer.`
    /// prefix); `source` names where they came from in errors.
    pub fn from_tensors(
        config: Config,
        mut named: HashMap<String, Tensor>,
        source: &str,
    ) -> Result<Gpt2> {
        let (e, v, p, inner) = (
            config.n_embd,
            config.vocab_size,
            config.n_positions,
            config.n_inner,
        );
        let mut take = |name: &str, shape: &[usize]| -> Result<Tensor> {
            // Parameters require grad, as every module's (`Module`).
            let t = named.remove(name).ok_or_else(|| {
                invalid(format!(
                    "{source} has no tensor {name:?} (expected {shape:?} for this config)"
                ))
            })?;
            let have = t.upper_bounds();
            if have != shape || t.is_dynamic() {
                return Err(invalid(format!(
                    "{source}: {name:?} has shape {have:?}, but the config (n_embd {e}, \
                     n_head {}, n_layer {}, vocab_size {v}, n_positions {p}) needs {shape:?}",
                    config.n_head, config.n_layer
                )));
            }
            if t.dtype() != DType::F32 {
                return Err(invalid(format!(
                    "{source}: {name:?} is {}; this port runs GPT-2 in F32",
                    t.dtype()
                )));
            }
            Ok(t.requires_grad(true))
        };
        let ln = |take: &mut dyn FnMut(&str, &[usize]) -> Result<Tensor>, name: &str| {
            Ok::<_, Error>(LayerNorm {
                weight: take(&format!("{name}.weight"), &[e])?,
                bias: take(&format!("{name}.bias"), &[e])?,
                eps: config.layer_norm_epsilon,
            })
        };
        let conv = |take: &mut dyn FnMut(&str, &[usize]) -> Result<Tensor>,
                    name: &str,
                    n_in: usize,
                    n_out: usize| {
            Ok::<_, Error>(Conv1D {
                weight: take(&format!("{name}.weight"), &[n_in, n_out])?,
                bias: take(&format!("{name}.bias"), &[n_out])?,
            })
        };
        let wte = Embedding {
            weight: take("wte.weight", &[v, e])?,
        };
        let wpe = Embedding {
            weight: take("wpe.weight", &[p, e])?,
        };
        let mut h = Vec::with_capacity(config.n_layer);
        for i in 0..config.n_layer {
            let b = format!("h.{i}");
            h.push(Block {
                ln_1: ln(&mut take, &format!("{b}.ln_1"))?,
                attn: Attention {
                    c_attn: conv(&mut take, &format!("{b}.attn.c_attn"), e, 3 * e)?,
                    c_proj: conv(&mut take, &format!("{b}.attn.c_proj"), e, e)?,
                },
                ln_2: ln(&mut take, &format!("{b}.ln_2"))?,
                mlp: Mlp {
                    c_fc: conv(&mut take, &format!("{b}.mlp.c_fc"), e, inner)?,
                    c_proj: conv(&mut take, &format!("{b}.mlp.c_proj"), inner, e)?,
                },
                n_head: config.n_head,
            });
        }
        let ln_f = ln(&mut take, "ln_f")?;
        if let Some(head) = named.remove("lm_head.weight") {
            if head.upper_bounds() != [v, e] {
                return Err(invalid(format!(
                    "{source}: \"lm_head.weight\" has shape {:?}; GPT-2 ties it to wte.weight [{v}, {e}]",
                    head.upper_bounds()
                )));
            }
        }
        let buffers = |n: &String| n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias");
        if let Some(extra) = named.keys().find(|n| !buffers(n)) {
            return Err(invalid(format!(
                "{source} has a tensor {extra:?} that GPT-2 does not have"
            )));
        }
        Ok(Gpt2 {
            config,
            wte,
            wpe,
            h,
            ln_f,
        })
    }

    /// Runs the model on the newest tokens `[batch, T]` (I64) after the
    /// positions in `cache` (none for a prompt), capping the cache at
    /// `max_len` positions (a longer sequence fails its step with a size
    /// check). `pad: [batch]` (I64), for a batch of prompts of different
    /// lengths left-padded to one length, is each row's number of padding
    /// positions: those are never attended and positions count from each
    /// row's first real token, as `generate` does with an attention mask.
    pub fn step(
        &self,
        tokens: &Tensor,
        pad: Option<&Tensor>,
        cache: Option<&KvCache>,
        max_len: usize,
    ) -> Output {
        let t = tokens.size(1);
        let (x, cache) = self.hidden(tokens, pad, cache, max_len);
        // The last position: every row's newest token (prompts are
        // padded on the left).
        let last = Tensor::scalar_sym(&(t - 1)).unsqueeze(0);
        let h = x.index_select(1, &last).squeeze(1);
        Output {
            logits: h.matmul(&self.wte.weight.transpose(0, 1)),
            cache,
        }
    }

    /// The logits at every position of `tokens: [batch, T]` (no cache):
    /// `[batch, T, vocab]`, what training computes its loss from. `T` may
    /// be dynamic (`mark_dynamic`): one program serves every length.
    pub fn logits(&self, tokens: &Tensor) -> Tensor {
        let bound = tokens.upper_bounds()[1];
        let (x, _) = self.hidden(tokens, None, None, bound);
        x.matmul(&self.wte.weight.transpose(0, 1))
    }

    /// The final norm's output for the newest tokens, `[batch, T, n_embd]`,
    /// and the cache with them appended (see [`Gpt2::step`]).
    fn hidden(
        &self,
        tokens: &Tensor,
        pad: Option<&Tensor>,
        cache: Option<&KvCache>,
        max_len: usize,
    ) -> (Tensor, KvCache) {
        let t = tokens.size(1);
        let past = cache.map_or(SymInt::from(0), KvCache::len);
        // Position of each new token: past + 0, 1, .., T - 1, counted
        // from each row's first real token.
        let mut positions = (Tensor::arange_sym(&t) + &Tensor::scalar_sym(&past)).unsqueeze(0);
        if let Some(pad) = pad {
            positions = (&positions - &pad.unsqueeze(1)).maximum(&Tensor::scalar(0i64));
        }
        let mut x = &self.wte.forward(tokens) + &self.wpe.forward(&positions);
        let mut layers = Vec::with_capacity(self.h.len());
        for (i, block) in self.h.iter().enumerate() {
            let past = cache.map(|c| &c.layers[i]);
            let kv;
            (x, kv) = block.step(&x, past, pad, max_len);
            layers.push(kv);
        }
        (self.ln_f.forward(&x), KvCache { layers })
    }
}

impl Block {
    /// The block on `x: [B, T, E]` after the layer's cached keys and
    /// values: its output and the layer's new keys and values.
    fn step(
        &self,
        x: &Tensor,
        past: Option<&(Tensor, Tensor)>,
        pad: Option<&Tensor>,
        max_len: usize,
    ) -> (Tensor, (Tensor, Tensor)) {
        let (a, kv) = self.attention(&self.ln_1.forward(x), past, pad, max_len);
        let x = x + &a;
        let m = self.mlp.c_fc.forward(&self.ln_2.forward(&x)).gelu_tanh();
        (&x + &self.mlp.c_proj.forward(&m), kv)
    }

    /// Causal self-attention of `x: [B, T, E]` over the cached positions
    /// and the new ones.
    fn attention(
        &self,
        x: &Tensor,
        past: Option<&(Tensor, Tensor)>,
        pad: Option<&Tensor>,
        max_len: usize,
    ) -> (Tensor, (Tensor, Tensor)) {
        let (b, t) = (x.size(0), x.size(1));
        let e = x.upper_bounds()[2];
        let d = e / self.n_head;
        let qkv = self.attn.c_attn.forward(x);
        let split = |k: usize| {
            qkv.narrow(2, k * e, e)
                .reshape_sym(&[b.clone(), t.clone(), self.n_head.into(), d.into()])
                .transpose(1, 2)
        };
        let (q, k, v) = (split(0), split(1), split(2));
        let (k, v) = match past {
            Some((pk, pv)) => (
                Tensor::cat(&[pk, &k], 2).with_bound(2, max_len),
                Tensor::cat(&[pv, &v], 2).with_bound(2, max_len),
            ),
            None => (k.with_bound(2, max_len), v.with_bound(2, max_len)),
        };
        let s = k.size(2);
        // Query i (at position past + i) sees keys j <= past + i, and no
        // padding key of its row.
        let mut keep = None;
        if past.is_none() && t.as_static() != Some(1) {
            let rows = Tensor::arange_sym(&t).unsqueeze(1);
            keep = Some(Tensor::arange_sym(&s).unsqueeze(0).le(&rows));
        }
        if let Some(pad) = pad {
            let real = Tensor::arange_sym(&s)
                .unsqueeze(0)
                .ge(&pad.unsqueeze(1))
                .unsqueeze(1)
                .unsqueeze(1);
            keep = Some(match keep {
                Some(c) => c.logical_and(&real),
                None => real,
            });
        }
        let a = nn::scaled_dot_product_attention(&q, &k, &v, keep.as_ref(), false);
        let a = a.transpose(1, 2).reshape_sym(&[b, t, e.into()]);
        (self.attn.c_proj.forward(&a), (k, v))
    }
}

impl Module for Gpt2 {
    /// The logits at the last position of `tokens: [batch, T]`, no cache.
    fn forward(&self, tokens: &Tensor) -> Tensor {
        self.step(tokens, None, None, self.config.n_positions)
            .logits
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        let mut c: Vec<(String, &dyn Module)> =
            vec![("wte".into(), &self.wte), ("wpe".into(), &self.wpe)];
        for (i, b) in self.h.iter().enumerate() {
            c.push((format!("h.{i}"), b));
        }
        c.push(("ln_f".into(), &self.ln_f));
        c
    }
}

impl Module for Block {
    /// The block on `x: [B, T, E]` with no cache.
    fn forward(&self, x: &Tensor) -> Tensor {
        let t = x.upper_bounds()[1];
        self.step(x, None, None, t).0
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("ln_1".into(), &self.ln_1),
            ("attn.c_attn".into(), &self.attn.c_attn),
            ("attn.c_proj".into(), &self.attn.c_proj),
            ("ln_2".into(), &self.ln_2),
            ("mlp.c_fc".into(), &self.mlp.c_fc),
            ("mlp.c_proj".into(), &self.mlp.c_proj),
        ]
    }
}

/// How [`generate`] picks each token: the most likely one (greedy), or
/// a draw from the softmax of the logits divided by `temperature`,
/// among the `top_k` most likely when given.
#[derive(Clone, Copy, Debug)]
pub enum Choice {
    Greedy,
    Sample {
        temperature: f64,
        top_k: Option<usize>,
        seed: u64,
    },
}

/// What [`generate`] produced and how it went.
pub struct Generated {
    /// The new tokens.
    pub tokens: Vec<i64>,
    /// Per new token, the logits it was chosen from (when asked for).
    pub logits: Vec<Vec<f32>>,
    /// From the prompt to the first new token on the host.
    pub prefill: std::time::Duration,
    /// The rest: every later token.
    pub decode: std::time::Duration,
    /// Per step (the prefill first), the bound of the sequence dim its
    /// program ran with.
    pub bounds: Vec<usize>,
}

/// Generates `new_tokens` tokens after `prompt`, one step per token: the
/// prompt's step (the prefill), then one step per token that feeds the
/// last token and the cache, which grows by one position. The sequence
/// may reach `max_len` positions (`prompt.len() + new_tokens <= max_len`).
/// `on_token` is told each new token as it is read.
pub fn generate(
    model: &Gpt2,
    prompt: &[i64],
    new_tokens: usize,
    max_len: usize,
    choice: Choice,
    keep_logits: bool,
    mut on_token: impl FnMut(i64),
) -> Result<Generated> {
    if prompt.is_empty() || prompt.len() + new_tokens > max_len {
        return Err(invalid(format!(
            "a prompt of {} tokens and {new_tokens} new tokens need 1 to {max_len} positions \
             (the bound); raise the bound or shorten them",
            prompt.len()
        )));
    }
    if let Some(&bad) = prompt
        .iter()
        .find(|&&t| t < 0 || t >= model.config.vocab_size as i64)
    {
        return Err(invalid(format!(
            "the prompt token {bad} is outside the vocabulary 0..{}",
            model.config.vocab_size
        )));
    }
    lazyxla::no_grad(|| {
        let mut rng = match choice {
            Choice::Sample { seed, .. } => seed,
            Choice::Greedy => 0,
        };
        let mut out = Generated {
            tokens: Vec::with_capacity(new_tokens),
            logits: Vec::new(),
            prefill: Default::default(),
            decode: Default::default(),
            bounds: Vec::new(),
        };
        let start = std::time::Instant::now();
        let tokens =
            Tensor::from_vec(prompt.to_vec(), &[1, prompt.len()])?.mark_dynamic(1, max_len);
        out.bounds.push(tokens.size(1).upper_bound() as usize);
        let mut cache: Option<KvCache> = None;
        let mut input = tokens;
        for i in 0..new_tokens {
            if i > 0 {
                out.bounds
                    .push(cache.as_ref().map_or(0, |c| c.len().upper_bound() as usize));
            }
            let step = model.step(&input, None, cache.as_ref(), max_len);
            cache = Some(step.cache);
            let next = match choice {
                Choice::Greedy => Some(step.logits.argmax(-1).unsqueeze(1)),
                Choice::Sample { .. } => None,
            };
            lazyxla::mark_step()?;
            let logits = match (keep_logits, &choice) {
                (false, Choice::Greedy) => None,
                _ => Some(step.logits.to_vec::<f32>()?),
            };
            let token = match (next, choice) {
                (Some(next), _) => {
                    let t = next.to_vec::<i64>()?[0];
                    input = next;
                    t
                }
                (
                    None,
                    Choice::Sample {
                        temperature, top_k, ..
                    },
                ) => {
                    let l = logits.as_ref().expect("read when sampling");
                    let t = sample(l, temperature, top_k, &mut rng);
                    input = Tensor::from_vec(vec![t], &[1, 1])?;
                    t
                }
                (None, Choice::Greedy) => unreachable!("greedy decoding reads its token"),
            };
            if keep_logits {
                out.logits.push(logits.expect("read when kept"));
            }
            out.tokens.push(token);
            on_token(token);
            if i == 0 {
                out.prefill = start.elapsed();
            }
        }
        out.decode = start.elapsed() - out.prefill;
        Ok(out)
    })
}

/// Greedy continuations of several prompts of different lengths at once:
/// the prompts left-padded to the longest, their padding masked, one
/// program for the prefill of every length up to `max_len`.
pub fn generate_batch(
    model: &Gpt2,
    prompts: &[Vec<i64>],
    new_tokens: usize,
    max_len: usize,
) -> Result<Vec<Vec<i64>>> {
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    if longest == 0 || prompts.iter().any(Vec::is_empty) || longest + new_tokens > max_len {
        return Err(invalid(format!(
            "prompts of 1 to {} tokens and {new_tokens} new tokens must fit {max_len} positions",
            max_len.saturating_sub(new_tokens)
        )));
    }
    let b = prompts.len();
    let mut ids = Vec::with_capacity(b * longest);
    let mut pads = Vec::with_capacity(b);
    for p in prompts {
        let pad = longest - p.len();
        ids.extend(std::iter::repeat_n(0, pad).chain(p.iter().copied()));
        pads.push(pad as i64);
    }
    lazyxla::no_grad(|| {
        let pad = Tensor::from_vec(pads, &[b])?;
        let mut input = Tensor::from_vec(ids, &[b, longest])?.mark_dynamic(1, max_len);
        let mut cache: Option<KvCache> = None;
        let mut out = vec![Vec::with_capacity(new_tokens); b];
        for _ in 0..new_tokens {
            let step = model.step(&input, Some(&pad), cache.as_ref(), max_len);
            cache = Some(step.cache);
            input = step.logits.argmax(-1).unsqueeze(1);
            lazyxla::mark_step()?;
            for (row, t) in out.iter_mut().zip(input.to_vec::<i64>()?) {
                row.push(t);
            }
        }
        Ok(out)
    })
}

/// A token drawn from `softmax(logits / temperature)`, among the `top_k`
/// largest logits when given (a SplitMix64 stream in `state`).
fn sample(logits: &[f32], temperature: f64, top_k: Option<usize>, state: &mut u64) -> i64 {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    order.truncate(top_k.unwrap_or(logits.len()).clamp(1, logits.len()));
    let top = logits[order[0]] as f64;
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| ((logits[i] as f64 - top) / temperature.max(1e-6)).exp())
        .collect();
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let mut u = (z >> 11) as f64 / (1u64 << 53) as f64 * weights.iter().sum::<f64>();
    for (&i, w) in order.iter().zip(&weights) {
        if u < *w {
            return i as i64;
        }
        u -= w;
    }
    order[order.len() - 1] as i64
}
