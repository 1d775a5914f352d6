#!/usr/bin/env bash
# Runs lazyxla's and JAX's versions of a workload side by side, in
# alternating rounds, and prints each side's medians and the ratios
# lazyxla / JAX (below 1: lazyxla is faster): the ratio of the medians,
# and the median of each round's own ratio (the rounds ran back to back).
#
# Usage: benches/peers/compare.sh WORKLOAD [ROUNDS [STEPS]]
#   WORKLOAD: topk | resnet | transformer | mlp | detect | zone, or
#   detect_captured | zone_captured | transformer_captured (lazyxla's
#   step captured with lazyxla::capture, against the same jitted JAX step)
# BASELINE=<models bench binary> adds a third side, "before": another
# build's `models` bench (say main's), run in the same rounds.
# Needs the PJRT CPU plugin (as for the tests: LAZYXLA_PJRT_PATH) and
# JAX: PYTHON names a Python that has it, else the benchmark makes its own
# venv (benches/peers/.venv) and installs jax from PyPI there once.
set -euo pipefail
cd "$(dirname "$0")/../.."
workload="${1:?workload: topk | resnet | transformer | mlp | detect | zone | detect_captured | zone_captured}"
jax_workload="${workload%_captured}"
rounds="${2:-5}"
steps="${3:-50}"
python=$(bash benches/peers/python.sh)
cargo bench --bench models --no-run 2>/dev/null
bin=$(cargo bench --bench models --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
out=$(mktemp)
for r in $(seq "$rounds"); do
  "$bin" "$workload" "$steps" 2>/dev/null | grep '^RESULT' >>"$out"
  if [ -n "${BASELINE:-}" ]; then
    ("$BASELINE" "$workload" "$steps" 2>/dev/null || true) | grep '^RESULT' | sed 's/ lazyxla / before /' >>"$out" || true
  fi
  "$python" benches/peers/jax_models.py "$jax_workload" "$steps" | grep '^RESULT' >>"$out"
done
python3 - "$out" "$workload" <<'PY'
import re, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r in rows:
    vals = dict(kv.split("=") for kv in r[3:])
    by.setdefault(r[2], []).append({k: float(v) for k, v in vals.items()})
med = {side: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for side, runs in by.items()}
for side, m in med.items():
    print(f"{sys.argv[2]:12} {side:8} first {m['first_ms']:9.1f} ms  step {m['step_ms']:8.3f} ms  cpu {m['cpu_ms']:8.3f} ms/step  ({len(by[side])} rounds)")
j = med["jax"]
for side in ("before", "lazyxla"):
    if side in med:
        l = med[side]
        # Round k of each side ran back to back: the median of the rounds'
        # own ratios is steadier than the ratio of medians when the
        # machine's speed drifts between rounds.
        pairs = list(zip(by[side], by["jax"]))
        paired = {k: statistics.median(a[k] / b[k] for a, b in pairs) for k in ("step_ms", "cpu_ms")}
        print(f"RATIO {sys.argv[2]} {side}/jax: step {l['step_ms']/j['step_ms']:.2f}x  cpu {l['cpu_ms']/j['cpu_ms']:.2f}x  first step {l['first_ms']/j['first_ms']:.2f}x"
              f"  (round by round: step {paired['step_ms']:.2f}x, cpu {paired['cpu_ms']:.2f}x)")
PY
rm -f "$out"
