"""The Vidur adapter (calibration/vidur.py) and ``easerve profile build --from vidur``.

The CSVs are written here in Vidur's layout as its profilers write it:
microsoft/vidur at commit 7d47513363ec447a741ac5e47241580b47724fbf,
``vidur/profiling/mlp/main.py`` + ``mlp_impl.py`` (mlp.csv:
``time_stats.<timer>.{min,max,mean,median,std}`` in ms, then ``n_head, n_kv_head, n_embd,
n_expanded_embd, vocab_size, use_gated_mlp, num_tokens, num_tensor_parallel_workers``; the header as
in ``data/profiling/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv``)
and ``vidur/profiling/attention/attention_wrapper.py`` (attention.csv: ``time_stats.attn_*`` then
``n_embd, n_q_head, n_kv_head, block_size, num_tensor_parallel_workers, max_model_len, batch_size,
prefill_chunk_size, kv_cache_size, is_prefill, attention_backend``). Figures are made up.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from calibration import load_profile, vidur
from calibration.ops import decode_ops, prefill_ops
from calibration.specs import model_spec
from easerve.cli import main

MODEL, GPU = "qwen2.5-vl-32b", "h200"
LM = model_spec(MODEL).lm
STATS = ("min", "max", "mean", "median", "std")
MLP_TIMERS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
              "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
TOKENS = (1, 64, 512, 4096)


def _gemm_ms(timer: str, tokens: int, tp: int) -> float:
    return {"attn_pre_proj": 0.02, "attn_post_proj": 0.01, "mlp_up_proj": 0.05, "mlp_down_proj": 0.03,
            }.get(timer, 0.005) * max(1.0, tokens / 64) / tp


def _stats(ms: float) -> list[float]:
    return [ms * 0.95, ms * 1.1, ms, ms, ms * 0.01]


def write_mlp(folder: Path, *, tps: tuple[int, ...] = (1, 2), drop: str | None = None) -> None:
    header = [f"time_stats.{t}.{s}" for t in MLP_TIMERS for s in STATS]
    header += ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
               "num_tokens", "num_tensor_parallel_workers"]
    rows = []
    for tp in tps:
        for n in TOKENS:
            row = [v for t in MLP_TIMERS for v in _stats(_gemm_ms(t, n, tp))]
            rows.append([*row, LM.num_heads, LM.num_kv_heads, LM.hidden_size, LM.intermediate_size,
                         LM.vocab_size, True, n, tp])
        # another model's rows, which the adapter leaves out
        rows.append([1.0] * (len(MLP_TIMERS) * 5) + [32, 32, 4096, 11008, 32000, True, 64, tp])
    _write(folder / "mlp.csv", header, rows, drop)


def _attn_ms(prefill: bool, batch: int, chunk: int, kv: int, tp: int) -> float:
    return (1e-6 * chunk * chunk + 0.01) / tp if prefill else (1e-5 * batch * kv + 0.01) / tp


def write_attention(folder: Path, *, drop: str | None = None) -> None:
    timers = ("attn_prefill", "attn_decode", "attn_kv_cache_save", "attn_input_reshape",
              "attn_output_reshape")
    header = [f"time_stats.{t}.{s}" for t in timers for s in STATS]
    header += ["n_embd", "n_q_head", "n_kv_head", "block_size", "num_tensor_parallel_workers",
               "max_model_len", "batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill",
               "attention_backend"]
    rows = []
    points = [(True, 1, c, 0) for c in (128, 1024, 4096)] + [(True, 1, 512, 512)]  # the last: chunked
    points += [(False, b, 0, kv) for b in (1, 8, 32) for kv in (512, 4096)]
    for tp in (1, 2):
        for prefill, b, chunk, kv in points:
            ms = _attn_ms(prefill, b, chunk, kv, tp)
            timed = {"attn_prefill": ms if prefill else None, "attn_decode": None if prefill else ms,
                     "attn_kv_cache_save": 0.001, "attn_input_reshape": 0.001, "attn_output_reshape": 0.001}
            row = [("" if timed[t] is None else v) for t in timers for v in _stats(timed[t] or 1.0)]
            rows.append([*row, LM.hidden_size, LM.num_heads, LM.num_kv_heads, 16, tp, 32768, b, chunk, kv,
                         prefill, "FLASHINFER"])
    _write(folder / "attention.csv", header, rows, drop)


def _write(path: Path, header: list[str], rows: list[list[object]], drop: str | None) -> None:
    keep = [i for i, h in enumerate(header) if h != drop]
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow([header[i] for i in keep])
        out.writerows([[r[i] for i in keep] for r in rows])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "vidur" / "h200" / "Qwen" / "Qwen2.5-32B"
    path.mkdir(parents=True)
    write_mlp(path)
    write_attention(path)
    return path


def test_the_adapter_maps_vidur_timers_onto_the_op_tables_exactly(folder):
    tables = vidur.load_tables(folder, model_spec(MODEL), GPU)
    for tp in (1, 2):
        gemms = {op.label: op.shape[1:] for op in prefill_ops(LM, [1], tp=tp) if op.kind == "gemm"}
        for timer, label in vidur.GEMM_OPS.items():
            for n in TOKENS:
                assert tables.gemm(n, *gemms[label]) == pytest.approx(_gemm_ms(timer, n, tp) * 1e-3)
        heads = (LM.num_heads // tp, LM.num_kv_heads // tp, LM.head_dim)
        ctx, held = tables.context_attention(1, 1024, heads)
        assert held == heads and ctx == pytest.approx(_attn_ms(True, 1, 1024, 0, tp) * 1e-3)
        gen, _ = tables.generation_attention(8, 4096, heads)
        assert gen == pytest.approx(_attn_ms(False, 8, 0, 4096, tp) * 1e-3)
    # the chunked row (kv_cache_size 512) is not a context-attention length; other models' rows are left out
    assert sorted(tables.context_attention.tables[(LM.num_heads, LM.num_kv_heads, LM.head_dim)].rows) \
        == [128, 1024, 4096]
    # exact shapes only: the LM head and a shape of another model get no measured price
    assert tables.gemm(64, LM.vocab_size, LM.hidden_size) is None
    assert tables.gemm(64, 4096, 4096) is None
    assert tables.encoder_attention.tables == {} and tables.allreduce.curves == {}


def test_profile_build_from_vidur_records_the_source_per_op(folder, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["profile", "build", "--from", "vidur", "--path", str(folder), "--model", MODEL, "--gpu", GPU,
                 "--tp", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "measured" and doc["params"]["database"]["source"] == "vidur"
    assert "7d47513363ec447a741ac5e47241580b47724fbf" in doc["params"]["database"]["layout"]
    profile = load_profile(out)
    sources = {(label, kind): src for label, kind, src in profile.op_sources(2)}
    for label in vidur.GEMM_OPS.values():
        assert sources[(label, "gemm")] == "measured"
    assert sources[("lm.attention", "context_attention")] == "measured"
    assert sources[("lm.attention", "generation_attention")] == "measured"
    for label, kind in (("lm.head", "gemm"), ("lm.allreduce", "allreduce"), ("vit.projector", "gemm")):
        assert sources[(label, kind)] == "roofline"
    assert all(src == "roofline" for (label, _), src in sources.items() if label.startswith("vit."))
    # a stage is the sum of its ops: the measured GEMMs are in it
    stage = profile.for_tp(2)
    ops = profile.ops()
    qkv = next(op for op in decode_ops(LM, 8, 8 * 4096, tp=2) if op.label == "lm.qkv")
    assert ops.op_s(qkv)[0] == pytest.approx(_gemm_ms("attn_pre_proj", 8, 2) * 1e-3)
    assert stage.decode_step_s(8, 8 * 4096) > LM.num_layers * ops.op_s(qkv)[0]
    assert main(["profile", "show", str(out)]) == 0
    assert "measured" in capsys.readouterr().out


@pytest.mark.parametrize(("make", "match"), [
    ("nothing", "does not exist"),
    ("no-attention", "holds no attention.csv"),
    ("no-column", "missing required column time_stats.mlp_down_proj.median"),
    ("no-attn-column", "missing required column kv_cache_size"),
    ("other-model", "holds no rows for qwen2.5-vl-32b"),
])
def test_profile_build_from_vidur_refuses_bad_input_in_one_line(tmp_path, capsys, make, match):
    path = tmp_path / "csvs"
    if make != "nothing":
        path.mkdir()
        write_mlp(path, drop="time_stats.mlp_down_proj.median" if make == "no-column" else None)
        if make != "no-attention":
            write_attention(path, drop="kv_cache_size" if make == "no-attn-column" else None)
    if make == "other-model":
        (path / "mlp.csv").write_text("\n".join(
            line for i, line in enumerate((path / "mlp.csv").read_text().splitlines())
            if i == 0 or ",4096,11008," in line) + "\n")
    out = tmp_path / "p.json"
    argv = ["profile", "build", "--from", "vidur", "--path", str(path), "--model", MODEL, "--gpu", GPU,
            "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1
    assert not out.exists()
