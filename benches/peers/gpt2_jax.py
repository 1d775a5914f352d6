"""GPT-2 greedy decoding in JAX on the CPU, written as a JAX user would: the
JAX side of the GPT-2 decoding benchmark (gpt2_hf.py is PyTorch's).

Usage: python gpt2_jax.py MODEL_DIR [--prompt-len 128] [--new 128]
                          [--max-len 256] [--rounds 3]
(with benches/peers/python.sh's Python; MODEL_DIR from gpt2_make.py).
Prints one line

    RESULT gpt2 jax prefill_ms=<f> ms_per_token=<f> total_ms=<f> compile_ms=<f> cpu_ms_per_token=<f>

The weights come from MODEL_DIR/model.safetensors (read with numpy); the
KV cache is static, `[layers, batch, heads, max_len, head_dim]` for keys
and for values, written with `lax.dynamic_update_slice`, and attention
runs over all max_len positions with the unwritten ones masked. The tied
LM head is transposed once at load. Two
`jax.jit` functions, each compiled once: the prefill (the prompt at
positions 0..P-1, the first token) and the decode step (one token at
position t, a traced int32 scalar); both take the cache donated and
return the argmax token, which feeds the next step on the device. The
prompt's token i is (1000 + 7919 * i) % vocab_size, as in gpt2_hf.py.

prefill_ms: the prefill call; total_ms: prefill and NEW - 1 decode steps,
the tokens read back at the end; ms_per_token: (total_ms - prefill_ms) /
(NEW - 1). Medians over the rounds, after a warm-up (two tokens, which
compiles both functions, then all NEW). compile_ms: XLA's compile time
(JAX's backend-compile events) in the first prefill and decode calls. XLA's CPU client has no thread-count setting
(XLA_FLAGS has none; `intra_op_parallelism_threads` is TensorFlow's): its
pool has one thread per schedulable core, 2 on the benchmark machine. The
first 32 generated tokens go to stderr, to compare with gpt2_hf.py.
"""

import argparse
import json
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from safetensors.numpy import load_file

jax.config.update("jax_platforms", "cpu")

_compile_s = [0.0]


def _on_duration(event, duration, *args, **kwargs):
    if "backend_compile" in event:
        _compile_s[0] += duration


jax.monitoring.register_event_duration_secs_listener(_on_duration)

ap = argparse.ArgumentParser()
ap.add_argument("model_dir")
ap.add_argument("--prompt-len", type=int, default=128)
ap.add_argument("--new", type=int, default=128)
ap.add_argument("--max-len", type=int, default=256)
ap.add_argument("--rounds", type=int, default=3)
args = ap.parse_args()

with open(os.path.join(args.model_dir, "config.json")) as f:
    cfg = json.load(f)
D, H, LAYERS, V = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["vocab_size"]
EPS, HD, M = cfg["layer_norm_epsilon"], cfg["n_embd"] // cfg["n_head"], args.max_len
assert args.prompt_len + args.new <= min(M, cfg["n_positions"]), "prompt + new > max_len"


def load_params():
    """The state dict as transformers saves it (`transformer.` prefix; the
    LM head is tied to wte and not in the file)."""
    sd = {k.removeprefix("transformer."): v for k, v in
          load_file(os.path.join(args.model_dir, "model.safetensors")).items()}
    names = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
             "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
             "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
    # The tied LM head, transposed once here: with `x @ wte.T` XLA's CPU
    # compiler copies wte into the transposed layout (154 MB) every step.
    head = np.ascontiguousarray(sd["wte.weight"].T)
    params = {"wte": sd["wte.weight"], "wpe": sd["wpe.weight"], "head": head,
              "ln_f": (sd["ln_f.weight"], sd["ln_f.bias"]),
              "h": [{n: sd[f"h.{i}.{n}"] for n in names} for i in range(LAYERS)]}
    return jax.tree.map(jnp.asarray, params)


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + EPS) * w + b


def forward(params, ids, ck, cv, pos0):
    """ids [B, T] at positions pos0..pos0+T-1 -> the greedy next token [B]
    and the caches with this chunk's keys and values written."""
    b, t = ids.shape
    pos = pos0 + jnp.arange(t, dtype=jnp.int32)
    x = params["wte"][ids] + params["wpe"][pos][None]
    # Query i sees the written keys up to its own position.
    mask = jnp.arange(M, dtype=jnp.int32)[None, :] <= pos[:, None]
    zero = jnp.int32(0)
    for i, p in enumerate(params["h"]):
        qkv = layer_norm(x, p["ln_1.weight"], p["ln_1.bias"]) @ p["attn.c_attn.weight"] + p["attn.c_attn.bias"]
        q, k, v = (a.reshape(b, t, H, HD).transpose(0, 2, 1, 3) for a in jnp.split(qkv, 3, axis=-1))
        ck = lax.dynamic_update_slice(ck, k[None], (jnp.int32(i), zero, zero, pos0, zero))
        cv = lax.dynamic_update_slice(cv, v[None], (jnp.int32(i), zero, zero, pos0, zero))
        s = jnp.einsum("bhtd,bhmd->bhtm", q, ck[i]) / np.sqrt(HD).astype(np.float32)
        s = jnp.where(mask, s, jnp.finfo(jnp.float32).min)
        a = jnp.einsum("bhtm,bhmd->bhtd", jax.nn.softmax(s, axis=-1), cv[i])
        a = a.transpose(0, 2, 1, 3).reshape(b, t, D)
        x = x + a @ p["attn.c_proj.weight"] + p["attn.c_proj.bias"]
        h = layer_norm(x, p["ln_2.weight"], p["ln_2.bias"]) @ p["mlp.c_fc.weight"] + p["mlp.c_fc.bias"]
        x = x + jax.nn.gelu(h, approximate=True) @ p["mlp.c_proj.weight"] + p["mlp.c_proj.bias"]
    logits = layer_norm(x[:, -1], *params["ln_f"]) @ params["head"]
    return jnp.argmax(logits, axis=-1).astype(jnp.int32), ck, cv


prefill = jax.jit(lambda params, ids, ck, cv: forward(params, ids, ck, cv, jnp.int32(0)),
                  donate_argnums=(2, 3))
decode = jax.jit(lambda params, tok, ck, cv, t: forward(params, tok[:, None], ck, cv, t),
                 donate_argnums=(2, 3))


def empty_cache():
    ck = jnp.zeros((LAYERS, 1, H, M, HD), jnp.float32)
    cv = jnp.zeros((LAYERS, 1, H, M, HD), jnp.float32)
    return ck.block_until_ready(), cv.block_until_ready()


def generate(params, prompt, new):
    """Returns (ms, tokens): the prefill and new - 1 decode steps."""
    ck, cv = empty_cache()
    t0, c0 = time.perf_counter(), time.process_time()
    tok, ck, cv = prefill(params, prompt, ck, cv)
    toks = [tok]
    for t in range(args.prompt_len, args.prompt_len + new - 1):
        tok, ck, cv = decode(params, tok, ck, cv, np.int32(t))
        toks.append(tok)
    tokens = np.concatenate([np.asarray(t) for t in toks])
    cpu_ms.append((time.process_time() - c0) * 1e3)
    return (time.perf_counter() - t0) * 1e3, tokens


cpu_ms = []


params = jax.block_until_ready(load_params())
prompt = jnp.asarray([[(1000 + 7919 * i) % V for i in range(args.prompt_len)]], jnp.int32)
generate(params, prompt, 2)
compile_ms = _compile_s[0] * 1e3
generate(params, prompt, args.new)
prefill_ms, total, cpu = [], [], []
for _ in range(args.rounds):
    prefill_ms.append(generate(params, prompt, 1)[0])
    ms, tokens = generate(params, prompt, args.new)
    total.append(ms)
    cpu.append((cpu_ms[-1] - cpu_ms[-2]) / (args.new - 1))

p, t = statistics.median(prefill_ms), statistics.median(total)
print(f"jax {jax.__version__} numpy {np.__version__} devices {jax.devices()} "
      f"cpus {len(os.sched_getaffinity(0))}", file=sys.stderr)
print("tokens[:32]", tokens[:32].tolist(), file=sys.stderr)
print(f"RESULT gpt2 jax prefill_ms={p:.3f} ms_per_token={(t - p) / (args.new - 1):.3f} "
      f"total_ms={t:.3f} compile_ms={compile_ms:.1f} cpu_ms_per_token={statistics.median(cpu):.3f}")
