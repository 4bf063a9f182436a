"""A batch of rank frames read as arrays: every header, group row and channel row of the batch
in a few numpy calls, without a Python object per field per rank (see :mod:`distmon.wire`
for the layout). A relay reads its ranks' frames so before it sends them on as columns
(:mod:`distmon.wire.column_batch`), and the monitor reads so the frames that reach it straight
from ranks: only the reports it then looks at are decoded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided

from distmon import wire
from distmon.wire.sockets import Batch

_NUMPY = {"B": "u1", "i": "i4", "I": "u4", "Q": "u8", "q": "i8", "d": "f8", "f": "f4"}


def _dtype(fields: tuple[tuple[str, str], ...]) -> np.dtype[np.void]:
    return np.dtype([(name, "<" + _NUMPY[code]) for name, code in fields])


HEADER = _dtype(wire.HEADER_FIELDS)
HEADER_2 = _dtype(wire.HEADER_FIELDS_2)
GROUP = _dtype(wire.GROUP_FIELDS)
CHANNEL = _dtype(wire.CHANNEL_FIELDS)
assert (HEADER.itemsize, HEADER_2.itemsize, GROUP.itemsize, CHANNEL.itemsize) == (
    wire.HEADER.size,
    wire.HEADER_2.size,
    wire.GROUP_ROW.size,
    wire.CHANNEL_ROW.size,
)

Ints = npt.NDArray[np.int64]
FEW = 8
"""Up to this many records are read one by one: cheaper than setting up a window."""


@dataclass
class Parsed:
    """The valid frames of a batch: ``headers[i]`` is frame ``index[i]`` of the batch; each
    group row belongs to header ``group_of`` at position ``group_slot`` among that frame's
    rows, and likewise each channel row; the report of header ``i`` lies at
    ``payload[report_start[i]:report_end[i]]``, empty where it was not sent (a relay sends a
    rank's report only when it says something new, :mod:`distmon.wire.column_batch`)."""

    payload: bytes
    index: Ints
    headers: npt.NDArray[np.void]
    groups: npt.NDArray[np.void]
    group_of: Ints
    group_slot: Ints
    channels: npt.NDArray[np.void]
    channel_of: Ints
    channel_slot: Ints
    report_start: Ints
    report_end: Ints
    via: Ints
    refused: Counter[str] = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.index)

    def report(self, i: int) -> bytes:
        return self.payload[int(self.report_start[i]) : int(self.report_end[i])]

    def sizes(self) -> Ints:
        """Each frame's report bytes, as received (0: not sent)."""
        sizes: Ints = self.report_end - self.report_start
        return sizes

    def has_report(self) -> npt.NDArray[np.bool_]:
        """Per frame: its report came with it."""
        sent: npt.NDArray[np.bool_] = self.report_end > self.report_start
        return sent


def parse(batch: Batch) -> Parsed:
    """The batch's frames as arrays; frames that are not valid are counted by reason and left
    out. Bare reports (as version 1 sent them) are turned into frames first."""
    batch, refused = _as_frames(batch)
    buf = np.frombuffer(batch.payload, dtype=np.uint8)
    offsets = np.frombuffer(batch.offsets, dtype=np.uint32).astype(np.int64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    ok = (lengths >= wire.HEADER.size) & (lengths <= wire.MAX_MESSAGE_BYTES)
    refused["oversized"] += int(np.count_nonzero(lengths > wire.MAX_MESSAGE_BYTES))
    refused["malformed"] += int(np.count_nonzero(lengths < wire.HEADER.size)) - refused.total()
    index = np.flatnonzero(ok)
    headers = _gather(buf, starts[index], HEADER)
    fits = (
        (headers["version"] == wire.FRAME_VERSION)
        & (headers["report"] > 0)
        & (wire.HEADER.size + rows_bytes(headers) + headers["report"].astype(np.int64) == lengths[index])
    )
    refused["malformed"] += int(np.count_nonzero(~fits))
    index, headers = index[fits], headers[fits]
    starts, ends = starts[index], offsets[index + 1]
    n_groups, n_channels = headers["groups"].astype(np.int64), headers["channels"].astype(np.int64)
    group_of, group_slot = rows(n_groups)
    group_starts = starts[group_of] + wire.HEADER.size + wire.GROUP_ROW.size * group_slot
    channel_of, channel_slot = rows(n_channels)
    channel_starts = (
        starts[channel_of]
        + wire.HEADER.size
        + wire.GROUP_ROW.size * n_groups[channel_of]
        + wire.CHANNEL_ROW.size * channel_slot
    )
    via = np.frombuffer(batch.via, dtype=np.int32).astype(np.int64)[index]
    return Parsed(
        payload=batch.payload,
        index=index,
        headers=headers,
        groups=_gather(buf, group_starts, GROUP),
        group_of=group_of,
        group_slot=group_slot,
        channels=_gather(buf, channel_starts, CHANNEL),
        channel_of=channel_of,
        channel_slot=channel_slot,
        report_start=ends - headers["report"].astype(np.int64),
        report_end=ends,
        via=via,
        refused=+refused,
    )


def rows_bytes(headers: npt.NDArray[np.void]) -> Ints:
    return wire.GROUP_ROW.size * headers["groups"].astype(np.int64) + wire.CHANNEL_ROW.size * headers[
        "channels"
    ].astype(np.int64)


def _gather(buf: npt.NDArray[np.uint8], starts: Ints, dtype: np.dtype[np.void]) -> npt.NDArray[np.void]:
    """The records of ``dtype`` that start at ``starts`` in ``buf``: read one by one when they
    are few, else as rows of a window over the buffer (no copy but the records')."""
    if len(starts) <= FEW:
        records = [np.frombuffer(buf, dtype=dtype, count=1, offset=int(s)) for s in starts]
        return np.concatenate(records) if records else np.zeros(0, dtype=dtype)
    windows = as_strided(buf, shape=(len(buf) - dtype.itemsize + 1, dtype.itemsize), strides=(1, 1), writeable=False)
    rows: npt.NDArray[np.void] = windows[starts].view(dtype).reshape(len(starts))
    return rows


def rows(counts: Ints) -> tuple[Ints, Ints]:
    """For ``counts[i]`` rows after frame ``i``: each row's frame, and its place among them."""
    owner = np.repeat(np.arange(len(counts)), counts)
    first = np.cumsum(counts) - counts
    return owner, np.arange(len(owner)) - first[owner]


def current_headers(records: npt.NDArray[np.void]) -> npt.NDArray[np.void]:
    """Headers of this frame version from ``records`` of it or of version 2 (which lack the
    pace: NaN), as a relay or a recording of an older distmon stored them."""
    if records.dtype == HEADER:
        return records
    current = np.zeros(len(records), dtype=HEADER)
    for name in HEADER_2.names or ():
        current[name] = records[name]
    current["version"] = np.where(records["version"] == 2, wire.FRAME_VERSION, 0)
    current["paced"] = current["waited"] = np.nan
    return current


def header_type(stored: bytes) -> np.dtype[np.void]:
    """The layout of headers stored end to end, or byte by byte of each (:func:`shuffled
    <distmon.wire.column_batch.shuffled>`): either way the first byte is the first one's version."""
    return HEADER_2 if stored[:1] == b"\x02" else HEADER


def _as_frames(batch: Batch) -> tuple[Batch, Counter[str]]:
    """A batch whose frames all lead with a frame header of this version: a bare report
    (version 1) or a version 2 frame is decoded and framed anew. One that does not decode is
    counted by why (and left empty, in its place)."""
    buf = np.frombuffer(batch.payload, dtype=np.uint8)
    starts = np.frombuffer(batch.offsets, dtype=np.uint32)[:-1]
    nonempty = starts < len(buf)
    refused: Counter[str] = Counter()
    if np.all(buf[starts[nonempty]] == wire.FRAME_VERSION):
        return batch, refused
    frames = []
    for frame in batch.frames():
        if frame and frame[0] != wire.FRAME_VERSION and len(frame) <= wire.MAX_MESSAGE_BYTES:
            try:
                frame = wire.encode(_within_a_header(wire.decode(frame)))
            except wire.WireError as e:
                refused[e.reason] += 1
                frame = b""
        frames.append(frame)
    framed = Batch.of(frames)
    framed.relays, framed.via = batch.relays, batch.via
    return framed, refused


_INT32 = 2**31 - 1


def _within_a_header(report: wire.Report) -> wire.Report:
    """A bare report may claim numbers no header holds: a rank or world beyond 32 bits, refused
    all the same (out of range, too large), so they are set to values refused for that reason."""
    if not -_INT32 <= report.rank <= _INT32:
        report.rank = -1
    if not -_INT32 <= report.world <= _INT32:
        report.world = _INT32
    if not 0 <= report.n <= 2**32 - 1 or not -_INT32 <= report.pid <= _INT32:
        report.n, report.pid = 0, -1
    return report
