"""JAX side of `cargo bench --bench sharding`: the same Adam training step
of a 512-2048-2048-512 MLP (tanh, MSE, batch 512) on one CPU device and
sharded over 4 (`fsdp`: every weight, bias and Adam moment split along
dim 0 with `NamedSharding`, the batch split the same way; `dp`: the
parameters replicated, the batch split). Every step is one `jax.jit` with
the parameters and moments donated. Alternating rounds, medians of wall
and CPU time per step, as the Rust bench.

    benches/peers/python.sh  # prints the Python with JAX
    $(benches/peers/python.sh) benches/peers/jax_sharding.py [rounds]
"""

import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from jax_models import adam  # noqa: E402  (PyTorch's Adam, lr 1e-3)

STEPS = 5
BATCH = 512
WIDTHS = [512, 2048, 2048, 512]


def init():
    rng = np.random.default_rng(0)
    params = []
    for i, o in zip(WIDTHS, WIDTHS[1:]):
        bound = 1.0 / np.sqrt(i)
        params.append((rng.uniform(-bound, bound, (o, i)).astype(np.float32),
                       rng.uniform(-bound, bound, (o,)).astype(np.float32)))
    return params


def loss_fn(params, x, y):
    h = x
    for k, (w, b) in enumerate(params):
        h = h @ w.T + b
        if k + 1 < len(params):
            h = jnp.tanh(h)
    return jnp.mean((h - y) ** 2)


def step(params, m, v, t, x, y):
    loss, g = jax.value_and_grad(loss_fn)(params, x, y)
    params, m, v, t = adam(params, g, m, v, t)
    return params, m, v, t, loss


def layout(mesh, shard_params):
    """The jitted step and its placed arguments."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (BATCH, WIDTHS[0])).astype(np.float32)
    y = rng.uniform(-1, 1, (BATCH, WIDTHS[-1])).astype(np.float32)
    params = init()
    if mesh is None:
        dev = jax.devices()[0]
        put = lambda a: jax.device_put(a, dev)  # noqa: E731
        batch = put
        jitted = jax.jit(step, donate_argnums=(0, 1, 2, 3))
    else:
        split = NamedSharding(mesh, P("data"))
        whole = NamedSharding(mesh, P())
        put = (lambda a: jax.device_put(a, split)) if shard_params else (
            lambda a: jax.device_put(a, whole))
        batch = lambda a: jax.device_put(a, split)  # noqa: E731
        p_sh = jax.tree.map(lambda _: split if shard_params else whole, params)
        jitted = jax.jit(step, donate_argnums=(0, 1, 2, 3),
                         in_shardings=(p_sh, p_sh, p_sh, whole, split, split),
                         out_shardings=(p_sh, p_sh, p_sh, whole, whole))
    params = jax.tree.map(put, params)
    zeros = jax.tree.map(lambda p: jnp.zeros_like(p), params)
    state = [params, zeros, jax.tree.map(lambda p: jnp.zeros_like(p), params),
             jnp.zeros((), jnp.float32)]
    return jitted, state, batch(x), batch(y)


def run(entry):
    jitted, state, x, y = entry
    t, c = time.perf_counter(), time.process_time()
    for _ in range(STEPS):
        p, m, v, k, loss = jitted(*state, x, y)
        state[:] = [p, m, v, k]
    loss.block_until_ready()
    return ((time.perf_counter() - t) * 1e3 / STEPS,
            (time.process_time() - c) * 1e3 / STEPS)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))
    names = ["one device", "fsdp, 4 devices", "dp, 4 devices"]
    entries = [layout(None, False), layout(mesh, True), layout(mesh, False)]
    for e in entries:
        run(e)
        run(e)
    wall = [[] for _ in entries]
    cpu = [[] for _ in entries]
    for _ in range(rounds):
        for k, e in enumerate(entries):
            w, c = run(e)
            wall[k].append(w)
            cpu[k].append(c)
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    w1, c1 = med(wall[0]), med(cpu[0])
    print(f"JAX {jax.__version__}, {rounds} rounds of {STEPS} steps")
    for name, w, c in zip(names, wall, cpu):
        w, c = med(w), med(c)
        print(f"RESULT jax_sharding layout=\"{name}\" wall_ms={w:.3f} cpu_ms={c:.3f} "
              f"wall_ratio={w / w1:.3f} cpu_ratio={c / c1:.3f}")


if __name__ == "__main__":
    main()
