"""Upper bounds on every size a user can type, each with its reason.

The table of them is docs/cli.md, "Sizes: bounded, each with its reason".

A bound refuses, with its reason, a size the toolkit cannot run rather than
letting it hang or exhaust the machine:

* :data:`MAX_ENCODE_BATCH`: the SM-share table is profiled for every batch
  size 1..B (linear work at start-up, as EAServe profiles it), and no
  serving engine batches more encoder inputs than this at once;
* :data:`MAX_NUM_REQUESTS`: a simulated request holds about 2 KB while the
  run lasts, so this many take about 4 GB; longer studies split the stream;
* :data:`MAX_NUM_GPUS`: the simulator keeps per-GPU state and HAS enumerates
  allocations of the cluster; 4,096 GPUs is beyond any single EPD deployment
  studied (multi-node clusters of 8-GPU nodes included);
* :data:`MAX_TP`: the largest tensor-parallel group in the model specs'
  world, an NVLink domain of 72 GPUs rounded to a power of two;
* :data:`MAX_TOKENS`: prompt, output and per-item token counts; 2^20 = 1M
  tokens, the longest context of public LLMs;
* :data:`MAX_ITEMS_PER_REQUEST`: images, clips or audio segments per request;
* :data:`MAX_NUM_DECODE_SEQS`: sequences one Decode worker batches;
* :data:`MAX_ARRIVAL_S`: a request's arrival time, one year after the
  stream starts: longer than any published serving trace (Azure's spans a
  week), and far inside the range where float seconds still resolve a
  microsecond (2^33 s).
"""

from __future__ import annotations

from easerve_core import checks

MAX_ENCODE_BATCH = 1024
MAX_NUM_REQUESTS = 2_000_000
MAX_NUM_GPUS = 4096
MAX_TP = 64
MAX_TOKENS = 1 << 20
MAX_ITEMS_PER_REQUEST = 256
MAX_NUM_DECODE_SEQS = 65_536
MAX_ARRIVAL_S = 365 * 86_400
#: the highest arrival rate, req/s: a million requests a second is past any serving cluster, and
#: beyond it a stream's arrivals collapse to t = 0 in floating point
MAX_RATE_HZ = 1e6

#: why a token count is bounded, and why an arrival time is (the reasons the errors give)
TOKENS_WHY = "the longest context of public LLMs"
ARRIVAL_WHY = "one year of arrivals; split longer traces"


def rate(name: str, value: float) -> float:
    """A positive arrival rate of at most :data:`MAX_RATE_HZ` (a ValueError naming the field)."""
    out = checks.positive(name, value)
    if out > MAX_RATE_HZ:
        raise ValueError(f"{name} must be <= {MAX_RATE_HZ:g} req/s (past any serving cluster), got {value!r}")
    return out


def at_most(name: str, value: int, limit: int, why: str) -> int:
    """``value`` if it is within ``limit``, else a ValueError naming the field and the reason."""
    if value > limit:
        raise ValueError(f"{name} must be <= {limit:,} ({why}), got {value!r}")
    return value
