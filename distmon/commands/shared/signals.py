"""Stopping a long-running command (``record``, ``relay``) cleanly on SIGINT, SIGTERM or SIGHUP."""

from __future__ import annotations

import signal
from types import FrameType

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a batch system or a launcher ending the command, and its terminal closing (an ssh
session dropped, a tmux window killed): each stops it as cleanly as the others. SIGHUP's
default would kill it where it stands, its recording cut at the last flush."""


def stop_on_signals() -> list[int]:
    """A list that becomes truthy when one of :data:`STOPPING` arrives."""
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    for sig in STOPPING:
        signal.signal(sig, handler)
    return received
