"""The serving check's parts (issue 20) and the live pieces it needs for local Prefill on green lanes.

Fast checks beside the dry run: the plan's guards, config merging, the step
runner's caps (both ways), lanes read back from rows, the encode worker
warming every lane, ``live.device.sync`` waiting on the current stream only,
and calibration's prefill points on the levels' prefill lanes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bench.gpu import serve_steps
from bench.gpu.serve_configs import merged
from bench.gpu.serve_plan import STEPS, dry_plan, full_plan
from bench.gpu.serve_steps import Runner
from live.gpu.lanes import Lane, LanePool, null_pool

SLEEPER = "import sys, time\ndef main(argv):\n    time.sleep(float(argv[0]))\n    return 0\n" \
          "if __name__ == '__main__':\n    sys.exit(main(sys.argv[1:]))\n"


def test_full_plan_fits_the_wrapper_limit_and_needs_local_prefill() -> None:
    plan = full_plan("h200")
    assert plan.total_budget_s + 40 < 480  # the faulthandler fires before the wrapper's timeout
    assert set(plan.caps_s) == set(STEPS) and plan.serve_spec("dynamic") == "b4-s0.5-dynamic"
    assert plan.estimate_s(2, 40.0, 200) == pytest.approx(15 + 2 * (8 + 5 + 2))
    with pytest.raises(ValueError, match="local Prefill needs s < 1"):
        dataclasses.replace(plan, serve_remote_fraction=1.0)
    with pytest.raises(ValueError, match="unknown serve_modes"):
        dataclasses.replace(dry_plan(), serve_modes=("dynamic", "mps"))


def test_merged_replaces_the_profile_table_whole() -> None:
    base = {"seed": 0, "live": {"device": "cpu", "num_threads": 1}, "profile": {"sm_share_table": {"1": 0.5}}}
    out = merged(base, {"live": {"device": "cuda"}, "profile": {"path": "/p.json"}, "seed": None},
                 replaced=("profile",))
    assert out == {"live": {"device": "cuda", "num_threads": 1}, "profile": {"path": "/p.json"}}


@pytest.mark.parametrize("mode", ["subprocess", "inprocess"])
def test_a_step_past_its_cap_is_stopped(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(serve_steps, "GRACE_S", 2.0)
    runner = Runner(mode=mode, log_path=tmp_path / "log.txt", cwd=tmp_path)
    t0 = time.monotonic()
    result = runner.run("nap", "sleeper", ["30"], cap_s=1.0)
    assert (result.rc, result.timed_out, result.ok) == (124, True, False)
    assert time.monotonic() - t0 < 10
    assert runner.run("short", "sleeper", ["0"], cap_s=20.0).ok
    assert "nap: exit 124 (cap reached)" in (tmp_path / "log.txt").read_text()


def test_lanes_read_back_from_rows_pick_the_same_lanes() -> None:
    pool = null_pool()
    back = LanePool.from_rows(pool.rows())
    for role in ("encode", "prefill"):
        for share in (0.2, 0.35, 0.5, 0.8, 1.0):
            assert back.lane_for(role, share).sms == pool.lane_for(role, share).sms
    assert len(pool.every_lane()) == 2 * (len(pool.pairs) + 1)
    with pytest.raises(ValueError, match="'full'"):
        LanePool.from_rows([r for r in pool.rows() if r["level"] != "full"])


def test_the_encode_worker_warms_every_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    from easerve_core.sm_share import SMShareTable
    from live.gpu.green import GreenContextBackend
    from live.partition import DynamicPartitioner
    from live.workers.encode import EncodeWorker
    from live.zoo import ModelSpec, build_model

    spec = ModelSpec(name="qwen2-audio", size="tiny")
    worker = EncodeWorker.__new__(EncodeWorker)  # the parts warm_up reads, without a worker process
    worker.ctx = SimpleNamespace(family=spec.family, model=build_model(spec))
    table = SMShareTable.from_measurements({(1, 1.0): 1.0, (1, 0.2): 1.0})
    worker.partitioner = DynamicPartitioner(GreenContextBackend(null_pool()), table=table)
    worker.device = torch.device("cpu")
    used: list[str] = []

    def activate(self: Lane) -> contextlib.AbstractContextManager[None]:
        used.append(self.name)
        return contextlib.nullcontext()

    monkeypatch.setattr(Lane, "activate", activate)
    worker.warm_up()
    assert used == [lane.name for lane in null_pool().every_lane()]


def test_sync_waits_for_the_current_stream_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from live.device import sync

    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda *a, **k: SimpleNamespace(synchronize=lambda: calls.append("stream")))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append("device"))
    sync("cuda")
    sync("cpu")
    assert calls == ["stream"]


def test_prefill_share_points_cover_every_share_below_one() -> None:
    from calibration.loop.measure import CalibrationPlan, share_prefill_points
    from live.partition import CpuThreadBackend
    from live.zoo import ModelSpec, build_model

    spec = ModelSpec(name="qwen2-audio", size="tiny")
    plan = dataclasses.replace(CalibrationPlan.quick(), reps=1, warmup=0)
    rows = share_prefill_points(build_model(spec), spec, plan, CpuThreadBackend(2), 8,
                                {"reps": 1, "warmup": 0, "sync": lambda: None})
    assert {r["stage"] for r in rows} == {"prefill"}
    assert sorted({r["sm_share"] for r in rows}) == [s for s in sorted(plan.share_levels) if s < 1.0]
    assert len({r["seq_len"] for r in rows}) == 3
