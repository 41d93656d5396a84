"""A run folder read back (``runtime.results.read_result``, what ``validate --live-from`` reads) is
checked as it is read: each damaged file is one ``ValueError`` naming the file and the column.

The cases are the mutation harness's findings (``tests/core/mutation.py``, kind ``recorded``): a
request id that was not a whole number reached ``int()`` as infinity, and a summary's host cores that
were not numbers reached ``float()``; both were internal errors of ``easerve validate``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from easerve.cli.validate_cmd import recorded_cores
from easerve_core import Cluster, Deployment
from easerve_core.deployment import StageGroup
from easerve_core.plan import assemble
from easerve_core.workload import WorkloadSpec, generate
from runtime.results import read_result, write_result
from sim import simulate
from tests.sim.conftest import AffineProfile

PROFILE = AffineProfile(encode_per_token_s=2e-6, prefill_per_token_s=4e-5, decode_per_ctx_s=1e-8)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    spec = WorkloadSpec.from_dict({"mix": "llava-image", "rate_hz": 4.0, "num_requests": 30})
    epd = Deployment(encode=StageGroup(num_workers=2, tp=1), prefill=StageGroup(num_workers=1, tp=2),
                     decode=StageGroup(num_workers=2, tp=2), max_encode_batch=4, remote_fraction=0.5)
    plan = assemble(epd, generate(spec, np.random.default_rng(0)),
                    cluster=Cluster(gpu="test-gpu", num_gpus=8), profile=PROFILE)
    return write_result(simulate(plan, PROFILE), tmp_path_factory.mktemp("run") / "run")


def _frame(change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        change(pd.read_parquet(path / "records.parquet")).to_parquet(path / "records.parquet")
    return apply


def _set(column: str, value: object) -> Callable[[Path], None]:
    """The first row's ``column`` set to ``value`` (the column as text when the value is text)."""
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        kind = str if isinstance(value, str) else float
        frame[column] = frame[column].astype(kind)
        frame.loc[frame.index[0], column] = value
        return frame
    return _frame(change)


@pytest.mark.parametrize(("damage", "match"), [
    (_set("request_id", float("inf")), "column 'request_id' must hold whole numbers"),
    (_set("request_id", 2.5), "column 'request_id' must hold whole numbers"),
    (_set("arrival_s", -1.0), "column 'arrival_s' must hold finite values >= 0"),
    (_set("first_token_s", float("inf")), "column 'first_token_s' must hold finite values >= 0"),
    (_set("output_tokens", "many"), "column 'output_tokens' must hold int64 values"),
    (_set("status", "lost"), "column 'status' must hold one of ok, failed, rejected, got 'lost'"),
    (_frame(lambda f: f.drop(columns=["finish_s"])), "lacks column"),
    (_frame(lambda f: pd.concat([f, f.iloc[:1]])), "is recorded twice"),
    (lambda p: (p / "records.parquet").write_bytes(b"PAR1 torn"), "not a Parquet table"),
    (lambda p: (p / "summary.json").write_text("[1, 2]"), "not a JSON object"),
    (lambda p: (p / "config.json").write_text("{"), "not valid JSON"),
])
def test_a_damaged_run_folder_is_one_error_naming_the_file(folder, tmp_path, damage, match):
    copy = tmp_path / "run"
    copy.mkdir()
    for file in folder.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    read_result(copy)  # the folder as written reads back
    damage(copy)
    with pytest.raises(ValueError, match=match) as info:
        read_result(copy)
    assert str(copy) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("cores", "match"), [
    ({"base": {"x": 1}}, r"host_cores\.base must be a number >= 0"),
    ({"base": "two"}, r"host_cores\.base must be a number >= 0"),
    ([1.5], "host_cores must be an object"),
])
def test_recorded_host_cores_that_are_not_numbers_are_named(tmp_path, cores, match):
    (tmp_path / "summary.json").write_text(json.dumps({"host_cores": cores}))
    with pytest.raises(ValueError, match=match):
        recorded_cores([tmp_path], ["base"])
    (tmp_path / "summary.json").write_text(json.dumps({"host_cores": {"base": 1.5}}))
    assert recorded_cores([tmp_path], ["base"])("base") == 1.5


def _log(change: Callable[[pd.DataFrame], None]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        frame = pd.read_parquet(path / "stage_log.parquet")
        change(frame)
        frame.to_parquet(path / "stage_log.parquet")
    return apply


@pytest.mark.parametrize(("damage", "match"), [
    (_log(lambda f: f.__setitem__("batch_size", 0)), "batch_size >= 1 and end_s >= start_s"),
    (_log(lambda f: f.__setitem__("end_s", f["start_s"] - 1e-3)), "batch_size >= 1 and end_s >= start_s"),
    (_log(lambda f: f.__setitem__("stage", None)), "column 'stage' must name every batch's stage"),
    (_log(lambda f: f.__setitem__("tokens", -5)), "column 'tokens' must hold finite values >= 0"),
    (lambda p: (p / "config.json").write_text(json.dumps({"model": {"name": "qwen2-audio", "size": [1]}})),
     r"\[model\] size must be a string"),
])
def test_a_damaged_run_folder_is_refused_by_the_refit_too(folder, tmp_path, damage, match):
    """``calibrate --from-runs`` reads the same folders (``refit_profile.read_run``); found by the
    mutation kind ``runs``: a batch of size 0 divided by zero, an unknown stage reached pandas' NA
    truth test, a size that was a list reached a set."""
    from calibration.loop.refit_profile import read_run

    copy = tmp_path / "run"
    copy.mkdir()
    for file in folder.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    (copy / "config.json").write_text(json.dumps({"model": {"name": "qwen2-audio", "size": "tiny"}}))
    read_run(copy)
    damage(copy)
    with pytest.raises(ValueError, match=match):
        read_run(copy)


def test_a_hand_off_whose_record_names_no_sender_is_not_counted():
    """Found by the mutation kind ``runs``: a remote record without its encode worker reached ``int()``."""
    from calibration.loop.handoffs import handoff_delays

    log = pd.DataFrame({"stage": ["encode", "prefill"], "group": ["encode", "prefill"], "worker": [0, 0],
                        "start_s": [0.0, 0.5], "end_s": [0.4, 0.9], "batch_size": [1, 1], "tokens": [8, 20]})
    records = pd.DataFrame({"status": ["ok"], "route": ["remote"], "prefill_worker": [0],
                            "encode_worker": pd.array([None], dtype="Int64"), "encode_end_s": [0.4],
                            "prefill_start_s": [0.5], "mm_tokens": [8], "decode_worker": pd.array([None],
                                                                                             dtype="Int64")})
    table = handoff_delays(log, records)
    assert table["sender_busy"].tolist() == [False]  # the hand-off is seen; its sender is not known
