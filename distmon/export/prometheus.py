"""The monitor's state as Prometheus metrics, read at scrape time.

A :class:`MonitorCollector` reads the monitor's current state when Prometheus scrapes
``/metrics``; ingesting a report costs nothing more than it did. The numbers are read off
the state's columns a whole array at a time, with the facts :class:`JobState` defines
(silent, stalled, a collective's age); only a GPU's utilization is read off the reports,
which alone carry it. So a scrape costs what the series it serves cost to format.

Per job, labelled ``job``: the ranks heard from, silent, stalled, exited and failed; steps
(min, median, max), step time (median, max), the oldest collective in flight and the
longest silence among the running ranks, memory (max, sum); the messages taken in and
dropped, and the active alerts by kind and severity and the ranks they name.

Per rank, labelled ``job``, ``rank``, ``host`` and ``local_rank``: the :data:`RANK_SERIES`
(GPU ones only for ranks that have a GPU), for every rank of a job of at most
:data:`PER_RANK_WORLD` ranks, or of any size with ``per_rank`` (``--metrics-per-rank``);
above that, only for the ranks an active alert names, so that the culprit's detail is
there when it matters while a scrape of 8192 ranks stays a few dozen series: tens of
milliseconds, where every rank's series take seconds (``benchmarks/bench_metrics.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIServer

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from distmon import wire
from distmon.monitor.columns import F8, HISTORY, I8, Array
from distmon.monitor.state import JobState

if TYPE_CHECKING:
    from distmon.monitor.alerts import Alert
    from distmon.monitor.monitor import Monitor

RANK_LABELS = ("job_id", "rank", "host", "local_rank")
RATE_SAMPLES = 10
"""Reports that steps per second is measured over (ten seconds at the default interval)."""
PER_RANK_WORLD = 1024
"""Jobs of up to this many ranks get every rank's series; larger ones only the named ranks'
unless asked (a scrape of every rank's series of 8192 ranks takes seconds)."""


@dataclass(frozen=True)
class RankSeries:
    """One per-rank metric: its name, help text, and how to read it off the state for the
    ranks given, at ``now`` (NaN: absent)."""

    name: str
    help: str
    read: Callable[[JobState, I8, float], F8]
    counter: bool = False


def _column(name: str) -> Callable[[JobState, I8, float], F8]:
    def read(state: JobState, ranks: I8, _now: float) -> F8:
        values: F8 = getattr(state.cols, name)[ranks].astype(np.float64)
        return values

    return read


def _steps_per_second(state: JobState, ranks: I8, _now: float) -> F8:
    c = state.cols
    ago = np.minimum(c.history_count[ranks], RATE_SAMPLES + 1) - 1
    newest = (c.history_next[ranks] - 1) % HISTORY
    oldest = (newest - ago) % HISTORY
    t, steps = c.history["t"], c.history["steps"]
    dt = t[ranks, newest] - t[ranks, oldest]
    moving = (ago >= 1) & (dt > 0)
    rate: F8 = np.full(len(ranks), np.nan)
    rate[moving] = (steps[ranks, newest] - steps[ranks, oldest])[moving] / dt[moving]
    return rate


def _collective_age(state: JobState, ranks: I8, now: float) -> F8:
    age: F8 = np.nan_to_num(state.collective_age(now)[ranks], nan=0.0)
    return age


def _gpu_utilization(state: JobState, ranks: I8, _now: float) -> F8:
    ratio: F8 = np.full(len(ranks), np.nan)
    gpu = state.flagged(wire.HAS_GPU)[ranks]
    ratio[gpu] = state.gpu_util(ranks[gpu]) / 100
    return ratio


RANK_SERIES = (
    RankSeries("distmon_rank_steps", "Optimizer steps taken by the rank.", _column("steps"), counter=True),
    RankSeries(
        "distmon_rank_steps_per_second", "Optimizer steps per second over the last ten reports.", _steps_per_second
    ),
    RankSeries("distmon_rank_step_time_seconds", "Median step time over the rank's recent steps.", _column("step_p50")),
    RankSeries(
        "distmon_rank_data_wait_ratio",
        "Share of the last interval the training loop waited for DataLoader batches.",
        _column("data_wait"),
    ),
    RankSeries(
        "distmon_rank_collective_age_seconds",
        "Age of the rank's oldest collective in flight; 0 when none is.",
        _collective_age,
    ),
    RankSeries(
        "distmon_rank_last_report_age_seconds",
        "Seconds since the rank's latest report arrived.",
        lambda state, ranks, now: state.silent_for(now)[ranks],
    ),
    RankSeries("distmon_rank_rss_bytes", "Resident memory of the rank's process.", _column("rss")),
    RankSeries(
        "distmon_rank_gpu_memory_used_bytes",
        "Memory in use on the rank's GPU (NVML, else what torch's allocator reserved).",
        lambda state, ranks, _: state.gpu_used()[ranks],
    ),
    RankSeries(
        "distmon_rank_gpu_memory_total_bytes",
        "GPU memory of the rank's GPU.",
        lambda state, ranks, _: state.gpu_total()[ranks],
    ),
    RankSeries("distmon_rank_gpu_utilization_ratio", "Utilization of the rank's GPU (NVML), 0 to 1.", _gpu_utilization),
)


class MonitorCollector(Collector):
    """Reads a live :class:`Monitor` when scraped; safe to run on the HTTP server's thread,
    since it only copies the monitor's dictionaries (atomic under the GIL) and reads arrays.
    ``per_rank``: every rank's series at any world size."""

    def __init__(self, monitor: Monitor, clock: Callable[[], float] = time.time, per_rank: bool = False) -> None:
        self.monitor = monitor
        self.clock = clock
        self.per_rank = per_rank

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        state = self.monitor.state
        job = state.job or ""
        active = list(self.monitor.alerts.active.values())
        yield from _rank_metrics(state, job, self._detailed(state, active), now)
        yield from self._job_metrics(job, now)
        yield from _alert_metrics(job, active, list(self.monitor.alerts.history))

    def _detailed(self, state: JobState, active: list[Alert]) -> I8:
        """The ranks whose own series are served."""
        present = state.present()
        if self.per_rank or state.world <= PER_RANK_WORLD:
            return present
        named = np.array(sorted({r for a in active for r in a.ranks}), dtype=np.int64)
        named = named[named < state.cols.capacity]
        heard: I8 = named[state.cols.present[named]]
        return heard

    def _job_metrics(self, job: str, now: float) -> Iterator[Metric]:
        state, limits = self.monitor.state, self.monitor.limits
        present = state.present()
        running = present[~state.flagged(wire.EXITED)[present]]
        yield _gauge("distmon_job_world_size", "Ranks in the job, as the ranks report it.", job, state.world)
        yield _gauge("distmon_job_ranks_reporting", "Ranks the monitor has heard from.", job, len(present))
        counts = (
            ("silent", "silent for longer than their reports allow", state.silent(now, limits)),
            ("stalled", "live but making no progress, by their own account", state.stalled(now, limits)),
            ("exited", "that have exited", state.flagged(wire.EXITED)),
            ("failed", "that raised, and not only because the job was being stopped", state.failed_on_their_own()),
        )
        for name, words, mask in counts:
            yield _gauge(f"distmon_job_ranks_{name}", f"Ranks {words}.", job, int(np.count_nonzero(mask)))
        steps, step_time, rss = state.cols.steps[present], state.cols.step_p50[present], state.cols.rss[present]
        gpu = state.gpu_used()[present]
        waiting = np.nan_to_num(state.collective_age(now)[running], nan=0.0)
        stats = (
            ("steps_min", "Fewest optimizer steps a rank has taken.", _stat(np.min, steps)),
            ("steps_median", "Median of the ranks' optimizer steps.", _stat(np.median, steps)),
            ("steps_max", "Most optimizer steps a rank has taken.", _stat(np.max, steps)),
            ("step_time_median_seconds", "Median of the ranks' median step times: the job's pace.", state.pace()),
            ("step_time_max_seconds", "The slowest rank's median step time.", _stat(np.max, step_time)),
            (
                "collective_age_max_seconds",
                "Age of the oldest collective in flight on a rank still running; 0 when none is.",
                _stat(np.max, waiting) or 0.0,
            ),
            (
                "last_report_age_max_seconds",
                "Seconds since the latest report of the rank still running heard from longest ago.",
                _stat(np.max, state.silent_for(now)[running]),
            ),
            ("rss_max_bytes", "Largest resident memory of a rank's process.", _stat(np.max, rss)),
            ("rss_sum_bytes", "Resident memory of the ranks' processes, summed.", _stat(np.sum, rss)),
            ("gpu_memory_used_max_bytes", "Most memory in use on a rank's GPU.", _stat(np.max, gpu)),
            ("gpu_memory_used_sum_bytes", "Memory in use on the ranks' GPUs, summed.", _stat(np.sum, gpu)),
        )
        for name, help, value in stats:
            yield _gauge(f"distmon_job_{name}", help, job, value)
        received = CounterMetricFamily("distmon_messages", "Rank messages taken in.", labels=["job_id"])
        received.add_metric([job], state.received)
        yield received
        dropped = CounterMetricFamily(
            "distmon_messages_dropped", "Messages dropped, by reason (malformed, other_job, ...).", labels=["reason"]
        )
        for reason, n in sorted(dict(state.dropped).items()):
            dropped.add_metric([reason], n)
        yield dropped


def _rank_metrics(state: JobState, job: str, ranks: I8, now: float) -> Iterator[Metric]:
    cols = state.cols
    hosts, host_of = np.unique(cols.host[ranks], return_inverse=True)
    host_names = [state.host_name(int(h)) for h in hosts.tolist()]
    labels = [
        (job, str(rank), host_names[h], str(local))
        for rank, h, local in zip(ranks.tolist(), host_of.tolist(), cols.local_rank[ranks].tolist(), strict=True)
    ]
    for series in RANK_SERIES:
        family = (CounterMetricFamily if series.counter else GaugeMetricFamily)(
            series.name, series.help, labels=RANK_LABELS
        )
        values = series.read(state, ranks, now)
        for i in np.flatnonzero(~np.isnan(values)).tolist():
            family.add_metric(labels[i], float(values[i]))
        yield family


def _alert_metrics(job: str, active: list[Alert], history: list[Alert]) -> Iterator[Metric]:
    counts = {(a.kind, a.severity): 0 for a in history}  # resolved kinds read 0, not vanish
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
