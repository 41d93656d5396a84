#!/usr/bin/env bash
# The one device command of issue 8 (bench/gpu/README.md): runs the check under a
# hard limit so it always ends inside the device tool's timeout, writing under $OUT.
# Extra arguments go to run_device_check.py (e.g. --dry-run on a CPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/runs/device_check}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>/dev/null || true
timeout -k 10 "${DEVICE_CHECK_LIMIT_S:-450}" "$PY" bench/gpu/run_device_check.py --out "$OUT" "$@"
rc=$?
echo "[device-check] exit $rc; files under $OUT:"
find "$OUT" -type f -printf '%s\t%P\n' | sort -k2
exit $rc
