"""The torchvision side of `benches/vision.rs`: the same workloads on the
same data (the same xorshift generator), timed the same way, on the CPU.

Usage: python torchvision_ops.py WORKLOAD [STEPS]   (nms | roi_align)
Prints one line

    RESULT <workload> torchvision first_ms=<f> step_ms=<f> cpu_ms=<f> check=<n>

as the Rust side does (`check`: the number of kept boxes of the first
step; the number of RoIs). Needs torch and torchvision from PyPI.
"""

import statistics
import sys
import time

import numpy as np
import torch
from torchvision.ops import nms, roi_align


def uniform(seed, n):
    """`n` floats k / 2^24 from benches/vision.rs's xorshift."""
    mask = (1 << 64) - 1
    s = ((seed * 0x9E3779B97F4A7C15) & mask) | 1
    out = np.empty(n)
    for i in range(n):
        s ^= (s << 13) & mask
        s ^= s >> 7
        s ^= (s << 17) & mask
        out[i] = (s >> 40) / float(1 << 24)
    return out


def detections(seed, n):
    v = uniform(seed, 5 * n).reshape(n, 5)
    cx, cy = v[:, 0] * 1000.0, v[:, 1] * 1000.0
    w, h = 10.0 + v[:, 2] * 90.0, 10.0 + v[:, 3] * 90.0
    boxes = np.stack([cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0], 1).astype(np.float32)
    return torch.from_numpy(boxes), torch.from_numpy(v[:, 4].astype(np.float32))


def rois(seed, k=256):
    v = uniform(seed + 100, 5 * k).reshape(k, 5)
    x, y = v[:, 0] * 112.0, v[:, 1] * 112.0
    w, h = 4.0 + v[:, 2] * 60.0, 4.0 + v[:, 3] * 60.0
    r = np.stack([np.arange(k) % 2, x, y, x + w, y + h], 1).astype(np.float32)
    return torch.from_numpy(r), torch.from_numpy(v[:, 4] < 0.75)


def timed(steps, step):
    t = time.perf_counter()
    step(0)
    first = (time.perf_counter() - t) * 1e3
    for i in range(1, 4):
        step(i % (steps + 1))
    times = []
    cpu = time.process_time()
    for i in range(steps):
        t = time.perf_counter()
        step(1 + i % steps)
        times.append((time.perf_counter() - t) * 1e3)
    cpu = (time.process_time() - cpu) * 1e3 / steps
    return first, statistics.median(times), cpu


def bench_nms(steps):
    data = [detections(i, 10_000) for i in range(steps + 1)]
    kept = nms(*data[0], 0.5).numel()
    return (*timed(steps, lambda i: nms(*data[i], 0.5).tolist()), kept)


def bench_roi_align(steps):
    feats = [torch.from_numpy(uniform(i, 2 * 32 ** 3).astype(np.float32)).reshape(2, 32, 32, 32)
             for i in range(steps + 1)]
    boxes = [rois(i) for i in range(steps + 1)]

    def step(i):
        x = feats[i].clone().requires_grad_(True)
        r = boxes[i][0][boxes[i][1]]
        b7 = roi_align(x, r, (7, 7), 0.25, 2, False)
        m14 = roi_align(x, r, (14, 14), 0.25, 2, False)
        loss = b7.square().mean() + m14.mean()
        loss.backward()
        return loss.item() + x.grad.sum().item()

    return (*timed(steps, step), int(boxes[0][1].sum()))


def main():
    workload = sys.argv[1] if len(sys.argv) > 1 else "nms"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    first, step, cpu, check = {"nms": bench_nms, "roi_align": bench_roi_align}[workload](steps)
    print(f"RESULT {workload} torchvision first_ms={first:.2f} step_ms={step:.3f} cpu_ms={cpu:.3f} check={check}")


if __name__ == "__main__":
    main()
