"""Routers: send each encoded request to local or remote Prefill.

:class:`DeficitRouter` is EAServe's deficit counter. It keeps the number of
remote decisions as close as possible to ``s * n`` after every decision: it
routes remote exactly when that brings the count nearer the target, so after
n decisions ``|remote - s * n| <= 1/2`` (the contract asks for < 1). Unlike
:class:`RandomRouter` it never sends a run of requests down one path by chance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Protocol

import numpy as np

from easerve_core import checks


class Route(StrEnum):
    LOCAL = "local"
    REMOTE = "remote"


class Router(Protocol):
    remote_fraction: float

    def route(self) -> Route: ...


class DeficitRouter:
    """Deterministic router holding the remote share at ``remote_fraction``.

    Args:
        remote_fraction: s, the fraction of requests sent to remote Prefill.
    """

    __slots__ = ("_num_decisions", "_num_remote", "remote_fraction")

    def __init__(self, remote_fraction: float) -> None:
        self.remote_fraction = checks.fraction("remote_fraction", remote_fraction)
        self._num_decisions = 0
        self._num_remote = 0

    @property
    def num_remote(self) -> int:
        return self._num_remote

    def deficit(self) -> float:
        """Remote decisions owed: ``s * n - remote`` (in [-1/2, 1/2])."""
        return self.remote_fraction * self._num_decisions - self._num_remote

    def route(self) -> Route:
        self._num_decisions += 1
        # Integer counts, one float product: no drift however long the stream.
        owed = self.remote_fraction * self._num_decisions - self._num_remote
        if owed >= 0.5:
            self._num_remote += 1
            return Route.REMOTE
        return Route.LOCAL


class RandomRouter:
    """Baseline: each request goes remote with probability ``remote_fraction``.

    Args:
        remote_fraction: s in [0, 1].
        rng: the injected random generator.
    """

    __slots__ = ("_rng", "remote_fraction")

    def __init__(self, remote_fraction: float, rng: np.random.Generator) -> None:
        self.remote_fraction = checks.fraction("remote_fraction", remote_fraction)
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self._rng = rng

    def route(self) -> Route:
        return Route.REMOTE if self._rng.random() < self.remote_fraction else Route.LOCAL


#: builds a router from (remote_fraction, generator); a deterministic router ignores the generator
RouterBuilder = Callable[[float, np.random.Generator], Router]


def _deficit(remote_fraction: float, rng: np.random.Generator) -> Router:
    return DeficitRouter(remote_fraction)


#: router name (``Deployment.router``) -> builder: the one table of routers
ROUTERS: Mapping[str, RouterBuilder] = {"deficit": _deficit, "random": RandomRouter}
