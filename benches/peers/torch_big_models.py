"""The PyTorch eager side of the bigger workloads in
`benches/workloads/big.rs`: torchvision's `resnet50` and transformers'
`GPT2LMHeadModel` (GPT-2 small, dropout off as on lazyxla's side),
trained as a PyTorch user would on the CPU with 2 threads, timed as
`jax_models.py` times its workloads (no padding: eager runs each
length as it comes).

Usage: python torch_big_models.py WORKLOAD [STEPS]   (WORKLOAD resnet50 or
gpt2_train; benches/peers/python_torch.sh's Python). Prints one line

    RESULT <workload> torch first_ms=<f> step_ms=<f> cpu_ms=<f> compile_ms=0 rss_mb=<f>
"""

import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(2)


def timed(step, steps):
    t = time.perf_counter()
    step(0)
    first = (time.perf_counter() - t) * 1e3
    for i in range(1, 4):
        step(i)
    times = []
    cpu = time.process_time()
    for i in range(steps):
        t = time.perf_counter()
        step(1 + i % steps)
        times.append((time.perf_counter() - t) * 1e3)
    cpu = (time.process_time() - cpu) * 1e3 / steps
    times.sort()
    return first, times[len(times) // 2], cpu


def run_resnet50(steps):
    import torchvision

    torch.manual_seed(0)
    net = torchvision.models.resnet50(num_classes=1000).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    data = [(torch.from_numpy(rng.standard_normal((8, 3, 112, 112), dtype=np.float32)),
             torch.from_numpy(rng.integers(0, 1000, 8))) for _ in range(steps + 1)]

    def step(i):
        x, y = data[i]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return timed(step, steps)


def gpt2_data(i, vocab=50257):
    """Step i's batch as `big.rs` makes it: [4, len] tokens and targets."""
    length = 32 + (i * 37) % 97
    token = lambda b, j: (1000 + 7919 * (i * 131 + b * 17 + j)) % vocab
    tokens = [[token(b, j) for j in range(length)] for b in range(4)]
    targets = [[token(b, j) for j in range(1, length + 1)] for b in range(4)]
    return torch.tensor(tokens), torch.tensor(targets)


def run_gpt2_train(steps):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    net = GPT2LMHeadModel(config).train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, weight_decay=0.01)
    data = [gpt2_data(i) for i in range(steps + 1)]

    def step(i):
        tokens, targets = data[i]
        opt.zero_grad(set_to_none=True)
        logits = net(tokens).logits
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        opt.step()
        return loss.item()

    return timed(step, steps)


def main():
    workload = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    run = {"resnet50": run_resnet50, "gpt2_train": run_gpt2_train}[workload]
    first, step, cpu = run(steps)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RESULT {workload} torch first_ms={first:.2f} step_ms={step:.3f} cpu_ms={cpu:.3f} "
          f"compile_ms=0 rss_mb={rss:.0f}")


if __name__ == "__main__":
    main()
