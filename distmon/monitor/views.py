"""One rank as the monitor knows it (:class:`RankState`, a view of the columns and its latest
report), and the ranks heard from (:class:`Ranks`): what the rules, the terminal UI and the
reports read when they look at a rank rather than at all of them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from distmon import wire
from distmon.monitor.columns import History
from distmon.monitor.limits import LIMITS, Thresholds
from distmon.wire import TERMINATED, Report

if TYPE_CHECKING:
    from distmon.monitor.state import JobState


class RankState:
    """One rank, as the monitor knows it: a view of the columns, and its latest report."""

    __slots__ = ("_job", "rank")

    def __init__(self, job: JobState, rank: int) -> None:
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
    def job(self) -> JobState:
        return self._job

    @property
    def _mine(self) -> slice:
        """This rank, as an index into the columns that a fact over ranks takes."""
        return slice(self.rank, self.rank + 1)

    @property
    def report(self) -> Report:
        """The whole latest report, decoded when first asked for."""
        return self._job.report_of(self.rank)

    @property
    def received(self) -> float:
        """Monitor clock when the latest report arrived."""
        return float(self._get("received"))

    @property
    def first_seen(self) -> float:
        return float(self._get("first_seen"))

    @property
    def history(self) -> History:
        return History(self._job.cols, self.rank)

    @property
    def inflight_share(self) -> float:
        """Running share of reports sampled inside a collective, while the job progresses:
        low for the rank the others wait for."""
        return float(self._get("inflight_share"))

    @property
    def data_wait_share(self) -> float:
        return float(self._get("data_wait_share"))

    @property
    def size(self) -> int:
        """Bytes of the latest report as received."""
        return int(self._get("bytes"))

    @property
    def steps(self) -> int:
        return int(self._get("steps"))

    @property
    def host(self) -> str:
        return self._job.host_name(int(self._get("host")))

    @property
    def finished(self) -> bool:
        return bool(self._get("flags") & wire.EXITED)

    def silent_for(self, now: float) -> float:
        return now - self.received

    def silent(self, now: float, limits: Thresholds = LIMITS) -> bool:
        """Not heard from for longer than its reports allow (and not because it exited): one
        rank of :meth:`distmon.monitor.state.JobState.silent`."""
        return bool(self._job.silent(now, limits, self._mine)[0])

    def live(self, now: float, limits: Thresholds = LIMITS) -> bool:
        """Still reporting: neither exited nor silent."""
        return not self.finished and not self.silent(now, limits)

    def age(self, t: float, now: float) -> float:
        """How long before ``now`` (the monitor's clock) the moment ``t`` of the rank's own
        clock was: measured on the rank's clock, so skew between hosts does not enter."""
        return float(self._get("t")) - t + (now - self.received)

    def stalled_for(self, now: float) -> float | None:
        """How long the rank has made no progress, by its own account; None while it does."""
        since = float(self._get("stalled_since"))
        return None if np.isnan(since) else self.age(since, now)

    def gpu_used(self) -> float | None:
        """Memory in use on the rank's GPU, as nvidia-smi counts it (NVML), else what torch's
        caching allocator holds; the measure to hold against :meth:`gpu_total`."""
        return present(self._job.gpu_used(self._mine)[0])

    def gpu_total(self) -> float | None:
        return present(float(gpu_total(self._get("gpu_total"))))

    def gpu_allocated(self) -> float | None:
        return present(self._job.gpu_allocated(self._mine)[0])

    def rss(self) -> float | None:
        return present(self._get("rss"))

    def stopped(self) -> bool:
        """Ended by a signal or distmon rather than on its own (see :data:`distmon.wire.STOPPED`)."""
        return bool(self._get("flags") & wire.STOPPED_BY_SIGNAL)

    def torn_down(self) -> bool:
        """Terminated by SIGTERM: what torchrun does to every survivor once a rank has failed."""
        return self.stopped() and self.report.exit is not None and self.report.exit.how == TERMINATED

    def lost_a_peer(self) -> bool:
        """It raised because a peer went away: a consequence of another rank's failure."""
        exc = self.report.exception if self._get("flags") & wire.CONSEQUENCE else None
        return exc is not None and bool(wire.PEER_LOST.search(exc.message))

    def lost_a_worker(self) -> bool:
        """It raised because one of its DataLoader workers died."""
        exc = self.report.exception if self._get("flags") & wire.CONSEQUENCE else None
        return exc is not None and bool(wire.WORKER_DIED.search(exc.message))

    def failed_on_its_own(self) -> bool:
        """Raised, and not only because the job was being stopped around it: a rank stopped by
        a signal whose DataLoader workers died in the same teardown, or whose peers went, did
        not fail."""
        return bool(self._job.failed_on_their_own()[self.rank])


def present(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def gpu_total(total: Any) -> Any:
    """A GPU's memory as reported, an array or one value; NaN for none (a report of 0 is none)."""
    return np.where(total == 0, np.nan, total)


def gpu_allocated(report: Report) -> float | None:
    """Memory held by live tensors (torch's allocator, else NVML's count): what grows when a
    rank leaks. A function of one report, for readers of a recording's reports too."""
    gpu = report.gpu
    if gpu is None:
        return None
    value = gpu.allocated if gpu.allocated is not None else gpu.used
    return None if value is None else float(value)


class Ranks(Mapping[int, RankState]):
    """The ranks heard from, as views, by rank."""

    def __init__(self, job: JobState) -> None:
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
