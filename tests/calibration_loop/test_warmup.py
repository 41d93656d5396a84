"""A fresh worker's warm-up: off by default, deterministic, on exactly its first batches, and fitted back."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.loop.host import HostModel
from calibration.loop.warmup import fit_warmup, lane_excess, lane_of, warmup_rows, warmup_summary
from easerve_core import Deployment
from easerve_core.plan import assemble
from sim import SimOptions, simulate
from sim.host_effects import HostEffects
from sim.warmup import WARMUP_LANES, Warmup, make_warmup
from tests.calibration_loop.helpers import CLUSTER, Flat, stage_point
from tests.calibration_loop.test_stalls import DEP, TRUE, _reqs, spaced_durations

OFF = {"warmup_encode_s": (), "warmup_local_prefill_s": (), "warmup_prefill_s": (), "warmup_decode_s": ()}


def _warm(enc=(), local=(), pre=(), dec=(), **kw):
    return SimOptions(host=HostEffects(warmup_encode_s=enc, warmup_local_prefill_s=local,
                                       warmup_prefill_s=pre, warmup_decode_s=dec, **kw))


def test_off_by_default():
    options = SimOptions()
    assert all(getattr(options.host, k) == () for k in OFF)
    assert all(make_warmup(options.host, lane) is None for lane in WARMUP_LANES)
    reqs = _reqs(20, 0.03)
    plain = simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=0, profile=Flat()), Flat()).records
    empty = simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                     options=_warm()).records
    pd.testing.assert_frame_equal(plain, empty)


@pytest.mark.parametrize("host_cores", [0.0, 8.0])
def test_first_batches_of_each_lane_pay_exactly_their_warmup(host_cores):
    encode, prefill, decode = spaced_durations(
        _warm(enc=(0.3, 0.1), pre=(0.2,), dec=(0.05, 0.0, 0.04), num_host_cores=host_cores))
    assert encode == pytest.approx([0.4, 0.2, 0.1, 0.1])
    assert prefill == pytest.approx([0.25, 0.05, 0.05, 0.05])
    assert decode == pytest.approx([0.07, 0.06, 0.02, 0.02])
    # switched off, the same requests run at the profile's latencies: the model is what made the difference
    off = simulate(assemble(DEP, _reqs(4, 2.0), cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                   options=SimOptions(host=HostEffects(num_host_cores=host_cores))).records
    assert (off["encode_end_s"] - off["encode_start_s"]).to_numpy() == pytest.approx([0.1] * 4)


def test_local_prefill_lane_is_its_own():
    local = Deployment(encode={"num_workers": 1}, prefill={"num_workers": 1, "tp": 1},
                       decode={"num_workers": 1, "tp": 1}, max_encode_batch=1, remote_fraction=0.0,
                       sm_sharing="time-slice")
    options = _warm(local=(0.2, 0.1), pre=(5.0,))
    recs = simulate(assemble(local, _reqs(3, 2.0), cluster=CLUSTER, seed=0, profile=Flat()), Flat(),
                    options=options).records
    prefill = (recs["first_token_s"] - recs["prefill_start_s"]).to_numpy()
    assert prefill == pytest.approx([0.25, 0.15, 0.05])  # no remote prefill ran, so its 5 s never counts


def test_same_options_same_records_and_decode_segments_stay_exact():
    options = _warm(enc=(0.01,), local=(0.02,), pre=(0.01, 0.005), dec=(0.004, 0.001, 0.001),
                    num_host_cores=2.0, stall_s=0.1, stall_decode_steps_min=1, stall_decode_steps_max=2)
    reqs = _reqs(40, 0.02, out=6)
    a, b = (simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=3, profile=Flat()), Flat(),
                     options=options) for _ in range(2))
    pd.testing.assert_frame_equal(a.records, b.records)
    off = simulate(assemble(DEP, reqs, cluster=CLUSTER, seed=3, profile=Flat()), Flat(),
                   options=SimOptions.from_dict(
        {"host": OFF}, base=options)).records
    assert not a.records.equals(off)
    assert a.records["finish_s"].iloc[0] > off["finish_s"].iloc[0]


def test_warmup_counts_and_options_are_checked():
    w = Warmup([0.3, 0.0, 0.1])
    assert [w.next_batch_s() for _ in range(5)] == [0.3, 0.0, 0.1, 0.0, 0.0]
    assert not w.pending()
    with pytest.raises(ValueError, match="extra_s"):
        Warmup([])
    with pytest.raises(ValueError, match=r"host\.warmup_decode_s"):
        _warm(dec=(0.1, -0.1))
    with pytest.raises(ValueError, match=r"host\.warmup_encode_s"):
        SimOptions(host=HostEffects(warmup_encode_s=0.1))
    with pytest.raises(ValueError, match=r"host\.warmup_prefill_s"):
        HostModel(effects=HostEffects(warmup_prefill_s=[float("nan")]))
    with pytest.raises(ValueError, match="unknown warm-up lane"):
        make_warmup(HostEffects(), "vision")
    # lists from TOML or JSON become tuples
    table = {"host": {"warmup_decode_s": [0.004, 0.001]}}
    assert SimOptions.from_dict(table).host.warmup_decode_s == (0.004, 0.001)


def test_host_model_switches_a_lane_on_only_when_it_has_a_warmup():
    effects = HostModel(effects=HostEffects(num_host_cores=2.0)).sim_base().host
    assert all(make_warmup(effects, lane) is None for lane in WARMUP_LANES)
    host = HostModel(effects=HostEffects(num_host_cores=2.0, warmup_decode_s=[0.004, 0.0007]))
    effects = host.sim_base().host
    assert [lane for lane in WARMUP_LANES if make_warmup(effects, lane)] == ["decode"]
    assert effects.warmup_decode_s == (0.004, 0.0007)
    assert HostModel.from_dict(host.to_dict()) == host


# -- fitting the warm-up from traces ------------------------------------------------------

#: the synthetic truth: extra seconds of a fresh process's first batches, per lane
WARM = {"encode": (0.012, 0.004), "local_prefill": (0.009,), "prefill": (), "decode": (0.004, 0.0008)}


def _synthetic_log(rng):
    """One run: an encode process (encode + local prefill), a prefill process, a decode process."""
    rows, t = [], 0.0
    counts = dict.fromkeys(WARM, 0)
    for group, n in (("encode", 80), ("prefill", 60), ("decode", 120)):
        for i in range(n):
            stage, batch, tokens, lat = stage_point(TRUE, group, i)
            lat *= 1 + 0.02 * rng.standard_normal()
            lane = lane_of(group, stage)
            k = counts[lane]
            counts[lane] = k + 1
            lat += WARM[lane][k] if k < len(WARM[lane]) else 0.0
            rows.append((stage, 0, group, t, t + lat, batch, tokens, 1.0))
            t += lat + 0.001
        counts = dict.fromkeys(WARM, 0)
    cols = ["stage", "worker", "group", "start_s", "end_s", "batch_size", "tokens", "sm_share"]
    return pd.DataFrame(rows, columns=cols)


def test_fit_recovers_the_warmup_of_each_lane():
    rng = np.random.default_rng(5)
    excess = pd.concat([lane_excess(_synthetic_log(rng), None, TRUE) for _ in range(12)], ignore_index=True)
    fit = fit_warmup(excess)
    assert set(fit) == {"warmup_encode_s", "warmup_local_prefill_s", "warmup_decode_s"}
    for lane in ("encode", "local_prefill", "decode"):
        assert fit[f"warmup_{lane}_s"] == pytest.approx(WARM[lane], rel=0.15, abs=2e-4)
    summary = warmup_summary(excess)
    assert summary["decode"]["processes"] == 12 and summary["decode"]["first_excess_ms"][0] == pytest.approx(
        4.0, rel=0.15)


def test_warmup_rows_leave_the_samples_and_calm_traces_fit_nothing():
    rng = np.random.default_rng(2)
    fit = fit_warmup(pd.concat([lane_excess(_synthetic_log(rng), None, TRUE) for _ in range(12)]))
    log = _synthetic_log(rng)
    excess = lane_excess(log, None, TRUE)
    rows = warmup_rows(excess, fit)
    assert len(rows) == 2 + 1 + 2
    assert all(excess.set_index("row").loc[r, "index"] < 2 for r in rows)
    dropped = lane_excess(log, None, TRUE, drop=rows[:1])
    assert len(dropped) == len(log) - 1 and dropped["index"].max() == excess["index"].max()
    calm = pd.concat([lane_excess(_synthetic_log(rng), None, TRUE) for _ in range(12)], ignore_index=True)
    calm = calm[calm["index"] >= 3].assign(index=lambda f: f["index"] - 3)
    assert fit_warmup(calm) == {}
    with pytest.raises(ValueError, match="min_excess_s"):
        fit_warmup(excess, min_excess_s=0.0)
