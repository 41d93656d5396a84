"""The device script of issue 20: EAServe serving live under SM sharing, and fidelity on new trials.

Usage (repository root)::

    python3 bench/gpu/serve_check.py --out "$OUT"              # on the H200, ~420 s
    python3 bench/gpu/serve_check.py --dry-run --out /tmp/x    # same steps, CPU, tiny model

Sections, in order, each one or more ``easerve`` commands under a cap
(bench/gpu/serve_plan.py, bench/gpu/serve_steps.py):

* calibrate: ``easerve calibrate --device cuda`` (stages in isolation, the
  SM-share table on green-context levels, and the device sharing: k processes
  running stage work at once, nothing fitted to trials);
* a, serve: ``easerve validate`` of EAServe with local Prefill (s = 0.5) under
  the dynamic, static and time-slice partitioners, open loop at a rate near
  the simulated capacity; per mode throughput, goodput, P99 TTFT/TPOT, and the
  SM split of every micro-batch from the stage log;
* b, fidelity: ``easerve validate`` on new trials of b1, b4 and a local-Prefill
  dynamic deployment; if a bar is missed, ``easerve calibrate --from-runs``
  and a further new set (another workload seed), both reported;
* d, encode call: ``python -m bench.gpu.encode_call`` per family;
* kernels: ``python -m bench.gpu.kernels``, GEMM and attention at a dozen
  sizes against the ``measured`` (h200_sxm) and fitted-roofline prices;
* c, search: ``easerve search ... --confirm`` in full if the time holds it,
  else reduced, cut at its cap (a cut confirmation writes its partial report).

Files under ``--out`` (at most 8, bench/gpu/serve_plan.py ``OUT_FILES``) are
rewritten after every step, so a cut run returns what it has.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gpu import serve_sections  # noqa: E402
from bench.gpu.serve_plan import dry_plan, full_plan  # noqa: E402
from bench.gpu.serve_sections import Check  # noqa: E402
from bench.gpu.serve_steps import RUNNERS, Runner, prestart_forkserver  # noqa: E402
from live.gpu.timing import Deadline  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model, a few requests per trial")
    parser.add_argument("--out", default=None, help="output folder (default: $OUT, else runs/serve_check)")
    parser.add_argument("--runner", choices=RUNNERS, default=None,
                        help="how steps run (default: subprocess on the device, inprocess for --dry-run)")
    parser.add_argument("--keep-work", action="store_true", help="keep the step folders (printed at the end)")
    args = parser.parse_args(argv)
    out = Path(args.out or os.environ.get("OUT") or ROOT / "runs" / "serve_check")
    gpu = None if args.dry_run else serve_sections.gpu_label()
    if not args.dry_run and gpu is None:
        print("[serve-check] no CUDA device; use --dry-run on a CPU", file=sys.stderr)
        return 2
    plan = dry_plan() if args.dry_run else full_plan(str(gpu))
    mode = args.runner or ("inprocess" if args.dry_run else "subprocess")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="serve-check-"))
    faulthandler.dump_traceback_later(plan.total_budget_s + 40, exit=True)  # a hang still ends the run
    if mode == "inprocess":
        prestart_forkserver()
    runner = Runner(mode=mode, log_path=out / "log.txt", cwd=ROOT)
    check = Check(plan, out=out, work=work, runner=runner, deadline=Deadline.after(plan.total_budget_s))
    t0 = time.monotonic()
    try:
        check.start()
        profile = check.calibrate()
        if profile is not None:
            check.serve(profile)
            check.fidelity(profile)
        check.encode_call()
        check.kernels()
        check.search()
    finally:
        check.finish(wall_s=time.monotonic() - t0)
        faulthandler.cancel_dump_traceback_later()
        if args.keep_work:
            print(f"[serve-check] step folders kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if check.all_ok() else 1


if __name__ == "__main__":
    sys.exit(main())
