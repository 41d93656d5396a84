"""CUDA green contexts: (Encode, local Prefill) stream pairs per SM level, built once.

At start-up :meth:`GreenContextPool.build` asks the driver for the device's SM
resource, splits it once into groups of the device's granularity (queried:
``minSmPartitionSize`` / ``smCoscheduledAlignment``; else 8 SMs on compute
capability 9.x) and, per level, creates two green contexts from that one
split: Encode on the first ``k`` groups, local Prefill on the other groups
plus the remainder. Each context gets one ``cuGreenCtxStreamCreate`` stream,
wrapped as ``torch.cuda.ExternalStream``; the SM count each context *really*
got (``cuGreenCtxGetDevResource``) is what the lanes carry. Two plain
primary-context streams form the full-device pair (share 1.0, time-slice).
Switching per micro-batch is then only :meth:`LanePool.lane_for` plus a
``torch.cuda.set_stream``: no driver call (notes/sm-partitioning.md §0, §4).

Why not ``torch.cuda.GreenContext.create``: in torch 2.11 each call splits
the whole device anew, so two contexts overlap (notes §2.3).

``cuda.bindings`` is imported only when a pool is built without an injected
driver, so this module imports on machines without CUDA. Unverified on a GPU:
everything that touches the driver (see bench/gpu/README.md).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from live.gpu.lanes import DEFAULT_ENCODE_FRACS, Lane, LanePool, StreamPair, level_name, plan_levels


class DriverError(RuntimeError):
    """A CUDA driver call returned an error; the message names the call and the error."""


def _ok(drv: Any, name: str, result: Any) -> Any:
    """Unpack a cuda.bindings ``(CUresult, *outputs)`` tuple, raising on an error."""
    err, *out = result
    if err != drv.CUresult.CUDA_SUCCESS:
        try:
            label = drv.cuGetErrorName(err)[1]
        except Exception:  # the error name is a courtesy; never mask the real error
            label = err
        raise DriverError(f"{name} failed: {label!r}")
    return out[0] if len(out) == 1 else tuple(out)


def device_granularity(sm: Any, capability_major: int) -> int:
    """SMs per group: the driver's reported minimum/alignment, else the documented guideline."""
    reported = [int(getattr(sm, a, 0) or 0) for a in ("minSmPartitionSize", "smCoscheduledAlignment")]
    if max(reported) > 0:
        return max(reported)
    # driver docs: CC 9.0+ minimum 8 SMs in multiples of 8; CC 8.x minimum 4 (notes §1.2)
    return 8 if capability_major >= 9 else 4


@dataclass(frozen=True, slots=True, kw_only=True)
class GreenOptions:
    """What to build: device, wanted encode shares, and an optional forced granularity (0: query)."""

    device_index: int = 0
    encode_fracs: tuple[float, ...] = DEFAULT_ENCODE_FRACS
    granularity: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.device_index, int) or self.device_index < 0:
            raise ValueError(f"device_index must be an integer >= 0, got {self.device_index!r}")
        if not isinstance(self.granularity, int) or self.granularity < 0:
            raise ValueError(f"granularity must be an integer >= 0, got {self.granularity!r}")
        if not self.encode_fracs or not all(0.0 < f < 1.0 for f in self.encode_fracs):
            raise ValueError(f"encode_fracs must be shares in (0, 1), got {self.encode_fracs!r}")


@dataclass(slots=True)
class _Builder:
    """Driver state while building; keeps every handle so the pool can release it."""

    drv: Any
    dev: Any
    sm_type: Any
    device_index: int
    wrap: Callable[[int, int], Any]
    handles: list[tuple[Any, Any]] = field(default_factory=list)

    def lane(self, name: str, resources: Sequence[Any]) -> Lane:
        drv = self.drv
        res = list(resources)
        desc = _ok(drv, "cuDevResourceGenerateDesc", drv.cuDevResourceGenerateDesc(res, len(res)))
        flags = int(drv.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM)
        gctx = _ok(drv, "cuGreenCtxCreate", drv.cuGreenCtxCreate(desc, self.dev, flags))
        nonblocking = int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
        handle = _ok(drv, "cuGreenCtxStreamCreate", drv.cuGreenCtxStreamCreate(gctx, nonblocking, 0))
        self.handles.append((gctx, handle))
        got = _ok(drv, "cuGreenCtxGetDevResource", drv.cuGreenCtxGetDevResource(gctx, self.sm_type))
        return Lane(name=name, sms=int(got.sm.smCount), stream=self.wrap(int(handle), self.device_index))

    def split(self, num_groups: int, full: Any, min_count: int) -> tuple[list[Any], int, Any]:
        groups, nb, rem = _ok(self.drv, "cuDevSmResourceSplitByCount",
                              self.drv.cuDevSmResourceSplitByCount(num_groups, full, 0, min_count))
        return list(groups)[: int(nb)], int(nb), rem


def _regrouped(b: _Builder, full: Any, counts: Sequence[int], g: int,
               report: dict[str, Any]) -> list[StreamPair]:
    """One split into g-SM groups; level k = first k groups vs the rest (+ the remainder)."""
    total = int(full.sm.smCount)
    groups, nb, rem = b.split(total // g, full, g)
    rem_sms = int(rem.sm.smCount)
    report.update(groups=nb, group_sms=[int(x.sm.smCount) for x in groups], remainder_sms=rem_sms)
    pairs = []
    for k in counts:
        if k >= nb:
            continue
        name = level_name(sum(int(x.sm.smCount) for x in groups[:k]))
        encode = b.lane(f"{name}/encode", groups[:k])
        rest = groups[k:]
        try:
            prefill = b.lane(f"{name}/prefill", rest + ([rem] if rem_sms else []))
        except DriverError as exc:  # the remainder may not combine; Prefill then runs without it
            report.setdefault("remainder_refused", []).append(f"{name}: {exc}")
            prefill = b.lane(f"{name}/prefill", rest)
        pairs.append(StreamPair(level=name, encode=encode, prefill=prefill, total_sms=total))
    return pairs


def _split_per_level(b: _Builder, full: Any, counts: Sequence[int], g: int,
                     report: dict[str, Any]) -> list[StreamPair]:
    """Fallback: per level, one split of k*g SMs; the remainder is Prefill's (SGLang's way)."""
    total = int(full.sm.smCount)
    pairs = []
    for k in counts:
        groups, nb, rem = b.split(1, full, k * g)
        if nb < 1:
            continue
        name = level_name(int(groups[0].sm.smCount))
        pairs.append(StreamPair(level=name, total_sms=total, encode=b.lane(f"{name}/encode", groups[:1]),
                                prefill=b.lane(f"{name}/prefill", [rem])))
    return pairs


STRATEGIES: dict[str, Callable[..., list[StreamPair]]] = {
    "regroup-one-split": _regrouped,
    "split-per-level": _split_per_level,
}


class GreenContextPool:
    """The driver objects behind a :class:`LanePool`; :meth:`close` releases them.

    Keep the pool alive as long as its streams are used: destroying a green
    context detaches its streams (notes §1.1).
    """

    def __init__(self, lanes: LanePool, *, driver: Any, handles: list[tuple[Any, Any]],
                 report: dict[str, Any]) -> None:
        self.lanes = lanes
        self.report = report
        self._drv = driver
        self._handles = handles

    @classmethod
    def build(cls, options: GreenOptions = GreenOptions(), *, driver: Any = None,
              wrap_stream: Callable[[int, int], Any] | None = None,
              plain_stream: Callable[[int], Any] | None = None,
              capability_major: int | None = None) -> GreenContextPool:
        """Build every level's pair (see the module docstring); tests inject a fake driver."""
        t0 = time.perf_counter()
        i = options.device_index
        if driver is None:
            driver = importlib.import_module("cuda.bindings.driver")
            torch.cuda.set_device(i)
            torch.empty(1, device=f"cuda:{i}")  # the primary context must be current first (notes §1.1)
            capability_major = torch.cuda.get_device_capability(i)[0]
            wrap_stream = wrap_stream or (lambda h, d: torch.cuda.ExternalStream(h, device=d))
            plain_stream = plain_stream or (lambda d: torch.cuda.Stream(device=d))
        if wrap_stream is None or plain_stream is None or capability_major is None:
            raise ValueError("an injected driver needs wrap_stream, plain_stream and capability_major")
        sm_type = driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM
        dev = _ok(driver, "cuDeviceGet", driver.cuDeviceGet(i))
        full = _ok(driver, "cuDeviceGetDevResource", driver.cuDeviceGetDevResource(dev, sm_type))
        total = int(full.sm.smCount)
        g = options.granularity or device_granularity(full.sm, capability_major)
        counts = plan_levels(total, g, options.encode_fracs)
        report: dict[str, Any] = {
            "sm_count": total, "granularity": g, "planned_encode_sms": [k * g for k in counts],
            "min_sm_partition_size": getattr(full.sm, "minSmPartitionSize", None),
            "sm_coscheduled_alignment": getattr(full.sm, "smCoscheduledAlignment", None),
            "strategy_errors": {},
        }
        b = _Builder(drv=driver, dev=dev, sm_type=sm_type, device_index=i, wrap=wrap_stream)
        pairs: list[StreamPair] = []
        for name, strategy in STRATEGIES.items():
            try:
                pairs = strategy(b, full, counts, g, report)
            except DriverError as exc:
                report["strategy_errors"][name] = str(exc)
                continue
            if pairs:
                report["strategy"] = name
                break
        if not pairs:
            raise DriverError(f"no green-context strategy built a level: {report['strategy_errors']}")
        full_pair = StreamPair(level="full", total_sms=total,
                               encode=Lane(name="full/encode", sms=total, stream=plain_stream(i)),
                               prefill=Lane(name="full/prefill", sms=total, stream=plain_stream(i)))
        pairs.sort(key=lambda p: p.encode.sms)
        lanes = LanePool(pairs=tuple(pairs), full=full_pair, granularity=g, backend="green-context")
        report["build_s"] = time.perf_counter() - t0
        return cls(lanes, driver=driver, handles=b.handles, report=report)

    def close(self) -> None:
        """Destroy the streams, then the green contexts (idempotent)."""
        handles, self._handles = self._handles, []
        for gctx, handle in reversed(handles):
            self._drv.cuStreamDestroy(handle)
            self._drv.cuGreenCtxDestroy(gctx)


class GreenContextBackend:
    """``live.partition.Backend`` over a :class:`LanePool`: a share becomes a stream.

    ``apply(role, share)`` makes the calling thread's current torch stream the
    lane :meth:`LanePool.lane_for` picks (torch's current stream is per
    thread). Without device streams (the CPU pool) it only records the choice.
    """

    name = "green-context"

    def __init__(self, lanes: LanePool, *, owner: GreenContextPool | None = None) -> None:
        self.lanes = lanes
        self.owner = owner  # keeps the driver objects behind the lanes alive
        self.last: dict[str, Lane] = {}

    def apply(self, role: str, share: float) -> None:
        lane = self.lanes.lane_for(role, share)
        self.last[role] = lane
        if lane.stream is not None:
            torch.cuda.set_stream(lane.stream)


def green_context_backend(total_threads: int = 0) -> GreenContextBackend:
    """Factory with ``live.partition.BACKENDS``' call shape; builds device 0's default pool.

    ``total_threads`` is ignored (it sizes the CPU backend). The pool lives as
    long as the backend holds its lanes; the process owns it until exit.
    """
    pool = GreenContextPool.build()
    return GreenContextBackend(pool.lanes, owner=pool)
