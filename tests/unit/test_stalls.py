"""Stalls without a sequence-number story, where a stalled rank is in words, stacks from
outside with py-spy, and how a job killed while hung ends: fast tests on synthetic reports,
and py-spy on a real process."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace

import pytest

from distmon.monitor.outside.sight import SPAN, Seen
from distmon.monitor.outside.verdicts import Moved
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.readback import Postmortem
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.detector import Detector
from distmon.monitor.rules.failures import rank_lost
from distmon.monitor.rules.stalls import stall
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import CRITICAL, WARNING, AlertBook, Finding
from distmon.monitor.state.limits import LIMITS, Thresholds
from distmon.monitor.state.statuses import STOPPED
from distmon.monitor.state.whereabouts import classify, frame_lines
from distmon.monitor.state.words import stack_lines
from distmon.node.proc import Sample
from distmon.node.pyspy import OutsideStack, dump
from distmon.wire import ExceptionInfo, ExitInfo, GroupStatus, Loader, Report, StackFrame, StepStats, Worker
from tests.support.messages import report

TORCH = "/venv/lib/python3.11/site-packages/torch"
USER = "/home/me/train.py"
T0 = 1000.0

INIT = [
    StackFrame(USER, 120, "<module>"),
    StackFrame(USER, 40, "main", 'dist.init_process_group("nccl")'),
    StackFrame(f"{TORCH}/distributed/c10d_logger.py", 83, "wrapper"),
    StackFrame(f"{TORCH}/distributed/distributed_c10d.py", 1899, "init_process_group"),
]
SLEEPING = [StackFrame(USER, 120, "<module>"), StackFrame(USER, 37, "main", "time.sleep(600)")]
NEXT_BATCH = [
    StackFrame(USER, 120, "<module>"),
    StackFrame(USER, 55, "main", "for step, (x, y) in enumerate(loader):"),
    StackFrame(f"{TORCH}/utils/data/dataloader.py", 733, "__next__"),
    StackFrame(f"{TORCH}/utils/data/dataloader.py", 1468, "_next_data"),
    StackFrame("/usr/lib/python3.11/multiprocessing/connection.py", 440, "_poll"),
    StackFrame("/usr/lib/python3.11/selectors.py", 415, "select"),
]
IN_GETITEM = [
    StackFrame(f"{TORCH}/utils/data/_utils/worker.py", 349, "_worker_loop"),
    StackFrame(f"{TORCH}/utils/data/_utils/fetch.py", 52, "fetch"),
    StackFrame("/home/me/data.py", 31, "__getitem__", "with open(self.paths[i], 'rb') as f:"),
]
GIL = [
    StackFrame(USER, 60, "main", "native.decode(buf)"),
    StackFrame("/home/me/native.so", 0, "decode_frames"),
    StackFrame("/usr/lib/x86_64-linux-gnu/libc.so.6", 0, "clock_nanosleep"),
]


def job_of(*reports: Report, now: float = T0) -> JobState:
    """The job as the monitor has it at ``now``, each report just received and sent then."""
    job = JobState(LIMITS)
    for r in reports:
        r.t = now
        job.apply(r, now)
    return job


def context(now: float, pace: float | None = None, stacks: object = None) -> Context:
    return Context(now=now, pace=pace, probe=lambda host, pid: "alive", limits=Thresholds(), stacks=stacks)


@pytest.mark.parametrize(
    ("frames", "kind"),
    [
        (INIT, "init"),
        (SLEEPING, "sleeping"),
        (NEXT_BATCH, "dataloader"),
        (IN_GETITEM, "file_io"),
        ([*SLEEPING[:1], StackFrame(f"{TORCH}/distributed/distributed_c10d.py", 2800, "all_reduce")], "collective"),
        ([*SLEEPING[:1], StackFrame(f"{TORCH}/serialization.py", 1400, "load")], "file_io"),
        ([*SLEEPING[:1], StackFrame(f"{TORCH}/cuda/__init__.py", 980, "synchronize")], "cuda"),
        ([*SLEEPING[:1], StackFrame("/usr/lib/python3.11/threading.py", 320, "wait")], "lock"),
        ([StackFrame(USER, 9, "main", "x = compute(y)")], "user"),
        (None, "unknown"),
    ],
)
def test_a_stack_is_classified_in_words(frames, kind) -> None:
    assert classify(frames).kind == kind


def test_a_native_call_holding_the_gil_is_named_with_the_users_frame_first() -> None:
    place = classify(GIL, owns_gil=True)
    assert place.kind == "gil" and "clock_nanosleep" in place.words
    lines = frame_lines(GIL)
    assert lines[0].strip() == f"your code: {USER}:60 in main"
    assert lines[1].strip() == "native.decode(buf)"
    assert "clock_nanosleep (libc.so.6)" in lines[-1]


def test_every_alert_shows_a_stalled_stack_in_words_user_frame_first() -> None:
    lines = stack_lines(NEXT_BATCH, depth=2)
    assert [line.strip() for line in lines] == [
        "waiting for a DataLoader batch:",
        f"your code: {USER}:55 in main",
        "for step, (x, y) in enumerate(loader):",
        "inside (innermost last, 2 more above):",
        "multiprocessing/connection.py:440 in _poll",
        "selectors.py:415 in select",
    ]


def test_a_rank_late_to_init_is_named_after_the_startup_wait() -> None:
    def job_at(now: float) -> JobState:
        stalled = {"stalled_since": T0}
        return job_of(
            *(report(r, stack=INIT, **stalled) for r in (0, 1, 3)), report(2, stack=SLEEPING, **stalled), now=now
        )

    assert stall(job_at(T0 + 29), context(T0 + 29)) == []
    (finding,) = stall(job_at(T0 + 31), context(T0 + 31))
    assert finding.ranks == [2] and finding.severity == CRITICAL
    assert finding.summary == (
        "ranks 0-1, 3 wait 31s in init_process_group (rendezvous: waiting for every rank to join) for rank 2"
    )
    assert f"your code: {USER}:37 in main" in finding.detail
    assert "sleeping" in finding.detail


def test_ranks_that_never_reported_are_the_culprits() -> None:
    job = job_of(*(report(r, stack=INIT, world=8, stalled_since=T0) for r in range(6)), now=T0 + 40)
    (finding,) = stall(job, context(T0 + 40))
    assert finding.ranks == [6, 7]
    assert "2 of 8 never reported" in finding.detail and "ranks 6-7 on hosts not heard from" in finding.detail


def _asleep(host: str, pid: int) -> Seen:
    """The prober's last second of a process asleep in clock_nanosleep."""
    first, recent, last = (Sample(pid, t, "S", syscall="clock_nanosleep") for t in (0.0, 2.0 - SPAN, 2.0))
    return Seen(first, last, recent)


def test_a_rank_late_to_init_seen_asleep_is_named_early_as_a_warning() -> None:
    """Seen from outside doing nothing while the others wait in init: named at the start-up's
    early threshold with what it does; critical at the start-up threshold, as before."""

    def job_at(now: float) -> JobState:
        stalled = {"stalled_since": T0}
        return job_of(
            *(report(r, stack=INIT, **stalled) for r in (0, 1, 3)), report(2, stack=SLEEPING, **stalled), now=now
        )

    limits = Thresholds()
    before = replace(context(T0 + limits.init_wait - 1), outside=_asleep)
    assert stall(job_at(before.now), before) == []
    early = replace(context(T0 + limits.init_wait), outside=_asleep)
    (finding,) = stall(job_at(early.now), early)
    assert finding.ranks == [2] and finding.severity == WARNING
    assert finding.summary.startswith(
        "rank 2 is asleep in clock_nanosleep; ranks 0-1, 3 wait 10s in init_process_group"
    )
    assert "A warning for now" in finding.detail
    late = replace(context(T0 + limits.startup_hang + 1), outside=_asleep)
    assert [f.severity for f in stall(job_at(late.now), late)] == [CRITICAL]


def test_a_rank_late_to_init_that_works_waits_for_the_startup_threshold() -> None:
    """A slow import or JIT build before init: nothing early, whatever the wait."""

    def importing(host: str, pid: int) -> Seen:
        first, recent, last = (Sample(pid, t, "R", syscall="running", cpu=t) for t in (0.0, 1.0, 2.0))
        return Seen(first, last, recent)

    ctx = replace(context(T0 + 20), outside=importing)
    job = job_of(
        *(report(r, stack=INIT, stalled_since=T0) for r in (0, 1, 3)),
        report(2, stack=SLEEPING, stalled_since=T0),
        now=ctx.now,
    )
    assert stall(job, ctx) == []


def test_at_scale_ranks_that_never_reported_are_listed_by_host_in_ranges() -> None:
    """128 ranks on node001-node016, 8 a node: nodes 5-8 never came, and one rank of node013."""
    heard = [r for r in range(128) if not 32 <= r < 64 and r != 100]

    def on_its_node(r: int) -> Report:
        return replace(
            report(r, stack=INIT, world=128, stalled_since=T0), host=f"node{r // 8 + 1:03d}", local_rank=r % 8
        )

    job = job_of(*(on_its_node(r) for r in heard), now=T0 + Thresholds().init_wait)
    (finding,) = stall(job, context(job.last_message or 0.0))
    assert finding.ranks == [*range(32, 64), 100] and finding.severity == WARNING
    assert finding.summary.startswith("ranks 32-63 on node005-node008; rank 100 on node013 never reported;"), (
        finding.summary
    )
    assert "    ranks 32-63 on node005-node008" in finding.detail


def test_silent_while_a_collective_is_in_flight_or_a_rank_progresses() -> None:
    in_flight = GroupStatus(id="0", backend="gloo", size=4, ranks=[[0, 4, 1]], timeout=60.0, enqueued=5, completed=4)
    job = job_of(*(report(r, stack=INIT, stalled_since=T0, groups=[in_flight]) for r in range(4)), now=T0 + 60)
    assert stall(job, context(T0 + 60)) == []
    job = job_of(*(report(r, stack=INIT, stalled_since=T0 if r else None) for r in range(4)), now=T0 + 60)
    assert stall(job, context(T0 + 60)) == []


def test_every_dataloader_blocked_names_the_worker_and_shows_its_frame() -> None:
    def waiting(rank: int) -> Report:
        worker = Worker(pid=500 + rank, alive=True, id=1, stack=IN_GETITEM)
        loader = Loader(id=1, expected=2, workers=[Worker(pid=400, alive=True, id=0), worker], waiting=20, worker=1)
        loader.since = T0 - 12
        step = StepStats(n=10, mean=0.1, p50=0.1, max=0.1, last=0.1)
        return report(rank, stack=NEXT_BATCH, stalled_since=T0 - 12, steps=20, step_time=step, loaders=[loader])

    job = job_of(*(waiting(r) for r in range(4)))
    assert stall(job, context(T0 - 3, pace=0.1)) == []
    (finding,) = stall(job, context(T0 + 1, pace=0.1))
    assert finding.ranks == [0, 1, 2, 3]
    assert finding.summary == "all 4 ranks waiting for a DataLoader batch for 13s, none progresses"
    assert "waits for 12s for batch #20 from worker 1 (pid 502, alive)" in finding.detail
    assert "worker 1 is in file I/O:" in finding.detail
    assert "your code: /home/me/data.py:31 in __getitem__" in finding.detail


def test_a_silent_rank_gets_its_stack_from_outside() -> None:
    taken = OutsideStack(frames=GIL, owns_gil=True)
    job = job_of(report(0), now=T0)
    job.apply(report(1, t=T0 + 9), T0 + 9)
    (finding,) = rank_lost(job, context(T0 + 10, stacks=lambda host, pid, since, take: taken))
    assert "from outside with py-spy: holding the GIL in a native call (clock_nanosleep" in finding.detail
    assert f"your code: {USER}:60 in main" in finding.detail
    refused = OutsideStack(error="permission denied tracing pid 100: Yama ptrace_scope is 1")
    (finding,) = rank_lost(job, context(T0 + 10, stacks=lambda host, pid, since, take: refused))
    assert "its stack could not be taken from outside: permission denied tracing pid 100" in finding.detail
    regex = [GIL[0], StackFrame("/usr/lib/python3.11/re/__init__.py", 166, "match")]
    why = "py-spy did not take it: permission denied tracing pid 100: Yama ptrace_scope is 2"
    fallback = OutsideStack(frames=regex, how="faulthandler", partial=why)
    (finding,) = rank_lost(job, context(T0 + 10, stacks=lambda host, pid, since, take: fallback))
    assert "its main thread, from outside with faulthandler: in its own code" in finding.detail
    assert f"(Python frames only: {why})" in finding.detail and f"your code: {USER}:60 in main" in finding.detail


def test_alerts_standing_when_the_job_is_stopped_end_with_it() -> None:
    hang = Finding("stall", "stall", CRITICAL, [2], "stall: ...", "...")
    book = AlertBook()
    book.update([hang], T0)
    assert book.update([], T0 + 1, resolve=False) == [] and "stall" in book.active

    monitor = Monitor(Detector())
    for r in range(4):
        monitor.state.apply(report(r, stack=INIT, t=T0 + 31, stalled_since=T0, world=5), T0 + 31)
    monitor.tick(T0 + 31)
    assert [a.kind for a in monitor.alerts.active.values()] == ["stall"]
    for r in range(4):
        exit = ExitInfo(how="terminated", t=T0 + 40)
        monitor.state.apply(report(r, t=T0 + 40, exit=exit, world=5), T0 + 40)
    assert not [c for c in monitor.tick(T0 + 41) if c.event == "resolved"]
    tracker = OverviewTracker()
    tracker.observe(monitor, T0 + 41)
    assert tracker.overview(monitor, T0 + 41).state == STOPPED
    pm = Postmortem(header={}, state=monitor.state, alerts=monitor.alerts.history)
    assert pm.ending() == (
        "stopped while hung: ranks 0-3 terminated by SIGTERM while the stall alert stood; it ended with the job, "
        "unresolved"
    )
    assert not pm.progressed

    # A worker killed in the same teardown makes its rank raise: still a stop, not a failure.
    dying = ExceptionInfo("RuntimeError", "DataLoader worker (pid(s) 28306) exited unexpectedly", None, [], T0 + 40)
    monitor.state.ranks[0].report.exception = dying
    assert tracker.overview(monitor, T0 + 41).state == STOPPED
    assert pm.ending().startswith("stopped while hung")


GIL_HOLDER = """
import ctypes, sys
def hold_the_gil():
    print("holding", flush=True)
    ctypes.PyDLL(None).sleep(30)
hold_the_gil()
"""


def test_py_spy_takes_the_stack_of_a_process_holding_the_gil() -> None:
    process = subprocess.Popen([sys.executable, "-c", GIL_HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "holding\n"
        time.sleep(0.2)
        taken = dump(process.pid)
    finally:
        process.kill()
        process.wait()
    assert taken.error is None, taken.error
    assert taken.owns_gil
    assert any(f.func == "hold_the_gil" for f in taken.frames or [])
    assert classify(taken.frames, taken.owns_gil).kind == "gil"
    assert dump(process.pid).error is not None  # gone: said, not raised


def test_every_rank_busy_in_the_same_place_is_only_a_warning() -> None:
    saving = [*SLEEPING[:1], StackFrame(f"{TORCH}/serialization.py", 900, "save")]
    job = job_of(*(report(r, stack=saving, stalled_since=T0) for r in range(4)), now=T0 + 31)
    (finding,) = stall(job, context(T0 + 31))
    assert finding.severity == "warning" and finding.ranks == [0, 1, 2, 3]
    assert finding.summary == "all 4 ranks in checkpoint or file I/O for 31s, none progresses"


def test_the_rank_screen_shows_the_worker_that_owes_the_batch_and_its_frame() -> None:
    from distmon.tui.rank_detail import workers_section

    worker = Worker(pid=501, alive=True, id=1, stack=IN_GETITEM)
    loader = Loader(id=1, expected=2, workers=[Worker(pid=500, alive=True, id=0), worker], waiting=7, worker=1)
    loader.since = T0 - 12
    job = job_of(report(0, stack=NEXT_BATCH, stalled_since=T0 - 12, loaders=[loader]))
    shown = workers_section(job.ranks[0]).plain
    assert "the training loop waits for 12s for batch #7, owed by worker 1 (pid 501)" in shown
    assert "data.py:31 in __getitem__" in shown


def test_workers_killed_in_the_teardown_are_no_crash() -> None:
    from distmon.monitor.rules.workers import worker_crash

    died = ExceptionInfo("RuntimeError", "DataLoader worker (pid(s) 28306) exited unexpectedly", None, [], T0)
    torn_down = report(0, exception=died, exit=ExitInfo(how="terminated", t=T0))
    assert worker_crash(job_of(torn_down), context(T0)) == []
    crashed = report(0, exception=died, exit=ExitInfo(how="exception", t=T0))
    [found] = worker_crash(job_of(crashed), context(T0))
    assert found.kind == "worker_crash" and "exited unexpectedly (how, PyTorch's message does not say)" in found.summary
    assert "OOM killer" in found.detail and "exited with code" not in found.detail, "no code its message gives"


def test_a_process_working_while_it_waits_for_a_cpu_says_so() -> None:
    """Its thread runnable but not run (a loaded host, a process just continued): working, and its
    words say why, not ``0.0s of CPU`` alone."""
    waiting = Moved(seconds=9.8, cpu=0.0, read=0, written=0, queued=3.1)
    assert waiting.busy and waiting.words() == "0.0s of CPU in 9.8s, 3.1s more waiting for a CPU (a loaded host)"
    running = Moved(seconds=10.0, cpu=4.0, read=0, written=0, queued=0.5)
    assert running.words() == "4.0s of CPU in 10s"
