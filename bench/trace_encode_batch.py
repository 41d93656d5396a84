"""Why a small encode batch carries a trace's bursts: one deployment at several B, stage by stage.

On the Azure traces the trace-planned table picks ``B2`` where the
Poisson-planned one picked ``B4``-``B18`` (docs/results/controller_trace_azure).
This runs the trace-rate shift's stream on one allocation (default the
tables' ``E2x2 P0x2 D1x4 s0``: every prefill local on the encoders, which
hold the LM) at each ``--batches`` B, static, as static-high runs, and prints
per B: attainment (moderate SLO), TTFT median, the median waits before
encoding and between encoding and local Prefill, the encode batch sizes run,
the mean SM share an encode batch kept (the SM-share table's, by batch size)
and the local Prefill's token throughput (docs/controller.md, "The
trace-rate shift"). ``--poisson``: also each B's cross-check score (mean
goodput over two Poisson streams one phase long) at each phase's rate, the
streams a Poisson-planned table is chosen on (on the setup's own SM-share
table, as the cross-check scores, whatever ``--encode-share`` says). ``--encode-share X``: every
phase's SM-share table replaced by one that keeps X of the SMs for an encode
batch of any size (a what-if on the table's rule).

Run: ``.venv/bin/python bench/trace_encode_batch.py [--trace FILE --trace-format azure]
[--trace-load F] [--allocation "E2x2 P0x2 D1x4 s0"] [--batches 2,4,8] [--poisson] [--encode-share X]``
(without ``--trace``: the built-in synthetic stream).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from easerve.experiments import mix_control  # noqa: E402
from easerve.experiments.mix_flags import shifts_of, trace_load_of  # noqa: E402
from easerve.experiments.plan_tables import segment_goodput  # noqa: E402
from easerve.experiments.shift_control import simulate_system  # noqa: E402
from easerve.experiments.shifts import stream  # noqa: E402
from easerve_core.deployment import Deployment  # noqa: E402
from easerve_core.slo import meets_slo, ttft_s  # noqa: E402
from easerve_core.sm_share import SMShareTable  # noqa: E402

_ALLOCATION = re.compile(r"E(\d+)x(\d+) P(\d+)x(\d+) D(\d+)x(\d+) s([0-9.]+)")


def deployment(base: Deployment, allocation: str, batch: int, rate_hint_hz: float) -> Deployment:
    """``base`` with ``allocation`` (``E2x2 P0x2 D1x4 s0``), at most ``batch`` requests an encode."""
    match = _ALLOCATION.fullmatch(allocation.strip())
    if match is None:
        raise ValueError(f"--allocation: expected like 'E2x2 P0x2 D1x4 s0', got {allocation!r}")
    e, et, p, pt, d, dt = (int(g) for g in match.groups()[:6])
    return Deployment.from_dict({
        **base.to_dict(), "encode": {"num_workers": e, "tp": et}, "prefill": {"num_workers": p, "tp": pt},
        "decode": {"num_workers": d, "tp": dt}, "remote_fraction": float(match.group(7)),
        "max_encode_batch": batch, "rate_hint_hz": rate_hint_hz})


def rows(trace: str | None, trace_format: str, load: float, allocation: str,
         batches: list[int], poisson: bool = False, encode_share: float | None = None
         ) -> list[dict[str, object]]:
    shift = shifts_of(None if trace else "trace-rate", trace=trace, trace_format=trace_format,
                      trace_load=load)[0]
    setups = mix_control.phase_setups(shift)
    rates = mix_control.phase_rates(shift, setups)
    requests = stream(shift, rates, seed=0)
    setup = setups[shift.phases[0].mix]
    tables = tuple((p.start_s, setups[p.mix].plan.sm_table if encode_share is None
                    else SMShareTable({1: encode_share})) for p in shift.phases)
    span_s = shift.phases[0].duration_s
    out = []
    for batch in batches:
        dep = deployment(setup.deployment, allocation, batch, max(rates))
        result = simulate_system(setup, dep, requests, None, seed=0, moves=mix_control.MOVES,
                                 sm_tables=tables)
        rec, log = result.records, result.stage_log
        enc, pre = log[log["stage"] == "encode"], log[log["stage"] == "local-prefill"]
        out.append({
            "B": batch,
            "attainment": round(float(meets_slo(rec, setup.slos["moderate"]).mean()), 3),
            "ttft_p50_s": round(float(ttft_s(rec).median()), 2),
            "wait_encode_p50_s": round(float((rec["encode_start_s"] - rec["arrival_s"]).median()), 2),
            "wait_prefill_p50_s": round(float((rec["prefill_start_s"] - rec["encode_end_s"]).median()), 2),
            "encode_batches": enc["batch_size"].value_counts().sort_index().to_dict(),
            "encode_share": round(float(enc["sm_share"].mean()), 3),
            "prefill_tok_s": round(float(pre["tokens"].sum() / (pre["end_s"] - pre["start_s"]).sum()))
            if len(pre) else 0,
            **({f"poisson_goodput_{r}": round(segment_goodput(setup, dep, r, segment_s=span_s), 3)
                for r in sorted(set(rates))} if poisson else {}),
        })
    return out


def _batches(text: str) -> list[int]:
    try:
        batches = [int(b) for b in text.split(",")]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        raise ValueError(f"--batches: whole numbers >= 1, comma-separated, got {text!r}")
    return batches


def _share(text: str) -> float:
    try:
        share = float(text)
    except ValueError:
        share = float("nan")
    if not 0 < share <= 1:
        raise ValueError(f"--encode-share: a fraction in (0, 1], got {text!r}")
    return share


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace")
    parser.add_argument("--trace-format", default="azure")
    parser.add_argument("--trace-load")
    parser.add_argument("--allocation", default="E2x2 P0x2 D1x4 s0")
    parser.add_argument("--batches", default="2,4,8")
    parser.add_argument("--poisson", action="store_true")
    parser.add_argument("--encode-share")
    args = parser.parse_args(argv)
    try:
        if args.trace_load is not None and args.trace is None:
            raise ValueError("--trace-load: goes with --trace (the built-in stream has its own scale)")
        load, batches = trace_load_of(args.trace_load), _batches(args.batches)
        share = None if args.encode_share is None else _share(args.encode_share)
        table = rows(args.trace, args.trace_format, load, args.allocation, batches, args.poisson, share)
    except ValueError as exc:
        print(f"trace_encode_batch: error: {exc}", file=sys.stderr)
        return 2
    for row in table:
        print("  ".join(f"{k} {v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
