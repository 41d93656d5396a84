"""A finished study as data: the trial table, the best deployments, convergence.

:func:`trials_frame` gives one row per finished trial in trial order
(COMPLETE, and PRUNED on the ladder), with the suggested parameters, the
deployment actually evaluated (s clamped), its goodput and score (they
differ for a run whose queue was still growing, ``unstable``; see
:mod:`easerve_core.has.ladder`), the last rung it climbed and whether it was
pruned there, whether it was a reused evaluation, its wall time
(``trial_s``, from Optuna's start and end stamps) and the best goodput so
far among stable trials that finished the ladder (the convergence curve).
:func:`top_k` lists the best distinct deployments that finished the ladder,
stable ones first.
"""

from __future__ import annotations

import json
from typing import Any

import optuna
import pandas as pd
from optuna.trial import TrialState

from easerve_core import checks
from easerve_core.deployment import Deployment
from easerve_core.has.ladder import Verdict
from easerve_core.has.trials import finished_trials

TRIAL_COLUMNS = (
    "trial", "sampler", "goodput_rps", "best_so_far_rps", "score", "unstable", "rung", "pruned",
    "alloc", "max_encode_batch",
    "remote_fraction", "s_suggested", "label", "cached", "trial_s",
    "encode_workers", "encode_tp", "prefill_workers", "prefill_tp", "decode_workers",
    "decode_tp", "batch_timeout_s", "key", "deployment_json",
)


def _last_rung(trial: optuna.trial.FrozenTrial) -> tuple[int, dict[str, Any] | None]:
    """The highest rung a trial climbed and its verdict (``rungK`` user attributes; none: 0, None)."""
    rungs = [int(name[4:]) for name in trial.user_attrs if name.startswith("rung") and name[4:].isdigit()]
    if not rungs:
        return 0, None
    return max(rungs), trial.user_attrs[f"rung{max(rungs)}"]


def _row(trial: optuna.trial.FrozenTrial, sampler: str) -> dict[str, Any]:
    dep = json.loads(trial.user_attrs["deployment"])
    pruned = trial.state == TrialState.PRUNED
    rung, verdict = _last_rung(trial)
    score = trial.value if trial.value is not None else trial.intermediate_values.get(
        max(trial.intermediate_values, default=-1), float("nan"))
    if verdict is not None:
        score = Verdict.from_dict(verdict).score
    return {
        "trial": trial.number,
        "sampler": sampler,
        "goodput_rps": float(verdict["goodput_rps"] if verdict is not None else score),
        "score": float(score),
        "unstable": bool(verdict is not None and verdict["unstable"]),
        "rung": rung,
        "pruned": pruned,
        "alloc": trial.params.get("alloc"),
        "max_encode_batch": dep["max_encode_batch"],
        "remote_fraction": dep["remote_fraction"],
        "s_suggested": trial.params.get("s"),
        "label": trial.user_attrs.get("label") or Deployment.from_dict(dep).label(),
        "cached": bool(trial.user_attrs.get("cached", False)),
        "trial_s": trial.duration.total_seconds() if trial.duration else float("nan"),
        "encode_workers": dep["encode"]["num_workers"],
        "encode_tp": dep["encode"]["tp"],
        "prefill_workers": dep["prefill"]["num_workers"],
        "prefill_tp": dep["prefill"]["tp"],
        "decode_workers": dep["decode"]["num_workers"],
        "decode_tp": dep["decode"]["tp"],
        "batch_timeout_s": dep["batch_timeout_s"],
        "key": trial.user_attrs.get("key", ""),
        "deployment_json": trial.user_attrs["deployment"],
    }


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per COMPLETE trial, in trial order (see the module docstring)."""
    sampler = str(study.user_attrs.get("sampler", ""))
    trials = sorted(finished_trials(study), key=lambda t: t.number)
    rows = [_row(t, sampler) for t in trials if "deployment" in t.user_attrs]
    frame = pd.DataFrame(rows, columns=[c for c in TRIAL_COLUMNS if c != "best_so_far_rps"])
    final = frame["goodput_rps"].where(~frame["pruned"] & ~frame["unstable"])
    frame.insert(3, "best_so_far_rps", final.cummax().ffill().fillna(0.0))
    return frame


def top_k(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """The ``k`` best distinct deployments that finished the ladder, by score (ties: the earlier trial)."""
    checks.integer("top", k, minimum=1)
    final = frame[~frame["pruned"]] if "pruned" in frame else frame
    by = "score" if "score" in final else "goodput_rps"
    ordered = final.sort_values([by, "trial"], ascending=[False, True], kind="stable")
    return ordered.drop_duplicates("key").head(k).reset_index(drop=True)


def best_deployment(frame: pd.DataFrame) -> Deployment:
    """The deployment of the best trial."""
    if frame.empty:
        raise ValueError("the study has no complete trial")
    row = top_k(frame, 1).iloc[0]
    return Deployment.from_dict(json.loads(row["deployment_json"]))


def trials_to_reach(frame: pd.DataFrame, target_rps: float) -> int | None:
    """Trials (1-based count) until the best so far reaches ``target_rps``; None if never."""
    hit = frame.index[frame["best_so_far_rps"] >= target_rps]
    return int(hit[0]) + 1 if len(hit) else None
