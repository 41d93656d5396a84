"""After the search: the top K re-run on longer streams and new seeds, and the pick made there.

A search judges every trial on the same streams, so its best few are the
few that did best *there*; a deployment whose queue grows too slowly to
show in a trial, or that was lucky on those streams, can lead. The recheck
(docs/has.md §3) takes the ``recheck_top`` best distinct deployments that
finished the ladder (by score: stable ones first), runs each on
``recheck_seeds`` new streams ``recheck_factor`` times the full trial
length (the first drawn with the search's seed, as ``easerve sim`` draws
the config's workload, the others with seeds derived from it; a trace has
one stream, replayed once, :attr:`LadderEvaluator.distinct_long_streams`), and picks
the best by the mean over those streams: stable first (a deployment
unstable on any long stream ranks below every stable one), then mean
goodput. The pick's goodput is reported with a 95%
Student-t confidence interval over the seeds.

Every long run is written to the study as a user attribute
(``recheck:<key>:<k>``, the verdict of seed ``k``), so a resumed or joined
search reuses what is there and runs only the rest. The missing runs may
run on a backend (``easerve search`` forks a local pool of
``--recheck-jobs`` processes, by default up to two).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import optuna
import pandas as pd
from scipy.special import stdtrit

from easerve_core.deployment import Deployment
from easerve_core.has.ladder import Ladder, LadderEvaluator, Verdict
from easerve_core.has.results import top_k

T = TypeVar("T")
R = TypeVar("R")

#: columns of the recheck table (one row per rechecked deployment, the pick first)
RECHECK_COLUMNS = ("rank", "label", "search_score", "goodput_rps", "ci_low_rps", "ci_high_rps",
                   "attainment", "unstable", "num_seeds", "requests_per_stream", "key", "deployment_json",
                   "pick_lead_rps", "pick_lead_low_rps", "pick_lead_high_rps", "ties_pick")


class Mapper(Protocol):
    """Where the missing long runs may run: ``map(fn, items)`` is ``[fn(item) for item in items]``.

    The backends of :mod:`runtime.parallel` fit; the core names only this seam.
    """

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


def recheck_seed(seed: int, k: int) -> int:
    """The stream seed of the ``k``-th recheck: the first is ``seed`` itself, the rest derived.

    The first long stream is drawn with the config's seed, as ``easerve sim``
    draws the config's workload, so the written pick (whose ``num_requests``
    is the recheck's length) replays it exactly; the others are new.
    """
    if k == 0:
        return seed
    return int(np.random.SeedSequence([seed, 0x5EC, k]).generate_state(1)[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class Rechecked:
    """One deployment's long runs."""

    key: str
    label: str
    deployment: Deployment
    search_score: float
    verdicts: tuple[Verdict, ...]

    @property
    def merged(self) -> Verdict:
        return Verdict.mean(self.verdicts)

    @property
    def goodputs(self) -> list[float]:
        return [v.goodput_rps for v in self.verdicts]

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Student-t interval of the mean goodput over the seeds (NaN bounds with one seed: one
        stream gives no interval, and none is claimed)."""
        _, low, high = _t_interval(self.goodputs, confidence)
        return low, high

    def lead_over(self, other: Rechecked, confidence: float = 0.95) -> tuple[float, float, float]:
        """This deployment's goodput minus ``other``'s, paired seed by seed (the recheck runs every
        deployment on the same streams): the mean and its Student-t interval (NaN bounds with one
        seed). Pairing takes out what the streams share, so it parts deployments the two separate
        intervals cannot."""
        if len(other.verdicts) != len(self.verdicts):
            raise ValueError(f"lead_over: {self.label} has {len(self.verdicts)} streams, "
                             f"{other.label} {len(other.verdicts)}")
        return _t_interval([a - b for a, b in zip(self.goodputs, other.goodputs, strict=True)], confidence)

    def ties(self, other: Rechecked, confidence: float = 0.95) -> bool | None:
        """Whether the recheck cannot part the two: both stable or both not, and the paired
        interval of the lead holds 0 (None: one stream, no interval to judge by)."""
        if len(self.verdicts) < 2:
            return None
        if self.merged.unstable != other.merged.unstable:
            return False
        _, low, high = self.lead_over(other, confidence)
        return low <= 0.0 <= high

    def rank_key(self) -> tuple[bool, float]:
        return (not self.merged.unstable, self.merged.goodput_rps)


def _t_interval(values: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """The mean of ``values`` and its two-sided Student-t interval (NaN bounds with one value)."""
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if len(data) < 2:
        return mean, math.nan, math.nan
    t = float(stdtrit(len(data) - 1, 0.5 + confidence / 2))
    half = t * float(data.std(ddof=1)) / math.sqrt(len(data))
    return mean, mean - half, mean + half


def _attr(key: str, k: int) -> str:
    return f"recheck:{key}:{k}"


def _long_run(job: tuple[LadderEvaluator, Deployment, float, int]) -> Verdict:
    evaluator, dep, factor, k = job
    return evaluator.recheck(dep, factor=factor, index=k)


def recheck(study: optuna.Study, evaluator: LadderEvaluator, ladder: Ladder, *,
            trials: pd.DataFrame, backend: Mapper | None = None) -> list[Rechecked]:
    """Re-run the top ``ladder.recheck_top`` of ``trials`` (the study's table); best first.

    The long runs the study does not hold yet run on ``backend`` when given
    (the evaluator must pickle), else one by one in this process; each is
    written to the study as it comes back.
    """
    if ladder.recheck_top == 0 or trials.empty:
        return []
    held = study.user_attrs
    rows = [(str(r["key"]), str(r["label"]), float(r["score"]),
             Deployment.from_dict(_json(r["deployment_json"])))
            for _, r in top_k(trials, ladder.recheck_top).iterrows()]
    distinct = evaluator.distinct_long_streams
    seeds = ladder.recheck_seeds if distinct is None else min(ladder.recheck_seeds, distinct)
    runs = {(key, k): Verdict.from_dict(held[_attr(key, k)])
            for key, *_ in rows for k in range(seeds) if _attr(key, k) in held}
    missing = [(key, dep, k) for key, _, _, dep in rows for k in range(seeds)
               if (key, k) not in runs]
    jobs = [(evaluator, dep, ladder.recheck_factor, k) for _, dep, k in missing]
    if backend is not None and len(jobs) > 1:
        done = backend.map(_long_run, jobs)
    else:
        done = [_long_run(job) for job in jobs]
    for (key, _, k), verdict in zip(missing, done, strict=True):
        study.set_user_attr(_attr(key, k), verdict.to_dict())
        runs[(key, k)] = verdict
    out = [Rechecked(key=key, label=label, deployment=dep, search_score=score,
                     verdicts=tuple(runs[(key, k)] for k in range(seeds)))
           for key, label, score, dep in rows]
    return sorted(out, key=lambda r: r.rank_key(), reverse=True)


def ranked(rechecked: Sequence[Rechecked]) -> list[Rechecked]:
    """Rechecks merged (several samplers' studies), best first, each deployment once: two samplers
    that rechecked one deployment ran it on the same streams, so it ties only itself."""
    out: dict[str, Rechecked] = {}
    for r in sorted(rechecked, key=lambda r: r.rank_key(), reverse=True):
        out.setdefault(r.key, r)
    return list(out.values())


def recheck_frame(rechecked: list[Rechecked]) -> pd.DataFrame:
    """The recheck as a table (:data:`RECHECK_COLUMNS`), the pick first; each row's ``pick_lead``
    is the pick's paired lead over it (:meth:`Rechecked.lead_over`; 0 on the pick's own row) and
    ``ties_pick`` whether the recheck cannot part them (:meth:`Rechecked.ties`). With one stream
    the interval columns and ``ties_pick`` are empty."""
    rows = []
    for rank, r in enumerate(rechecked, start=1):
        low, high = r.interval()
        merged = r.merged
        lead, lead_low, lead_high = rechecked[0].lead_over(r)
        rows.append({"rank": rank, "label": r.label, "search_score": r.search_score,
                     "goodput_rps": merged.goodput_rps, "ci_low_rps": low, "ci_high_rps": high,
                     "attainment": merged.attainment, "unstable": merged.unstable,
                     "num_seeds": len(r.verdicts),
                     "requests_per_stream": merged.num_requests // max(1, len(r.verdicts)),
                     "key": r.key, "deployment_json": _dumps(r.deployment),
                     "pick_lead_rps": lead, "pick_lead_low_rps": lead_low, "pick_lead_high_rps": lead_high,
                     "ties_pick": None if rank == 1 else rechecked[0].ties(r)})
    return pd.DataFrame(rows, columns=list(RECHECK_COLUMNS))


def _json(text: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(text)
    return out


def _dumps(dep: Deployment) -> str:
    return json.dumps(dep.to_dict(), sort_keys=True)
