"""The per-micro-batch SM-share rule: the shares Encode and local Prefill run with.

One encode worker runs two lanes on its GPUs, Encode micro-batches and local
Prefill. :func:`sm_split` says, for the sharing mode of the deployment and the
encode batch now running, which share of the SMs each lane gets. Both engines
apply it: the simulator's :class:`sim.sharing.SharedGPU` re-rates its lanes
with it at every start and finish, the live partitioners
(:mod:`live.partition`) grant it to each encode batch and each local prefill
as it starts. How a share is enforced (a latency at that share, a thread
count, a CUDA green context) is the engine's business.

* ``dynamic``: while an encode batch of size b runs, Encode holds
  ``table.share_for(b)`` and local Prefill the rest; with Encode idle, local
  Prefill holds everything.
* ``static``: Encode holds ``static_share``, local Prefill the rest, busy or not.
* ``time-slice`` and ``none``: no partition; both lanes ask for everything.

A ``dynamic`` batch whose table share is 1.0 leaves no rest. On a real device
(the live executor, and the simulator's model of a host, ``[sim.host]``) a
full share is no partition: local Prefill asks for everything too and
contends. The simulator without a host model treats a share as a hard
partition, so local Prefill gets 0.0 and waits until the batch finishes; it
asks for that with ``prefill_waits_on_full_encode=True``. The two engines
differ here on purpose (a share is a fence in the analytic model, a request
on the device); the keyword keeps the difference named, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from easerve_core.deployment import SMSharing
from easerve_core.sm_share import SMShareTable


@dataclass(frozen=True, slots=True)
class SMSplit:
    """The SM shares of one encode worker's two lanes at one moment (0.0: that lane waits)."""

    encode: float
    prefill: float


#: no partition: both lanes ask for the whole worker
WHOLE = SMSplit(1.0, 1.0)


def sm_split(mode: SMSharing, batch_size: int | None, *, table: SMShareTable | None,
             static_share: float, prefill_waits_on_full_encode: bool = False) -> SMSplit:
    """The shares while an encode batch of ``batch_size`` runs (None: Encode is idle).

    ``table`` is the plan's SM-share table (needed for ``dynamic``),
    ``static_share`` the deployment's ``static_encode_share`` (used for
    ``static``); ``prefill_waits_on_full_encode``: see the module docstring.
    """
    if mode is SMSharing.STATIC:
        return SMSplit(static_share, 1.0 - static_share)
    if mode is SMSharing.DYNAMIC and batch_size is not None:
        if table is None:
            raise ValueError("sm_sharing 'dynamic' needs an SM-share table (the plan's)")
        share = table.share_for(batch_size)
        if share < 1.0:
            return SMSplit(share, 1.0 - share)
        return SMSplit(share, 0.0 if prefill_waits_on_full_encode else 1.0)
    return WHOLE
