"""The model zoo: build a family's model at a named size, save it once, load it anywhere.

Weights are random (no hub): :func:`build_model` seeds torch and constructs
the model class from the family's config; :func:`save_model` writes it with
``save_pretrained`` and :func:`load_model` reads it back in a worker process
(``local_files_only``; workers also set ``HF_HUB_OFFLINE=1``). Every worker of
a trial loads the same folder, so all stages run identical weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from live.families import Family, get_family
from live.families.base import check_size, set_init_std

_MARKER = "easerve_model.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """Which model to build: family (or alias), size, init scale and seed."""

    name: str
    size: str = "tiny"
    init_std: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", get_family(self.name).name)
        check_size(self.size)
        if not self.init_std > 0:
            raise ValueError(f"init_std must be > 0, got {self.init_std!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")

    @property
    def family(self) -> Family:
        return get_family(self.name)

    def config(self) -> Any:
        cfg = self.family.config(self.size)
        set_init_std(cfg, self.init_std)
        return cfg


def build_model(spec: ModelSpec, *, device: str | torch.device = "cpu") -> Any:
    """Construct the model with random weights, deterministic for a given seed.

    ``device="meta"`` builds the structure without memory (for full sizes on a CPU).
    """
    torch.manual_seed(spec.seed)
    with torch.device(device):
        model = spec.family.model_cls(spec.config())
    model.eval()
    # Random models emit EOS by chance; the executor always runs output_tokens (pitfall P3).
    model.generation_config.eos_token_id = None
    return model


def save_model(spec: ModelSpec, folder: str | Path) -> Path:
    """Build ``spec`` and save it to ``folder``; reuse the folder if it already holds it."""
    folder = Path(folder)
    marker = folder / _MARKER
    want = {"name": spec.name, "size": spec.size, "init_std": spec.init_std, "seed": spec.seed,
            "torch": torch.__version__}
    if marker.exists() and json.loads(marker.read_text()) == want:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    build_model(spec).save_pretrained(folder)
    marker.write_text(json.dumps(want))
    return folder


def load_model(spec: ModelSpec, folder: str | Path, *, device: str = "cpu") -> Any:
    """Load the weights :func:`save_model` wrote, offline."""
    model = spec.family.model_cls.from_pretrained(str(folder), local_files_only=True)
    model = model.to(device).eval()
    model.generation_config.eos_token_id = None
    return model


def count_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())
