"""live/device.py and the stages' move of client items to the model's device (CPU-checkable parts)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from easerve_core.request import Modality
from live.device import model_device, sync, use_device
from live.families.base import MMInput
from live.stages import _on


def test_cpu_is_a_no_op_and_other_names_are_refused() -> None:
    use_device("cpu")
    assert torch.zeros(1).device.type == "cpu"
    sync("cpu")
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        use_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_cuda_without_a_device_is_refused() -> None:
    with pytest.raises(ValueError, match="no CUDA device"):
        use_device("cuda")


def test_items_move_to_the_model_device_only_when_elsewhere() -> None:
    items = (torch.from_numpy(np.ones((2, 3), dtype=np.float32)),)
    mm = MMInput(modality=Modality.AUDIO, items=items, meta=((3,),))
    assert _on(mm, torch.device("cpu")) is mm
    moved = _on(mm, torch.device("meta"))  # any other device: meta needs no hardware
    assert moved.items[0].device.type == "meta" and moved.meta == mm.meta
    assert mm.items[0].device.type == "cpu"


def test_model_device_reads_the_first_parameter() -> None:
    assert model_device(torch.nn.Linear(2, 2)).type == "cpu"
    assert model_device(torch.nn.Linear(2, 2, device="meta")).type == "meta"
