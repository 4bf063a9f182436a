"""Writing a recording (:mod:`distmon.monitor.recording.format`) as the monitor takes its
reports in.

The writer flushes the zlib stream (``Z_SYNC_FLUSH``) into the file when asked (the monitor
asks before it says what it recorded: :meth:`RecordingWriter.flush`), to disk at least every
:data:`SYNC_EVERY` seconds, and ends the stream when it closes. A write that fails (a full
disk, a file-size limit, the file removed under it) stops the recording, never the monitor:
the writer says so once, in one line, and writes nothing more, so the file reads up to its
last whole record.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable
from typing import IO, Any

import msgpack

from distmon.monitor.recording.batches import batch_records
from distmon.monitor.recording.format import FORMAT, VERSION, alert_record
from distmon.monitor.state.alerts import Change
from distmon.wire.column_batch import Incoming

SYNC_EVERY = 1.0
"""Seconds between flushes to disk: a crash loses at most this much."""
LEVEL = 1
"""zlib's fastest: the monitor's loop compresses every report as it arrives (a report per rank
a second), so its CPU counts for more than the last bytes a higher level would save
(``benchmarks/bench_recording.py`` compares it with zlib's default, 6)."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RecordingWriter:
    """Writes the current version (:data:`~distmon.monitor.recording.format.VERSION`): the
    header, then records through one zlib stream, flushed and synced to disk at least every
    :data:`SYNC_EVERY` seconds so that a crash leaves a file readable up to the last flush.

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
        """``batch`` in records of at most
        :data:`~distmon.monitor.recording.batches.PIECE_BYTES` of messages (or columns) each; a
        message over ``MAX_MESSAGE_BYTES``, which the monitor refuses as oversized, is left out."""
        for record in batch_records(t, batch):
            self._write(record)

    def looks(self, t: float, looks: bytes) -> None:
        """What the nodes' eyes saw, taken in at ``t`` (:mod:`distmon.node.looks`)."""
        self._write(["o", t, looks])

    def alert(self, t: float, change: Change) -> None:
        self._write(alert_record(t, change))

    def dropped(self, t: float, dropped: Counter[str], unwatched: Counter[str] | None = None) -> None:
        """Messages refused, and seconds not watched from ``t`` on, in one ``d`` record."""
        self._write(["d", t, dict(dropped + (unwatched or Counter()))])

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

    def flush(self) -> None:
        """Every record written so far into the file, readable whatever ends this process next
        (a kill, a crash, a closed terminal): what the monitor is about to say (an alert on
        stderr, on a screen, in a notification) is in the file first. The system's cache
        holds it; :meth:`sync` puts it on the disk."""
        if self.stopped is not None:
            return
        try:
            self._flush()
        except OSError as e:
            self._stop(e.strerror or str(e))

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

    def _flush(self) -> None:
        if self._unflushed:
            self._file.write(self._deflate.flush(zlib.Z_SYNC_FLUSH))
            self._unflushed = False
        self._file.flush()

    def _sync(self) -> None:
        self._flush()
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
