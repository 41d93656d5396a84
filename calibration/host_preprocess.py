"""Measured host-side preprocessing per model and modality, as data, and its size rule.

``specs/host/preprocess.json`` holds, for each (model, modality), the host
seconds one typical item costs before the encoder runs: decoding the request's
encoded media plus the model's ``transformers`` processor, medians measured by
``bench/encoder_call_cost.py --json`` (the file names the CPU and the date).
:func:`host_preprocess_efficiency` turns an entry into the two
:class:`~calibration.analytic.Efficiency` fields the analytic profile reads.

The size rule (``scales_with``), since a mix's item carries only its LM tokens:

* ``item``: one constant per item, measured at the mix's typical item. LLaVA's
  anyres processor time follows the source pixels, which the tokens do not
  tell (672x672, 1024x1024 and 1920x1080 all give 5 crops); Whisper's feature
  extractor pads every clip to 30 s, so 5-30 s cost about the same.
* ``tokens``: proportional to the item's LM tokens. A video's frames are
  decoded and resized one by one, and at a fixed resolution its tokens count
  its frames (Qwen2.5-VL: 360 tokens a 720p frame).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from calibration.analytic import Efficiency
from calibration.specs import SPEC_DIR

#: the committed table (bench/encoder_call_cost.py --json writes one)
TABLE_PATH = SPEC_DIR / "host" / "preprocess.json"
TABLE_FORMAT = "easerve.host_preprocess"
SCALES = ("item", "tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPreprocessEntry:
    """One model's measured host work for one modality's reference item."""

    model: str
    modality: str
    item: str  # what was measured, in words
    ref_tokens: int  # the reference item's LM tokens
    decode_s: float  # decoding the encoded media (JPEG per image / frame; 0 for raw audio)
    processor_s: float  # the model's processor on the decoded item
    scales_with: str  # "item" or "tokens" (the module docstring)

    def __post_init__(self) -> None:
        if self.scales_with not in SCALES:
            raise ValueError(f"host preprocess {self.model}/{self.modality}: scales_with must be one of "
                             f"{', '.join(SCALES)}, got {self.scales_with!r}")
        if isinstance(self.ref_tokens, bool) or not isinstance(self.ref_tokens, int) or self.ref_tokens < 1:
            raise ValueError(f"host preprocess {self.model}/{self.modality}: ref_tokens must be an "
                             f"integer >= 1, got {self.ref_tokens!r}")
        for name in ("decode_s", "processor_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ValueError(f"host preprocess {self.model}/{self.modality}: {name} must be >= 0, "
                                 f"got {value!r}")

    @property
    def seconds(self) -> float:
        """Host seconds of the reference item."""
        return self.decode_s + self.processor_s

    def efficiency_fields(self) -> dict[str, float]:
        """``host_preprocess_s_per_item`` and ``host_preprocess_s_per_mm_token`` of this entry."""
        if self.scales_with == "item":
            return {"host_preprocess_s_per_item": self.seconds, "host_preprocess_s_per_mm_token": 0.0}
        return {"host_preprocess_s_per_item": 0.0,
                "host_preprocess_s_per_mm_token": self.seconds / self.ref_tokens}


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPreprocessTable:
    """The measured entries and where they come from."""

    source: str
    measured: str  # the date
    cpu: str
    entries: tuple[HostPreprocessEntry, ...]

    def entry(self, model: str, modality: str) -> HostPreprocessEntry:
        for e in self.entries:
            if e.model == model and e.modality == modality:
                return e
        known = ", ".join(f"{e.model}/{e.modality}" for e in self.entries)
        raise ValueError(f"no measured host preprocessing for {model}/{modality}; known: {known}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": TABLE_FORMAT, "version": 1, "source": self.source, "measured": self.measured,
                "cpu": self.cpu, "entries": [asdict(e) for e in self.entries]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostPreprocessTable:
        if data.get("format") != TABLE_FORMAT or data.get("version") != 1:
            raise ValueError(f"not a {TABLE_FORMAT} v1 table: format {data.get('format')!r}, "
                             f"version {data.get('version')!r}")
        try:
            entries = tuple(HostPreprocessEntry(**e) for e in data["entries"])
            return cls(source=str(data["source"]), measured=str(data["measured"]), cpu=str(data["cpu"]),
                       entries=entries)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"host preprocess table is malformed: {exc}") from None


def write_table(table: HostPreprocessTable, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table.to_dict(), indent=2) + "\n")
    return path


@functools.cache
def _committed() -> HostPreprocessTable:
    return HostPreprocessTable.from_dict(json.loads(TABLE_PATH.read_text()))


def load_table(path: Path | None = None) -> HostPreprocessTable:
    """The table at ``path`` (default: the committed one, read once)."""
    if path is None:
        return _committed()
    return HostPreprocessTable.from_dict(json.loads(Path(path).read_text()))


def host_preprocess_efficiency(efficiency: Efficiency, model: str, modality: str, *,
                               table: HostPreprocessTable | None = None) -> Efficiency:
    """``efficiency`` with the measured host preprocessing of ``model`` on ``modality`` items."""
    entry = (table or load_table()).entry(model, modality)
    return replace(efficiency, **entry.efficiency_fields())


def item_host_s(entry: HostPreprocessEntry, mm_tokens_per_item: Sequence[int]) -> float:
    """What the analytic profile charges for these items under ``entry`` (its size rule)."""
    f = entry.efficiency_fields()
    return sum(f["host_preprocess_s_per_item"] + f["host_preprocess_s_per_mm_token"] * t
               for t in mm_tokens_per_item)
