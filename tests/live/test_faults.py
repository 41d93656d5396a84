"""Faults and bad input: a killed worker, malformed requests, Ctrl-C on `easerve live`."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
import torch

from easerve_core.plan import replan
from live.families import MMInput
from live.trial import Trial
from tests.live.conftest import live_config, live_plan, pid_alive

ROOT = Path(__file__).resolve().parents[2]


def test_killed_worker_fails_its_requests_and_the_trial_goes_on(no_orphans):
    config = live_config("qwen2-audio", num_requests=60, rate_hz=25.0,
                         deployment={"decode": {"num_workers": 2}},
                         workload={"output_tokens": [20, 40]},
                         live={"trial_timeout_s": 40.0})
    victim = ("decode", 1)
    with Trial(live_plan(config)) as trial:
        trial.start()
        pids = trial.worker_pids()
        killer = threading.Timer(0.8, os.kill, args=(pids[victim], signal.SIGKILL))
        killer.start()
        began = time.monotonic()
        result = trial.run()
        killer.join()
        assert time.monotonic() - began < config.engine["live"]["trial_timeout_s"]
    rec = result.records
    failed = rec[rec["status"] == "failed"]
    assert len(failed) > 0 and (rec["status"] != "rejected").all()
    assert failed["error"].str.contains("decode worker 1.*died", regex=True).all(), failed["error"].tolist()
    ok = rec[rec["status"] == "ok"]
    assert len(ok) + len(failed) == 60 and len(ok) > len(failed)
    late = ok[ok["arrival_s"] > 1.5]  # issued after the death: placed on the live decode worker
    assert len(late) > 0 and (late["decode_worker"] == 0).all()
    assert not any(pid_alive(pid) for pid in pids.values())


def test_malformed_inputs_are_rejected_and_the_rest_complete(no_orphans):
    plan = live_plan(live_config("qwen2.5-vl", num_requests=12))
    with Trial(plan) as trial:
        jobs = {j.request.request_id: j for j in trial.build_jobs()}
        good = jobs[3].mm
        overrides = {
            3: MMInput(modality=good.modality, items=(good.items[0][:, :100],), meta=good.meta),
            5: MMInput(modality=good.modality, items=(), meta=()),
            6: MMInput(modality=good.modality, items=(torch.full_like(good.items[0], float("nan")),),
                       meta=good.meta),
        }
        requests = [dataclasses.replace(j.request, prompt_tokens=5000) if rid == 7 else j.request
                    for rid, j in jobs.items()]
    with Trial(replan(plan, requests=requests), inputs=overrides) as trial:
        trial.start()
        rec = trial.run().records.set_index("request_id")
    assert set(rec.index[rec["status"] == "rejected"]) == {3, 5, 6, 7}
    assert "shape" in rec.loc[3, "error"] and "zero items" in rec.loc[5, "error"]
    assert "NaN" in rec.loc[6, "error"] and "context is 4096" in rec.loc[7, "error"]
    assert (rec.drop(index=[3, 5, 6, 7])["status"] == "ok").all()


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_workers_and_writes_partial_records(tmp_path, signum, status):
    config = tmp_path / "slow.toml"
    text = (ROOT / "configs" / "tiny_llava_cpu.toml").read_text()
    config.write_text(text.replace("rate_hz = 20.0", "rate_hz = 4.0"))
    out = tmp_path / "out"
    exe = Path(sys.executable).with_name("easerve")
    # A shell's background job starts with SIGINT ignored, and Python keeps an inherited SIG_IGN;
    # give the front end the default disposition so it sees the Ctrl-C a user would send.
    proc = subprocess.Popen([str(exe), "live", str(config), "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        workers = _wait_for_workers(proc.pid, 3, timeout_s=60.0)
        everyone = [k.pid for k in psutil.Process(proc.pid).children(recursive=True)]
        time.sleep(3.0)  # a few requests in
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, output.decode()[-2000:]
    assert b"leaked semaphore" not in output and b"Traceback" not in output, output.decode()[-2000:]
    rec = pd.read_parquet(out / "records.parquet")
    assert len(rec) == 100
    assert (rec["status"] == "ok").sum() > 0
    assert (rec.loc[rec["status"] != "ok", "error"] == "interrupted").all()
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in everyone) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workers and not any(pid_alive(p) for p in everyone)  # workers, forkserver, resource tracker


def _wait_for_workers(pid: int, count: int, *, timeout_s: float) -> list[int]:
    """PIDs of the worker processes under ``pid`` (through the forkserver), once all exist."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            parent = psutil.Process(pid)
            helpers = {k.pid for k in parent.children()}  # forkserver, resource tracker
            workers = [k.pid for k in parent.children(recursive=True) if k.pid not in helpers]
        except psutil.Error:
            workers = []
        if len(workers) >= count:
            return workers
        time.sleep(0.2)
    pytest.fail(f"workers did not start within {timeout_s} s")


def test_killing_the_only_prefill_worker_leaves_local_prefill_serving(no_orphans):
    config = live_config("qwen2-audio", num_requests=60, rate_hz=25.0,
                         deployment={"remote_fraction": 0.5}, live={"trial_timeout_s": 40.0})
    plan = live_plan(config)
    with Trial(plan) as trial:
        trial.start()
        pids = trial.worker_pids()
        killer = threading.Timer(0.8, os.kill, args=(pids[("prefill", 0)], signal.SIGKILL))
        killer.start()
        result = trial.run()
        killer.join()
        encode_alive = trial.procs[("encode", 0)].exitcode is None
    rec = result.records
    assert len(rec) == 60 and rec["request_id"].is_unique  # every request accounted for
    assert encode_alive and ("encode", 0) not in trial.ledger.crashes  # the encode worker did not crash
    failed = rec[rec["status"] == "failed"]
    assert failed["error"].str.contains("prefill worker 0").all(), failed["error"].tolist()
    late = rec[rec["arrival_s"] > 1.5]  # issued well after the death
    assert len(late) > 0 and (late["status"] == "ok").all(), late["error"].tolist()
    assert (late["route"] == "local").all()  # the router's remote share falls back to local Prefill
    notes = {n["request_id"] for n in result.meta["notes"]}
    assert notes and notes <= set(rec["request_id"]) and all("routed local" in n["why"]
                                                             for n in result.meta["notes"])
    assert result.meta["placement"]["workers"] == 3
