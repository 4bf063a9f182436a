"""What the monitor knows about a job: each rank's latest report and a short history, and
the facts read off them, each defined once here (a rank's GPU memory, whether it is silent,
how long ago a moment on its clock was, whether it failed on its own; how the job ended).
The rules, the terminal UI, the reports and the exporters only format these.

Memory is bounded by design: one report per rank plus a fixed ring of numbers, so a
4096-rank job costs the same after an hour as after a minute; and only reports that fit
the job are admitted (:mod:`distmon.monitor.admission`), so no sender can add ranks.
"""

from __future__ import annotations

import math
import re
import statistics
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from distmon.monitor.admission import MAX_RETAINED_BYTES, OVER_BUDGET, refusal
from distmon.monitor.alerts import CRITICAL, Alert
from distmon.monitor.limits import LIMITS, Thresholds
from distmon.monitor.words import rank_word
from distmon.wire import ENDED, INTERRUPTED, STOPPED, TERMINATED, Report, WireError, decode

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

    def silent(self, now: float, limits: Thresholds = LIMITS) -> bool:
        """Not heard from for longer than its reports allow (and not because it exited)."""
        return not self.finished and self.silent_for(now) >= limits.silent_after(self.report.interval)

    def live(self, now: float, limits: Thresholds = LIMITS) -> bool:
        """Still reporting: neither exited nor silent."""
        return not self.finished and not self.silent(now, limits)

    def age(self, t: float, now: float) -> float:
        """How long before ``now`` (the monitor's clock) the moment ``t`` of the rank's own
        clock was: measured on the rank's clock, so skew between hosts does not enter."""
        return self.report.t - t + (now - self.received)

    def stalled_for(self, now: float) -> float | None:
        """How long the rank has made no progress, by its own account; None while it does."""
        since = self.report.stalled_since
        return None if since is None else self.age(since, now)

    def gpu_used(self) -> float | None:
        """Memory in use on the rank's GPU, as nvidia-smi counts it (NVML), else what torch's
        caching allocator holds; the measure to hold against :meth:`gpu_total`."""
        gpu = self.report.gpu
        if gpu is None:
            return None
        value = gpu.used if gpu.used is not None else gpu.reserved
        return None if value is None else float(value)

    def gpu_total(self) -> float | None:
        gpu = self.report.gpu
        return None if gpu is None or not gpu.total else float(gpu.total)

    def gpu_allocated(self) -> float | None:
        return gpu_allocated(self.report)

    def rss(self) -> float | None:
        memory = self.report.memory
        return None if memory is None else float(memory.rss)

    def stopped(self) -> bool:
        """Ended by a signal or distmon rather than on its own (see :data:`distmon.wire.STOPPED`)."""
        return self.report.exit is not None and self.report.exit.how in STOPPED

    def torn_down(self) -> bool:
        """Terminated by SIGTERM: what torchrun does to every survivor once a rank has failed."""
        return self.report.exit is not None and self.report.exit.how == TERMINATED

    def lost_a_peer(self) -> bool:
        """It raised because a peer went away: a consequence of another rank's failure."""
        exc = self.report.exception
        return exc is not None and bool(PEER_LOST.search(exc.message))

    def lost_a_worker(self) -> bool:
        """It raised because one of its DataLoader workers died."""
        exc = self.report.exception
        return exc is not None and bool(WORKER_DIED.search(exc.message))

    def failed_on_its_own(self) -> bool:
        """Raised, and not only because the job was being stopped around it: a rank stopped by
        a signal whose DataLoader workers died in the same teardown, or whose peers went, did
        not fail."""
        if self.report.exception is None:
            return False
        return not (self.stopped() and (self.lost_a_peer() or self.lost_a_worker()))


def gpu_allocated(report: Report) -> float | None:
    """Memory held by live tensors (torch's allocator, else NVML's count): what grows when a
    rank leaks. A function of one report, for readers of a recording's reports too."""
    gpu = report.gpu
    if gpu is None:
        return None
    value = gpu.allocated if gpu.allocated is not None else gpu.used
    return None if value is None else float(value)


PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|Connection refused"
    r"|Watchdog caught collective operation timeout|communicator was aborted"
    r"|remote process exited|DistNetworkError|Socket Timeout|timed out|Timed out",
    re.IGNORECASE,
)
"""What a rank raises when another one died first."""
WORKER_DIED = re.compile(r"DataLoader worker \(pid", re.IGNORECASE)
FAILURE_KINDS = frozenset({"rank_exception", "rank_lost", "worker_crash"})
STOP_KINDS = frozenset({"hang", "divergence", "stall"})
_HOW = {TERMINATED: "terminated by SIGTERM", INTERRUPTED: "interrupted (SIGINT)", ENDED: "ended by distmon"}


@dataclass(frozen=True)
class Ending:
    """How a job ended, or is ending: ``state`` is one of the three below."""

    state: str
    words: str

    FAILED: ClassVar[str] = "failed"
    STOPPED: ClassVar[str] = "stopped"
    """Ended by signals (the launcher's teardown, Ctrl-C, distmon), not on its own."""
    FINISHED: ClassVar[str] = "finished"


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
            rss=state.rss(),
            gpu=state.gpu_allocated(),
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

    def being_stopped(self) -> bool:
        """Some rank was stopped by a signal: the job is being taken down (killed while hung, or
        torn down after a failure), so its ranks leaving does not resolve what stood."""
        return any(s.stopped() for s in self.ranks.values())

    def pace(self) -> float | None:
        """The job's median step time; None before any rank has stepped."""
        times = [s.report.step_time.p50 for s in self.ranks.values() if s.report.step_time]
        return statistics.median(times) if times else None

    def ending(self, standing: Iterable[Alert]) -> Ending | None:
        """How the job ended, given the alerts that stand (not resolved): a rank that failed
        on its own, or a failure alert, fail it (even while other ranks still run); once every
        rank has exited, it was stopped (by a signal, while hung if a stop alert stood) or it
        finished. None while it runs."""
        ranks = sorted(self.ranks.values(), key=lambda s: s.rank)
        standing = list(standing)
        raised = [s.rank for s in ranks if s.failed_on_its_own()]
        if raised:
            return Ending(Ending.FAILED, f"failed: {rank_word(raised)} raised an exception")
        failures = sorted((a for a in standing if a.kind in FAILURE_KINDS), key=lambda a: a.t)
        if failures:
            return Ending(Ending.FAILED, f"failed: {failures[0].headline}")
        if not ranks or not all(s.finished for s in ranks):
            return None
        stopped = [s for s in ranks if s.stopped()]
        if not stopped:
            return Ending(Ending.FINISHED, "finished: every rank exited cleanly")
        how = " and ".join(sorted({_HOW[s.report.exit.how] for s in stopped if s.report.exit}))
        who = f"{rank_word(s.rank for s in stopped)} {how}"
        stops = sorted({a.kind for a in standing if a.kind in STOP_KINDS and a.severity == CRITICAL})
        if stops:
            kinds = ", ".join(stops)
            words = f"stopped while hung: {who} while the {kinds} alert stood; it ended with the job, unresolved"
            return Ending(Ending.STOPPED, words)
        return Ending(Ending.STOPPED, f"stopped: {who}")

    def ended(self, now: float, quiet: float = 60.0) -> bool:
        """Every rank has exited, or nothing was heard for ``quiet`` seconds."""
        if not self.ranks:
            return True
        if all(s.finished for s in self.ranks.values()):
            return True
        return self.last_message is not None and now - self.last_message > quiet
