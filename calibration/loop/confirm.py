"""Confirm HAS's best candidates live: the simulator's pre-ranking against real-model runs, then a refit.

``easerve search CONFIG --rate R --confirm K [--repeats N] [--refit]`` screens
and searches in the simulator, then runs here: the K best *distinct*
deployments of the study (:func:`easerve_core.has.top_k`) and named baselines
(presets of the config's deployment: request-at-a-time ``dynamo`` and the
aggregated ``vllm`` by default) each run live ``N`` times on the same request
stream, and in the simulator once on the LM tokens those live inputs produce
(calibration.loop.runner). Everything is judged by one SLO, the tier's for the
mix the live model gets.

The report (:func:`summarize`) gives, per candidate, the search's goodput,
the simulator's on the live stream, the live median and spread, and P99
TTFT/TPOT on both sides; then the live best, the *regret* of the simulator's
pick (``1 - live goodput of the sim's #1 / the live best's``) and the rank
agreement (Kendall tau of the sim and live orders over every candidate). Each
side orders by goodput, best first; candidates whose goodputs lie within
:data:`TIE_FRAC` of the best of their run tie (at a rate several deployments
carry whole, goodput is the arrival rate for all of them and its last digits
are noise), and a tie goes to the one with more SLO headroom: the lower of
the worse of P99 TTFT / the TTFT limit and P99 TPOT / the TPOT limit. The
plain goodput order and its tau are reported beside it (``plain``). With
``--refit`` the profile is refit from these live runs' stage logs
(calibration.loop.refit_profile), every candidate is simulated again with the
refit profile, and the report shows how the ranking and the errors moved.

Every live run is written as it finishes (``runs/<name>/live-<i>``), so a
Ctrl-C keeps each finished trial; the trial's own clean-up leaves no process.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from scipy.stats import kendalltau

from calibration.loop.fidelity import METRICS, TABLE_COLUMNS, fidelity_rows, ranking, side_metrics
from calibration.loop.runner import requests_for, run_sim, setup
from calibration.session import Session
from easerve_core.cluster import Cluster
from easerve_core.config import ExperimentConfig
from easerve_core.deployment import Deployment
from easerve_core.has import top_k
from easerve_core.presets import apply_preset
from easerve_core.profile import ProfileDoc
from easerve_core.request import Request
from easerve_core.result import RunResult
from runtime.results import write_result

#: the baselines a confirmation adds unless told otherwise
DEFAULT_BASELINES = ("dynamo", "vllm")
#: goodputs within this fraction of the best of their run tie (see the module docstring)
TIE_FRAC = 0.02


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One deployment to confirm: a HAS pick (``has1``, ...) or a baseline (its preset's name)."""

    name: str
    deployment: Deployment
    origin: str
    search_goodput_rps: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmed:
    """A candidate's simulated run and its live runs (all on the same request stream)."""

    candidate: Candidate
    sim: RunResult
    live: list[RunResult]


def candidates(trials: pd.DataFrame, k: int, *, base: Deployment, cluster: Cluster,
               baselines: Sequence[str] = DEFAULT_BASELINES) -> list[Candidate]:
    """The study's ``k`` best distinct deployments, then each baseline preset of ``base``."""
    out = [Candidate(name=f"has{i + 1}", deployment=Deployment.from_dict(json.loads(row["deployment_json"])),
                     origin=f"HAS #{i + 1}", search_goodput_rps=float(row["goodput_rps"]))
           for i, (_, row) in enumerate(top_k(trials, k).iterrows())]
    out += [Candidate(name=name, deployment=apply_preset(name, base, cluster), origin=f"baseline {name}")
            for name in baselines]
    return out


Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmation:
    """What :func:`confirm` ran: the plan it judged by, the candidates done, and an interruption."""

    session: Session
    confirmed: list[Confirmed]
    interrupted: KeyboardInterrupt | None = None


def confirm(config: ExperimentConfig, doc: ProfileDoc, cands: Sequence[Candidate], *, repeats: int,
            out: Path, progress: Progress = lambda what: None) -> Confirmation:
    """Each candidate live ``repeats`` times and simulated once, every run written under ``out/runs``;
    ``progress`` hears of each finished live run.

    A Ctrl-C (or SIGTERM, as easerve.cli delivers it) ends the loop: the
    candidates with at least one finished live run are kept, and the
    interruption is returned for the caller to report and exit on.
    """
    s = setup(config, doc)
    sim_reqs = requests_for(s)
    live_opts = replace(s.live_options(), weights_dir=str(out / "weights"))
    done: list[Confirmed] = []
    for cand in cands:
        at = s.replan(deployment=cand.deployment)
        sim = run_sim(at, sim_reqs)
        write_result(sim, out / "runs" / cand.name / "sim", slo=s.plan.slo)
        live: list[RunResult] = []
        try:
            for i in range(repeats):
                run = at.live(live_opts).run()
                write_result(run, out / "runs" / cand.name / f"live-{i}", slo=s.plan.slo)
                live.append(run)
                progress(f"{cand.name} live {i + 1}/{repeats}")
        except KeyboardInterrupt as stop:
            if live:
                done.append(Confirmed(candidate=cand, sim=sim, live=live))
            return Confirmation(session=s, confirmed=done, interrupted=stop)
        done.append(Confirmed(candidate=cand, sim=sim, live=live))
    return Confirmation(session=s, confirmed=done)


def resimulate(config: ExperimentConfig, doc: ProfileDoc, confirmed: Sequence[Confirmed]) -> list[Confirmed]:
    """The same candidates simulated again with ``doc`` (a refit profile); the live runs stay."""
    s = setup(config, doc)
    sim_reqs: list[Request] = requests_for(s)
    return [replace(c, sim=run_sim(s.replan(deployment=c.candidate.deployment), sim_reqs))
            for c in confirmed]


def fidelity_table(confirmed: Sequence[Confirmed], slo: Any) -> pd.DataFrame:
    """The sim-vs-live rows of every candidate and metric (calibration.loop.fidelity)."""
    rows = []
    for c in confirmed:
        sim_m, _ = side_metrics([c.sim.records], slo)
        live_m, spread = side_metrics([r.records for r in c.live], slo)
        rows += fidelity_rows(c.candidate.name, sim_m, live_m, spread, len(c.live))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def summarize(confirmed: Sequence[Confirmed], slo: Any) -> dict[str, Any]:
    """Per-candidate figures, the live best, the regret of the simulator's pick and Kendall tau."""
    table = fidelity_table(confirmed, slo)
    per = []
    for c in confirmed:
        live = [float(side_metrics([r.records], slo)[0]["goodput_rps"]) for r in c.live]
        sub = table[table["deployment"] == c.candidate.name].set_index("metric")
        per.append({"name": c.candidate.name, "origin": c.candidate.origin,
                    "deployment": c.candidate.deployment.label(),
                    "search_goodput_rps": c.candidate.search_goodput_rps,
                    "sim_goodput_rps": float(sub.loc["goodput_rps", "sim"]),
                    "live_goodput_rps": statistics.median(live), "live_min_rps": min(live),
                    "live_max_rps": max(live),
                    **{f"{side}_{m}": float(sub.loc[m, side]) for m in ("ttft_p99_s", "tpot_p99_s")
                       for side in ("sim", "live")}})
    out: dict[str, Any] = {"candidates": per, "errors": _errors(table)}
    if len(confirmed) >= 2:
        out["ranking"] = _ranking(table, per, slo)
    return out


def order(goodput: Mapping[str, float], headroom: Mapping[str, float], *,
          tie_frac: float = TIE_FRAC) -> list[str]:
    """Names best first: goodput descending, ties (within ``tie_frac``) by ``headroom`` ascending."""
    names = sorted(goodput, key=lambda n: -goodput[n])
    out: list[str] = []
    while names:
        top = goodput[names[0]]
        run = [n for n in names if goodput[n] >= top * (1.0 - tie_frac)]
        out += sorted(run, key=lambda n: headroom[n])
        names = [n for n in names if n not in run]
    return out


def _ranking(table: pd.DataFrame, per: Sequence[Mapping[str, Any]], slo: Any) -> dict[str, Any]:
    orders = {}
    for side in ("sim", "live"):
        goodput = {p["name"]: p[f"{side}_goodput_rps"] for p in per}
        headroom = {p["name"]: max(p[f"{side}_ttft_p99_s"] / slo.ttft_s, p[f"{side}_tpot_p99_s"] / slo.tpot_s)
                    for p in per}
        orders[side] = order(goodput, {n: (h if h == h else float("inf")) for n, h in headroom.items()})
    sim_order, live_order = orders["sim"], orders["live"]
    names = [p["name"] for p in per]
    tau = kendalltau([sim_order.index(n) for n in names], [live_order.index(n) for n in names]).statistic
    live_of = {p["name"]: p["live_goodput_rps"] for p in per}
    sim_pick, live_best = sim_order[0], live_order[0]
    best = max(live_of.values())  # a tie may put a slightly lower goodput first
    plain = ranking(table, "goodput_rps")
    place = sim_order.index(live_best) + 1
    return {"metric": "goodput_rps", "tie_frac": TIE_FRAC, "kendall_tau": float(tau),
            "sim_order": sim_order, "live_order": live_order, "live_best": live_best,
            "live_best_sim_rank": place, "sim_best_is_live_best": place == 1,
            "live_best_in_sim_top2": place <= 2, "sim_pick": sim_pick,
            "regret": 1.0 - live_of[sim_pick] / best if best > 0 else 0.0,
            "plain": {k: plain[k] for k in ("kendall_tau", "sim_order", "live_order")}}


def _errors(table: pd.DataFrame) -> dict[str, float]:
    """Median |relative error| across candidates, per metric."""
    return {m: float(table.loc[table["metric"] == m, "rel_error"].abs().median()) for m in METRICS}


__all__ = ["DEFAULT_BASELINES", "TIE_FRAC", "Candidate", "Confirmation", "Confirmed", "candidates", "confirm",
           "fidelity_table", "order", "resimulate", "summarize"]
