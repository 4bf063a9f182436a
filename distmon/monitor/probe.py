"""A rank's process seen from the monitor's host: whether it still exists, and its stack
from outside when its own threads cannot report it."""

from __future__ import annotations

import socket

import psutil

from distmon.pyspy import OutsideStack, StackTaker

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


class OutsideStacks:
    """Stacks of this host's ranks taken with py-spy, once per stall, off the monitor's thread."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or socket.gethostname()
        self._taker = StackTaker()

    def __call__(self, host: str, pid: int, since: float, take: bool = True) -> OutsideStack | None:
        if host != self.host:
            return OutsideStack(
                error=f"the rank runs on {host}, the monitor on {self.host}: run "
                f"`py-spy dump --native --pid {pid}` on {host}, or the monitor there"
            )
        return self._taker.request(pid, since, take)
