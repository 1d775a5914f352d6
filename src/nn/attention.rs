//! Attention: [`scaled_dot_product_attention`] and [`MultiheadAttention`]
//! (PyTorch's semantics), composed from matmul, softmax and selects, so
//! they are differentiable and run on dynamic sequence lengths: the
//! softmax and the matmuls see only the real keys, never padding.

use std::sync::Arc;

use super::layers::{filled, uniform, Linear};
use super::{named, Module};
use crate::dtype::DType;
use crate::error::Error;
use crate::tensor::{SymInt, Tensor};

/// Attention of queries `q: [.., L, E]` over keys `k: [.., S, E]` and
/// values `v: [.., S, Ev]`: `softmax(q kᵀ / sqrt(E) + mask) v`, shape
/// `[.., L, Ev]`, as PyTorch's `F.scaled_dot_product_attention` (without
/// dropout). Leading dims broadcast, as in `matmul`.
///
/// `mask` broadcasts to `[.., L, S]`: a Bool mask says where a query may
/// attend (`true`), a float mask is added to the scores. `is_causal`
/// lets query `i` attend keys `j <= i` (the top-left aligned lower
/// triangle of `[L, S]`); it cannot be combined with `mask` (PyTorch
/// raises there too). A query whose every key a Bool or causal mask
/// hides gets zeros (PyTorch's math kernel gives NaN there); a float
/// mask of `-inf` everywhere in a row gives NaN, as in PyTorch.
///
/// `L`, `S` and the batch dims may be dynamic (`mark_dynamic`): one
/// program serves every length up to the bound.
///
/// Panics on a mask that is neither Bool nor float, or on operands whose
/// shapes do not fit (as `matmul` does).
///
/// ```
/// use lazyxla::{nn, Tensor};
/// let q = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
/// let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
/// let out = nn::scaled_dot_product_attention(&q, &q, &v, None, true);
/// let o = out.to_vec::<f32>().unwrap();
/// assert_eq!(&o[..2], &[1.0, 2.0]); // the first query sees only the first key
/// let w = 1.0 / (1.0 + (1.0f32 / 2f32.sqrt()).exp()); // its weight on key 0
/// assert!((o[2] - (w * 1.0 + (1.0 - w) * 3.0)).abs() < 1e-5);
/// ```
#[track_caller]
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    is_causal: bool,
) -> Tensor {
    const OP: &str = "scaled_dot_product_attention";
    for (name, t) in [("query", q), ("key", k), ("value", v)] {
        if t.rank() < 2 {
            panic!(
                "{}",
                Error::shape(
                    OP,
                    format!(
                        "the {name} must have at least 2 dims [.., seq, features], got {}",
                        t.shape_string()
                    )
                )
            );
        }
    }
    let mut masks = Masks::default();
    if let Some(m) = mask {
        if is_causal {
            panic!(
                "{}",
                Error::invalid(
                    OP,
                    "an explicit mask cannot be combined with is_causal = true; fold the causal condition into the mask"
                )
            );
        }
        masks.add(OP, m, false);
    }
    if is_causal {
        masks.keep = Some(causal(&q.size(-2), &k.size(-2)));
    }
    attend(q, k, v, &masks)
}

/// Which scores a query may use: a Bool `keep` mask and an additive float
/// `bias`, both broadcasting to the scores `[.., L, S]`.
#[derive(Default)]
struct Masks {
    keep: Option<Tensor>,
    bias: Option<Tensor>,
}

impl Masks {
    /// Folds in a user mask: Bool (`true` = attend, or `true` = ignore
    /// when `true_ignores`, as `nn.MultiheadAttention`'s masks) or float.
    #[track_caller]
    fn add(&mut self, op: &'static str, m: &Tensor, true_ignores: bool) {
        if m.dtype() == DType::Bool {
            let keep = if true_ignores {
                m.logical_not()
            } else {
                m.clone()
            };
            self.keep = Some(match self.keep.take() {
                Some(k) => k.logical_and(&keep),
                None => keep,
            });
        } else if m.dtype().is_float() {
            self.bias = Some(match self.bias.take() {
                Some(b) => &b + m,
                None => m.clone(),
            });
        } else {
            panic!(
                "{}",
                Error::dtype(
                    op,
                    format!(
                        "a mask must be Bool or float, got {}{}",
                        m.dtype(),
                        m.shape_string()
                    )
                )
            );
        }
    }
}

/// Key `j` visible to query `i` when `j <= i`: Bool `[l, s]`.
#[track_caller]
fn causal(l: &SymInt, s: &SymInt) -> Tensor {
    let rows = Tensor::arange_sym(l).unsqueeze(1);
    let cols = Tensor::arange_sym(s).unsqueeze(0);
    cols.le(&rows)
}

/// `softmax(q kᵀ / sqrt(E) + bias, masked) v`.
#[track_caller]
fn attend(q: &Tensor, k: &Tensor, v: &Tensor, masks: &Masks) -> Tensor {
    let raw = q.matmul(&k.transpose(-2, -1));
    let dt = raw.dtype();
    let e = q.shape_exprs()[q.rank() - 1].clone();
    let mut scores = match e.as_const() {
        Some(n) => raw * (1.0 / (n as f64).sqrt()),
        None => &raw * &q.size_value(e).to_dtype(dt).rsqrt(),
    };
    if let Some(b) = &masks.bias {
        scores = &scores + &b.to_dtype(dt);
    }
    let weights = match &masks.keep {
        None => scores.softmax(-1),
        Some(keep) => {
            let neg_inf = Tensor::scalar_op(f64::NEG_INFINITY, dt, scores.device());
            let zero = Tensor::scalar_op(0.0, dt, scores.device());
            // Rows with at least one visible key; the others get finite
            // scores (zeros) so that neither the softmax nor its gradient
            // sees a row of -inf (NaN would reach every key's gradient
            // through the matmul), and then zero weights.
            let any = if keep.rank() == 0 {
                keep.clone()
            } else {
                keep.max_dims(&[-1], true).gt_scalar(0.0)
            };
            let masked = any.where_cond(&keep.where_cond(&scores, &neg_inf), &zero);
            any.where_cond(&masked.softmax(-1), &zero)
        }
    };
    weights.matmul(v)
}

/// Multi-head attention (PyTorch's `nn.MultiheadAttention` with
/// `batch_first = true`): inputs `[B, T, E]`, `num_heads` heads of
/// `E / num_heads` features, no dropout.
///
/// Parameters, named as PyTorch's: `in_proj_weight: [3E, E]`
/// (xavier-uniform, the query, key and value projections stacked),
/// `in_proj_bias: [3E]` (zeros), and `out_proj` a [`Linear`] `E -> E`
/// (PyTorch's default Linear weight, bias zeros): `out_proj.weight`,
/// `out_proj.bias`.
///
/// [`forward_qkv`](MultiheadAttention::forward_qkv) takes query, key,
/// value and the optional masks; [`Module::forward`] is self-attention
/// (`forward_qkv(x, x, x, None, None)`).
///
/// ```
/// use lazyxla::nn::{Module, MultiheadAttention};
/// use lazyxla::Tensor;
/// let mha = MultiheadAttention::new(8, 2, 0);
/// let x = Tensor::randn(&[3, 5, 8], 1).mark_dynamic(1, 16);
/// let pad = Tensor::from_vec(vec![false; 15], &[3, 5]).unwrap().mark_dynamic_as(1, &x, 1);
/// let y = mha.forward_qkv(&x, &x, &x, Some(&pad), None);
/// assert_eq!(y.shape_string(), "[3, <=16, 8]");
/// let names: Vec<String> = mha.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
/// ```
#[derive(Debug)]
pub struct MultiheadAttention {
    /// `[3E, E]`: rows `0..E` project the query, `E..2E` the key,
    /// `2E..3E` the value.
    pub in_proj_weight: Tensor,
    /// `[3E]`.
    pub in_proj_bias: Tensor,
    /// The output projection `E -> E`.
    pub out_proj: Linear,
    embed_dim: usize,
    num_heads: usize,
}

impl MultiheadAttention {
    /// `num_heads` heads over `embed_dim` features; `seed` makes the
    /// initialisation reproducible. Panics unless `num_heads` is at least
    /// 1 and divides `embed_dim` (PyTorch asserts the same).
    ///
    /// ```
    /// use lazyxla::nn::{Module, MultiheadAttention};
    /// let mha = MultiheadAttention::new(8, 2, 0);
    /// let x = lazyxla::Tensor::randn(&[1, 5, 8], 1);
    /// assert_eq!(mha.forward(&x).concrete_shape().unwrap(), vec![1, 5, 8]);
    /// ```
    #[track_caller]
    pub fn new(embed_dim: usize, num_heads: usize, seed: u64) -> MultiheadAttention {
        if num_heads == 0 || !embed_dim.is_multiple_of(num_heads) {
            panic!(
                "{}",
                Error::invalid(
                    "MultiheadAttention",
                    format!("embed_dim {embed_dim} must be divisible by num_heads {num_heads} (at least 1)")
                )
            );
        }
        let e = embed_dim;
        // xavier_uniform: bound sqrt(6 / (fan_in + fan_out)) = sqrt(6 / 4E).
        let bound = (6.0 / (4 * e).max(1) as f64).sqrt();
        let mut out_proj = Linear::new(e, e, seed ^ 0x0a7e_0a7e);
        out_proj.bias = Some(filled(&[e], 0.0).requires_grad(true));
        MultiheadAttention {
            in_proj_weight: uniform(&[3 * e, e], -bound, bound, seed).requires_grad(true),
            in_proj_bias: filled(&[3 * e], 0.0).requires_grad(true),
            out_proj,
            embed_dim,
            num_heads,
        }
    }

    /// Attention of `query: [B, L, E]` over `key: [B, S, E]` and
    /// `value: [B, S, E]`, giving `[B, L, E]`.
    ///
    /// - `key_padding_mask: [B, S]`: Bool, `true` = ignore that key (as
    ///   PyTorch), or float, added to the scores.
    /// - `attn_mask: [L, S]` or `[B·num_heads, L, S]`: Bool, `true` =
    ///   not allowed to attend (as PyTorch's `nn.MultiheadAttention`,
    ///   the opposite of [`scaled_dot_product_attention`]'s Bool mask),
    ///   or float, added to the scores.
    ///
    /// A query left with no key gets zeros before the output projection
    /// (PyTorch gives NaN). `B`, `L` and `S` may be dynamic, but at most
    /// one of them per tensor (a reshape keeps one dynamic dim); a mask
    /// must then share the size (`mark_dynamic_as`). Panics unless the
    /// inputs are rank 3 with `E` features and the masks have those
    /// ranks.
    ///
    /// ```
    /// use lazyxla::nn::MultiheadAttention;
    /// use lazyxla::Tensor;
    /// let mha = MultiheadAttention::new(8, 2, 0);
    /// let q = Tensor::randn(&[1, 3, 8], 1);
    /// let kv = Tensor::randn(&[1, 5, 8], 2);
    /// // The last key is padding.
    /// let pad = Tensor::from_vec(vec![false, false, false, false, true], &[1, 5]).unwrap();
    /// let y = mha.forward_qkv(&q, &kv, &kv, Some(&pad), None);
    /// assert_eq!(y.concrete_shape().unwrap(), vec![1, 3, 8]);
    /// ```
    #[track_caller]
    pub fn forward_qkv(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        key_padding_mask: Option<&Tensor>,
        attn_mask: Option<&Tensor>,
    ) -> Tensor {
        const OP: &str = "MultiheadAttention";
        let e = self.embed_dim;
        for (name, t) in [("query", query), ("key", key), ("value", value)] {
            if t.rank() != 3 || t.size(2).as_static() != Some(e as i64) {
                panic!(
                    "{}",
                    Error::shape(
                        OP,
                        format!(
                            "the {name} must be [B, T, {e}] (batch first, embed_dim {e}), got {}",
                            t.shape_string()
                        )
                    )
                );
            }
        }
        let (b, l, s) = (query.size(0), query.size(1), key.size(1));
        let h = SymInt::from(self.num_heads);
        let d = SymInt::from(e / self.num_heads);
        // One projection of the stacked weight, then [B, T, H, D] -> [B, H, T, D].
        let project = |x: &Tensor, i: usize, t: &SymInt| {
            let w = self.in_proj_weight.narrow(0, i * e, e);
            let bias = self.in_proj_bias.narrow(0, i * e, e);
            (&x.matmul(&w.transpose(0, 1)) + &bias)
                .reshape_sym(&[b.clone(), t.clone(), h.clone(), d.clone()])
                .transpose(1, 2)
        };
        let self_attention =
            Arc::ptr_eq(&query.inner, &key.inner) && Arc::ptr_eq(&key.inner, &value.inner);
        let (q, k, v) = if self_attention {
            // One product with the whole stacked weight: one read of the
            // input and one weight gradient instead of three.
            let qkv = (&query.matmul(&self.in_proj_weight.transpose(0, 1)) + &self.in_proj_bias)
                .reshape_sym(&[b.clone(), l.clone(), SymInt::from(3), h.clone(), d.clone()])
                .permute(&[2, 0, 3, 1, 4]);
            let part = |i: usize| qkv.narrow(0, i, 1).squeeze(0);
            (part(0), part(1), part(2))
        } else {
            (
                project(query, 0, &l),
                project(key, 1, &s),
                project(value, 2, &s),
            )
        };
        let mut masks = Masks::default();
        if let Some(m) = key_padding_mask {
            if m.rank() != 2 {
                panic!(
                    "{}",
                    Error::shape(
                        OP,
                        format!("key_padding_mask must be [B, S], got {}", m.shape_string())
                    )
                );
            }
            masks.add(OP, &m.unsqueeze(1).unsqueeze(1), true);
        }
        if let Some(m) = attn_mask {
            let m = match m.rank() {
                2 => m.clone(),
                3 => m.reshape_sym(&[
                    m.size(0).div_floor(self.num_heads as i64),
                    h.clone(),
                    m.size(1),
                    m.size(2),
                ]),
                _ => panic!(
                    "{}",
                    Error::shape(
                        OP,
                        format!(
                            "attn_mask must be [L, S] or [B*num_heads, L, S], got {}",
                            m.shape_string()
                        )
                    )
                ),
            };
            masks.add(OP, &m, true);
        }
        let out = attend(&q, &k, &v, &masks)
            .transpose(1, 2)
            .reshape_sym(&[b, l, SymInt::from(e)]);
        self.out_proj.forward(&out)
    }
}

impl Module for MultiheadAttention {
    /// Self-attention: `forward_qkv(x, x, x, None, None)`.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.forward_qkv(x, x, x, None, None)
    }

    #[track_caller]
    fn own_parameters(&self) -> Vec<(String, Tensor)> {
        vec![
            named("in_proj_weight", &self.in_proj_weight),
            named("in_proj_bias", &self.in_proj_bias),
        ]
    }

    #[track_caller]
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![("out_proj".to_string(), &self.out_proj as &dyn Module)]
    }
}
