#!/usr/bin/env bash
# Runs lazyxla's and torchvision's versions of a vision workload side by
# side, in alternating rounds, and prints each side's medians and the
# ratio lazyxla / torchvision (below 1: lazyxla is faster).
#
# Usage: benches/peers/compare_vision.sh WORKLOAD [ROUNDS [STEPS]]
#   WORKLOAD: nms | roi_align
# Needs the PJRT CPU plugin (as for the tests: LAZYXLA_PJRT_PATH) and
# torchvision: PYTHON names a Python that has it (for instance the venv
# of tests/fixtures/README.md), else the benchmark makes its own venv
# (benches/peers/.venv) and installs torch and torchvision there once.
set -euo pipefail
cd "$(dirname "$0")/../.."
workload="${1:?workload: nms | roi_align}"
rounds="${2:-3}"
steps="${3:-20}"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  venv=benches/peers/.venv
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -c "import torchvision" 2>/dev/null || "$venv/bin/pip" install --quiet torch torchvision numpy
  python="$venv/bin/python"
fi
bin=$(cargo bench --bench vision --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
out=$(mktemp)
for r in $(seq "$rounds"); do
  "$bin" "$workload" "$steps" 2>/dev/null | grep '^RESULT' >>"$out"
  "$python" benches/peers/torchvision_ops.py "$workload" "$steps" | grep '^RESULT' >>"$out"
done
python3 - "$out" "$workload" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r in rows:
    vals = dict(kv.split("=") for kv in r[3:])
    by.setdefault(r[2], []).append({k: float(v) for k, v in vals.items()})
med = {side: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for side, runs in by.items()}
for side, m in med.items():
    print(f"{sys.argv[2]:10} {side:12} first {m['first_ms']:9.1f} ms  step {m['step_ms']:8.3f} ms  cpu {m['cpu_ms']:8.3f} ms/step  check {m['check']:.0f}  ({len(by[side])} rounds)")
l, t = med["lazyxla"], med["torchvision"]
assert l["check"] == t["check"], "the two sides computed different things"
print(f"RATIO {sys.argv[2]} lazyxla/torchvision: step {l['step_ms']/t['step_ms']:.2f}x  cpu {l['cpu_ms']/t['cpu_ms']:.2f}x")
PY
rm -f "$out"
