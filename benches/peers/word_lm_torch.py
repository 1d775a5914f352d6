"""PyTorch eager's side of benches/word_lm.rs: the same medium word
language model step (nn.LSTM, tied decoder, dropout 0.5, clipping 0.25,
SGD lr 20) on random tokens, 2 threads. Prints one JSON line.

    $(benches/peers/python_torch.sh) benches/peers/word_lm_torch.py [STEPS]
"""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

NTOKEN, NHID, BATCH, BPTT = 10_000, 650, 20, 35
torch.set_num_threads(2)
torch.manual_seed(1)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(NTOKEN, NHID)
        self.drop = nn.Dropout(0.5)
        self.rnn = nn.LSTM(NHID, NHID, 2, dropout=0.5)
        self.decoder = nn.Linear(NHID, NTOKEN)
        self.decoder.weight = self.encoder.weight
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)).view(-1, NTOKEN), hidden


model = Model()
opt = torch.optim.SGD(model.parameters(), lr=20.0)
hidden = (torch.zeros(2, BATCH, NHID), torch.zeros(2, BATCH, NHID))
times = []
g = torch.Generator().manual_seed(7)
for step in range(steps):
    t = torch.randint(0, NTOKEN, ((BPTT + 1) * BATCH,), generator=g)
    x, y = t[: BPTT * BATCH].view(BPTT, BATCH), t[BATCH:]
    start = time.perf_counter()
    opt.zero_grad()
    hidden = tuple(h.detach() for h in hidden)
    logits, hidden = model(x, hidden)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    opt.step()
    loss.item()
    times.append(time.perf_counter() - start)
rest = times[1:]
print(json.dumps({"impl": "torch_eager", "first_step_s": round(times[0], 3),
                  "step_ms": round(1e3 * sum(rest) / max(1, len(rest)), 1), "steps": steps}))
