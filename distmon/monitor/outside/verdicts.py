"""What a rank's process is doing, judged from two looks at it through /proc
(:mod:`distmon.node.proc`) and its main thread's stack: its state first (it cannot
run), then its progress between the looks (CPU, bytes moved), then where it blocks, in words
with one next step (:class:`Verdict`). A rank that still reports gives its own account instead
(:func:`judge_usage`).
"""

from __future__ import annotations

from dataclasses import dataclass

from distmon.monitor.state.kinds import Doing
from distmon.monitor.state.words import duration, size
from distmon.node.proc import STATES, Sample
from distmon.wire import StackFrame, Usage

BUSY_CPU = 0.2
"""Cores' worth of CPU time a process uses, at least, to count as working (its monitoring
thread alone uses a hundredth of one)."""
BUSY_BYTES = 256 * 1024
"""Bytes a second it reads or writes, at least, to count as working."""
VERBS = {
    "open": "opening", "openat": "opening", "openat2": "opening", "read": "reading", "pread64": "reading",
    "readv": "reading", "preadv": "reading", "write": "writing", "pwrite64": "writing", "writev": "writing",
    "pwritev": "writing", "fsync": "flushing (fsync)", "fdatasync": "flushing (fdatasync)",
    "sync_file_range": "flushing", "syncfs": "flushing", "stat": "looking up", "lstat": "looking up",
    "newfstatat": "looking up", "statx": "looking up", "fstat": "looking up", "getdents": "listing",
    "getdents64": "listing", "flock": "locking", "ftruncate": "truncating", "truncate": "truncating",
    "fallocate": "allocating", "unlink": "removing", "rename": "renaming", "copy_file_range": "copying",
}  # fmt: skip
"""What a process blocked in a file call is doing to its file, in words."""
NETWORK_CALLS = frozenset({"recvfrom", "recvmsg", "recvmmsg", "sendto", "sendmsg", "sendmmsg", "connect", "accept",
                           "accept4"})  # fmt: skip
WAIT_CALLS = frozenset({"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2"})
SLEEP_CALLS = frozenset({"nanosleep", "clock_nanosleep", "pause", "restart_syscall"})
"""``restart_syscall``: a sleep resumed after a signal or a tracer (py-spy) interrupted it."""


@dataclass(frozen=True)
class Verdict:
    """What a rank's process is doing, in words, and the one thing to do about it."""

    kind: Doing
    """One of :data:`~distmon.monitor.state.kinds.VERDICTS`."""
    summary: str
    """What follows "rank N " in an alert's one line: ``is stopped (SIGSTOP)``."""
    words: str
    """The same at length, for its evidence."""
    next_step: str
    evidence: tuple[str, ...] = ()
    """Lines of what /proc showed."""
    call: str = ""
    """The system call it sits in, or the work it does: with ``kind``, what tells one of its
    pauses from another (:attr:`habit`)."""

    @property
    def working(self) -> bool:
        return self.kind == Doing.WORKING

    @property
    def habit(self) -> str:
        """What it does, stable from one pause to the next (no sizes, files or times):
        ``sleeping:poll``, ``working:writing a checkpoint``, ``stopped``."""
        return f"{self.kind}:{self.call}" if self.call else self.kind


@dataclass(frozen=True)
class Moved:
    """What a process did between two looks."""

    seconds: float
    cpu: float
    read: int
    written: int
    queued: float = 0.0
    """Seconds its main thread waited, runnable, for a CPU: a process that wants to run but
    whose host gives it little CPU (a loaded machine) works all the same."""

    @classmethod
    def of(cls, usage: Usage) -> Moved:
        """What a rank said its process did (its report's ``usage``)."""
        return cls(usage.seconds, usage.cpu, usage.read, usage.written)

    @classmethod
    def between(cls, first: Sample, last: Sample) -> Moved:
        return cls(
            last.t - first.t,
            last.cpu - first.cpu,
            max(0, last.read - first.read),
            max(0, last.written - first.written),
            max(0.0, last.queued - first.queued),
        )

    @property
    def busy(self) -> bool:
        """It used, or waited for, a fifth of a core at least, or moved bytes."""
        if self.seconds <= 0:
            return False
        moved = (self.read + self.written) / self.seconds
        return (self.cpu + self.queued) / self.seconds >= BUSY_CPU or moved >= BUSY_BYTES

    def words(self) -> str:
        """``wrote 410.0 MiB in 12s, 3.1s of CPU in 12s``: the larger of its reads and writes, its CPU,
        and its wait for a CPU where that is what made it count as working (a loaded host)."""
        parts = []
        if self.written >= self.read and self.written / self.seconds >= BUSY_BYTES:
            parts.append(f"wrote {size(self.written)} in {duration(self.seconds)}")
        elif self.read / self.seconds >= BUSY_BYTES:
            parts.append(f"read {size(self.read)} in {duration(self.seconds)}")
        parts.append(f"{self.cpu:.1f}s of CPU in {duration(self.seconds)}")
        if self.queued >= self.cpu and self.queued / self.seconds >= BUSY_CPU / 2:
            parts.append(f"{self.queued:.1f}s more waiting for a CPU (a loaded host)")
        return ", ".join(parts)


ACTIVITIES = (
    ("loading a checkpoint", ("torch/serialization.py", "safetensors"), ("load",)),
    ("loading a checkpoint", (), ("load_checkpoint", "load_ckpt", "load_model", "restore")),
    ("writing a checkpoint", ("torch/serialization.py", "torch/distributed/checkpoint/", "safetensors"), ("save",)),
    ("writing a checkpoint", (), ("checkpoint", "ckpt", "save_model", "save_state")),
    ("importing modules", ("<frozen importlib._bootstrap>",), ()),
    ("building a C++/CUDA extension", ("torch/utils/cpp_extension.py", "op_builder/"), ()),
    ("compiling (torch.compile)", ("torch/_dynamo/", "torch/_inductor/"), ()),
    ("running evaluation", (), ("evaluat", "validat", "eval_step", "run_eval")),
)
"""(what, path parts, parts of function names): the work a stack shows, most specific
first; where both are given, a frame must match both."""


def activity(frames: list[StackFrame] | None) -> str | None:
    """What the work in ``frames`` is: ``writing a checkpoint``, ``importing modules``..."""
    for what, parts, funcs in ACTIVITIES:
        for f in frames or []:
            in_path = not parts or any(p in f.file for p in parts)
            in_func = not funcs or any(name in f.func.lower() for name in funcs)
            if in_path and in_func:
                return what
    return None


_NO_PROCESS = Verdict(
    Doing.GONE,
    "has exited",
    "has exited (its process is gone)",
    "see its exit status in the launcher's log, and `dmesg -T` there",
)
"""A rank whose process is no longer there to look at."""


def judge_process(
    host: str, first: Sample | None, last: Sample | None, frames: list[StackFrame] | None = None, owns_gil: bool = False
) -> Verdict:
    """The process in words, from the first and the latest look at it (``last`` None: gone)
    and its main thread's stack (its own report's, or py-spy's): its state first (it cannot
    run), then its progress between the looks, then where it blocks."""
    if last is None:
        return _NO_PROCESS
    evidence = tuple(_evidence(last))
    halted = _halted(host, last, evidence)
    if halted is not None:
        return halted
    moved = Moved.between(first, last) if first is not None and first.t < last.t else None
    if moved is not None and moved.busy:
        return working(moved, frames, owns_gil, evidence)
    return _in_kernel_io(host, last, evidence) or _waiting(host, last, frames, owns_gil, evidence)


def _halted(host: str, last: Sample, evidence: tuple[str, ...]) -> Verdict | None:
    """A process that cannot run whatever it would do: a zombie, stopped, or held by a
    debugger; None for any other state."""
    pid = last.pid
    if last.state == "Z":
        parent = f"its parent, pid {last.ppid}," if last.ppid else "its parent"
        return Verdict(
            Doing.ZOMBIE,
            "has exited (a zombie)",
            f"has exited: pid {pid} is a zombie that {parent} has not reaped",
            f"its exit status is with pid {last.ppid} (the launcher): see its log; the rank will not come back",
            evidence,
        )
    if last.state == "T":
        return Verdict(
            Doing.SIGSTOPPED,
            "is stopped (SIGSTOP)",
            f"is stopped (pid {pid}, State: T): every thread is frozen by SIGSTOP (a debugger, `kill -STOP`, "
            "a job scheduler's suspend, a frozen cgroup)",
            f"`kill -CONT {pid}` on {host} resumes it; find who stopped it (a debugger, the scheduler) first",
            evidence,
        )
    if last.state == "t":
        return Verdict(
            Doing.TRACED,
            "is stopped by a debugger",
            f"is stopped by a debugger (pid {pid} is traced by pid {last.tracer})",
            f"continue or detach the debugger (pid {last.tracer}) on {host}",
            evidence,
        )
    return None


def _in_kernel_io(host: str, last: Sample, evidence: tuple[str, ...]) -> Verdict | None:
    """A process blocked in the kernel on a file or a pipe (named by its call's target) or
    on the network; None for any other call."""
    call = last.syscall
    if call in VERBS and last.target and not last.target.startswith(("socket:", "anon_inode:")):
        kind = "a FIFO" if last.fifo else "file"
        mount = f", on {last.mount.words()}" if last.mount else ""
        pipe = ": it waits for the other end to open it" if last.fifo else ""
        return Verdict(
            Doing.FILE_IO,
            f"is blocked in the kernel {VERBS[call]} {last.target}",
            f"is blocked in the kernel {VERBS[call]} {last.target} ({call}, {kind}{mount}){pipe}",
            f"check that file system on {host}: `ls {last.mount.point if last.mount else last.target}`, "
            "`dmesg -T`; a hung NFS or Lustre mount blocks every process that touches it",
            evidence,
        )
    if call in NETWORK_CALLS or (last.target or "").startswith("socket:"):
        return Verdict(
            Doing.NETWORK,
            "is waiting on the network",
            f"is waiting on the network ({call} on {last.target or 'a socket'})",
            f"see which peer it waits for: `ss -tnp | grep {last.pid}` on {host}",
            evidence,
            call or "",
        )
    return None


def _waiting(
    host: str, last: Sample, frames: list[StackFrame] | None, owns_gil: bool, evidence: tuple[str, ...]
) -> Verdict:
    """A process making no progress and blocked on nothing its call names: in native code
    holding the GIL, on a lock, asleep, or (none of those) unknown."""
    pid, call = last.pid, last.syscall
    entry = native_entry(frames or [])
    if owns_gil and entry is not None:
        return Verdict(
            Doing.GIL,
            f"holds the GIL in native code ({entry.func})",
            f"holds the GIL in native code, in {entry.func} ({entry.file.rsplit('/', 1)[-1]}) "
            f"and below it {frames[-1].func if frames else '?'}",
            "that call does not release the GIL (a C extension without Py_BEGIN_ALLOW_THREADS, ctypes.PyDLL): "
            "release it there, or move the call to a subprocess",
            evidence,
            entry.func,
        )
    if call == "futex":
        return Verdict(
            Doing.LOCK,
            "is waiting on a lock",
            "is waiting on a lock (futex)",
            f"another thread holds it: `py-spy dump --pid {pid}` on {host} shows every thread",
            evidence,
            call,
        )
    if call in SLEEP_CALLS or call in WAIT_CALLS or last.state in "SD":
        where = f" in {call}" if call and call != "running" else ""
        return Verdict(
            Doing.SLEEPING,
            f"is asleep{where}",
            f"is asleep{where} and uses no CPU (State: {last.state})",
            f"its stack shows what it waits for: `py-spy dump --native --pid {pid}` on {host}",
            evidence,
            "sleep" if call in SLEEP_CALLS else call or "",
        )
    return Verdict(
        Doing.UNKNOWN,
        "makes no progress",
        f"is {STATES.get(last.state, last.state)} but making no progress",
        f"`py-spy dump --native --pid {pid}` on {host}",
        evidence,
    )


GLUE = ("libffi", "_ctypes", "libpython", "python3")
"""Native frames between Python and the function it called: not the one to name."""


def native_entry(frames: list[StackFrame]) -> StackFrame | None:
    """The native function Python code called (``sleep``, not the ``clock_nanosleep`` it
    sits in, nor libffi's glue); None when the innermost frame is Python's."""
    if not frames or _python(frames[-1]):
        return None
    last_python = max((i for i, f in enumerate(frames) if _python(f)), default=-1)
    called = [f for f in frames[last_python + 1 :] if not f.func.startswith("0x")]
    return next((f for f in called if not any(g in f.file for g in GLUE)), called[-1] if called else frames[-1])


def _python(frame: StackFrame) -> bool:
    """A Python frame has a line number; a native one (py-spy's ``--native``) has none."""
    return frame.file.endswith(".py") or frame.line > 0


def working(
    moved: Moved, frames: list[StackFrame] | None, owns_gil: bool = False, evidence: tuple[str, ...] = ()
) -> Verdict:
    """A process making progress, and what the work is by its stack."""
    what = activity(frames) or ("in native code" if owns_gil else "working")
    return Verdict(
        Doing.WORKING,
        f"is {what}, {moved.words()}",
        f"is {what}" + ("" if what == "working" else ", working") + f": {moved.words()}",
        "nothing yet: it is making progress; this turns critical if it stops or the collective timeout nears",
        evidence,
        what,
    )


@dataclass(frozen=True)
class GilHeld:
    """How a process was seen holding the GIL, for ``seconds``: its own reporting thread did
    not run; or, for a rank found from outside, its stack stood still while holding it."""

    seconds: float
    outside: bool = False

    def words(self) -> str:
        if self.outside:
            return f"while its stack, taken from outside, stood still holding it for {duration(self.seconds)}"
        return f"while its own reporting thread has not run for {duration(self.seconds)}"


def holding_the_gil(
    moved: Moved, held: GilHeld, frames: list[StackFrame] | None = None, evidence: tuple[str, ...] = ()
) -> Verdict:
    """A process that burns CPU while the GIL is held (``held`` says how that was seen): one
    thread holds it in a long call (a regular expression that backtracks, a C extension that
    does not release it), and no other Python thread gets to run. ``frames`` (py-spy's, where
    taken) name the call."""
    entry = native_entry(frames or [])
    python = next((f for f in reversed(frames or []) if _python(f)), None)
    called = entry.func if entry is not None else python.func if python is not None else ""
    where = f" in {called}" if called else ""
    return Verdict(
        Doing.GIL,
        f"holds the GIL{where}, burning CPU",
        f"holds the GIL{where}, burning CPU ({moved.words()}) {held.words()}",
        "find that call in its stack (below): a regular expression that backtracks, a C extension that does "
        "not release the GIL (Py_BEGIN_ALLOW_THREADS); bound its input, or move it to a subprocess",
        evidence,
        called,
    )


def judge_usage(usage: Usage | None, frames: list[StackFrame] | None) -> Verdict | None:
    """A rank's own account of its process (its report's ``usage``), where the monitor cannot
    look at it: working, or None (nothing more can be told from it)."""
    if usage is None:
        return None
    moved = Moved.of(usage)
    return working(moved, frames, evidence=("by its own report",)) if moved.busy else None


def _evidence(s: Sample) -> list[str]:
    """What /proc showed, in one line: of the training thread where the look was of it."""
    parts = [f"State: {s.state} ({STATES.get(s.state, '?')})"]
    if s.wchan:
        parts.append(f"wchan {s.wchan}")
    if s.syscall == "running":
        parts.append("running in user space")
    elif s.syscall:
        parts.append(f"in {s.syscall}" + (f" on {s.target}" if s.target else ""))
    where = f"/proc/{s.pid}/task/{s.tid}" if s.tid is not None else f"/proc/{s.pid}"
    return [f"{where}: " + ", ".join(parts)]
