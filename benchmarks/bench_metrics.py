"""The Prometheus endpoint at scale, on simulated ranks: the ranks with series of their own,
series in all, the size of one scrape and the time to serve it, by default and with every
rank's series (``--metrics-per-rank``).

    .venv/bin/python benchmarks/bench_metrics.py [--ranks 8192 131072]

Prints a markdown table. Ingesting a report costs nothing more; while metrics are served the
monitor publishes a snapshot at each tick (measured: ms per tick to publish), and the scrape
reads it (measured: prometheus_client's own exposition of the collector's families), on a
hung job with GPU ranks (every series present, the hang alert naming the stuck rank). The
monitor takes in only the last ``--window`` seconds of the simulated job's reports (two
reports a rank: enough for the hang alert and for steps per second), so that 131,072 ranks
build quickly, most of it encoding the reports.
"""

from __future__ import annotations

import argparse
import gzip
import math
import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest
from simulated import SimJob

from distmon.export.prometheus import MonitorCollector
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import MessageRecord
from distmon.monitor.rules.detector import Detector
from distmon.monitor.session import Session

UNTIL = 20.0
"""Seconds of the simulated job; its rank ``world // 3`` hangs at 10."""


def hung_job(world: int, window: float) -> tuple[Monitor, float]:
    """A monitor that has seen the last ``window`` seconds of a hung job, and the job's end."""
    sim = SimJob(world=world, ranks_per_host=8, gpu=True).hang(world // 3, at=10)
    monitor = Monitor(Detector(probe=sim.probe))
    records = (MessageRecord(t, raw) for t, raw in sim.stream(until=UNTIL, since=UNTIL - window))
    for _ in Session(ReplayFeed(records, speed=math.inf, end=sim.start + UNTIL), monitor).drain():
        pass
    return monitor, sim.start + UNTIL


def publishing(monitor: Monitor, now: float, repeats: int) -> float:
    """Median ms the monitor spends at each tick on the snapshot the scrapes read."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        monitor.publish(now)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(monitor: Monitor, per_rank: bool, repeats: int) -> tuple[int, int, int, int, float]:
    """Ranks with series of their own, series in all, bytes per scrape plain and gzipped (as
    Prometheus asks for it), median ms per scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor, per_rank=per_rank))
    families = list(registry.collect())
    detailed = {s.labels["rank"] for f in families if f.name.startswith("distmon_rank_") for s in f.samples}
    series = sum(len(f.samples) for f in families)
    times, text = [], b""
    for _ in range(repeats):
        start = time.perf_counter()
        text = generate_latest(registry)
        times.append((time.perf_counter() - start) * 1000)
    return len(detailed), series, len(text), len(gzip.compress(text)), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8192, 131072])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=float, default=2.0, help="seconds of reports the monitor takes in")
    args = parser.parse_args()
    print(
        "| ranks | per-rank series | ranks with them | series in all | bytes per scrape | gzipped "
        "| ms per scrape | ms per tick to publish |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for world in args.ranks:
        monitor, now = hung_job(world, args.window)
        publish = publishing(monitor, now, args.repeats)
        for per_rank in (False, True):
            detailed, series, size, zipped, ms = measure(monitor, per_rank, args.repeats)
            how = "all (`--metrics-per-rank`)" if per_rank else "default"
            row = f"| {world} | {how} | {detailed:,} | {series:,} | {size:,} | {zipped:,} | {ms:.0f} | {publish:.1f} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
