#!/usr/bin/env bash
# The second device command of 2026-11-30 (bench/gpu/RESULTS.md): decode re-measured with a fresh
# fixed-length cache per rep, the split table, the ablation with and without re-joining the whole
# device after each encode, and the CUDA-only tests. Encode and prefill come from the first run.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/runs/device_check}"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
DEVICE_CHECK_LIMIT_S="${DEVICE_CHECK_LIMIT_S:-300}" bash bench/gpu/run_device_check.sh \
  --sections green,decode,ablation --share-tables bench/gpu/results/h200-2026-11-30/summary.json "$@"
rc=$?
if "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
  timeout -k 5 120 "$PY" -m pytest -q -p no:cacheprovider tests/gpu/test_green_cuda.py 2>&1 | tee "$OUT/pytest_gpu.txt"
fi
exit $rc
