"""The one adapter over Vidur's profiling CSVs (``mlp.csv``, ``attention.csv``).

Vidur (microsoft/vidur, MIT) times one model's operators on one GPU SKU with
its profilers (``vidur/profiling/mlp/main.py`` and
``vidur/profiling/attention/main.py``) and keeps the results as
``data/profiling/compute/<sku>/<org>/<model>/{mlp,attention}.csv``. The layout
read here is that of microsoft/vidur at commit 7d47513363ec447a741ac5e47241580b47724fbf
(2024-11-19): a row is one input point, its timings flattened by
``pandas.json_normalize`` into ``time_stats.<op>.{min,max,mean,median,std}``
columns in milliseconds (``vidur/profiling/common/timer_stats_store.py``);
like Vidur's own predictor (``sklearn_execution_time_predictor.py``) the
``median`` is read.

What maps to what (the op labels of :mod:`calibration.ops`; the per-GPU GEMM
shape is the model's at the row's ``num_tensor_parallel_workers``):

* ``mlp.csv`` (rows by ``num_tokens`` = m), per layer and launch:
  ``attn_pre_proj`` -> ``lm.qkv``, ``attn_post_proj`` -> ``lm.o``,
  ``mlp_up_proj`` -> ``lm.gate_up``, ``mlp_down_proj`` -> ``lm.down``
  (:class:`~calibration.optables.GemmTable`, exact shapes only: a model's four
  shapes are no grid to blend across).
* ``attention.csv``: rows with ``is_prefill`` and ``kv_cache_size`` 0 give
  ``attn_prefill`` of one sequence of ``prefill_chunk_size`` tokens -> context
  attention at batch 1 per length (more sequences: linear in batch, the
  table's rule above its grid); rows without ``is_prefill`` give ``attn_decode``
  of ``batch_size`` sequences each holding ``kv_cache_size`` tokens ->
  generation attention by (batch, context). The head shape per GPU is the
  model's at the row's TP.
* Not read (the roofline prices the op instead): the element-wise timers
  (``emb``, ``input_layernorm``, ``post_attention_layernorm``, ``attn_rope``,
  ``mlp_act``, ``add``: easerve's element-wise ops are priced by bytes, not
  per timer), chunked-prefill rows (``kv_cache_size`` > 0: easerve's context
  attention has no cached prefix), ``attn_kv_cache_save`` and the reshapes,
  the LM head (``vocab_size`` is a row filter only), all-reduce (Vidur keeps
  collectives in ``data/profiling/network/``), and every encoder op (Vidur
  profiles no vision or audio encoder).

Rows are kept where the model matches (``n_embd``, ``n_head``/``n_q_head``,
``n_kv_head``, ``n_expanded_embd``, ``use_gated_mlp``), as Vidur's predictor
filters them; a folder holding none is refused. Where ``attention.csv`` holds
several ``block_size`` or ``attention_backend`` values, the most common is kept.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from calibration.frames import most_common, ms_curve
from calibration.ops import prefill_ops
from calibration.optables import (
    AllreduceTable,
    AttentionTables,
    BatchTable,
    Curve,
    GemmTable,
    HeadShape,
    OpTables,
)
from calibration.specs import ModelSpec

#: the layout's source (cited in docs/profiles.md and the tests)
LAYOUT = "microsoft/vidur@7d47513363ec447a741ac5e47241580b47724fbf vidur/profiling/{mlp,attention}"
#: Vidur's mlp.csv timer -> easerve's op label
GEMM_OPS = {"attn_pre_proj": "lm.qkv", "attn_post_proj": "lm.o", "mlp_up_proj": "lm.gate_up",
            "mlp_down_proj": "lm.down"}
MLP_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "num_tokens",
               "num_tensor_parallel_workers", *(f"time_stats.{op}.median" for op in GEMM_OPS))
ATTENTION_COLUMNS = ("n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size",
                     "prefill_chunk_size", "kv_cache_size", "is_prefill", "time_stats.attn_prefill.median",
                     "time_stats.attn_decode.median")


def check_path(path: str | os.PathLike[str]) -> Path:
    """The folder ``path`` holding ``mlp.csv`` and ``attention.csv``, refusing a wrong path."""
    folder = Path(path)
    if not folder.exists():
        raise ValueError(f"--path {folder} does not exist")
    if not folder.is_dir():
        raise ValueError(f"--path {folder} is not a folder (give the one holding mlp.csv and attention.csv)")
    for name in ("mlp.csv", "attention.csv"):
        if not (folder / name).is_file():
            raise ValueError(f"--path {folder} holds no {name} (Vidur's layout: mlp.csv and attention.csv)")
    return folder


def _read(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a CSV Vidur writes ({exc})") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing required column {', '.join(missing)}")
    return frame


def _bool(series: pd.Series) -> pd.Series:
    return series.map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))


def _curve(frame: pd.DataFrame, size: str, column: str, exponent_above: float = 1.0) -> Curve | None:
    by = frame.dropna(subset=[column]).groupby(size)[column].median().sort_index()
    by = by[(by.index > 0) & (by > 0)]
    if by.empty:
        return None
    return ms_curve(by.index, by.to_numpy(), exponent_above)


def _gemm_shapes(model: ModelSpec, tp: int) -> dict[str, tuple[int, int]]:
    """(n, k) per GEMM label of ``model``'s LM layer on one of ``tp`` GPUs."""
    return {op.label: op.shape[1:] for op in prefill_ops(model.lm, [1], tp=tp)  # type: ignore[misc]
            if op.kind == "gemm"}


def _heads(model: ModelSpec, tp: int) -> HeadShape:
    lm = model.lm
    return max(1, lm.num_heads // tp), max(1, lm.num_kv_heads // tp), lm.head_dim


def _gemm(path: Path, model: ModelSpec) -> tuple[GemmTable, list[int]]:
    frame = _read(path, MLP_COLUMNS)
    lm = model.lm
    gated = _bool(frame["use_gated_mlp"]) == (lm.mlp_num_matrices > 2)
    keep = (frame["n_embd"] == lm.hidden_size) & (frame["n_head"] == lm.num_heads) \
        & (frame["n_kv_head"] == lm.num_kv_heads) & (frame["n_expanded_embd"] == lm.intermediate_size) & gated
    mine = frame[keep]
    if mine.empty:
        held = sorted({f"n_embd={r.n_embd} n_head={r.n_head} n_kv_head={r.n_kv_head} "
                       f"n_expanded_embd={r.n_expanded_embd}" for r in frame.itertuples()})
        raise ValueError(f"{path} holds no rows for {model.name} (n_embd={lm.hidden_size} "
                         f"n_head={lm.num_heads} n_kv_head={lm.num_kv_heads} "
                         f"n_expanded_embd={lm.intermediate_size}); "
                         f"it holds: {'; '.join(held) or 'no rows'}")
    curves: dict[tuple[int, int], Curve] = {}
    tps = sorted(int(v) for v in mine["num_tensor_parallel_workers"].unique())
    for tp in tps:
        rows, shapes = mine[mine["num_tensor_parallel_workers"] == tp], _gemm_shapes(model, tp)
        for timer, label in GEMM_OPS.items():
            curve = _curve(rows, "num_tokens", f"time_stats.{timer}.median")
            if curve is not None:
                curves[shapes[label]] = curve
    return GemmTable(curves, exact=True), tps


def _attention(path: Path, model: ModelSpec) -> tuple[AttentionTables, AttentionTables]:
    frame = _read(path, ATTENTION_COLUMNS)
    lm = model.lm
    frame = frame[(frame["n_embd"] == lm.hidden_size) & (frame["n_q_head"] == lm.num_heads)
                  & (frame["n_kv_head"] == lm.num_kv_heads)]
    frame = most_common(most_common(frame, "block_size"), "attention_backend")
    prefill = _bool(frame["is_prefill"])
    context: dict[HeadShape, BatchTable] = {}
    generation: dict[HeadShape, BatchTable] = {}
    for tp, rows in frame.groupby("num_tensor_parallel_workers"):
        shape = _heads(model, int(tp))
        whole = rows[prefill.loc[rows.index] & (rows["kv_cache_size"] == 0)]
        ctx = {int(n): c for n, g in whole.groupby("prefill_chunk_size")
               if (c := _curve(g, "batch_size", "time_stats.attn_prefill.median")) is not None}
        if ctx:
            context[shape] = BatchTable(ctx, 2.0)
        decode = rows[~prefill.loc[rows.index] & (rows["kv_cache_size"] > 0)]
        gen = {int(n): c for n, g in decode.groupby("kv_cache_size")
               if (c := _curve(g, "batch_size", "time_stats.attn_decode.median")) is not None}
        if gen:
            generation[shape] = BatchTable(gen, 1.0)
    return AttentionTables(context), AttentionTables(generation)


def load_tables(path: str | os.PathLike[str], model: ModelSpec, gpu: str) -> OpTables:
    """The op tables of ``model`` read from Vidur's CSVs in the folder ``path`` (timed on ``gpu``)."""
    folder = check_path(path)
    gemm, tps = _gemm(folder / "mlp.csv", model)
    context, generation = _attention(folder / "attention.csv", model)
    return OpTables(source=f"vidur CSVs {folder} ({model.name} on {gpu}, tp {','.join(map(str, tps))})",
                    gemm=gemm, context_attention=context, generation_attention=generation,
                    encoder_attention=AttentionTables({}), allreduce=AllreduceTable({}))
