#!/usr/bin/env bash
# Runs lazyxla's Mask R-CNN training step and torchvision's MaskRCNN
# configured to the same sizes (PyTorch eager, CPU) side by side, in
# alternating rounds on the same batches, and prints each side's medians
# and the ratios lazyxla / PyTorch (below 1: lazyxla is faster). PyTorch
# runs twice a round: with its default threads (one per core) and with one
# thread (`torch_1thread`), which is faster whenever other work shares the
# cores (its threads then wait on each other).
#
# Usage: benches/peers/compare_mask_rcnn.sh [ROUNDS [STEPS]]
# Needs the PJRT CPU plugin (as for the tests: LAZYXLA_PJRT_PATH) and
# torch + torchvision + safetensors: PYTHON names a Python that has them,
# else python_torch.sh makes its own venv (benches/peers/.venv-torch) and
# installs pinned versions from PyPI there once (several GB: PyPI's torch
# wheel brings CUDA libraries even for CPU use).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-3}"
steps="${2:-50}"
python=$(PYTHON_TORCH="${PYTHON:-}" benches/peers/python_torch.sh)
cargo bench --bench mask_rcnn --no-run 2>/dev/null
bin=$(cargo bench --bench mask_rcnn --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1)
out=$(mktemp)
data=$(mktemp --suffix=.safetensors)
for r in $(seq "$rounds"); do
  "$bin" "$steps" "$data" 2>/dev/null | grep '^RESULT' >>"$out"
  "$python" benches/peers/torch_mask_rcnn.py "$data" "$steps" | grep '^RESULT' >>"$out"
  OMP_NUM_THREADS=1 "$python" benches/peers/torch_mask_rcnn.py "$data" "$steps" \
    | grep '^RESULT' | sed 's/ torch / torch_1thread /' >>"$out"
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r in rows:
    vals = dict(kv.split("=") for kv in r[3:])
    by.setdefault(r[2], []).append({k: float(v) for k, v in vals.items()})
med = {side: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for side, runs in by.items()}
for side, m in med.items():
    print(f"mask_rcnn {side:13} first {m['first_ms']:9.1f} ms  step {m['step_ms']:8.2f} ms  "
          f"cpu {m['cpu_ms']:8.2f} ms/step  compiles {m['compiles']:.0f}  ({len(by[side])} rounds)")
l = med["lazyxla"]
for side, t in med.items():
    if side != "lazyxla":
        print(f"RATIO mask_rcnn lazyxla/{side}: step {l['step_ms']/t['step_ms']:.2f}x  cpu {l['cpu_ms']/t['cpu_ms']:.2f}x")
PY
rm -f "$out" "$data"
