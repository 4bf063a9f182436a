"""Stacks from faulthandler on a signal (distmon.node.faultstacks, distmon.hooks.stacksignal), in
this process with real signals: what faulthandler writes read back per thread, hostile files
read within limits, and a handler the training installed on the signal never replaced."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from distmon.hooks import stacksignal
from distmon.node import faultstacks
from distmon.node.faultstacks import (
    MAX_BYTES,
    MAX_FRAMES,
    MAX_THREADS,
    FaultStacks,
    parse_fault_stacks,
    stack_file,
    stack_signal,
    take_fault_stacks,
)
from distmon.node.pyspy import FAULTHANDLER, from_faulthandler

SIG = faultstacks.DEFAULT_SIGNAL


@pytest.fixture
def clean_signal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The stack signal at its default before and after, nothing armed after."""
    monkeypatch.delenv(faultstacks.SIGNAL_ENV, raising=False)
    monkeypatch.delenv(faultstacks.OFF_ENV, raising=False)
    assert signal.getsignal(SIG) == signal.SIG_DFL
    yield
    stacksignal.disarm()
    faulthandler.unregister(SIG)
    signal.signal(SIG, signal.SIG_DFL)


def _waiting(ready: threading.Event, done: threading.Event) -> None:
    ready.set()
    done.wait()


def test_a_real_dump_is_read_per_thread_innermost_last_the_main_thread_chosen(tmp_path: Path) -> None:
    ready, done = threading.Event(), threading.Event()
    helper = threading.Thread(target=_waiting, args=(ready, done))
    helper.start()
    ready.wait()
    try:
        with open(tmp_path / "dump", "w+") as out:
            faulthandler.dump_traceback(file=out, all_threads=True)
            out.seek(0)
            stacks = parse_fault_stacks(out.read())
    finally:
        done.set()
        helper.join()
    idents = {t.ident for t in stacks.threads}
    assert {threading.get_ident(), helper.ident} <= idents, stacks
    main = stacks.choose()
    assert main is not None and main.ident == threading.main_thread().ident and main.current
    here = main.frames[-1]
    assert here.func == "test_a_real_dump_is_read_per_thread_innermost_last_the_main_thread_chosen"
    assert here.file == __file__ and here.code == "faulthandler.dump_traceback(file=out, all_threads=True)"
    chosen = stacks.choose(helper.ident)
    assert chosen is not None and [f.func for f in chosen.frames][-3:] == ["_waiting", "wait", "wait"], chosen


def test_a_thread_name_in_brackets_and_unknown_lines_are_read() -> None:
    """A newer CPython names the thread in brackets (gh-125434); a line faulthandler could
    not number says ``???``; a frame outside any thread is no thread's."""
    text = (
        '  File "/nowhere.py", line 1 in orphan\n'
        "Thread 0x00007f00000000aa [distmon-agent] (most recent call first):\n"
        '  File "/a.py", line ??? in poll\n'
        "\n"
        "Current thread 0x00007f00000000bb (most recent call first):\n"
        '  File "/b.py", line 7 in step\n'
        '  File "/b.py", line 3 in <module>\n'
    )
    stacks = parse_fault_stacks(text)
    assert [(t.ident, t.current) for t in stacks.threads] == [(0x7F00000000AA, False), (0x7F00000000BB, True)]
    assert stacks.threads[0].frames[0].line == 0
    assert [f.func for f in stacks.threads[1].frames] == ["<module>", "step"]
    assert stacks.choose(0x7F00000000AA) is stacks.threads[0] and stacks.choose(12345) is stacks.threads[1]


def test_where_faulthandler_cut_its_thread_list_the_thread_that_ran_the_handler_is_chosen() -> None:
    """Past 100 threads faulthandler writes ``...``: the main thread, listed last, is cut."""
    text = "Current thread 0x1 (most recent call first):\nThread 0x2 (most recent call first):\n...\n"
    assert parse_fault_stacks(text).choose() == parse_fault_stacks(text).threads[0]


def test_hostile_input_is_read_within_limits_and_never_obeyed() -> None:
    escape = '  File "/x.py\x1b]0;pwned\x07", line 1 in f\n'
    non_ascii = '  File "/caf\u00e9.py", line 1 in f\n'
    long = f'  File "/{"y" * 5000}.py", line 1 in f\n'
    frames = '  File "/z.py", line 2 in g\n' * (3 * MAX_FRAMES)
    text = "Thread 0x10 (most recent call first):\n" + escape + non_ascii + long + frames + "garbage\x00\xff\n"
    stacks = parse_fault_stacks(text)
    (thread,) = stacks.threads
    assert len(thread.frames) == MAX_FRAMES and {f.file for f in thread.frames} == {"/z.py"}
    many = "Thread 0x1 (most recent call first):\n" * (MAX_THREADS * 50)
    start = time.monotonic()
    huge = parse_fault_stacks(many + '  File "/w.py", line 1 in f\n' * 200_000)
    assert len(huge.threads) == MAX_THREADS and huge.cut and time.monotonic() - start < 5
    assert parse_fault_stacks("").threads == [] and parse_fault_stacks("\x1b[2J" * 1000).choose() is None


def test_the_signal_from_the_environment() -> None:
    assert stack_signal({}) == SIG
    assert stack_signal({faultstacks.SIGNAL_ENV: str(signal.SIGRTMAX)}) == signal.SIGRTMAX
    assert stack_signal({faultstacks.OFF_ENV: "0", faultstacks.SIGNAL_ENV: "40"}) is None
    for wrong in ("10", "usr1", "-3", "99999"):  # SIGUSR1 is Lightning's: only real-time signals
        assert stack_signal({faultstacks.SIGNAL_ENV: wrong}) == SIG


def test_armed_taken_emptied_and_removed(clean_signal: None) -> None:
    path = stacksignal.arm()
    assert path is not None and path == stack_file(os.getpid(), os.getuid())
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    stacks = take_fault_stacks(os.getpid())
    main = stacks.choose()
    assert stacks.error is None and main is not None, stacks
    assert "test_armed_taken_emptied_and_removed" in {f.func for f in main.frames}
    assert path.stat().st_size == 0  # read, then emptied: one dump at most between two reads
    assert take_fault_stacks(os.getpid()).choose() is not None  # and again
    stacksignal.disarm()
    assert not path.exists() and signal.getsignal(SIG) == signal.SIG_DFL
    assert take_fault_stacks(os.getpid()).armed is False


def test_a_file_grown_by_dumps_nobody_read_is_read_past_them_and_emptied(clean_signal: None) -> None:
    path = stacksignal.arm()
    assert path is not None
    for _ in range(MAX_BYTES // 2000 + 1):
        os.kill(os.getpid(), SIG)  # dumps nobody reads: signals sent by hand
    assert path.stat().st_size > MAX_BYTES
    assert take_fault_stacks(os.getpid()).choose() is not None
    assert path.stat().st_size == 0


def test_a_python_handler_the_training_installed_is_never_replaced(clean_signal: None) -> None:
    called: list[int] = []

    def theirs(signum: int, frame: FrameType | None) -> None:
        called.append(signum)

    signal.signal(SIG, theirs)
    assert stacksignal.arm() is None
    assert signal.getsignal(SIG) is theirs
    stacks = take_fault_stacks(os.getpid())
    assert stacks.armed is False and called == [], stacks  # not signalled: its handler is not faulthandler's


def test_faulthandler_registered_by_the_training_is_never_replaced(clean_signal: None, tmp_path: Path) -> None:
    """``signal.getsignal`` does not see a handler installed from C: the kernel is asked."""
    with open(tmp_path / "theirs", "w") as theirs:
        faulthandler.register(SIG, file=theirs, all_threads=False)
        assert signal.getsignal(SIG) == signal.SIG_DFL
        assert stacksignal.arm() is None
        os.kill(os.getpid(), SIG)
        assert (tmp_path / "theirs").read_text().startswith("Stack (most recent call first):")


def test_a_handler_installed_after_arming_is_left_alone_and_never_signalled(clean_signal: None) -> None:
    called: list[int] = []
    path = stacksignal.arm()
    assert path is not None
    signal.signal(SIG, lambda signum, frame: called.append(signum))
    stacksignal.keep()
    assert not path.exists()
    assert take_fault_stacks(os.getpid()).armed is False and called == []
    stacksignal.disarm()
    assert signal.getsignal(SIG) not in (signal.SIG_DFL, None)  # theirs stays


def test_a_stale_file_never_signals_a_process_that_does_not_catch_the_signal(clean_signal: None) -> None:
    """A pid reused by a process without the hook: the signal's default action would end it."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = stack_file(sleeper.pid, os.getuid())
        stale.parent.mkdir(parents=True, exist_ok=True)
        stale.write_text("")
        stacks = take_fault_stacks(sleeper.pid)
        assert stacks.armed is False and "does not catch" in (stacks.error or ""), stacks
        assert sleeper.poll() is None
        taken = from_faulthandler(sleeper.pid, "py-spy refused")
        assert taken.error == "py-spy refused" and sleeper.poll() is None
    finally:
        stale.unlink(missing_ok=True)
        sleeper.kill()
        sleeper.wait()


def test_the_fallback_says_how_and_why(clean_signal: None) -> None:
    stacksignal.arm()
    taken = from_faulthandler(os.getpid(), "permission denied tracing pid 1: no CAP_SYS_PTRACE")
    assert taken.how == FAULTHANDLER and taken.frames, taken
    assert taken.partial == "py-spy did not take it: permission denied tracing pid 1: no CAP_SYS_PTRACE"
    assert take_fault_stacks(os.getpid(), env={faultstacks.OFF_ENV: "0"}) == FaultStacks(
        error=f"faulthandler stacks are turned off ({faultstacks.OFF_ENV}=0)", armed=False
    )


def test_arming_removes_the_files_of_killed_processes(clean_signal: None) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    killed = stack_file(gone.pid, os.getuid())
    killed.parent.mkdir(parents=True, exist_ok=True)
    killed.write_text("")
    assert stacksignal.arm() is not None
    assert not killed.exists()
