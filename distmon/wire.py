r"""The wire format between a training rank and the monitor: the one place the schema lives.

Each rank reports in one kind of message, a :class:`Report`: its whole current state, every
interval and at once when something changes (a stall, an exception, a dead DataLoader
worker, the exit). Because every report is complete, a monitor started late or restarted
knows every rank after one interval, and a lost message costs nothing.

A report travels as a *frame* (:func:`encode`): a fixed binary header with the numbers the
monitor judges every rank by, every second (:data:`HEADER_FIELDS`), a fixed-size row per
process group (:data:`GROUP_FIELDS`) and per point-to-point channel
(:data:`CHANNEL_FIELDS`), then the whole report in msgpack (a map per dataclass, keyed by
field name, a field that is ``None`` left out). A monitor of thousands of ranks reads the
headers and rows of a whole batch of frames at once, as arrays, and decodes a report only
when it needs the rest (a stack, an exception): see :mod:`distmon.monitor.frames`. Strings
in the header and rows (the job, the host, group ids and ops) are :func:`name_hash`\ es;
the report names them. All little-endian.

Decoding checks the version and the type of every field, so a malformed or foreign message
raises :class:`WireError` and never reaches the detector.

Frame version 2 (schema version ``v`` 1 of the report inside; a bare msgpack report, as
version 1 sent it, is still read). Times are unix seconds from the rank's own clock;
durations are seconds; sizes are bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import struct
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Union

import msgpack

VERSION = 1
"""Of the report inside a frame."""
FRAME_VERSION = 2
MAX_MESSAGE_BYTES = 256 * 1024
"""Larger messages are dropped unread: a rank's report is a few hundred bytes."""

HEADER_FIELDS = (
    ("version", "B"),
    ("flags", "B"),
    ("groups", "B"),
    ("channels", "B"),
    ("rank", "i"),
    ("world", "i"),
    ("n", "I"),
    ("job", "Q"),
    ("host", "Q"),
    ("pid", "i"),
    ("local_rank", "i"),
    ("t", "d"),
    ("interval", "d"),
    ("data_wait", "d"),
    ("step_p50", "d"),
    ("report", "I"),
    ("steps", "q"),
    ("forwards", "q"),
    ("stalled_since", "d"),
    ("last_step_t", "d"),
    ("rss", "d"),
    ("gpu_used", "d"),
    ("gpu_reserved", "d"),
    ("gpu_allocated", "d"),
    ("gpu_total", "d"),
    ("stack", "Q"),
)
"""A frame's header, in order, with its struct codes: ``groups`` and ``channels`` count the
rows after it, ``report`` the bytes of the msgpack report after them; absent numbers are
NaN; ``stack`` hashes the stack while the rank is stalled (0 otherwise), so ranks standing
in the same place can be told without their stacks."""
GROUP_FIELDS = (("id", "Q"), ("enqueued", "q"), ("completed", "q"), ("since", "d"), ("op", "Q"))
"""A process group's row: :class:`GroupStatus`, ``op`` 0 when unknown."""
CHANNEL_FIELDS = (
    ("group", "Q"),
    ("peer", "i"),
    ("dir", "i"),
    ("posted", "q"),
    ("completed", "q"),
    ("blocked", "q"),
    ("blocked_since", "d"),
)
"""A point-to-point channel's row: :class:`P2P`, ``dir`` 0 for a send and 1 for a receive,
``blocked`` -1 when not blocked."""
HEADER = struct.Struct("<" + "".join(code for _, code in HEADER_FIELDS))
GROUP_ROW = struct.Struct("<" + "".join(code for _, code in GROUP_FIELDS))
CHANNEL_ROW = struct.Struct("<" + "".join(code for _, code in CHANNEL_FIELDS))
MAX_ROWS = 255

EXITED = 1
STOPPED_BY_SIGNAL = 2
RAISED = 4
STALLED = 8
WORKER_DEAD = 16
GPU_FAULT = 32
HAS_GPU = 64
CONSEQUENCE = 128
"""The header's ``flags``; ``CONSEQUENCE``: the exception raised says a peer or a DataLoader
worker went away first (:data:`PEER_LOST`, :data:`WORKER_DIED`)."""
PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|Connection refused"
    r"|Watchdog caught collective operation timeout|communicator was aborted"
    r"|remote process exited|DistNetworkError|Socket Timeout|timed out|Timed out",
    re.IGNORECASE,
)
"""What a rank raises when another one died first."""
WORKER_DIED = re.compile(r"DataLoader worker \(pid", re.IGNORECASE)
"""What a rank raises when one of its DataLoader workers died."""
HARDWARE_THROTTLE = frozenset({"hw_slowdown", "hw_thermal", "power_brake"})
"""Throttle reasons that mean the GPU is failing or overheating, not just capped."""


class WireError(ValueError):
    """A message that is not a valid distmon report; ``reason`` says which way, for counting."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class Frame:
    """One Python stack frame."""

    file: str
    line: int
    func: str
    code: str | None = None


@dataclass
class GroupStatus:
    """One process group as this rank sees it, from PyTorch's Flight Recorder.

    ``id`` is the group's name (torch's ``group_name``, the same on every member), with
    ``:backend`` appended for a group that has more than one backend. ``enqueued`` and
    ``completed`` are the collective sequence numbers of the group (the SeqNum the NCCL
    watchdog prints), counting collectives only: a group's point-to-point ops are in
    :class:`P2P`. ``enqueued > completed`` means collectives are in flight, and the
    oldest of them, ``completed + 1``, is the one ``op`` and ``since`` describe (NCCL
    routinely runs a few ahead). ``ranks`` is run-length encoded as ``[start, count,
    stride]`` triples so a group of thousands of ranks costs a few bytes.
    """

    id: str
    backend: str
    size: int
    ranks: list[list[int]]
    timeout: float | None
    enqueued: int
    completed: int
    started: int | None = None
    desc: str | None = None
    """``group_desc`` (``default_pg``, ``mesh_tp``, a user's name); absent when it has none."""
    op: str | None = None
    """The op of the oldest collective in flight (``all_reduce``), once the rank has looked it up."""
    since: float | None = None
    """When the oldest collective in flight was enqueued (or first seen incomplete)."""


SEND = "send"
RECV = "recv"
ANY_SOURCE = -1
"""The peer of a receive posted without a source (``dist.recv(t)``): any rank of the group."""


@dataclass
class P2P:
    """One point-to-point channel of this rank: its sends to, or receives from, ``peer`` in
    group ``group`` (a :class:`GroupStatus` ``id``).

    Ops on a channel are numbered from 1 in the order posted; a send #k matches the peer's
    receive #k. ``posted`` and ``completed`` count them. ``pending`` is the oldest op not yet
    completed and ``since`` when it was posted. ``blocked`` is the op the rank is held up in,
    and ``blocked_since`` since when: on gloo, the one its training thread waits in; on NCCL,
    whose waits return at once, the oldest one the GPU has not completed.
    """

    group: str
    peer: int
    """The peer's global rank, or :data:`ANY_SOURCE`."""
    dir: str
    """:data:`SEND` or :data:`RECV`."""
    posted: int
    completed: int
    pending: int | None = None
    since: float | None = None
    blocked: int | None = None
    blocked_since: float | None = None


@dataclass
class StepStats:
    """Step times over the rank's recent steps (seconds)."""

    n: int
    mean: float
    p50: float
    max: float
    last: float


@dataclass
class GpuStatus:
    """The rank's GPU: torch's caching allocator and NVML, each present where available."""

    index: int
    allocated: int | None = None
    reserved: int | None = None
    peak: int | None = None
    used: int | None = None
    total: int | None = None
    util: float | None = None
    temp: float | None = None
    power: float | None = None
    throttle: list[str] | None = None
    xid: int | None = None
    ecc: int | None = None


@dataclass
class Memory:
    """Host memory of the rank's process, and the node's limits that matter for it."""

    rss: int
    host_total: int | None = None
    host_available: int | None = None
    shm_total: int | None = None
    shm_free: int | None = None


@dataclass
class Usage:
    """What the rank's process did over the last ``seconds``: CPU seconds (every thread's),
    and bytes read and written through system calls. A rank the others wait for says so
    whether it works (a checkpoint, an evaluation) or is stuck."""

    seconds: float
    cpu: float
    read: int
    written: int


@dataclass
class Worker:
    """A DataLoader worker process. ``signal`` is a name such as ``SIGKILL``."""

    pid: int
    alive: bool
    exitcode: int | None = None
    signal: str | None = None
    rss: int | None = None
    id: int | None = None
    """The worker's id in its DataLoader (``torch.utils.data.get_worker_info().id``)."""
    stack: list[Frame] | None = None
    """Taken from outside with py-spy, innermost last, while a stalled rank waits on this worker."""
    stack_error: str | None = None
    """Why ``stack`` could not be taken."""


@dataclass
class Loader:
    """One live multi-process DataLoader iterator in the rank.

    While the training loop waits in ``next()``, ``waiting`` is the index of the batch it
    waits for, ``worker`` the id of the worker that owes it, and ``since`` when the wait began.
    """

    id: int
    expected: int
    workers: list[Worker]
    waiting: int | None = None
    worker: int | None = None
    since: float | None = None


@dataclass
class ExceptionInfo:
    """An uncaught exception: the rank's last words."""

    type: str
    message: str
    where: Frame | None
    traceback: list[Frame]
    t: float


TERMINATED = "terminated"
INTERRUPTED = "interrupted"
ENDED = "ended"
STOPPED = frozenset({TERMINATED, INTERRUPTED, ENDED})
"""The ways a rank is stopped from outside rather than ending on its own."""


@dataclass
class ExitInfo:
    """How the process ended: ``how`` is ``clean``, ``exception``, ``interrupted`` (Ctrl-C),
    ``terminated`` (SIGTERM, as torchrun sends every surviving rank after one fails), or
    ``ended`` (by distmon, at the monitor's command: ``--abort-on-hang``)."""

    how: str
    t: float


@dataclass
class Report:
    """A rank's complete state. The only message on the wire."""

    job: str
    rank: int
    world: int
    host: str
    pid: int
    t: float
    n: int
    """Reports sent so far by this process: a gap means lost messages, a reset a restart."""
    interval: float
    local_rank: int = 0
    torch: str | None = None
    backend: str | None = None
    steps: int = 0
    forwards: int = 0
    last_step_t: float | None = None
    step_time: StepStats | None = None
    data_wait: float | None = None
    """Share of the last interval the training loop spent waiting for DataLoader batches."""
    groups: list[GroupStatus] = field(default_factory=list)
    p2p: list[P2P] = field(default_factory=list)
    """Point-to-point channels this rank has used; their ops are not counted in ``groups``."""
    stalled_since: float | None = None
    """Set while the rank has made no progress (steps or collectives) for a while."""
    stack: list[Frame] | None = None
    """The main thread's stack, innermost last, while stalled."""
    memory: Memory | None = None
    usage: Usage | None = None
    gpu: GpuStatus | None = None
    loaders: list[Loader] = field(default_factory=list)
    exception: ExceptionInfo | None = None
    exit: ExitInfo | None = None
    v: int = VERSION


def encode(report: Report) -> bytes:
    """The frame a rank sends: header, group and channel rows, then the report."""
    body = msgpack.packb(_to_wire(report), use_bin_type=True)
    groups, channels = report.groups[:MAX_ROWS], report.p2p[:MAX_ROWS]
    gpu, memory, step = report.gpu, report.memory, report.step_time
    header = HEADER.pack(
        FRAME_VERSION,
        _flags(report),
        len(groups),
        len(channels),
        report.rank,
        report.world,
        report.n,
        name_hash(report.job),
        name_hash(report.host),
        report.pid,
        report.local_rank,
        report.t,
        report.interval,
        _nan(report.data_wait),
        _nan(step.p50 if step else None),
        len(body),
        report.steps,
        report.forwards,
        _nan(report.stalled_since),
        _nan(report.last_step_t),
        _nan(memory.rss if memory else None),
        _nan(gpu.used if gpu else None),
        _nan(gpu.reserved if gpu else None),
        _nan(gpu.allocated if gpu else None),
        _nan(gpu.total if gpu else None),
        stack_hash(report.stack) if report.stack else 0,
    )
    rows = [
        GROUP_ROW.pack(name_hash(g.id), g.enqueued, g.completed, _nan(g.since), name_hash(g.op) if g.op else 0)
        for g in groups
    ]
    rows += [
        CHANNEL_ROW.pack(
            name_hash(c.group),
            c.peer,
            0 if c.dir == SEND else 1,
            c.posted,
            c.completed,
            -1 if c.blocked is None else c.blocked,
            _nan(c.blocked_since),
        )
        for c in channels
    ]
    return b"".join([header, *rows, body])


def report_bytes(data: bytes) -> bytes:
    """The msgpack report inside a frame (a bare report, as version 1 sent it, is its own)."""
    if not data or data[0] != FRAME_VERSION:
        return data
    if len(data) < HEADER.size:
        raise WireError("malformed", "a frame shorter than its header")
    groups, channels = data[2], data[3]
    start = HEADER.size + groups * GROUP_ROW.size + channels * CHANNEL_ROW.size
    (length,) = struct.unpack_from("<I", data, _REPORT_OFFSET)
    if start + length != len(data):
        raise WireError("malformed", "a frame whose parts do not add up to its length")
    return data[start:]


def name_hash(name: str) -> int:
    """A string as it travels in headers and rows: 64 bits of BLAKE2b, never 0 (none)."""
    value = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
    return value or 1


def stack_hash(frames: list[Frame]) -> int:
    return name_hash("\n".join(f"{f.file}:{f.line}:{f.func}" for f in frames))


def _flags(report: Report) -> int:
    flags = 0
    if report.exit is not None:
        flags |= EXITED | (STOPPED_BY_SIGNAL if report.exit.how in STOPPED else 0)
    if report.exception is not None:
        flags |= RAISED
        message = report.exception.message
        if PEER_LOST.search(message) or WORKER_DIED.search(message):
            flags |= CONSEQUENCE
    if report.stalled_since is not None:
        flags |= STALLED
    if any(not w.alive and (w.signal or w.exitcode) for loader in report.loaders for w in loader.workers):
        flags |= WORKER_DEAD
    gpu = report.gpu
    if gpu is not None:
        flags |= HAS_GPU
        if gpu.xid or gpu.ecc or set(gpu.throttle or ()) & HARDWARE_THROTTLE:
            flags |= GPU_FAULT
    return flags


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


_REPORT_OFFSET = struct.calcsize(
    "<" + "".join(code for name, code in HEADER_FIELDS[: [n for n, _ in HEADER_FIELDS].index("report")])
)


def decode(data: bytes) -> Report:
    """Parse and validate one message, a frame or a bare report; raise :class:`WireError` on
    anything else."""
    report: Report = _converter(Report)(_unpack(data))
    return report


def gpu_util(data: bytes) -> float | None:
    """A message's GPU utilization (``gpu.util``, 0 to 100), read without building the whole
    report: for a reader of that one field of many reports. None when absent or malformed."""
    try:
        gpu = _unpack(data).get("gpu")
    except WireError:
        return None
    util = gpu.get("util") if isinstance(gpu, dict) else None
    return float(util) if type(util) is float or type(util) is int else None


def host_of(data: bytes) -> str | None:
    """A message's host name, read without building the whole report; None when malformed."""
    try:
        host = _unpack(data).get("host")
    except WireError:
        return None
    return host if isinstance(host, str) else None


def _unpack(data: bytes) -> dict[Any, Any]:
    """The report's map, of the version this reads; raise :class:`WireError` otherwise."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise WireError("oversized", f"{len(data)} bytes")
    try:
        obj = msgpack.unpackb(report_bytes(data), raw=False, strict_map_key=True)
    except WireError:
        raise
    except Exception as e:  # msgpack raises several unrelated types for bad bytes
        raise WireError("malformed", str(e)) from None
    if not isinstance(obj, dict):
        raise WireError("malformed", "not a map")
    if type(obj.get("v")) is not int or obj["v"] != VERSION:
        raise WireError("version", f"schema version {obj.get('v')!r}, expected {VERSION}")
    return obj


def rank_runs(ranks: list[int]) -> list[list[int]]:
    """Encode a sorted rank list as ``[start, count, stride]`` runs."""
    runs: list[list[int]] = []
    i = 0
    while i < len(ranks):
        start = ranks[i]
        stride = ranks[i + 1] - start if i + 1 < len(ranks) else 1
        count = 1
        while i + count < len(ranks) and ranks[i + count] - ranks[i + count - 1] == stride:
            count += 1
        if count == 1:
            stride = 1
        runs.append([start, count, stride])
        i += count
    return runs


def expand_runs(runs: list[list[int]]) -> list[int]:
    return [start + k * stride for start, count, stride in runs for k in range(count)]


def _to_wire(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_wire(value) for f in dataclasses.fields(obj) if (value := getattr(obj, f.name)) is not None}
    if isinstance(obj, list):
        return [_to_wire(item) for item in obj]
    return obj


Convert = Callable[[Any], Any]


@cache
def _converter(tp: Any) -> Convert:
    """A checker-and-builder for one type, made once: decoding runs per message, at scale."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        convert_inner = _converter(inner)
        return lambda value: None if value is None else convert_inner(value)
    if origin is list:
        convert_item = _converter(typing.get_args(tp)[0])

        def convert_list(value: Any) -> list[Any]:
            if type(value) is not list:
                raise WireError("malformed", f"{_name(value)} where a list belongs")
            return [convert_item(item) for item in value]

        return convert_list
    if dataclasses.is_dataclass(tp):
        return _dataclass_converter(tp)
    if tp is float:

        def convert_float(value: Any) -> float:
            if type(value) is float:
                return value
            if type(value) is int:
                return float(value)
            raise WireError("malformed", f"{_name(value)} where a number belongs")

        return convert_float

    def convert_exact(value: Any) -> Any:
        if type(value) is not tp:
            raise WireError("malformed", f"{_name(value)} where {tp.__name__} belongs")
        return value

    return convert_exact


def _dataclass_converter(cls: Any) -> Convert:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _converter(hints[f.name]) for f in dataclasses.fields(cls)}
    required = frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and not _optional(hints[f.name])
    )

    optional_missing = frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and _optional(hints[f.name])
    )

    def convert(value: Any) -> Any:
        if type(value) is not dict:
            raise WireError("malformed", f"{_name(value)} where a {cls.__name__} map belongs")
        if not required <= value.keys():
            missing = ", ".join(sorted(required - value.keys()))
            raise WireError("malformed", f"{cls.__name__} lacks {missing}")
        known = {}
        for key, item in value.items():
            field_converter = fields.get(key)
            if field_converter is not None:  # unknown keys: a newer minor revision, ignored
                try:
                    known[key] = field_converter(item)
                except WireError as e:
                    raise WireError(e.reason, f"{cls.__name__}.{key}: {e.detail}") from None
        for name in optional_missing - known.keys():
            known[name] = None
        return cls(**known)

    return convert


def _optional(tp: Any) -> bool:
    """``X | None``: may be left out, as :func:`encode` leaves out every ``None``."""
    return typing.get_origin(tp) in (Union, types.UnionType) and type(None) in typing.get_args(tp)


def _name(value: Any) -> str:
    return type(value).__name__
