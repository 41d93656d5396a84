"""Rebuild ``samples/<model>.json`` from two device runs: one's encode and prefill, another's decode.

The second H200 run of 2026-11-30 re-measured decode only (a fresh cache per
rep; bench/gpu/RESULTS.md), so the samples to fit take encode (encode.csv)
and prefill (lm.csv) from the first run and decode (lm.csv) from the rerun.
Byte sizes, the item and the provenance come from the first run's samples::

    python bench/gpu/merge_runs.py --first bench/gpu/results/h200-2026-11-30 \\
        --decode-from bench/gpu/results/h200-2026-11-30-rerun --out bench/gpu/results/h200-2026-11-30-merged
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gpu import samples  # noqa: E402


def _rows(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def merge(first: Path, decode_from: Path, model: str) -> dict[str, Any]:
    """The samples of ``model``: encode and prefill of ``first``, decode of ``decode_from``."""
    old = json.loads((first / "samples" / f"{model}.json").read_text())
    latency = {(int(r["batch_size"]), float(r["share"])): float(r["wall_ms_median"]) / 1e3
               for r in _rows(first / "encode.csv") if r["model"] == model}
    prefill = [r for r in _rows(first / "lm.csv") if r["model"] == model and r["phase"] == "prefill"]
    decode = [r for r in _rows(decode_from / "lm.csv") if r["model"] == model and r["phase"] == "decode"]
    if not decode:
        raise ValueError(f"{decode_from / 'lm.csv'}: no decode rows for {model}")
    (item,) = old["typical_mm_tokens_per_item"]
    notes = (f"{old['notes']}; decode re-measured in {decode_from.name} with a fresh fixed-length cache per "
             f"rep (the first run's decode met a new KV length per call)")
    return samples.to_samples(model=model, gpu=old["gpu"], lm_tokens_per_item=item,
                              embed_bytes_per_token=old["embed_bytes_per_token"],
                              kv_bytes_per_token=old["kv_bytes_per_token"], latency=latency,
                              lm=prefill + decode, source=old["source"], notes=notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", type=Path, required=True, help="run with encode.csv, lm.csv, samples/")
    parser.add_argument("--decode-from", type=Path, required=True, help="run whose lm.csv has decode rows")
    parser.add_argument("--out", type=Path, required=True, help="folder for samples/<model>.json")
    args = parser.parse_args(argv)
    models = sorted(p.stem for p in (args.first / "samples").glob("*.json"))
    docs = {}
    try:
        for model in models:
            docs[model] = merge(args.first, args.decode_from, model)
    except (OSError, ValueError, KeyError) as exc:
        print(f"merge_runs: {exc}", file=sys.stderr)
        return 2
    for model, doc in docs.items():  # all or nothing
        print(samples.write(doc, args.out / "samples" / f"{model}.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
