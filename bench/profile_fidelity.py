"""Roofline fidelity against a measured kernel database, per GPU and op class, before and after the fit.

For each GPU (default H100 and H200, from aiconfigurator-core's vLLM tables,
read at run time from the installed ``measured`` extra) prints, per op class
(LM GEMM, vision GEMM, context, generation and vision attention, whole
prefill, whole decode step), the median and P90 of |roofline / measured - 1|
with the hand-set constants ("before") and with the constants
``easerve profile fit-roofline`` fits ("after"), and the bars. The op set and
the fit: calibration.roofline_fit; the whole-stage rows compare GPU time (the
fixed per-step overheads left out on both sides) with the measured profile's
op sums, so they check the roofline against the database's ops, not against a
wall clock.

``--bias`` adds, per class, the median of roofline / measured itself (below 1
the roofline is fast). ``--gpu l40s --bias`` is the check of the RTX 6000
Ada's documented constants (outside the database): the L40S is the same AD102
chip, and its "before" column is those hand-set constants on the L40S's spec
(docs/profiles.md, "The roofline fitted").

Run: ``PYTHONPATH=. .venv/bin/python bench/profile_fidelity.py [--gpu h200 h100-sxm] [--engine vllm]
[--bias]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.aiconfigurator import GPU_OF_SYSTEM, load_tables  # noqa: E402
from calibration.roofline_fit import fit_roofline  # noqa: E402

#: the issue's bars on the median after the fit
BARS = {"LM GEMM": 0.08, "context attention": 0.12, "generation attention": 0.12,
        "whole prefill": 0.05, "whole decode step": 0.05}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", nargs="+", default=["h100-sxm", "h200"])
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--bias", action="store_true",
                        help="also print the median roofline / measured per class")
    args = parser.parse_args()
    system_of = {gpu: system for system, gpu in GPU_OF_SYSTEM.items()}
    for gpu in args.gpu:
        tables = load_tables(system_of[gpu], args.engine)
        fit = fit_roofline(gpu, tables)
        print(f"\n{gpu}: {tables.source}")
        print("\n".join(fit.report_lines()))
        after = fit.after.stats()
        verdicts = [f"{c} {after[c][0]:.1%} {'ok' if after[c][0] <= bar else 'MISSES'} (<= {bar:.0%})"
                    for c, bar in BARS.items() if c in after]
        print("bars     " + "; ".join(verdicts))
        if args.bias:
            for side, fid in (("before", fit.before), ("after", fit.after)):
                biases = (f"{c} {median(r):.2f}" for c, r in fid.ratios.items() if r)
                print(f"bias {side:<7}" + "; ".join(biases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
