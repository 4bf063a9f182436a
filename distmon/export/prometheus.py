"""The monitor's state as Prometheus metrics, read at scrape time off the latest snapshot.

The scrape runs on the HTTP server's thread, so a :class:`MonitorCollector` reads only the
:class:`~distmon.monitor.state.snapshot.Snapshot` the monitor published at its latest tick (copies,
never the live state): one scrape shows one tick, whole, and costs the monitor nothing. The
facts are the state's own (silent, stalled, a collective's age), as of that tick; only a GPU's
utilization is read off the reports, which alone carry it, for the ranks served.

Per job, labelled ``job``: the ranks heard from, silent, stalled, exited and failed; steps
(min, median, max), step time (median, max), the oldest collective in flight and the
longest silence among the running ranks, memory (max, sum); the messages taken in and
dropped, the seconds the monitor did not watch, the active alerts by kind and severity and the
ranks they name, and the job's culprit: the ranks the terminal UI's header and ``distmon
report`` name (:func:`distmon.monitor.state.ending.first_cause`).

Per rank, labelled ``job``, ``rank``, ``host`` and ``local_rank``: the :data:`RANK_SERIES`
(GPU ones only for ranks that have a GPU), for every rank of a job of at most
:data:`PER_RANK_WORLD` ranks, or of any size with ``per_rank`` (``--metrics-per-rank``);
above that, only for the ranks an active alert names, so that the culprit's detail is
there when it matters while a scrape of 8192 ranks stays a few dozen series
(``benchmarks/bench_metrics.py`` measures both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIServer

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from distmon.monitor.state.columns import F8, I8, Array
from distmon.monitor.state.ending import first_cause
from distmon.monitor.state.snapshot import AlertFacts, Snapshot

if TYPE_CHECKING:
    from distmon.monitor.pipeline import Monitor

RANK_LABELS = ("job_id", "rank", "host", "local_rank")
PER_RANK_WORLD = 1024
"""Jobs of up to this many ranks get every rank's series; larger ones only the named ranks'
unless asked (a scrape of every rank's series of 8192 ranks takes seconds)."""


@dataclass(frozen=True)
class RankMetric:
    """One per-rank metric: its name, help text, and how to read it off a snapshot for the
    ranks at the positions given (NaN: absent)."""

    name: str
    help: str
    read: Callable[[Snapshot, I8], F8]
    counter: bool = False


def _field(name: str) -> Callable[[Snapshot, I8], F8]:
    def read(snapshot: Snapshot, at: I8) -> F8:
        values: F8 = getattr(snapshot, name)[at]
        return values

    return read


def _collective_age(snapshot: Snapshot, at: I8) -> F8:
    age: F8 = np.nan_to_num(snapshot.collective_age[at], nan=0.0)
    return age


def _holds_up(snapshot: Snapshot, at: I8) -> F8:
    held: F8 = np.nan_to_num(snapshot.holds_up[at], nan=0.0)
    return held


def _gpu_utilization(snapshot: Snapshot, at: I8) -> F8:
    ratio: F8 = np.full(len(at), np.nan)
    gpu = snapshot.has_gpu[at]
    ratio[gpu] = snapshot.gpu_util(at[gpu]) / 100
    return ratio


RANK_SERIES = (
    RankMetric("distmon_rank_steps", "Optimizer steps taken by the rank.", _field("steps"), counter=True),
    RankMetric(
        "distmon_rank_steps_per_second",
        "Optimizer steps per second over the last ten reports.",
        _field("steps_per_second"),
    ),
    RankMetric("distmon_rank_step_time_seconds", "Median step time over the rank's recent steps.", _field("step_p50")),
    RankMetric(
        "distmon_rank_data_wait_ratio",
        "Share of the last interval the training loop waited for DataLoader batches.",
        _field("data_wait"),
    ),
    RankMetric(
        "distmon_rank_holds_up_ratio",
        "Share of its peers' time the rank holds them up at the job's pace, where sure beyond chance (0 where not,"
        " or not known yet): the straggler's measure.",
        _holds_up,
    ),
    RankMetric(
        "distmon_rank_collective_age_seconds",
        "Age of the rank's oldest collective in flight; 0 when none is.",
        _collective_age,
    ),
    RankMetric(
        "distmon_rank_last_report_age_seconds",
        "Seconds since the rank's latest report arrived.",
        _field("silent_for"),
    ),
    RankMetric("distmon_rank_rss_bytes", "Resident memory of the rank's process.", _field("rss")),
    RankMetric(
        "distmon_rank_gpu_memory_used_bytes",
        "Memory in use on the rank's GPU (NVML, else what torch's allocator reserved).",
        _field("gpu_used"),
    ),
    RankMetric("distmon_rank_gpu_memory_total_bytes", "GPU memory of the rank's GPU.", _field("gpu_total")),
    RankMetric("distmon_rank_gpu_utilization_ratio", "Utilization of the rank's GPU (NVML), 0 to 1.", _gpu_utilization),
)


class MonitorCollector(Collector):
    """Serves the :attr:`~distmon.monitor.pipeline.Monitor.snapshot` of a live monitor when
    scraped: one read of that reference, nothing else of the monitor's, so it is safe on the
    HTTP server's thread. Made on the monitor's thread, it has the monitor publish its
    snapshots. ``per_rank``: every rank's series at any world size."""

    def __init__(self, monitor: Monitor, per_rank: bool = False) -> None:
        self.monitor = monitor
        self.per_rank = per_rank
        monitor.start_publishing()

    def collect(self) -> Iterator[Metric]:
        snapshot = self.monitor.snapshot
        yield from _rank_metrics(snapshot, self._detailed(snapshot))
        yield from _job_metrics(snapshot)
        yield from _alert_metrics(snapshot.job, snapshot.active, snapshot.raised_kinds)

    def _detailed(self, snapshot: Snapshot) -> I8:
        """The positions of the ranks whose own series are served."""
        everyone = np.arange(len(snapshot.ranks))
        if self.per_rank or snapshot.world <= PER_RANK_WORLD:
            return everyone
        named = np.array(sorted({r for a in snapshot.active for r in a.ranks}), dtype=np.int64)
        at: I8 = everyone[np.isin(snapshot.ranks, named)]
        return at


def _job_metrics(s: Snapshot) -> Iterator[Metric]:
    job = s.job
    running = ~s.exited
    yield _gauge("distmon_job_world_size", "Ranks in the job, as the ranks report it.", job, s.world)
    yield _gauge("distmon_job_ranks_reporting", "Ranks the monitor has heard from.", job, len(s.ranks))
    counts = (
        ("silent", "silent for longer than their reports allow", s.silent),
        ("stalled", "live but making no progress, by their own account", s.stalled),
        ("exited", "that have exited", s.exited),
        ("failed", "that raised, and not only because the job was being stopped", s.failed),
    )
    for name, words, mask in counts:
        yield _gauge(f"distmon_job_ranks_{name}", f"Ranks {words}.", job, int(np.count_nonzero(mask)))
    waiting = np.nan_to_num(s.collective_age[running], nan=0.0)
    stats = (
        ("steps_min", "Fewest optimizer steps a rank has taken.", _stat(np.min, s.steps)),
        ("steps_median", "Median of the ranks' optimizer steps.", _stat(np.median, s.steps)),
        ("steps_max", "Most optimizer steps a rank has taken.", _stat(np.max, s.steps)),
        ("step_time_median_seconds", "Median of the ranks' median step times: the job's pace.", s.pace),
        ("step_time_max_seconds", "The slowest rank's median step time.", _stat(np.max, s.step_p50)),
        (
            "collective_age_max_seconds",
            "Age of the oldest collective in flight on a rank still running; 0 when none is.",
            _stat(np.max, waiting) or 0.0,
        ),
        (
            "last_report_age_max_seconds",
            "Seconds since the latest report of the rank still running heard from longest ago.",
            _stat(np.max, s.silent_for[running]),
        ),
        ("rss_max_bytes", "Largest resident memory of a rank's process.", _stat(np.max, s.rss)),
        ("rss_sum_bytes", "Resident memory of the ranks' processes, summed.", _stat(np.sum, s.rss)),
        ("gpu_memory_used_max_bytes", "Most memory in use on a rank's GPU.", _stat(np.max, s.gpu_used)),
        ("gpu_memory_used_sum_bytes", "Memory in use on the ranks' GPUs, summed.", _stat(np.sum, s.gpu_used)),
    )
    for name, help, value in stats:
        yield _gauge(f"distmon_job_{name}", help, job, value)
    received = CounterMetricFamily("distmon_messages", "Rank messages taken in.", labels=["job_id"])
    received.add_metric([job], s.received)
    yield received
    dropped = CounterMetricFamily(
        "distmon_messages_dropped", "Messages dropped, by reason (malformed, other_job, ...).", labels=["reason"]
    )
    for reason, n in sorted(s.dropped.items()):
        dropped.add_metric([reason], n)
    yield dropped
    unwatched = CounterMetricFamily(
        "distmon_unwatched_seconds",
        "Seconds the monitor did not watch, by reason (monitor_paused_s: its loop stood still, "
        "clock_jumped_s: its clock jumped).",
        labels=["reason"],
    )
    for reason, n in sorted(s.unwatched.items()):
        unwatched.add_metric([reason], n)
    yield unwatched


def _rank_metrics(s: Snapshot, at: I8) -> Iterator[Metric]:
    labels = [
        (s.job, str(rank), s.host_names[host], str(local))
        for rank, host, local in zip(s.ranks[at].tolist(), s.host[at].tolist(), s.local_rank[at].tolist(), strict=True)
    ]
    for series in RANK_SERIES:
        family = (CounterMetricFamily if series.counter else GaugeMetricFamily)(
            series.name, series.help, labels=RANK_LABELS
        )
        values = series.read(s, at)
        for i in np.flatnonzero(~np.isnan(values)).tolist():
            family.add_metric(labels[i], float(values[i]))
        yield family


def _alert_metrics(job: str, active: tuple[AlertFacts, ...], raised: frozenset[tuple[str, str]]) -> Iterator[Metric]:
    counts = dict.fromkeys(raised, 0)  # resolved kinds read 0, not vanish
    for a in active:
        counts[a.kind, a.severity] = counts.get((a.kind, a.severity), 0) + 1
    alerts = GaugeMetricFamily(
        "distmon_alert_active", "Active alerts of this kind and severity.", labels=["job_id", "kind", "severity"]
    )
    for (kind, severity), n in sorted(counts.items()):
        alerts.add_metric([job, kind, severity], n)
    yield alerts
    named = GaugeMetricFamily(
        "distmon_alert_rank",
        "1 for each rank that an active alert names, by the alert's kind.",
        labels=["job_id", "kind", "rank"],
    )
    for kind, rank in sorted({(a.kind, r) for a in active for r in a.ranks}):
        named.add_metric([job, kind, str(rank)], 1)
    yield named
    culprit = GaugeMetricFamily(
        "distmon_culprit",
        "1 for each rank of the job's culprit, as the terminal UI and the report name it, by its alert's kind.",
        labels=["job_id", "kind", "rank"],
    )
    found = first_cause(active)
    if found is not None:
        for rank in sorted(found.ranks):
            culprit.add_metric([job, found.kind, str(rank)], 1)
    yield culprit


def _stat(how: Callable[..., Any], values: Array) -> float | None:
    """``how`` over the values present (NaN: absent) of the ranks' latest reports; None when
    there are none."""
    values = values[~np.isnan(values)] if values.dtype.kind == "f" else values
    return float(how(values)) if len(values) else None


def _gauge(name: str, help: str, job: str, value: float | None) -> GaugeMetricFamily:
    """A job's gauge; without a sample when there is no value."""
    family = GaugeMetricFamily(name, help, labels=["job_id"])
    if value is not None:
        family.add_metric([job], value)
    return family


def serve(monitor: Monitor, port: int, addr: str = "0.0.0.0", per_rank: bool = False) -> WSGIServer:
    """Serve ``/metrics`` for ``monitor`` on ``port`` from a daemon thread; raises OSError
    when the port cannot be bound. ``shutdown()`` the server returned to stop it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor, per_rank=per_rank))
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server
