"""A stand-in for ``cuda.bindings.driver``: just enough of its green-context calls.

Calls return ``(CUresult, *outputs)`` tuples as the real bindings do. SM
resources are lists of SM ids, so the tests can check which SMs each green
context got. Knobs: ``refuse_remainder`` (GenerateDesc refuses a descriptor
holding the remainder) and ``fail_calls`` (names of calls that always fail).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 914


class CUdevResourceType(enum.IntEnum):
    CU_DEV_RESOURCE_TYPE_SM = 1


class CUgreenCtxCreate_flags(enum.IntEnum):
    CU_GREEN_CTX_DEFAULT_STREAM = 1


class CUstream_flags(enum.IntEnum):
    CU_STREAM_NON_BLOCKING = 1


@dataclass
class _Sm:
    ids: list[int]
    minSmPartitionSize: int = 8
    smCoscheduledAlignment: int = 8
    remainder: bool = False

    @property
    def smCount(self) -> int:
        return len(self.ids)


@dataclass
class _Resource:
    sm: _Sm


@dataclass
class FakeDriver:
    sm_count: int = 132
    refuse_remainder: bool = False
    fail_calls: set[str] = field(default_factory=set)
    contexts: list[list[int]] = field(default_factory=list)
    destroyed: list[str] = field(default_factory=list)
    CUresult = CUresult
    CUdevResourceType = CUdevResourceType
    CUgreenCtxCreate_flags = CUgreenCtxCreate_flags
    CUstream_flags = CUstream_flags

    def _fail(self, name: str) -> bool:
        return name in self.fail_calls

    def cuGetErrorName(self, err: CUresult) -> tuple[CUresult, bytes]:
        return CUresult.CUDA_SUCCESS, err.name.encode()

    def cuDeviceGet(self, i: int) -> tuple[CUresult, int]:
        return CUresult.CUDA_SUCCESS, i

    def cuDeviceGetDevResource(self, dev: int, kind: CUdevResourceType):
        return CUresult.CUDA_SUCCESS, _Resource(_Sm(list(range(self.sm_count))))

    def cuDevSmResourceSplitByCount(self, n: int, full: _Resource, flags: int, min_count: int):
        if self._fail("cuDevSmResourceSplitByCount"):
            return CUresult.CUDA_ERROR_INVALID_VALUE, [], 0, None
        ids = full.sm.ids
        nb = min(n, len(ids) // min_count)
        groups = [_Resource(_Sm(ids[i * min_count:(i + 1) * min_count])) for i in range(nb)]
        rem = _Resource(_Sm(ids[nb * min_count:], remainder=True))
        return CUresult.CUDA_SUCCESS, groups, nb, rem

    def cuDevResourceGenerateDesc(self, resources: list[_Resource], n: int):
        if self.refuse_remainder and any(r.sm.remainder for r in resources):
            return CUresult.CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, None
        return CUresult.CUDA_SUCCESS, [i for r in resources[:n] for i in r.sm.ids]

    def cuGreenCtxCreate(self, desc: list[int], dev: int, flags: int):
        if self._fail("cuGreenCtxCreate"):
            return CUresult.CUDA_ERROR_INVALID_VALUE, None
        self.contexts.append(list(desc))
        return CUresult.CUDA_SUCCESS, len(self.contexts) - 1

    def cuGreenCtxStreamCreate(self, gctx: int, flags: int, priority: int):
        return CUresult.CUDA_SUCCESS, 1000 + gctx

    def cuGreenCtxGetDevResource(self, gctx: int, kind: CUdevResourceType):
        return CUresult.CUDA_SUCCESS, _Resource(_Sm(self.contexts[gctx]))

    def cuStreamDestroy(self, handle: int):
        self.destroyed.append(f"stream{handle}")
        return (CUresult.CUDA_SUCCESS,)

    def cuGreenCtxDestroy(self, gctx: int):
        self.destroyed.append(f"ctx{gctx}")
        return (CUresult.CUDA_SUCCESS,)
