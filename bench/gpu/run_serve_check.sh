#!/usr/bin/env bash
# The one device command of issue 20 (bench/gpu/README.md, "The serving check"): runs
# bench/gpu/serve_check.py under a hard limit so it always ends inside the device tool's timeout,
# writing at most 8 files under $OUT. The H200 image lacks simpy and optuna and has transformers
# 5.17: the wheels in .whl (git-ignored, carried by the device call) are installed to /tmp/site.
# Extra arguments go to serve_check.py. CPU rehearsal: PYTHON=.venv/bin/python bash $0 --dry-run
set -uo pipefail
. "$(dirname "$0")/preamble.sh" serve_check
case " $* " in *" --dry-run "*) dry=1 ;; *) dry= ;; esac
[ -z "$dry" ] && install_wheels
[ -z "$dry" ] && { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true; }
timeout -k 10 "${SERVE_CHECK_LIMIT_S:-480}" "$PY" bench/gpu/serve_check.py --out "$OUT" "$@"
rc=$?
echo "[serve-check] exit $rc; files under $OUT:"
find "$OUT" -type f -printf '%s\t%P\n' | sort -k2
exit $rc
