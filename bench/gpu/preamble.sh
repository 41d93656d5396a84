# Sourced by the device wrappers that run the live executor (run_live_check.sh, run_serve_check.sh):
# from the repository root, OUT defaults to runs/$1, PY to $PYTHON or python3, the hub is offline,
# and install_wheels puts the wheels in .whl (git-ignored, carried by the device call: the H200
# image lacks simpy and optuna and has transformers 5.17) into /tmp/site, first on PYTHONPATH.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="${OUT:-$PWD/runs/$1}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PY="${PYTHON:-python3}"
install_wheels() {
  [ -d .whl ] || return 0
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl || exit 3
  export PYTHONPATH="/tmp/site:$PWD"
}
