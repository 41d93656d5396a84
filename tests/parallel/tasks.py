"""Module-level tasks for the backend tests (a worker imports them by name)."""

from __future__ import annotations

import os
import time

import numpy as np


def draw(seed: int) -> list[float]:
    """A task's own random numbers: from its seed alone, never from the worker."""
    time.sleep(0.02 * (3 - seed % 4))  # earlier tasks finish later
    return np.random.default_rng(seed).random(3).tolist()


def fail_on_two(item: int) -> int:
    if item == 2:
        raise ValueError(f"bad item {item}")
    time.sleep(0.1)
    return item


def die_on_two(item: int) -> int:
    if item == 2:
        os._exit(3)  # as the OOM killer or a segfault would: no exception, no goodbye
    time.sleep(0.5)
    return item


def sleep_then(item: float) -> float:
    """Sleep ``item`` seconds; a negative item raises at once."""
    if item < 0:
        raise ValueError("fails at once")
    time.sleep(item)
    return item


def fail_on_two_at_once(item: int) -> int:
    """As :func:`fail_on_two`, with no sleep: the siblings finish as the error comes back."""
    if item == 2:
        raise ValueError(f"bad item {item}")
    return item
