"""The EAServe paper's published figures, for side-by-side tables.

Each number carries where it comes from: the overview we were given
(``shared/seed/EAServe-overview.txt``, "overview") or the machine summary of
the paper cited in the team's notes (``shared/notes/systems.md`` §0,
"summary"). Nothing here is ours; the report puts our simulated numbers
beside these and explains the gaps.
"""

from __future__ import annotations

from collections.abc import Mapping

#: modality -> (model, mix, example config)
MODALITIES: Mapping[str, tuple[str, str, str]] = {
    "image": ("llava-v1.6-34b", "llava-image", "configs/llava34b_rtx6000ada.toml"),
    "video": ("qwen2.5-vl-32b", "qwen-video-rmm16", "configs/qwen25vl32b_rtx6000ada.toml"),
    "audio": ("ultravox-v0.6-gemma3-27b", "ultravox-audio", "configs/ultravox27b_rtx6000ada.toml"),
}

#: goodput (req/s) at the moderate tier, 8x RTX 6000 Ada (overview, bar chart)
GOODPUT_MODERATE: Mapping[str, Mapping[str, float]] = {
    "image": {"dynamo": 0.95, "vllm": 1.11, "easerve": 1.93},
    "video": {"dynamo": 0.95, "vllm": 1.32, "easerve": 1.90},
    "audio": {"dynamo": 0.98, "vllm": 2.77, "easerve": 4.17},
}

#: P99 TTFT (s) at 2 req/s (summary)
P99_TTFT_AT_2RPS: Mapping[str, Mapping[str, float]] = {
    "image": {"dynamo": 233.8, "easerve": 10.8},
    "video": {"dynamo": 144.8, "easerve": 18.0},
}

#: LLaVA-34B fixed encode batch 1 -> 8 (overview)
FIXED_BATCH: Mapping[int, Mapping[str, float]] = {
    1: {"throughput_rps": 0.75, "ttft_mean_s": 367.4, "tpot_mean_s": 0.179},
    8: {"throughput_rps": 1.09, "ttft_mean_s": 112.1, "tpot_mean_s": 0.411},
}

#: burstiness at the same mean rate (overview): throughput change at the burstiest
#: and P99 TTFT from Poisson to the burstiest
BURST = {"throughput_change_frac": -0.03, "ttft_p99_poisson_s": 10.2, "ttft_p99_burstiest_s": 16.5}

#: SM-sharing ablation, Ultravox at 10 req/s, s = 0.55 (summary):
#: throughput (req/s), P99 TTFT (s), P99 TPOT (s)
SM_ABLATION: Mapping[str, Mapping[str, float]] = {
    "time-slice": {"throughput_rps": 4.78, "ttft_p99_s": 43.7, "tpot_p99_s": 0.236},
    "static": {"throughput_rps": 5.07, "ttft_p99_s": 40.7, "tpot_p99_s": 0.203},
    "dynamic": {"throughput_rps": 5.21, "ttft_p99_s": 36.7, "tpot_p99_s": 0.167},
}

#: encoder GPU utilisation (overview): request-at-a-time, fixed batch 8, EAServe
ENCODER_UTILIZATION = {"dynamo": "<10%", "fixed-batch": "bursty", "easerve": "~80%"}

#: HAS: 7 allocation candidates screened to 3; 99% of best within 30 trials (overview)
HAS_SCREEN = {"candidates": 7, "survivors": 3, "trials": 30}
