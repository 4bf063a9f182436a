"""What a node's eye saw, as plain data: the looks at its processes and the stacks it took.

They travel upstream with a relay's batches (:mod:`distmon.wire.column_batch`), the monitor's own
eye hands them over the same way, and recordings keep them (:mod:`distmon.monitor.recording`),
so that the rules judge a rank on any node, live or replayed, from the same facts.

Encoded as msgpack, a list of maps, one per node: ``host``, ``fields`` (the names of a
look's fields, in the order each look lists them: fields added later are read by name, those
a reader does not know are skipped), ``samples`` (the looks, oldest first) and ``stacks``
(``[pid, since, frames, error, owns_gil, partial, how]``, frames as ``[file, line, func, code]``)
and, where the node's network links changed since it last said, ``links``
(``[name, kind, state, carrier, flaps, phys]`` each, :mod:`distmon.node.links`) and ``read``,
when it read them (the clock of the looks).
Whatever a node claims is read within limits (text, arrays, maps) and checked field by field:
these are bytes from another machine.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack

from distmon.node.links import MAX_LINKS, Link
from distmon.node.proc import Mount, Sample
from distmon.node.pyspy import FAULTHANDLER, PY_SPY, OutsideStack
from distmon.wire import StackFrame, WireError

MALFORMED = "malformed_looks"
MAX_SAMPLES = 8192
"""Looks one batch carries at most, over its nodes."""
MAX_STACKS = 256
MAX_FRAMES = 64
MAX_TEXT = 4096
SAMPLE_FIELDS = tuple(f.name for f in dataclasses.fields(Sample))
TEXT_FIELDS = frozenset({"state", "wchan", "syscall", "target"})
NUMBER_FIELDS = frozenset({"t", "cpu", "queued", "load"})
HOWS = (PY_SPY, FAULTHANDLER)
INT_FIELDS = frozenset({"pid", "ppid", "tracer", "read", "written", "cpus", "tid", "reporter_wakes"})


@dataclass(frozen=True)
class Taken:
    """A stack taken from outside process ``pid``, answering the stall that began at ``since``
    (the monitor's key for it)."""

    pid: int
    since: float
    stack: OutsideStack


SEEN, UNREACHABLE, NO_DISTMON, OTHER_VERSION, NO_PYSPY, SILENT, ENDED, REFUSED = (
    "seen",
    "unreachable",
    "no_distmon",
    "other_version",
    "no_pyspy",
    "silent",
    "ended",
    "refused",
)
REACH_STATES = (SEEN, UNREACHABLE, NO_DISTMON, OTHER_VERSION, NO_PYSPY, SILENT, ENDED, REFUSED)
"""How a node a command reached fared: its eye sees it (``seen``, ``no_pyspy`` where it finds
ranks but cannot take their stacks), or it was not reached (``unreachable``: ssh or srun
failed), lacks distmon, runs another version of it, did not answer in time (``silent``), its eye
ended early (``ended``), or turned the orders down (``refused``)."""
SSH, SLURM = "ssh", "slurm"
MAX_REACHED = 16_384
MAX_FOUND = 4096
"""Ranks a node reached may say it found there: more than any node runs."""
MAX_JOB = 1 << 17
"""Ranks the nodes reached may say they found, together: the largest job."""


@dataclass(frozen=True)
class Reached:
    """A node a command reached to find its job's ranks there, and how that went, as the
    command's host tells it: ``how`` (:data:`SSH`, :data:`SLURM`), ``state`` (one of
    :data:`REACH_STATES`), ``detail``, what the node or its ssh said (text from elsewhere:
    shown escaped), and ``ranks``, the job's ranks its eye found there as it answered (their
    reports follow, a look later)."""

    host: str
    how: str
    state: str
    detail: str = ""
    ranks: tuple[int, ...] = ()


class Reaching(Protocol):
    """What reaches other nodes from this host, and tells how they fared."""

    def news(self) -> list[Reached]:
        """How the nodes fared, where it changed since last asked."""
        ...


@dataclass
class Looks:
    """What the eye on ``host`` saw since it last said."""

    host: str
    samples: list[Sample] = field(default_factory=list)
    stacks: list[Taken] = field(default_factory=list)
    links: list[Link] | None = None
    """The node's network links, where they changed (or were first read) since it last said."""
    read: float | None = None
    """When it read ``links``, on the clock of its looks: they may come long after (a node cut
    off tells what its links did once it is heard again)."""
    reached: list[Reached] = field(default_factory=list)
    """The nodes a command on this host reached (``distmon look`` and ``--find``'s reach),
    where how they fared changed since it last said."""

    def __bool__(self) -> bool:
        return bool(self.samples or self.stacks or self.links is not None or self.reached)


@dataclass(frozen=True)
class Wanted:
    """A process the monitor asks the eye on ``host`` to look at, and the stack it wants
    taken, if any: the stall it answers (``since``) and whether the process is stopped. Where
    known, the thread that trains in it: its native id ``tid`` (``/proc/PID/task/TID``,
    py-spy's) and its ``threading.get_ident()`` (faulthandler's); and distmon's reporting
    thread's native id, ``reporter``, whose wakes tell a wait for the GIL."""

    host: str
    pid: int
    since: float | None = None
    stopped: bool = False
    tid: int | None = None
    thread: int | None = None
    reporter: int | None = None

    def encoded(self) -> list[Any]:
        stack = None if self.since is None else [self.since, self.stopped]
        return [self.host, self.pid, stack, self.tid, self.thread, self.reporter]


def wanted_looks(raw: list[list[Any]]) -> list[Wanted]:
    """The requests of a ``look`` command (:attr:`distmon.wire.sockets.Command.looks`); those that are
    not one are skipped."""
    out = []
    for item in raw:
        if len(item) < 3 or not isinstance(item[0], str) or type(item[1]) is not int or item[1] <= 0:
            continue
        tid, thread, reporter = (_id(x) for x in (*item[3:6], None, None, None)[:3])
        stack = item[2]
        if isinstance(stack, list) and len(stack) >= 2 and _finite(stack[0]):
            out.append(Wanted(item[0], item[1], float(stack[0]), bool(stack[1]), tid, thread, reporter))
        elif stack is None:
            out.append(Wanted(item[0], item[1], tid=tid, thread=thread, reporter=reporter))
    return out


def _id(value: Any) -> int | None:
    """A thread's id, if ``value`` is one."""
    return value if type(value) is int and 0 < value < 2**64 else None


def encode_looks(looks: list[Looks]) -> bytes:
    return msgpack.packb([_node(one) for one in looks], use_bin_type=True)


def _node(looks: Looks) -> dict[str, Any]:
    return {
        "host": looks.host,
        "fields": list(SAMPLE_FIELDS),
        "samples": [[_value(getattr(s, name)) for name in SAMPLE_FIELDS] for s in looks.samples],
        "stacks": [_stack(taken) for taken in looks.stacks],
        **({"links": [_link(link) for link in looks.links]} if looks.links is not None else {}),
        **({"read": looks.read} if looks.links is not None and looks.read is not None else {}),
        **({"reached": [_reached(r) for r in looks.reached]} if looks.reached else {}),
    }


def _link(link: Link) -> list[Any]:
    return [link.name, link.kind, link.state, link.carrier, link.flaps, link.phys]


def _value(value: Any) -> Any:
    return [value.point, value.fstype, value.source] if isinstance(value, Mount) else value


def _stack(taken: Taken) -> list[Any]:
    s = taken.stack
    frames = None if s.frames is None else [[f.file, f.line, f.func, f.code] for f in s.frames[:MAX_FRAMES]]
    return [taken.pid, taken.since, frames, s.error, s.owns_gil, s.partial, s.how]


def decode_looks(data: bytes) -> list[Looks]:
    """What :func:`encode_looks` wrote; raises :class:`WireError` for anything else."""
    try:
        nodes = msgpack.unpackb(
            data, raw=False, max_str_len=MAX_TEXT, max_bin_len=0, max_array_len=65536, max_map_len=16, max_ext_len=0
        )
        if not isinstance(nodes, list):
            raise TypeError("not a list")
        looks = [_read_node(node) for node in nodes]
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, msgpack.UnpackException) as e:
        raise WireError(MALFORMED, str(e)) from None
    if sum(len(one.samples) for one in looks) > MAX_SAMPLES or sum(len(one.stacks) for one in looks) > MAX_STACKS:
        raise WireError(MALFORMED, "more looks than a batch carries")
    if sum(len(r.ranks) for one in looks for r in one.reached) > MAX_JOB:
        raise WireError(MALFORMED, "more ranks found than a job has")
    return looks


def _read_node(node: Any) -> Looks:
    host, names = node["host"], node["fields"]
    if not isinstance(host, str) or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError("a node's looks without a host or field names")
    samples = [_read_sample(names, values) for values in node["samples"]]
    stacks = [_read_stack(item) for item in node["stacks"]]
    links, read = node.get("links"), node.get("read")
    if links is not None and (not isinstance(links, list) or len(links) > MAX_LINKS):
        raise TypeError("a node's links are not a list of its links")
    if read is not None and not _finite(read):
        raise TypeError("a node's links read at no time")
    read_links = None if links is None else [_read_link(item) for item in links]
    reached = node.get("reached") or []
    if not isinstance(reached, list) or len(reached) > MAX_REACHED:
        raise TypeError("a node's reached nodes are not a list of them")
    return Looks(
        host,
        samples,
        stacks,
        read_links,
        None if read_links is None or read is None else float(read),
        [_read_reached(item) for item in reached],
    )


def _reached(r: Reached) -> list[Any]:
    return [r.host, r.how, r.state, r.detail, list(r.ranks)]


def _read_reached(item: list[Any]) -> Reached:
    host, how, state, detail = item[:4]
    if not all(isinstance(t, str) for t in (host, how, detail)) or how not in (SSH, SLURM) or state not in REACH_STATES:
        raise TypeError("a node reached is not a host, how, a state and words")
    ranks = item[4] if len(item) > 4 else []
    if not isinstance(ranks, list) or len(ranks) > MAX_FOUND or not all(_rank(r) for r in ranks):
        raise TypeError("a node reached's ranks are not a list of ranks")
    return Reached(host, how, state, detail, tuple(ranks))


def _rank(value: object) -> bool:
    return type(value) is int and 0 <= value < MAX_JOB


def _read_link(item: list[Any]) -> Link:
    name, kind, state, carrier, flaps, phys = item[:6]
    texts = all(isinstance(t, str) for t in (name, kind, state, phys))
    if not texts or not (carrier is None or isinstance(carrier, bool)) or not (flaps is None or type(flaps) is int):
        raise TypeError("a link is not a name, a kind, a state and its counters")
    return Link(name, kind, state, carrier, flaps, phys)


def _read_sample(names: list[str], values: list[Any]) -> Sample:
    known: dict[str, Any] = {}
    for name, value in zip(names, values, strict=True):
        if name in SAMPLE_FIELDS and value is not None:
            known[name] = _checked(name, value)
    if "pid" not in known or "t" not in known or "state" not in known:
        raise KeyError("a look without its process, time or state")
    return Sample(**known)


def _checked(name: str, value: Any) -> Any:
    """``value`` of a look's field ``name``, if it is of the field's type; raises otherwise."""
    if name in TEXT_FIELDS and isinstance(value, str):
        return value
    if name in NUMBER_FIELDS and _finite(value):
        return float(value)
    if name in INT_FIELDS and type(value) is int and 0 <= value < 2**63:
        return value
    if name == "fifo" and isinstance(value, bool):
        return value
    if name == "mount" and isinstance(value, list) and len(value) == 3 and all(isinstance(v, str) for v in value):
        return Mount(*value)
    raise TypeError(f"a look's {name} is not what it should be")


def _read_stack(item: list[Any]) -> Taken:
    pid, since, frames, error, owns_gil, partial, how = item[:7]
    if type(pid) is not int or not _finite(since):
        raise TypeError("a stack without its process or stall")
    read = None
    if frames is not None:
        read = [_read_frame(f) for f in frames[:MAX_FRAMES]]
    if not all(t is None or isinstance(t, str) for t in (error, partial)) or how not in HOWS:
        raise TypeError("a stack's words are not text")
    stack = OutsideStack(frames=read, error=error, owns_gil=bool(owns_gil), partial=partial, how=how)
    return Taken(pid, float(since), stack)


def _read_frame(f: list[Any]) -> StackFrame:
    file, line, func, code = f[:4]
    if not (isinstance(file, str) and type(line) is int and isinstance(func, str)):
        raise TypeError("a frame is not a file, a line and a function")
    return StackFrame(file=file, line=line, func=func, code=code if isinstance(code, str) else None)


def _finite(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)
