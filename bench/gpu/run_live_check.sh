#!/usr/bin/env bash
# Issue 8's fidelity bar on the GPU, the calibration loop of docs/calibration.md on one device:
# calibrate the small Qwen2-Audio, `easerve validate --device cuda` on two one-GPU deployments
# (configs/small_qwen2audio_h200.toml), refit from those live runs, validate again on new trials.
# The H200 image lacks simpy and optuna and has transformers 5.17: the wheels in .whl (ignored by
# git, carried by the device call; bench/gpu/README.md) are installed to /tmp/site first.
# Writes 8 files under $OUT: profile.json, profile-refit.json, log.txt, fidelity{,-refit}.{csv,md}
# and runs.tgz (both validations: every trial's records and stage logs, summaries, plots).
# CPU rehearsal: DEVICE=cpu CONFIG=<light config> REPEATS=1 QUICK=1 bash bench/gpu/run_live_check.sh
set -uo pipefail
. "$(dirname "$0")/preamble.sh" live_check
DEVICE="${DEVICE:-cuda}"
CONFIG="${CONFIG:-configs/small_qwen2audio_h200.toml}"
REPEATS="${REPEATS:-2}"
LOG="$OUT/log.txt"
[ "$DEVICE" = cuda ] && install_wheels
"$PY" -c "import torch, transformers, simpy, optuna; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'cuda', torch.cuda.is_available())" 2>&1 | tee "$LOG"
W="$(mktemp -d)"
quick=(); [ -n "${QUICK:-}" ] && quick=(--quick)
step() { echo "[live-check] $(date -u +%T) $*" | tee -a "$LOG"; }

step calibrate
timeout -k 5 "${CALIBRATE_LIMIT_S:-100}" "$PY" -m easerve calibrate --model qwen2-audio --size small \
  --device "$DEVICE" "${quick[@]}" --out "$OUT/profile.json" 2>&1 | tee -a "$LOG"
[ -f "$OUT/profile.json" ] || { step "calibrate wrote no profile"; exit 1; }

validate() {  # $1 profile, $2 folder name, $3 suffix of the copied tables
  step "validate $2"
  timeout -k 5 "${VALIDATE_LIMIT_S:-110}" "$PY" -m easerve validate "$CONFIG" --device "$DEVICE" \
    --profile "$1" --out "$W/$2" --repeats "$REPEATS" --host-cores profile \
    --sweep b1-s1-none b4-s1-none 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  for f in csv md; do [ -f "$W/$2/fidelity.$f" ] && cp "$W/$2/fidelity.$f" "$OUT/fidelity$3.$f"; done
  tar czf "$OUT/runs.tgz" -C "$W" .  # rewritten after each step: a cut run keeps what it made
  return "$rc"
}
validate "$OUT/profile.json" validate ""
rc=$?
if [ "$rc" = 0 ]; then
  step refit
  "$PY" -m easerve calibrate --from-runs "$W"/validate/runs/*/live-* --profile "$OUT/profile.json" \
    --out "$OUT/profile-refit.json" 2>&1 | tee -a "$LOG"
  [ -f "$OUT/profile-refit.json" ] && { validate "$OUT/profile-refit.json" validate-refit "-refit"; rc=$?; }
fi
step "done (exit $rc); files under $OUT:"
find "$OUT" -type f -printf '%s\t%P\n' | sort -k2 | tee -a "$LOG"
exit "$rc"
