"""A rank's process seen through /proc, one moment at a time: what the kernel knows of a
process that cannot say itself (every thread frozen by SIGSTOP, a native call holding the GIL,
a kernel call that does not return). :func:`look` reads the process state
(``/proc/PID/status``), where it sleeps (``wchan``), the system call its main thread sits in
and on which file (``/proc/PID/syscall``, its fd or its path argument, ``mountinfo``), and its
running totals of CPU and bytes moved (``stat``, ``io``). Given the native id of the thread
that trains (a Ray Train worker's training thread, not the event loop in its main thread), the
state, wchan, system call, CPU and run delay are that thread's (``/proc/PID/task/TID``), the
bytes moved still the process's. What two looks mean is
:mod:`distmon.monitor.outside.verdicts`' to judge.

Reading /proc is I/O: :class:`distmon.node.prober.Prober` calls :func:`look` on a thread of its
own, on the node where the process runs (the monitor's host, or a relay's node).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CPUS = os.cpu_count() or 1
PATH_MAX = 4096
MAX_ENVIRON = 1 << 20
"""Bytes of a process's environment read at most."""
MAX_ARGS = 4096
"""Words of a process's command line kept at most."""
STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "in disk sleep (uninterruptible)",
    "T": "stopped",
    "t": "stopped by a debugger",
    "Z": "a zombie",
    "X": "dead",
    "I": "idle",
}

# System calls by number, for the architectures distmon runs on: the ones a stuck process
# sits in. Those whose first argument is a file descriptor are in FD_CALLS; those that take
# a path, with the argument that holds it, in PATH_CALLS.
SYSCALLS = {
    "x86_64": {
        0: "read", 1: "write", 2: "open", 4: "stat", 5: "fstat", 6: "lstat", 7: "poll", 17: "pread64",
        18: "pwrite64", 19: "readv", 20: "writev", 23: "select", 34: "pause", 35: "nanosleep",
        40: "sendfile", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
        47: "recvmsg", 61: "wait4", 62: "kill", 73: "flock", 74: "fsync", 75: "fdatasync", 76: "truncate",
        77: "ftruncate", 78: "getdents", 82: "rename", 87: "unlink", 202: "futex", 217: "getdents64",
        219: "restart_syscall", 230: "clock_nanosleep", 232: "epoll_wait", 247: "waitid", 257: "openat",
        262: "newfstatat", 270: "pselect6", 271: "ppoll", 275: "splice", 277: "sync_file_range", 281: "epoll_pwait",
        285: "fallocate", 288: "accept4", 295: "preadv", 296: "pwritev", 299: "recvmmsg",
        306: "syncfs", 307: "sendmmsg", 326: "copy_file_range", 332: "statx", 426: "io_uring_enter",
        437: "openat2", 441: "epoll_pwait2",
    },
    "aarch64": {
        22: "epoll_pwait", 32: "flock", 47: "fallocate", 56: "openat", 61: "getdents64", 63: "read",
        64: "write", 65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64", 72: "pselect6",
        73: "ppoll", 79: "newfstatat", 80: "fstat", 82: "fsync", 83: "fdatasync", 84: "sync_file_range",
        95: "waitid", 98: "futex", 101: "nanosleep", 115: "clock_nanosleep", 202: "accept",
        129: "kill", 203: "connect", 206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 242: "accept4",
        260: "wait4", 267: "syncfs", 291: "statx", 426: "io_uring_enter", 437: "openat2",
    },
}  # fmt: skip
FD_CALLS = frozenset(
    {
        "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "fstat", "fsync",
        "fdatasync", "ftruncate", "fallocate", "getdents", "getdents64", "sync_file_range", "flock",
        "sendto", "recvfrom", "sendmsg", "recvmsg", "recvmmsg", "sendmmsg", "connect", "accept",
        "accept4", "sendfile", "splice", "copy_file_range", "syncfs",
    }
)  # fmt: skip
PATH_CALLS = {"open": 0, "stat": 0, "lstat": 0, "truncate": 0, "unlink": 0, "rename": 0, "openat": 1,
              "openat2": 1, "newfstatat": 1, "statx": 1}  # fmt: skip
"""Calls that take a path, and which argument holds it."""
AT_FDCWD = -100


@dataclass(frozen=True)
class Mount:
    point: str
    fstype: str
    source: str

    def words(self) -> str:
        return f"{self.point} ({self.fstype} from {self.source})"


@dataclass(frozen=True)
class Sample:
    """One look at a process: its state, where its training thread is, and its running totals."""

    pid: int
    t: float
    """When it was taken (the prober's clock)."""
    state: str
    """The state letter of ``/proc/PID/status``: R, S, D, T, t, Z, X or I."""
    ppid: int = 0
    tracer: int = 0
    wchan: str | None = None
    syscall: str | None = None
    """The call the thread looked at (``tid``, else the main thread) sits in by name (``syscall
    318`` for one not known here), ``running`` in user space, None outside any call or where it
    cannot be read."""
    target: str | None = None
    """The file (a path), pipe or socket the call works on."""
    fifo: bool = False
    mount: Mount | None = None
    cpu: float = 0.0
    """Seconds of CPU: the thread's looked at when ``tid`` is set, else every thread's."""
    read: int = 0
    written: int = 0
    """Bytes read and written through system calls (``rchar``, ``wchar``), every thread's."""
    queued: float = 0.0
    """Seconds the thread looked at has waited, runnable, for a CPU (``schedstat``'s run delay):
    what a rank starved of CPU by other processes on its host shows."""
    load: float = 0.0
    """The host's load average over the last minute, with :attr:`cpus` to read it against."""
    cpus: int = 0
    """The host's CPUs (0: a look from a node's eye that predates it)."""
    tid: int | None = None
    """The thread looked at, when it is not the process as a whole (its main thread)."""
    reporter_wakes: int | None = None
    """How often distmon's reporting thread in the process has gone to sleep and woken so far
    (its voluntary context switches), where it was asked about: about once a report while it
    reports, about 200 times a second while it waits for the GIL (:data:`GIL_WAKES`)."""

    @property
    def stopped(self) -> bool:
        """Every thread frozen: by SIGSTOP (``T``), or by a debugger (``t``)."""
        return self.state in ("T", "t")


GIL_WAKES = 200.0
"""Wakes a second of a thread waiting for the GIL: CPython's ``take_gil`` waits on a condition
for the switch interval (5 ms unless the job set another), wakes, asks the holder to drop it,
and waits again."""
GIL_WAIT_WAKES = GIL_WAKES / 10
"""Wakes a second of distmon's reporting thread that tell it waits for the GIL: it wakes once a
report otherwise; on a host whose CPUs are taken, a waiting thread is woken less often than every
switch interval (89 a second was seen beside two CPU burners)."""


def look(pid: int, t: float, tid: int | None = None, reporter: int | None = None) -> Sample | None:
    """The process ``pid`` now, None if it is gone; with ``tid``, its thread ``tid`` (the
    process as a whole once that thread has ended); with ``reporter``, how often that thread
    has woken. Fields it may not read stay empty."""
    task = PROC / str(pid) / "task"
    if tid is not None and tid != pid and (task / str(tid)).is_dir():
        sample = _look(pid, t, task / str(tid), tid)
    else:
        sample = _look(pid, t, PROC / str(pid), None)
    if sample is None or reporter is None:
        return sample
    return replace(sample, reporter_wakes=_wakes(task / str(reporter)))


def environ(pid: int) -> dict[str, str] | None:
    """The environment process ``pid`` started with (its variables set later are not in it),
    at most :data:`MAX_ENVIRON` bytes; None where it may not be read (another user's process)."""
    try:
        with open(PROC / str(pid) / "environ", "rb") as f:
            raw = f.read(MAX_ENVIRON)
    except OSError:
        return None
    pairs = (os.fsdecode(item).partition("=") for item in raw.split(b"\0") if b"=" in item)
    return {k: v for k, _, v in pairs}


def net_namespace(pid: int) -> str | None:
    """The network namespace process ``pid`` is in (``net:[4026531840]``), None where unknown."""
    return _read_link(PROC / str(pid) / "ns" / "net")


def executable_of(pid: int) -> str | None:
    return _read_link(PROC / str(pid) / "exe")


def interpreter_of(pid: int) -> str | None:
    """The program process ``pid`` was started as: its first argument where that is an absolute
    path (a virtual environment's ``bin/python``, which its executable's link resolves past, to
    an interpreter without the environment's packages), else its executable."""
    with contextlib.suppress(OSError):
        with open(PROC / str(pid) / "cmdline", "rb") as f:
            first = os.fsdecode(f.read(PATH_MAX).partition(b"\0")[0])
        if os.path.isabs(first) and os.path.isfile(first):
            return first
    return executable_of(pid)


def working_directory(pid: int) -> str | None:
    return _read_link(PROC / str(pid) / "cwd")


def command_name(pid: int) -> str | None:
    """Process ``pid``'s name (``comm``), None where it is gone."""
    return _read(PROC / str(pid) / "comm")


def output_of(pid: int) -> str | None:
    """Where process ``pid``'s standard output goes (a file's path, a pipe, a terminal)."""
    return _read_link(PROC / str(pid) / "fd" / "1")


def read_text(path: str, limit: int) -> str:
    """At most ``limit`` bytes of the file at ``path`` as text; empty where it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


def status(pid: int) -> dict[str, str]:
    """Process ``pid``'s ``status`` file, field by field; empty where it cannot be read (gone)."""
    return _fields(_read(PROC / str(pid) / "status") or "")


def rss(pid: int) -> int | None:
    """The memory process ``pid`` holds (``VmRSS``), in bytes; None where it cannot be read."""
    value = status(pid).get("VmRSS", "").split()
    return int(value[0]) * 1024 if value and value[0].isdigit() else None


def started(pid: int) -> int | None:
    """When process ``pid`` started (``stat``'s ``starttime``, in clock ticks after boot), None
    once it is gone or a zombie: a process that ends is told by this one file, and a pid reused
    by another process by its start."""
    text = _read(PROC / str(pid) / "stat")
    after = text.rsplit(")", 1)[-1].split() if text else []
    if len(after) < 20 or after[0] in ("Z", "X") or not after[19].isdigit():
        return None
    return int(after[19])


def _look(pid: int, t: float, base: Path, tid: int | None) -> Sample | None:
    try:
        status = _fields((base / "status").read_text())
        stat_line = (base / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return Sample(pid, t, "?")
    state = status.get("State", "?")[:1]
    after = stat_line.rsplit(")", 1)[-1].split()
    cpu = (int(after[11]) + int(after[12])) / CLOCK_TICKS if len(after) > 12 else 0.0
    io = {}
    with contextlib.suppress(OSError):
        io = _fields((PROC / str(pid) / "io").read_text())
    wchan = _read(base / "wchan")
    queued = _queued(base)
    syscall, target, fifo = _syscall(pid, base) if state not in "ZX" else (None, None, False)
    mount = _mount(pid, target) if target and target.startswith("/") else None
    return Sample(
        pid,
        t,
        state,
        ppid=int(status.get("PPid", "0") or 0),
        tracer=int(status.get("TracerPid", "0") or 0),
        wchan=wchan if wchan and wchan != "0" else None,
        syscall=syscall,
        target=target,
        fifo=fifo,
        mount=mount,
        cpu=cpu,
        read=int(io.get("rchar", "0") or 0),
        written=int(io.get("wchar", "0") or 0),
        queued=queued,
        load=_load(),
        cpus=CPUS,
        tid=tid,
    )


def thread_counters(pid: int, tid: int) -> tuple[float, int] | None:
    """Thread ``tid`` of process ``pid`` (its main thread where they are equal): its CPU
    seconds and context switches, voluntary and not, so far; None once it is gone. Two of
    them apart tell whether it ran or woke in between."""
    base = PROC / str(pid) / "task" / str(tid)
    stat, status = _read(base / "stat"), _read(base / "status")
    if stat is None or status is None:
        return None
    after = stat.rsplit(")", 1)[-1].split()
    counts = _fields(status)
    switches = sum(int(counts.get(f"{kind}_ctxt_switches", "0") or 0) for kind in ("voluntary", "nonvoluntary"))
    return (int(after[11]) + int(after[12])) / CLOCK_TICKS, switches


def _wakes(base: Path) -> int | None:
    """The thread's voluntary context switches, None where it is gone or they cannot be read."""
    wakes = _fields(_read(base / "status") or "").get("voluntary_ctxt_switches", "")
    return int(wakes) if wakes.isdigit() else None


def _queued(base: Path) -> float:
    """Seconds the thread has waited for a CPU, 0.0 where the kernel does not say."""
    fields = (_read(base / "schedstat") or "").split()
    return int(fields[1]) / 1e9 if len(fields) > 1 and fields[1].isdigit() else 0.0


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def _fields(text: str) -> dict[str, str]:
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def _read(path: Path) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return path.read_text().strip()
    return None


def _syscall(pid: int, base: Path) -> tuple[str | None, str | None, bool]:
    """The system call of the thread at ``base`` by name, the file it works on (the process's
    file descriptors), and whether that is a FIFO."""
    text = _read(base / "syscall")
    if not text:
        return None, None, False
    parts = text.split()
    if parts[0] == "running":
        return "running", None, False
    number = int(parts[0])
    if number < 0 or len(parts) < 7:
        return None, None, False
    name = SYSCALLS.get(os.uname().machine, {}).get(number, f"syscall {number}")
    args = [int(a, 16) for a in parts[1:7]]
    target = None
    if name in FD_CALLS:
        target = _read_link(PROC / str(pid) / "fd" / str(_signed(args[0])))
    elif name in PATH_CALLS:
        which = PATH_CALLS[name]
        target = _path_argument(pid, args[which], _signed(args[0]) if which == 1 else AT_FDCWD)
    fifo = False
    if target and target.startswith("/"):
        with contextlib.suppress(OSError):
            fifo = stat.S_ISFIFO(os.stat(f"/proc/{pid}/root{target}").st_mode)
    elif target and target.startswith("pipe:"):
        fifo = True
    return name, target, fifo


def _signed(value: int) -> int:
    """A file descriptor argument as the kernel reads it (an int: AT_FDCWD is -100)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _read_link(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        return os.readlink(path)
    return None


def _path_argument(pid: int, pointer: int, dirfd: int) -> str | None:
    """The path a call was given, read from the process's memory (root, or its tracer may),
    made absolute against its working directory or ``dirfd``."""
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(pointer)
            raw = mem.read(PATH_MAX).split(b"\0", 1)[0]
    except (OSError, OverflowError, ValueError):
        return None
    path = os.fsdecode(raw)
    if not path or path.startswith("/"):
        return path or None
    base = _read_link(PROC / str(pid) / ("cwd" if dirfd == AT_FDCWD else f"fd/{dirfd}"))
    return os.path.normpath(os.path.join(base, path)) if base else path


def _mount(pid: int, path: str) -> Mount | None:
    """The mount ``path`` lies on, as the process sees its mounts: the longest mount point
    that is a prefix of it."""
    text = _read(PROC / str(pid) / "mountinfo")
    best: Mount | None = None
    for line in (text or "").splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or len(rest) < 2:
            continue
        point = _unescape(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.point)):
            best = Mount(point, rest[0], _unescape(rest[1]))
    return best


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field
