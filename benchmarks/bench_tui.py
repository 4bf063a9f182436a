"""What the terminal UI costs: redraw time by job size, CPU share while a job reports live,
and memory once the histories are full.

    .venv/bin/python benchmarks/bench_tui.py                  # all three, a few minutes
    .venv/bin/python benchmarks/bench_tui.py redraw           # one of: redraw, cpu, memory
    .venv/bin/python benchmarks/bench_tui.py redraw 8192 131072   # the redraw, at these sizes

Goals (issue 4): a redraw of 4096 ranks in 20 ms or less (Textual's DataTable measured
238 ms); the watcher's memory after an hour of 4096 ranks at most 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

import psutil
import zmq
from bench_scale import second, templates
from simulated import SimJob, drive

from distmon.monitor.pipeline import Monitor
from distmon.tui.app import build_app
from distmon.wire.sockets import Batch

START = 1_700_000_000.0


class StillFeed:
    """A feed with nothing more to say, stopped at ``t``: the state is all in the monitor."""

    def __init__(self, t: float) -> None:
        self.t = t

    def take(self, limit: int) -> list[tuple[float, bytes]]:
        return []

    def take_losses(self) -> tuple[Counter[str], Counter[str]]:
        return Counter(), Counter()

    def now(self) -> float:
        return self.t

    def close(self) -> None:
        pass


def hung(world: int) -> tuple[Monitor, float]:
    """A monitor that has watched ``world`` ranks run, then hang on one rank: 20 s, then 20 s
    of the hang, and the time it stopped at. Beyond 4096 ranks the simulator cannot make
    that in good time: the reports are pre-encoded as :mod:`bench_scale` sends them, 5 s
    healthy and 25 s hung, one batch a second."""
    monitor = Monitor()
    if world <= 4096:
        sim = SimJob(world=world, ranks_per_host=8, start=START).hang(world // 3, at=20)
        drive(sim, monitor, until=40)
        return monitor, START + 40
    encoded, healthy, seconds = templates(range(world), world, interval=1), 5, 30
    for k in range(seconds):
        monitor.ingest_batch(Batch.of([bytes(frame) for _, frame in second(encoded, k, healthy, 1)]), START + k)
        monitor.tick(START + k)
    return monitor, START + seconds


async def time_redraws(monitor: Monitor, end: float, size: tuple[int, int], repeats: int = 30) -> dict[str, float]:
    app = build_app(StillFeed(end), monitor)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        compositor = app.screen._compositor
        update, paint = [], []
        for i in range(repeats):
            app.feed.t = end + i * 0.25  # a new moment: every age on screen changes
            t0 = time.perf_counter()
            app.redraw()
            t1 = time.perf_counter()
            compositor.render_update(full=True)
            t2 = time.perf_counter()
            update.append(t1 - t0)
            paint.append(t2 - t1)
    return {
        "update_ms": statistics.median(update) * 1000,
        "paint_ms": statistics.median(paint) * 1000,
        "total_ms": statistics.median(u + p for u, p in zip(update, paint, strict=True)) * 1000,
    }


def bench_redraw(worlds: list[int]) -> None:
    print("redraw cost (median of 30; update = state into widgets, paint = full screen render)")
    print(f"{'ranks':>6} {'terminal':>9} {'update ms':>10} {'paint ms':>9} {'total ms':>9}")
    for world in worlds:
        monitor, end = hung(world)
        for size in ((80, 24), (200, 60)):
            r = asyncio.run(time_redraws(monitor, end, size))
            print(
                f"{world:>6} {size[0]:>4}x{size[1]:<4} {r['update_ms']:>10.1f} "
                f"{r['paint_ms']:>9.1f} {r['total_ms']:>9.1f}"
            )


def send(endpoint: str, world: int, seconds: float) -> None:
    """Stand-in for ``world`` ranks: each report sent at its moment, once a second each."""
    context = zmq.Context()
    push = context.socket(zmq.DEALER)
    push.connect(endpoint)
    start = time.time()
    sim = SimJob(world=world, ranks_per_host=8, start=start)
    for t, raw in sim.stream(until=seconds):
        delay = t - time.time()
        if delay > 0:
            time.sleep(delay)
        push.send(raw)
    push.close(linger=1000)
    context.term()


async def watch_cpu(endpoint: str, world: int, seconds: float) -> tuple[float, int]:
    from distmon.monitor.intake.feeds import LiveFeed

    app = build_app(LiveFeed(endpoint))
    async with app.run_test(size=(160, 50)) as pilot:
        sender = subprocess.Popen([sys.executable, __file__, "send", endpoint, str(world), str(seconds + 2)])
        await pilot.pause(5)  # the first full round of reports, then measure
        cpu0, wall0 = time.process_time(), time.monotonic()
        await pilot.pause(seconds - 5)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        ranks = len(app.monitor.state.ranks)
        sender.wait(timeout=60)
    return cpu / wall, ranks


def bench_cpu(world: int = 1024, seconds: float = 35.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        share, ranks = asyncio.run(watch_cpu(f"ipc://{tmp}/bench.sock", world, seconds))
    print(f"watcher CPU while {world} ranks report at 1 Hz (160x50, live ZeroMQ, incl. UI)")
    print(f"  ranks seen {ranks}, CPU {share * 100:.1f}% of one core over {seconds - 5:.0f} s")


class SimFeed:
    """A simulated job's stream as fast as it is taken, on the stream's own clock."""

    def __init__(self, sim: SimJob, until: float) -> None:
        self._stream = sim.stream(until=until)
        self.t = sim.start

    def take(self, limit: int) -> list[tuple[float, bytes]]:
        items = list(itertools.islice(self._stream, limit))
        if items:
            self.t = items[-1][0]
        return items

    def now(self) -> float:
        return self.t

    def close(self) -> None:
        pass


def bench_memory(world: int = 4096, seconds: float = 150.0) -> None:
    """The histories hold 120 samples per rank, so memory stops growing after two minutes:
    run long enough to fill them and check that it has levelled off."""
    feed = SimFeed(SimJob(world=world, ranks_per_host=8, start=START), until=seconds)
    app = build_app(feed)
    process = psutil.Process()
    print(f"watcher memory, {world} ranks at 1 Hz through the app's session")
    print(f"{'feed s':>7} {'RSS MB':>7} {'peak MB':>8} {'msgs/s':>8}")
    mark, t0 = START, time.perf_counter()
    messages = 0
    while app.session.run(10_000) or app.session.taken:
        messages += app.session.taken
        if feed.t - mark >= 30:
            mark = feed.t
            rss = process.memory_info().rss / 2**20
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            rate = messages / (time.perf_counter() - t0)
            print(f"{feed.t - START:>7.0f} {rss:>7.0f} {peak:>8.0f} {rate:>8.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="?", default="all", choices=["all", "redraw", "cpu", "memory", "send"])
    parser.add_argument("args", nargs="*")
    args = parser.parse_args()
    if args.which == "send":
        endpoint, world, seconds = args.args
        send(endpoint, int(world), float(seconds))
        return
    if args.which in ("all", "redraw"):
        bench_redraw([int(world) for world in args.args] or [64, 512, 4096])
    if args.which in ("all", "cpu"):
        bench_cpu()
    if args.which in ("all", "memory"):
        bench_memory()


if __name__ == "__main__":
    main()
