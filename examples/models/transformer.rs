//! A one-block pre-norm transformer (token embedding, multi-head
//! self-attention with a key padding mask, GELU MLP, a token head) over
//! `[B, <=T]` tokens, shared by `train_transformer` and the model
//! benchmark.

use lazyxla::nn::{Embedding, LayerNorm, Linear, Module, MultiheadAttention};
use lazyxla::{DType, Tensor};

pub struct TinyTransformer {
    embed: Embedding,
    ln1: LayerNorm,
    attn: MultiheadAttention,
    ln2: LayerNorm,
    ff1: Linear,
    ff2: Linear,
    head: Linear,
}

impl TinyTransformer {
    pub fn new(vocab: usize, embed: usize, heads: usize, ffn: usize, seed: u64) -> TinyTransformer {
        TinyTransformer {
            embed: Embedding::new(vocab, embed, seed),
            ln1: LayerNorm::new(embed),
            attn: MultiheadAttention::new(embed, heads, seed + 1),
            ln2: LayerNorm::new(embed),
            ff1: Linear::new(embed, ffn, seed + 2),
            ff2: Linear::new(ffn, embed, seed + 3),
            head: Linear::new(embed, vocab, seed + 4),
        }
    }

    /// Logits `[B, T, vocab]` for I64 `tokens: [B, T]`; `padding: [B, T]`
    /// Bool, `true` where a row has no token (those keys are ignored).
    pub fn logits(&self, tokens: &Tensor, padding: Option<&Tensor>) -> Tensor {
        let h = self.embed.forward(tokens);
        let x = self.ln1.forward(&h);
        let h = &h + &self.attn.forward_qkv(&x, &x, &x, padding, None);
        let x = self.ln2.forward(&h);
        let h = &h + &self.ff2.forward(&self.ff1.forward(&x).gelu());
        self.head.forward(&h)
    }
}

impl Module for TinyTransformer {
    fn forward(&self, tokens: &Tensor) -> Tensor {
        self.logits(tokens, None)
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("embed".into(), &self.embed),
            ("ln1".into(), &self.ln1),
            ("attn".into(), &self.attn),
            ("ln2".into(), &self.ln2),
            ("ff1".into(), &self.ff1),
            ("ff2".into(), &self.ff2),
            ("head".into(), &self.head),
        ]
    }
}

/// The mean cross-entropy of `logits: [B, T, V]` against `targets:
/// [B, T]` over the positions where `valid: [B, T]` (Bool) holds.
pub fn masked_cross_entropy(logits: &Tensor, targets: &Tensor, valid: &Tensor) -> Tensor {
    let nll = logits
        .log_softmax(2)
        .gather(2, &targets.unsqueeze(2))
        .squeeze(2)
        .neg();
    let w = valid.to_dtype(DType::F32);
    (&nll * &w).sum() / w.sum()
}
