"""Reading a recording (:mod:`distmon.monitor.recording.format`), which may come from another
machine: every reading is bounded, whatever the file holds.

A file cut off anywhere (a crash, a full disk) reads up to its last whole record. A file no
distmon wrote raises :class:`RecordingError` where it goes wrong, having held at most one
record in memory: nesting, sizes or times beyond :data:`READ_LIMITS`, or a stream that
inflates to over :data:`MAX_RATIO` times its size (a compression bomb).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Generator, Iterator
from typing import IO, Any

import msgpack

from distmon.guards.files import open_regular, why_not
from distmon.guards.text import visible
from distmon.monitor.recording.batches import PIECE_BYTES
from distmon.monitor.recording.format import DAMAGED, FORMAT, VERSIONS, Record, is_time, parse_record
from distmon.monitor.state.admission import MAX_WORLD

READ_LIMITS = {
    "max_buffer_size": 4 * 1024 * 1024,
    "max_bin_len": PIECE_BYTES,
    "max_str_len": 1024 * 1024,
    "max_array_len": MAX_WORLD,
    "max_map_len": 64,
}
"""msgpack's limits on what a record read may hold. The largest record distmon writes is a
batch piece (at most ``PIECE_BYTES`` of messages) or an alert naming at most ``MAX_WORLD``
ranks; msgpack refuses anything bigger before allocating it, and nesting beyond 1024 levels."""
READ = 4096
"""Bytes of a version 2 stream inflated at a time: a damaged stream is found within them."""
CHUNK = 64 * 1024
"""Bytes inflated at most from them in one go."""
MAX_RATIO = 256
"""A version 2 stream inflates to at most this many times its size (plus :data:`RATIO_SLACK`):
far more than distmon's recordings inflate (``benchmarks/bench_recording.py`` measures their
sizes), far less than a compression bomb's 1032 times (deflate's most)."""
RATIO_SLACK = 64 * 1024


class RecordingError(Exception):
    """The file is missing, empty or not a distmon recording; the message says which."""


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
    if not is_time(header.get("created", 0.0)):
        raise RecordingError(
            f"{path} is damaged: its header's creation time is {visible(repr(header.get('created')), 40)}"
        )
    return header


_RECORD_START = re.compile(rb"[\x93-\x99]\xa1[mbnad]")
"""How every record begins (an array of 3 to 9 whose first element is ``"m"``, ``"b"``,
``"n"``, ``"a"`` or ``"d"``): where reading starts again after a damaged record."""


class Records:
    """A recording's records, read lazily within :data:`READ_LIMITS`, holding at most one record
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
                elif record is not None and not is_time(record.t):
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
                self._damaged(self._start + consumed, f"a record over {READ_LIMITS['max_buffer_size']} bytes")
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
    """Reading ``f``, or fed (``None``), within :data:`READ_LIMITS`."""
    return msgpack.Unpacker(
        f,
        raw=False,
        max_buffer_size=READ_LIMITS["max_buffer_size"],
        max_bin_len=READ_LIMITS["max_bin_len"],
        max_str_len=READ_LIMITS["max_str_len"],
        max_array_len=READ_LIMITS["max_array_len"],
        max_map_len=READ_LIMITS["max_map_len"],
    )


def _why(e: Exception) -> str:
    if isinstance(e, msgpack.exceptions.StackError):
        return "nested too deep"
    if isinstance(e, msgpack.exceptions.BufferFull):
        return f"a record over {READ_LIMITS['max_buffer_size']} bytes"
    return str(e) or type(e).__name__
