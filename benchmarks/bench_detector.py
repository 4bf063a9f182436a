"""The monitor side at scale, on simulated ranks: the detector's cost per tick, the
recorder's sustained intake, and the recording's size per rank-hour.

    .venv/bin/python benchmarks/bench_detector.py [--ranks 8 512 8192]

Prints markdown tables. Simulated streams stand in for jobs this machine cannot run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zmq
from simulated import Layout, SimJob, drive

from distmon.cli import relax_gc
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import received
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.wire.sockets import Batch

HERE = Path(__file__).resolve().parent
LAYOUT = Layout(tp=8, pp=4)
"""The many-group job: tensor 8 x pipeline 4 x data parallel (world / 32)."""
WIDE = Layout(tp=8, pp=4, extra=32)
"""The same, each rank in 32 groups more (36 in all): the group columns grown that wide."""


def tick_cost(world: int, repeats: int, hang: bool, layout: Layout | None = None) -> tuple[float, float, int]:
    """Median and worst ms per detector tick, on a job with 30 s of history."""
    sim = SimJob(world=world, ranks_per_host=8, layout=layout)
    if hang:
        sim.hang(world // 3, at=20)
    monitor = Monitor(Detector())
    for second in range(30):
        ingest_second(monitor, sim, second)
    times = []
    for k in range(repeats):
        ingest_second(monitor, sim, 30 + k)  # untimed
        start = time.perf_counter()
        monitor.tick(sim.start + 31 + k)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times), len(monitor.alerts.active)


def ingest_second(monitor: Monitor, sim: SimJob, second: int) -> None:
    """A second of the job's reports, taken in as the monitor's loop takes them: one batch."""
    items = list(sim.stream(until=second + 1, since=second))
    if items:
        times = np.array([t for t, _ in items])
        monitor.ingest_batch(Batch.of([raw for _, raw in items]), float(times[-1]), times)


def detection(world: int, layout: Layout) -> tuple[float | None, list[list[int]]]:
    """Seconds from one rank's stall to the first alert, and the ranks each alert named."""
    sim = SimJob(world=world, ranks_per_host=8, layout=layout).hang(world // 3, at=20)
    changes = drive(sim, Monitor(Detector()), until=32)
    raised = [(t - sim.start - 20, c.alert.ranks) for t, c in changes if c.event == "raised"]
    return (raised[0][0] if raised else None), [ranks for _, ranks in raised]


def intake_in_process(world: int, seconds: float, path: str) -> tuple[float, int]:
    """Messages/s through decode, state and recording, and the bytes written per message:
    a second of the job's reports at a time, one batch, as the monitor's loop takes them."""
    sim = SimJob(world=world)
    seconds_of = [Batch.of([raw for _, raw in sim.stream(until=k + 1, since=k)]) for k in range(5)]
    monitor = Monitor(Detector(), recorder=RecordingWriter(path))
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for batch in seconds_of:
            monitor.ingest_batch(batch, time.time())
            n += len(batch)
    rate = n / (time.perf_counter() - start)
    monitor.close()
    return rate, os.path.getsize(path) // n


SENDER = """
import sys, time, zmq
sys.path.insert(0, sys.argv[3])
from simulated import SimJob
msgs = [raw for _, raw in SimJob(world=512).stream(until=5)]
ctx = zmq.Context(); s = ctx.socket(zmq.DEALER); s.connect(sys.argv[1])
time.sleep(0.5)
end = time.time() + float(sys.argv[2]); n = 0
while time.time() < end:
    for m in msgs:
        s.send(m); n += 1
print(n); s.close(linger=5000); ctx.term()
"""


def intake_over_zeromq(seconds: float, workdir: str) -> tuple[int, int, float]:
    """A real `distmon record` fed as fast as one sender process can push: sent, recorded, and
    its intake in msg/s, from the receive times in its own recording."""
    endpoint = f"ipc://{workdir}/bench.sock"
    out = os.path.join(workdir, "zmq.distmon")
    recorder = subprocess.Popen(
        [sys.executable, "-m", "distmon", "record", "--out", out, "--endpoint", endpoint],
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    sent = int(
        subprocess.run(
            [sys.executable, "-c", SENDER, endpoint, str(seconds), str(HERE)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    time.sleep(2.0)
    recorder.send_signal(2)
    recorder.communicate(timeout=30)
    _, records = read_recording(out)
    times = [t for t, _ in received(records)]
    return sent, len(times), len(times) / (times[-1] - times[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 512, 8192])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    relax_gc()  # as every distmon command does

    print("## Detector cost per tick (one tick a second)\n")
    print("| ranks | groups | job | median ms | worst ms | active alerts |")
    print("|---:|---|---|---:|---:|---:|")
    for world in args.ranks:
        for layout in (None, LAYOUT, WIDE) if world % 32 == 0 else (None,):
            for hang in (False, True):
                median, worst, alerts = tick_cost(world, args.repeats, hang, layout)
                job = "a hang in progress" if hang else "healthy"
                groups = "world only" if layout is None else f"tp {layout.tp} x pp {layout.pp} x dp {world // 32}"
                groups += f", {layout.extra} more" if layout is not None and layout.extra else ""
                print(f"| {world} | {groups} | {job} | {median:.2f} | {worst:.2f} | {alerts} |", flush=True)

    print("\n## One rank stalls in a tp 8 x pp 4 x dp job\n")
    print("| ranks | seconds to the alert | ranks named, per alert |")
    print("|---:|---:|---|")
    for world in args.ranks:
        if world % 32 == 0:
            after, named = detection(world, LAYOUT)
            print(f"| {world} | {after} | {named} (stalled: {world // 3}) |", flush=True)

    with tempfile.TemporaryDirectory() as workdir:
        rate, per_message = intake_in_process(512, args.seconds, os.path.join(workdir, "in.distmon"))
        sent, recorded, zmq_rate = intake_over_zeromq(args.seconds, workdir)
    hour = per_message * 3600
    print("\n## Recorder intake and size\n")
    print("| measure | value |")
    print("|---|---:|")
    print(f"| decode + state + record, in process | {rate:,.0f} msg/s |")
    print(f"| `distmon record` over ZeroMQ (one sender) | {zmq_rate:,.0f} msg/s ({recorded:,} of {sent:,} sent) |")
    print(f"| recording size per message | {per_message} B |")
    print(f"| recording size per rank-hour at 1 Hz | {hour / 1e6:.2f} MB |")
    print(f"| ... for 8192 ranks | {hour * 8192 / 1e9:.1f} GB/hour |")
    print(f"\npyzmq {zmq.__version__}, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
