"""Waiting for a condition, not for a time: a loaded machine is slow, never wrong."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, every: float = 0.05) -> T:
    """Poll ``condition`` until it returns something true, and return that; fail the test
    saying ``what`` was awaited once ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {timeout:g}s for {what}")
        time.sleep(every)
