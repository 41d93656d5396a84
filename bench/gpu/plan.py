"""What the device check measures (the plan) and where it writes (the sink).

:func:`full_plan` is the H200 run (about 7 minutes, section budgets below);
:func:`dry_plan` is the same code path on the CPU with tiny models and small
grids (seconds). :class:`Sink` owns ``$OUT``: one CSV per section, appended
row by row and flushed, plus ``summary.json`` rewritten after every section,
so whatever a time-out leaves behind is readable. :data:`SCHEMAS` lists each
CSV's columns (bench/gpu/README.md documents them); the dry-run test checks
the files against it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from live.gpu.timing import Reps

SCHEMAS: Mapping[str, tuple[str, ...]] = {
    "green.csv": ("level", "lane", "sms", "total_sms", "gemm_n", "solo_ms", "full_ms", "expected_ratio",
                  "measured_ratio", "concurrent_ms", "backend"),
    "encode.csv": ("model", "encoder", "batch_size", "level", "encode_sms", "total_sms", "share",
                   "lm_tokens_per_item", "positions_per_item", "reps", "wall_ms_median", "wall_ms_min",
                   "wall_ms_max"),
    "lm.csv": ("model", "lm", "phase", "batch_size", "seq_len", "context_tokens", "lane", "lane_sms",
               "total_sms", "layers_built", "layers_full", "reps", "wall_ms_median", "layer_full_ms",
               "layer_sliding_ms", "outside_ms", "scaled_ms"),
    "ablation.csv": ("model", "mode", "index", "batch_size", "encode_share", "prefill_share", "encode_lane",
                     "prefill_lane", "partition_passes", "encode_ms", "prefill_ms", "wall_ms"),
}

#: what a run can measure; a rerun names a subset (``--sections``). The SM levels are always built.
SECTIONS = ("green", "encode", "prefill", "decode", "ablation", "samples")

#: every model pair the run covers, in priority order (the ablation's pair first)
MODELS = ("ultravox-v0.6-gemma3-27b", "llava-v1.6-34b", "qwen2.5-vl-32b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Every knob of one device check (sizes, grids, repetitions, budgets in seconds)."""

    size: str
    device: str
    gpu_label: str
    total_budget_s: float
    section_budget_s: Mapping[str, float]
    models: tuple[str, ...] = MODELS
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    prefill_lens: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)
    prefill_level_len: int = 2048
    decode_batches: tuple[int, ...] = (1, 8, 32, 64)
    decode_contexts: tuple[int, ...] = (512, 2048, 8192)
    lm_layers: int = 2
    reps: Reps = field(default_factory=Reps)
    gemm_n: int = 8192
    gemm_reps: int = 5
    switch_iters: int = 20000
    ablation_model: str = MODELS[0]
    ablation_batches: int = 40
    ablation_prefill_len: int = 1024
    ablation_modes: tuple[str, ...] = ("none", "time-slice", "static", "dynamic",
                                       "static-held", "dynamic-held")
    static_share: float = 0.5
    share_tolerance: float = 0.05
    shape_check_point: tuple[int, int] = (8, 2048)  # (batch, context) of the decode first-call check
    sections: tuple[str, ...] = SECTIONS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.size not in ("tiny", "full"):
            raise ValueError(f"size must be 'tiny' or 'full', got {self.size!r}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if not self.total_budget_s > 0:
            raise ValueError(f"total_budget_s must be > 0, got {self.total_budget_s!r}")
        unknown = sorted(set(self.sections) - set(SECTIONS))
        if unknown:
            raise ValueError(f"unknown sections {unknown}; known: {', '.join(SECTIONS)}")
        if self.ablation_model not in self.models:
            raise ValueError(f"ablation_model {self.ablation_model!r} is not in models {self.models}")

    def runs(self, section: str) -> bool:
        """Whether this run measures ``section`` (one of :data:`SECTIONS`)."""
        if section not in SECTIONS:
            raise ValueError(f"unknown section {section!r}; known: {', '.join(SECTIONS)}")
        return section in self.sections

    def budget_s(self, section: str) -> float:
        if section not in self.section_budget_s:
            raise ValueError(f"unknown section {section!r}; known: {', '.join(self.section_budget_s)}")
        return self.section_budget_s[section]


def full_plan(gpu_label: str) -> Plan:
    """The H200 run: at most 380 s after start-up, inside the wrapper's 450 s limit.

    Budgets are caps per section (encode and lm: per model); the sum of caps
    (30 + 3 x (45 + 35) + 70 = 340 s) leaves time for building the models.
    """
    budgets = {"green": 30.0, "encode": 45.0, "lm": 35.0, "ablation": 70.0}
    return Plan(size="full", device="cuda", gpu_label=gpu_label, total_budget_s=380.0,
                section_budget_s=budgets)


def dry_plan() -> Plan:
    """The CPU rehearsal: tiny models, small grids, one timed rep."""
    budgets = {"green": 10.0, "encode": 10.0, "lm": 10.0, "ablation": 10.0}
    return Plan(size="tiny", device="cpu", gpu_label="cpu-dry-run", total_budget_s=90.0,
                section_budget_s=budgets, batch_sizes=(1, 2, 4), prefill_lens=(8, 16, 32),
                prefill_level_len=16, decode_batches=(1, 2), decode_contexts=(8, 16),
                shape_check_point=(2, 8),
                reps=Reps(warmup=1, min=1, max=1, target_s=0.0), gemm_n=64, gemm_reps=2,
                switch_iters=2000, ablation_batches=6, ablation_prefill_len=16)


def _strict(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


class Sink:
    """``$OUT``: CSVs appended and flushed row by row, ``summary.json`` rewritten atomically."""

    def __init__(self, root: str | os.PathLike[str], *,
                 schemas: Mapping[str, tuple[str, ...]] = SCHEMAS) -> None:
        self.root = Path(root)
        self.schemas = schemas  # the serving check (bench/gpu/serve_plan.py) brings its own
        self.summary: dict[str, Any] = {"sections": {}, "errors": {}}
        self._writers: dict[str, tuple[Any, csv.DictWriter[str]]] = {}

    def row(self, name: str, values: Mapping[str, Any]) -> None:
        if name not in self.schemas:
            raise ValueError(f"unknown csv {name!r}; known: {', '.join(self.schemas)}")
        if name not in self._writers:
            self.root.mkdir(parents=True, exist_ok=True)
            fh = open(self.root / name, "w", newline="")  # noqa: SIM115 - closed in close()
            writer = csv.DictWriter(fh, fieldnames=list(self.schemas[name]), extrasaction="raise")
            writer.writeheader()
            self._writers[name] = (fh, writer)
        fh, writer = self._writers[name]
        writer.writerow({k: values.get(k, "") for k in self.schemas[name]})
        fh.flush()

    def write_summary(self) -> Path:
        """Strict JSON (NaN and infinities become null)."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "summary.json"
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".summary.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(_strict(self.summary), fh, indent=1, sort_keys=True, default=str, allow_nan=False)
        os.replace(tmp, path)
        return path

    def close(self) -> None:
        for fh, _ in self._writers.values():
            fh.close()
        self._writers = {}
