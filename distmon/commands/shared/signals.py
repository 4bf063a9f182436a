"""Stopping a long-running command (``record``, ``relay``) cleanly on SIGINT or SIGTERM."""

from __future__ import annotations

import signal
from types import FrameType


def stop_on_signals() -> list[int]:
    """A list that becomes truthy when SIGINT or SIGTERM arrives."""
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return received
