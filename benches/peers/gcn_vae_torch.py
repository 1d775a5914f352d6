"""PyTorch eager's side of benches/small_models.rs: the training steps of
the GCN and VAE ports (examples/models/gcn.rs, vae.rs) written the same
way in PyTorch (the GCN without PyG: gcn_norm, index_select and
index_add), 2 threads, the same data from the same generators (a
xorshift64 stream, as the Rust side's `Rng`). Prints

    RESULT <workload> torch_eager first_ms=<f> step_ms=<f> cpu_ms=<f> data=<check>

first_ms: the first step; step_ms: the median step after three warm-up
steps (upload of the step's inputs, the step, the loss read); cpu_ms:
process CPU time per timed step; data: the generated data's checksum, as
the Rust side prints it (equal: the same data).

    $(benches/peers/python_torch.sh) benches/peers/gcn_vae_torch.py gcn|vae [STEPS]
"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)
MASK = (1 << 64) - 1
CHECK = [""]


class Rng:
    """xorshift64, as `Rng` in examples/models/gcn.rs and vae.rs."""

    def __init__(self, seed):
        self.s = max(seed, 1)

    def next_f64(self):
        s = self.s
        s ^= (s << 13) & MASK
        s ^= s >> 7
        s ^= (s << 17) & MASK
        self.s = s
        return (s >> 11) / float(1 << 53)

    def below(self, n):
        return int(self.next_f64() * n)


# --- GCN (examples/models/gcn.rs) -------------------------------------------

NODES, FEATURES, CLASSES, EDGES, WORDS, HIDDEN = 2708, 1433, 7, 5278, 18, 16


def synthetic_graph(seed):
    r = Rng(seed)
    labels = [r.below(CLASSES) for _ in range(NODES)]
    block = FEATURES // CLASSES
    features = torch.zeros(NODES, FEATURES)
    for i, c in enumerate(labels):
        for _ in range(WORDS):
            w = c * block + r.below(block) if r.next_f64() < 0.3 else r.below(FEATURES)
            features[i, w] = 1.0
    by_class = [[] for _ in range(CLASSES)]
    for i, c in enumerate(labels):
        by_class[c].append(i)
    seen, src, dst = set(), [], []
    while len(seen) < EDGES:
        u = r.below(NODES)
        if r.next_f64() < 0.8:
            same = by_class[labels[u]]
            v = same[r.below(len(same))]
        else:
            v = r.below(NODES)
        key = (min(u, v), max(u, v))
        if u != v and key not in seen:
            seen.add(key)
            src += [u, v]
            dst += [v, u]
    test_start = NODES - 1000
    train = sorted(i for cls in by_class for i in [j for j in cls if j < test_start][:20])
    return features, torch.tensor(labels), torch.tensor([src, dst]), torch.tensor(train)


def gcn_norm(edge_index, n):
    loop = torch.arange(n)
    row = torch.cat([edge_index[0], loop])
    col = torch.cat([edge_index[1], loop])
    deg = torch.zeros(n).index_add(0, col, torch.ones(col.numel()))
    dis = deg.pow(-0.5)
    dis = dis.masked_fill(dis.isinf(), 0.0)
    return row, col, dis[row] * dis[col]


class GCNConv(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o, bias=False)
        nn.init.xavier_uniform_(self.lin.weight)
        self.bias = nn.Parameter(torch.zeros(o))

    def forward(self, x, row, col, weight):
        h = self.lin(x)
        return torch.zeros_like(h).index_add(0, col, h[row] * weight[:, None]) + self.bias


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(FEATURES, HIDDEN)
        self.conv2 = GCNConv(HIDDEN, CLASSES)

    def forward(self, x, edge_index):
        if self.training:  # PyG's dropout_edge, p = 0.2
            edge_index = edge_index[:, torch.rand(edge_index.shape[1]) >= 0.2]
        g = gcn_norm(edge_index, x.shape[0])
        h = F.relu(self.conv1(F.dropout(x, 0.5, self.training), *g))
        h = self.conv2(F.dropout(h, 0.5, self.training), *g)
        return F.log_softmax(h, 1)


def graph_check(x, edge_index, train):
    h = 0
    for i, (s, d) in enumerate(edge_index.t().tolist()):
        h = (h + (i + 1) * (s * NODES + d)) % 1_000_000_007
    return str(h + int((x != 0).sum()) + int(train.sum()))


def gcn_step():
    torch.manual_seed(42)
    x, labels, edge_index, train = synthetic_graph(2024)
    CHECK[0] = graph_check(x, edge_index, train)
    train_y = labels[train]
    model = GCN()
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def step(_):
        opt.zero_grad()
        out = model(x, edge_index)
        loss = F.nll_loss(out[train], train_y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


# --- VAE (examples/models/vae.rs) -------------------------------------------

SIDE, BATCH = 28, 64


def images(count, seed):
    r = Rng(seed)
    out = torch.zeros(count, SIDE * SIDE)
    for k in range(count):
        img = [0.0] * (SIDE * SIDE)
        for _ in range(1 + r.below(3)):
            disc = r.below(2) == 0
            cx, cy = 4 + r.below(20), 4 + r.below(20)
            rx, ry = 2 + r.below(6), 2 + r.below(6)
            v = 0.5 + 0.5 * r.next_f64()
            for y in range(SIDE):
                for x in range(SIDE):
                    dx, dy = abs(x - cx), abs(y - cy)
                    inside = dx * dx + dy * dy <= rx * rx if disc else (dx <= rx and dy <= ry)
                    if inside:
                        img[y * SIDE + x] = max(img[y * SIDE + x], v)
        out[k] = torch.tensor(img, dtype=torch.float64).float()
    return out.view(count, 1, SIDE, SIDE)


class Vae(nn.Module):
    def __init__(self, c1=32, c2=64, latent=20):
        super().__init__()
        self.c2 = c2
        self.conv1 = nn.Conv2d(1, c1, 4, 2, 1)
        self.conv2 = nn.Conv2d(c1, c2, 4, 2, 1)
        self.fc_mu = nn.Linear(c2 * 49, latent)
        self.fc_logvar = nn.Linear(c2 * 49, latent)
        self.fc_dec = nn.Linear(latent, c2 * 49)
        self.deconv1 = nn.ConvTranspose2d(c2, c1, 4, 2, 1)
        self.deconv2 = nn.ConvTranspose2d(c1, 1, 4, 2, 1)

    def forward(self, x):
        h = F.relu(self.conv1(x))
        h = F.relu(self.conv2(h)).flatten(1)
        mu, logvar = self.fc_mu(h), self.fc_logvar(h)
        std = torch.exp(0.5 * logvar)
        z = mu + torch.randn_like(std) * std
        h = F.relu(self.fc_dec(z)).view(-1, self.c2, 7, 7)
        h = F.relu(self.deconv1(h))
        return torch.sigmoid(self.deconv2(h)), mu, logvar


def vae_step():
    data = images(8 * BATCH, 1).numpy()
    CHECK[0] = f"{data.astype('float64').sum():.3f}"
    torch.manual_seed(7)
    model = Vae()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(i):
        k = i % 8
        x = torch.from_numpy(data[k * BATCH:(k + 1) * BATCH].copy())
        opt.zero_grad()
        recon, mu, logvar = model(x)
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = bce + kld
        loss.backward()
        opt.step()
        return loss.item()

    return step


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
        step(4 + i)
        times.append((time.perf_counter() - t) * 1e3)
    cpu = (time.process_time() - cpu) * 1e3 / steps
    times.sort()
    return first, times[len(times) // 2], cpu


def main():
    workload = sys.argv[1] if len(sys.argv) > 1 else "gcn"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    make = {"gcn": gcn_step, "vae": vae_step}.get(workload)
    if make is None:
        sys.exit(f"unknown workload {workload}: use gcn or vae")
    first, step, cpu = timed(make(), steps)
    print(f"RESULT {workload} torch_eager first_ms={first:.2f} step_ms={step:.3f} cpu_ms={cpu:.3f} data={CHECK[0]}")


if __name__ == "__main__":
    main()
