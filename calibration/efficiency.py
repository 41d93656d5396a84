"""The roofline's efficiency constants: achieved fractions of peak and fixed overheads.

Every number is named and documented (docs/profiles.md). The defaults are the
hand-set constants every analytic profile has used; ``easerve profile
fit-roofline`` fits per-GPU values to a measured kernel database and commits
them under ``specs/fitted/`` (:mod:`calibration.roofline_fit`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from calibration._fields import fraction, validate

#: fields added after profiles were first committed: left out of a profile's params at their
#: defaults, so that every profile written before them is written byte for byte as before
_LATER_FIELDS = {"kernel_floor_s": 0.0, "price_elementwise_ops": False, "attention_half_len_tokens": 0.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """Achieved fractions of peak and fixed overheads (all named, all documented)."""

    gemm_efficiency_frac: float = 0.65
    attention_efficiency_frac: float = 0.50
    mem_bw_efficiency_frac: float = 0.80
    fill_flops_per_sm: float = 6.7e7
    layer_launch_s: float = 100e-6
    step_overhead_s: float = 1e-3
    decode_step_overhead_s: float = 2e-3
    #: host-side preprocessing of one item (media decode + the model's processor): its own
    #: stage in front of the encoder (:meth:`TPStageProfile.host_preprocess_s`), not in encode_s
    host_preprocess_s_per_item: float = 0.0
    #: ... plus this per LM token of the item (video: frames at a fixed resolution)
    host_preprocess_s_per_mm_token: float = 0.0
    #: the per-call encoder cost nothing measured explains, held on the SMs (docs/profiles.md)
    encode_call_residual_s: float = 0.0
    #: the least time one kernel launch takes (0: the ``fill`` rule alone); fitted per GPU
    #: by ``easerve profile fit-roofline`` (docs/profiles.md, "The roofline fitted")
    kernel_floor_s: float = 0.0
    #: price the memory-bound passes (norms, residual adds, activations, rope) over the
    #: achieved bandwidth, in series with the roofline (calibration.ops); off by default
    price_elementwise_ops: bool = False
    #: context and encoder attention's efficiency grows with the sequence length L:
    #: ``attention_efficiency_frac * L / (L + attention_half_len_tokens)`` (0: one constant);
    #: fitted per GPU by ``easerve profile fit-roofline`` (docs/profiles.md, "The roofline fitted")
    attention_half_len_tokens: float = 0.0

    def __post_init__(self) -> None:
        validate(self, positive=frozenset({"fill_flops_per_sm"}))
        for name in ("gemm_efficiency_frac", "attention_efficiency_frac", "mem_bw_efficiency_frac"):
            fraction("Efficiency", name, getattr(self, name))


def efficiency_dict(efficiency: Efficiency) -> dict[str, Any]:
    """The plain values a profile embeds (the later fields only when they are not at their defaults)."""
    out = asdict(efficiency)
    for name, default in _LATER_FIELDS.items():
        if out[name] == default:
            del out[name]
    return out
