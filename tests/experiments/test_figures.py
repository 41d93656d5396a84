"""The evaluation's figures read: each modality's panel is scaled to its own curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from easerve.experiments.figures import goodput_figure


def _sweep() -> pd.DataFrame:
    rows = []
    for modality, top in (("image", 2.5), ("video", 1.0), ("audio", 25.0)):
        for system in ("easerve", "dynamo"):
            for k in range(1, 6):
                rate = top * k / 4
                rows.append({"modality": modality, "system": system, "rate_hz": rate,
                             "goodput_moderate_rps": min(rate, top) * (0.9 if system == "dynamo" else 1.0)})
    return pd.DataFrame(rows)


def test_goodput_panels_are_scaled_each_to_its_own_modality():
    fig = goodput_figure(_sweep())
    try:
        tops = {ax.get_title().split(":")[0]: ax.get_ylim()[1] for ax in fig.axes}
        assert set(tops) == {"image", "video", "audio"}
        for modality, top in (("image", 2.5), ("video", 1.0), ("audio", 25.0)):
            assert top <= tops[modality] <= 1.2 * top, (modality, tops)
        xmax = {ax.get_title().split(":")[0]: ax.get_xlim()[1] for ax in fig.axes}
        assert xmax["video"] < 10 < xmax["audio"]  # the rates, too, are each panel's own
    finally:
        plt.close(fig)
