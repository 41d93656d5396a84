"""Refit a profile from live runs' stage logs: the stage models, and the host model's traced effects.

:func:`refit_from_runs` is what ``easerve calibrate --from-runs`` and the
confirmation loop (:mod:`calibration.loop.confirm`) run: it refits the
encode, prefill and decode models from the ``stage_log.parquet`` of live
runs, taking the host contention out with the host model of the base
profile (whose SM-share table and host model it keeps). It finds every
worker process's one-off pause in the traces, leaves those batches out of
the stage fit and stores the fitted stall model in the host model
(:mod:`calibration.loop.stalls`); likewise the warm-up of each process's
first batches of each lane (:mod:`calibration.loop.warmup`), the decode
batch changes (:mod:`calibration.loop.joins`) and the hand-offs
(:mod:`calibration.loop.handoffs`). Imports torch (the model's byte sizes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.fit import FitResult, fit_samples
from calibration.loop.handoffs import fit_handoffs
from calibration.loop.host import HostModel, host_of
from calibration.loop.joins import boundaries_of_runs, fit_joins, join_summary
from calibration.loop.measure import byte_sizes
from calibration.loop.refit import samples_from_runs, step_gap_s
from calibration.loop.samples import CPU_SHARE_STEPS, held_out_error
from calibration.loop.stalls import find_pauses, fit_stalls, pause_summary
from calibration.loop.warmup import fit_warmup, lane_excess, warmup_rows, warmup_summary
from easerve_core.profile import ProfileDoc
from easerve_core.result import STAGE_LOG_COLUMNS
from live.zoo import ModelSpec, build_model
from runtime.files import read_json
from runtime.results import read_records, read_table
from sim.host_effects import WARMUP_LANES

#: host-model fields the refit measures from the traces' batch changes and hand-offs
TRACE_HOST_KEYS = ("decode_join_s", "decode_leave_s", "decode_join_more_s", "handoff_prefill_s",
                   "handoff_decode_s", "handoff_busy_s", "handoff_prefill_quantiles_s",
                   "handoff_decode_quantiles_s")
Run = tuple[pd.DataFrame, dict[str, Any], pd.DataFrame | None]


def read_run(folder: Path) -> Run:
    """(stage log, config, records or None) of one run folder."""
    log_path, cfg_path = folder / "stage_log.parquet", folder / "config.json"
    if not folder.is_dir() or not log_path.exists() or not cfg_path.exists():
        raise ValueError(f"{folder} is not a run folder (needs stage_log.parquet and config.json)")
    config = read_json(cfg_path, what="run config")
    model = config.get("model") if isinstance(config, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("name"), str):
        raise ValueError(f"{cfg_path}: not a run's config (no [model] name)")
    if not isinstance(model.get("size", "full"), str):
        raise ValueError(f"{cfg_path}: [model] size must be a string, got {model['size']!r:.40}")
    if not isinstance(config.get("deployment", {}), dict):
        raise ValueError(f"{cfg_path}: deployment must be a table")
    rec_path = folder / "records.parquet"
    records = read_records(rec_path) if rec_path.exists() else None
    log = read_table(log_path, STAGE_LOG_COLUMNS)
    for column in ("stage", "group"):  # a stage the refit does not fit (local-prefill) is left out
        if column in log and log[column].isna().any():
            raise ValueError(f"{log_path}: column {column!r} must name every batch's {column}")
    if (log["batch_size"] < 1).any() or (log["end_s"] < log["start_s"]).any():
        raise ValueError(f"{log_path}: every batch needs batch_size >= 1 and end_s >= start_s")
    return log, config, records


def refit_from_runs(runs: Sequence[Run], base: ProfileDoc | None, *, created: str,
                    sources: Sequence[str] = ()) -> ProfileDoc:
    """The profile refit from ``runs`` (see the module docstring); ``sources`` name them in the profile."""
    models = {(c["model"]["name"], c["model"].get("size", "full")) for _, c, _ in runs}
    if len(models) != 1:
        raise ValueError(f"--from-runs: runs of different models {sorted(models)}")
    for source, (_, cfg, _) in zip(sources or [str(i) for i in range(len(runs))], runs, strict=True):
        if cfg.get("deployment", {}).get("architecture", "disaggregated") != "disaggregated":
            raise ValueError(f"--from-runs: {source} ran an aggregated deployment; the refit fits "
                             "the stages of disaggregated workers (and their hand-offs)")
    host = host_of(base.params) if base is not None else None
    name, size = models.pop()
    spec = ModelSpec(name=name, size=size)
    embed, kv = byte_sizes(build_model(spec, device="meta"))
    logs = [log for log, _, _ in runs]
    kw = dict(host=host, model=spec.name, gpu=base.gpu if base else "cpu", embed_bytes_per_token=embed,
              kv_bytes_per_token=kv, share_steps=CPU_SHARE_STEPS)
    samples, result, pauses, excess = _fit_traces(logs, host, kw)
    warmup = fit_warmup(excess)
    joins = _fit_joins(runs, host)
    handoffs = _fit_handoffs(runs, host, joins, embed_bytes_per_token=embed, kv_bytes_per_token=kv)
    params = result.profile.to_params()
    params.update(lm_tp=1, held_out_error=held_out_error(samples),
                  measured={"size": size, "runs": list(sources),
                            "decode_step_gap_s": step_gap_s(pd.concat(logs)),
                            "stalls": pause_summary(pauses), "warmup": warmup_summary(excess),
                            "joins": joins, "handoffs": handoffs})
    if host is not None:
        # the refit decode steps exclude the loop's gaps: keep measuring those from the traces
        traced = {k: v for k, v in {**joins, **handoffs}.items() if k in TRACE_HOST_KEYS}
        lanes = {**{f"warmup_{lane}_s": () for lane in WARMUP_LANES}, **warmup}
        refit = host.with_effects(**fit_stalls(pauses), **lanes, **traced)
        step_gap = params["measured"]["decode_step_gap_s"]
        params["host"] = replace(refit, decode_step_overhead_s=step_gap).to_dict()
    table = base.sm_share_table if base is not None else None
    return ProfileDoc(kind="fitted", model=spec.name, gpu=base.gpu if base else "cpu",
                      source=str(samples["source"]), created=created, params=params, sm_share_table=table,
                      fit_error=result.fit_error,
                      notes="refit from live stage logs; contention taken out with the base host model")


def _fit_joins(runs: Sequence[Run],
               host: HostModel | None) -> dict[str, Any]:
    """The decode batch-change costs from the runs' traces (:mod:`calibration.loop.joins`).

    Needs every run's ``records.parquet`` (which requests left at which step);
    without them the base profile's isolated join cost stays and no leave cost
    is fitted.
    """
    if any(rec is None for _, _, rec in runs):
        return {"boundaries": 0, "note": "a run lacks records.parquet: join and leave costs not refitted"}
    table = boundaries_of_runs([log for log, _, _ in runs], [rec for _, _, rec in runs if rec is not None],
                               host)
    return join_summary(table, fit_joins(table))


def _fit_handoffs(runs: Sequence[Run], host: HostModel | None,
                  joins: dict[str, Any], **sizes: int) -> dict[str, Any]:
    """The hand-off delays beyond the link, from the runs' traces (:mod:`calibration.loop.handoffs`).

    The decode direction leaves out the refitted join cost; like the joins,
    it needs every run's ``records.parquet``.
    """
    if any(rec is None for _, _, rec in runs):
        return {"note": "a run lacks records.parquet: hand-off delays not fitted"}
    base = (host or HostModel()).with_effects(decode_join_s=float(joins.get("decode_join_s", 0.0)))
    return fit_handoffs([log for log, _, _ in runs], [rec for _, _, rec in runs if rec is not None], base,
                        **sizes)


def _fit_traces(logs: list[pd.DataFrame], host: HostModel | None,
                kw: dict[str, Any]) -> tuple[dict[str, Any], FitResult, pd.DataFrame, pd.DataFrame]:
    """(samples, stage fit, pauses, warm-up excess rows) from the runs' stage logs.

    Three passes: the pauses are found against a first fit and left out; the
    warm-up against the second and its rows left out too; both are measured
    against the final fit.
    """
    first = fit_samples(samples_from_runs(logs, **kw)).profile
    paused = [p.loc[p["row"] >= 0, "row"].tolist() for p in (find_pauses(log, host, first) for log in logs)]
    second = fit_samples(samples_from_runs(logs, **kw, drop=paused)).profile
    warm = [lane_excess(log, host, second, drop=d) for log, d in zip(logs, paused, strict=True)]
    fitted = fit_warmup(pd.concat(warm, ignore_index=True))
    drop = [d + warmup_rows(w, fitted) for d, w in zip(paused, warm, strict=True)]
    samples = samples_from_runs(logs, **kw, drop=drop)
    result = fit_samples(samples)
    pauses = [find_pauses(log, host, result.profile) for log in logs]
    excess = [lane_excess(log, host, result.profile, drop=p.loc[p["row"] >= 0, "row"].tolist())
              for log, p in zip(logs, pauses, strict=True)]
    return samples, result, pd.concat(pauses, ignore_index=True), pd.concat(excess, ignore_index=True)
