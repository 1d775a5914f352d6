"""Writes a GPT-2 small (124M parameters: 12 layers, 12 heads, n_embd 768,
vocab 50257, n_positions 1024) with random weights for the GPT-2 decoding
benchmarks: transformers' own initialization after `torch.manual_seed(0)`,
saved as transformers saves it (`config.json`, `model.safetensors`).

Usage: python gpt2_make.py OUT_DIR   (with benches/peers/python_torch.sh's
Python). Does nothing when OUT_DIR already has both files.
"""

import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

out = sys.argv[1]
if all(os.path.exists(os.path.join(out, f)) for f in ("config.json", "model.safetensors")):
    print(f"{out}: already there", file=sys.stderr)
    sys.exit(0)
torch.manual_seed(0)
GPT2LMHeadModel(GPT2Config()).save_pretrained(out, safe_serialization=True)
print(f"{out}: written", file=sys.stderr)
