"""HAS's regret: its pick against the best a much longer search finds, both judged on long streams.

Twelve scenarios: the three paper models (image, video, audio) on 8 x RTX
6000 Ada and on 8 x H200, each at a low rate (30% of the cluster's
capacity) and near capacity (90%), moderate SLO tier. The capacity is the
highest throughput of a few strong deployments driven past saturation
(:func:`capacity_estimate`: the screen's four best allocations, B in {4, 16},
s at its bounds, each at 1.3x the screen's optimistic bound).

Per scenario (:func:`regret_row`):

* **HAS** as ``easerve search`` runs it: 30 TPE trials sized in time on the
  ladder, the top 3 re-run on three 4x streams, the pick;
* **the reference**: 150 TPE trials (another seed) on the same ladder, its
  top 8 re-run on the same three 4x streams;
* **the old HAS** (before trials were sized in time): 30 TPE trials of 250
  requests each, no ladder, the best trial's goodput as the pick.

Three more scenarios (:func:`extra_scenarios`, not in the bars) are the
class of failure that moved trials to time: Qwen2.5-VL-32B on 8 x H200, one
large image (2,691 LM tokens) per request, an absolute SLO (TTFT 2 s, TPOT
100 ms), at 90%, 95% and 100% of capacity.

Every deployment is judged the same way: its mean goodput over the same
three long streams (those of :meth:`sim.evaluate.SimEvaluator.recheck`),
stable ones first. The regret of a pick is ``1 - its goodput / the best
goodput`` among everything any of the three searches rechecked (0 when the
pick is that best). Wall times are each search's own, recheck included.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from calibration.session import Session
from easerve.cli.search_cmd import SearchSetup, plan_search
from easerve.resources import config_path
from easerve_core.deployment import Deployment
from easerve_core.has import Ladder, Rechecked, Verdict, best_deployment, recheck, trials_frame
from easerve_core.has.objective import short_key
from easerve_core.slo import summarize
from runtime.has import MEMORY, SearchSettings, run_search
from sim.evaluate import make_evaluator

MODELS = {"image": "llava34b_rtx6000ada.toml", "video": "qwen25vl32b_rtx6000ada.toml",
          "audio": "ultravox27b_rtx6000ada.toml"}
GPUS = ("rtx6000ada", "h200")
LOADS = (0.3, 0.9)
HAS_TRIALS = 30
REFERENCE_TRIALS = 150
REFERENCE_TOP = 8
OLD_REQUESTS = 250
#: the regret table's columns (bench/has_regret.py and ``easerve reproduce``'s has_regret.csv)
REGRET_COLUMNS = ("scenario", "rate_rps", "capacity_rps", "trial_requests", "long_requests", "has_pick",
                  "has_goodput_rps", "has_attainment", "has_unstable", "has_regret", "best",
                  "best_goodput_rps", "old_pick", "old_goodput_rps", "old_attainment", "old_unstable",
                  "old_regret", "has_wall_s", "old_wall_s", "reference_wall_s")
#: the extra scenarios' model, cluster, mix and absolute SLO
LARGE_IMAGE_H200 = """seed = 0
[model]
name = "qwen2.5-vl-32b"
[cluster]
gpu = "h200"
num_gpus = 8
[deployment]
encode = { num_workers = 2, tp = 1 }
prefill = { num_workers = 2, tp = 1 }
decode = { num_workers = 2, tp = 2 }
sm_sharing = "dynamic"
[workload]
mix = "qwen-image"
item_tokens = [2691]
item_weights = [1.0]
arrival = "poisson"
rate_hz = 10.0
num_requests = 500
[slo]
ttft_s = 2.0
tpot_s = 0.1
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    modality: str
    gpu: str
    load: float

    @property
    def name(self) -> str:
        return f"{self.modality}/{self.gpu}/{self.load:.0%}"


def scenarios() -> list[Scenario]:
    """The twelve scenarios of the bars."""
    return [Scenario(modality=m, gpu=g, load=x) for m in MODELS for g in GPUS for x in LOADS]


def extra_scenarios() -> list[Scenario]:
    """The large-image, absolute-SLO scenarios on H200 (module docstring)."""
    return [Scenario(modality="large-image", gpu="h200", load=x) for x in (0.9, 0.95, 1.0)]


def scenario_config(scenario: Scenario, folder: Path) -> Path:
    """The modality's shipped config on 8 GPUs of ``scenario.gpu`` (written into ``folder``)."""
    path = folder / f"{scenario.modality}-{scenario.gpu}.toml"
    if scenario.modality == "large-image":
        path.write_text(LARGE_IMAGE_H200)
        return path
    text = config_path(MODELS[scenario.modality]).read_text()
    path.write_text(text.replace('gpu = "rtx6000ada"', f'gpu = "{scenario.gpu}"'))
    return path


def capacity_estimate(config: Path) -> float:
    """The highest saturated throughput (req/s) of a few strong deployments (module docstring)."""
    probe = plan_search(config, rate_hz=1e-3, tier="moderate", num_requests=50)
    ranked = sorted(probe.report.candidates, key=lambda c: -_bound(c.capacity))[:4]
    bound = _bound(ranked[0].capacity)
    base = probe.evaluator
    ev = make_evaluator(base.plan, base.profile, rate_hz=1.3 * bound, num_requests=600, options=base.options)
    best = 0.0
    seen: set[str] = set()
    for cand in ranked:
        for batch in (4, 16):
            for s in (0.0, 1.0):
                dep = probe.space.deployment(cand.allocation.label, batch, s)
                if short_key(dep) in seen:
                    continue
                seen.add(short_key(dep))
                session = Session(plan=ev.plan, profile=ev.profile).replan(deployment=dep)
                result = session.sim(ev.options).run()
                best = max(best, summarize(result.records).throughput_rps)
    return best


def _bound(cap: Any) -> float:
    return float(min(cap.encode_rps, cap.prefill_rps, cap.decode_rps, cap.network_rps))


def _search(plan: SearchSetup, *, trials: int, seed: int, ladder: Ladder) -> tuple[list[Rechecked], float]:
    settings = SearchSettings(num_trials=trials, seed=seed, storage=MEMORY, study_name="s", ladder=ladder)
    start = time.perf_counter()
    study = run_search(plan.space, plan.evaluator, settings)
    picked = recheck(study, plan.evaluator, ladder, trials=trials_frame(study))
    return picked, time.perf_counter() - start


def _old_search(config: Path, rate_hz: float, plan: SearchSetup) -> tuple[Deployment, float]:
    old = plan_search(config, rate_hz=rate_hz, tier="moderate", num_requests=OLD_REQUESTS)
    settings = SearchSettings(num_trials=HAS_TRIALS, seed=0, storage=MEMORY, study_name="old")
    start = time.perf_counter()
    frame = trials_frame(run_search(old.space, old.evaluator, settings))
    return best_deployment(frame), time.perf_counter() - start


def _judge(plan: SearchSetup, dep: Deployment, ladder: Ladder) -> Verdict:
    return Verdict.mean([plan.evaluator.recheck(dep, factor=ladder.recheck_factor, index=k)
                         for k in range(ladder.recheck_seeds)])


def _rank(v: Verdict) -> tuple[bool, float]:
    return (not v.unstable, v.goodput_rps)


def regret_row(scenario: Scenario, config: Path, capacity_rps: float) -> dict[str, Any]:
    """One scenario's row of the regret table (module docstring)."""
    rate = round(scenario.load * capacity_rps, 3)
    plan = plan_search(config, rate_hz=rate, tier="moderate")
    ladder = Ladder()
    has, has_wall = _search(plan, trials=HAS_TRIALS, seed=0, ladder=ladder)
    ref, ref_wall = _search(plan, trials=REFERENCE_TRIALS, seed=1,
                            ladder=replace(ladder, recheck_top=REFERENCE_TOP))
    old_dep, old_wall = _old_search(config, rate, plan)
    judged = {r.key: r.merged for r in [*has, *ref]}
    old_verdict = judged.get(short_key(old_dep)) or _judge(plan, old_dep, ladder)
    best_key = max(judged, key=lambda k: _rank(judged[k]))
    best = judged[best_key]
    pick = has[0].merged
    trial_requests = len(plan.evaluator.plan.requests)
    return {
        "scenario": scenario.name, "rate_rps": rate, "capacity_rps": round(capacity_rps, 3),
        "trial_requests": trial_requests, "long_requests": pick.num_requests // ladder.recheck_seeds,
        "has_pick": has[0].label, "has_goodput_rps": pick.goodput_rps, "has_attainment": pick.attainment,
        "has_unstable": pick.unstable, "has_regret": _regret(pick, best), "has_wall_s": has_wall,
        "best": next(r.label for r in [*has, *ref] if r.key == best_key),
        "best_goodput_rps": best.goodput_rps, "best_attainment": best.attainment,
        "reference_wall_s": ref_wall,
        "old_pick": old_dep.label(), "old_goodput_rps": old_verdict.goodput_rps,
        "old_attainment": old_verdict.attainment, "old_unstable": old_verdict.unstable,
        "old_regret": _regret(old_verdict, best), "old_wall_s": old_wall,
    }


def _regret(pick: Verdict, best: Verdict) -> float:
    if best.goodput_rps <= 0:
        return 0.0
    return max(0.0, 1.0 - pick.goodput_rps / best.goodput_rps)


def regret_study(selected: Sequence[Scenario] | None = None, *, log: Any = print) -> list[dict[str, Any]]:
    """Every scenario's row (module docstring); ``log`` gets a line per scenario."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows: list[dict[str, Any]] = []
    columns = list(REGRET_COLUMNS)
    capacities: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for sc in selected or scenarios():
            config = scenario_config(sc, Path(tmp))
            key = (sc.modality, sc.gpu)
            if key not in capacities:
                capacities[key] = capacity_estimate(config)
            row = regret_row(sc, config, capacities[key])
            rows.append({c: row[c] for c in columns})
            r = rows[-1]
            log(f"{r['scenario']:<24} {r['rate_rps']:7.3f} req/s  regret {r['has_regret']:6.2%} "
                f"(old {r['old_regret']:6.2%})  HAS {r['has_wall_s']:5.1f} s  "
                f"ref {r['reference_wall_s']:6.1f} s")
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    has = np.array([r["has_regret"] for r in rows])
    old = np.array([r["old_regret"] for r in rows])
    return {"median_regret": float(np.median(has)), "worst_regret": float(has.max()),
            "old_median_regret": float(np.median(old)), "old_worst_regret": float(old.max()),
            "scenarios": float(len(rows)), "nan": float(sum(math.isnan(x) for x in has))}

