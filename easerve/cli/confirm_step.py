"""``easerve search ... --confirm K``: after the search, HAS's candidates run live (calibration.loop.confirm).

  easerve search CONFIG --rate R --confirm K [--repeats N] [--refit] [--baselines dynamo,vllm] --out DIR

The confirmation needs a measured profile (``[profile] path``, or the
committed profile of the config's live model on its device) and checks it,
its flags and its folder (``DIR/confirm``; an earlier one is refused unless
``--force`` replaces it) before the search starts. Live runs are written as
they finish, so a Ctrl-C keeps each finished trial and writes a partial
report; the exit status is then 130 (143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from calibration.session import Session
from easerve.cli import Terminated
from easerve.cli.common import given
from easerve_core import checks
from easerve_core.config import ExperimentConfig
from easerve_core.presets import PRESETS
from live.options import LiveOptions
from runtime.profiles import save_profile_doc

CONFIRM_FOLDER = "confirm"
#: live runs per confirmed deployment, and the presets confirmed beside HAS's picks, unless told
DEFAULT_REPEATS = 2
DEFAULT_BASELINES = "dynamo,vllm"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--confirm", type=int, default=0, metavar="K",
                   help="then run the K best distinct deployments (and the baselines) live")
    p.add_argument("--repeats", type=int, default=None,
                   help=f"live runs per confirmed deployment (default {DEFAULT_REPEATS})")
    p.add_argument("--refit", action="store_true",
                   help="refit the profile from the confirmation's live runs and re-rank the candidates")
    p.add_argument("--baselines", default=None,
                   help=f"comma-separated presets confirmed beside HAS's picks (default "
                        f"{DEFAULT_BASELINES}; '' none)")
    p.add_argument("--force", action="store_true", help="replace an earlier OUT/confirm folder")


def refuse_strays(args: argparse.Namespace) -> None:
    """A flag only a confirmation reads, given without ``--confirm``, is a ``ValueError`` naming it."""
    stray = [flag for flag, yes in given(args, ("--repeats", "--refit", "--baselines", "--force")).items()
             if yes]
    if not args.confirm and stray:
        raise ValueError(f"{stray[0]}: read only by a live confirmation; add --confirm K")


def _repeats(args: argparse.Namespace) -> int:
    return DEFAULT_REPEATS if args.repeats is None else args.repeats


def _baselines_text(args: argparse.Namespace) -> str:
    return DEFAULT_BASELINES if args.baselines is None else args.baselines


def _baselines(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        checks.one_of("--baselines preset", name, PRESETS)
    return names


def check(args: argparse.Namespace, session: Session, out: Path) -> None:
    """Refuse, before any search, a confirmation that could not run (see the module docstring)."""
    if not args.confirm:
        return
    checks.integer("confirm", args.confirm, minimum=1)
    checks.integer("repeats", _repeats(args), minimum=1)
    _baselines(_baselines_text(args))
    doc = session.doc
    if doc is None or doc.kind != "fitted":
        raise ValueError("--confirm: needs a profile measured live ([profile] path, or a committed "
                         f"profile of {session.plan.model} on {session.plan.cluster.gpu}; "
                         "easerve calibrate writes one)")
    if LiveOptions.from_dict(session.plan.engine("live")).device == "cuda":
        import torch  # only a CUDA confirmation asks (and will load it anyway)

        if not torch.cuda.is_available():
            raise ValueError("--confirm: live.device = 'cuda' but this host has no CUDA device")
    folder = out / CONFIRM_FOLDER
    if folder.is_dir() and any(folder.iterdir()) and not args.force:
        raise ValueError(f"--confirm: {folder} holds an earlier confirmation; pass --force to replace it")


def run(args: argparse.Namespace, config: ExperimentConfig, session: Session, trials: pd.DataFrame,
        out: Path) -> int:
    """The confirmation of the finished search; its exit status."""
    from calibration.loop import confirm as cf  # torch and transformers: only a confirmation needs them
    from calibration.loop import confirm_report

    assert session.doc is not None
    folder = out / CONFIRM_FOLDER
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cands = cf.candidates(trials, args.confirm, base=session.plan.deployment, cluster=session.plan.cluster,
                          baselines=_baselines(_baselines_text(args)))
    start = time.perf_counter()
    with tqdm(total=len(cands) * _repeats(args), desc="confirm", unit="run", file=sys.stderr) as bar:
        def progress(what: str) -> None:
            bar.set_postfix_str(what)
            bar.update(1)

        result = cf.confirm(config, session.doc, cands, repeats=_repeats(args), out=folder,
                            progress=progress)
    if not result.confirmed:
        print(f"easerve search: confirmation interrupted before any live run finished ({folder})",
              file=sys.stderr)
        return _status(result.interrupted)
    slo = result.session.plan.slo
    summary = cf.summarize(result.confirmed, slo)
    meta = _meta(args, result, session, wall_s=time.perf_counter() - start)
    refit = None
    if args.refit and result.interrupted is None:
        refit = _refit(config, session, result.confirmed, folder, meta, slo)
    path = confirm_report.write(folder, summary, meta=meta, refit=refit)
    _print(summary, refit, path)
    return _status(result.interrupted)


def _refit(config: ExperimentConfig, session: Session, confirmed: list[Any], folder: Path,
           meta: dict[str, Any], slo: Any) -> dict[str, Any]:
    """Refit from the disaggregated candidates' live runs, re-simulate all, judge by the same SLO."""
    from calibration.loop import confirm as cf
    from calibration.loop.refit_profile import read_run, refit_from_runs

    disaggregated = {c.candidate.name for c in confirmed
                     if c.candidate.deployment.architecture == "disaggregated"}
    runs = sorted(p for p in folder.glob("runs/*/live-*") if p.parent.name in disaggregated)
    doc = refit_from_runs([read_run(p) for p in runs], session.doc, created=dt.date.today().isoformat(),
                          sources=[str(p.relative_to(folder)) for p in runs])
    save_profile_doc(doc, folder / "refit-profile.json")
    meta["refit_profile"] = "refit-profile.json"
    return cf.summarize(cf.resimulate(config, doc, confirmed), slo)


def _meta(args: argparse.Namespace, result: Any, session: Session, *, wall_s: float) -> dict[str, Any]:
    slo = result.session.plan.slo
    argv = [str(args.config), "--rate", args.rate, "--tier", args.tier, "--trials", args.trials,
            "--confirm", args.confirm, "--repeats", _repeats(args), "--baselines", _baselines_text(args),
            *(["--refit"] if args.refit else []), "--out", args.out]
    return {"config": str(args.config), "profile": session.doc.source if session.doc else None,
            "repeats": _repeats(args), "rate_hz": args.rate, "wall_s": round(wall_s, 1),
            "slo": {"tier": slo.tier, "ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s},
            "interrupted": result.interrupted is not None,
            "command": "easerve search " + " ".join(shlex.quote(str(a)) for a in argv)}


def _print(summary: dict[str, Any], refit: dict[str, Any] | None, path: Path) -> None:
    for side, data in (("live", summary), ("after refit", refit)):
        rank = None if data is None else data.get("ranking")
        if rank is not None:
            print(f"confirm ({side}): live best {rank['live_best']}, sim pick {rank['sim_pick']}, regret "
                  f"{rank['regret']:.1%}, Kendall tau {rank['kendall_tau']:.3f}")
    print(f"wrote {path}")


def _status(interrupted: KeyboardInterrupt | None) -> int:
    if interrupted is None:
        return 0
    print("easerve search: confirmation interrupted; finished runs and a partial report written",
          file=sys.stderr)
    return 143 if isinstance(interrupted, Terminated) else 130
