"""How much of its time the rank waits for its peers: whether a collective is in flight,
sampled at random moments on a thread of its own.

In a synchronous job every rank steps at the slowest one's pace, so step times tell nobody
apart; who waits for whom does. A rank slower than its peers waits least in the collectives,
its peers most. Once a second is too seldom to tell a 10% straggler from chance within half
a minute, so this thread looks about :data:`~distmon.wire.PACE_SAMPLES` times a second, at
moments drawn at random (a Poisson process sees the time averages, whatever the job's rhythm),
and reads only the Flight Recorders' status (a few microseconds: :meth:`GroupReader.waiting
<distmon.hooks.collectives.GroupReader.waiting>`).

A sample counts for the step it fell in, once that step has ended within
:data:`~distmon.wire.PAUSE_STEPS` of the rank's median step: a pause (this rank's upload, or
its wait for another's checkpoint) is no step of the job's pace, and the monitor's routine
and hang rules judge it. The counts go out with every report (:class:`~distmon.wire.Pace`).

Each look takes the GIL from a training thread that may hold it, so the thread looks only
while a look can count: not before the median step is known, nor without a group, nor once
the step under way has outlasted a step of the job's pace (a pause, a hang). It then naps for
:data:`NAP`, and the step it wakes in, seen only in part, counts for nothing.
"""

from __future__ import annotations

import bisect
import contextlib
import random
import threading
import time
from collections.abc import Callable

from distmon.hooks.progress import Counters
from distmon.wire import PACE_SAMPLES, PAUSE_STEPS, Pace

MIN_STEPS = 8
"""Steps the rank's median step time must come from before a sample counts: the first steps
(compiling, warming up) are no measure of the job's pace."""

NAP = 0.25
"""Seconds the thread sleeps once a look could not count, instead of looking about
:data:`~distmon.wire.PACE_SAMPLES` times a second for nothing."""


class PaceSampler:
    """Samples the rank's waits on a daemon thread (``distmon-pace``) once started. The
    counts are written by this thread only; the agent reads them with each report."""

    def __init__(self, progress: Counters, waiting: Callable[[], bool | None]) -> None:
        self._progress = progress
        self._waiting = waiting
        self.median: float | None = None
        """The rank's median step time over :data:`MIN_STEPS` steps or more, as the agent last
        measured it; None until then (no sample counts)."""
        self.samples = 0
        self.waited = 0
        self._step: float | None = None
        """When the step the pending samples fell in began (the previous step's end, monotonic)."""
        self._pending = (0, 0)
        self._partial = False
        """The step the pending samples fall in began while the thread napped: seen in part."""
        self._stopping = False
        self._rng = random.Random()
        self._thread = threading.Thread(target=self._run, name="distmon-pace", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (within a sample's time: the thread sleeps, it waits on nothing)."""
        self._stopping = True

    @property
    def pace(self) -> Pace:
        return Pace(samples=self.samples, waiting=self.waited)

    def _run(self) -> None:
        while not self._stopping:
            time.sleep(self._rng.expovariate(PACE_SAMPLES))  # cheaper to wake from than an event's wait
            with contextlib.suppress(Exception):  # a sample missed; training goes on
                if not self.sample(self._began(), time.monotonic()):
                    time.sleep(NAP)
                    self.napped(self._began())

    def _began(self) -> float | None:
        ends = self._progress.step_ends
        return ends[-1] if ends else None

    def sample(self, began: float | None, now: float) -> bool:
        """One look at ``now``, the training's latest step having begun at ``began`` (both
        monotonic; ``began`` None before its first step). False when no look could count."""
        median = self.median
        if began != self._step:
            self._settle(began, median)
        if began is None or median is None or now - began > PAUSE_STEPS * median:
            return False
        waiting = self._waiting()
        if waiting is None:
            return False
        n, k = self._pending
        self._pending = (n + 1, k + waiting)
        return True

    def napped(self, began: float | None) -> None:
        """The thread woke from a nap in the step begun at ``began``: the samples it takes in
        that step would show only a part of it (its end, say, where a step's collectives wait)."""
        if began != self._step:
            self._settle(began, self.median)
        self._partial = True

    def _settle(self, began: float | None, median: float | None) -> None:
        """The step the pending samples fell in has ended: they count if it was no pause and
        was seen whole."""
        n, k = self._pending
        if n and self._step is not None and median is not None and not self._partial:
            ends = list(self._progress.step_ends)
            i = bisect.bisect_right(ends, self._step)
            known = 0 < i < len(ends)  # else the step fell out of the rank's history: unknown
            if known and ends[i] - self._step <= PAUSE_STEPS * median:
                self.samples += n
                self.waited += k
        self._step, self._pending, self._partial = began, (0, 0), False
