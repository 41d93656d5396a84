"""The core reads no file: validation asks a reader it is handed, in the order it always checked.

``ExperimentConfig.from_dict`` takes a ``ConfigFiles`` (``runtime.configs.DISK``
for the commands) and ``WorkloadSpec.from_dict`` a ``TraceReader``
(``runtime.traces.load_trace``); without one, a table that names a file is
refused, saying what to pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from easerve_core.config import ExperimentConfig
from easerve_core.request import Modality, Request
from easerve_core.workload import RecordedTrace, Trace, WorkloadSpec

REQUEST = Request(request_id=0, arrival_s=0.0, modality=Modality.AUDIO, prompt_tokens=8, output_tokens=2,
                  mm_tokens_per_item=(30,))


class Files:
    """A ConfigFiles over a dict: path -> whether it is a file; every trace is one request."""

    def __init__(self, files: dict[Path, bool] | None = None, *, trace_error: str | None = None) -> None:
        self.files = files or {}
        self.trace_error = trace_error
        self.asked: list[Any] = []

    def has_file(self, path: Path) -> bool:
        self.asked.append(("has_file", path))
        return self.files.get(path, False)

    def trace(self, path: str, trace_format: str, *, field: str) -> Trace:
        self.asked.append(("trace", path, trace_format, field))
        if self.trace_error:
            raise ValueError(self.trace_error)
        return RecordedTrace((REQUEST,))


def _data(**tables: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"model": {"name": "m"}, "cluster": {"gpu": "cpu"},
                            "workload": {"mix": "ultravox-audio", "trace": "t.csv"}}
    data.update(tables)
    return data


def test_the_trace_comes_from_the_reader_handed_in(tmp_path):
    files = Files()
    config = ExperimentConfig.from_dict(_data(), base_dir=tmp_path, files=files)
    assert files.asked == [("trace", str((tmp_path / "t.csv").resolve()), "easerve", "workload.trace_format")]
    assert config.workload.trace == RecordedTrace((REQUEST,))


def test_the_reader_s_error_comes_before_a_later_table_s(tmp_path):
    files = Files(trace_error="trace file not found: t.csv")
    with pytest.raises(ValueError, match=r"^trace file not found: t\.csv$"):
        ExperimentConfig.from_dict(_data(slo={"tier": "nope"}), base_dir=tmp_path, files=files)


def test_a_model_spec_is_asked_of_the_files(tmp_path):
    spec = (tmp_path / "m.json").resolve()
    data = _data(model={"spec": "m.json"}, workload={"rate_hz": 1.0})
    assert ExperimentConfig.from_dict(data, base_dir=tmp_path, files=Files({spec: True})).model == str(spec)
    with pytest.raises(ValueError, match=r"^model.spec m.json: no such spec file \(\*.json\)$"):
        ExperimentConfig.from_dict(data, base_dir=tmp_path, files=Files())


def test_without_a_reader_a_table_naming_a_file_says_what_to_pass(tmp_path):
    with pytest.raises(ValueError, match=r"workload\.trace: no trace reader given"):
        WorkloadSpec.from_dict({"trace": "t.csv"})
    with pytest.raises(ValueError, match=r"model\.spec: no files given"):
        ExperimentConfig.from_dict(_data(model={"spec": "m.json"}), base_dir=tmp_path)
    with pytest.raises(ValueError, match=r"model.spec m.txt: no such spec file"):  # the name is checked first
        ExperimentConfig.from_dict(_data(model={"spec": "m.txt"}), base_dir=tmp_path)
