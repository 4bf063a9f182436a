"""The recording file: every rank message as received, and every alert change.

A recording starts with a header, one msgpack map in clear:
``{"format": "distmon-recording", "version": 3, "created": <unix time>}``. In versions 2 and 3
(3 is what distmon writes: 2 and a relay's columns) one zlib stream follows to the end of the
file and holds the records, each a msgpack value; in version 1 (older files, still read) the
records follow the header as they are. A record is an array whose first element says what it
is:

- ``["m", t, payload]``: a rank message received at monitor time ``t``; ``payload`` is
  the message's bytes exactly as they came off the wire (see :mod:`distmon.wire`).
- ``["b", t, offsets, relays, via, payload]`` (version 2): rank messages that arrived
  together at ``t``, a :class:`distmon.link.Batch`. The messages lie end to end in
  ``payload``, message ``i`` at ``payload[offsets[i]:offsets[i + 1]]``; ``offsets`` holds
  uint32 and ``via`` int32, little-endian, as bytes; ``relays`` is ``[[id, host], ...]``
  and ``via[i]`` the index there of the relay message ``i`` came through, -1 for none. A
  batch over :data:`PIECE_BYTES` is stored as several such records.
- ``["n", t, relays, via, ends, headers, groups, channels, reports]`` (version 3): a relay's
  columns taken in at ``t``, a :class:`distmon.columnar.batch.ColumnBatch` (its parts as it
  travels, the headers and rows each stored byte by byte of every record,
  :func:`~distmon.columnar.batch.shuffled`), in pieces of at most :data:`PIECE_BYTES`.
- ``["a", t, event, alert, key]``: an alert ``raised``, ``updated`` or ``resolved`` at
  ``t``; ``alert`` is the map printed by ``distmon report --json``, ``key`` identifies one
  alert across its events.
- ``["d", t, counts]``: messages and connections refused since the previous such record,
  a map from reason (see :mod:`distmon.monitor.state.admission`) to count. Refused messages
  are not recorded themselves.

The writer flushes the zlib stream (``Z_SYNC_FLUSH``) and the file to disk at least every
:data:`SYNC_EVERY` seconds, and ends the stream when it closes. A write that fails (a full
disk, a file-size limit, the file removed under it) stops the recording, never the monitor:
the writer says so once, in one line, and writes nothing more, so the file reads up to its
last whole record. Reading version 2 takes a
few lines (version 1: ``header, *records = msgpack.Unpacker(f, raw=False)``)::

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

A file cut off anywhere (a crash, a full disk) reads up to its last whole record. A file no
distmon wrote raises :class:`RecordingError` where it goes wrong, having held at most one
record in memory: nesting, sizes or times beyond :data:`LIMITS`, or a stream that inflates
to over :data:`MAX_RATIO` times its size (a compression bomb).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import msgpack

from distmon.columnar.batch import ColumnBatch, Incoming
from distmon.link import Batch
from distmon.monitor.recording.batches import PIECE_BYTES, batch_records, stored_batch
from distmon.monitor.state.admission import MAX_WORLD
from distmon.monitor.state.alerts import Alert, Change
from distmon.regular import open_regular, why_not
from distmon.visible import visible
from distmon.wire import WireError

FORMAT = "distmon-recording"
VERSION = 3
VERSIONS = (1, 2, 3)
"""The versions this distmon reads."""
SYNC_EVERY = 1.0
"""Seconds between flushes to disk: a crash loses at most this much."""
LEVEL = 1
"""zlib's fastest: the monitor's loop compresses every report as it arrives (a report per rank
a second), so its CPU counts for more than the last bytes a higher level would save
(``benchmarks/bench_recording.py`` compares it with zlib's default, 6)."""
LIMITS = {
    "max_buffer_size": 4 * 1024 * 1024,
    "max_bin_len": PIECE_BYTES,
    "max_str_len": 1024 * 1024,
    "max_array_len": MAX_WORLD,
    "max_map_len": 64,
}
"""The largest record distmon writes is a batch piece (at most ``PIECE_BYTES`` of messages)
or an alert naming at most ``MAX_WORLD`` ranks; msgpack refuses anything bigger before
allocating it, and nesting beyond 1024 levels."""
READ = 4096
"""Bytes of a version 2 stream inflated at a time: a damaged stream is found within them."""
CHUNK = 64 * 1024
"""Bytes inflated at most from them in one go."""
MAX_RATIO = 256
"""A version 2 stream inflates to at most this many times its size (plus :data:`RATIO_SLACK`):
far more than distmon's recordings inflate (``benchmarks/bench_recording.py`` measures their
sizes), far less than a compression bomb's 1032 times (deflate's most)."""
RATIO_SLACK = 64 * 1024
LATEST = 1e11
"""Times are unix seconds: anything outside [0, LATEST) was not written by a clock."""


class RecordingError(Exception):
    """The file is missing, empty or not a distmon recording; the message says which."""


@dataclass
class Message:
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
class AlertEvent:
    t: float
    event: str
    alert: Alert


@dataclass
class Dropped:
    t: float
    counts: Counter[str]


Record = Message | BatchRecord | ColumnRecord | AlertEvent | Dropped


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RecordingWriter:
    """Writes version 2: the header, then records through one zlib stream, flushed and
    synced to disk at least every :data:`SYNC_EVERY` seconds so that a crash leaves a file
    readable up to the last flush.

    Opening and writing the header raise ``OSError`` (the user named a file that cannot be
    written); after that a failed write stops the recording: :attr:`stopped` says why and
    when, ``say`` is told once, and every later record is dropped.
    """

    def __init__(self, path: str, say: Callable[[str], None] = _say) -> None:
        self.path = path
        self._say = say
        self.stopped: str | None = None
        """Why and when the recording stopped, in one line; None while it records."""
        self._file: IO[bytes] = open(path, "wb")  # noqa: SIM115 -- closed in close()
        self._inode = os.fstat(self._file.fileno()).st_ino
        self._packer = msgpack.Packer(use_bin_type=True)
        self._deflate = zlib.compressobj(LEVEL)
        self._last_sync = time.monotonic()
        self._unflushed = True
        self.records = 0
        try:
            self._file.write(self._packer.pack({"format": FORMAT, "version": VERSION, "created": time.time()}))
            self._sync()
        except OSError:
            with contextlib.suppress(OSError):
                self._file.close()
            raise

    def message(self, t: float, payload: bytes) -> None:
        self._write(["m", t, payload])

    def batch(self, t: float, batch: Incoming) -> None:
        """``batch`` in records of at most :data:`PIECE_BYTES` of messages (or columns) each;
        a message over ``MAX_MESSAGE_BYTES``, which the monitor refuses as oversized, is left
        out."""
        for record in batch_records(t, batch):
            self._write(record)

    def alert(self, t: float, change: Change) -> None:
        self._write(alert_record(t, change))

    def dropped(self, t: float, counts: Counter[str]) -> None:
        self._write(["d", t, dict(counts)])

    def _write(self, record: list[Any]) -> None:
        if self.stopped is not None:
            return
        try:
            out = self._deflate.compress(self._packer.pack(record))
            if out:
                self._file.write(out)
        except OSError as e:
            self._stop(e.strerror or str(e))
            return
        self._unflushed = True
        self.records += 1
        self.sync_if_due()

    def sync_if_due(self) -> None:
        """Call at least once a second, so that an idle recorder's data reaches the disk too."""
        if time.monotonic() - self._last_sync >= SYNC_EVERY:
            self.sync()

    def sync(self) -> None:
        if self.stopped is not None:
            return
        try:
            self._sync()
            if os.stat(self.path).st_ino != self._inode:
                raise FileNotFoundError
        except FileNotFoundError:
            self._stop("the file was removed or replaced")
        except OSError as e:
            self._stop(e.strerror or str(e))

    def _sync(self) -> None:
        if self._unflushed:
            self._file.write(self._deflate.flush(zlib.Z_SYNC_FLUSH))
            self._unflushed = False
        self._file.flush()
        os.fsync(self._file.fileno())
        self._last_sync = time.monotonic()

    def _stop(self, why: str) -> None:
        """The recording ends here: what reached the file stays readable up to its last
        whole record; the monitor goes on without it."""
        at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.stopped = f"the recording {self.path} stopped at {at}: {why}"
        with contextlib.suppress(OSError):
            self._file.close()  # its buffer cannot be written either
        self._say(f"distmon: {self.stopped}; watching and alerting go on, and the recording up to then stays readable")

    def close(self) -> None:
        if self.stopped is None and not self._file.closed:
            try:
                self._file.write(self._deflate.flush(zlib.Z_FINISH))
            except OSError as e:
                self._stop(e.strerror or str(e))
                return
            self._unflushed = False
            self.sync()
            if self.stopped is None:
                self._file.close()


def alert_record(t: float, change: Change) -> list[Any]:
    """An alert's change as an ``"a"`` record, the alert as it stands now."""
    return ["a", t, change.event, change.alert.to_json(), change.alert.key]


def received(records: Iterable[Record]) -> Iterator[tuple[float, bytes]]:
    """Each rank message in ``records`` with the time it was received, whether it was
    recorded alone (version 1) or in a batch; a relay's columns hold no messages."""
    for record in records:
        if isinstance(record, Message):
            yield record.t, record.payload
        elif isinstance(record, BatchRecord):
            for frame in record.frames():
                yield record.t, frame


def read_recording(path: str) -> tuple[dict[str, Any], Records]:
    """The header and a lazy iterator of records; raises :class:`RecordingError` for a file
    that is no recording. Damage inside it is skipped and told by :meth:`Records.trouble`."""
    try:
        f = open_regular(path)
    except OSError as e:
        raise RecordingError(f"cannot open {path}: {why_not(path, e)}") from None
    unpacker = _unpacker(f)
    try:
        header = _header(path, f, unpacker)
    except RecordingError:
        f.close()
        raise
    start = unpacker.tell()
    f.seek(start)
    return header, Records(path, f, start, inflated=header["version"] >= 2)


def check_recording(path: str) -> None:
    """Read the whole file once, keeping nothing; raises :class:`RecordingError` for a file
    that is no recording or of which nothing could be read."""
    records = read_recording(path)[1]
    count = sum(1 for _ in records)
    trouble = records.trouble()
    if trouble is not None and not count:
        raise RecordingError(trouble)


def _header(path: str, f: IO[bytes], unpacker: msgpack.Unpacker) -> dict[str, Any]:
    try:
        header = next(unpacker)
    except StopIteration:
        if f.tell() == 0:
            raise RecordingError(f"{path} is empty") from None
        raise RecordingError(f"{path} ends inside its header: not a whole recording") from None
    except Exception:
        raise RecordingError(f"{path} is not a distmon recording") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RecordingError(f"{path} is not a distmon recording")
    version = header.get("version")
    if type(version) is not int or version not in VERSIONS:
        raise RecordingError(
            f"{path} is a version {visible(repr(version), 40)} recording; this distmon reads versions 1 to 3"
        )
    if not _is_time(header.get("created", 0.0)):
        raise RecordingError(
            f"{path} is damaged: its header's creation time is {visible(repr(header.get('created')), 40)}"
        )
    return header


_RECORD_START = re.compile(rb"[\x93-\x99]\xa1[mbnad]")
"""How every record begins (an array of 3 to 9 whose first element is ``"m"``, ``"b"``,
``"n"``, ``"a"`` or ``"d"``): where reading starts again after a damaged record."""


class Records:
    """A recording's records, read lazily within :data:`LIMITS`, holding at most one record
    and one :data:`CHUNK` in memory. A damaged record (a flipped byte, a crafted value) is
    skipped and counted, and reading goes on at the next record's start; a damaged zlib
    stream or a compression bomb ends the reading there; a file cut mid-record reads up to
    its last whole record. :meth:`trouble` says what was wrong, in one line."""

    def __init__(self, path: str, f: IO[bytes], start: int, inflated: bool) -> None:
        self.path = path
        self._f = f
        self._start = start
        self._inflate = zlib.decompressobj() if inflated else None
        self.count = 0
        """Records read so far."""
        self.skipped = 0
        """Damaged records skipped."""
        self._first_damage: str | None = None
        self.stopped: str | None = None
        """Why reading stopped before the end of the file."""
        self.cut: str | None = None
        """Where the file ends inside a record."""
        self._read = self._records()

    def __iter__(self) -> Records:
        return self

    def __next__(self) -> Record:
        return next(self._read)

    def close(self) -> None:
        self._read.close()
        self._f.close()

    def trouble(self) -> str | None:
        """What was wrong with the file so far, in one line; None for a whole file."""
        skipped = f"{self.skipped} damaged record{'s' * (self.skipped != 1)} skipped"
        if self.stopped is not None:
            before = f"{self._first_damage}; {skipped}; then at " if self.skipped else ""
            return f"{self.path} is damaged at {before}{self.stopped}: not read further"
        line = None
        if self.skipped:
            line = f"{self.path} is damaged at {self._first_damage}; {skipped}, the rest read"
        if self.cut is not None:
            line = f"{line}; it is cut at {self.cut}" if line else f"{self.path} is cut at {self.cut}"
        return line

    def _where(self, at: int) -> str:
        return f"record {self.count + 1} (by byte {at})"

    def _damaged(self, at: int, why: str) -> None:
        self.skipped += 1
        if self._first_damage is None:
            self._first_damage = f"{self._where(at)}: {why}"

    def _records(self) -> Generator[Record, None, None]:
        with self._f:
            for item, at in self._items():
                record = parse_record(item)
                if record is DAMAGED:
                    self._damaged(at, "malformed")
                elif record is not None and not _is_time(record.t):
                    self._damaged(at, f"a record at time {visible(repr(record.t), 40)}")
                elif record is not None:
                    self.count += 1
                    yield record

    def _items(self) -> Iterator[tuple[Any, int]]:
        """Each msgpack value of the stream, with the file byte it was read by; a value
        that cannot be read is skipped up to the next record's start."""
        data = bytearray()
        """The stream's bytes from ``base`` on, as fed to ``unpacker``: what a resync searches."""
        base = good = origin = 0
        """Offsets in the stream of ``data[0]``, of the end of the last whole value, and of
        where ``unpacker`` started."""
        unpacker: msgpack.Unpacker | None = _unpacker(None)
        consumed = inflated = 0
        full = False
        pending = b""
        broken: str | None = None
        """Why the stream cannot be read past the bytes inflated last."""
        while True:
            while unpacker is not None:
                why = None
                try:
                    for item in unpacker:
                        start, good = good, origin + unpacker.tell()
                        if type(item) is not list:
                            why, good = "not a record", start
                            break
                        yield item, self._start + consumed
                except (msgpack.UnpackException, ValueError) as e:
                    why = _why(e)
                if why is None:
                    del data[: good - base]
                    base = good
                    break
                self._damaged(self._start + consumed, why)
                unpacker, base = self._resync(data, base, good + 1)
                good = origin = base
            if broken is not None:
                self.stopped = f"{self._where(self._start + consumed)}: {broken}"
                return
            if self._inflate is not None and self._inflate.eof:
                self._check_end(consumed)
                return
            if not pending and not full:
                pending = self._f.read(READ)
                if not pending:
                    if data and unpacker is not None:
                        self.cut = f"byte {self._start + consumed}, inside {self._where(self._start + consumed)}"
                    return
            if self._inflate is None:
                out, consumed, pending = pending, consumed + len(pending), b""
            else:
                before = self._inflate.copy()
                try:
                    out = self._inflate.decompress(pending, CHUNK)
                    consumed += len(pending) - len(self._inflate.unconsumed_tail)
                except zlib.error as e:
                    broken = str(e)
                    out, good_bytes = _up_to_damage(before, pending)
                    consumed += good_bytes
                    pending = b""
                pending, full = self._inflate.unconsumed_tail, len(out) == CHUNK
                inflated += len(out)
                if inflated > MAX_RATIO * consumed + RATIO_SLACK:
                    bomb = f"it inflates over {MAX_RATIO} times its size, a compression bomb"
                    self.stopped = f"{self._where(self._start + consumed)}: {bomb}"
                    return
            data += out
            if unpacker is None:
                unpacker, base = self._resync(data, base, base)
                good = origin = base
                continue
            try:
                unpacker.feed(out)
            except msgpack.BufferFull:
                self._damaged(self._start + consumed, f"a record over {LIMITS['max_buffer_size']} bytes")
                unpacker, base = self._resync(data, base, good + 1)
                good = origin = base

    def _resync(self, data: bytearray, base: int, since: int) -> tuple[msgpack.Unpacker | None, int]:
        """An unpacker fed from the first record's start at or after stream offset ``since``
        in ``data`` (which starts at ``base``), and the offset it starts at; or None while
        none is in sight, ``data`` then kept to its last bytes."""
        while (found := _RECORD_START.search(data, max(0, since - base))) is not None:
            del data[: found.start()]
            base += found.start()
            unpacker = _unpacker(None)
            try:
                unpacker.feed(data)
            except msgpack.BufferFull:
                since = base + 1
                continue
            return unpacker, base
        keep = max(0, len(data) - 2)
        del data[:keep]
        return None, base + keep

    def _check_end(self, consumed: int) -> None:
        """A stream the writer ended: nothing may follow it."""
        assert self._inflate is not None
        extra = len(self._inflate.unused_data) + len(self._f.read(1))
        if extra:
            end = self._start + consumed - len(self._inflate.unused_data)
            self.stopped = f"byte {end}: bytes follow the end of its records"


def _up_to_damage(inflate: Any, data: bytes) -> tuple[bytes, int]:
    """What ``data`` inflates to before the byte where the stream breaks, and that byte: the
    records it completes are read before the reading stops."""
    out = []
    for at in range(len(data)):
        try:
            out.append(inflate.decompress(data[at : at + 1]))
        except zlib.error:
            return b"".join(out), at
    return b"".join(out), len(data)


def _unpacker(f: IO[bytes] | None) -> msgpack.Unpacker:
    """Reading ``f``, or fed (``None``), within :data:`LIMITS`."""
    return msgpack.Unpacker(
        f,
        raw=False,
        max_buffer_size=LIMITS["max_buffer_size"],
        max_bin_len=LIMITS["max_bin_len"],
        max_str_len=LIMITS["max_str_len"],
        max_array_len=LIMITS["max_array_len"],
        max_map_len=LIMITS["max_map_len"],
    )


def _why(e: Exception) -> str:
    if isinstance(e, msgpack.exceptions.StackError):
        return "nested too deep"
    if isinstance(e, msgpack.exceptions.BufferFull):
        return f"a record over {LIMITS['max_buffer_size']} bytes"
    return str(e) or type(e).__name__


def _is_time(t: Any) -> bool:
    return type(t) in (int, float) and math.isfinite(t) and 0 <= t < LATEST


DAMAGED = Dropped(0.0, Counter())
"""What :func:`parse_record` returns for a record of a known kind that does not hold what it should."""


def parse_record(item: Any) -> Record | None:
    """One record; None for a record this version does not know (skipped), :data:`DAMAGED`
    for one of a known kind that is malformed."""
    if not isinstance(item, list) or not item or item[0] not in ("m", "b", "n", "a", "d"):
        return None
    try:
        if item[0] == "m" and isinstance(item[2], bytes):
            return Message(float(item[1]), item[2])
        if item[0] in ("b", "n"):
            batch = stored_batch(item)
            t = float(item[1])
            return BatchRecord(t, batch) if isinstance(batch, Batch) else ColumnRecord(t, batch)
        if item[0] == "a" and isinstance(item[3], dict) and _alert_fields(item[3]):
            return AlertEvent(float(item[1]), str(item[2]), Alert.from_json(item[3], key=str(item[4])))
        if item[0] == "d":
            counts = Counter({str(k): int(v) for k, v in item[2].items() if type(v) is int and 0 < v < 2**63})
            return Dropped(float(item[1]), counts)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError, RecursionError, WireError):
        return DAMAGED
    return DAMAGED


def _alert_fields(alert: dict[str, Any]) -> bool:
    """An alert's fields are what the monitor writes: words, ranks in range, a clock's time."""
    words = all(type(alert.get(k)) is str for k in ("kind", "severity", "summary", "detail"))
    ranks = alert.get("ranks")
    ranked = type(ranks) is list and all(type(r) is int and 0 <= r < MAX_WORLD for r in ranks)
    return words and ranked and _is_time(alert.get("t"))
