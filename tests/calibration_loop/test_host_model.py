"""The simulator's opt-in CPU-host model: processor sharing, co-location, intake, dispatch delay."""

from __future__ import annotations

import math

import pytest

from easerve_core import Deployment, Modality, Request
from easerve_core.plan import assemble
from sim import SimOptions, simulate
from sim.host import HostCPU, Progress
from sim.host_effects import HostEffects
from tests.calibration_loop.helpers import CLUSTER, Flat


def _dep(**kw):
    base = dict(encode={"num_workers": 1}, prefill={"num_workers": 1, "tp": 1},
                decode={"num_workers": 1, "tp": 1}, max_encode_batch=1, remote_fraction=1.0,
                sm_sharing="none")
    base.update(kw)
    return Deployment(**base)


def _reqs(n, gap=0.0, out=2):
    return [Request(request_id=i, arrival_s=i * gap, modality=Modality.AUDIO, prompt_tokens=4,
                    output_tokens=out, mm_tokens_per_item=(8,)) for i in range(n)]


def test_host_factor_is_processor_sharing():
    host = HostCPU(2.0)
    seen = []
    a, b, c = (host.join(lambda now, f: seen.append((now, f))) for _ in range(3))
    host.set_busy(a, 0.0, 1)
    host.set_busy(b, 0.0, 1)
    assert host.factor == 1.0 and seen == []
    host.set_busy(c, 1.0, 1)
    assert host.factor == pytest.approx(2 / 3) and len(seen) == 3
    host.set_busy(c, 2.0, 0)
    assert host.factor == 1.0


def test_progress_rerates_remaining_work():
    p = Progress()
    p.begin(0.0, 1.0, 1.0)
    p.rate(0.5, 0.5)  # half done, the rest at half speed
    assert p.end_s == pytest.approx(1.5)
    p.resize(1.0, 0.6)  # 0.75 done already > 0.6: finishes now
    assert p.end_s == pytest.approx(1.0)


def test_default_path_unchanged_by_host_keys_at_zero():
    reqs = _reqs(20, gap=0.03)
    base = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat()).records
    off = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                   options=SimOptions(host=HostEffects(num_host_cores=0.0, dispatch_latency_s=0.0))).records
    assert base.equals(off)


def test_one_core_stretches_overlapping_stages():
    # request 0 prefills (0.1..0.15) while request 1 encodes (0.1..0.2): on one core both halve
    reqs = _reqs(2, gap=0.1, out=1)
    alone = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat()).records
    shared = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                      options=SimOptions(host=HostEffects(num_host_cores=1.0))).records
    assert alone["first_token_s"].tolist() == pytest.approx([0.15, 0.25])
    # 0.1-0.2: both run at 1/2 -> prefill of 0 ends at 0.2; encode of 1 has 0.05 left alone -> 0.25
    assert shared["first_token_s"][0] == pytest.approx(0.2)
    assert shared["encode_end_s"][1] == pytest.approx(0.25)
    assert shared["first_token_s"][1] == pytest.approx(0.30)



def _aggregated():
    return Deployment(encode={"num_workers": 0}, prefill={"num_workers": 0},
                      decode={"num_workers": 2, "tp": 1}, architecture="aggregated")


def test_aggregated_instances_share_the_host():
    """Two aggregated instances on one core: a phase's encode and prefill drain at the host's factor."""
    reqs = _reqs(2, gap=0.1, out=1)
    plan = assemble(_aggregated(), reqs, cluster=CLUSTER, profile=Flat())
    alone = simulate(plan, Flat()).records
    off = simulate(plan, Flat(), options=SimOptions(host=HostEffects(num_host_cores=0.0))).records
    shared = simulate(plan, Flat(), options=SimOptions(host=HostEffects(num_host_cores=1.0))).records
    assert alone.equals(off)
    assert alone["first_token_s"].tolist() == pytest.approx([0.15, 0.25])
    assert shared["decode_worker"].tolist() == [0, 1]
    # 0.1-0.2: instance 0 prefills while instance 1 encodes, both at 1/2
    assert shared["first_token_s"][0] == pytest.approx(0.2)
    assert shared["encode_end_s"][1] == pytest.approx(0.25)
    assert shared["first_token_s"][1] == pytest.approx(0.30)


def test_aggregated_decode_pays_its_joins_and_the_host():
    # one instance: request 0 decodes (2 steps of 0.01 s) after its phase, plus the join's 4 ms
    reqs = _reqs(1, out=3)
    dep = Deployment(encode={"num_workers": 0}, prefill={"num_workers": 0},
                     decode={"num_workers": 1, "tp": 1}, architecture="aggregated")
    plan = assemble(dep, reqs, cluster=CLUSTER, profile=Flat())
    base = simulate(plan, Flat()).records
    joined = simulate(plan, Flat(), options=SimOptions(host=HostEffects(decode_join_s=0.004))).records
    slow = simulate(plan, Flat(), options=SimOptions(
        host=HostEffects(num_host_cores=0.5, decode_join_s=0.004))).records  # half a core: 2x
    assert base["finish_s"][0] == pytest.approx(0.15 + 0.02)
    assert joined["finish_s"][0] == pytest.approx(0.15 + 0.024)
    assert slow["first_token_s"][0] == pytest.approx(0.30)
    assert slow["finish_s"][0] == pytest.approx(0.30 + 0.048)

def test_colocated_lanes_slow_each_other():
    reqs = _reqs(2, gap=0.1, out=1)
    dep = _dep(remote_fraction=0.0, sm_sharing="time-slice", prefill={"num_workers": 0, "tp": 1})
    opts = SimOptions(host=HostEffects(num_host_cores=4.0, colocated_speed_frac=0.5))
    rec = simulate(assemble(dep, reqs, cluster=CLUSTER, profile=Flat()), Flat(), options=opts).records
    # local prefill of 0 (0.1..) and encode of 1 (0.1..) share one process at half speed
    assert rec["first_token_s"][0] == pytest.approx(0.2)
    assert rec["encode_end_s"][1] == pytest.approx(0.25)


def test_dispatch_latency_and_blocked_intake():
    reqs = _reqs(3, gap=0.01, out=1)
    opts = SimOptions(encode_intake_blocking=True, host=HostEffects(dispatch_latency_s=0.02))
    rec = simulate(assemble(_dep(max_encode_batch=4), reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                   options=opts).records
    assert rec["arrival_s"].tolist() == pytest.approx([0.0, 0.01, 0.02])
    assert rec["encode_start_s"].min() >= 0.02
    assert not math.isnan(rec["finish_s"].max())


def test_decode_join_cost_delays_the_next_segment():
    reqs = _reqs(1, out=3)
    base = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat()).records
    joined = simulate(assemble(_dep(), reqs, cluster=CLUSTER, profile=Flat()), Flat(),
                      options=SimOptions(host=HostEffects(decode_join_s=0.004))).records
    assert joined["finish_s"][0] - base["finish_s"][0] == pytest.approx(0.004)
    assert joined["first_token_s"][0] == base["first_token_s"][0]


def test_contention_children_run_a_model_stage_factory():
    """The GPU's device-sharing measurement, on the CPU: children build the stage work, then count it."""
    import functools

    from calibration.loop.measure import device_stage_work
    from live.profiling_host import fit_cores, measure_contention

    work = functools.partial(device_stage_work, "qwen2-audio", "tiny", 8, 24, device="cpu")
    rows = measure_contention(2, duration_s=0.3, reps=1, make_work=work)
    assert [r["procs"] for r in rows] == [1, 2]
    assert rows[0]["speed_frac"] == 1.0 and rows[1]["speed_frac"] > 0
    assert rows[1]["rate_hz"] == pytest.approx(rows[0]["rate_hz"] * rows[1]["speed_frac"])
    assert 1.0 <= fit_cores(rows) <= 2.0
