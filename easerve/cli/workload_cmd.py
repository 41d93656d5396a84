"""``easerve workload CONFIG --out FILE``: generate a workload and write it as a trace.

CONFIG is an experiment TOML (its ``[workload]`` table and ``seed`` are
used) or a TOML holding only a ``[workload]`` table. The trace format
follows the suffix of FILE (.csv or .jsonl; see docs/workloads.md). A
``trace`` in the table (with ``trace_format`` azure, burstgpt, mooncake or
easerve) is converted into ours: a public trace's requests take their
multimodal items from the table's mix, drawn with the seed. Raw item sizes
(``images``, ``videos``, ``audio_s``) need the config's ``[model]``: its
spec's processor rule turns them into LM tokens, which the command prints
and the trace holds.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from calibration.sizes import resolve_workload
from easerve.cli.common import add_config, add_out, command_parser
from easerve.cli.outputs import check_file
from easerve.resources import find_config
from easerve_core import checks
from easerve_core.workload import RecordedTrace, WorkloadSpec, generate
from runtime.files import read_toml
from runtime.traces import load_trace, write_trace


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "workload", doc=__doc__, func=run,
                       help="generate requests from a [workload] table and write them as a trace")
    add_config(p, "TOML file with a [workload] table")
    add_out(p, "trace file to write (.csv or .jsonl)")
    p.add_argument("--seed", type=int, default=None, help="override the config's seed")
    p.add_argument("--rate", type=float, default=None, help="override the mean arrival rate (req/s)")


def run(args: argparse.Namespace) -> int:
    if args.out.suffix.lower() not in (".csv", ".jsonl"):
        raise ValueError(f"--out must end in .csv or .jsonl, got {args.out.name!r}")
    args.config = find_config(args.config)
    data = read_toml(args.config, what="config")
    table = dict(data.get("workload", {}))
    if not table:
        raise ValueError(f"{args.config}: no [workload] table")
    if "trace" in table:
        table["trace"] = str((args.config.parent / str(table["trace"])).resolve())
    spec = WorkloadSpec.from_dict(table, traces=load_trace)
    if spec.needs_size_tokens:
        assert spec.sizes is not None
        spec = resolve_workload(spec, _model(data, args.config, spec.sizes.key))
    if args.rate is not None:
        spec = spec.with_rate(args.rate)
    if args.seed is not None and isinstance(spec.trace, RecordedTrace):
        raise ValueError("--seed: a recorded trace carries every request whole, so nothing is drawn with it")
    seed = checks.integer("seed", args.seed if args.seed is not None else data.get("seed", 0), minimum=0)
    requests = generate(spec, np.random.default_rng(seed))
    check_file(args.out)
    if spec.sizes is not None:
        print(spec.sizes.describe())
    write_trace(requests, args.out)
    span = requests[-1].arrival_s - requests[0].arrival_s if len(requests) > 1 else 0.0
    print(f"wrote {len(requests)} request{'' if len(requests) == 1 else 's'} over {span:.1f} s to {args.out}")
    return 0


def _model(data: Mapping[str, Any], config: Path, key: str) -> str:
    """The config's ``[model]`` (a spec name, or a spec file relative to the config) for raw sizes."""
    model = data.get("model")
    if not isinstance(model, Mapping) or not ({"name", "spec"} & set(model)):
        raise ValueError(f"workload.{key}: raw sizes need a [model] (name or spec) whose processor rule "
                         "turns them into LM tokens")
    if "spec" in model:
        return str((config.parent / str(model["spec"])).resolve())
    return str(model["name"])
