#!/usr/bin/env bash
# The accelerator table: train step, forward (what `predict` runs) and the BREPS attack on a GPU.
#
#   bash benchmarks/device.sh            # on a machine whose python has CUDA jax (+ torch)
#   DEVICE=cpu bash benchmarks/device.sh --quick   # dry run of the same script on CPU
#
# Needs: jax with a CUDA plugin, flax, optax, ml_collections, scikit-image, opencv and, for the
# PyTorch column, torch with CUDA (the repo is put on PYTHONPATH; nothing is installed). Prints
# the vs_torch table (images/s, JAX / best torch, compile s, device peak memory) for HRNet-18s
# and the EfficientNet-Lite0 segmenter, then the attack cost of the shipped checkpoint and the
# end-to-end predict latency on photos up to 4000x3000 (benchmarks/predict_latency.py).
# Writes every result to ${OUT:-results/device}/.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-gpu}
QUICK=()
[[ "${1:-}" == "--quick" ]] && QUICK=(--quick)
DEST=${OUT:-results/device}
mkdir -p "$DEST"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [[ "$DEVICE" == gpu ]]; then
  "$PYTHON" -c "import jax; assert jax.default_backend() == 'gpu', f'no GPU for JAX: {jax.devices()}'"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
"$PYTHON" -c "import jax, jaxlib; print('jax', jax.__version__, jax.devices())"
echo "== forward and train step, JAX vs PyTorch ($DEVICE)"
"$PYTHON" benchmarks/vs_torch.py --device "$DEVICE" --plain "${QUICK[@]}" \
  --json "$DEST/vs_torch_$DEVICE.json" 2>&1 | tee "$DEST/vs_torch_$DEVICE.txt"
echo "== BREPS attack ($DEVICE)"
"$PYTHON" benchmarks/breps.py "${QUICK[@]}" 2>&1 | tee "$DEST/breps_$DEVICE.txt"
echo "== predict end to end, photos of several sizes ($DEVICE)"
"$PYTHON" benchmarks/predict_latency.py "${QUICK[@]}" 2>&1 | tee "$DEST/predict_$DEVICE.txt"
