#!/usr/bin/env bash
# GPT-2 small greedy decoding side by side: lazyxla (benches/generate.rs,
# bucketed bounds and a fixed bound), Hugging Face `generate` (PyTorch
# eager, 2 threads) and a JAX static-cache decode, in alternating rounds;
# prints each side's medians and the ratios to the peers.
#
# Usage: benches/peers/compare_generate.sh [ROUNDS [PROMPT_LEN [NEW]]]
# The model (random weights, transformers' seeded init) is written once to
# $GPT2_DIR (default ~/.cache/lazyxla/gpt2-small). Needs the PJRT CPU
# plugin (LAZYXLA_PJRT_PATH, as for the tests); the peers' Pythons come
# from python.sh (JAX) and python_torch.sh (torch, transformers).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-3}"
prompt="${2:-128}"
new="${3:-128}"
max=$(( prompt + new > 256 ? 1024 : 256 ))
dir="${GPT2_DIR:-$HOME/.cache/lazyxla/gpt2-small}"
torch_py=$(bash benches/peers/python_torch.sh)
jax_py=$(bash benches/peers/python.sh)
"$torch_py" benches/peers/gpt2_make.py "$dir"
cargo bench --bench generate --no-run 2>/dev/null
bin=$(cargo bench --bench generate --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
out=$(mktemp)
for r in $(seq "$rounds"); do
  "$bin" "$dir" --prompt-len "$prompt" --new "$new" --bound "buckets:16..$max" --rounds 3 2>/dev/null | grep '^RESULT' >>"$out"
  "$bin" "$dir" --prompt-len "$prompt" --new "$new" --bound "fixed:$max" --rounds 3 2>/dev/null | grep '^RESULT' | sed 's/ lazyxla / fixed /' >>"$out"
  "$torch_py" benches/peers/gpt2_hf.py "$dir" --prompt-len "$prompt" --new "$new" --rounds 3 2>/dev/null | grep '^RESULT' >>"$out"
  "$jax_py" benches/peers/gpt2_jax.py "$dir" --prompt-len "$prompt" --new "$new" --max-len "$max" --rounds 3 2>/dev/null | grep '^RESULT' >>"$out"
done
python3 - "$out" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    f = line.split()
    by.setdefault(f[2], []).append({k: float(v) for k, v in (kv.split("=") for kv in f[3:])})
med = {s: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for s, rs in by.items()}
for s, m in med.items():
    extra = "".join(f"  {k} {m[k]:g}" for k in ("cpu_ms_per_token", "first_ms", "compiles", "cache_ratio", "compile_ms") if k in m)
    print(f"gpt2 {s:8} prefill {m['prefill_ms']:8.1f} ms  per token {m['ms_per_token']:7.2f} ms{extra}  ({len(by[s])} rounds)")
for s in ("lazyxla", "fixed"):
    for peer in ("hf", "jax"):
        if s in med and peer in med:
            a, b = med[s], med[peer]
            cpu = a.get("cpu_ms_per_token", 0) / b.get("cpu_ms_per_token", float("inf"))
            print(f"RATIO {s}/{peer}: per token {a['ms_per_token']/b['ms_per_token']:.2f}x  prefill {a['prefill_ms']/b['prefill_ms']:.2f}x  CPU per token {cpu:.2f}x")
PY
rm -f "$out"
