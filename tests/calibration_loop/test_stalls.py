"""The one-off worker stall: off by default, seeded, placed exactly, and fitted back from traces."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from calibration.fit import FittedProfile
from calibration.loop.host import HostModel
from calibration.loop.refit import samples_from_log
from calibration.loop.stalls import find_pauses, fit_stalls, pause_summary
from easerve_core import Deployment, Modality, Request
from easerve_core.plan import assemble
from sim import SimOptions, simulate
from sim.host_effects import HostEffects
from sim.stalls import Stall, make_stall_plan
from tests.calibration_loop.helpers import CLUSTER, Flat, stage_durations, stage_point

DEP = Deployment(encode={"num_workers": 1}, prefill={"num_workers": 1, "tp": 1},
                 decode={"num_workers": 1, "tp": 1}, max_encode_batch=1, remote_fraction=1.0,
                 sm_sharing="none")


def _reqs(n, gap, out=3):
    return [Request(request_id=i, arrival_s=i * gap, modality=Modality.AUDIO, prompt_tokens=4,
                    output_tokens=out, mm_tokens_per_item=(8,)) for i in range(n)]


def spaced_durations(options):
    """Stage seconds of 4 requests 2 s apart: request i's encode and prefill are batch i, its decode
    steps 2i and 2i+1."""
    recs = simulate(assemble(DEP, _reqs(4, 2.0), cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                    options=options).records
    return stage_durations(recs)


def _stalls(stall_s=0.5, enc=(0, 0), pre=(0, 0), dec=(0, 0), **kw):
    return SimOptions(host=HostEffects(
        stall_s=stall_s, stall_encode_batches_min=enc[0], stall_encode_batches_max=enc[1],
        stall_prefill_batches_min=pre[0], stall_prefill_batches_max=pre[1],
        stall_decode_steps_min=dec[0], stall_decode_steps_max=dec[1], **kw))


def test_off_by_default_and_without_stall_s():
    assert SimOptions().host.stall_s == 0.0
    assert make_stall_plan(HostEffects(), seed=0) is None
    reqs = _reqs(20, 0.03)
    plain = simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=0, profile=Flat()), Flat()).records
    ranges_only = simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                           options=_stalls(stall_s=0.0, enc=(0, 9), dec=(0, 9))).records
    pd.testing.assert_frame_equal(plain, ranges_only)


@pytest.mark.parametrize("host_cores", [0.0, 8.0])
def test_pause_hits_the_drawn_batch_of_each_worker(host_cores):
    encode, prefill, decode = spaced_durations(
        _stalls(enc=(1, 1), pre=(2, 2), dec=(5, 5), num_host_cores=host_cores))
    assert encode == pytest.approx([0.1, 0.6, 0.1, 0.1])
    assert prefill == pytest.approx([0.05, 0.05, 0.55, 0.05])
    assert decode == pytest.approx([0.02, 0.02, 0.52, 0.02])


def test_same_seed_same_records_other_seed_other_records():
    options = _stalls(stall_s=0.2, enc=(0, 30), pre=(0, 30), dec=(0, 60), num_host_cores=2.0)
    reqs = _reqs(40, 0.05, out=6)
    run = [simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=s, profile=Flat()), Flat(),
                    options=options).records for s in (0, 0, 1)]
    pd.testing.assert_frame_equal(run[0], run[1])
    assert not run[0].equals(run[2])


def test_stall_options_are_checked():
    with pytest.raises(ValueError, match=r"host\.stall_decode_steps_max"):
        _stalls(dec=(5, 4))
    with pytest.raises(ValueError, match=r"host\.stall_s"):
        SimOptions(host=HostEffects(stall_s=-1.0))
    with pytest.raises(ValueError, match=r"host\.stall_prefill_batches_max"):
        HostModel(effects=HostEffects(stall_s=0.2, stall_prefill_batches_min=3.0,
                  stall_prefill_batches_max=2.0))
    stall = Stall(2, 0.3)
    assert [stall.next_batch_s() for _ in range(4)] == [0.0, 0.0, 0.3, 0.0]


def test_a_profiles_host_model_reaches_the_simulator_as_one_type():
    assert make_stall_plan(HostModel(effects=HostEffects(num_host_cores=2.0)).sim_base().host, seed=0) is None
    stored = {"num_host_cores": 2.0, "stall_s": 0.25, "stall_encode_batches_min": 33.0,
              "stall_encode_batches_max": 56.0, "stall_decode_steps_min": 51.0,
                  "stall_decode_steps_max": 54.0}
    host = HostModel.from_dict(stored)  # a profile file's params.host (whole-number floats)
    opts = host.sim_base()
    assert opts.host is host.effects
    assert opts.host.stall_s == 0.25 and opts.host.stall_encode_batches_max == 56
    assert opts.host.stall_decode_steps_min == 51 and isinstance(opts.host.stall_decode_steps_min, int)
    assert HostModel.from_dict(host.to_dict()) == host


# -- fitting the stall model from traces -------------------------------------------------

TRUE = FittedProfile(
    encode={"fixed_s": 0.002, "per_item_s": 0.015, "per_token_s": 2e-5, "fill_tokens": 1.0},
    prefill={"fixed_s": 0.0015, "per_token_s": 5e-5, "per_token2_s": 5e-8, "fill_tokens": 1.0},
    decode={"fixed_s": 0.0012, "per_seq_s": 1e-4, "per_context_token_s": 6e-7},
    embed_bytes_per_token=1024, kv_bytes_per_token=4096, share_steps=1)
#: the synthetic truth: pause length and the batch numbers it hits per process
PAUSE_S = 0.25
AT = {"encode": (30, 40), "prefill": (33, 35), "decode": (50, 55)}


def _synthetic_log(rng):
    """One run: an encode process (encode + local prefill), a prefill process, a decode process."""
    rows, truth, t = [], {}, 0.0
    for group, n in (("encode", 80), ("prefill", 60), ("decode", 120)):
        at = int(rng.integers(AT[group][0], AT[group][1] + 1))
        truth[group] = at
        for i in range(n):
            stage, batch, tokens, lat = stage_point(TRUE, group, i)
            lat *= 1 + 0.05 * rng.standard_normal()
            if i == at:
                lat += PAUSE_S * (1 + 0.04 * rng.standard_normal())
            rows.append((stage, 0, group, t, t + lat, batch, tokens, 1.0))
            t += lat + 0.001
    cols = ["stage", "worker", "group", "start_s", "end_s", "batch_size", "tokens", "sm_share"]
    return pd.DataFrame(rows, columns=cols), truth


def test_fit_recovers_pause_length_and_batch_ranges():
    rng = np.random.default_rng(7)
    runs = [_synthetic_log(rng) for _ in range(12)]
    pauses = pd.concat([find_pauses(log, None, TRUE) for log, _ in runs], ignore_index=True)
    found = {(g, i): at for i, (_, truth) in enumerate(runs) for g, at in truth.items()}
    run_of = np.repeat(np.arange(len(runs)), 3)
    seen = zip(pauses["group"], run_of, pauses["index"], strict=True)
    assert all(found[(g, r)] == idx for g, r, idx in seen)
    fit = fit_stalls(pauses)
    assert fit["stall_s"] == pytest.approx(PAUSE_S, rel=0.04)
    for group, unit in (("encode", "batches"), ("prefill", "batches"), ("decode", "steps")):
        seen = [t[group] for _, t in runs]
        assert (fit[f"stall_{group}_{unit}_min"], fit[f"stall_{group}_{unit}_max"]) == (min(seen), max(seen))
        assert AT[group][0] <= min(seen) and max(seen) <= AT[group][1]
    assert pause_summary(pauses)["paused"] == 36


def test_no_pause_no_stall_model_and_pause_rows_leave_the_samples():
    rng = np.random.default_rng(1)
    log, _ = _synthetic_log(rng)
    calm = log.copy()
    calm["end_s"] = calm["start_s"] + (log["end_s"] - log["start_s"]).clip(upper=0.05)
    assert fit_stalls(find_pauses(calm, None, TRUE)) == {}
    pauses = find_pauses(log, None, TRUE)
    full = samples_from_log(log, None)
    kept = samples_from_log(log, None, drop=pauses["row"].tolist())
    assert sum(map(len, full.values())) - sum(map(len, kept.values())) == 3
    assert max(r["latency_s"] for r in kept["decode"]) < 0.1
    with pytest.raises(ValueError, match="min_excess_s"):
        find_pauses(log, None, TRUE, min_excess_s=0.0)


# -- only some processes pause ----------------------------------------------------------

def test_stall_frac_one_is_the_old_model_and_zero_switches_a_stage_off():
    options = _stalls(stall_s=0.2, enc=(0, 30), pre=(0, 30), dec=(0, 60), num_host_cores=2.0)
    reqs = _reqs(40, 0.05, out=6)
    every = simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                     options=options).records
    explicit = simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                        options=SimOptions.from_dict(
        {"host": {"stall_encode_frac": 1.0, "stall_prefill_frac": 1.0, "stall_decode_frac": 1.0}},
        base=options)).records
    pd.testing.assert_frame_equal(every, explicit)
    plan = make_stall_plan(replace(options.host, stall_decode_frac=0.0), seed=0)
    assert plan.draw("encode") is not None and plan.draw("decode") is None
    # far apart requests: with the encode and prefill pauses off, only the decode pause remains
    off = _stalls(enc=(1, 1), pre=(2, 2), dec=(5, 5), stall_encode_frac=0.0, stall_prefill_frac=0.0)
    recs = simulate(assemble(DEP, _reqs(4, 2.0), cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                    options=off).records
    assert (recs["encode_end_s"] - recs["encode_start_s"]).to_numpy() == pytest.approx([0.1] * 4)
    assert (recs["finish_s"] - recs["first_token_s"]).to_numpy() == pytest.approx([0.02, 0.02, 0.52, 0.02])


def test_stall_frac_draws_are_seeded_and_near_the_fraction():
    options = _stalls(stall_s=0.2, enc=(3, 9), stall_encode_frac=0.4)
    plans = [make_stall_plan(options.host, seed=0) for _ in range(2)]
    draws = [[plan.draw("encode") for _ in range(400)] for plan in plans]
    assert [d is None for d in draws[0]] == [d is None for d in draws[1]]
    assert [d.at for d in draws[0] if d] == [d.at for d in draws[1] if d]
    assert sum(d is not None for d in draws[0]) / 400 == pytest.approx(0.4, abs=0.06)
    with pytest.raises(ValueError, match=r"host\.stall_decode_frac"):
        SimOptions(host=HostEffects(stall_decode_frac=1.5))
    with pytest.raises(ValueError, match=r"host\.stall_encode_frac"):
        HostModel(effects=HostEffects(stall_encode_frac=2.0))


def test_fit_gives_each_stage_the_fraction_that_paused():
    pauses = pd.DataFrame(
        [("encode", 0, 80, 40, 0.12, 40), ("encode", 0, 80, -1, 0.0, -1), ("encode", 0, 80, 35, 0.13, 35),
         ("decode", 0, 900, -1, 0.0, -1), ("decode", 0, 900, -1, 0.0, -1), ("encode", 0, 80, -1, 0.0, -1)],
        columns=["group", "worker", "num_batches", "index", "excess_s", "row"])
    fit = fit_stalls(pauses)
    assert fit["stall_encode_frac"] == 0.5 and fit["stall_decode_frac"] == 0.0
    assert fit["stall_prefill_frac"] == 1.0  # no prefill process in the traces: the old rule
    assert (fit["stall_encode_batches_min"], fit["stall_encode_batches_max"]) == (35, 40)
    effects = HostModel(effects=HostEffects(num_host_cores=2.0, **fit)).sim_base().host
    assert effects.stall_decode_frac == 0.0 and effects.stall_encode_frac == 0.5
