"""A process's native crash as the handler that caught its signal prints it, and where its
backtrace says it stood: UCX's handler (Open MPI's and NCCL's transports load UCX), absl's
(Ray's, gRPC's), Python's faulthandler; gloo's failed check before it aborts; and the words in
which torch's DataLoader and NCCL say shared memory ran out::

    [node1:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)
    ==== backtrace (tid:   3095) ====
     4 0x0000000000059e97 ncclGetUniqueId()  ???:0
    *** SIGABRT received at time=1734086759 on cpu 3 ***
    PC: @     0x19ea96600  (unknown)  __pthread_kill
        @     0x17685ccb0  (unknown)  gloo::transport::uv::Device::listenCallback()
    Fatal Python error: Segmentation fault
    terminate called after throwing an instance of 'std::out_of_range'
      what():  map::at                                   (the C++ runtime, once a process, then SIGABRT)
    double free or corruption (!prev)                    (glibc, on a heap it found corrupted, then SIGABRT)
    [/pytorch/third_party/gloo/gloo/transport/uv/libuv.h:596] uv_accept: invalid argument
    ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
    DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's workers are
        out of shared memory. Please try to raise your shared memory limit.
    NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Xy (size 9637888)
    NCCL WARN Call to posix_fallocate failed : No space left on device

glibc's abort over a corrupted heap is the process's own; the C++ runtime's ``terminate`` is too,
unless what it threw is torch's, NCCL's or gloo's word on a collective (a watchdog's timeout, a lost
peer): those are read where they are said. But NCCL's "unhandled cuda error" as torch 1.8-1.12 tears
a process group down (``Process Group destroyed on rank 3`` under it) is that rank's own CUDA error
(the group's rank: the world's, unless the job made groups). A bus error is a mapped page with
nothing behind it: in shared memory (NCCL's transport between a node's GPUs, the DataLoader's
workers) it is /dev/shm run out, a container's 64 MB unless it is given more: the node's set-up,
not a rank. A crash whose backtrace lies in the communication library's own thread (NCCL's proxy,
gloo's event loop), no frame of the program's, is the library's, its transport's or the node's,
not a rank's program.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.worker_exits import SIGNAL_NAMES
from distmon.guards.text import visible

MAX_CRASHES = 64
"""Crashes kept from one log."""
MAX_FRAMES = 64
"""Frames kept of one crash's backtrace."""
FRAMES = 96
"""Lines after a handler's first in which its backtrace may stand."""
SIGBUS = 7

_UCX = re.compile(r"^\[([\w.-]{1,200}):\s?(\d{1,12})\s?:\d{1,6}:\d{1,12}\] Caught signal (\d{1,3}) \((.{1,200})\)")
"""UCX's handler: ``[host:pid :0:tid] Caught signal 7 (Bus error: ...)``."""
_UCX_BARE = re.compile(r"^Caught signal (4|7|8|11) \((.{1,200})\)$")
"""UCX's handler's line with its label cut from the paste: one of the error signals UCX catches (SIGILL,
SIGBUS, SIGFPE, SIGSEGV), the whole line (a program's own print of a signal it caught says more, or
another)."""
_GLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{1,9}\s{1,8}\d{1,12} [\w.-]{1,100}:\d{1,6}\] ")
"""glog's own line prefix (``W1128 08:53:27.593163 27220 init.cc:234] ``), before its failure handler's report
where the program writes it through glog (Paddle)."""
_ABSL = re.compile(r"\b(SIG[A-Z]{2,10}) received at time=\d{1,20}")
"""absl's ``*** SIGABRT received at time=... ***`` (a paste may take its stars for Markdown's)."""
_FAULT = re.compile(r"^Fatal Python error: (Segmentation fault|Bus error|Aborted|Floating point exception)")
_GLOG = re.compile(r"^\*{0,3} ?Aborted at (\d{9,11}) \(unix time\) try \"date -d @")
_GLOG_SIGNAL = re.compile(r"^\*{0,3} ?(SIG[A-Z]{2,10}) \(@0x[0-9a-fA-F]{1,16}\) received by PID \d{1,12}")
"""glog's failure handler (Caffe, MXNet, Paddle), a report a process: ``*** Aborted at 1554366514 (unix
time) ...``, its time in whole seconds, then ``*** SIGSEGV (@0x0) received by PID 24 (TID ...) ...``; it
handles SIGTERM too."""
_SIGNALS = {name: number for number, name in SIGNAL_NAMES.items()}
_FAULTS = {"Segmentation fault": 11, "Bus error": 7, "Aborted": 6, "Floating point exception": 8}
_NATIVE = re.compile(
    r"^\s{0,12}(?:PC: )?@\s{1,12}0x[0-9a-fA-F]{1,16}\s{1,12}\S{1,40}\s{1,12}(.{1,300})"
    r"|^\s{0,8}\d{1,4} 0x[0-9a-fA-F]{1,16} (.{1,300})"
    r"|^\s{0,8}\d{1,4}\s{1,4}(?:\S{0,300}/)?(\S{1,200}\(.{0,200}?\)) \[0x[0-9a-fA-F]{1,16}\]\s*$"
)
"""A frame of absl's backtrace (``@ 0x... (unknown) func``) or UCX's (`` 4 0x... func()  file:0``; HPC-X's
`` 6  /lib/libibverbs.so.1(ibv_get_device_list+0x55) [0x7f...]``, its library's folder left out: a path is no
frame of the program's)."""
_PYTHON_FRAME = re.compile(r'^\s{0,8}File "')
_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^'\s]{1,200})'")
_WHAT = re.compile(r"^\s{0,8}what\(\): {0,8}(\S.{0,300})")
_COLLECTIVE_WORDS = re.compile(
    r"^(?:c10::|c10d::|gloo::)|Watchdog|watchdog|NCCL|ProcessGroup|[Cc]onnection|peer|[Tt]imed? ?out|Socket|\[Rank"
)
"""What a process threw when its watchdog or transport gave up on a collective: said where its
line is read, not a crash of its own."""
_OWN_CUDA = re.compile(r"unhandled cuda error|ncclUnhandledCudaError")
"""NCCL's word on a CUDA call of its own that failed: at a process group's teardown, the sticky error
of the process's own CUDA context (a device-side assert, an illegal address)."""
_DESTROYED = re.compile(r"^\s{0,8}Process Group destroyed on rank (\d{1,9})\b")
"""The reason torch 1.8-1.12's ``~ProcessGroupNCCL`` gives the abort of its communicators, the line
under what its ``ncclCommAbort`` threw: the rank of the process that threw it."""
_HEAP = re.compile(
    r"^(?:\*{0,3} ?Error in `[^`]{1,200}': )?(?:double free or corruption \(\S{1,12}\)"
    r"|free\(\): invalid (?:pointer|size|next size \(\w{1,12}\))|free\(\): corrupted unsorted chunks"
    r"|malloc\(\): (?:memory corruption|corrupted top size|unsorted double linked list corrupted)"
    r"|corrupted size vs\. prev_size|corrupted double-linked list|munmap_chunk\(\): invalid pointer"
    r"|malloc_consolidate\(\): invalid chunk size)"
)
"""glibc's words as it aborts a process whose heap it found corrupted (``double free or corruption (!prev)``;
before glibc 2.26 inside ``*** Error in `python': ... ***``, its stars perhaps taken for Markdown's)."""
_GLOO_CHECK = re.compile(r"gloo/[^\s:\]]{1,200}:\d{1,6}\] (.{1,200})")
"""gloo's ``GLOO_ENFORCE`` message: ``[file:line] what failed``."""
_SHM = re.compile(
    r"insufficient shared memory|out of shared memory|raise your shared memory limit"
    r"|Error while creating shared memory segment|posix_fallocate failed|/dev/shm/nccl"
)
_SHM_WORDS = ("shared memory", "/dev/shm", "fallocate")
_LIBRARY = re.compile(r"nccl|gloo::|\buv__|\buv_|libuv|\bucp_|\buct_|\bucs_", re.IGNORECASE)
"""Frames of the communication libraries: NCCL, gloo and its libuv loop, UCX."""
_PROGRAM = re.compile(r"_PyEval|PyObject_|_PyFunction|Py_RunMain|python3?\.\d|torch::autograd|at::native")
"""Frames of the program: the interpreter running its Python, torch's operators it called."""
_THREAD = re.compile(r"start_thread|\bclone\b|_pthread_start|thread_start|uv_run|uv__io_poll|uv__server_io")
"""Where a thread of its own starts, or an event loop runs."""
_VERBS = re.compile(r"libibverbs|\bibv_\w{2,40}|libmlx[45]|librdmacm|\brdma_\w{2,40}")
"""The network's verbs libraries, which NCCL and UCX call: a crash in them, beneath those, is the host's
network stack (its drivers, the verbs an image brings), whatever thread called it."""


@dataclass
class Crash:
    """One process's native crash."""

    signal: int
    said: str
    """The handler's words: ``Caught signal 7 (Bus error: nonexistent physical address)``."""
    host: str | None = None
    pid: str | None = None
    frames: list[str] = field(default_factory=list)
    python: bool = False
    """Python frames follow (faulthandler's dump of the thread): the program's own thread."""
    rank: int | None = None
    """The rank a launcher's label gives the line, where one does."""
    at: float | None = None
    """The time its handler gives (glog's ``Aborted at`` unix time), if any."""
    glog: bool = False
    """glog's report: the signal comes on its next line (SIGTERM too: a launcher's teardown is reported)."""
    own: str | None = None
    """Why the process aborted itself, where it was its own error: what the C++ runtime's ``terminate``
    says it threw (its type and ``what()``), glibc's word on the heap it found corrupted."""

    @property
    def verbs(self) -> str | None:
        """The frame of the network's verbs library the crash struck in, if it did."""
        return next((f for f in self.frames if _VERBS.search(f) and "(+" not in f), None)

    @property
    def library(self) -> str | None:
        """The communication library whose own thread crashed, or beneath which the verbs library
        did: its frames, none of the program's."""
        if self.python or any(_PROGRAM.search(f) for f in self.frames):
            return None
        ours = [found.group().lower() for f in self.frames if (found := _LIBRARY.search(f))]
        if not ours or not (self.verbs or any(_THREAD.search(f) for f in self.frames)):
            return None
        return "NCCL" if any("nccl" in f for f in ours) else "UCX" if any(f.startswith("uc") for f in ours) else "gloo"


@dataclass
class Crashes:
    """The native crashes a log shows, and its words on shared memory run out."""

    crashes: list[Crash] = field(default_factory=list)
    reading: int = 0
    """Lines left in which the last crash's backtrace may stand."""
    shm: str | None = None
    """The first line saying shared memory ran out, in its words."""
    check: str | None = None
    """gloo's first failed check, in its words."""
    thrown: tuple[str, int | None] | None = None
    """What the C++ runtime's ``terminate`` just said was thrown, and the rank, until its ``what()``."""
    aborting: tuple[str, int | None] | None = None
    """What a process's NCCL abort just threw on its own CUDA error, and its label's rank, until the line naming
    its rank in the group."""

    def line(self, body: str, rank: int | None = None) -> bool:
        """Reads ``body`` (``rank``: its label's) if it is a crash handler's, a frame of its
        backtrace, the C++ runtime's ``terminate``, or words on shared memory or gloo's check."""
        body = _GLOG_LINE.sub("", body, count=1) if body[:1] in "IWEF" else body
        if self._terminate(body, rank) or self._heap(body, rank):
            return True
        if "received by PID" in body and (glog := _GLOG_SIGNAL.match(body.strip())) is not None:
            self._glog_signal(_SIGNALS.get(glog.group(1), 0))
            return True
        if (crash := _crash(body)) is not None:
            crash.rank = rank
            if len(self.crashes) < MAX_CRASHES:
                self.crashes.append(crash)
            self.reading = FRAMES
            return True
        if self.reading and self.crashes:
            self.reading -= 1
            last = self.crashes[-1]
            if _PYTHON_FRAME.match(body):
                last.python = True
                return True
            if (frame := _NATIVE.match(body)) is not None:
                if len(last.frames) < MAX_FRAMES:
                    last.frames.append(visible(next(f for f in frame.groups() if f).strip(), 300))
                return True
        if self.shm is None and any(w in body for w in _SHM_WORDS) and _SHM.search(body):
            self.shm = visible(body.strip(), 200)
            return True
        if self.check is None and "gloo/" in body and (check := _GLOO_CHECK.search(body)) is not None:
            self.check = visible(check.group(1).strip(), 200)
            return True
        return False

    def _glog_signal(self, number: int) -> None:
        """The signal glog's report names, given to the first of its reports still without one (its pid is
        kept out: a launcher names the same process by rank, and one process must not count twice)."""
        first = next((c for c in self.crashes if c.glog and not c.signal), None)
        if first is not None:
            first.signal = number
            first.said = f"received {SIGNAL_NAMES.get(number, 'a signal')} (glog's failure handler)"

    def _heap(self, body: str, rank: int | None) -> bool:
        """glibc's abort over a heap it found corrupted (a native extension's or a library's bug in
        that process): a crash of the process's own."""
        if ("()" not in body and "corrupt" not in body) or (found := _HEAP.search(body)) is None:
            return False
        if len(self.crashes) < MAX_CRASHES:
            said = visible(found.group(0).strip(), 120)
            self.crashes.append(Crash(6, f"glibc found its heap corrupted: {said}", rank=rank, own=f"glibc: {said}"))
        return True

    def _terminate(self, body: str, rank: int | None) -> bool:
        """``terminate called after throwing an instance of 'T'``, then its ``what():``: a crash of
        the process's own where what it threw is not a collective's word."""
        thrown, self.thrown = self.thrown, None
        aborting, self.aborting = self.aborting, None
        if aborting is not None and "destroyed" in body and (destroyed := _DESTROYED.match(body)) is not None:
            if len(self.crashes) < MAX_CRASHES:
                said, by = aborting
                local = int(destroyed.group(1))  # the group's rank: the world's, unless the job made groups
                threw = f"the teardown of its process group (rank {local} of it) met its own CUDA error: {said}"
                self.crashes.append(Crash(6, threw, rank=by if by is not None else local, own=threw))
            return True
        if "terminate called" in body and (found := _TERMINATE.search(body)) is not None:
            self.thrown = (visible(found.group(1), 200), rank)
            return True
        what = _WHAT.match(body) if thrown is not None and "what()" in body else None
        if thrown is None or what is None:
            return False
        kind, by = thrown
        said = visible(what.group(1).strip(), 200)
        if _OWN_CUDA.search(said):
            self.aborting = (said, by)
        elif (
            not _COLLECTIVE_WORDS.search(kind)
            and not _COLLECTIVE_WORDS.search(said)
            and len(self.crashes) < MAX_CRASHES
        ):
            threw = f"{kind}: {said}"
            said = f"terminate called after throwing {threw}"
            self.crashes.append(Crash(6, said, rank=by, own=f"terminate: {threw}"))
        return True

    def of(self, rank: int) -> Crash | None:
        """The rank's crash of its own (its ``terminate``, glibc's abort), if the log shows one."""
        return next((c for c in self.crashes if c.rank == rank and c.own is not None), None)

    @property
    def ranked(self) -> set[int]:
        """The ranks the crashes name, by a label or by words of their own (a rank's process group)."""
        return {c.rank for c in self.crashes if c.rank is not None}

    def node_memory(self) -> str | None:
        """Why shared memory ran out, where a line says so or a bus error struck in NCCL."""
        if self.shm is not None:
            return self.shm
        bus = next((c for c in self.crashes if c.signal == SIGBUS and c.library == "NCCL"), None)
        return None if bus is None else f"{_who(bus)} {bus.said} in NCCL's own thread"

    def in_library(self) -> str | None:
        """A crash in a communication library's own thread, in words: every crash the log
        shows is one."""
        if not self.crashes or any(c.library is None for c in self.crashes):
            return None
        crash = self.crashes[0]
        if crash.verbs is not None:
            return f"{_who(crash)} {crash.said} in the network's verbs library under {crash.library} ({crash.verbs})"
        check = f" ({self.check})" if self.check and crash.library == "gloo" else ""
        return f"{_who(crash)} {crash.said} in {crash.library}'s own thread{check}"


def _crash(body: str) -> Crash | None:
    if "Caught signal" in body and (ucx := _UCX.match(body.strip())) is not None:
        host, pid, number, said = ucx.groups()
        return Crash(int(number), f"caught signal {number} ({visible(said, 100)})", visible(host, 200), pid)
    if body.startswith("Caught signal") and (bare := _UCX_BARE.match(body.strip())) is not None:
        number, said = bare.groups()
        return Crash(int(number), f"caught signal {number} ({visible(said, 100)})")
    if "received at time" in body and (absl := _ABSL.search(body)) is not None:
        name = absl.group(1)
        return Crash(_SIGNALS.get(name, 0), f"received {name}")
    if body.startswith("Fatal Python error") and (fault := _FAULT.match(body)) is not None:
        return Crash(_FAULTS[fault.group(1)], f"died of {fault.group(1).lower()}")
    if "unix time" in body and (glog := _GLOG.match(body.strip())) is not None:
        return Crash(0, "caught a signal (glog's failure handler)", at=float(glog.group(1)), glog=True)
    return None


def _who(crash: Crash) -> str:
    if crash.pid is not None:
        return f"process {crash.pid}" + (f" on {crash.host}" if crash.host else "")
    return "a process"
