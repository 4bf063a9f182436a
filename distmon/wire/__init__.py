r"""The wire between processes: what a training rank sends, how it travels, and what a relay
sends the monitor; the one place the schema lives. The bottom layer: it imports nothing of
distmon, and everything else may import it.

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
when it needs the rest (a stack, an exception): see :mod:`distmon.wire.arrays`. Strings
in the header and rows (the job, the host, group ids and ops) are :func:`name_hash`\ es;
the report names them. All little-endian.

Decoding checks the version and the type of every field, so a malformed or foreign message
raises :class:`WireError` and never reaches the detector.

Frame version 3 (schema version ``v`` 1 of the report inside; version 2 frames, whose
header lacks the pace, and bare msgpack reports, as version 1 sent them, are still read).
Times are unix seconds from the rank's own clock; durations are seconds; sizes are bytes.

One concern a module: :mod:`~distmon.wire.schema` (the report's dataclasses),
:mod:`~distmon.wire.frame` (the binary frame: header, rows, encode and decode) and
:mod:`~distmon.wire.convert` (msgpack's plain values to dataclasses and back, every field's
type checked), all imported from here; :mod:`~distmon.wire.sockets` (the sockets both ways, and
the commands that go down them), :mod:`~distmon.wire.arrays` (a batch of frames read as
arrays) and :mod:`~distmon.wire.column_batch` (the columnar batch a relay sends), imported from
where they are, by the monitor and the relays: they need numpy, which a rank never does.
"""

from distmon.wire.convert import Convert, converter, to_wire
from distmon.wire.frame import (
    CHANNEL_FIELDS,
    CHANNEL_ROW,
    FLAG_EXITED,
    FLAG_FOUND,
    FLAG_GPU_FAULT,
    FLAG_HAS_GPU,
    FLAG_RAISED,
    FLAG_STALLED,
    FLAG_STOPPED_BY_SIGNAL,
    FLAG_WORKER_DEAD,
    FRAME_VERSION,
    GROUP_FIELDS,
    GROUP_ROW,
    HEADER,
    HEADER_2,
    HEADER_FIELDS,
    HEADER_FIELDS_2,
    MAX_MESSAGE_BYTES,
    MAX_ROWS,
    decode,
    encode,
    exception_message,
    found_in_flags,
    gpu_util,
    host_of,
    name_hash,
    report_bytes,
    stack_hash,
)
from distmon.wire.schema import (
    ANY_SOURCE,
    ENDED,
    FINISHED,
    GONE,
    HARDWARE_THROTTLE,
    INTERRUPTED,
    P2P,
    PACE_SAMPLES,
    PAUSE_STEPS,
    PEER_LOST,
    RECV,
    SEND,
    STALL_FLOOR,
    STALL_STEPS,
    STOPPED_HOWS,
    TERMINATED,
    VERSION,
    WORKER_DIED,
    ExceptionInfo,
    ExitInfo,
    GpuStatus,
    GroupStatus,
    Loader,
    Memory,
    Outside,
    Pace,
    Report,
    StackFrame,
    StepStats,
    Usage,
    WireError,
    Worker,
    expand_runs,
    rank_runs,
    stall_after,
)

__all__ = [
    "ANY_SOURCE",
    "CHANNEL_FIELDS",
    "CHANNEL_ROW",
    "ENDED",
    "FINISHED",
    "FLAG_EXITED",
    "FLAG_FOUND",
    "FLAG_GPU_FAULT",
    "FLAG_HAS_GPU",
    "FLAG_RAISED",
    "FLAG_STALLED",
    "FLAG_STOPPED_BY_SIGNAL",
    "FLAG_WORKER_DEAD",
    "FRAME_VERSION",
    "GONE",
    "GROUP_FIELDS",
    "GROUP_ROW",
    "HARDWARE_THROTTLE",
    "HEADER",
    "HEADER_2",
    "HEADER_FIELDS",
    "HEADER_FIELDS_2",
    "INTERRUPTED",
    "MAX_MESSAGE_BYTES",
    "MAX_ROWS",
    "P2P",
    "PACE_SAMPLES",
    "PAUSE_STEPS",
    "PEER_LOST",
    "RECV",
    "SEND",
    "STALL_FLOOR",
    "STALL_STEPS",
    "STOPPED_HOWS",
    "TERMINATED",
    "VERSION",
    "WORKER_DIED",
    "Convert",
    "ExceptionInfo",
    "ExitInfo",
    "GpuStatus",
    "GroupStatus",
    "Loader",
    "Memory",
    "Outside",
    "Pace",
    "Report",
    "StackFrame",
    "StepStats",
    "Usage",
    "WireError",
    "Worker",
    "converter",
    "decode",
    "encode",
    "exception_message",
    "expand_runs",
    "found_in_flags",
    "gpu_util",
    "host_of",
    "name_hash",
    "rank_runs",
    "report_bytes",
    "stack_hash",
    "stall_after",
    "to_wire",
]
