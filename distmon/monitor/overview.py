"""The job at a glance: one state word, its pace, and how long until PyTorch gives up.

Pure logic on the monitor's state and the feed's clock, so the terminal UI's header and its
tests read the same numbers.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from distmon import wire
from distmon.monitor.monitor import Monitor
from distmon.monitor.rules.failures import failed_on_its_own
from distmon.monitor.state import RankState

WAITING = "waiting"
HEALTHY = "healthy"
STALLED = "stalled"
HUNG = "hung"
FAILED = "failed"
FINISHED = "finished"
STOPPED = "stopped"
"""Every rank ended by a signal or the launcher while a hang or stall stood: killed while hung."""

FAILURE_KINDS = frozenset({"rank_exception", "rank_lost", "worker_crash"})
HANG_KINDS = frozenset({"hang", "divergence", "stall"})
STALL_FLOOR = 5.0
"""No progress for this long (or five step times, if longer) is a stall."""
HUNG_AFTER = 60.0
"""A stall this long with a collective in flight is a hang, even before the detector says so."""
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


def collective_age(rank: RankState, since: float, now: float) -> float:
    """How long a collective has been in flight, on the rank's own clock (immune to skew
    between hosts) plus the time since its report arrived."""
    return rank.report.t - since + (now - rank.received)


class OverviewTracker:
    """Follows the job's progress from tick to tick (steps/s, the last progress), so that
    the numbers depend on the feed's clock only, not on how often the screen is redrawn."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()
        self._marker: tuple[int, int] | None = None
        self._last_progress: float | None = None

    def observe(self, monitor: Monitor, now: float) -> None:
        """Call once per tick."""
        ranks = monitor.state.ranks.values()
        if not ranks:
            return
        marker = (sum(r.report.steps for r in ranks), _completed(ranks))
        if marker != self._marker:
            self._marker = marker
            self._last_progress = now
        self._samples.append((now, max(r.report.steps for r in ranks)))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW:
            self._samples.popleft()

    def overview(self, monitor: Monitor, now: float) -> Overview:
        ranks = list(monitor.state.ranks.values())
        since = None if self._last_progress is None else max(0.0, now - self._last_progress)
        step_times = [r.report.step_time.p50 for r in ranks if r.report.step_time]
        stall_after = max(STALL_FLOOR, 5 * statistics.median(step_times) if step_times else 0.0)
        oldest = _oldest_collective(ranks, now)
        culprits = frozenset(r for a in monitor.alerts.active.values() for r in a.ranks)
        kinds = {a.kind for a in monitor.alerts.active.values()}
        return Overview(
            job=monitor.state.job,
            world=monitor.state.world,
            ranks=len(ranks),
            hosts=len({r.report.host for r in ranks}),
            state=_state(ranks, kinds, since, stall_after, oldest),
            steps=max((r.report.steps for r in ranks), default=0),
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


def _completed(ranks: Iterable[RankState]) -> int:
    return sum(g.completed for r in ranks for g in r.report.groups)


def _oldest_collective(ranks: list[RankState], now: float) -> Collective | None:
    oldest: Collective | None = None
    for r in ranks:
        if r.finished:
            continue
        for g in r.report.groups:
            if g.enqueued <= g.completed or g.since is None:
                continue
            age = collective_age(r, g.since, now)
            if oldest is None or age > oldest.age:
                remaining = None if g.timeout is None else g.timeout - age
                oldest = Collective(r.rank, g.desc or g.id, g.op, g.completed + 1, age, remaining)
    return oldest


def _state(
    ranks: list[RankState],
    kinds: set[str],
    since: float | None,
    stall_after: float,
    oldest: Collective | None,
) -> str:
    if not ranks:
        return WAITING
    if kinds & FAILURE_KINDS or any(failed_on_its_own(r) for r in ranks):
        return FAILED
    if all(r.finished for r in ranks):
        stopped = any(r.report.exit is not None and r.report.exit.how in wire.STOPPED for r in ranks)
        return STOPPED if stopped and kinds & HANG_KINDS else FINISHED
    if kinds & HANG_KINDS:
        return HUNG
    if since is not None and since >= stall_after:
        in_flight = oldest is not None and oldest.age >= HUNG_AFTER
        return HUNG if in_flight else STALLED
    return HEALTHY
