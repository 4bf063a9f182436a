"""A report as it travels: a fixed binary header with the numbers the monitor judges every
rank by, a row per process group and per point-to-point channel, then the report in msgpack
(see :mod:`distmon.wire`)."""

from __future__ import annotations

import hashlib
import math
import struct
from typing import TYPE_CHECKING, Any, overload

import msgpack

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

from distmon.wire.convert import converter, to_wire
from distmon.wire.schema import (
    HARDWARE_THROTTLE,
    SEND,
    STOPPED_HOWS,
    VERSION,
    Report,
    StackFrame,
    WireError,
)

FRAME_VERSION = 3
MAX_MESSAGE_BYTES = 256 * 1024
"""Larger messages are dropped unread: a rank's report is a few hundred bytes."""

HEADER_FIELDS_2 = (
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
"""A version 2 frame's header: a version 3 header less the pace's fields, which it lacks."""
HEADER_FIELDS = (*HEADER_FIELDS_2, ("paced", "d"), ("waited", "d"))
"""A frame's header, in order, with its struct codes: ``groups`` and ``channels`` count the
rows after it, ``report`` the bytes of the msgpack report after them; absent numbers are
NaN; ``stack`` hashes the stack while the rank is stalled (0 otherwise), so ranks standing
in the same place can be told without their stacks; ``paced`` and ``waited`` are the report's
:class:`~distmon.wire.schema.Pace`."""
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
HEADER_2 = struct.Struct("<" + "".join(code for _, code in HEADER_FIELDS_2))
GROUP_ROW = struct.Struct("<" + "".join(code for _, code in GROUP_FIELDS))
CHANNEL_ROW = struct.Struct("<" + "".join(code for _, code in CHANNEL_FIELDS))
MAX_ROWS = 255

FLAG_EXITED = 1
FLAG_STOPPED_BY_SIGNAL = 2
FLAG_RAISED = 4
FLAG_STALLED = 8
FLAG_WORKER_DEAD = 16
FLAG_GPU_FAULT = 32
FLAG_HAS_GPU = 64
FLAG_FOUND = 128
"""The report is a node's eye's, for a rank found from outside (:class:`~distmon.wire.schema.Outside`);
never with :data:`FLAG_RAISED` (the eye sees no exception). Ranks before issue 42 set this bit on
an exception they judged a consequence: with :data:`FLAG_RAISED`, it is that (:func:`found_in_flags`)."""


@overload
def found_in_flags(flags: int) -> bool: ...
@overload
def found_in_flags(flags: npt.NDArray[Any]) -> npt.NDArray[np.bool_]: ...
def found_in_flags(flags: int | npt.NDArray[Any]) -> bool | npt.NDArray[np.bool_]:
    """Whether ``flags`` (a header's, or an array of them) say the report is a node's eye's for
    a rank found from outside: the one reading of it, for the eye, the monitor's intake and its
    facts."""
    return ((flags & FLAG_FOUND) != 0) & ((flags & FLAG_RAISED) == 0)


"""The header's ``flags``: facts about the rank, never a judgement of them. Bit 128 is not sent:
ranks before issue 42 set it when their exception said a peer or a DataLoader worker went away
first; the monitor now decides that itself and ignores the bit
(:mod:`distmon.monitor.state.consequences`)."""


def encode(report: Report) -> bytes:
    """The frame a rank sends: header, group and channel rows, then the report."""
    body = msgpack.packb(to_wire(report), use_bin_type=True)
    groups, channels = report.groups[:MAX_ROWS], report.p2p[:MAX_ROWS]
    gpu, memory, step, pace = report.gpu, report.memory, report.step_time, report.pace
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
        _nan(pace.samples if pace else None),
        _nan(pace.waiting if pace else None),
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
    """The msgpack report inside a frame of this version or version 2 (a bare report, as
    version 1 sent it, is its own)."""
    header = {FRAME_VERSION: HEADER, 2: HEADER_2}.get(data[0]) if data else None
    if header is None:
        return data
    if len(data) < header.size:
        raise WireError("malformed", "a frame shorter than its header")
    groups, channels = data[2], data[3]
    start = header.size + groups * GROUP_ROW.size + channels * CHANNEL_ROW.size
    (length,) = struct.unpack_from("<I", data, _REPORT_OFFSET)
    if start + length != len(data):
        raise WireError("malformed", "a frame whose parts do not add up to its length")
    return data[start:]


def name_hash(name: str) -> int:
    """A string as it travels in headers and rows: 64 bits of BLAKE2b, never 0 (none)."""
    value = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
    return value or 1


def stack_hash(frames: list[StackFrame]) -> int:
    return name_hash("\n".join(f"{f.file}:{f.line}:{f.func}" for f in frames))


def _flags(report: Report) -> int:
    flags = 0
    if report.exit is not None:
        flags |= FLAG_EXITED | (FLAG_STOPPED_BY_SIGNAL if report.exit.how in STOPPED_HOWS else 0)
    if report.exception is not None:
        flags |= FLAG_RAISED
    if report.stalled_since is not None:
        flags |= FLAG_STALLED
    if any(not w.alive and (w.signal or w.exitcode) for loader in report.loaders for w in loader.workers):
        flags |= FLAG_WORKER_DEAD
    if report.outside is not None:
        flags |= FLAG_FOUND
    gpu = report.gpu
    if gpu is not None:
        flags |= FLAG_HAS_GPU
        if gpu.xid or gpu.ecc or set(gpu.throttle or ()) & HARDWARE_THROTTLE:
            flags |= FLAG_GPU_FAULT
    return flags


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


_REPORT_OFFSET = struct.calcsize(
    "<" + "".join(code for name, code in HEADER_FIELDS[: [n for n, _ in HEADER_FIELDS].index("report")])
)


def decode(data: bytes) -> Report:
    """Parse and validate one message, a frame or a bare report; raise :class:`WireError` on
    anything else."""
    report: Report = converter(Report)(_unpack(data))
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


def exception_message(data: bytes) -> str | None:
    """A message's exception message, read without building the whole report: for a reader
    of that one field as reports come in. None when absent or malformed."""
    try:
        exception = _unpack(data).get("exception")
    except WireError:
        return None
    message = exception.get("message") if isinstance(exception, dict) else None
    return message if isinstance(message, str) else None


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
