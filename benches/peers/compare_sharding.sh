#!/usr/bin/env bash
# Runs lazyxla's sharded training step (benches/sharding.rs) and the same
# step in JAX (jax_sharding.py) one after the other, ROUNDS times each
# (each run takes INNER alternating rounds of its layouts), and prints
# per layout the medians over the runs: each side's time against its own
# one-device step (the bench's target: at most 1.2x), and lazyxla / JAX.
#
# Usage: benches/peers/compare_sharding.sh [ROUNDS [INNER]]
# Needs the PJRT CPU plugin (as for the tests: LAZYXLA_PJRT_PATH) and
# JAX (python.sh makes benches/peers/.venv once).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-3}"
inner="${2:-5}"
python=$(benches/peers/python.sh)
bin=$(cargo bench --bench sharding --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
out=$(mktemp)
for r in $(seq "$rounds"); do
  SHARD_ROUNDS="$inner" "$bin" 2>/dev/null | grep '^RESULT' >>"$out"
  "$python" benches/peers/jax_sharding.py "$inner" 2>/dev/null | grep '^RESULT' >>"$out"
done
python3 - "$out" <<'PY'
import re, statistics, sys
by = {}
for line in open(sys.argv[1]):
    side = line.split()[1]
    layout = re.search(r'layout="([^"]*)"', line).group(1)
    vals = dict(re.findall(r'(\w+)=([0-9.]+)', line))
    by.setdefault((side, layout), []).append({k: float(v) for k, v in vals.items()})
med = {k: {f: statistics.median(r[f] for r in rs) for f in rs[0]} for k, rs in by.items()}
print(f"{'layout':18} {'lazyxla ms':>11} {'vs 1 dev':>9} {'JAX ms':>9} {'vs 1 dev':>9} {'lazyxla/JAX':>12} {'(cpu)':>7}")
for layout in ("one device", "fsdp, 4 devices", "dp, 4 devices"):
    a, j = med[("sharding", layout)], med[("jax_sharding", layout)]
    print(f"{layout:18} {a['wall_ms']:11.1f} {a['wall_ratio']:8.2f}x {j['wall_ms']:9.1f} "
          f"{j['wall_ratio']:8.2f}x {a['wall_ms'] / j['wall_ms']:11.2f}x "
          f"{a['cpu_ms'] / j['cpu_ms']:6.2f}x")
PY
rm -f "$out"
