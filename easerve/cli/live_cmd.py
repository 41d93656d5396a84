"""``easerve live CONFIG.toml --out DIR``: run one live trial and write its result.

Writes the same files as ``easerve sim`` (records, utilisation and stage log
as Parquet, summary and resolved config as JSON; see
:func:`runtime.results.write_result`). Ctrl-C stops every worker and
still writes the records gathered so far (requests still open end
``failed`` with error ``interrupted``); the exit status is then 130.
"""

from __future__ import annotations

import argparse
import signal
import sys

from calibration.session import Overrides
from easerve.cli import Terminated
from easerve.cli.common import add_config, add_force, add_out, command_parser, open_session
from easerve.cli.outputs import RunFolder
from easerve_core.presets import PRESETS
from live.placement import check_placement
from runtime.results import write_result


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = command_parser(subparsers, "live", doc=__doc__, func=run,
                       help="run a config on real (random-weight) transformers models in worker processes")
    add_config(p, "experiment TOML file (see configs/tiny_*_cpu.toml)")
    add_out(p, "folder to write the result into")
    p.add_argument("--preset", default=None,
                   help="baseline preset (default: [deployment] preset, else easerve): "
                        f"{', '.join(sorted(PRESETS))}")
    add_force(p)


def run(args: argparse.Namespace) -> int:
    session = open_session(args.config, Overrides(preset=args.preset, need_profile=False),
                           runs_deployment=True)
    plan, engine = session.plan, session.live()
    check_placement(plan.deployment, device=engine.options.device)  # before the slow imports below
    folder = RunFolder(args.out, force=args.force)
    trial = engine.trial()  # imports torch and transformers (seconds): only this command pays
    try:
        trial.start()
        result = trial.run()
    except KeyboardInterrupt as exc:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the write short
            signal.signal(signum, signal.SIG_IGN)
        trial.interrupted = True
        trial.close()
        with folder as staging:
            write_result(trial.result(), staging, slo=plan.slo)
        why = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"easerve live: {why}; partial records written to {args.out}", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        trial.close()
    with folder as staging:
        write_result(result, staging, slo=plan.slo)
    summary = result.summary()
    print(f"easerve live: {len(result.records)} requests, wrote {args.out}")
    print(summary.to_dict() if hasattr(summary, "to_dict") else summary)
    return 0
