"""The recording file's format: every rank message as received, and every alert change.

A recording starts with a header, one msgpack map in clear:
``{"format": "distmon-recording", "version": 3, "created": <unix time>}``. In versions 2 and 3
(3 is what distmon writes: 2 and a relay's columns) one zlib stream follows to the end of the
file and holds the records, each a msgpack value; in version 1 (older files, still read) the
records follow the header as they are. A record is an array whose first element says what it
is:

- ``["m", t, payload]``: a rank message received at monitor time ``t``; ``payload`` is
  the message's bytes exactly as they came off the wire (see :mod:`distmon.wire`).
- ``["b", t, offsets, relays, via, payload]`` (version 2): rank messages that arrived
  together at ``t``, a :class:`distmon.wire.sockets.Batch`. The messages lie end to end in
  ``payload``, message ``i`` at ``payload[offsets[i]:offsets[i + 1]]``; ``offsets`` holds
  uint32 and ``via`` int32, little-endian, as bytes; ``relays`` is ``[[id, host], ...]``
  and ``via[i]`` the index there of the relay message ``i`` came through, -1 for none. A
  batch over :data:`~distmon.monitor.recording.batches.PIECE_BYTES` is stored as several
  such records.
- ``["n", t, relays, via, ends, headers, groups, channels, reports]`` (version 3): a relay's
  columns taken in at ``t``, a :class:`distmon.wire.column_batch.ColumnBatch` (its parts as it
  travels, the headers and rows each stored byte by byte of every record,
  :func:`~distmon.wire.column_batch.shuffled`), in pieces of at most ``PIECE_BYTES``
  (:mod:`distmon.monitor.recording.batches`).
- ``["o", t, looks]`` (version 3, from distmon 0.1 with nodes' eyes; older readers skip it):
  what the nodes' eyes saw of the job's processes, taken in at ``t``: their looks through
  /proc and the stacks taken from outside, as :mod:`distmon.node.looks` encodes them (bytes).
  The monitor's rules read them, so a replay judges with what the live monitor saw.
- ``["a", t, event, alert, key]``: an alert ``raised``, ``updated`` or ``resolved`` at
  ``t``; ``alert`` is the map printed by ``distmon report --json``, ``key`` identifies one
  alert across its events.
- ``["d", t, counts]``: messages and connections refused since the previous such record,
  a map from reason (see :mod:`distmon.monitor.state.admission`) to count, and the seconds
  the monitor did not watch, from ``t`` on, under their own reasons (``monitor_paused_s``,
  ``clock_jumped_s``: :mod:`distmon.monitor.state.unwatched`), read apart as :class:`Dropped`.
  Refused messages are not recorded themselves.

:mod:`~distmon.monitor.recording.writer` writes it, :mod:`~distmon.monitor.recording.reader`
reads it, each record as one of the classes here. Reading version 2 takes a few lines
(version 1: ``header, *records = msgpack.Unpacker(f, raw=False)``)::

    import msgpack, zlib

    def records(path):
        with open(path, "rb") as f:
            head = msgpack.Unpacker(f, raw=False)
            header = next(head)
            f.seek(head.tell())
            inflate, unpacker = zlib.decompressobj(), msgpack.Unpacker(raw=False)
            while chunk := f.read(1 << 16):
                unpacker.feed(inflate.decompress(chunk))
                yield from unpacker
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from distmon.monitor.recording.batches import stored_batch
from distmon.monitor.state.admission import MAX_WORLD
from distmon.monitor.state.alerts import Alert, Change
from distmon.monitor.state.unwatched import apart
from distmon.wire import WireError
from distmon.wire.column_batch import ColumnBatch
from distmon.wire.sockets import Batch

FORMAT = "distmon-recording"
VERSION = 3
VERSIONS = (1, 2, 3)
"""The versions this distmon reads."""
KINDS = ("m", "b", "n", "o", "a", "d")
"""The record kinds this distmon knows."""
LATEST = 1e11
"""Times are unix seconds: anything outside [0, LATEST) was not written by a clock."""


@dataclass
class MessageRecord:
    """One rank message, recorded alone (version 1): received at ``t``, its bytes as they came."""

    t: float
    payload: bytes

    def frames(self) -> list[bytes]:
        return [self.payload]


@dataclass
class BatchRecord:
    t: float
    batch: Batch

    def frames(self) -> list[bytes]:
        return self.batch.frames()


@dataclass
class ColumnRecord:
    """A relay's columns, taken in at ``t``: numbers, and the reports that came with them."""

    t: float
    batch: ColumnBatch


@dataclass
class LooksRecord:
    """What the nodes' eyes saw, taken in at ``t``: :mod:`distmon.node.looks`' bytes, read
    when replayed (and checked there: they are claims from other machines)."""

    t: float
    looks: bytes


@dataclass
class AlertEvent:
    t: float
    event: str
    alert: Alert


@dataclass
class Dropped:
    """A ``d`` record: messages refused since the last one, by reason, and seconds the monitor
    did not watch from ``t`` on, by why."""

    t: float
    dropped: Counter[str]
    unwatched: Counter[str]


Record = MessageRecord | BatchRecord | ColumnRecord | LooksRecord | AlertEvent | Dropped


def alert_record(t: float, change: Change) -> list[Any]:
    """An alert's change as an ``"a"`` record, the alert as the change left it."""
    return ["a", t, change.event, change.then.to_json(), change.then.key]


def received(records: Iterable[Record]) -> Iterator[tuple[float, bytes]]:
    """Each rank message in ``records`` with the time it was received, whether it was
    recorded alone (version 1) or in a batch; a relay's columns hold no messages."""
    for record in records:
        if isinstance(record, MessageRecord):
            yield record.t, record.payload
        elif isinstance(record, BatchRecord):
            for frame in record.frames():
                yield record.t, frame


def is_time(t: Any) -> bool:
    """``t`` is a time a clock wrote (:data:`LATEST`)."""
    return type(t) in (int, float) and math.isfinite(t) and 0 <= t < LATEST


DAMAGED = Dropped(0.0, Counter(), Counter())
"""What :func:`parse_record` returns for a record of a known kind that does not hold what it should."""


def parse_record(item: Any) -> Record | None:
    """One record; None for a record this version does not know (skipped), :data:`DAMAGED`
    for one of a known kind that is malformed."""
    if not isinstance(item, list) or not item or item[0] not in KINDS:
        return None
    try:
        if item[0] == "m" and isinstance(item[2], bytes):
            return MessageRecord(float(item[1]), item[2])
        if item[0] in ("b", "n"):
            batch = stored_batch(item)
            t = float(item[1])
            return BatchRecord(t, batch) if isinstance(batch, Batch) else ColumnRecord(t, batch)
        if item[0] == "o" and isinstance(item[2], bytes):
            return LooksRecord(float(item[1]), item[2])
        if item[0] == "a" and isinstance(item[3], dict) and _alert_fields(item[3]):
            return AlertEvent(float(item[1]), str(item[2]), Alert.from_json(item[3], key=str(item[4])))
        if item[0] == "d":
            counts = {str(k): int(v) for k, v in item[2].items() if type(v) is int and 0 < v < 2**63}
            return Dropped(float(item[1]), *apart(counts))
    except (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError, RecursionError, WireError):
        return DAMAGED
    return DAMAGED


def _alert_fields(alert: dict[str, Any]) -> bool:
    """An alert's fields are what the monitor writes: words, ranks in range, a clock's time."""
    words = all(type(alert.get(k)) is str for k in ("kind", "severity", "summary", "detail"))
    ranks = alert.get("ranks")
    ranked = type(ranks) is list and all(type(r) is int and 0 <= r < MAX_WORLD for r in ranks)
    return words and ranked and is_time(alert.get("t"))
