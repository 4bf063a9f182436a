"""What the monitor knows about a job: each rank's latest report and a short history.

Memory is bounded by design: one report per rank plus a fixed ring of numbers, so a
4096-rank job costs the same after an hour as after a minute; and only reports that fit
the job are admitted (:mod:`distmon.monitor.admission`), so no sender can add ranks.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field

from distmon.monitor.admission import MAX_RETAINED_BYTES, OVER_BUDGET, refusal
from distmon.wire import Report, WireError, decode

HISTORY = 120
"""Samples kept per rank and metric: two minutes at the default interval."""

SHARE_SMOOTHING = 0.15
"""Weight of the newest report in the running shares: about the last dozen reports count."""

METRICS = ("t", "steps", "step_time", "rss", "gpu", "inflight", "data_wait")
"""Per-rank time series. ``inflight`` is 1.0 when the rank sat in a collective when it
sampled itself; averaged over the ring it is the share of time spent waiting on peers."""


class History:
    """Fixed-size rings of floats, one per metric, NaN where a value was absent."""

    __slots__ = ("_next", "_rings", "count")

    def __init__(self, size: int = HISTORY) -> None:
        self._rings = {m: array("d", [math.nan]) * size for m in METRICS}
        self._next = 0
        self.count = 0

    def append(self, **values: float | None) -> None:
        i = self._next
        for metric, ring in self._rings.items():
            value = values.get(metric)
            ring[i] = math.nan if value is None else value
        self._next = (i + 1) % len(self._rings["t"])
        self.count += 1

    def latest(self, metric: str, ago: int = 0) -> float:
        """The value ``ago`` samples before the newest; NaN if there is none."""
        size = len(self._rings["t"])
        if ago >= min(self.count, size):
            return math.nan
        return self._rings[metric][(self._next - 1 - ago) % size]

    def series(self, metric: str, last: int | None = None) -> list[float]:
        """Oldest first; at most ``last`` samples."""
        ring = self._rings[metric]
        size = len(ring)
        n = min(self.count, size, last or size)
        start = (self._next - n) % size
        return [ring[(start + k) % size] for k in range(n)]


@dataclass
class RankState:
    report: Report
    received: float
    """Monitor clock when the latest report arrived."""
    first_seen: float
    history: History = field(default_factory=History)
    inflight_share: float = 0.0
    """Running share of reports sampled inside a collective, while the job progresses: low
    for the rank the others wait for."""
    data_wait_share: float = 0.0
    samples: int = 0
    size: int = 0
    """Bytes of the latest report as received."""

    @property
    def rank(self) -> int:
        return self.report.rank

    @property
    def finished(self) -> bool:
        return self.report.exit is not None

    def silent_for(self, now: float) -> float:
        return now - self.received


def _gpu_bytes(report: Report) -> float | None:
    gpu = report.gpu
    if gpu is None:
        return None
    value = gpu.allocated if gpu.allocated is not None else gpu.used
    return None if value is None else float(value)


@dataclass
class JobState:
    """The ranks of the one job this monitor follows.

    The first job to report is followed; a report from another job is counted and
    dropped, unless the followed job has ended, in which case the new one replaces it
    (the same monitor across a relaunch). Its first admitted report fixes the job's world
    size until it ends; ``dropped`` counts refusals by reason.
    """

    job: str | None = None
    pinned: bool = False
    ranks: dict[int, RankState] = field(default_factory=dict)
    dropped: Counter[str] = field(default_factory=Counter)
    received: int = 0
    last_message: float | None = None
    job_world: int | None = None
    retained: int = 0
    """Bytes of the ranks' latest reports, as received."""

    def ingest(self, raw: bytes, now: float) -> Report | None:
        """Decode and apply one message; a bad one is counted by reason, never raised."""
        try:
            report = decode(raw)
        except WireError as e:
            self.dropped[e.reason] += 1
            return None
        if not self.apply(report, now, size=len(raw)):
            return None
        return report

    def apply(self, report: Report, now: float, size: int = 0) -> bool:
        """Admit ``report`` (``size`` bytes as received) into the state, or count why not."""
        new_job = report.job != self.job
        if new_job and self.job is not None and (self.pinned or not self.ended(now)):
            self.dropped["other_job"] += 1
            return False
        if report.world != self.job_world and self.job_world is not None and self.ended(now):
            new_job = True  # the same job id relaunched at another size, after the last run ended
        state = None if new_job else self.ranks.get(report.rank)
        reason = refusal(
            report,
            None if new_job else self.job_world,
            None if state is None else state.report,
            0.0 if state is None else now - state.received,
        )
        retained = (0 if new_job else self.retained) - (0 if state is None else state.size) + size
        if reason is None and retained > MAX_RETAINED_BYTES:
            reason = OVER_BUDGET
        if reason is not None:
            self.dropped[reason] += 1
            return False
        if new_job:
            self.ranks.clear()
            self.job = report.job
        if new_job or self.job_world is None:
            self.job_world = report.world
        self.retained = retained
        self.received += 1
        self.last_message = now
        if state is None or state.report.pid != report.pid or state.report.host != report.host:
            state = RankState(report=report, received=now, first_seen=now)
            self.ranks[report.rank] = state
        state.report = report
        state.received = now
        state.size = size
        inflight = float(any(g.enqueued > g.completed for g in report.groups))
        data_wait = report.data_wait or 0.0
        if report.stalled_since is None:  # a stall is the hang rule's business, not pace
            a = SHARE_SMOOTHING if state.samples else 1.0
            state.inflight_share += a * (inflight - state.inflight_share)
            state.data_wait_share += a * (data_wait - state.data_wait_share)
            state.samples += 1
        state.history.append(
            t=report.t,
            steps=float(report.steps),
            step_time=report.step_time.p50 if report.step_time else None,
            rss=float(report.memory.rss) if report.memory else None,
            gpu=_gpu_bytes(report),
            inflight=inflight,
            data_wait=report.data_wait,
        )
        return True

    @property
    def world(self) -> int:
        return self.job_world or 0

    @property
    def hosts(self) -> list[str]:
        return sorted({s.report.host for s in self.ranks.values()})

    def ended(self, now: float, quiet: float = 60.0) -> bool:
        """Every rank has exited, or nothing was heard for ``quiet`` seconds."""
        if not self.ranks:
            return True
        if all(s.finished for s in self.ranks.values()):
            return True
        return self.last_message is not None and now - self.last_message > quiet
