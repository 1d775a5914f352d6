#!/usr/bin/env bash
# Runs one bigger workload (resnet50 or gpt2_train, `benches/workloads/
# big.rs`) on lazyxla, JAX (jax_big_models.py) and PyTorch eager
# (torch_big_models.py) in alternating rounds, then lazyxla twice more
# with a fresh persistent compilation cache: the first run fills it
# (`lazyxla_cold`), the second starts warm from it (`lazyxla_warm`).
# Prints each side's medians and the ratios (below 1: lazyxla is better).
#
# Usage: benches/peers/compare_big.sh WORKLOAD [ROUNDS [STEPS]]
# Needs the PJRT CPU plugin (LAZYXLA_PJRT_PATH, as for the tests), and
# makes or reuses the two Python venvs (python.sh, python_torch.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
workload="$1"
rounds="${2:-1}"
steps="${3:-5}"
jax=$(benches/peers/python.sh)
torch=$(benches/peers/python_torch.sh)
cargo bench --bench models --no-run 2>/dev/null
bin=$(cargo bench --bench models --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
out=$(mktemp)
cache=$(mktemp -d)
trap 'rm -rf "$out" "$cache"' EXIT
for r in $(seq "$rounds"); do
  LAZYXLA_CACHE_DIR= "$bin" "$workload" "$steps" 2>/dev/null | grep '^RESULT' >>"$out"
  (cd benches/peers && "$jax" jax_big_models.py "$workload" "$steps") | grep '^RESULT' >>"$out"
  "$torch" benches/peers/torch_big_models.py "$workload" "$steps" | grep '^RESULT' >>"$out"
done
for side in lazyxla_cold lazyxla_warm; do
  LAZYXLA_CACHE_DIR="$cache" "$bin" "$workload" "$steps" 2>/dev/null | grep '^RESULT' \
    | sed "s/ lazyxla / $side /" >>"$out"
done
python3 - "$out" "$workload" <<'PY'
import statistics, sys
by = {}
for r in (l.split() for l in open(sys.argv[1])):
    by.setdefault(r[2], []).append({k: float(v) for k, v in (kv.split("=") for kv in r[3:])})
med = {s: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for s, runs in by.items()}
w = sys.argv[2]
for s, m in med.items():
    print(f"{w} {s:13} first {m['first_ms']:9.0f} ms  step {m['step_ms']:9.1f} ms  "
          f"cpu {m['cpu_ms']:9.1f} ms/step  compile {m['compile_ms']:8.0f} ms  "
          f"rss {m['rss_mb']:6.0f} MB  compiles {m.get('compiles', 0):.0f}  ({len(by[s])} runs)")
l = med["lazyxla"]
for s in ("jax", "torch"):
    t = med[s]
    print(f"RATIO {w} lazyxla/{s}: step {l['step_ms']/t['step_ms']:.2f}x  "
          f"cpu {l['cpu_ms']/t['cpu_ms']:.2f}x  first {l['first_ms']/t['first_ms']:.2f}x  "
          f"rss {l['rss_mb']/t['rss_mb']:.2f}x")
c, h = med["lazyxla_cold"], med["lazyxla_warm"]
print(f"RATIO {w} warm/cold first step: {h['first_ms']/c['first_ms']:.2f}x "
      f"({h['first_ms']:.0f} ms against {c['first_ms']:.0f} ms)")
PY
