"""What a recording costs on disk, version 1 against version 2, and what reading one costs;
prints a markdown table.

    .venv/bin/python benchmarks/bench_recording.py                 # all of it, about five minutes
    .venv/bin/python benchmarks/bench_recording.py sim real read   # any of them

- ``sim``: a simulated healthy job of 64 ranks reporting once a second for ten minutes,
  flushed once a simulated second as the recorder does each real second.
- ``real``: a real healthy 4-rank ``examples/train.py --distmon`` job under torchrun,
  recorded by a real ``distmon record`` for about a minute (``DISTMON_INTERVAL=1``). Its
  version 1 size is that of the same records written uncompressed.
- ``read``: a version 2 recording of 8192 simulated ranks over a few minutes, read back by
  ``read_recording`` alone, by ``distmon report`` and by ``distmon replay --headless``,
  each in a process of its own: records per second and peak resident memory.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack
from simulated import SimJob

from distmon.monitor.recording import writer as recording
from distmon.monitor.recording.format import FORMAT, AlertEvent, BatchRecord, Dropped, MessageRecord, Record, received
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.wire.sockets import Batch

REPO = Path(__file__).resolve().parent.parent
HOUR = 3600


def write_v1(path: str, records: list[Record]) -> None:
    """``records`` as version 1 wrote them: the header, then each record as it is."""
    with open(path, "wb") as f:
        f.write(msgpack.packb({"format": FORMAT, "version": 1, "created": time.time()}))
        for r in records:
            if isinstance(r, MessageRecord):
                f.write(msgpack.packb(["m", r.t, r.payload]))
            elif isinstance(r, BatchRecord):
                for frame in r.frames():
                    f.write(msgpack.packb(["m", r.t, frame]))
            elif isinstance(r, AlertEvent):
                f.write(msgpack.packb(["a", r.t, r.event, r.alert.to_json(), r.alert.key]))
            elif isinstance(r, Dropped):
                f.write(msgpack.packb(["d", r.t, dict(r.dropped + r.unwatched)]))


def rewrite(path: str, records: list[Record], level: int) -> float:
    """``records`` in version 2 at zlib ``level``, flushed once a second of their time, as
    ``distmon record`` flushes; returns the microseconds the writer took a record, flushes
    to disk left out."""
    recording.LEVEL, default = level, recording.LEVEL
    try:
        writer = RecordingWriter(path)
    finally:
        recording.LEVEL = default
    second, took = records[0].t, 0.0
    for r in records:
        if r.t >= second + 1:
            writer.sync()
            second = r.t
        start = time.perf_counter()
        if isinstance(r, MessageRecord):
            writer.message(r.t, r.payload)
        elif isinstance(r, BatchRecord):
            writer.batch(r.t, r.batch)
        elif isinstance(r, AlertEvent):
            writer._write(["a", r.t, r.event, r.alert.to_json(), r.alert.key])
        elif isinstance(r, Dropped):
            writer.dropped(r.t, r.dropped, r.unwatched)
        took += time.perf_counter() - start
    writer.close()
    return took / len(records) * 1e6


def write_v2(path: str, sim: SimJob, seconds: int, batches: bool = False) -> int:
    """The simulated job through :class:`RecordingWriter`, flushed once a simulated second
    (as ``distmon record`` flushes once a real one); each second's reports one batch if
    ``batches``. Returns the messages written."""
    writer = RecordingWriter(path)
    second, frames, n = sim.start, [], 0
    for t, raw in sim.stream(until=seconds):
        if t >= second + 1:
            if batches:
                writer.batch(second + 1, Batch.of(frames))
                frames = []
            writer.sync()
            second += 1
        if batches:
            frames.append(raw)
        else:
            writer.message(t, raw)
        n += 1
    if frames:
        writer.batch(second + 1, Batch.of(frames))
    writer.close()
    return n


def per_rank_hour(size: int, ranks: int, seconds: float) -> str:
    return f"{size / ranks / seconds * HOUR / 1e6:.3f} MB"


def sizes(workdir: Path, name: str, records: list[Record], ranks: int, seconds: float) -> list[str]:
    """Rows for ``records`` written in version 1, and in version 2 at zlib levels 1 and 6."""
    messages = sum(len(r.frames()) for r in records if isinstance(r, MessageRecord | BatchRecord))
    v1 = str(workdir / f"{name}-v1.distmon")
    write_v1(v1, records)
    size1 = os.path.getsize(v1)
    rows = [f"| version 1 | {per_rank_hour(size1, ranks, seconds)} | {size1 / messages:.0f} B | |"]
    for level in (recording.LEVEL, 6):
        path = str(workdir / f"{name}-v2-{level}.distmon")
        cost = rewrite(path, records, level)
        size = os.path.getsize(path)
        rows.append(
            f"| version 2, zlib level {level}{' (distmon)' if level == recording.LEVEL else ''} "
            f"| {per_rank_hour(size, ranks, seconds)} | {size / messages:.0f} B ({size1 / size:.1f}x smaller) "
            f"| {cost:.1f} us |"
        )
    return rows


def bench_sim(workdir: Path) -> list[str]:
    world, seconds = 64, 600
    path = str(workdir / "sim.distmon")
    messages = write_v2(path, SimJob(world=world), seconds)
    rows = [f"| **simulated healthy job**, {world} ranks, {seconds} s, {messages:,} messages | | | |"]
    rows += sizes(workdir, "sim", list(read_recording(path)[1]), world, seconds)
    write_v2(path, SimJob(world=world), seconds, batches=True)
    size = os.path.getsize(path)
    rows.append(
        f"| version 2, each second's reports one batch record | {per_rank_hour(size, world, seconds)} "
        f"| {size / messages:.0f} B | |"
    )
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_real(workdir: Path, seconds: float = 60.0) -> list[str]:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    out = str(workdir / "real-v2.distmon")
    recorder = subprocess.Popen(
        [sys.executable, "-m", "distmon", "record", "--out", out, "--endpoint", endpoint],
        stderr=subprocess.PIPE,
        text=True,
    )
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "DISTMON_INTERVAL": "1"}
    argv = ["torchrun", "--standalone", "--nproc_per_node=4", "examples/train.py", "--distmon", "--steps", "2000"]
    with open(workdir / "train.log", "w") as log:
        job = subprocess.Popen(
            [str(Path(sys.executable).parent / "torchrun"), *argv[1:]],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    time.sleep(seconds)
    healthy = job.poll() is None
    os.killpg(job.pid, signal.SIGTERM)
    job.wait(timeout=60)
    time.sleep(2)
    recorder.send_signal(signal.SIGINT)
    _, err = recorder.communicate(timeout=60)
    records = list(read_recording(out)[1])
    times = [t for t, _ in received(records)]
    span = max(times) - min(times)
    alerts = sum(isinstance(r, AlertEvent) for r in records)
    note = "" if healthy else " (the job ended early: see train.log)"
    print(f"real job: {' '.join(argv)}; {err.strip().splitlines()[-1]}", file=sys.stderr)
    rows = [
        f"| **real 4-rank job** (`{' '.join(argv)}`), {span:.0f} s, {len(times):,} messages, "
        f"{alerts} alert changes{note} | | | |",
        f"| version 2 as `distmon record` wrote it | {per_rank_hour(os.path.getsize(out), 4, span)} | | |",
    ]
    return rows + sizes(workdir, "real", records, 4, span)


READ = """
import resource, sys, time
from distmon.monitor.recording.reader import read_recording
start = time.perf_counter()
n = sum(1 for _ in read_recording(sys.argv[1])[1])
print(n, time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def measured(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, the child's peak RSS in MB, and its stdout."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, done.stdout


def bench_read(workdir: Path, minutes: float) -> list[str]:
    world, seconds = 8192, int(minutes * 60)
    path = str(workdir / "read-v2.distmon")
    start = time.perf_counter()
    messages = write_v2(path, SimJob(world=world, ranks_per_host=8), seconds)
    wrote = time.perf_counter() - start
    size = os.path.getsize(path)
    rows = [
        f"| {world} simulated ranks, {seconds} s: {messages:,} messages, {size / 1e6:.1f} MB "
        f"({per_rank_hour(size, world, seconds)} per rank-hour), written at {messages / wrote:,.0f} msg/s "
        "(simulation included) | | |"
    ]
    # Each child is measured alone: RUSAGE_CHILDREN's peak is the largest child so far, so
    # the lightest goes first.
    _, peak, out = measured([sys.executable, "-c", READ, path])
    n, seconds_read, _ = out.split()
    rows.append(
        f"| `read_recording`, every record | {int(n) / float(seconds_read):,.0f} records/s "
        f"({float(seconds_read):.1f} s) | {peak:.0f} MB |"
    )
    for command in (["report"], ["replay", "--headless"]):
        wall, peak, _ = measured([sys.executable, "-m", "distmon", *command, path])
        rows.append(
            f"| `distmon {' '.join(command)}` | {messages / wall:,.0f} messages/s ({wall:.1f} s) | {peak:.0f} MB |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=["sim", "real", "read"], choices=["sim", "real", "read"])
    parser.add_argument("--minutes", type=float, default=3.0, help="of 8192 ranks, for read")
    parser.add_argument("--seconds", type=float, default=60.0, help="of the real job, for real")
    parser.add_argument("--keep", metavar="DIR", help="write the recordings there, and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.keep or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        if "sim" in args.parts or "real" in args.parts:
            print("| recording | per rank-hour at 1 s | per message | writer's time a record |")
            print("|---|---|---|---|")
            if "sim" in args.parts:
                print("\n".join(bench_sim(workdir)), flush=True)
            if "real" in args.parts:
                print("\n".join(bench_real(workdir, args.seconds)), flush=True)
            print()
        if "read" in args.parts:
            print("| reading version 2 | speed | peak RSS |")
            print("|---|---|---|")
            print("\n".join(bench_read(workdir, args.minutes)), flush=True)


if __name__ == "__main__":
    main()
