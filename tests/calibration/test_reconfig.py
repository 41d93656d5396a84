"""The re-role cost: the new role's weights over the host link, plus the engine's warm-up."""

from __future__ import annotations

import pytest

from calibration.reconfig import (
    STANDBY_WARMUP_S,
    WARMUP_S,
    ReconfigurationCost,
    reconfiguration_s,
    role_weight_bytes,
)
from calibration.specs import gpu_spec, model_spec


def test_weights_over_the_host_link_plus_warmup():
    model, gpu = model_spec("llava-v1.6-34b"), gpu_spec("rtx6000ada")
    lm = model.lm.weight_bytes / 2
    assert role_weight_bytes(model, "decode", 2) == pytest.approx(lm)
    assert role_weight_bytes(model, "encode+prefill", 2) > role_weight_bytes(model, "prefill", 2)
    assert reconfiguration_s("llava-v1.6-34b", "rtx6000ada", role="decode", tp=2) == pytest.approx(
        lm / gpu.link_bytes_per_s + WARMUP_S)
    # an NVLink GPU still loads from the host over PCIe
    assert reconfiguration_s("llava-v1.6-34b", "a100-sxm4-80gb", role="decode", tp=2) == pytest.approx(
        lm / 25e9 + WARMUP_S)
    with pytest.raises(ValueError, match="unknown role"):
        role_weight_bytes(model, "router", 1)


def test_a_standby_engine_pays_the_copy_and_a_short_rewarm():
    """A sleeping engine keeps its graphs: the warm-up gives way to STANDBY_WARMUP_S, the copy stays."""
    model, gpu = model_spec("llava-v1.6-34b"), gpu_spec("rtx6000ada")
    copy_s = role_weight_bytes(model, "prefill", 2) / gpu.link_bytes_per_s
    cost = ReconfigurationCost("llava-v1.6-34b", "rtx6000ada", warmup_s=STANDBY_WARMUP_S)
    assert cost("prefill", 2) == pytest.approx(copy_s + STANDBY_WARMUP_S)
    assert ReconfigurationCost("llava-v1.6-34b", "rtx6000ada")("prefill", 2) - cost("prefill", 2) == \
        pytest.approx(WARMUP_S - STANDBY_WARMUP_S)
    assert 1.0 < copy_s < 2.0  # 34 GB of a TP-2 shard over the card's PCIe 4.0 x16 link
