#!/usr/bin/env bash
# lazyxla's PJRT tests and model steps on an NVIDIA GPU through JAX's CUDA
# PJRT plugin (`jax-cuda13-pjrt`), with JAX's same steps alternating, on a
# machine with no Rust toolchain: build the binaries elsewhere and copy
# them into BIN (default .devbin):
#   cargo test --release --no-run --test pjrt_ffi --test pjrt_backend \
#     --test ops_dot --test ops_conv --test training --test dynamic_acceptance \
#     --test matmul_precision
#   cargo bench --bench models --no-run
# then BIN holds each test binary under its test's name and the models
# bench as `models`; BUILT_AT=<the checkout they were built in>. Needs
# python3 with jax and jax-cuda13-pjrt.
set -u
cd "$(dirname "$0")/../.."
bin="${BIN:-.devbin}"
rounds="${ROUNDS:-3}"
nvidia-smi -L
site=$(python3 -c 'import jax_plugins.xla_cuda13 as p, os; print(os.path.dirname(os.path.dirname(os.path.dirname(p.__file__))))')
# The plugin's CUDA libraries, from the nvidia-* wheels beside it.
export LD_LIBRARY_PATH=$(ls -d "$site"/nvidia/*/lib 2>/dev/null | tr '\n' ':')${LD_LIBRARY_PATH:-}
export LAZYXLA_REQUIRE_PJRT=1 PJRT_DEVICE=CUDA LAZYXLA_PJRT_PATH=$site
# Test binaries read fixtures under the checkout they were built in:
# BUILT_AT names it, linked to this checkout when absent here.
built="${BUILT_AT:-}"
if [ -n "$built" ] && [ ! -e "$built" ]; then mkdir -p "$(dirname "$built")" && ln -s "$PWD" "$built"; fi
for t in pjrt_ffi pjrt_backend ops_dot ops_conv training dynamic_acceptance matmul_precision; do
  echo "== $t"
  timeout 120 "$bin/$t" --test-threads 4 2>&1 | grep -E "test result|FAILED|panicked|got .* want"
done
# Each at the same precision of f32 products: lazyxla's default
# ("highest", as PyTorch) against JAX asked for the same, then lazyxla's
# "medium" against JAX's default (TensorFloat-32).
echo "== model steps: lazyxla (CUDA plugin) and JAX, alternating"
for spec in "transformer 60" "transformer_captured 60" "resnet 40" "mlp 100" "detect 300" "detect_captured 300"; do
  set -- $spec
  for r in $(seq "$rounds"); do
    timeout 120 "$bin/models" "$1" "$2" 2>/dev/null | grep '^RESULT' | sed 's/ lazyxla / lazyxla_highest /'
    JAX_DEFAULT_MATMUL_PRECISION=highest JAX_PLATFORMS=cuda timeout 120 python3 benches/peers/jax_models.py "${1%_captured}" "$2" 2>/dev/null | grep '^RESULT' | sed 's/ jax / jax_highest /'
    MATMUL_PRECISION=medium timeout 120 "$bin/models" "$1" "$2" 2>/dev/null | grep '^RESULT' | sed 's/ lazyxla / lazyxla_medium /'
    JAX_PLATFORMS=cuda timeout 120 python3 benches/peers/jax_models.py "${1%_captured}" "$2" 2>/dev/null | grep '^RESULT' | sed 's/ jax / jax_default /'
  done
done
