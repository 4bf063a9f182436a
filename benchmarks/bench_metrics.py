"""The Prometheus endpoint at scale, on simulated ranks: series per rank, series in all,
the size of one scrape and the time to serve it.

    .venv/bin/python benchmarks/bench_metrics.py [--ranks 8 1024 8192]

Prints a markdown table. The work happens at scrape time only (ingesting a report costs
nothing more), so the scrape is what is measured: prometheus_client's own exposition of the
collector's families, on a hung job with GPU ranks (every series present).
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import time

from prometheus_client import CollectorRegistry, generate_latest

from distmon.export.prometheus import MonitorCollector
from distmon.monitor.detector import Detector
from distmon.monitor.monitor import Monitor
from distmon.simulate import SimJob, drive


def measure(world: int, repeats: int) -> tuple[int, int, int, int, int, float]:
    """Series per rank, per job, in all; bytes per scrape, plain and gzipped (as Prometheus
    asks for it); median ms per scrape."""
    sim = SimJob(world=world, ranks_per_host=8, gpu=True).hang(world // 3, at=10)
    monitor = Monitor(Detector(probe=sim.probe))
    drive(sim, monitor, until=20)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(monitor, clock=lambda: sim.start + 20))
    families = list(registry.collect())
    rank_series = sum(len(f.samples) for f in families if f.name.startswith("distmon_rank_"))
    job_series = sum(len(f.samples) for f in families) - rank_series
    times, text = [], b""
    for _ in range(repeats):
        start = time.perf_counter()
        text = generate_latest(registry)
        times.append((time.perf_counter() - start) * 1000)
    total = rank_series + job_series
    return rank_series // world, job_series, total, len(text), len(gzip.compress(text)), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 1024, 8192])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("| ranks | series per rank | per job | series in all | bytes per scrape | gzipped | ms per scrape |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for world in args.ranks:
        per_rank, per_job, total, size, zipped, ms = measure(world, args.repeats)
        print(f"| {world} | {per_rank} | {per_job} | {total:,} | {size:,} | {zipped:,} | {ms:.0f} |", flush=True)


if __name__ == "__main__":
    main()
