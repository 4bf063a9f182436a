"""Every thread's Python stack from a rank that may not be traced: faulthandler on a signal.

py-spy needs ptrace, which most containers refuse (no ``CAP_SYS_PTRACE``, Kubernetes'
default; Yama ``ptrace_scope``), and a rank holding the GIL in a long C call (a catastrophic
regex) cannot report its own stack. So the hook (:mod:`distmon.hooks.stacksignal`) arms
``faulthandler.register`` on a real-time signal in each rank, writing to a file of its own;
a reader on the rank's host (the monitor, a relay: no torch) sends that signal and reads
what faulthandler wrote. faulthandler writes from its C signal handler, without the GIL,
so it answers while a C call holds it.

Both sides know the signal and the file from here, without the rank's help:
``DISTMON_STACK_SIGNAL`` (a real-time signal number, default ``SIGRTMIN + 5``: training
code, Lightning's SLURM requeue included, uses SIGUSR1 and SIGUSR2, and glibc reserves the
real-time signals below ``SIGRTMIN``), ``DISTMON_FAULTHANDLER=0`` (not armed, never
signalled), and ``$TMPDIR/distmon-<uid>/stacks/<pid>`` (a directory of the rank's user,
0700), read through ``/proc/<pid>/root`` where the reader may (a rank in a container of
its own, beside a sidecar with a /tmp of its own; its pid as the rank knows it, ``NSpid``).
The reader signals a process only when that file is there and the process catches the
signal (``SigCgt`` in ``/proc/<pid>/status``): the signal's default action ends a process.
It empties the file once read, so the file holds one dump at most between two reads.

The file is read as hostile input: a bounded number of bytes, threads and frames;
faulthandler writes printable ASCII only (it escapes everything else itself), so any line
holding anything else is not its, and is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import linecache
import os
import re
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from distmon.node import proc
from distmon.wire import StackFrame

SIGNAL_ENV = "DISTMON_STACK_SIGNAL"
OFF_ENV = "DISTMON_FAULTHANDLER"
"""``0`` turns the faulthandler stacks off: the hook arms nothing, the reader signals nobody."""
DEFAULT_SIGNAL = signal.SIGRTMIN + 5
WAIT = 1.0
"""Seconds the reader waits for faulthandler's dump after signalling."""
SETTLE = 0.05
"""Seconds the file must stop growing before a dump counts as written."""
POLL = 0.01
MAX_BYTES = 1 << 20
"""Bytes of one dump read at most (faulthandler's own limits, 100 threads of 100 frames of
500-character names, stay under it)."""
MAX_LINE = 2048
MAX_THREADS = 128
MAX_FRAMES = 100

# a newer CPython names the thread in brackets after its id (gh-125434)
THREAD_HEAD = re.compile(r"(Current thread|Thread) 0x([0-9a-f]{1,16})(?: \[.*\])? \(most recent call first\):")
STACK_HEAD = "Stack (most recent call first):"
FRAME_LINE = re.compile(r'  File "(.*)", line (\d{1,9}|\?\?\?) in (.*)')
_PRINTABLE = re.compile(r"[\x20-\x7e]*")


@dataclass(frozen=True)
class ThreadStack:
    """One thread's Python frames, innermost last, as faulthandler wrote them."""

    ident: int
    """Its ``threading.get_ident()`` (the pthread id); 0 where faulthandler named none."""
    current: bool
    """The thread that ran the signal handler (the kernel's choice, usually the main thread)."""
    frames: list[StackFrame] = field(default_factory=list)


@dataclass(frozen=True)
class FaultStacks:
    """Every thread faulthandler listed, newest thread first, or why there are none."""

    threads: list[ThreadStack] = field(default_factory=list)
    error: str | None = None
    cut: bool = False
    """faulthandler listed its first 100 threads only: the main thread may be missing."""
    armed: bool = True
    """False where the process has no faulthandler of distmon's to ask (``error`` says why)."""

    def choose(self, ident: int | None = None) -> ThreadStack | None:
        """Thread ``ident`` if listed, else the main thread: the oldest, listed last (CPython
        lists its threads newest first), or, where the list was cut, the one that ran the
        handler."""
        found = next((t for t in self.threads if ident is not None and t.ident == ident), None)
        if found is not None or not self.threads:
            return found
        if self.cut:
            return next((t for t in self.threads if t.current), self.threads[-1])
        return self.threads[-1]


def stack_signal(env: Mapping[str, str] = os.environ) -> int | None:
    """The signal faulthandler is armed on; None where :data:`OFF_ENV` is ``0``. A value that
    is no real-time signal is said in one line, and the default used."""
    if env.get(OFF_ENV, "").strip() == "0":
        return None
    text = env.get(SIGNAL_ENV, "").strip()
    if not text:
        return DEFAULT_SIGNAL
    if text.isdigit() and signal.SIGRTMIN <= int(text) <= signal.SIGRTMAX:
        return int(text)
    print(
        f"distmon: {SIGNAL_ENV}={text}: not a real-time signal number ({int(signal.SIGRTMIN)} to "
        f"{int(signal.SIGRTMAX)}); using {DEFAULT_SIGNAL}",
        file=sys.stderr,
    )
    return DEFAULT_SIGNAL


def directory(uid: int) -> Path:
    """Where the ranks of user ``uid`` keep their faulthandler files."""
    return Path(tempfile.gettempdir()) / f"distmon-{uid}" / "stacks"


def stack_file(pid: int, uid: int) -> Path:
    return directory(uid) / str(pid)


def parse_fault_stacks(text: str) -> FaultStacks:
    """faulthandler's dump of every thread, read within limits whatever ``text`` holds."""
    threads: list[ThreadStack] = []
    cut = False
    frames: list[StackFrame] | None = None
    for line in text.splitlines():
        if len(line) > MAX_LINE or not _PRINTABLE.fullmatch(line):
            continue
        head = THREAD_HEAD.fullmatch(line)
        if head is not None or line == STACK_HEAD:
            if len(threads) == MAX_THREADS:
                cut = True
                break
            frames = []
            ident = int(head.group(2), 16) if head else 0
            threads.append(ThreadStack(ident=ident, current=head is None or head.group(1) != "Thread", frames=frames))
        elif line == "...":
            cut = True
        elif frames is not None and len(frames) < MAX_FRAMES and (found := FRAME_LINE.fullmatch(line)):
            frames.append(_frame(*found.groups()))
    for thread in threads:
        thread.frames.reverse()
    return FaultStacks(threads=threads, cut=cut)


def _frame(file: str, line: str, func: str) -> StackFrame:
    number = int(line) if line.isdigit() else 0
    code = None
    if file.endswith(".py") and number and os.path.isfile(file):
        code = linecache.getline(file, number).strip()[:MAX_LINE] or None
    return StackFrame(file=file, line=number, func=func, code=code)


def take_fault_stacks(pid: int, timeout: float = WAIT, env: Mapping[str, str] = os.environ) -> FaultStacks:
    """Every thread's stack of ``pid``, a process on this host whose hook armed faulthandler:
    signalled once, its dump awaited at most ``timeout`` seconds. Never raises."""
    sig = stack_signal(env)
    if sig is None:
        return FaultStacks(error=f"faulthandler stacks are turned off ({OFF_ENV}=0)", armed=False)
    try:
        return _take(pid, sig, timeout)
    except OSError as e:
        return FaultStacks(error=f"cannot take pid {pid}'s stack with faulthandler: {e.strerror or e}")


def _take(pid: int, sig: int, timeout: float) -> FaultStacks:
    uid, own_pid, catches = _status(pid, sig)
    if uid is None:
        return FaultStacks(error=f"pid {pid} is gone", armed=False)
    path = _located(pid, stack_file(own_pid, uid))
    if not path.exists():
        return FaultStacks(error=f"pid {pid} has not armed faulthandler (no {path})", armed=False)
    if not catches:
        return FaultStacks(error=f"pid {pid} does not catch signal {sig}: {path} is stale, not signalled", armed=False)
    deadline = time.monotonic() + timeout
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid:
            return FaultStacks(error=f"{path} is not a file of pid {pid}'s user: not read")
        if not _lock(fd, deadline):
            return FaultStacks(error=f"another reader held {path} for {timeout:g}s")
        before = os.fstat(fd).st_size
        os.kill(pid, sig)
        size = _settled(fd, before, deadline)
        if size <= before:
            return FaultStacks(error=f"pid {pid} wrote no stack within {timeout:g}s of signal {sig}")
        data = os.pread(fd, min(size - before, MAX_BYTES), before)
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return parse_fault_stacks(data.decode("ascii", errors="replace"))


def _status(pid: int, sig: int) -> tuple[int | None, int, bool]:
    """``pid``'s user (None when it is gone), its pid as it knows itself (in its own pid
    namespace: a container's), and whether it catches ``sig``."""
    uid, own_pid, caught = None, pid, 0
    fields = proc.status(pid)
    with contextlib.suppress(ValueError, IndexError):
        uid = int(fields["Uid"].split()[0]) if "Uid" in fields else None
        own_pid = int(fields["NSpid"].split()[-1]) if "NSpid" in fields else pid
        caught = int(fields.get("SigCgt", "0"), 16)
    return uid, own_pid, bool(caught >> (sig - 1) & 1)


def _located(pid: int, path: Path) -> Path:
    """``path`` as process ``pid`` sees it, through its root (a container of its own, a
    sidecar's private /tmp), where this process may look there (the rank's user, with no
    capability the rank lacks); else as this process sees it."""
    root = Path(f"/proc/{pid}/root")
    try:
        os.stat(root)
    except OSError:
        return path
    return root / path.relative_to(path.anchor)


def _lock(fd: int, deadline: float) -> bool:
    """One reader at a time (a relay and a monitor may both ask): its dump is its own."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL)


def _settled(fd: int, before: int, deadline: float) -> int:
    """The file's size once it has grown past ``before`` and stayed for :data:`SETTLE`
    seconds, or at the deadline."""
    size, since = before, time.monotonic()
    while True:
        now = time.monotonic()
        grown = os.fstat(fd).st_size
        if grown != size:
            size, since = grown, now
        elif size > before and now - since >= SETTLE:
            return size
        if now >= deadline:
            return size
        time.sleep(POLL)
