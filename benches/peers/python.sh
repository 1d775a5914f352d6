#!/usr/bin/env bash
# Prints the path of a Python that has JAX: $PYTHON when set, else the
# benchmarks' own venv (benches/peers/.venv), made and given jax and
# safetensors (for gpt2_jax.py) from PyPI on first use. Everything it
# installs stays out of git.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${PYTHON:-}" ]; then
  echo "$PYTHON"
  exit 0
fi
venv=benches/peers/.venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import jax, safetensors" 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet jax safetensors >&2
fi
echo "$PWD/$venv/bin/python"
