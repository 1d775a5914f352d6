"""The JAX side of `benches/models.rs`: the same workloads written as a JAX
user would (`jax.jit`, hand-padded), timed the same way.

Usage: python jax_models.py WORKLOAD [STEPS]
       python jax_models.py --export WORKLOAD DIR
WORKLOAD is resnet, transformer, mlp, detect, zone or topk. Prints one line

    RESULT <workload> jax first_ms=<f> step_ms=<f> cpu_ms=<f> compile_ms=<f>

first_ms: the first step, compile included (the backend started before
it); step_ms: median wall time of a step after warm-up (upload, step and
the loss read back); cpu_ms: process CPU time per step over the timed
steps (this machine is shared, so CPU time is the steadier figure);
compile_ms: the first step's time in XLA's compiler. Host data generation
is excluded on both sides.

With --export, writes the step's StableHLO as JAX lowers it
(`jax.jit(step).lower(...)`, its pytree arguments flattened) to
DIR/WORKLOAD.mlir, its arguments to DIR/WORKLOAD.argN.bin (raw
row-major bytes) and DIR/WORKLOAD.args (one line per argument:
`dtype dims`, and a last line `feed N`: the first N results are the next
step's first N arguments). `benches/lowering.rs` compiles and times that
program on lazyxla's PJRT plugin beside lazyxla's own program.
"""

import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

# The CPU unless JAX_PLATFORMS names another (cuda, for the GPU runs).
jax.config.update("jax_platforms", os.environ.get("JAX_PLATFORMS") or "cpu")

# Seconds XLA spent compiling (JAX's backend-compile events): the first
# step's share, as lazyxla's side reports it.
_compile_s = [0.0]


def _on_duration(event, duration, *args, **kwargs):
    if "backend_compile" in event:
        _compile_s[0] += duration


jax.monitoring.register_event_duration_secs_listener(_on_duration)

# ---------------------------------------------------------------- resnet

BATCH, CLASSES, IMAGE = 32, 10, 32
LR, MOMENTUM, EPS, BN_MOMENTUM = 0.1, 0.9, 1e-5, 0.1


def conv(x, w, stride=1, padding=1):
    return jax.lax.conv_general_dilated(
        x, w, (stride, stride), [(padding, padding)] * 2,
        dimension_numbers=("NCHW", "OIHW", "NCHW"))


def batch_norm(p, s, x):
    """Training-mode BatchNorm2d: batch statistics, running stats updated
    with the unbiased variance (PyTorch's rule)."""
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    n = x.shape[0] * x.shape[2] * x.shape[3]
    y = (x - mean[None, :, None, None]) * jax.lax.rsqrt(var + EPS)[None, :, None, None]
    y = y * p["weight"][None, :, None, None] + p["bias"][None, :, None, None]
    new_s = {
        "running_mean": (1 - BN_MOMENTUM) * s["running_mean"] + BN_MOMENTUM * mean,
        "running_var": (1 - BN_MOMENTUM) * s["running_var"] + BN_MOMENTUM * var * n / (n - 1),
    }
    return y, new_s


def init_resnet(key):
    def conv_w(key, o, i, k):
        bound = 1.0 / np.sqrt(i * k * k)
        return jax.random.uniform(key, (o, i, k, k), jnp.float32, -bound, bound)

    def bn(c):
        return ({"weight": jnp.ones(c), "bias": jnp.zeros(c)},
                {"running_mean": jnp.zeros(c), "running_var": jnp.ones(c)})

    keys = iter(jax.random.split(key, 16))
    params, state = {}, {}
    params["conv1"] = conv_w(next(keys), 8, 3, 3)
    params["bn1"], state["bn1"] = bn(8)
    for name, cin, cout in [("layer1", 8, 8), ("layer2", 8, 16)]:
        params[name + ".conv1"] = conv_w(next(keys), cout, cin, 3)
        params[name + ".bn1"], state[name + ".bn1"] = bn(cout)
        params[name + ".conv2"] = conv_w(next(keys), cout, cout, 3)
        params[name + ".bn2"], state[name + ".bn2"] = bn(cout)
    params["layer2.down"] = conv_w(next(keys), 16, 8, 1)
    params["layer2.down_bn"], state["layer2.down_bn"] = bn(16)
    bound = 1.0 / np.sqrt(16)
    params["fc.weight"] = jax.random.uniform(next(keys), (CLASSES, 16), jnp.float32, -bound, bound)
    params["fc.bias"] = jax.random.uniform(next(keys), (CLASSES,), jnp.float32, -bound, bound)
    return params, state


def resnet_loss(params, state, x, labels):
    new = {}

    def bn(name, h):
        y, new[name] = batch_norm(params[name], state[name], h)
        return y

    h = jax.nn.relu(bn("bn1", conv(x, params["conv1"])))
    # layer1: a BasicBlock 8 -> 8.
    y = jax.nn.relu(bn("layer1.bn1", conv(h, params["layer1.conv1"])))
    y = bn("layer1.bn2", conv(y, params["layer1.conv2"]))
    h = jax.nn.relu(y + h)
    # layer2: a BasicBlock 8 -> 16, stride 2, 1x1 downsample.
    y = jax.nn.relu(bn("layer2.bn1", conv(h, params["layer2.conv1"], stride=2)))
    y = bn("layer2.bn2", conv(y, params["layer2.conv2"]))
    d = bn("layer2.down_bn", conv(h, params["layer2.down"], stride=2, padding=0))
    h = jax.nn.relu(y + d)
    h = h.mean(axis=(2, 3))
    logits = h @ params["fc.weight"].T + params["fc.bias"]
    logp = jax.nn.log_softmax(logits)
    loss = -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()
    return loss, new


@jax.jit
def resnet_step(params, state, velocity, x, labels):
    (loss, new_state), grads = jax.value_and_grad(resnet_loss, has_aux=True)(
        params, state, x, labels)
    velocity = jax.tree.map(lambda v, g: MOMENTUM * v + g, velocity, grads)
    params = jax.tree.map(lambda p, v: p - LR * v, params, velocity)
    return params, new_state, velocity, loss


def resnet_data(step):
    rng = np.random.default_rng(step)
    x = rng.standard_normal((BATCH, 3, IMAGE, IMAGE), dtype=np.float32)
    labels = rng.integers(0, CLASSES, BATCH).astype(np.int32)
    return x, labels


def run_resnet(steps):
    params, state = init_resnet(jax.random.PRNGKey(0))
    velocity = jax.tree.map(jnp.zeros_like, params)
    data = [resnet_data(i) for i in range(steps + 1)]

    def step(i):
        nonlocal params, state, velocity
        x, labels = data[i]
        params, state, velocity, loss = resnet_step(
            params, state, velocity, jnp.asarray(x), jnp.asarray(labels))
        return float(loss)

    return timed(step, steps)

# ----------------------------------------------------------- transformer

TB, TMAX, EMBED, HEADS, FFN, VOCAB = 16, 64, 64, 4, 256, 1000


def init_transformer(key):
    k = iter(jax.random.split(key, 8))

    def lin(key, o, i):
        bound = 1.0 / np.sqrt(i)
        return jax.random.uniform(key, (o, i), jnp.float32, -bound, bound), jnp.zeros(o)

    p = {"embed": jax.random.normal(next(k), (VOCAB, EMBED))}
    p["in_proj"] = lin(next(k), 3 * EMBED, EMBED)
    p["out_proj"] = lin(next(k), EMBED, EMBED)
    p["ff1"] = lin(next(k), FFN, EMBED)
    p["ff2"] = lin(next(k), EMBED, FFN)
    p["head"] = lin(next(k), VOCAB, EMBED)
    p["ln1"] = (jnp.ones(EMBED), jnp.zeros(EMBED))
    p["ln2"] = (jnp.ones(EMBED), jnp.zeros(EMBED))
    return p


def layer_norm(p, x):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p[0] + p[1]


def linear(p, x):
    return x @ p[0].T + p[1]


def transformer_loss(p, tokens, targets, valid):
    """A pre-norm block: attention with a key padding mask, then an MLP;
    cross-entropy over the real tokens only."""
    b, t = tokens.shape
    h = p["embed"][tokens]
    q, k, v = jnp.split(linear(p["in_proj"], layer_norm(p["ln1"], h)), 3, axis=-1)
    heads = lambda z: z.reshape(b, t, HEADS, EMBED // HEADS).transpose(0, 2, 1, 3)
    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(EMBED // HEADS)
    scores = jnp.where(valid[:, None, None, :], scores, -jnp.inf)
    att = jax.nn.softmax(scores, axis=-1) @ v
    att = att.transpose(0, 2, 1, 3).reshape(b, t, EMBED)
    h = h + linear(p["out_proj"], att)
    h = h + linear(p["ff2"], jax.nn.gelu(linear(p["ff1"], layer_norm(p["ln2"], h)), approximate=False))
    logp = jax.nn.log_softmax(linear(p["head"], h))
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return jnp.where(valid, nll, 0.0).sum() / valid.sum()


@jax.jit
def transformer_step(p, tokens, targets, valid):
    loss, g = jax.value_and_grad(transformer_loss)(p, tokens, targets, valid)
    return jax.tree.map(lambda a, b: a - 0.01 * b, p, g), loss


def transformer_data(step):
    """Lengths change every step (bound TMAX); JAX pads by hand."""
    rng = np.random.default_rng(step)
    length = int(rng.integers(TMAX // 4, TMAX + 1))
    tokens = np.zeros((TB, TMAX), np.int32)
    targets = np.zeros((TB, TMAX), np.int32)
    tokens[:, :length] = rng.integers(0, VOCAB, (TB, length))
    targets[:, :length] = rng.integers(0, VOCAB, (TB, length))
    valid = np.zeros((TB, TMAX), bool)
    valid[:, :length] = True
    return tokens, targets, valid


def run_transformer(steps):
    p = init_transformer(jax.random.PRNGKey(0))
    data = [transformer_data(i) for i in range(steps + 1)]

    def step(i):
        nonlocal p
        tokens, targets, valid = data[i]
        p, loss = transformer_step(p, jnp.asarray(tokens), jnp.asarray(targets), jnp.asarray(valid))
        return float(loss)

    return timed(step, steps)

# ------------------------------------------------------------------ topk

TOPK_N, TOPK_K = 100_000, 1000


@jax.jit
def top(scores):
    return jax.lax.top_k(scores, TOPK_K)


def run_topk(steps):
    data = [np.random.default_rng(i).random(TOPK_N, dtype=np.float32) for i in range(steps + 1)]

    def step(i):
        values, indices = top(jnp.asarray(data[i]))
        values, indices = np.asarray(values), np.asarray(indices)
        return float(values[0]) + float(indices[0])

    return timed(step, steps)

# ------------------------------------------------------------------- mlp

MLP_BATCH, MLP_SIZES = 128, (784, 512, 512, 10)
ADAM_LR, B1, B2, ADAM_EPS = 1e-3, 0.9, 0.999, 1e-8


def init_mlp(key):
    keys = jax.random.split(key, len(MLP_SIZES) - 1)
    params = []
    for k, i, o in zip(keys, MLP_SIZES[:-1], MLP_SIZES[1:]):
        bound = 1.0 / np.sqrt(i)
        kw, kb = jax.random.split(k)
        params.append((jax.random.uniform(kw, (o, i), jnp.float32, -bound, bound),
                       jax.random.uniform(kb, (o,), jnp.float32, -bound, bound)))
    return params


def mlp_loss(params, x, labels):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w.T + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    logp = jax.nn.log_softmax(h)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()


def adam(params, grads, m, v, t):
    """PyTorch's Adam (bias-corrected moments, eps outside the sqrt)."""
    t = t + 1
    m = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, m, grads)
    v = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, v, grads)
    bc1, bc2 = 1 - B1 ** t, 1 - B2 ** t
    params = jax.tree.map(
        lambda p, m, v: p - ADAM_LR * (m / bc1) / (jnp.sqrt(v / bc2) + ADAM_EPS), params, m, v)
    return params, m, v, t


def mlp_step(params, m, v, t, x, labels):
    loss, g = jax.value_and_grad(mlp_loss)(params, x, labels)
    params, m, v, t = adam(params, g, m, v, t)
    return params, m, v, t, loss


def mlp_data(step):
    rng = np.random.default_rng(step)
    return (rng.standard_normal((MLP_BATCH, MLP_SIZES[0]), dtype=np.float32),
            rng.integers(0, MLP_SIZES[-1], MLP_BATCH).astype(np.int32))


def mlp_args():
    params = init_mlp(jax.random.PRNGKey(0))
    zeros = jax.tree.map(jnp.zeros_like, params)
    return (params, zeros, zeros, jnp.zeros((), jnp.float32)), 4, mlp_data


def run_mlp(steps):
    (params, m, v, t), _, data_fn = mlp_args()
    data = [data_fn(i) for i in range(steps + 1)]
    step_fn = jax.jit(mlp_step)

    def step(i):
        nonlocal params, m, v, t
        x, labels = data[i]
        params, m, v, t, loss = step_fn(params, m, v, t, jnp.asarray(x), jnp.asarray(labels))
        return float(loss)

    return timed(step, steps)

# ---------------------------------------------------------------- detect

ANCHORS, FEATURES, DETECT_LR = 4096, 16, 0.02


def init_detect(key):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    bound = 1.0 / np.sqrt(FEATURES)
    u = lambda k, s: jax.random.uniform(k, s, jnp.float32, -bound, bound)
    return {"score": (u(k1, (1, FEATURES)), u(k2, (1,))),
            "boxes": (u(k3, (4, FEATURES)), u(k4, (4,)))}


def detect_loss(p, features, iou, deltas):
    """The detector of examples/train_detector.rs on 4096 anchors, padded
    by hand: positives are a mask, the box loss a masked mean over them."""
    logits = linear(p["score"], features)[:, 0]
    labels = (iou > 0.5).astype(jnp.float32)
    cls = jnp.mean(jnp.maximum(logits, 0) - logits * labels + jnp.log1p(jnp.exp(-jnp.abs(logits))))
    pred = linear(p["boxes"], features)
    d = jnp.abs(pred - deltas)
    l1 = jnp.where(d < 1.0, 0.5 * d * d, d - 0.5)
    pos = labels[:, None]
    reg = (l1 * pos).sum() / (4 * pos.sum())
    return cls + reg


def detect_step(p, features, iou, deltas):
    loss, g = jax.value_and_grad(detect_loss)(p, features, iou, deltas)
    return jax.tree.map(lambda a, b: a - DETECT_LR * b, p, g), loss


def detect_data(step):
    rng = np.random.default_rng(step)
    f = rng.standard_normal((ANCHORS, FEATURES), dtype=np.float32)
    iou = np.clip(0.5 + 0.35 * np.tanh(f[:, 0] + 0.5 * f[:, 1]), 0, 1).astype(np.float32)
    iou[0] = 1.0
    deltas = (0.5 * f[:, 2:6] - 0.25 * f[:, 7:11]).astype(np.float32)
    return f, iou, deltas


def detect_args():
    return (init_detect(jax.random.PRNGKey(0)),), 1, detect_data


def run_detect(steps):
    (p,), _, data_fn = detect_args()
    data = [data_fn(i) for i in range(steps + 1)]
    step_fn = jax.jit(detect_step)

    def step(i):
        nonlocal p
        p, loss = step_fn(p, *map(jnp.asarray, data[i]))
        return float(loss)

    return timed(step, steps)

# ------------------------------------------------------------------ zone


@jax.jit
def zone_sum(x):
    """The squared coordinates of the nonzeros of a 5x5 grid, summed, plus
    2: nonzero padded by hand, as a mask over the coordinate grid."""
    r = jnp.arange(5, dtype=jnp.float32)[:, None]
    c = jnp.arange(5, dtype=jnp.float32)[None, :]
    return jnp.where(x != 0, r * r + c * c, 0.0).sum() + 2.0


def run_zone(steps):
    data = [(np.random.default_rng(i).random((5, 5)) < 0.4).astype(np.float32)
            for i in range(steps + 1)]

    def step(i):
        return float(zone_sum(jnp.asarray(data[i])))

    return timed(step, steps)

# ---------------------------------------------------------------- export


def resnet_args():
    params, state = init_resnet(jax.random.PRNGKey(0))
    return (params, state, jax.tree.map(jnp.zeros_like, params)), 3, resnet_data


def transformer_args():
    return (init_transformer(jax.random.PRNGKey(0)),), 1, lambda i: transformer_data(i)[:3]


EXPORTS = {
    "resnet": (resnet_step, resnet_args),
    "transformer": (transformer_step, transformer_args),
    "mlp": (mlp_step, mlp_args),
    "detect": (detect_step, detect_args),
}


def export(workload, out):
    """Writes the step's StableHLO, arguments and feed count (module doc)."""
    import os
    step, make = EXPORTS[workload]
    step = getattr(step, "__wrapped__", step)
    state, n_state, data_fn = make()
    args = tuple(state) + tuple(data_fn(1))
    leaves, tree = jax.tree.flatten(args)
    feed = len(jax.tree.leaves(tuple(state)[:n_state]))

    def flat(*leaves):
        return jax.tree.leaves(step(*jax.tree.unflatten(tree, leaves)))

    lowered = jax.jit(flat, keep_unused=True).lower(*leaves)
    module = lowered.compiler_ir("stablehlo")
    # The generic form parses on older StableHLO than JAX's own printer.
    text = module.operation.get_asm(print_generic_op_form=True, enable_debug_info=False)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, workload + ".mlir"), "w") as f:
        f.write(text)
    outs = jax.eval_shape(flat, *leaves)
    names = {"float32": "f32", "int32": "s32", "bool": "pred"}
    with open(os.path.join(out, workload + ".args"), "w") as f:
        for i, x in enumerate(leaves):
            x = np.asarray(x)
            if i < feed:
                assert outs[i].shape == x.shape and outs[i].dtype == x.dtype, (i, outs[i], x.shape)
            f.write(f"{names[str(x.dtype)]} {' '.join(map(str, x.shape))}\n")
            np.ascontiguousarray(x).tofile(os.path.join(out, f"{workload}.arg{i}.bin"))
        f.write(f"feed {feed}\n")

# ---------------------------------------------------------------- timing


def timed(step, steps):
    # The backend starts before the clock, as lazyxla's side loads its
    # plugin first: the first step measures compiling and running.
    jax.devices()
    _compile_s[0] = 0.0
    t = time.perf_counter()
    step(0)
    first = (time.perf_counter() - t) * 1e3
    compile_ms = _compile_s[0] * 1e3
    for i in range(1, 4):
        step(i)
    times = []
    cpu = time.process_time()
    for i in range(steps):
        t = time.perf_counter()
        step(1 + i % (steps))
        times.append((time.perf_counter() - t) * 1e3)
    cpu = (time.process_time() - cpu) * 1e3 / steps
    times.sort()
    return first, times[len(times) // 2], cpu, compile_ms


def main():
    if sys.argv[1] == "--export":
        export(sys.argv[2], sys.argv[3])
        return
    workload = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    run = {"resnet": run_resnet, "transformer": run_transformer, "topk": run_topk,
           "mlp": run_mlp, "detect": run_detect, "zone": run_zone}[workload]
    first, step, cpu, compile_ms = run(steps)
    print(f"RESULT {workload} jax first_ms={first:.2f} step_ms={step:.3f} cpu_ms={cpu:.3f} "
          f"compile_ms={compile_ms:.2f}")


if __name__ == "__main__":
    main()
