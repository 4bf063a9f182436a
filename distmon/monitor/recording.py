"""The recording file: every rank message as received, and every alert change.

Format, version 1: a stream of msgpack values. The first is a header map
``{"format": "distmon-recording", "version": 1, "created": <unix time>}``; each one after
it is an array whose first element says what it is:

- ``["m", t, payload]``: a rank message received at monitor time ``t``; ``payload`` is
  the message's bytes exactly as they came off the wire (see :mod:`distmon.wire`).
- ``["a", t, event, alert, key]``: an alert ``raised``, ``updated`` or ``resolved`` at
  ``t``; ``alert`` is the map printed by ``distmon report --json``, ``key`` identifies one
  alert across its events.
- ``["d", t, counts]``: messages and connections refused since the previous such record,
  a map from reason (see :mod:`distmon.monitor.admission`) to count. Refused messages
  are not recorded themselves.

Reading it takes a few lines::

    import msgpack
    with open("run.distmon", "rb") as f:
        header, *records = msgpack.Unpacker(f, raw=False)

A file cut off mid-record (a crash, a full disk) reads up to its last whole record. A file
no distmon wrote (nesting, sizes or times beyond :data:`LIMITS`) raises
:class:`RecordingError` where it goes wrong, having read at most one record into memory.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import msgpack

from distmon.monitor.admission import MAX_WORLD
from distmon.monitor.alerts import Alert, Change
from distmon.wire import MAX_MESSAGE_BYTES

FORMAT = "distmon-recording"
VERSION = 1
SYNC_EVERY = 1.0
"""Seconds between flushes to disk: a crash loses at most this much."""
LIMITS = {
    "max_buffer_size": 4 * 1024 * 1024,
    "max_bin_len": MAX_MESSAGE_BYTES,
    "max_str_len": 1024 * 1024,
    "max_array_len": MAX_WORLD,
    "max_map_len": 64,
}
"""The largest record distmon writes is a message (at most ``MAX_MESSAGE_BYTES``) or an
alert naming at most ``MAX_WORLD`` ranks; msgpack refuses anything bigger before
allocating it, and nesting beyond 1024 levels."""
LATEST = 1e11
"""Times are unix seconds: anything outside [0, LATEST) was not written by a clock."""


class RecordingError(Exception):
    """The file is missing, empty or not a distmon recording; the message says which."""


@dataclass
class Message:
    t: float
    payload: bytes


@dataclass
class AlertEvent:
    t: float
    event: str
    alert: Alert


@dataclass
class Dropped:
    t: float
    counts: Counter[str]


Record = Message | AlertEvent | Dropped


class RecordingWriter:
    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[bytes] = open(path, "wb")  # noqa: SIM115 -- closed in close()
        self._packer = msgpack.Packer(use_bin_type=True)
        self._last_sync = time.monotonic()
        self.records = 0
        self._file.write(self._packer.pack({"format": FORMAT, "version": VERSION, "created": time.time()}))
        self.sync()

    def message(self, t: float, payload: bytes) -> None:
        self._write(["m", t, payload])

    def alert(self, t: float, change: Change) -> None:
        self._write(["a", t, change.event, change.alert.to_json(), change.alert.key])

    def dropped(self, t: float, counts: Counter[str]) -> None:
        self._write(["d", t, dict(counts)])

    def _write(self, record: list[Any]) -> None:
        self._file.write(self._packer.pack(record))
        self.records += 1
        self.sync_if_due()

    def sync_if_due(self) -> None:
        """Call at least once a second, so that an idle recorder's data reaches the disk too."""
        if time.monotonic() - self._last_sync >= SYNC_EVERY:
            self.sync()

    def sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._last_sync = time.monotonic()

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
            self._file.close()


def read_recording(path: str) -> tuple[dict[str, Any], Iterator[Record]]:
    """The header and a lazy iterator of records; raises :class:`RecordingError`."""
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed by the generator
    except OSError as e:
        raise RecordingError(f"cannot open {path}: {e.strerror}") from None
    unpacker = msgpack.Unpacker(
        f,
        raw=False,
        max_buffer_size=LIMITS["max_buffer_size"],
        max_bin_len=LIMITS["max_bin_len"],
        max_str_len=LIMITS["max_str_len"],
        max_array_len=LIMITS["max_array_len"],
        max_map_len=LIMITS["max_map_len"],
    )
    try:
        header = next(unpacker)
    except StopIteration:
        f.close()
        raise RecordingError(f"{path} is empty") from None
    except Exception:
        f.close()
        raise RecordingError(f"{path} is not a distmon recording") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        f.close()
        raise RecordingError(f"{path} is not a distmon recording")
    if header.get("version") != VERSION:
        f.close()
        raise RecordingError(
            f"{path} is a version {header.get('version')} recording; this distmon reads version {VERSION}"
        )
    if not _is_time(header.get("created", 0.0)):
        f.close()
        raise RecordingError(f"{path} is damaged: its header's creation time is {header.get('created')!r}")
    return header, _records(path, f, unpacker)


def check_recording(path: str) -> None:
    """Read the whole file once, keeping nothing; raises :class:`RecordingError`."""
    for _ in read_recording(path)[1]:
        pass


def _records(path: str, f: IO[bytes], unpacker: msgpack.Unpacker) -> Iterator[Record]:
    with f:
        while True:
            offset = unpacker.tell()
            try:
                item = next(unpacker)
            except StopIteration:
                return  # the end, or a record cut off mid-write
            except (msgpack.UnpackException, ValueError) as e:
                raise RecordingError(f"{path} is damaged at byte {offset}: {_why(e)}") from None
            record = _parse(item)
            if record is not None:
                if not _is_time(record.t):
                    raise RecordingError(f"{path} is damaged at byte {offset}: a record at time {record.t!r}")
                yield record


def _why(e: Exception) -> str:
    if isinstance(e, msgpack.exceptions.StackError):
        return "nested too deep"
    if isinstance(e, msgpack.exceptions.BufferFull):
        return f"a record over {LIMITS['max_buffer_size']} bytes"
    return str(e) or type(e).__name__


def _is_time(t: Any) -> bool:
    return type(t) in (int, float) and math.isfinite(t) and 0 <= t < LATEST


def _parse(item: Any) -> Record | None:
    """One record, or None for a record this version does not know (skipped)."""
    if not isinstance(item, list) or not item:
        return None
    try:
        if item[0] == "m" and isinstance(item[2], bytes):
            return Message(float(item[1]), item[2])
        if item[0] == "a":
            return AlertEvent(float(item[1]), str(item[2]), Alert.from_json(item[3], key=str(item[4])))
        if item[0] == "d":
            counts = Counter({str(k): int(v) for k, v in item[2].items() if type(v) is int and 0 < v < 2**63})
            return Dropped(float(item[1]), counts)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError):
        return None
    return None
