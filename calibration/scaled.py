"""A profile scaled by two factors: the ``scaled`` profile kind (a refit from a serving benchmark).

A benchmark's end-to-end timings determine how much slower or faster the
stages before the first token, and the decode step, run than a profile says;
not how that splits between encode and prefill, nor between kernels
(docs/calibration.md §6). So a ``scaled`` profile keeps a base profile
whole (its document embedded under ``params.base``) and multiplies:

* ``first_token_scale``: encode and prefill seconds;
* ``decode_scale``: decode-step seconds.

A mixed step (prefill chunks beside decodes, the aggregated engine) scales
its decode part, the base's decode step of that batch, by ``decode_scale``
and the rest by ``first_token_scale``. Host preprocessing, transfer sizes,
memory and TP fits are the base's, unscaled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from easerve_core import checks
from easerve_core.profile import ParallelProfile, StageProfile

Profile = StageProfile | ParallelProfile


class ScaledProfile:
    """``base`` with its first-token stages and its decode step scaled (see the module docstring).

    Any other attribute is the base's: delegated, so a base without TP
    (a plain :class:`StageProfile`) stays one for ``isinstance`` checks.
    """

    def __init__(self, base: Profile, *, first_token_scale: float, decode_scale: float) -> None:
        self.base = base
        self.first_token_scale = checks.positive("first_token_scale", first_token_scale)
        self.decode_scale = checks.positive("decode_scale", decode_scale)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "base":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.base, name)

    def __repr__(self) -> str:
        return (f"ScaledProfile({self.base!r}, first_token_scale={self.first_token_scale:.4g}, "
                f"decode_scale={self.decode_scale:.4g})")

    def _scaled(self, base: Any) -> ScaledProfile:
        return ScaledProfile(base, first_token_scale=self.first_token_scale, decode_scale=self.decode_scale)

    def for_tp(self, tp: int) -> StageProfile:
        return self._scaled(self.base.for_tp(tp))  # type: ignore[union-attr]

    def encode_s(self, mm_tokens_per_item: Sequence[int], sm_share: float = 1.0) -> float:
        return self.first_token_scale * self.base.encode_s(mm_tokens_per_item, sm_share)  # type: ignore[union-attr]

    def prefill_s(self, seq_lens: Sequence[int], sm_share: float = 1.0) -> float:
        return self.first_token_scale * self.base.prefill_s(seq_lens, sm_share)  # type: ignore[union-attr]

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        return self.decode_scale * self.base.decode_step_s(batch_size, context_tokens)  # type: ignore[union-attr]

    def mixed_step_s(self, chunk_lens: Sequence[int], batch_size: int, context_tokens: int) -> float:
        base: Any = self.base
        decode = base.decode_step_s(batch_size, context_tokens) if batch_size else 0.0
        own = getattr(base, "mixed_step_s", None)
        whole = own(chunk_lens, batch_size, context_tokens) if own is not None else (
            (base.prefill_s(list(chunk_lens), 1.0) if chunk_lens else 0.0) + decode)
        return self.first_token_scale * max(0.0, whole - decode) + self.decode_scale * decode

    def embed_bytes(self, mm_tokens: int) -> int:
        return int(self.base.embed_bytes(mm_tokens))  # type: ignore[union-attr]

    def kv_bytes(self, num_tokens: int) -> int:
        return int(self.base.kv_bytes(num_tokens))  # type: ignore[union-attr]


def scaled_params(base_doc: Mapping[str, Any], *, first_token_scale: float, decode_scale: float,
                  fit: Mapping[str, Any]) -> dict[str, Any]:
    """The ``params`` of a ``scaled`` profile document (``fit``: what it was fitted from, and how well)."""
    return {"base": dict(base_doc), "first_token_scale": float(first_token_scale),
            "decode_scale": float(decode_scale), "fit": dict(fit)}


def scales_of(params: Mapping[str, Any]) -> tuple[Mapping[str, Any], float, float]:
    """(the base document, first_token_scale, decode_scale) of a ``scaled`` profile's params."""
    for name in ("base", "first_token_scale", "decode_scale"):
        if name not in params:
            raise ValueError(f"scaled profile: params lacks {name!r}")
    if not isinstance(params["base"], Mapping):
        raise ValueError("scaled profile: params.base must be a profile document")
    return params["base"], float(params["first_token_scale"]), float(params["decode_scale"])
