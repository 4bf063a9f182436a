"""One rank as the monitor knows it: :class:`RankState`, a view of the job's columns at one
rank with its latest report, and :class:`Ranks`, the ranks heard from as such views. A view
reads its own row of the facts (:mod:`distmon.monitor.state.facts`), by the thresholds its
job holds, so a rank and the job never disagree; of its job it reads only :class:`JobRows`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar, overload

import numpy as np

from distmon import wire
from distmon.monitor.state import facts
from distmon.monitor.state.columns import I8, Columns, History, gpu_held
from distmon.monitor.state.consequences import LOST_PEER, LOST_WORKER
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.pace import Holdups, RankPace
from distmon.monitor.state.statuses import STATUSES
from distmon.wire import TERMINATED, Report

T = TypeVar("T")


class JobRows(Protocol):
    """What a rank's view reads of its job (:class:`~distmon.monitor.state.job.JobState`):
    the columns, the thresholds the monitor runs with, the reports and the hosts' names."""

    @property
    def cols(self) -> Columns: ...
    @property
    def limits(self) -> Thresholds: ...
    @property
    def reporting(self) -> int: ...
    def present(self) -> I8: ...
    def report_of(self, rank: int) -> Report: ...
    def host_name(self, host: int) -> str: ...
    def holdups(self) -> Holdups: ...


class _Column(Generic[T]):
    """A :class:`RankState` attribute that is one column's value at the rank, as ``kind``."""

    __slots__ = ("column", "kind")

    def __init__(self, column: str, kind: Callable[[Any], T]) -> None:
        self.column, self.kind = column, kind

    @overload
    def __get__(self, rank: None, owner: type[RankState]) -> _Column[T]: ...

    @overload
    def __get__(self, rank: RankState, owner: type[RankState]) -> T: ...

    def __get__(self, rank: RankState | None, owner: type[RankState]) -> T | _Column[T]:
        return self if rank is None else self.kind(rank._get(self.column))


class RankState:
    """One rank, as the monitor knows it: a view of the columns, and its latest report."""

    __slots__ = ("_job", "rank")

    def __init__(self, job: JobRows, rank: int) -> None:
        self._job, self.rank = job, rank

    def __repr__(self) -> str:
        return f"RankState(rank={self.rank})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RankState) and other._job is self._job and other.rank == self.rank

    def __hash__(self) -> int:
        return hash((id(self._job), self.rank))

    def _get(self, column: str) -> Any:
        return getattr(self._job.cols, column)[self.rank]

    @property
    def _mine(self) -> slice:
        """This rank, as an index into the columns that a fact over ranks takes."""
        return slice(self.rank, self.rank + 1)

    @property
    def report(self) -> Report:
        """The whole latest report, decoded when first asked for."""
        return self._job.report_of(self.rank)

    received = _Column("received", float)
    """Monitor clock when the latest report arrived."""
    first_seen = _Column("first_seen", float)
    data_wait_share = _Column("data_wait_share", float)
    interval = _Column("interval", float)
    """Seconds between its reports, as it reports them."""
    size = _Column("bytes", int)
    """Bytes of the latest report as received."""
    steps = _Column("steps", int)

    @property
    def history(self) -> History:
        return History(self._job.cols, self.rank)

    @property
    def host(self) -> str:
        return self._job.host_name(int(self._get("host")))

    @property
    def finished(self) -> bool:
        return bool(self._get("flags") & wire.FLAG_EXITED)

    def pace(self) -> RankPace | None:
        """Its share of time waiting in collectives, and of its peers' that it holds them up
        where that is sure beyond chance (the thresholds' ``straggler_still``); None before its
        pace is known (:class:`~distmon.monitor.state.pace.Holdups`)."""
        return self._job.holdups().of(self.rank, self._job.limits.straggler_still)

    def silent_for(self, now: float) -> float:
        return now - self.received

    def silent(self, now: float) -> bool:
        """Not heard from for longer than its reports allow (and not because it exited): its
        row of :func:`distmon.monitor.state.facts.silent`."""
        return bool(facts.silent(self._job.cols, self._job.limits, now, self._mine)[0])

    def live(self, now: float) -> bool:
        """Still reporting: neither exited nor silent."""
        return not self.finished and not self.silent(now)

    def status(self, now: float) -> str:
        """The word its flags give (:func:`distmon.monitor.state.facts.severities`)."""
        return STATUSES[int(facts.severities(self._job.cols, self._job.limits, now, np.array([self.rank]))[0])]

    def age(self, t: float, now: float) -> float:
        """How long before ``now`` (the monitor's clock) the moment ``t`` of the rank's own
        clock was: measured on the rank's clock, so skew between hosts does not enter."""
        return float(self._get("t")) - t + (now - self.received)

    def taken(self) -> float:
        """When its latest report was taken, on the monitor's clock: its own time and the least
        delay its reports have had on the way, so that a report held up in a queue is as old as
        it is, not as its arrival."""
        return float(self._get("t")) + float(self._get("least_delay"))

    def stalled_for(self, now: float) -> float | None:
        """How long the rank has made no progress, by its own account; None while it does."""
        since = float(self._get("stalled_since"))
        return None if np.isnan(since) else self.age(since, now)

    def gpu_used(self) -> float | None:
        """Memory in use on the rank's GPU, as nvidia-smi counts it (NVML), else what torch's
        caching allocator holds; the measure to hold against :meth:`gpu_total`."""
        return present(facts.gpu_used(self._job.cols, self._mine)[0])

    def gpu_total(self) -> float | None:
        return present(float(facts.gpu_total(self._get("gpu_total"))))

    def gpu_allocated(self) -> float | None:
        return present(facts.gpu_allocated(self._job.cols, self._mine)[0])

    def rss(self) -> float | None:
        return present(self._get("rss"))

    def ended_by_signal(self) -> bool:
        """Ended by a signal or distmon rather than on its own (see :data:`distmon.wire.STOPPED_HOWS`)."""
        return bool(self._get("flags") & wire.FLAG_STOPPED_BY_SIGNAL)

    def torn_down(self) -> bool:
        """Terminated by SIGTERM: what torchrun does to every survivor once a rank has failed."""
        return self.ended_by_signal() and self.report.exit is not None and self.report.exit.how == TERMINATED

    def lost_a_peer(self) -> bool:
        """It raised because a peer went away: a consequence of another rank's failure."""
        return bool(self._get("consequence") & LOST_PEER)

    def lost_a_worker(self) -> bool:
        """It raised because one of its DataLoader workers died."""
        return bool(self._get("consequence") & LOST_WORKER)

    def failed_on_its_own(self) -> bool:
        """Raised, and not only because the job was being stopped around it: its row of
        :func:`distmon.monitor.state.facts.failed_on_their_own`."""
        return bool(facts.failed_on_their_own(self._job.cols, self._mine)[0])


def present(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def report_gpu_allocated(report: Report) -> float | None:
    """:func:`distmon.monitor.state.facts.gpu_allocated` of one report (torch's allocator, else
    NVML's count; :func:`~distmon.monitor.state.columns.gpu_held` says which), for readers of a
    recording's reports."""
    gpu = report.gpu
    if gpu is None:
        return None
    allocated, used = (np.nan if value is None else value for value in (gpu.allocated, gpu.used))
    return present(float(gpu_held(np.asarray(allocated), np.asarray(used))))


class Ranks(Mapping[int, RankState]):
    """The ranks heard from, as views, by rank."""

    def __init__(self, job: JobRows) -> None:
        self._job = job

    def __getitem__(self, rank: int) -> RankState:
        cols = self._job.cols
        if not (isinstance(rank, int | np.integer) and 0 <= rank < cols.capacity and cols.present[rank]):
            raise KeyError(rank)
        return RankState(self._job, int(rank))

    def __iter__(self) -> Iterator[int]:
        return iter(self._job.present().tolist())

    def __len__(self) -> int:
        return self._job.reporting
