"""Hand-offs between worker processes in live traces: what a message costs beyond the link.

A request crosses processes on its way to Decode: an encode worker sends its
embeddings to a remote Prefill worker, a Prefill worker its KV to a Decode
worker. Between the sender's stage end and the receiver's next stage start
lie the sender's work (building the message, the queue put), the transport,
and the receiver's work (unpickling, the ack and events, the inputs).
``calibrate``'s transfer points time the transport of a bare tensor alone
(the link: ``transfer_latency_s + bytes / transfer_bytes_per_s``); the traces
time the whole (docs/calibration.md §3.4).

Measured only where the receiver was idle, so that nothing of its own held
the message up:

* **to Prefill**: a request routed remote whose Prefill worker's previous
  batch ended before the request's encode batch did; the delay is its
  ``prefill_start_s`` less its ``encode_end_s``;
* **to Decode**: a request whose first decode step holds it alone, the
  worker's previous step having ended before its first token; the delay is
  that step's start less ``first_token_s``, less ``decode_join_s`` (the join
  work, which the simulator charges at the head of the step,
  :mod:`calibration.loop.joins`).

:func:`fit_handoffs` keeps per direction the median delay less the link's
time for the message's bytes, clamped at 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from calibration.loop.host import HostModel


def handoff_delays(log: pd.DataFrame, records: pd.DataFrame) -> dict[str, list[tuple[float, int]]]:
    """Per direction (``prefill``, ``decode``), (delay, tokens sent) of hand-offs to an idle receiver.

    The tokens: the request's multimodal tokens (embeddings) to Prefill, its
    input tokens (KV) to Decode.
    """
    out: dict[str, list[tuple[float, int]]] = {"prefill": [], "decode": []}
    ok = records[records["status"] == "ok"]
    prefill = log[(log["stage"] == "prefill") & (log["group"] == "prefill")]
    remote = ok[ok["route"] == "remote"]
    for worker, rows in prefill.groupby("worker"):
        ends = np.sort(rows["end_s"].to_numpy(float))
        mine = remote[remote["prefill_worker"] == worker]
        for enc_end, start, mm in zip(mine["encode_end_s"].to_numpy(float),
                                      mine["prefill_start_s"].to_numpy(float),
                                      mine["mm_tokens"].to_numpy(int), strict=True):
            if _idle(ends, enc_end, start):
                out["prefill"].append((start - enc_end, int(mm)))
    decode = log[log["stage"] == "decode"]
    for worker, rows in decode.groupby("worker"):
        rows = rows.sort_values("start_s")
        starts, ends = rows["start_s"].to_numpy(float), rows["end_s"].to_numpy(float)
        sizes = rows["batch_size"].to_numpy(int)
        mine = ok[ok["decode_worker"] == worker]
        inputs = (mine["prompt_tokens"] + mine["mm_tokens"]).to_numpy(int)
        for first, tokens in zip(mine["first_token_s"].to_numpy(float), inputs, strict=True):
            i = int(np.searchsorted(starts, first))
            if i < len(starts) and sizes[i] == 1 and (i == 0 or ends[i - 1] < first):
                out["decode"].append((starts[i] - first, int(tokens)))
    return out


def _idle(ends: np.ndarray, sent: float, started: float) -> bool:
    """Whether the receiver's last batch before ``started`` had ended by ``sent``."""
    i = int(np.searchsorted(ends, started, side="right"))
    return i == 0 or ends[i - 1] < sent


def fit_handoffs(logs: Sequence[pd.DataFrame], records: Sequence[pd.DataFrame], host: HostModel, *,
                 embed_bytes_per_token: int, kv_bytes_per_token: int) -> dict[str, Any]:
    """``handoff_prefill_s`` and ``handoff_decode_s`` (see the module docstring), and their counts.

    ``host`` gives the link and the join cost (the refitted one); a direction
    never seen gives 0.
    """
    per_token = {"prefill": embed_bytes_per_token, "decode": kv_bytes_per_token}
    fixed = {"prefill": host.transfer_latency_s, "decode": host.transfer_latency_s + host.decode_join_s}
    excess: dict[str, list[float]] = {"prefill": [], "decode": []}
    for log, rec in zip(logs, records, strict=True):
        for direction, rows in handoff_delays(log, rec).items():
            per_s = per_token[direction] / host.transfer_bytes_per_s  # link seconds per token sent
            excess[direction] += [delay - fixed[direction] - tokens * per_s for delay, tokens in rows]
    out: dict[str, Any] = {}
    for direction, values in excess.items():
        out[f"handoff_{direction}_s"] = max(0.0, float(np.median(values))) if values else 0.0
        out[f"handoff_{direction}_count"] = len(values)
    return out
