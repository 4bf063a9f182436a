"""What /proc and py-spy see of one real process, with no job and no rule: a process
sleeping, stopped, a zombie, blocked opening a FIFO, holding the GIL in native code, busy,
writing; each judged in words with its next step, and the prober and py-spy doing it off the
caller's thread. The rules' verdicts on such sights are in ``test_rules_on_real_processes.py``,
whole jobs whose ranks stop so in ``test_stopped_and_working_ranks_jobs.py``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distmon.monitor.outside.sight import ALIVE, GONE, Seen
from distmon.monitor.outside.verdicts import activity, judge_process
from distmon.node.eye import NodeEye
from distmon.node.prober import CLOSE_FOR, CLOSE_PERIOD, WATCH_PERIOD, Prober
from distmon.node.proc import GIL_WAIT_WAKES, Sample, look
from distmon.node.pyspy import CANNOT_SUSPEND, OutsideStack, dump, executable
from distmon.wire import ExitInfo, Report, StackFrame, encode
from distmon.wire.arrays import parse
from distmon.wire.sockets import Batch
from tests.support.eyes import Watching

HOST = "here"


def wait_for(condition: Callable[[], object], timeout: float = 10.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.fixture
def python() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts ``python -c CODE``; every process started is killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(code: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        started.append(process)
        assert process.stdout is not None
        assert process.stdout.readline() == b"ready\n"  # its own code runs: the interpreter's start is over
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
        process.wait()


def two_looks(pid: int, apart: float = 1.0) -> tuple[Sample, Sample]:
    first = look(pid, time.monotonic())
    time.sleep(apart)
    last = look(pid, time.monotonic())
    assert first is not None and last is not None
    return first, last


SLEEPER = "import time; print('ready', flush=True); time.sleep(60)"


def test_a_sleeping_process(python) -> None:
    p = python(SLEEPER)
    first, last = wait_for(lambda: (s := two_looks(p.pid, 0.5))[1].syscall == "clock_nanosleep" and s)
    assert last.state == "S" and last.wchan
    verdict = judge_process(HOST, first, last)
    assert verdict.kind == "sleeping", verdict
    assert "asleep in clock_nanosleep" in verdict.words
    assert f"py-spy dump --native --pid {p.pid}" in verdict.next_step


def test_a_stopped_process(python) -> None:
    p = python(SLEEPER)
    os.kill(p.pid, signal.SIGSTOP)
    last = wait_for(lambda: (s := look(p.pid, time.monotonic())) and s.state == "T" and s)
    verdict = judge_process(HOST, last, last)
    assert verdict.kind == "sigstopped", verdict
    assert "SIGSTOP" in verdict.words
    assert verdict.next_step.startswith(f"`kill -CONT {p.pid}` on {HOST}")


def test_a_zombie_and_a_gone_process(python) -> None:
    p = python("print('ready', flush=True)")
    last = wait_for(lambda: (s := look(p.pid, time.monotonic())) and s.state == "Z" and s)
    verdict = judge_process(HOST, last, last)
    assert verdict.kind == "zombie", verdict
    assert f"its parent, pid {os.getpid()}" in verdict.words and str(os.getpid()) in verdict.next_step
    p.wait()
    assert look(p.pid, time.monotonic()) is None
    assert judge_process(HOST, last, None).kind == "gone"


def test_a_process_blocked_opening_a_fifo(python, tmp_path: Path) -> None:
    """open() on a FIFO with no reader never returns: a hung mount's open, on any machine."""
    fifo = tmp_path / "step_1200.pt"
    os.mkfifo(fifo)
    p = python(f"print('ready', flush=True); open({str(fifo)!r}, 'wb')")
    last = wait_for(lambda: (s := look(p.pid, time.monotonic())) and s.syscall == "openat" and s)
    assert last.target == str(fifo) and last.fifo
    assert last.mount is not None and str(fifo).startswith(last.mount.point)
    verdict = judge_process(HOST, last, last)
    assert verdict.kind == "file_io", verdict
    assert verdict.words.startswith(f"is blocked in the kernel opening {fifo} (openat, a FIFO, on {last.mount.point}")
    assert verdict.next_step.startswith(f"check that file system on {HOST}")
    assert f"in openat on {fifo}" in verdict.evidence[0]


def test_a_relative_path_is_made_absolute(python, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "relative.fifo")
    code = f"import os; os.chdir({str(tmp_path)!r}); print('ready', flush=True); open('relative.fifo', 'rb')"
    p = python(code)
    last = wait_for(lambda: (s := look(p.pid, time.monotonic())) and s.syscall == "openat" and s)
    assert last.target == str(tmp_path / "relative.fifo")


def test_a_busy_process_and_a_writing_one_are_working(python, tmp_path: Path) -> None:
    busy = python("print('ready', flush=True)\nwhile True: pass")
    first, last = two_looks(busy.pid)
    verdict = judge_process(HOST, first, last)
    assert verdict.kind == "working", verdict
    assert "s of CPU in" in verdict.words

    out = tmp_path / "ckpt.bin"
    code = f"f = open({str(out)!r}, 'wb'); print('ready', flush=True)\nwhile True: f.write(bytes(1 << 20)); f.flush()"
    writer = python(code)
    first, last = two_looks(writer.pid)
    verdict = judge_process(HOST, first, last)
    assert verdict.kind == "working" and "wrote" in verdict.words, verdict


def test_a_process_holding_the_gil_in_native_code(python) -> None:
    if executable() is None:
        pytest.skip("py-spy is not installed")
    p = python("import ctypes; print('ready', flush=True); ctypes.PyDLL(None).sleep(60)")
    taken = wait_for(lambda: (t := dump(p.pid)).frames and t.owns_gil and t)
    first, last = two_looks(p.pid, 0.5)
    verdict = judge_process(HOST, first, last, taken.frames, taken.owns_gil)
    assert verdict.kind == "gil", verdict
    assert verdict.summary == "holds the GIL in native code (sleep)", verdict
    assert "holds the GIL in native code, in sleep (libc" in verdict.words, verdict
    assert "release it there" in verdict.next_step


IN_A_THREAD = """
import sys, threading, time
def train():
    time.sleep(60)
thread = threading.Thread(target=train)
thread.start()
time.sleep(0.2)
print(thread.native_id, flush=True)
print('ready', flush=True)
while True:
    sum(range(1000))
"""


def test_the_training_thread_is_looked_at_by_its_native_id(python) -> None:
    """A Ray Train worker's training function runs in a thread while its main thread runs
    Ray's loop: /proc's task directory and py-spy's os_thread_id tell that thread apart."""
    process = subprocess.Popen([sys.executable, "-c", IN_A_THREAD], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        tid = int(process.stdout.readline())
        assert process.stdout.readline() == b"ready\n"
        whole = wait_for(lambda: (s := look(process.pid, time.monotonic())) and s)
        assert whole.tid is None and whole.syscall != "clock_nanosleep"
        first = wait_for(
            lambda: (s := look(process.pid, time.monotonic(), tid)) and s.syscall == "clock_nanosleep" and s
        )
        time.sleep(0.5)
        last = look(process.pid, time.monotonic(), tid)
        assert last is not None and (last.tid, last.state) == (tid, "S")
        verdict = judge_process(HOST, first, last)
        assert verdict.kind == "sleeping" and "asleep in clock_nanosleep" in verdict.words, verdict
        assert f"/proc/{process.pid}/task/{tid}: State: S" in "\n".join(verdict.evidence)
        if executable() is not None:
            taken = dump(process.pid, tid=tid)
            assert taken.frames and any(f.func == "train" for f in taken.frames), taken
    finally:
        process.kill()
        process.wait()


REPORTER_THEN_REGEX = """
import re, threading, time
def report():
    while True:
        time.sleep(1.0)
reporter = threading.Thread(target=report, daemon=True)
reporter.start()
print(reporter.native_id, flush=True)
input()
re.match(r"(a+)+$", "a" * 40 + "b")
"""


def test_a_thread_waiting_for_the_gil_wakes_two_hundred_times_a_second() -> None:
    """The reporting thread of a rank whose training thread holds the GIL in a C call wakes
    every switch interval to ask for it; waiting for its next report, about once a second."""
    process = subprocess.Popen(
        [sys.executable, "-c", REPORTER_THEN_REGEX], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        reporter = int(process.stdout.readline())

        def rate() -> float:
            first = look(process.pid, time.monotonic(), reporter=reporter)
            time.sleep(0.5)
            last = look(process.pid, time.monotonic(), reporter=reporter)
            assert first and last and first.reporter_wakes is not None and last.reporter_wakes is not None
            return (last.reporter_wakes - first.reporter_wakes) / (last.t - first.t)

        assert rate() < GIL_WAIT_WAKES / 2
        process.stdin.write(b"\n")
        process.stdin.flush()
        time.sleep(1.2)  # the reporting thread's sleep ends: it asks for the GIL from then on
        assert rate() > GIL_WAIT_WAKES  # what the rules take for a wait for the GIL
    finally:
        process.kill()
        process.wait()


def test_a_process_asked_about_again_is_looked_at_at_once(python) -> None:
    """A process watched now and then that a rule asks about anew (the others start waiting
    for it) is looked at at once, not at its next turn: the rule judges it by four looks that
    must agree, and each second waited for them is a second more to the alert."""
    p = python(SLEEPER)
    prober = Prober(period=30.0)
    prober.ask([(p.pid, None, None)])
    wait_for(prober.take)
    time.sleep(CLOSE_FOR + CLOSE_PERIOD)  # asked closely no more: its next look is a period away
    prober.take()
    time.sleep(6 * CLOSE_PERIOD)
    assert len(prober.take()) <= 1, "watched closely no more (one look of the close watch may come late, loaded)"
    prober.ask([(p.pid, None, None)])
    wait_for(prober.take, timeout=10.0)  # its next turn was 30 s away


def test_a_stopped_process_still_shows_its_python_frames(python) -> None:
    """py-spy cannot suspend a stopped process: its Python frames are read as it stands,
    and the result says why the native ones are missing."""
    if executable() is None:
        pytest.skip("py-spy is not installed")
    p = python("import time\ndef checkpoint():\n    time.sleep(60)\nprint('ready', flush=True)\ncheckpoint()")
    wait_for(lambda: (s := look(p.pid, time.monotonic())) and s.syscall == "clock_nanosleep")
    os.kill(p.pid, signal.SIGSTOP)
    wait_for(lambda: (s := look(p.pid, time.monotonic())) and s.state == "T")
    taken = dump(p.pid, stopped=True)
    assert taken.frames and taken.frames[-1].func == "checkpoint", taken
    assert taken.partial == CANNOT_SUSPEND


def test_a_nodes_eye_looks_on_its_own_thread_and_the_sight_holds_what_it_said(python) -> None:
    p = python(SLEEPER)
    watching = Watching(HOST)
    sight = watching.sight
    assert sight.view("elsewhere", p.pid) is None and not sight.watched("elsewhere")
    assert "no distmon relay runs on elsewhere" in (sight.stack("elsewhere", p.pid, 1.0) or OutsideStack()).error
    seen = wait_for(lambda: (v := watching.pump().view(HOST, p.pid)) and v.last and v.first != v.last and v)
    assert isinstance(seen, Seen) and seen.first is not None and seen.first.t < seen.last.t
    assert sight.state(HOST, p.pid) == ALIVE
    os.kill(p.pid, signal.SIGSTOP)
    wait_for(lambda: (v := watching.pump().view(HOST, p.pid)) and v.last and v.last.state == "T")
    if executable() is not None:
        taken = wait_for(lambda: watching.pump().stack(HOST, p.pid, since=1.0))
        assert isinstance(taken, OutsideStack) and taken.partial == CANNOT_SUSPEND, taken
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    gone = wait_for(lambda: (v := watching.pump().view(HOST, p.pid)) and v.last is None and v)
    assert gone.first is not None and gone.first.state in "SRT" and sight.state(HOST, p.pid) == GONE


def test_a_nodes_eye_tells_at_once_that_a_rank_reporting_there_ended_without_a_word(python) -> None:
    """Unasked, a node's eye watches the ranks that report on it (by their frames' headers) for
    their end: one killed by SIGKILL, as the OOM killer kills, is told gone; one that said its
    last words, one of another node and a pid not here are not."""
    host = socket.gethostname()
    ending = "import os, time; print('ready', flush=True); time.sleep(3); os.kill(os.getpid(), 9)"
    killed, said, elsewhere = python(ending), python(ending), python(ending)
    reports = [
        Report("j", 0, 4, host, killed.pid, time.time(), 1, 1.0),
        Report("j", 1, 4, host, said.pid, time.time(), 1, 1.0, exit=ExitInfo("finished", time.time())),
        Report("j", 2, 4, "elsewhere", elsewhere.pid, time.time(), 1, 1.0),
        Report("j", 3, 4, host, 4_000_000, time.time(), 1, 1.0),
    ]
    eye = NodeEye(host)
    eye.reporting(parse(Batch.of([encode(r) for r in reports])).headers)
    told: set[int] = set()

    def ended() -> bool:
        told.update(sample.pid for sample in eye.take().samples if sample.state == "X")
        return killed.pid in told

    wait_for(ended, 15)
    for process in (said, elsewhere):
        process.wait(10)
    time.sleep(3 * WATCH_PERIOD)  # a negative check: what it would have told by now
    ended()
    assert told == {killed.pid}, told


def test_a_check_of_the_watched_ends_asked_for_is_done_before_it_returns(python) -> None:
    """A monitor stopping asks its eye to check the ranks it watches at once
    (:meth:`Prober.check_ends`): one killed a moment before is among the looks handed over
    next, beside the last words of the ranks it took down, with no wait for its next turn."""
    p = python("import time; print('ready', flush=True); time.sleep(60)")
    prober = Prober()
    prober.watch([p.pid])
    prober.check_ends(10)  # seen alive
    p.kill()
    p.wait()
    prober.check_ends(10)
    assert [(s.pid, s.state) for s in prober.take()] == [(p.pid, "X")]


@pytest.mark.parametrize(
    ("frames", "what"),
    [
        (
            [("train.py", "main"), ("train.py", "save_checkpoint"), ("/lib/python3.11/os.py", "fsync")],
            "writing a checkpoint",
        ),
        ([("train.py", "main"), (".../torch/serialization.py", "save")], "writing a checkpoint"),
        ([("train.py", "main"), (".../torch/serialization.py", "load")], "loading a checkpoint"),
        ([("train.py", "<module>"), ("<frozen importlib._bootstrap>", "_find_and_load")], "importing modules"),
        ([("train.py", "main"), ("train.py", "evaluate"), ("model.py", "forward")], "running evaluation"),
        ([("train.py", "main"), ("model.py", "forward")], None),
    ],
)
def test_the_work_a_stack_shows(frames: list[tuple[str, str]], what: str | None) -> None:
    assert activity([StackFrame(file=file, line=1, func=func) for file, func in frames]) == what


def test_a_rank_reports_what_its_process_did_lately(tmp_path: Path) -> None:
    """The hook's own account (its report's ``usage``), for a monitor that cannot look."""
    from distmon.hooks.resources import UsageReader

    reader = UsageReader()
    assert reader.read().seconds == 0.0
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    with open(tmp_path / "ckpt.bin", "wb") as f:
        f.write(bytes(4 << 20))
    usage = reader.read()
    assert usage.seconds > 0 and usage.cpu >= 0.2 and usage.written >= 4 << 20, usage
