"""A long run of a large job, faster than real time: does the monitor stay the same size, its
tick the same length, its recording grow as documented? And how long does ``distmon report``
take on what it recorded?

    .venv/bin/python benchmarks/bench_soak.py [--ranks 8192] [--seconds 3600] [--json]

The job's ranks report every second through four relays: each second's frames are built from
two pre-encoded seconds of a simulated job (healthy, and a hang), their clocks and counters
moved on, and read by the relays' own code (:mod:`distmon.wire.arrays`: frames as arrays, only
news whole). From the fifth minute, every ``--every`` seconds, rank ``N // 3`` stops for
``--incident`` seconds, then the job goes on: the first incident falls within the first ten
minutes, after which the monitor's memory should not grow. A monitor as ``distmon record``
runs it (the Session, a recording) takes the relays' batches from a feed whose clock runs as
fast as the monitor takes them, so an hour takes minutes. Each simulated minute it notes the
monitor's resident memory (this process: the relays' part is a few arrays), the detector's
ticks and the recording's size; at the end ``distmon report`` reads the recording in a process
of its own.

With ``--json`` the last line is one JSON object: ``ranks``, ``seconds``, ``wall_s`` (the
run's own time), ``rss_mb`` (per minute), then from the tenth minute on the lowest and highest
of the minutes the job ran healthy (``rss_healthy_mb``, and ``rss_healthy_spread``, their
difference over the lowest) and of the minutes during an incident or the minute after it
(``rss_incident_mb``: every rank's stack is kept then), ``tick_ms`` (median,
99th percentile and worst per ten minutes), ``recording_mb`` (per minute),
``detector_ms`` (the same of the detector alone: the tick also records and syncs the recording),
``mb_per_rank_hour``, ``said`` (each alert raised or resolved), ``report_s`` and ``report_rss_mb``
(``distmon report`` on the recording), ``load``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
from simulated import SimJob

from distmon.cli import relax_gc
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import ColumnRecord
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.session import Session
from distmon.node.news import News
from distmon.wire import encode
from distmon.wire.arrays import CHANNEL, GROUP, HEADER, Parsed, parse
from distmon.wire.column_batch import ColumnBatch
from distmon.wire.sockets import Batch, Relay

HANG_AT = 30.0
"""The template job's second at which its culprit stalls."""
HEALTHY, HUNG = HANG_AT - 2, HANG_AT + 3
"""The template seconds: healthy, and three seconds into the hang (every rank flagged)."""
STEP_TIME = 0.2
COLLECTIVES_PER_STEP = 2
RELAYS = 4
FIRST_INCIDENT = 300
NOW = ("t",)
"""Header times that are the moment of the report."""
EVENTS = ("last_step_t", "stalled_since")
"""Header times of something that happened: they move with the job only while it runs."""
COUNTERS = {"steps": 1 / STEP_TIME, "forwards": 1 / STEP_TIME}
ROW_COUNTERS = {"enqueued": COLLECTIVES_PER_STEP / STEP_TIME, "completed": COLLECTIVES_PER_STEP / STEP_TIME}


class Template:
    """One relay's frames of one template second, and where each number to move lies in them."""

    def __init__(self, frames: list[bytes], relay: Relay, second: float, ran: float) -> None:
        self.batch = Batch.of(frames, relay=relay)
        self.second = second
        """When it was sent, on the job's clock."""
        self.ran = ran
        """How long the job had run by then, stopped or not."""
        parsed = parse(self.batch)
        starts = np.frombuffer(self.batch.offsets, dtype=np.uint32)[:-1].astype(np.int64)
        self.header = {name: starts + HEADER.fields[name][1] for name in HEADER.names}
        row = starts[parsed.group_of] + HEADER.itemsize + GROUP.itemsize * parsed.group_slot
        self.row = {name: row + GROUP.fields[name][1] for name in GROUP.names}
        self.values = {name: parsed.headers[name].copy() for name in HEADER.names}
        self.row_values = {name: parsed.groups[name].copy() for name in GROUP.names}
        assert not len(parsed.channels) and CHANNEL.itemsize

    def at(self, now: float, shift: float, ran: float) -> Batch:
        """The frames as sent at ``now``, what happened in the template moved by ``shift``
        seconds, the job having run ``ran`` seconds."""
        buf = np.frombuffer(self.batch.payload, dtype=np.uint8).copy()
        more = ran - self.ran
        moved = {name: self.values[name] + (now - self.second) for name in NOW}
        moved |= {name: self.values[name] + shift for name in EVENTS}
        moved |= {name: self.values[name] + np.int64(rate * more) for name, rate in COUNTERS.items()}
        moved["n"] = (self.values["n"].astype(np.int64) + int(now - self.second)).astype(np.uint32)
        for name, value in moved.items():
            _write(buf, self.header[name], value)
        rows = {name: self.row_values[name] + np.int64(rate * more) for name, rate in ROW_COUNTERS.items()}
        rows["since"] = self.row_values["since"] + shift
        for name, value in rows.items():
            _write(buf, self.row[name], value)
        return Batch(buf.tobytes(), self.batch.offsets, self.batch.relays, self.batch.via)


def _write(buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], values: npt.NDArray[np.generic]) -> None:
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(len(values), values.dtype.itemsize)
    buf[at[:, None] + np.arange(values.dtype.itemsize)] = raw


def templates(ranks: int) -> tuple[list[Template], list[Template], float]:
    """Per relay, a healthy second and a second into the hang, and the job's start."""
    sim = SimJob(world=ranks, ranks_per_host=8, step_time=STEP_TIME, collectives_per_step=COLLECTIVES_PER_STEP)
    sim.hang(ranks // 3, at=HANG_AT)
    per = -(-ranks // RELAYS)
    relays = [Relay(f"node{i:03d}-relay:{1000 + i}", f"node{i:03d}-relay") for i in range(RELAYS)]
    made: list[list[Template]] = [[], []]
    for second, out in zip((HEALTHY, HUNG), made, strict=True):
        for i, relay in enumerate(relays):
            mine = range(i * per, min(ranks, (i + 1) * per))
            frames = [encode(r) for rank in mine if (r := sim.report(rank, sim.start + second))]
            out.append(Template(frames, relay, sim.start + second, min(second, HANG_AT)))
    return made[0], made[1], sim.start


def job(ranks: int, seconds: int, every: int, incident: int) -> Iterator[ColumnRecord]:
    """The relays' batches, a second at a time: ``incident`` seconds of a hang every ``every``,
    from the fifth minute."""
    healthy, hung, start = templates(ranks)
    news = [News(seed=i) for i in range(RELAYS)]
    ran = HEALTHY
    stopped = math.inf
    for k in range(seconds):
        now = start + HEALTHY + k
        stalled = k >= FIRST_INCIDENT and (k - FIRST_INCIDENT) % every < incident
        if not stalled:
            stopped = math.inf
            ran += 1.0
        elif stopped == math.inf:
            stopped = now
        for i in range(RELAYS):
            if stalled:  # the template's hang began at HANG_AT: this one at ``stopped``
                batch = hung[i].at(now, stopped - (start + HANG_AT), ran)
            else:
                batch = healthy[i].at(now, now - healthy[i].second, ran)
            parsed: Parsed = parse(batch)
            sent = news[i].choose(parsed, now)
            yield ColumnRecord(now + 0.5, ColumnBatch.of(parsed, sent, batch.relays))


def in_incident(second: float, every: int, incident: int) -> bool:
    """Whether ``second`` (of the job's run) falls in an incident or the minute after it."""
    return second >= FIRST_INCIDENT and (second - FIRST_INCIDENT) % every < incident + 60


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(ranks: int, seconds: int, every: int, incident: int, out: Path) -> dict[str, object]:
    relax_gc()
    load = os.getloadavg()[0]
    monitor = Monitor(recorder=RecordingWriter(str(out)))
    ticks: list[tuple[float, float, float]] = []
    """(time, the whole tick's ms, the detector's ms): the tick records and syncs the recording."""
    tick, evaluate = monitor.tick, monitor.detector.evaluate
    judged: list[float] = []

    def timed(now: float) -> list:  # type: ignore[type-arg]
        began = time.perf_counter()
        changes = tick(now)
        ticks.append((now, (time.perf_counter() - began) * 1000, judged.pop() if judged else 0.0))
        return changes

    def judging(state, now):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        findings = evaluate(state, now)
        judged.append((time.perf_counter() - began) * 1000)
        return findings

    monitor.tick = timed  # type: ignore[method-assign]
    monitor.detector.evaluate = judging  # type: ignore[method-assign]
    records = job(ranks, seconds, every, incident)
    first = next(records)
    feed = ReplayFeed(itertools.chain([first], records), speed=math.inf)
    session = Session(feed, monitor)
    minutes: list[tuple[float, float, bool]] = []
    """Per simulated minute: resident MB, the recording's MB, whether an incident was on."""
    said: list[str] = []
    began = time.monotonic()
    next_minute = first.t + 60
    while not feed.finished:
        for t, change in session.run_timed(limit=RELAYS):
            if change.event != "updated":
                said.append(f"+{t - first.t:.0f}s {change.event} {change.alert.kind} {change.alert.ranks[:4]}")
        if feed.now() >= next_minute:
            assert monitor.recorder is not None
            monitor.recorder.sync()
            minutes.append((rss_mb(), out.stat().st_size / 2**20, in_incident(next_minute - first.t, every, incident)))
            next_minute += 60
    session.finish()
    session.close()
    wall = time.monotonic() - began
    report_s, report_rss = time_report(out)
    healthy = [rss for rss, _, troubled in minutes[10:] if not troubled]
    troubled = [rss for rss, _, troubled in minutes[10:] if troubled]
    by_ten: dict[int, list[tuple[float, float]]] = {}
    for t, ms, detector_ms in ticks:
        by_ten.setdefault(int((t - first.t) // 600), []).append((ms, detector_ms))
    size = out.stat().st_size / 2**20
    return {
        "ranks": ranks,
        "seconds": seconds,
        "wall_s": round(wall, 1),
        "rss_mb": [round(rss) for rss, _, _ in minutes],
        "rss_healthy_mb": [round(min(healthy)), round(max(healthy))] if healthy else None,
        "rss_healthy_spread": round((max(healthy) - min(healthy)) / min(healthy), 3) if healthy else None,
        "rss_incident_mb": [round(min(troubled)), round(max(troubled))] if troubled else None,
        "tick_ms": [_spread([ms for ms, _ in ten]) for _, ten in sorted(by_ten.items())],
        "detector_ms": [_spread([ms for _, ms in ten]) for _, ten in sorted(by_ten.items())],
        "recording_mb": [round(mb, 1) for _, mb, _ in minutes],
        "mb_per_rank_hour": round(size / ranks / (seconds / 3600), 4),
        "said": said,
        "report_s": report_s,
        "report_rss_mb": report_rss,
        "load": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def _spread(ms: list[float]) -> list[float]:
    """Median, 99th percentile and worst."""
    return [round(statistics.median(ms), 1), round(float(np.percentile(ms, 99)), 1), round(max(ms), 1)]


def time_report(path: Path) -> tuple[float, float]:
    """``distmon report`` on ``path`` in a process of its own: seconds, and its peak RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "distmon", "report", str(path)], capture_output=True, text=True)
    seconds = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return round(seconds, 1), round(peak / 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=8192)
    parser.add_argument("--seconds", type=int, default=3600, help="simulated seconds (default: an hour)")
    parser.add_argument("--every", type=int, default=600, help="seconds between incidents (default: 600)")
    parser.add_argument("--incident", type=int, default=60, help="seconds each incident lasts (default: 60)")
    parser.add_argument("--out", help="the recording (default: a temporary file, removed)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        out = Path(args.out or Path(tmp) / "soak.distmon")
        result = run(args.ranks, args.seconds, args.every, args.incident, out)
    for name, value in result.items():
        print(f"{name}: {value}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
