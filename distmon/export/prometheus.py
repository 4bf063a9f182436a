"""The monitor's state as Prometheus metrics, read at scrape time.

A :class:`MonitorCollector` walks the monitor's current state when Prometheus scrapes
``/metrics``; ingesting a report costs nothing more than it did. Per rank, labelled ``job``,
``rank``, ``host`` and ``local_rank``, it exports :data:`RANK_SERIES` series (GPU ones only
for ranks that have a GPU); per job, the active alerts by kind and severity and the ranks
they name.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from distmon.monitor.monitor import Monitor
from distmon.monitor.state import RankState

RANK_LABELS = ("job", "rank", "host", "local_rank")
RATE_SAMPLES = 10
"""Reports that steps per second is measured over (ten seconds at the default interval)."""


@dataclass(frozen=True)
class RankSeries:
    """One per-rank metric: its name, help text, and how to read it off a rank (None: absent)."""

    name: str
    help: str
    read: Callable[[RankState, float], float | None]
    counter: bool = False


def _steps_per_second(r: RankState, _now: float) -> float | None:
    h = r.history
    ago = min(h.count, RATE_SAMPLES + 1) - 1
    if ago < 1:
        return None
    dt = h.latest("t") - h.latest("t", ago)
    return (h.latest("steps") - h.latest("steps", ago)) / dt if dt > 0 else None


def _oldest_collective_age(r: RankState, now: float) -> float:
    ages = [r.age(g.since, now) for g in r.report.groups if g.enqueued > g.completed and g.since]
    return max(ages, default=0.0)


RANK_SERIES = (
    RankSeries("distmon_rank_steps", "Optimizer steps taken by the rank.", lambda r, _: r.report.steps, counter=True),
    RankSeries(
        "distmon_rank_steps_per_second", "Optimizer steps per second over the last ten reports.", _steps_per_second
    ),
    RankSeries(
        "distmon_rank_step_time_seconds",
        "Median step time over the rank's recent steps.",
        lambda r, _: r.report.step_time.p50 if r.report.step_time else None,
    ),
    RankSeries(
        "distmon_rank_data_wait_ratio",
        "Share of the last interval the training loop waited for DataLoader batches.",
        lambda r, _: r.report.data_wait,
    ),
    RankSeries(
        "distmon_rank_collective_age_seconds",
        "Age of the rank's oldest collective in flight; 0 when none is.",
        _oldest_collective_age,
    ),
    RankSeries(
        "distmon_rank_last_report_age_seconds",
        "Seconds since the rank's latest report arrived.",
        lambda r, now: r.silent_for(now),
    ),
    RankSeries(
        "distmon_rank_rss_bytes",
        "Resident memory of the rank's process.",
        lambda r, _: r.rss(),
    ),
    RankSeries(
        "distmon_rank_gpu_memory_used_bytes",
        "Memory in use on the rank's GPU (NVML, else what torch's allocator reserved).",
        lambda r, _: r.gpu_used(),
    ),
    RankSeries(
        "distmon_rank_gpu_memory_total_bytes",
        "GPU memory of the rank's GPU.",
        lambda r, _: r.gpu_total(),
    ),
    RankSeries(
        "distmon_rank_gpu_utilization_ratio",
        "Utilization of the rank's GPU (NVML), 0 to 1.",
        lambda r, _: r.report.gpu.util / 100 if r.report.gpu and r.report.gpu.util is not None else None,
    ),
)


class MonitorCollector(Collector):
    """Reads a live :class:`Monitor` when scraped; safe to run on the HTTP server's thread,
    since it only copies the monitor's dictionaries (atomic under the GIL) and reads them."""

    def __init__(self, monitor: Monitor, clock: Callable[[], float] = time.time) -> None:
        self.monitor = monitor
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        state = self.monitor.state
        job = state.job or ""
        ranks = sorted(list(state.ranks.values()), key=lambda r: r.rank)
        for series in RANK_SERIES:
            family = (CounterMetricFamily if series.counter else GaugeMetricFamily)(
                series.name, series.help, labels=RANK_LABELS
            )
            for r in ranks:
                value = series.read(r, now)
                if value is not None and not math.isnan(value):
                    labels = (job, str(r.rank), r.report.host, str(r.report.local_rank))
                    family.add_metric(labels, float(value))
            yield family
        yield from self._job_metrics(job, len(ranks))

    def _job_metrics(self, job: str, reporting: int) -> Iterator[Metric]:
        state, book = self.monitor.state, self.monitor.alerts
        yield _gauge("distmon_job_world_size", "Ranks in the job, as the ranks report it.", job, state.world)
        yield _gauge("distmon_job_ranks_reporting", "Ranks the monitor has heard from.", job, reporting)
        received = CounterMetricFamily("distmon_messages", "Rank messages taken in.", labels=["job"])
        received.add_metric([job], state.received)
        yield received
        dropped = CounterMetricFamily(
            "distmon_messages_dropped", "Messages dropped, by reason (malformed, other_job, ...).", labels=["reason"]
        )
        for reason, n in sorted(dict(state.dropped).items()):
            dropped.add_metric([reason], n)
        yield dropped
        active = list(book.active.values())
        counts = {(a.kind, a.severity): 0 for a in list(book.history)}  # resolved kinds read 0, not vanish
        for a in active:
            counts[a.kind, a.severity] = counts.get((a.kind, a.severity), 0) + 1
        alerts = GaugeMetricFamily(
            "distmon_alert_active", "Active alerts of this kind and severity.", labels=["job", "kind", "severity"]
        )
        for (kind, severity), n in sorted(counts.items()):
            alerts.add_metric([job, kind, severity], n)
        yield alerts
        named = GaugeMetricFamily(
            "distmon_alert_rank",
            "1 for each rank that an active alert names, by the alert's kind.",
            labels=["job", "kind", "rank"],
        )
        for kind, rank in sorted({(a.kind, r) for a in active for r in a.ranks}):
            named.add_metric([job, kind, str(rank)], 1)
        yield named


def _gauge(name: str, help: str, job: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help, labels=["job"])
    family.add_metric([job], value)
    return family


def serve(monitor: Monitor, port: int, addr: str = "0.0.0.0") -> WSGIServer:
    """Serve ``/metrics`` for ``monitor`` on ``port`` from a daemon thread; raises OSError
    when the port cannot be bound. ``shutdown()`` the server returned to stop it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor))
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server
