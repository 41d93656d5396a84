"""The per-micro-batch SM-share rule (easerve_core.sm_split), and both engines applying it."""

from __future__ import annotations

import pytest

from easerve_core import SMShareTable, SMSharing
from easerve_core.sm_split import SMSplit, sm_split

TABLE = SMShareTable({1: 0.25, 4: 0.5, 8: 1.0})


@pytest.mark.parametrize(("mode", "size", "want"), [
    (SMSharing.DYNAMIC, 1, SMSplit(0.25, 0.75)),
    (SMSharing.DYNAMIC, 3, SMSplit(0.5, 0.5)),  # next larger profiled size
    (SMSharing.DYNAMIC, None, SMSplit(1.0, 1.0)),  # Encode idle: Prefill gets everything
    (SMSharing.DYNAMIC, 8, SMSplit(1.0, 1.0)),  # a full share is no fence on a device
    (SMSharing.STATIC, 1, SMSplit(0.3, 0.7)),
    (SMSharing.STATIC, None, SMSplit(0.3, 0.7)),  # busy or not
    (SMSharing.TIME_SLICE, 4, SMSplit(1.0, 1.0)),
    (SMSharing.NONE, 4, SMSplit(1.0, 1.0)),
])
def test_the_rule(mode, size, want):
    assert sm_split(mode, size, table=TABLE, static_share=0.3) == want


def test_a_hard_partition_makes_prefill_wait_behind_a_full_share_batch():
    got = sm_split(SMSharing.DYNAMIC, 20, table=TABLE, static_share=0.5, prefill_waits_on_full_encode=True)
    assert got == SMSplit(1.0, 0.0)
    assert sm_split(SMSharing.DYNAMIC, 3, table=TABLE, static_share=0.5,
                    prefill_waits_on_full_encode=True) == SMSplit(0.5, 0.5)


def test_dynamic_without_a_table_is_refused():
    with pytest.raises(ValueError, match="SM-share table"):
        sm_split(SMSharing.DYNAMIC, 1, table=None, static_share=0.5)
    assert sm_split(SMSharing.DYNAMIC, None, table=None, static_share=0.5) == SMSplit(1.0, 1.0)
