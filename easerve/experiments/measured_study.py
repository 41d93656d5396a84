"""The headline on measured hardware: peak goodput per system on 8 x H100 and 8 x H200.

:func:`measured_headline` runs the headline's tuned reading (every system at its
own HAS choice per rate, :func:`~easerve.experiments.headline.headline_sweep`)
on the setups of :mod:`easerve.experiments.measured_setup`, one server and
profile kind after another, and returns one row per (gpu, profile kind,
modality, system): its peak goodput at the moderate tier. The sweep and HAS
budget are smaller than the RTX 6000 Ada headline's (:func:`measured_plan`,
:data:`SCALE`; docs/results/README.md says why). :func:`ranking_changes` reads
where the order of the systems differs from the RTX 6000 Ada roofline's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd

from easerve.experiments.headline import Chooser
from easerve.experiments.measured_setup import MEASURED_SYSTEMS, gpu_of, load_tables, setup_for
from easerve.experiments.paper import MODALITIES
from easerve.experiments.sweep import Scale, goodput_sweep, peak_goodput
from runtime.parallel import IN_PROCESS, Backend

if TYPE_CHECKING:
    from easerve.experiments.eval_size import EvalSize

#: the measured headline's sweep: the RTX 6000 Ada headline's rules on a shorter grid reaching
#: 8 req/s (a faster server's peaks sit higher: up to six 1.5x extensions, to 91 req/s), points
#: of at least 150 s rather than 250 s
SCALE = Scale(num_requests=300, rates_hz=(0.5, 1.0, 2.0, 3.0, 5.0, 8.0), num_seeds=3,
                      timeline_s=1200.0, refine_levels=2, max_extensions=6, min_duration_s=150.0)
#: HAS's budget per choice on these servers (the RTX 6000 Ada headline's: 30 trials of 500
#: requests, two streams)
HAS_TRIALS = 20
HAS_REQUESTS = 300
HAS_SAMPLES = 2
#: the profile kinds the study runs on each server: measured, and the hand-set roofline, so a
#: change of GPU and a change of profile kind can be told apart
KINDS = ("measured", "roofline")
#: the reference the ranking is compared with: the committed headline's GPU and profile kind
REFERENCE = ("rtx6000ada", "roofline")
COLUMNS = ("gpu", "profile_kind", "modality", "system", "peak_goodput_rps", "at_rate_hz", "censored",
           "moderate_ttft_slo_s", "moderate_tpot_slo_s", "deployment")


def measured_plan(plan: EvalSize) -> EvalSize:
    """``plan`` with the measured headline's smaller sweep and HAS budget."""
    return replace(plan, scale=SCALE, has_trials=HAS_TRIALS, has_requests=HAS_REQUESTS,
                   has_samples=HAS_SAMPLES)


def measured_headline(plan: EvalSize, *, systems: Sequence[str] = MEASURED_SYSTEMS,
                      kinds: Sequence[str] = KINDS, modalities: Sequence[str] = tuple(MODALITIES),
                      backend: Backend = IN_PROCESS,
                      log: Callable[[str], None] = lambda _msg: None) -> pd.DataFrame:
    """The tuned headline's peaks on each of ``systems`` (aiconfigurator system names) under each
    of ``kinds``, at ``plan``'s settings (:func:`measured_plan` gives the committed ones)."""
    frames = []
    for system in systems:
        tables = load_tables(system) if "measured" in kinds else None
        for kind in kinds:
            log(f"headline on 8 x {gpu_of(system)}, {kind} profile")
            setups = {m: setup_for(m, system, kind, tables=tables) for m in modalities}
            chooser = Chooser(setups, plan, backend)
            sweep = goodput_sweep(setups, chooser.deployment_for("tuned"), plan.scale,
                                          backend=backend, prepare=chooser.prepare)
            peak = peak_goodput(sweep)
            peak["deployment"] = [chooser(m, r, s).deployment.label() for m, s, r in
                                  peak[["modality", "system", "at_rate_hz"]].itertuples(index=False)]
            peak["moderate_ttft_slo_s"] = [setups[m].slos["moderate"].ttft_s for m in peak["modality"]]
            peak["moderate_tpot_slo_s"] = [setups[m].slos["moderate"].tpot_s for m in peak["modality"]]
            frames.append(peak.rename(columns={"goodput_rps": "peak_goodput_rps"})
                          .assign(gpu=gpu_of(system), profile_kind=kind))
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def reference_peaks(peak_goodput: pd.DataFrame) -> pd.DataFrame:
    """The committed headline's tuned peaks (``peak_goodput``) in :data:`COLUMNS`' shape."""
    tuned = peak_goodput[peak_goodput["tuning"] == "tuned"] if "tuning" in peak_goodput else peak_goodput
    gpu, kind = REFERENCE
    return pd.DataFrame({"gpu": gpu, "profile_kind": kind, "modality": tuned["modality"],
                         "system": tuned["system"], "peak_goodput_rps": tuned["goodput_rps"],
                         "at_rate_hz": tuned["at_rate_hz"], "censored": tuned["censored"]})


def rankings(peaks: pd.DataFrame) -> pd.DataFrame:
    """One row per (gpu, profile kind, modality): the systems from the highest peak down
    (``ranking``, ``" > "`` between them; a tie within :data:`TIE_FRAC` is written ``" = "``)."""
    rows = []
    for (gpu, kind, modality), group in peaks.groupby(["gpu", "profile_kind", "modality"], sort=False):
        ordered = group.sort_values(["peak_goodput_rps", "system"], ascending=[False, True])
        parts, prev = [], None
        for system, value in zip(ordered["system"], ordered["peak_goodput_rps"], strict=True):
            if prev is not None:
                parts.append(" = " if _tied(prev, value) else " > ")
            parts.append(system)
            prev = value
        rows.append({"gpu": gpu, "profile_kind": kind, "modality": modality, "ranking": "".join(parts),
                     "order": tuple(ordered["system"])})
    return pd.DataFrame(rows)


#: two peaks within this fraction of the larger are a tie: after two refinements of a 1.5x step
#: the sweep's rate resolution near a peak is about 10%
TIE_FRAC = 0.05


def _tied(a: float, b: float) -> bool:
    return abs(a - b) <= TIE_FRAC * max(abs(a), abs(b), 1e-12)


def ranking_changes(peaks: pd.DataFrame, reference: tuple[str, str] = REFERENCE,
                    against: Sequence[tuple[str, str]] | None = None) -> list[str]:
    """Per modality, where the order of the systems under each (gpu, profile kind) of ``against``
    (default: every other one in ``peaks``) differs from ``reference``'s, one line each naming
    every pair of systems whose order changed (:func:`_change`: flipped, separated, or tied)."""
    value = peaks.set_index(["gpu", "profile_kind", "modality", "system"])["peak_goodput_rps"].to_dict()
    ranks = rankings(peaks)
    lines = []
    for modality in dict.fromkeys(ranks["modality"]):
        here = ranks[ranks["modality"] == modality].set_index(["gpu", "profile_kind"])
        if reference not in here.index:
            continue
        ref_order = here.loc[reference, "order"]
        others = [k for k in here.index if k != reference] if against is None else \
            [k for k in against if k in here.index]
        for gpu, kind in others:
            changes = [c for i, a in enumerate(ref_order) for b in ref_order[i + 1:]
                       if (c := _change(value, reference, (gpu, kind), modality, a, b))]
            lines.append(f"{modality}, {gpu} {kind} ({here.loc[(gpu, kind), 'ranking']}): "
                         f"{'; '.join(changes) or 'same order'}")
    return lines


def _change(value: dict[tuple[str, str, str, str], float], ref: tuple[str, str], other: tuple[str, str],
            modality: str, a: str, b: str) -> str | None:
    """How the order of ``a`` and ``b`` (``a`` first under ``ref``) differs under ``other``:
    ``"b above a"`` (flipped), ``"a above b, tied before"``, ``"b above a, tied before"``,
    ``"a = b, a above before"``, or None (the same, or a system missing)."""
    keys = [(*where, modality, s) for where in (ref, other) for s in (a, b)]
    if any(k not in value for k in keys):
        return None
    ra, rb, oa, ob = (value[k] for k in keys)
    tied_before, tied_now = _tied(ra, rb), _tied(oa, ob)
    if tied_before and tied_now:
        return None
    if tied_before:
        return f"{a} above {b}, tied before" if oa > ob else f"{b} above {a}, tied before"
    if tied_now:
        return f"{a} = {b}, {a} above before"
    return f"{b} above {a}" if ob > oa else None
