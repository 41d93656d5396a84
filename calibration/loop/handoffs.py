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
time for the message's bytes, clamped at 0, and its spread as ten quantiles,
over the hand-offs whose sender did not start another batch at once; and, as ``handoff_busy_s``, how much
longer (median, both directions) those took whose sender did: a live worker's
message leaves from the queue's feeder thread, which competes with the batch
the worker goes on with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from calibration.loop.host import HostModel

#: a sender "went on at once" when its process starts a batch this soon after sending
BUSY_WINDOW_S = 0.002
#: equally likely values kept of each direction's delay: its quantiles at (i + 0.5) / QUANTILES
QUANTILES = 10


def handoff_delays(log: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """Hand-offs to an idle receiver: direction, delay, tokens sent, whether the sender went on.

    The tokens: the request's multimodal tokens (embeddings) to Prefill, its
    input tokens (KV) to Decode. The sender: the encode worker's process for
    embeddings and for a local Prefill's KV, the Prefill worker's for a
    remote one's.
    """
    rows: list[tuple[str, float, int, bool]] = []
    ok = records[records["status"] == "ok"]
    starts_of = {key: np.sort(g["start_s"].to_numpy(float)) for key, g in log.groupby(["group", "worker"])}

    def went_on(group: str, worker: Any, sent: float) -> bool:
        if pd.isna(worker):  # a record naming no sender (a run folder edited by hand): no hand-off seen
            return False
        starts = starts_of.get((group, int(worker)), np.empty(0))
        i = int(np.searchsorted(starts, sent))
        return i < len(starts) and starts[i] <= sent + BUSY_WINDOW_S

    prefill = log[(log["stage"] == "prefill") & (log["group"] == "prefill")]
    remote = ok[ok["route"] == "remote"]
    for worker, batches in prefill.groupby("worker"):
        ends = np.sort(batches["end_s"].to_numpy(float))
        for r in remote[remote["prefill_worker"] == worker].itertuples(index=False):
            if _idle(ends, r.encode_end_s, r.prefill_start_s):
                rows.append(("prefill", r.prefill_start_s - r.encode_end_s, int(r.mm_tokens),
                             went_on("encode", r.encode_worker, r.encode_end_s)))
    decode = log[log["stage"] == "decode"]
    for worker, steps in decode.groupby("worker"):
        steps = steps.sort_values("start_s")
        starts, ends = steps["start_s"].to_numpy(float), steps["end_s"].to_numpy(float)
        sizes = steps["batch_size"].to_numpy(int)
        for r in ok[ok["decode_worker"] == worker].itertuples(index=False):
            first = r.first_token_s
            i = int(np.searchsorted(starts, first))
            if i < len(starts) and sizes[i] == 1 and (i == 0 or ends[i - 1] < first):
                local = r.route == "local"
                sender = ("encode", r.encode_worker) if local else ("prefill", r.prefill_worker)
                rows.append(("decode", starts[i] - first, int(r.prompt_tokens + r.mm_tokens),
                             went_on(*sender, first)))
    return pd.DataFrame(rows, columns=["direction", "delay_s", "tokens", "sender_busy"])


def _idle(ends: np.ndarray, sent: float, started: float) -> bool:
    """Whether the receiver's last batch before ``started`` had ended by ``sent``."""
    i = int(np.searchsorted(ends, started, side="right"))
    return i == 0 or ends[i - 1] < sent


def fit_handoffs(logs: Sequence[pd.DataFrame], records: Sequence[pd.DataFrame], host: HostModel, *,
                 embed_bytes_per_token: int, kv_bytes_per_token: int) -> dict[str, Any]:
    """``handoff_prefill_s``, ``handoff_decode_s``, ``handoff_busy_s``, the quantiles and the counts.

    Per direction, the median excess (less the link, and less the join work
    to Decode) of the hand-offs whose sender did not go on at once; then
    ``handoff_busy_s``, the median over both directions of how much more
    those whose sender did took. ``handoff_<direction>_quantiles_s``: the
    first kind's quantiles at (i + 0.5) / :data:`QUANTILES`, clamped at 0,
    for the simulator to draw from. ``host`` gives the link and the (refitted)
    join cost; a kind never seen gives 0.
    """
    table = pd.concat([handoff_delays(log, rec) for log, rec in zip(logs, records, strict=True)],
                      ignore_index=True)
    per_token = {"prefill": embed_bytes_per_token, "decode": kv_bytes_per_token}
    link = host.transfer_latency_s
    fixed = {"prefill": link, "decode": link + host.effects.decode_join_s}
    out: dict[str, Any] = {}
    more: list[float] = []
    for direction in ("prefill", "decode"):
        rows = table[table["direction"] == direction]
        link_s = fixed[direction] + rows["tokens"] * per_token[direction] / host.transfer_bytes_per_s
        excess = rows["delay_s"] - link_s
        calm = excess[~rows["sender_busy"]]
        base = float(calm.median()) if len(calm) else 0.0
        more += (excess[rows["sender_busy"]] - base).tolist()
        out[f"handoff_{direction}_s"] = max(0.0, base)
        probs = (np.arange(QUANTILES) + 0.5) / QUANTILES
        out[f"handoff_{direction}_quantiles_s"] = (
            [round(max(0.0, float(q)), 6) for q in np.quantile(calm, probs)] if len(calm) else [])
        out[f"handoff_{direction}_count"] = len(rows)
        out[f"handoff_{direction}_busy_count"] = int(rows["sender_busy"].sum())
    out["handoff_busy_s"] = max(0.0, float(np.median(more))) if more else 0.0
    return out
