#!/usr/bin/env bash
# Runs lazyxla's GCN or VAE training step (benches/small_models.rs) and
# the same step in PyTorch eager (gcn_vae_torch.py, 2 threads) side by
# side in alternating rounds, and prints each side's medians over the
# rounds, the ratios lazyxla / PyTorch of the medians and the median of
# each round's own ratio (below 1: lazyxla is faster), wall and CPU time.
# Both sides print a checksum of their generated data, which must agree.
#
# Usage: benches/peers/compare_small_models.sh gcn|vae [ROUNDS [STEPS]]
# Needs the PJRT CPU plugin (as for the tests: LAZYXLA_PJRT_PATH) and
# torch: PYTHON names a Python that has it, else python_torch.sh makes
# its own venv (benches/peers/.venv-torch) once.
set -euo pipefail
cd "$(dirname "$0")/../.."
workload="${1:-gcn}"
rounds="${2:-3}"
steps="${3:-30}"
python=$(PYTHON_TORCH="${PYTHON:-}" benches/peers/python_torch.sh)
bin=$(cargo bench --bench small_models --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
out=$(mktemp)
for r in $(seq "$rounds"); do
  "$bin" "$workload" "$steps" 2>/dev/null | grep '^RESULT' >>"$out"
  "$python" benches/peers/gcn_vae_torch.py "$workload" "$steps" | grep '^RESULT' >>"$out"
done
python3 - "$out" "$workload" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
workload = sys.argv[2]
by, data = {}, set()
for r in rows:
    vals = dict(kv.split("=") for kv in r[3:])
    data.add(vals.pop("data"))
    by.setdefault(r[2], []).append({k: float(v) for k, v in vals.items()})
if len(data) != 1:
    sys.exit(f"the two sides generated different data: {sorted(data)}")
keys = ("first_ms", "step_ms", "cpu_ms")
med = {s: {k: statistics.median(x[k] for x in runs) for k in keys} for s, runs in by.items()}
for side, m in med.items():
    print(f"{workload} {side:12} first {m['first_ms']:9.1f} ms  step {m['step_ms']:8.2f} ms  "
          f"cpu {m['cpu_ms']:8.2f} ms/step  ({len(by[side])} rounds)")
l, t = by["lazyxla"], by["torch_eager"]
rr = {k: statistics.median(a[k] / b[k] for a, b in zip(l, t)) for k in keys}
m = {k: med["lazyxla"][k] / med["torch_eager"][k] for k in keys}
print(f"RATIO {workload} lazyxla/torch_eager: step {m['step_ms']:.3f}x (round by round {rr['step_ms']:.3f}x)  "
      f"cpu {m['cpu_ms']:.3f}x ({rr['cpu_ms']:.3f}x)  first {m['first_ms']:.2f}x")
PY
rm -f "$out"
