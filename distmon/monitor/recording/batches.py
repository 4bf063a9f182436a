"""How a batch the monitor took in is stored in a recording, and read back: frames as ``b``
records, a relay's columns as ``n`` records (:mod:`distmon.monitor.recording.format` describes
both), cut into pieces a reader holds one at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from distmon.monitor.state.admission import MAX_WORLD
from distmon.wire import MAX_MESSAGE_BYTES
from distmon.wire.arrays import CHANNEL, GROUP, header_type
from distmon.wire.column_batch import Incoming, assemble_columns, pieces, shuffled, unshuffled
from distmon.wire.sockets import Batch, assemble_batch

PIECE_BYTES = 1024 * 1024
PIECE_FRAMES = MAX_WORLD
"""A batch record holds at most this many bytes of messages (or of columns), and this many
messages: a relay's batch can be 64 MiB, a reader holds one record at a time."""


def batch_records(t: float, batch: Incoming) -> Iterator[list[Any]]:
    """The records that store ``batch``, taken in at ``t``."""
    relays = [[r.id, r.host] for r in batch.relays]
    if isinstance(batch, Batch):
        for piece in frame_pieces(batch):
            yield ["b", t, piece.offsets.tobytes(), relays, piece.via.tobytes(), piece.payload]
        return
    for part in pieces(batch, PIECE_BYTES):
        yield [
            "n",
            t,
            relays,
            part.via.astype("<i4").tobytes(),
            part.ends.astype("<u4").tobytes(),
            shuffled(part.headers),
            shuffled(part.groups),
            shuffled(part.channels),
            part.reports,
        ]


def stored_batch(item: list[Any]) -> Incoming:
    """The batch a ``b`` or ``n`` record stores; raises ``WireError`` (or, for values of the
    wrong type, ``TypeError``, ``ValueError``, ``IndexError``) where it is not one."""
    if item[0] == "b":
        if not isinstance(item[5], bytes):
            raise TypeError("a batch's payload is bytes")
        return assemble_batch(item[5], item[2], item[3], item[4])
    _, _, relays, via, ends, headers, groups, channels, reports = item
    if not isinstance(reports, bytes):
        raise TypeError("a batch's reports are bytes")
    return assemble_columns(
        relays,
        via,
        ends,
        unshuffled(headers, header_type(headers)).tobytes(),
        unshuffled(groups, GROUP).tobytes(),
        unshuffled(channels, CHANNEL).tobytes(),
        reports,
    )


def frame_pieces(batch: Batch) -> Iterator[Batch]:
    """``batch`` cut between messages into batches of at most :data:`PIECE_BYTES` and
    :data:`PIECE_FRAMES`, oversized messages left out; the batch itself when it fits. The
    pieces are runs of consecutive messages, cut where the offsets say, not message by
    message: a relay's batch of 131,072."""
    o = np.frombuffer(batch.offsets, dtype=np.uint32).astype(np.int64)
    sizes = np.diff(o)
    oversized = np.flatnonzero(sizes > MAX_MESSAGE_BYTES)
    if len(batch.payload) <= PIECE_BYTES and len(sizes) <= PIECE_FRAMES and not len(oversized):
        yield batch
        return
    start = 0
    while start < len(sizes):
        after = oversized[np.searchsorted(oversized, start) :]
        if len(after) and after[0] == start:
            start += 1
            continue
        fits = int(np.searchsorted(o, o[start] + PIECE_BYTES, side="right")) - 1
        stop = min(int(after[0]) if len(after) else len(sizes), start + PIECE_FRAMES, max(start + 1, fits))
        yield batch.slice(start, stop)
        start = stop
