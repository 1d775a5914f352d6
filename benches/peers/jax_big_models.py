"""The JAX side of the bigger workloads in `benches/workloads/big.rs`:
ResNet-50 (torchvision's layout) and GPT-2 small training, written as a
JAX user would (`jax.jit` with the state donated, GPT-2 padded to 128 by
hand with the loss masked), timed as `jax_models.py` times its workloads.

Usage: python jax_big_models.py WORKLOAD [STEPS]   (WORKLOAD resnet50 or
gpt2_train; benches/peers/python.sh's Python). Prints one line

    RESULT <workload> jax first_ms=<f> step_ms=<f> cpu_ms=<f> compile_ms=<f> rss_mb=<f>

with the meanings of `jax_models.py`, plus the peak resident set.
"""

import resource
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_models  # the shared timing and compile-time listener

# ------------------------------------------------------------- ResNet-50

R_BATCH, R_SIDE, R_CLASSES = 8, 112, 1000
LR, MOMENTUM, EPS, BN_MOMENTUM = 0.01, 0.9, 1e-5, 0.1
# torchvision's Bottleneck stages: (name, blocks, width, stride).
STAGES = [("layer1", 3, 64, 1), ("layer2", 4, 128, 2), ("layer3", 6, 256, 2), ("layer4", 3, 512, 2)]


def conv(x, w, stride=1):
    pad = w.shape[-1] // 2
    return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad)] * 2,
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


def init_resnet50(key):
    keys = iter(jax.random.split(key, 200))
    params, state = {}, {}

    def conv_w(name, o, i, k):
        std = np.sqrt(2.0 / (o * k * k))  # kaiming_normal_, fan_out, as torchvision
        params[name] = std * jax.random.normal(next(keys), (o, i, k, k), jnp.float32)

    def bn(name, c):
        params[name] = {"weight": jnp.ones(c), "bias": jnp.zeros(c)}
        state[name] = {"running_mean": jnp.zeros(c), "running_var": jnp.ones(c)}

    conv_w("conv1", 64, 3, 7)
    bn("bn1", 64)
    cin = 64
    for stage, blocks, width, _ in STAGES:
        for b in range(blocks):
            p = f"{stage}.{b}"
            conv_w(p + ".conv1", width, cin, 1)
            bn(p + ".bn1", width)
            conv_w(p + ".conv2", width, width, 3)
            bn(p + ".bn2", width)
            conv_w(p + ".conv3", width * 4, width, 1)
            bn(p + ".bn3", width * 4)
            if b == 0:
                conv_w(p + ".downsample.0", width * 4, cin, 1)
                bn(p + ".downsample.1", width * 4)
            cin = width * 4
    bound = 1.0 / np.sqrt(2048)
    params["fc.weight"] = jax.random.uniform(next(keys), (R_CLASSES, 2048), jnp.float32, -bound, bound)
    params["fc.bias"] = jax.random.uniform(next(keys), (R_CLASSES,), jnp.float32, -bound, bound)
    return params, state


def resnet50_loss(params, state, x, labels):
    new = {}

    def bn(name, h):
        y, new[name] = jax_models.batch_norm(params[name], state[name], h)
        return y

    h = jax.nn.relu(bn("bn1", conv(x, params["conv1"], 2)))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2),
                          [(0, 0), (0, 0), (1, 1), (1, 1)])
    for stage, blocks, _, stride in STAGES:
        for b in range(blocks):
            p, s = f"{stage}.{b}", stride if b == 0 else 1
            y = jax.nn.relu(bn(p + ".bn1", conv(h, params[p + ".conv1"])))
            y = jax.nn.relu(bn(p + ".bn2", conv(y, params[p + ".conv2"], s)))
            y = bn(p + ".bn3", conv(y, params[p + ".conv3"]))
            if b == 0:
                h = bn(p + ".downsample.1", conv(h, params[p + ".downsample.0"], s))
            h = jax.nn.relu(y + h)
    logits = h.mean(axis=(2, 3)) @ params["fc.weight"].T + params["fc.bias"]
    logp = jax.nn.log_softmax(logits)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean(), new


def _resnet50_step(params, state, velocity, x, labels):
    (loss, new_state), grads = jax.value_and_grad(resnet50_loss, has_aux=True)(params, state, x, labels)
    velocity = jax.tree.map(lambda v, g: MOMENTUM * v + g, velocity, grads)
    params = jax.tree.map(lambda p, v: p - LR * v, params, velocity)
    return params, new_state, velocity, loss


resnet50_step = jax.jit(_resnet50_step, donate_argnums=(0, 1, 2))


def run_resnet50(steps):
    params, state = init_resnet50(jax.random.PRNGKey(0))
    velocity = jax.tree.map(jnp.zeros_like, params)
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((R_BATCH, 3, R_SIDE, R_SIDE), dtype=np.float32),
             rng.integers(0, R_CLASSES, R_BATCH).astype(np.int32)) for _ in range(steps + 1)]

    def step(i):
        nonlocal params, state, velocity
        x, labels = data[i]
        params, state, velocity, loss = resnet50_step(params, state, velocity, x, labels)
        return float(loss)

    return jax_models.timed(step, steps)

# ---------------------------------------------------------- GPT-2 small

G_BATCH, G_MAX, VOCAB, D, HEADS, LAYERS, POSITIONS = 4, 128, 50257, 768, 12, 12, 1024
HD = D // HEADS
G_LR, WD, BETAS, ADAM_EPS = 1e-4, 0.01, (0.9, 0.999), 1e-8


def init_gpt2(key):
    keys = iter(jax.random.split(key, 8 * LAYERS + 4))
    normal = lambda shape: 0.02 * jax.random.normal(next(keys), shape, jnp.float32)
    block = lambda: {
        "ln_1": (jnp.ones(D), jnp.zeros(D)), "ln_2": (jnp.ones(D), jnp.zeros(D)),
        "c_attn": (normal((D, 3 * D)), jnp.zeros(3 * D)),
        "attn_proj": (normal((D, D)), jnp.zeros(D)),
        "c_fc": (normal((D, 4 * D)), jnp.zeros(4 * D)),
        "mlp_proj": (normal((4 * D, D)), jnp.zeros(D)),
    }
    return {"wte": normal((VOCAB, D)), "wpe": normal((POSITIONS, D)),
            "ln_f": (jnp.ones(D), jnp.zeros(D)), "h": [block() for _ in range(LAYERS)]}


def layer_norm(x, p):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * p[0] + p[1]


def gpt2_loss(params, tokens, targets, valid):
    """Causal attention over the padded 128 positions (padding sits after
    every real token, so the causal mask alone keeps it out of real rows);
    the mean next-token cross-entropy over the real tokens."""
    b, t = tokens.shape
    x = params["wte"][tokens] + params["wpe"][:t][None]
    causal = jnp.tril(jnp.ones((t, t), bool))
    for p in params["h"]:
        qkv = layer_norm(x, p["ln_1"]) @ p["c_attn"][0] + p["c_attn"][1]
        q, k, v = (a.reshape(b, t, HEADS, HD).transpose(0, 2, 1, 3) for a in jnp.split(qkv, 3, axis=-1))
        s = jnp.einsum("bhtd,bhsd->bhts", q, k) / np.float32(np.sqrt(HD))
        s = jnp.where(causal, s, jnp.finfo(jnp.float32).min)
        a = jnp.einsum("bhts,bhsd->bhtd", jax.nn.softmax(s, axis=-1), v)
        x = x + a.transpose(0, 2, 1, 3).reshape(b, t, D) @ p["attn_proj"][0] + p["attn_proj"][1]
        h = layer_norm(x, p["ln_2"]) @ p["c_fc"][0] + p["c_fc"][1]
        x = x + jax.nn.gelu(h, approximate=True) @ p["mlp_proj"][0] + p["mlp_proj"][1]
    logits = layer_norm(x, params["ln_f"]) @ params["wte"].T
    logp = jax.nn.log_softmax(logits)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return jnp.where(valid, nll, 0.0).sum() / valid.sum()


def _gpt2_step(params, m, v, count, tokens, targets, valid):
    """AdamW as torch.optim.AdamW: decoupled decay on every parameter."""
    loss, g = jax.value_and_grad(gpt2_loss)(params, tokens, targets, valid)
    count = count + 1
    m = jax.tree.map(lambda m, g: BETAS[0] * m + (1 - BETAS[0]) * g, m, g)
    v = jax.tree.map(lambda v, g: BETAS[1] * v + (1 - BETAS[1]) * g * g, v, g)
    c1, c2 = 1 - BETAS[0] ** count, 1 - BETAS[1] ** count
    params = jax.tree.map(
        lambda p, m, v: p * (1 - G_LR * WD) - G_LR * (m / c1) / (jnp.sqrt(v / c2) + ADAM_EPS),
        params, m, v)
    return params, m, v, count, loss


gpt2_step = jax.jit(_gpt2_step, donate_argnums=(0, 1, 2))


def gpt2_data(i):
    """Step i's batch as `big.rs` makes it, padded to 128."""
    length = 32 + (i * 37) % 97
    token = lambda b, j: (1000 + 7919 * (i * 131 + b * 17 + j)) % VOCAB
    tokens = np.zeros((G_BATCH, G_MAX), np.int32)
    targets = np.zeros((G_BATCH, G_MAX), np.int32)
    for b in range(G_BATCH):
        tokens[b, :length] = [token(b, j) for j in range(length)]
        targets[b, :length] = [token(b, j) for j in range(1, length + 1)]
    valid = np.zeros((G_BATCH, G_MAX), bool)
    valid[:, :length] = True
    return tokens, targets, valid


def run_gpt2_train(steps):
    params = init_gpt2(jax.random.PRNGKey(0))
    m = jax.tree.map(jnp.zeros_like, params)
    v = jax.tree.map(jnp.zeros_like, params)
    count = jnp.float32(0)
    jax.block_until_ready((params, m, v))
    data = [gpt2_data(i) for i in range(steps + 1)]

    def step(i):
        nonlocal params, m, v, count
        params, m, v, count, loss = gpt2_step(params, m, v, count, *data[i])
        return float(loss)

    return jax_models.timed(step, steps)


def main():
    workload = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    run = {"resnet50": run_resnet50, "gpt2_train": run_gpt2_train}[workload]
    first, step, cpu, compile_ms = run(steps)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RESULT {workload} jax first_ms={first:.2f} step_ms={step:.3f} cpu_ms={cpu:.3f} "
          f"compile_ms={compile_ms:.2f} rss_mb={rss:.0f}")


if __name__ == "__main__":
    main()
