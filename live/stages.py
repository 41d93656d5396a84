"""The three stages as plain functions over a loaded model, family-agnostic.

* :func:`encode_batch`: the family's tower + projector over a micro-batch.
* :func:`prefill`: the LM over one request's text + multimodal embeddings,
  returning a :class:`KVState` (the KV cache as one tensor, the first token,
  the length and the M-RoPE ``rope_delta``), which is what travels to Decode.
* :class:`DecodeBatch`: continuous batching over one left-padded
  ``DynamicCache``; requests join and leave between steps, and every row runs
  at its own explicit position (notes/tiny-models.md §3.2, pitfall P5).

Greedy decoding throughout; EOS is ignored so each request runs exactly its
output length.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from transformers import DynamicCache

from live.device import model_device
from live.families.base import Family, MMInput, PrefillInputs


@dataclass(frozen=True, slots=True, kw_only=True)
class KVState:
    """A prefilled request, ready for Decode: KV ``(layers, 2, 1, kv_heads, L, head_dim)``."""

    kv: torch.Tensor
    first_token: int
    length: int
    rope_delta: int = 0

    def __post_init__(self) -> None:
        if self.kv.dim() != 6 or self.kv.shape[1] != 2 or self.kv.shape[2] != 1:
            raise ValueError(f"kv must be (layers, 2, 1, heads, L, dim), got {tuple(self.kv.shape)}")
        if self.kv.shape[4] != self.length:
            raise ValueError(f"length {self.length} does not match kv length {self.kv.shape[4]}")

    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(layer[0], layer[1]) for layer in self.kv]


@torch.no_grad()
def encode_batch(model: Any, family: Family, inputs: Sequence[MMInput]) -> list[list[torch.Tensor]]:
    """Per request, per item: the projected embeddings ``(tokens, hidden)``.

    The items (a client's tensors, on the CPU) go to the model's device first.
    """
    device = model_device(model)
    return family.encode(model, [_on(mm, device) for mm in inputs])


def _on(mm: MMInput, device: torch.device) -> MMInput:
    if all(t.device == device for t in mm.items):
        return mm
    return replace(mm, items=tuple(t.to(device) for t in mm.items))


@torch.no_grad()
def prefill(model: Any, pin: PrefillInputs) -> KVState:
    """Run the LM over one laid-out request; keep only the last position's logits (P2)."""
    cache = DynamicCache(config=model.config)
    extra = {} if pin.position_ids is None else {"position_ids": pin.position_ids}
    out = model(
        inputs_embeds=pin.inputs_embeds, attention_mask=torch.ones_like(pin.input_ids),
        cache=cache, use_cache=True, logits_to_keep=1, **extra,
    )
    kv = torch.stack([torch.stack([layer.keys, layer.values]) for layer in cache.layers])
    return KVState(kv=kv.contiguous(), first_token=int(out.logits[0, -1].argmax()),
                   length=int(pin.input_ids.shape[1]), rope_delta=pin.rope_delta)


def _lpad(t: torch.Tensor, n: int) -> torch.Tensor:
    """Left-pad the sequence axis (-2) with ``n`` zeros."""
    if n == 0:
        return t
    return torch.cat([t.new_zeros(*t.shape[:-2], n, t.shape[-1]), t], dim=-2)


@dataclass(slots=True)
class _Row:
    key: Hashable
    token: int  # last produced, fed at the next step
    position: int  # position of that token (length + steps + rope_delta)
    remaining: int  # steps still to run
    tokens: list[int] = field(default_factory=list)


class DecodeBatch:
    """A running decode batch over one left-padded cache (see the module docstring)."""

    def __init__(self, model: Any, *, mrope: bool) -> None:
        self.model = model
        self.mrope = mrope
        self._cache: DynamicCache | None = None
        self._mask = torch.zeros(0, 0, dtype=torch.long)
        self._rows: list[_Row] = []

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def keys(self) -> list[Hashable]:
        return [r.key for r in self._rows]

    def context_tokens(self) -> int:
        """Real (unpadded) KV tokens summed over the batch."""
        return int(self._mask.sum())

    def join(self, key: Hashable, state: KVState, steps: int) -> None:
        """Add a prefilled request that still needs ``steps`` decode steps (>= 1)."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps!r}")
        if key in self.keys:
            raise ValueError(f"request {key!r} is already in the batch")
        length = state.length
        if self._cache is None:
            self._cache = DynamicCache(ddp_cache_data=state.layers(), config=self.model.config)
            self._mask = torch.ones(1, length, dtype=torch.long)
        else:
            width = self._mask.shape[1]
            if length > width:
                grow = length - width
                for layer in self._cache.layers:
                    layer.keys, layer.values = _lpad(layer.keys, grow), _lpad(layer.values, grow)
                self._mask = torch.cat([self._mask.new_zeros(len(self), length - width), self._mask], 1)
                width = length
            for layer, (k, v) in zip(self._cache.layers, state.layers(), strict=True):
                layer.keys = torch.cat([layer.keys, _lpad(k, width - length)], 0)
                layer.values = torch.cat([layer.values, _lpad(v, width - length)], 0)
            row = torch.cat([torch.zeros(1, width - length), torch.ones(1, length)], 1).long()
            self._mask = torch.cat([self._mask, row], 0)
        self._rows.append(_Row(key=key, token=state.first_token, position=length + state.rope_delta,
                               remaining=steps, tokens=[state.first_token]))

    @torch.no_grad()
    def step(self) -> list[tuple[Hashable, int]]:
        """One token for every row; returns ``(key, token)`` in row order."""
        if not self._rows:
            return []
        batch = len(self._rows)
        ids = torch.tensor([[r.token] for r in self._rows])
        mask = torch.cat([self._mask, self._mask.new_ones(batch, 1)], 1)
        pos = torch.tensor([[r.position] for r in self._rows])
        if self.mrope:
            pos = pos[None].expand(3, batch, 1)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos,
                         cache=self._cache, use_cache=True)
        self._mask = mask
        produced = out.logits[:, -1].argmax(-1).tolist()
        for row, tok in zip(self._rows, produced, strict=True):
            row.token, row.position, row.remaining = tok, row.position + 1, row.remaining - 1
            row.tokens.append(tok)
        return [(r.key, r.token) for r in self._rows]

    def rewind(self) -> None:
        """Forget the newest KV column of every row (profiling at a fixed context)."""
        if self._cache is None:
            return
        for layer in self._cache.layers:
            layer.keys, layer.values = layer.keys[:, :, :-1], layer.values[:, :, :-1]
        self._mask = self._mask[:, :-1]

    def finished(self) -> list[Hashable]:
        return [r.key for r in self._rows if r.remaining <= 0]

    def tokens(self, key: Hashable) -> list[int]:
        """Every output token of a row so far, the prefill's first token included."""
        return next(r.tokens for r in self._rows if r.key == key)

    def leave(self, keys: Sequence[Hashable]) -> None:
        """Drop rows; then drop leading columns that are padding in every remaining row."""
        gone = set(keys)
        keep = [i for i, r in enumerate(self._rows) if r.key not in gone]
        if len(keep) == len(self._rows):
            return
        self._rows = [self._rows[i] for i in keep]
        if not keep or self._cache is None:
            self._cache, self._mask = None, torch.zeros(0, 0, dtype=torch.long)
            return
        self._cache.batch_select_indices(torch.tensor(keep))
        self._mask = self._mask[keep]
        drop = int((self._mask.sum(0) > 0).long().argmax())
        if drop:
            for layer in self._cache.layers:
                layer.keys, layer.values = layer.keys[:, :, drop:], layer.values[:, :, drop:]
            self._mask = self._mask[:, drop:]
