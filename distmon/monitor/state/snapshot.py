"""The monitor's state as readers on other threads see it: a :class:`Snapshot`, taken on the
monitor's thread at each tick, holding copies only.

The live state's columns change under a reader on another thread (the Prometheus scrape runs
on the HTTP server's), and reading some of its facts decodes and caches reports. A snapshot is
built from the state's own definitions (silent, stalled, failed, a collective's age, the pace)
at the tick's time, and is never changed after: a reader holding one sees one tick, whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.state.alerts import AlertBook
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.columns import F8, HISTORY, I8
from distmon.monitor.state.job import JobState

Mask = npt.NDArray[np.bool_]

RATE_SAMPLES = 10
"""Reports that steps per second is measured over (ten seconds at the default interval)."""


@dataclass(frozen=True)
class AlertFacts:
    """What a reader counts of an alert."""

    kind: str
    severity: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Snapshot:
    """The job at the tick at ``t``. The per-rank arrays run over :attr:`ranks`, the ranks
    heard from, in rank order; they are copies, made read-only."""

    t: float
    job: str
    world: int
    received: int
    dropped: dict[str, int]
    """Messages refused, by reason."""
    unwatched: dict[str, int]
    """Seconds the monitor did not watch, by why."""
    pace: float | None
    ranks: I8
    host: I8
    host_names: dict[int, str]
    local_rank: I8
    steps: F8
    steps_per_second: F8
    step_p50: F8
    data_wait: F8
    holds_up: F8
    """The share of its peers' time it holds them up, where sure beyond chance (0 where not;
    NaN: not known): :meth:`distmon.monitor.state.pace.Holdups.holding`."""
    collective_age: F8
    """Of the oldest collective in flight; NaN when none is."""
    silent_for: F8
    rss: F8
    gpu_used: F8
    gpu_total: F8
    has_gpu: Mask
    exited: Mask
    silent: Mask
    stalled: Mask
    failed: Mask
    reports: tuple[bytes | None, ...]
    """By rank (not position): the latest report as received (immutable); what only the
    reports carry is read off these by the reader that wants it."""
    active: tuple[AlertFacts, ...]
    raised_kinds: frozenset[tuple[str, str]]
    """Every (kind, severity) raised so far, active or not."""

    def __post_init__(self) -> None:
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    def gpu_util(self, at: I8) -> F8:
        """Of the ranks at positions ``at``: their GPU's utilization, 0 to 100 (NaN: none)."""
        reports = self.reports
        util = [wire.gpu_util(raw) if (raw := reports[r]) else None for r in self.ranks[at].tolist()]
        return np.array(util, dtype=np.float64)


def take(state: JobState, alerts: AlertBook, now: float) -> Snapshot:
    """The state at ``now`` (a tick's time), copied; on the monitor's thread."""
    c = state.cols
    ranks = state.present()
    host = c.host[ranks]  # indexing by an array of ranks copies
    return Snapshot(
        t=now,
        job=state.job or "",
        world=state.world,
        received=state.received,
        dropped=dict(state.dropped),
        unwatched=dict(state.unwatched),
        pace=state.pace(),
        ranks=ranks,
        host=host,
        host_names={h: state.host_name(h) for h in distinct(host).tolist()},
        local_rank=c.local_rank[ranks],
        steps=c.steps[ranks].astype(np.float64),
        steps_per_second=_steps_per_second(state, ranks),
        step_p50=c.step_p50[ranks],
        data_wait=c.data_wait[ranks],
        holds_up=state.holdups().holding(state.limits.straggler_still, ranks),
        collective_age=state.collective_age(now)[ranks],
        silent_for=state.silent_for(now)[ranks],
        rss=c.rss[ranks].astype(np.float64),
        gpu_used=state.gpu_used(ranks),
        gpu_total=state.gpu_total()[ranks],
        has_gpu=state.flagged(wire.FLAG_HAS_GPU, ranks),
        exited=state.flagged(wire.FLAG_EXITED, ranks),
        silent=state.silent(now, ranks),
        stalled=state.stalled(now)[ranks],
        failed=state.failed_on_their_own()[ranks],
        reports=state.raw_reports(),
        active=tuple(AlertFacts(a.kind, a.severity, tuple(a.ranks)) for a in list(alerts.active.values())),
        raised_kinds=frozenset((a.kind, a.severity) for a in alerts.history),
    )


def _steps_per_second(state: JobState, ranks: I8) -> F8:
    """Per rank of ``ranks``: steps per second over its last :data:`RATE_SAMPLES` reports
    (NaN: not measurable yet)."""
    c = state.cols
    ago = np.minimum(c.history_count[ranks], RATE_SAMPLES + 1) - 1
    newest = (c.history_next[ranks] - 1) % HISTORY
    oldest = (newest - ago) % HISTORY
    t, steps = c.history["t"], c.history["steps"]
    with np.errstate(over="ignore", invalid="ignore"):  # samples not yet taken are not read
        dt = np.where(ago >= 1, t[newest, ranks] - t[oldest, ranks], np.nan)
    moving = (ago >= 1) & (dt > 0)
    rate: F8 = np.full(len(ranks), np.nan)
    rate[moving] = (steps[newest, ranks] - steps[oldest, ranks])[moving] / dt[moving]
    return rate
