"""The rules' verdicts on real processes, with no job: reports built in the test, a prober
looking at real processes (what it sees of one alone is ``test_process_sight.py``), and a
monitor that falls behind.

- start-up: a rank still importing (a real process burning CPU) while the others wait in
  init_process_group is a warning that says so; stopped, it turns critical and says
  ``kill -CONT``;
- a rank the monitor cannot look at (another host, a replay) tells it itself, in its
  report's ``usage``, that it writes: a warning, critical once the writes stop;
- a monitor whose intake overflows (a real LiveFeed with small caps on a real ZeroMQ
  socket, a simulated job sending in real time) says so in one alert without ranks, names
  no rank for the silence it made, and names the real culprit once it has caught up.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distmon.monitor.intake.feeds import LiveFeed, ReplayFeed
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.format import AlertEvent, MessageRecord
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.detector import Detector
from distmon.monitor.rules.stalls import stall
from distmon.monitor.session import Session
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Change, Finding
from distmon.monitor.state.limits import LIMITS, Thresholds
from distmon.wire import Report, StackFrame, Usage, decode, encode
from tests.support.eyes import Watching
from tests.support.messages import sender
from tests.support.simulate import SimJob

HOST = socket.gethostname()
T0 = 1000.0
INIT = [
    StackFrame("/home/me/train.py", 40, "main", 'dist.init_process_group("nccl")'),
    StackFrame("/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 1899, "init_process_group"),
]
IMPORTING = [
    StackFrame("/home/me/train.py", 3, "<module>", "import megatron.core"),
    StackFrame("<frozen importlib._bootstrap>", 1360, "_find_and_load"),
    StackFrame("/venv/lib/python3.11/site-packages/megatron/core/__init__.py", 1, "<module>"),
]


@pytest.fixture
def busy() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield process
    os.kill(process.pid, signal.SIGCONT)
    process.kill()
    process.wait()


def start_up(importer_pid: int, now: float) -> JobState:
    """Ranks 0-2 wait in init_process_group; rank 3, process ``importer_pid``, imports."""
    job = JobState(LIMITS)
    for rank in range(4):
        pid, stack = (importer_pid, IMPORTING) if rank == 3 else (100 + rank, INIT)
        report = Report(
            job="j", rank=rank, world=4, host=HOST, pid=pid, t=now, n=1, interval=1.0, stack=stack, stalled_since=T0
        )
        job.apply(report, now)
    return job


def judged(watching: Watching, job: JobState, now: float, state: str) -> Finding:
    """The stall finding once the node's eye has looked at the importer twice, in ``state``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sight = watching.pump()
        seen = sight.view(HOST, job.report_of(3).pid)
        first, last = (seen.first, seen.last) if seen is not None else (None, None)
        if first is not None and last is not None and last.state == state and last.t - first.t >= 0.5:
            ctx = Context(now=now, pace=None, probe=sight.state, limits=Thresholds(), outside=sight.view)
            (finding,) = stall(job, ctx)
            return finding
        time.sleep(0.05)
    raise AssertionError(f"the prober never saw the process {state}")


def test_a_slow_import_at_start_up_is_a_warning_until_it_stops(busy: subprocess.Popen[bytes]) -> None:
    job = start_up(busy.pid, T0 + 40)
    finding = judged(Watching(HOST), job, T0 + 40, "R")
    assert finding.ranks == [3] and finding.severity == WARNING, finding
    assert finding.summary.startswith("rank 3 is importing modules, "), finding.summary
    assert "ranks 0-2 wait 40s in init_process_group" in finding.summary
    assert "making progress: a pause, not a stop" in finding.detail

    os.kill(busy.pid, signal.SIGSTOP)
    # a fresh eye: the progress before is past
    finding = judged(Watching(HOST), start_up(busy.pid, T0 + 45), T0 + 45, "T")
    assert finding.ranks == [3] and finding.severity == CRITICAL, finding
    assert finding.summary.startswith("rank 3 is stopped (SIGSTOP); ranks 0-2 wait"), finding.summary
    assert f"What to do about rank 3: `kill -CONT {busy.pid}` on {HOST}" in finding.detail


PAUSE = 6.0
"""Seconds the monitor's loop stands still (a slow disk, a busy machine) while ranks send."""
HANG = 16.0
"""When rank 7 hangs: after the monitor has caught up (two intervals and a second after the
first tick after its pause, as the ticks of the paused seconds never run)."""


def test_a_monitor_that_falls_behind_says_so_and_blames_no_rank(endpoint: str) -> None:
    sim = SimJob(world=64, start=time.time() + 0.5).hang(7, at=HANG)
    feed = LiveFeed(endpoint, capacity=40)
    monitor = Monitor(Detector(probe=sim.probe))
    session = Session(feed, monitor)
    changes: list[tuple[float, Change]] = []
    paused = (sim.start + 3, sim.start + 3 + PAUSE)
    try:
        with sender(endpoint, linger=0) as push:
            for t, raw in sim.stream(until=HANG + 11):
                time.sleep(max(0.0, t - time.time()))
                push.send(raw)
                if not paused[0] <= t < paused[1]:
                    changes += session.run_timed()
            feed.settle()
            changes += session.run_timed()
    finally:
        feed.close()
    raised = [(t - sim.start, c.alert) for t, c in changes if c.event == "raised"]
    summary = [(round(t), a.kind, a.ranks, a.summary) for t, a in raised]
    assert monitor.state.dropped["overflow"] > 0
    # the pause is one incident, one alert; a host loaded past its cores may put the monitor
    # behind again later, a second incident, which names no rank either
    behind = [a for t, a in raised if a.kind == "monitor_behind" and t < HANG]
    assert len(behind) == 1 and all(a.ranks == [] for _, a in raised if a.kind == "monitor_behind"), summary
    assert (
        behind[0].summary
        == "the monitor is behind: it drops reports it cannot take in; it names no rank for the silence"
    )
    assert "It has dropped " in behind[0].detail
    assert behind[0].resolved is not None and behind[0].resolved - sim.start < HANG, "caught up before the hang"
    named = [(t, a) for t, a in raised if a.ranks]
    assert [(a.kind, a.ranks) for _, a in named] == [("hang", [7])], summary
    assert named[0][0] > HANG


def test_a_rank_on_another_host_says_itself_that_it_works(tmp_path: Path) -> None:
    """No prober (a replay, a monitor on a login node): the culprit's own report says it
    writes, so the hang is a warning naming the work; once its writes stop, critical."""
    sim = SimJob(world=4).hang(3, at=10)  # rank 3 stops in save_checkpoint
    writing = Usage(seconds=10.0, cpu=0.5, read=0, written=600 * 1024 * 1024)
    stuck = Usage(seconds=10.0, cpu=0.01, read=0, written=0)

    def records(usage_after: Callable[[float], Usage]) -> Iterator[MessageRecord]:
        for t, raw in sim.stream(until=30):
            report = decode(raw)
            if report.rank == 3 and t >= sim.start + 10:
                report.usage = usage_after(t - sim.start)
            yield MessageRecord(t, encode(report))

    def hangs(usage_after: Callable[[float], Usage]) -> list[AlertEvent]:
        path = tmp_path / "run.distmon"
        monitor = Monitor(Detector(probe=sim.probe), recorder=RecordingWriter(str(path)))
        list(Session(ReplayFeed(records(usage_after), speed=math.inf, end=sim.start + 30), monitor).drain())
        monitor.close()
        return [r for r in read_recording(str(path))[1] if isinstance(r, AlertEvent) and r.alert.kind == "hang"]

    (raised, *_) = hangs(lambda t: writing)
    assert raised.alert.ranks == [3] and raised.alert.severity == WARNING, raised
    assert raised.alert.summary.startswith("rank 3 is writing a checkpoint, wrote 600.0 MiB in 10s"), (
        raised.alert.summary
    )
    assert "by its own report" in raised.alert.detail

    events = hangs(lambda t: writing if t < 20 else stuck)
    assert [e.event for e in events][:1] == ["raised"] and events[0].alert.severity == WARNING
    assert events[-1].alert.severity == CRITICAL and {e.alert.key for e in events} == {"hang"}
    assert [e.event for e in events].count("raised") == 1
