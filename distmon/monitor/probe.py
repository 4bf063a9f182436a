"""Whether a rank's process still exists, where the monitor can tell (the same host)."""

from __future__ import annotations

import socket

import psutil

ALIVE = "alive"
GONE = "gone"


class ProcessProbe:
    """Answers for processes on this host; None (unknown) for any other host."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or socket.gethostname()

    def __call__(self, host: str, pid: int) -> str | None:
        if host != self.host:
            return None
        try:
            status = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            return GONE
        except psutil.Error:
            return None
        return GONE if status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) else ALIVE
