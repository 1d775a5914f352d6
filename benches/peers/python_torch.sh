#!/usr/bin/env bash
# Prints the path of a Python that has torch, torchvision, transformers and
# safetensors (for gpt2_make.py, gpt2_hf.py, torch_mask_rcnn.py and
# torch_big_models.py): $PYTHON_TORCH when set, else the
# benchmarks' own venv (benches/peers/.venv-torch), made and given the
# pinned versions from PyPI on first use. Everything it installs stays out
# of git.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${PYTHON_TORCH:-}" ]; then
  echo "$PYTHON_TORCH"
  exit 0
fi
venv=benches/peers/.venv-torch
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, torchvision, transformers, safetensors" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet torch==2.15.0 torchvision==0.29.2 transformers==5.24.0 numpy==2.4.6 safetensors==0.8.0 >&2
fi
echo "$PWD/$venv/bin/python"
