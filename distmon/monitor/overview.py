"""The job at a glance: one state word, its pace, and how long until PyTorch gives up.

Pure logic on the monitor's state and the feed's clock, so the terminal UI's header and its
tests read the same numbers.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from distmon import wire
from distmon.monitor.alerts import Alert
from distmon.monitor.arrays import distinct
from distmon.monitor.ending import STOP_KINDS, Ending
from distmon.monitor.monitor import Monitor
from distmon.monitor.state import JobState

WAITING = "waiting"
HEALTHY = "healthy"
STALLED = "stalled"
HUNG = "hung"
FAILED, STOPPED, FINISHED = Ending.FAILED, Ending.STOPPED, Ending.FINISHED
RATE_WINDOW = 10.0
"""Seconds of progress that steps/s is measured over."""


@dataclass(frozen=True)
class Collective:
    """The collective that has been in flight the longest, and when its timeout fires."""

    rank: int
    group: str
    op: str | None
    seq: int
    age: float
    remaining: float | None


@dataclass(frozen=True)
class Overview:
    job: str | None
    world: int
    ranks: int
    hosts: int
    state: str
    steps: int
    steps_per_second: float | None
    since_progress: float | None
    oldest: Collective | None
    """Set while a collective has been in flight for longer than a stall."""
    culprits: frozenset[int]
    dropped: str = ""
    """What the monitor refused, by reason (``3 no_key, 1 rank_out_of_range``); empty if nothing."""


class OverviewTracker:
    """Follows the job's progress from tick to tick (steps/s, the last progress), so that
    the numbers depend on the feed's clock only, not on how often the screen is redrawn."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()
        self._marker: tuple[int, int] | None = None
        self._last_progress: float | None = None

    def observe(self, monitor: Monitor, now: float) -> None:
        """Call once per tick."""
        job = monitor.state
        present = job.present()
        if not len(present):
            return
        c = job.cols
        rows = np.arange(c.g_comp.shape[1]) < c.groups[present, None]
        marker = (int(c.steps[present].sum()), int(c.g_comp[present][rows].sum()))
        if marker != self._marker:
            self._marker = marker
            self._last_progress = now
        self._samples.append((now, int(c.steps[present].max())))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW:
            self._samples.popleft()

    def overview(self, monitor: Monitor, now: float) -> Overview:
        job = monitor.state
        present = job.present()
        since = None if self._last_progress is None else max(0.0, now - self._last_progress)
        stall_after = monitor.limits.progress_after(job.pace())
        oldest = _oldest_collective(job, now)
        active = list(monitor.alerts.active.values())
        culprits = frozenset(r for a in active for r in a.ranks)
        return Overview(
            job=monitor.state.job,
            world=monitor.state.world,
            ranks=len(present),
            hosts=len(distinct(job.cols.host[present])),
            state=_state(monitor, active, since, stall_after, oldest),
            steps=int(job.cols.steps[present].max(initial=0)),
            steps_per_second=self._rate(),
            since_progress=since,
            oldest=oldest if oldest is not None and oldest.age >= stall_after else None,
            culprits=culprits,
            dropped=", ".join(f"{n} {why}" for why, n in sorted(monitor.state.dropped.items())),
        )

    def _rate(self) -> float | None:
        if not self._samples:
            return None
        (t0, s0), (t1, s1) = self._samples[0], self._samples[-1]
        if t1 - t0 < 1.0:
            return None
        return max(0.0, (s1 - s0) / (t1 - t0))


def _oldest_collective(job: JobState, now: float) -> Collective | None:
    """The collective in flight longest on a rank still running, read off the columns; its
    group's words from that rank's report."""
    ages = np.where(job.flagged(wire.EXITED), np.nan, job.collective_age(now))
    if np.isnan(ages).all():
        return None
    rank = int(np.nanargmax(ages))
    age, gid = float(ages[rank]), int(job.cols.g_id[rank, job.cols.collective_slot[rank]])
    g = next((g for g in job.report_of(int(rank)).groups if wire.name_hash(g.id) == gid), None)
    if g is None:
        return None
    remaining = None if g.timeout is None else g.timeout - age
    return Collective(int(rank), g.desc or g.id, g.op, g.completed + 1, age, remaining)


def _state(
    monitor: Monitor, active: list[Alert], since: float | None, stall_after: float, oldest: Collective | None
) -> str:
    """The job's one state word: how it ended (:meth:`JobState.ending`) or, while it runs,
    whether it progresses."""
    if not monitor.state.ranks:
        return WAITING
    ending = monitor.state.ending(active)
    if ending is not None:
        return ending.state
    if {a.kind for a in active} & STOP_KINDS:
        return HUNG
    if since is not None and since >= stall_after:
        return HUNG if oldest is not None and oldest.age >= monitor.limits.hung_after else STALLED
    return HEALTHY
