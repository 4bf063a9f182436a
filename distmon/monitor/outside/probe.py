"""A rank's process seen from the monitor's host: whether it still exists, what it is doing
(:mod:`distmon.monitor.outside.proc` reads /proc, :mod:`distmon.monitor.outside.verdicts`
judges it), and its stack from outside when its own threads cannot report it.

Reading /proc and running py-spy are I/O: both happen on threads of their own, and the
monitor's thread only reads what they found (a replay has neither and judges without)."""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from dataclasses import dataclass

import psutil

from distmon.monitor.outside.proc import Sample, look
from distmon.pyspy import OutsideStack, StackTaker

ALIVE = "alive"
GONE = "gone"
PERIOD = 1.0
"""Seconds between two looks at a process asked about now and then."""
CLOSE_PERIOD = 0.25
"""Seconds between two looks at a process a rule asked about in the last :data:`CLOSE_FOR`
seconds (a rank the others wait for): what it does over a second is then told by four
looks that must agree, not by one that may catch an instant."""
CLOSE_FOR = 2.0
WINDOW = 40
"""Looks kept per process: progress is judged over the last ten seconds or so."""
FORGET = 30.0
"""A process not asked about for this long is no longer looked at."""
SPAN = 1.0
"""Seconds of looks that tell what a process does now (:attr:`Seen.recent`)."""


@dataclass(frozen=True)
class Seen:
    """What the prober saw of a process: the oldest look kept and the latest (None once it
    is gone)."""

    first: Sample | None
    """None for a process already gone at the first look."""
    last: Sample | None
    recent: Sample | None = None
    """The newest look at least :data:`SPAN` before ``last``: what it did over the last second
    or so, whatever it did before."""
    looks: tuple[Sample, ...] = ()
    """Every look kept, oldest first, ``last`` included while the process lives."""

    def within(self, seconds: float) -> tuple[Sample, ...]:
        """The looks of the last ``seconds`` (by the prober's clock, up to ``last``)."""
        kept = self.looks or tuple(s for s in (self.first, self.recent, self.last) if s is not None)
        if self.last is None:
            return ()
        return tuple(s for s in kept if self.last.t - s.t <= seconds)


class ProcessProbe:
    """Answers for processes on this host; None (unknown) for any other host.

    Called, it says whether a process is alive or gone. :meth:`view` returns the looks a
    thread of its own takes every :data:`PERIOD` (every :data:`CLOSE_PERIOD` while it is asked
    about often) at each process asked about in the last :data:`FORGET` seconds: the first call
    for a process starts looking and returns None.
    """

    def __init__(self, host: str | None = None, period: float = PERIOD) -> None:
        self.host = host or socket.gethostname()
        self._period = period
        self._looks: dict[int, deque[Sample | None]] = {}
        self._asked: dict[int, float] = {}
        self._due: dict[int, float] = {}
        """When each process is due its next look (monotonic)."""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

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

    def view(self, host: str, pid: int) -> Seen | None:
        """The looks at ``pid`` so far; None for another host, or before the first look."""
        if host != self.host:
            return None
        with self._lock:
            self._asked[pid] = time.monotonic()
            self._due.setdefault(pid, 0.0)
            looks = self._looks.get(pid)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="distmon-probe", daemon=True)
                self._thread.start()
        if not looks:
            self._wake.set()
            return None
        last = looks[-1]
        recent = next((s for s in reversed(looks) if s is not None and last is not None and last.t - s.t >= SPAN), None)
        alive = tuple(s for s in looks if s is not None)
        return Seen(alive[0] if alive else None, last, recent, alive)

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            with self._lock:
                for pid in [p for p, t in self._asked.items() if now - t > FORGET]:
                    del self._asked[pid]
                    self._looks.pop(pid, None)
                    self._due.pop(pid, None)
                due = [pid for pid in self._asked if self._due.get(pid, 0.0) <= now]
                soonest = min((self._due.get(pid, 0.0) for pid in self._asked), default=now + self._period)
            if not due:
                self._wake.wait(min(max(0.0, soonest - now), self._period))
                self._wake.clear()
                continue
            for pid in due:
                sample = look(pid, time.monotonic())
                with self._lock:
                    looks = self._looks.setdefault(pid, deque(maxlen=WINDOW))
                    close = time.monotonic() - self._asked.get(pid, 0.0) < CLOSE_FOR
                    self._due[pid] = time.monotonic() + (min(CLOSE_PERIOD, self._period) if close else self._period)
                    if looks and looks[-1] is None:
                        continue  # gone stays gone (a pid reused is another process)
                    looks.append(sample)


class OutsideStacks:
    """Stacks of this host's ranks taken with py-spy, once per stall, off the monitor's thread.

    A stopped process cannot be suspended by py-spy, so its Python frames are read without
    suspending it (``--nonblocking``), and the answer says why its native frames are missing.
    """

    def __init__(self, host: str | None = None, probe: ProcessProbe | None = None) -> None:
        self.host = host or socket.gethostname()
        self._probe = probe
        self._taker = StackTaker()

    def __call__(self, host: str, pid: int, since: float, take: bool = True) -> OutsideStack | None:
        if host != self.host:
            return OutsideStack(
                error=f"the rank runs on {host}, the monitor on {self.host}: run "
                f"`py-spy dump --native --pid {pid}` on {host}, or the monitor there"
            )
        seen = self._probe.view(host, pid) if self._probe is not None else None
        if take and self._probe is not None and seen is None:
            return None  # the first look at the process tells how to take its stack
        stopped = seen is not None and seen.last is not None and seen.last.state in "Tt"
        return self._taker.request(pid, since, take, stopped=stopped)
