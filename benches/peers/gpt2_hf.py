"""GPT-2 greedy decoding with Hugging Face transformers on the CPU: the
PyTorch side of the GPT-2 decoding benchmark.

Usage: python gpt2_hf.py MODEL_DIR [--prompt-len 128] [--new 128] [--rounds 3]
(with benches/peers/python_torch.sh's Python; MODEL_DIR from gpt2_make.py).
Prints one line

    RESULT gpt2 hf prefill_ms=<f> ms_per_token=<f> total_ms=<f> cpu_ms_per_token=<f>

`model.generate` (greedy, float32, the default dynamic KV cache, 2 torch
threads, under `torch.inference_mode()`) on one prompt whose token i is
(1000 + 7919 * i) % vocab_size (gpt2_jax.py uses the same). prefill_ms:
`generate` with max_new_tokens=1 (one forward over the prompt and the
first token); total_ms: `generate` of all NEW tokens; ms_per_token:
(total_ms - prefill_ms) / (NEW - 1). Medians over the rounds, after one
warm-up generate. The versions and the first 32 generated tokens go to
stderr, to compare with gpt2_jax.py.
"""

import argparse
import statistics
import sys
import time

import safetensors
import torch
import transformers
from transformers import GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("model_dir")
ap.add_argument("--prompt-len", type=int, default=128)
ap.add_argument("--new", type=int, default=128)
ap.add_argument("--rounds", type=int, default=3)
args = ap.parse_args()

transformers.utils.logging.disable_progress_bar()
torch.set_num_threads(2)
model = GPT2LMHeadModel.from_pretrained(args.model_dir, dtype=torch.float32).eval()
# Exactly NEW tokens: no stop at GPT-2's end-of-text token.
model.generation_config.eos_token_id = None
model.generation_config.pad_token_id = None
vocab = model.config.vocab_size
prompt = torch.tensor([[(1000 + 7919 * i) % vocab for i in range(args.prompt_len)]])
mask = torch.ones_like(prompt)


def generate(new):
    t0, c0 = time.perf_counter(), time.process_time()
    out = model.generate(prompt, attention_mask=mask, do_sample=False,
                         max_new_tokens=new)
    cpu_ms.append((time.process_time() - c0) * 1e3)
    return (time.perf_counter() - t0) * 1e3, out[0, args.prompt_len:]


cpu_ms = []


with torch.inference_mode():
    generate(args.new)
    prefill, total, cpu = [], [], []
    for _ in range(args.rounds):
        prefill.append(generate(1)[0])
        ms, tokens = generate(args.new)
        total.append(ms)
        cpu.append((cpu_ms[-1] - cpu_ms[-2]) / (args.new - 1))

assert len(tokens) == args.new
p, t = statistics.median(prefill), statistics.median(total)
print(f"torch {torch.__version__} transformers {transformers.__version__} "
      f"safetensors {safetensors.__version__} threads {torch.get_num_threads()}", file=sys.stderr)
print("tokens[:32]", tokens[:32].tolist(), file=sys.stderr)
print(f"RESULT gpt2 hf prefill_ms={p:.3f} ms_per_token={(t - p) / (args.new - 1):.3f} total_ms={t:.3f} "
      f"cpu_ms_per_token={statistics.median(cpu):.3f}")
