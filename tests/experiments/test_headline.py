"""The report's headline: EAServe over the best baseline in every reading, from peak tables."""

from __future__ import annotations

import pandas as pd

from easerve.experiments.headline import PEAK_SLOS, peaks_by_slo
from easerve.experiments.report import headline


def _peaks(values: dict[tuple[str, str, str], float]) -> pd.DataFrame:
    return pd.DataFrame([{"modality": m, "system": s, "tuning": t, "at_rate_hz": 1.0, "goodput_rps": v,
                          "censored": False} for (m, s, t), v in values.items()])


def _sweep() -> pd.DataFrame:
    rows = []
    for system, scale in (("easerve", 2.0), ("dynamo", 1.0), ("vllm", 1.5)):
        for rate in (1.0, 2.0, 3.0):
            row = {"modality": "image", "system": system, "tuning": "tuned", "rate_hz": rate, "seed": 0}
            for slo in PEAK_SLOS:
                row[f"goodput_{slo}_rps"] = scale * min(rate, 2.0) * (0.5 if slo == "strict" else 1.0)
            rows.append(row)
    return pd.DataFrame(rows)


def test_peaks_by_slo_has_one_peak_per_curve_and_slo() -> None:
    by_slo = peaks_by_slo(_sweep())
    assert list(by_slo["slo"].unique()) == list(PEAK_SLOS)
    assert len(by_slo) == 3 * len(PEAK_SLOS)
    strict = by_slo[(by_slo["slo"] == "strict") & (by_slo["system"] == "easerve")]
    assert strict["goodput_rps"].tolist() == [2.0]


def test_headline_divides_by_the_best_baseline_of_each_reading() -> None:
    peak = _peaks({("image", "easerve", "tuned"): 3.0, ("image", "dynamo", "tuned"): 1.5,
                   ("image", "vllm", "tuned"): 2.0, ("image", "dynamo", "config"): 0.5,
                   ("image", "vllm", "config"): 1.0})
    bare = _peaks({("image", "easerve", "tuned"): 2.0, ("image", "vllm", "tuned"): 2.5})
    tables = {"peak_goodput": peak, "peak_goodput_by_slo": peaks_by_slo(_sweep()),
              "peak_goodput_no_residual": bare}
    row = headline(tables).set_index("modality").loc["image"]
    assert row["tuned"] == "1.50 (vllm)"
    assert row["config"] == "3.00 (vllm)"
    assert row["tuned, strict"] == "1.33 (vllm)"
    assert row["tuned, no residual"] == "0.80 (vllm)"
    assert headline({"peak_goodput": peak}).set_index("modality").loc["video", "tuned"] == "—"
