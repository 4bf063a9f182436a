"""Python tracebacks, read line by line from a log.

A traceback is read to its exception line and the lines of the message that follow it (the
``Original exception:`` of a monitored barrier says what the rank waited for). One the paste
cut before its header starts at its first frame; one cut before its exception line still says
the rank raised (:attr:`Raised.cut`).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field

from distmon.flightrecorder.fields import op_family
from distmon.forensics.distributed_debug import MISMATCH
from distmon.forensics.stores import WAITED
from distmon.guards.text import visible
from distmon.wire import PEER_LOST, StackFrame

MAX_FRAMES = 64
MAX_TRACEBACK_LINES = 4096
"""Lines a traceback may run without its exception line before it is given up (its innermost
:data:`MAX_FRAMES` frames are kept)."""
MAX_MESSAGE_LINES = 8
"""Lines of an exception's message read after its first."""
GRAPH = "Graph execution error:"
"""TensorFlow's message (2.9 on) where an op of its graph failed: ``Detected at node 'X' defined at (most recent
call last):``, the frames that built the op, ``Node: 'X'``, then the error itself, the message to read."""

_DETECTED = re.compile(r"Detected at node '([^']{1,200})'")
_COLLECTIVE_OP = re.compile(r"Horovod(?:Allreduce|Allgather|Broadcast|Alltoall|Reducescatter|ReduceScatter)")
"""The ops Horovod adds to TensorFlow's graph for its collectives (``HorovodAllreduce_grads_0``)."""

TRACEBACK = "Traceback (most recent call last):"
_LAUNCHERS = (
    "ChildFailedError",
    "CalledProcessError",
    "ProcessExitedException",
    "ProcessRaisedException",
    "ActorDiedError",
    "RayTaskError",
    "TrainingFailedError",
    "RendezvousClosedError",
)
"""What a launcher raises once a worker failed (torchrun; DeepSpeed's, Accelerate's subprocess;
``torch.multiprocessing.spawn``; Ray, of a dead actor; Ray Train's driver; torchrun's agent whose next
rendezvous another node's agent closed as it gave up)."""
_DISTRIBUTED = ("torch/distributed/", "deepspeed/comm/")
"""Where a traceback that ends in a collective call stands: a rank that waited raised there."""
_COMPUTING = ("torch/distributed/fsdp/", "torch/distributed/_composable/fsdp/", "torch/distributed/checkpoint/")
"""torch.distributed's code that computes and allocates around its collectives (FSDP's sharding, its copies in
and out of the all-gathered buffers; a distributed checkpoint's planning, reading and writing, whose collectives
run in ``distributed_c10d.py``): a rank raising there failed of its own (out of memory, a shape, a key the
checkpoint lacks) as often as it waited."""
FRAME = re.compile(r' {0,8}File "([^"]{1,1000})", line (\d{1,9}), in (.{1,200})')
"""A frame of a Python traceback, indented by two spaces as Python prints it, or by what a paste
left of that (its shared indent taken off) or added."""
_EXCEPTION = re.compile(r"([A-Za-z_][\w.]{0,200})(?:: ?(.*))?")
_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"})
"""Python's logging levels, which its default format puts first (``WARNING:vctk_base:...``): no exception's name."""
_BARE_EXCEPTIONS = ("Error", "Exception", "Interrupt", "Exit", "Iteration")
"""How the names of exceptions raised without a message end: a lone word of the rank's own
output between its frames is not one."""
ORIGINAL = "Original Traceback (most recent call last):"
_CAUGHT = re.compile(r"Caught (\w{1,200}) (in .{1,200}?)\.?\s*$")
"""torch's ``ExceptionWrapper`` re-raising in the main process what a DataLoader worker, a replica or the pin
memory thread raised (``Caught OSError in DataLoader worker process 3.``), the original traceback after it."""
_NOT_MESSAGE = re.compile(r"\s*(?:$|\[[EWIF]\d{0,4}[ \d]|Traceback|File \"|During handling|The above exception)")
"""What ends an exception's message: a blank line, a glog line, the next traceback."""
_CLOSED = re.compile(r"Connection (?:closed by (?:remote )?peer|reset by peer)|closed by remote peer", re.IGNORECASE)
_P2P_CALL = re.compile(r"\b(?:i?send|i?recv)\(\s*[^,()]{1,100},\s*(?:src=|dst=)?(\d{1,6})\s*[,)]")
"""A send or receive whose peer the program's line gives as a number: ``dist.recv(buf, 0)``,
``dist.isend(t, dst=1)``."""
ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")


_OOM_DEVICE = re.compile(r"\bGPU (\d{1,4}) has a total capac")
_STOPS = ("SignalException", "SIGTERMException", "KeyboardInterrupt")


_CHECKPOINT_RANK = re.compile(r"\(RANK (\d{1,9})\)\s*$")
"""After a traceback's header in a distributed checkpoint's ``CheckpointException``: whose failure it is (DCP
gathers each rank's and raises them all on every rank, each under ``Traceback (most recent call last): (RANK
N)``)."""
_RAY_TASK = re.compile(r"RayTaskError\(\w{1,100}\): .{0,200}?\(pid=(\d{1,12})[,)]")
"""Ray's header before the frames of a remote task that raised: the process it ran in."""


@dataclass
class Raised:
    """A rank's last words: the exception its traceback ended in."""

    type: str
    message: str
    frames: list[StackFrame]
    at: float | None
    """The time the log gives it (its own stamp, else the last one before it), if any."""
    cut: bool = False
    """The log holds its frames, not its exception line; or its exception line, not the message
    the line says follows (``RuntimeError: `` where the paste ends: Python prints the colon only
    before a message)."""
    more: list[str] = field(default_factory=list)
    """The lines of its message after the first."""
    launcher: str | None = None
    """The launcher whose word it is (an exit code, a signal), where the rank left no traceback."""
    ray_pid: str | None = None
    """The Ray process it was raised in, as the last ``RayTaskError(...): ray::... (pid=N, ...)`` of its
    traceback says (a Ray driver prints each remote task's failure so)."""
    graph_node: str | None = None
    """The op TensorFlow's graph failed at, as its error's first line names it (``Detected at node 'X'``)."""
    reported: int | None = None
    """The rank whose failure it is, where its header says another's (:data:`_CHECKPOINT_RANK`)."""

    @property
    def said(self) -> str:
        """Its whole message, as the exception's text would be."""
        return "\n".join([self.message, *self.more])

    @property
    def in_collective(self) -> bool:
        """Its innermost frames are torch's collective calls: the rank raised while waiting."""
        inner = [f.file for f in self.frames[-3:] if not any(part in f.file for part in _COMPUTING)]
        return any(part in file for file in inner for part in _DISTRIBUTED)

    @property
    def collective(self) -> str | None:
        """The collective it raised in (:func:`~distmon.forensics.watchdog.op_family`), from its
        innermost frame of ``torch.distributed`` that names one."""
        inner = (f for f in reversed(self.frames[-8:]) if any(part in f.file for part in _DISTRIBUTED))
        return next((family for f in inner if (family := op_family(f.func)) is not None), None)

    @property
    def closed_peer(self) -> tuple[int, StackFrame] | None:
        """Where it raised because its connection to a peer closed (gloo's pair, a socket) in a
        send or receive whose peer the program's line gives as a number: that peer, and the frame."""
        if not _CLOSED.search(self.said):
            return None
        calls = ((f, m) for f in reversed(self.frames) if f.code and (m := _P2P_CALL.search(f.code)))
        frame, call = next(calls, (None, None))
        return None if frame is None or call is None else (int(call.group(1)), frame)

    @property
    def consequence(self) -> bool:
        """Raised because another rank went first: a peer lost (:data:`~distmon.wire.PEER_LOST`),
        a wait in the store for a rank that had not come (:data:`~distmon.forensics.stores.WAITED`),
        a check that reports on the others (:data:`~distmon.forensics.distributed_debug.MISMATCH`),
        or a launcher because a worker failed, or an op of Horovod's collectives in TensorFlow's graph whose
        error's words the paste cut (a peer's shutdown, a mismatch or the transport, never the rank's own work)."""
        said = self.said
        collective = (
            self.message == GRAPH and self.graph_node is not None and bool(_COLLECTIVE_OP.match(self.graph_node))
        )
        return bool(PEER_LOST.search(said) or WAITED.search(said)) or MISMATCH in said or self.launchers or collective

    @property
    def oom_device(self) -> int | None:
        """The GPU its CUDA out-of-memory error names (``GPU 1 has a total capacity``), where it is not the first:
        a process given one GPU alone sees it as GPU 0, whatever its rank."""
        found = _OOM_DEVICE.search(self.message) if "out of memory" in self.message else None
        return int(found.group(1)) if found and int(found.group(1)) > 0 else None

    @property
    def own(self) -> bool:
        """A failure of the rank's own: not another's consequence, not cut before its exception line,
        not a launcher's word on it, not a stop."""
        return not self.consequence and not self.cut and self.launcher is None and not self.stopped

    @property
    def stopped(self) -> bool:
        """Raised by a signal's handler (torchrun's ``SignalException``, Lightning's ``SIGTERMException``)
        or by Ctrl-C: the process was stopped from outside, no failure of its own."""
        return self.type.endswith(_STOPS)

    @property
    def launchers(self) -> bool:
        """A launcher's exception over a worker that failed (torchrun's ChildFailedError, spawn's, Ray's)."""
        return self.type.endswith(_LAUNCHERS)


@dataclass
class Traceback:
    """A Python traceback read line by line, up to its exception line, then its message."""

    frames: list[StackFrame] = field(default_factory=list)
    lines: int = 0
    raised: Raised | None = None
    """Once its exception line is read: the lines after it carry on its message."""
    closed: bool = False
    ray_pid: str | None = None
    node: str | None = None
    """The op TensorFlow says its graph failed at (:data:`GRAPH`), once its line is read."""
    original: Traceback | None = None
    """Where the exception re-raises another process's or thread's (``Caught OSError in DataLoader worker process
    3.``): the traceback it carries (``Original Traceback ...``), whose exception is the one to tell."""
    reported: int | None = None
    """The rank whose failure its header says it is (:data:`_CHECKPOINT_RANK`)."""

    @classmethod
    def headed(cls, body: str) -> Traceback:
        """A traceback begun at ``body`` (its header, or its first frame where the paste cut the header)."""
        found = _CHECKPOINT_RANK.search(body) if body.startswith(TRACEBACK) else None
        return cls(reported=int(found.group(1)) if found else None)

    def line(self, body: str, stamp: float | None) -> Raised | None:
        """The exception, on its line; None before it and after it."""
        self.lines += 1
        if self.raised is not None and self.original is not None:
            self._original(body, stamp)
        elif self.raised is not None and body.startswith(ORIGINAL) and _CAUGHT.match(self.raised.message):
            self.original = Traceback()
        elif self.raised is not None:
            self._message(body)
        if self.raised is not None:
            return None
        frame = FRAME.match(body)
        if frame:
            if len(self.frames) == MAX_FRAMES:
                del self.frames[0]
            file, line, func = frame.groups()
            self.frames.append(StackFrame(visible(file), int(line), visible(func.strip(), 200)))
            return None
        if not body.strip() or body[:1].isspace():
            if self.frames and self.frames[-1].code is None and body.startswith("    "):
                code = body.strip()
                if code.strip("^~ "):
                    self.frames[-1].code = visible(code)
            return None
        if "RayTaskError" in body and (task := _RAY_TASK.search(body)) is not None:
            self.ray_pid = task.group(1)
            return None
        exception = _EXCEPTION.fullmatch(body.rstrip())
        if exception is None or (exception.group(2) is None and not exception.group(1).endswith(_BARE_EXCEPTIONS)):
            return None
        if exception.group(1) in _LEVELS:
            return None  # a logger's line between the frames (``WARNING:name:message``), no exception's
        message = visible((exception.group(2) or "").strip())
        cut = (exception.group(2) is not None and not message) or GRAPH.startswith(message or "-")  # words to come
        self.raised = Raised(visible(exception.group(1), 200), message, self.frames, stamp, cut=cut)
        self.raised.ray_pid, self.raised.reported = self.ray_pid, self.reported
        return self.raised

    @property
    def done(self) -> bool:
        """Its message is over, or it ran too long without an exception line."""
        if self.raised is not None:
            return self.closed or len(self.raised.more) >= MAX_MESSAGE_LINES
        return self.lines > MAX_TRACEBACK_LINES

    def _message(self, body: str) -> None:
        assert self.raised is not None
        if self.raised.message == GRAPH:  # the op's definition until its name, then the error's own words
            if self.raised.graph_node is None and (detected := _DETECTED.search(body)) is not None:
                self.raised.graph_node = visible(detected.group(1), 120)
            if self.node is None and body.lstrip().startswith("Node: "):
                self.node = visible(body.strip()[len("Node: ") :], 120)
            elif self.node is not None and body.strip():
                self.raised.message, self.raised.cut = f"{visible(body.strip())} (at node {self.node})", False
            self.closed = self.lines > MAX_TRACEBACK_LINES
            return
        if _NOT_MESSAGE.match(body) or FRAME.match(body):
            self.closed = True
        else:
            self.raised.more.append(visible(body.strip()))
            self.raised.cut = False

    def _original(self, body: str, stamp: float | None) -> None:
        """A line of the traceback the exception carries: its exception, where the worker's error is, told as the
        exception's own (its type and message, where it was caught said after; its frames after the process's)."""
        assert self.raised is not None and self.original is not None
        inner = self.original.line(body, stamp)
        if inner is not None:
            caught = _CAUGHT.match(self.raised.message)
            where = f" ({caught.group(2)})" if caught else ""
            self.raised.type, self.raised.message = inner.type, f"{inner.message}{where}"
            self.raised.frames = [*self.raised.frames, *inner.frames][-MAX_FRAMES:]
        if inner is not None or self.original.done:
            self.original, self.closed = None, True

    def cut(self, stamp: float | None) -> Raised | None:
        """What a traceback the log ends or breaks off before its exception line says: the
        rank raised, in these frames."""
        if self.raised is not None or not self.frames:
            return None
        said = "its exception line is not in the log"
        return Raised("an exception", said, self.frames, stamp, cut=True, reported=self.reported)


def alone(body: str, stamp: float | None) -> Traceback | None:
    """A traceback pasted without its frames, begun at its exception line (``[rank3]:
    torch.OutOfMemoryError: CUDA out of memory ...``): a line whose first word is named as
    exceptions are (``...Error``, ``...Exception``) and carries a message. None for any other line."""
    building = Traceback()
    raised = building.line(body, stamp)
    if raised is None or not raised.message or not raised.type.endswith(_BARE_EXCEPTIONS):
        return None
    return building


def utc(year: int | str, *parts: str | None) -> float | None:
    month, day, hour, minute, second, fraction = parts
    try:
        whole = calendar.timegm(
            (int(year), int(month or 0), int(day or 0), int(hour or 0), int(minute or 0), int(second or 0), 0, 0, 0)
        )
    except (OverflowError, ValueError):
        return None
    return whole + (float("0." + fraction) if fraction else 0.0)


def unlabelled_exception(body: str) -> bool:
    """An exception line with no label, not a launcher's own: where a rank's traceback awaits its exception line on
    the line above, the paste or a stream lost that line's label."""
    lost = alone(body, None) if body[:1].isalpha() else None
    return lost is not None and lost.raised is not None and not lost.raised.launchers
