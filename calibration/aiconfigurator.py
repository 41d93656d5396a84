"""The one adapter over aiconfigurator-core's measured kernel database (``systems/``).

NVIDIA's ``aiconfigurator-core`` (PyPI, Apache-2.0, the ``easerve[measured]``
extra) ships parquet tables of kernels measured per GPU system and per serving
engine version: ``systems/data/<system>/<family>/<engine>/<version>/*.parquet``
(latencies in milliseconds). Nothing else in easerve reads that layout or
imports that package, so when its next release renames the package
(``aisimulate``) or moves the data, this module alone changes
(docs/profiles.md, "Measured profiles").

What is read, and the conventions of the tables (read from the data and from
the package's own op builders, ``sdk/models/llama.py``):

* ``gemm/.../gemm_perf.parquet``: BF16 ``torch.nn.functional.linear`` by
  (m, n, k);
* ``attention/.../context_attention_perf.parquet``: causal prefill attention
  of ``batch_size`` sequences of ``isl`` tokens (no cached prefix, ``step`` 0),
  per layer, by (query heads, KV heads, head dim) per GPU, BF16 KV cache, no
  sliding window;
* ``attention/.../generation_attention_perf.parquet``: one decode token per
  sequence attending to ``step + 1`` cached tokens;
* ``encoder_attention/.../encoder_attention_perf.parquet``: bidirectional
  (ViT) attention, ``batch_size`` sequences of ``isl`` patches;
* ``comm/<engine>/<version>/custom_allreduce_perf.parquet`` (CUDA-graph rows
  where both exist), else ``comm/nccl/<v>/nccl_perf.parquet``'s ``all_reduce``:
  ``message_size`` counts BF16 elements (``CustomAllReduce(..., h, tp)`` per
  token), turned into bytes here.

Where one shape was timed with several kernels, the kernel with most rows on
that system is kept (FlashAttention 3 on Hopper).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import yaml

from calibration.frames import most_common, ms_curve
from calibration.optables import (
    AllreduceTable,
    AttentionTables,
    BatchTable,
    Curve,
    GemmTable,
    HeadShape,
    OpTables,
)

#: the distribution's import name (renamed in its next release: change it here)
PACKAGE = "aiconfigurator_core"
#: the pinned release the tables were read from (pyproject's ``measured`` extra)
PINNED = "aiconfigurator-core==0.12.0"
ENGINES = ("vllm", "sglang", "trtllm")
#: the database's system names -> easerve's GPU specs (calibration/specs/gpus)
GPU_OF_SYSTEM = {"h200_sxm": "h200", "h100_sxm": "h100-sxm", "b200_sxm": "b200", "l40s": "l40s",
                 "a100_sxm": "a100-sxm4-80gb", "rtx_pro_6000_server": "rtxpro6000"}
_BF16_BYTES = 2


def default_db() -> Path:
    """The ``systems`` folder of the installed package (without importing it)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the measured kernel database needs {PINNED} (pip install "
                         "'easerve[measured]'), or give --db PATH to its systems folder")
    return Path(next(iter(spec.submodule_search_locations))) / "systems"


def check_db(db: str | os.PathLike[str] | None) -> Path:
    """The database folder ``db`` (default: the installed package's), refusing a wrong path."""
    path = default_db() if db is None else Path(db)
    if not path.exists():
        raise ValueError(f"database path {path} does not exist")
    if not (path / "data").is_dir():
        raise ValueError(f"database path {path} is not an aiconfigurator systems folder (no data/ in it)")
    return path


#: our GPU spec fields a system's YAML states: field -> (YAML path, how to read it)
_SYSTEM_FIELDS = {
    "mem_bandwidth_bytes_per_s": ("gpu.mem_bw", float),
    "dense_bf16_flops": ("gpu.bfloat16_tc_flops", float),
    "memory_bytes": ("gpu.mem_capacity", int),
    "link_bytes_per_s": ("node.intra_node_bw", float),
    "link_latency_s": ("node.p2p_latency", float),
}


def system_gpu(db: Path, system: str) -> dict[str, tuple[Any, str]]:
    """The GPU facts of ``system``'s vendor table (``systems/SYSTEM.yaml``): field -> (value, source).

    The table states bandwidth, BF16 tensor FLOPS, memory, the intra-node link
    (bytes/s per GPU and direction, as written: no achieved-fraction applied)
    and its latency, and the SM version (the compute capability, derived).
    It has no SM count or partition granularity.
    """
    path = db / f"{system}.yaml"
    if not path.is_file():
        held = sorted(p.stem for p in db.glob("*.yaml") if (db / "data" / p.stem).is_dir())
        raise ValueError(f"the database at {db} holds no system {system!r}; it holds: {', '.join(held)}")
    data = yaml.safe_load(path.read_text()) or {}
    where = f"{PINNED} systems/{system}.yaml"
    out: dict[str, tuple[Any, str]] = {}
    for field, (key, cast) in _SYSTEM_FIELDS.items():
        table, name = key.split(".")
        value = (data.get(table) or {}).get(name)
        if value is not None:
            out[field] = (cast(value), f"{where} {key}")
    sm = (data.get("gpu") or {}).get("sm_version")
    if sm is not None:
        out["compute_capability"] = (f"{int(sm) // 10}.{int(sm) % 10}", f"{where} gpu.sm_version = {sm}")
    return out


def systems(db: Path) -> list[str]:
    """GPU systems the database holds GEMM timings for."""
    return sorted(p.name for p in (db / "data").iterdir() if (p / "gemm").is_dir())


def _version_key(version: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(t), "") if t.isdigit() else (-1, t) for t in re.findall(r"\d+|[a-z]+", version))


def versions(db: Path, system: str, engine: str) -> list[str]:
    """Versions of ``engine`` on ``system`` holding both GEMM and attention tables, oldest first."""
    root = db / "data" / system
    have = [{p.name for p in (root / fam / engine).iterdir()} if (root / fam / engine).is_dir() else set()
            for fam in ("gemm", "attention")]
    return sorted(have[0] & have[1], key=_version_key)


def resolve(db: Path, system: str, engine: str, version: str | None) -> str:
    """The version to read, refusing a system, engine or version the database does not hold."""
    held = systems(db)
    if system not in held:
        raise ValueError(f"the database at {db} holds no system {system!r}; it holds: {', '.join(held)}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    found = versions(db, system, engine)
    if not found:
        others = [e for e in ENGINES if versions(db, system, e)]
        raise ValueError(f"the database holds no {engine} tables for {system}; it holds: {', '.join(others)}")
    if version is None:
        return found[-1]
    if version not in found:
        raise ValueError(f"the database holds no {engine} {version} for {system}; it holds: "
                         f"{', '.join(found)}")
    return version


def _read(path: Path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


def _main_kernel(frame: pd.DataFrame) -> pd.DataFrame:
    return most_common(frame, "kernel_source")


def _curve(frame: pd.DataFrame, size: str, exponent_above: float = 1.0,
           scale: Callable[[pd.Series], pd.Series] | None = None) -> Curve:
    by = frame.groupby(size)["latency"].median().sort_index()
    sizes = by.index.to_series() if scale is None else scale(by.index.to_series())
    return ms_curve(sizes, by.to_numpy(), exponent_above)


def _gemm(root: Path) -> GemmTable:
    frame = _read(root / "gemm_perf.parquet")
    frame = _main_kernel(frame[frame["gemm_dtype"] == "bfloat16"])
    return GemmTable({(int(n), int(k)): _curve(group, "m") for (n, k), group in frame.groupby(["n", "k"])})


def _attention(frame: pd.DataFrame, shape_cols: list[str], length: Callable[[pd.DataFrame], pd.Series],
               exponent_above: float) -> AttentionTables:
    frame = frame.assign(length=length(frame))
    tables: dict[HeadShape, BatchTable] = {}
    for key, group in frame.groupby(shape_cols):
        h, kv, d = (key[0], key[0], key[1]) if len(shape_cols) == 2 else key
        rows = {int(n): _curve(g, "batch_size") for n, g in group.groupby("length")}
        tables[(int(h), int(kv), int(d))] = BatchTable(rows, exponent_above)
    return AttentionTables(tables)


def _llm_attention(path: Path, *, generation: bool) -> AttentionTables:
    frame = _read(path)
    keep = (frame["attn_dtype"] == "bfloat16") & (frame["kv_cache_dtype"] == "bfloat16") \
        & (frame["window_size"] == 0) & (frame["beam_width"] == 1)
    frame = _main_kernel(frame[keep & ((frame["isl"] == 1) if generation else (frame["step"] == 0))])
    shape = ["num_heads", "num_key_value_heads", "head_dim"]
    if generation:
        return _attention(frame, shape, lambda f: f["step"] + 1, 1.0)
    return _attention(frame, shape, lambda f: f["isl"], 2.0)


def _encoder_attention(path: Path) -> AttentionTables:
    if not path.is_file():
        return AttentionTables({})
    frame = _main_kernel(_read(path))
    frame = frame[frame["attn_dtype"] == "bfloat16"]
    return _attention(frame, ["num_heads", "head_dim"], lambda f: f["isl"], 2.0)


def _allreduce(db: Path, system: str, engine: str, version: str) -> tuple[AllreduceTable, str]:
    comm = db / "data" / system / "comm"
    held = sorted((p.name for p in (comm / engine).iterdir()) if (comm / engine).is_dir() else [],
                  key=_version_key)
    usable = [v for v in held if (comm / engine / v / "custom_allreduce_perf.parquet").is_file()]
    at_most = [v for v in usable if _version_key(v) <= _version_key(version)] or usable
    if at_most:
        frame = _read(comm / engine / at_most[-1] / "custom_allreduce_perf.parquet")
        if "backend" in frame and frame["backend"].str.contains("graph").any():
            frame = frame[frame["backend"].str.contains("graph")]
        where = f"comm/{engine}/{at_most[-1]} custom all-reduce"
    else:
        nccl = sorted((p.name for p in (comm / "nccl").iterdir()) if (comm / "nccl").is_dir() else [],
                      key=_version_key)
        if not nccl:
            return AllreduceTable({}), "no all-reduce tables"
        frame = _read(comm / "nccl" / nccl[-1] / "nccl_perf.parquet")
        frame = frame[(frame["op_name"] == "all_reduce") & (frame["nccl_dtype"] == "half")]
        where = f"comm/nccl/{nccl[-1]} all_reduce"
    curves = {int(tp): _curve(g, "message_size", scale=lambda s: s * _BF16_BYTES)
              for tp, g in frame.groupby("num_gpus")}
    return AllreduceTable(curves), where


def load_tables(system: str, engine: str, version: str | None = None,
                db: str | os.PathLike[str] | None = None) -> OpTables:
    """The measured tables of ``engine`` (newest version by default) on ``system``."""
    root = check_db(db)
    version = resolve(root, system, engine, version)
    data = root / "data" / system
    allreduce, comm_where = _allreduce(root, system, engine, version)
    return OpTables(
        source=f"aiconfigurator-core {system}/{engine}/{version} ({comm_where})",
        gemm=_gemm(data / "gemm" / engine / version),
        context_attention=_llm_attention(data / "attention" / engine / version /
                                         "context_attention_perf.parquet", generation=False),
        generation_attention=_llm_attention(data / "attention" / engine / version /
                                            "generation_attention_perf.parquet", generation=True),
        encoder_attention=_encoder_attention(data / "encoder_attention" / engine / version /
                                             "encoder_attention_perf.parquet"),
        allreduce=allreduce)
