"""Sim/live parity of the SM shares: both engines grant what easerve_core.sm_split says.

A local prefill that starts while an encode batch of each size runs gets the
same shares from the simulator's shared GPU (with a host model: a real
device) and from the live partitioner of the same mode. Without a host model
the simulator's share is a hard partition, and a full-share batch makes local
Prefill wait (share 0.0); that is the one documented difference.
"""

from __future__ import annotations

import pytest

from easerve_core import SMShareTable, SMSharing
from live.partition import make_partitioner
from sim.sharing import SharedGPU

TABLE = SMShareTable({1: 0.25, 4: 0.5, 8: 1.0})
SIZES = (1, 3, 8, 20)


def sim_shares(mode: SMSharing, size: int, *, host: bool) -> tuple[float, float]:
    gpu = SharedGPU(mode, table=TABLE, static_encode_share=0.3, time_slice_overhead_frac=0.1,
                    host_colocated_speed_frac=0.5 if host else None)
    gpu.start_encode(0.0, size, lambda share: 1.0)
    gpu.start_prefill(0.0, lambda share: 1.0)
    return gpu.encode.share, gpu.prefill.share


def live_shares(mode: SMSharing, size: int) -> tuple[float, float]:
    part = make_partitioner(str(mode), total_threads=4, static_share=0.3, table=TABLE)
    with part.encode_slot(size) as enc, part.prefill_slot() as pre:
        return enc, pre


@pytest.mark.parametrize("mode", list(SMSharing))
def test_the_engines_grant_the_same_shares(mode):
    for size in SIZES:
        live = live_shares(mode, size)
        assert sim_shares(mode, size, host=True) == live
        hard = sim_shares(mode, size, host=False)
        full = mode is SMSharing.DYNAMIC and TABLE.share_for(size) >= 1.0
        assert hard == ((1.0, 0.0) if full else live)
