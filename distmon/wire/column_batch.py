"""The columnar batch: what a relay sends the monitor each interval instead of its ranks'
frames one after the other.

Why: a monitor that reads a frame a report pays, at 131,072 ranks reporting every second,
more than a core for what is the same few numbers again and again. The relay, one per node
with a core to spare, reads its ranks' frames (:mod:`distmon.wire.arrays`) and sends
their fixed-width parts as arrays the monitor takes in whole: every frame's header, and its
group and channel rows, as they came. A rank's report (its msgpack, with its stack, groups,
DataLoader workers, exception) goes only when it says something new, when the monitor asked
for it, or now and then (:mod:`distmon.node.news` decides); the monitor keeps each
rank's latest one and reads its fresh numbers from the columns.

On the wire, six frames (``COLUMNS_TAG`` then five parts), all little-endian:

1. ``COLUMNS_TAG``, ``b"distmon-columns/1"``;
2. a msgpack map: ``relays`` (``[[id, host], ...]``), ``via`` (int32 a frame: the index in
   ``relays`` of the relay nearest its rank, -1 for none), ``ends`` (uint32, one more than the
   frames: frame ``i``'s report is ``reports[ends[i]:ends[i + 1]]``, empty where it was not
   sent), and where there were any, ``dropped`` (``[[relay index, frames]]``, as a
   ``distmon-batch/1`` batch says it), ``refused`` (``{reason: frames}``, frames the relays
   could not read: ``malformed``, ``oversized``, ``version``) and ``looks`` (what the nodes'
   eyes saw since their last batch, one msgpack blob a node, opaque here: :mod:`distmon.node.looks`);
3. the frames' headers, :data:`distmon.wire.HEADER_FIELDS` each, end to end;
4. their group rows (:data:`distmon.wire.GROUP_FIELDS`), frame by frame, as many a frame as
   its header's ``groups`` says;
5. their channel rows (:data:`distmon.wire.CHANNEL_FIELDS`), likewise;
6. the reports sent, end to end.

A relay that predates it sends ``distmon-batch/1`` batches (:mod:`distmon.wire.sockets`), which
the monitor still reads; a monitor that predates it reads none of it, so the monitor is
upgraded before its relays. Whatever a batch claims, the monitor checks it as it checks a
frame (:func:`parsed`, then admission): the columns are claims, not facts.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.wire import WireError
from distmon.wire.arrays import CHANNEL, GROUP, HEADER, Ints, Parsed, current_headers, header_type, rows
from distmon.wire.sockets import MAX_BATCH_BYTES, MAX_DROPPED, Batch, Relay, merge_relays

COLUMNS_TAG = b"distmon-columns/1"
MAX_FRAMES = MAX_BATCH_BYTES // HEADER.itemsize
"""The most frames a columnar batch holds: its headers fit one batch's bytes."""
MAX_LOOKS = 1 << 17
"""Nodes' looks one batch carries at most (a node per rank at the most ranks distmon admits)."""
REFUSALS = ("malformed", "oversized", "version")
"""Why a relay could not read a frame: the monitor counts these as it counts its own."""
MALFORMED = "malformed_columns"

Records = npt.NDArray[np.void]


def _none(dtype: np.dtype[np.void]) -> Records:
    return np.zeros(0, dtype=dtype)


@dataclass
class ColumnBatch:
    """Frames taken in together, as columns: ``headers[i]`` is frame ``i``'s header, its group
    rows follow those of the frames before it in ``groups`` (and its channel rows in
    ``channels``), its report is ``reports[ends[i]:ends[i + 1]]`` (empty: not sent), and
    ``via[i]`` the relay nearest its rank (an index in ``relays``, -1 for none). As with a
    :class:`~distmon.wire.sockets.Batch`, an empty one naming a relay is its sign of life."""

    headers: Records = field(default_factory=lambda: _none(HEADER))
    groups: Records = field(default_factory=lambda: _none(GROUP))
    channels: Records = field(default_factory=lambda: _none(CHANNEL))
    reports: bytes = b""
    ends: npt.NDArray[np.uint32] = field(default_factory=lambda: np.zeros(1, dtype=np.uint32))
    relays: list[Relay] = field(default_factory=list)
    via: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    dropped: dict[int, int] = field(default_factory=dict)
    """Frames each relay (by index in ``relays``) dropped since its last batch that went."""
    refused: Counter[str] = field(default_factory=Counter)
    """Frames the relays could not read, by reason (one of :data:`REFUSALS`)."""
    looks: list[bytes] = field(default_factory=list)
    """What the eyes of the nodes it came through saw, a blob each (:mod:`distmon.node.looks`)."""

    def __len__(self) -> int:
        return len(self.headers)

    @property
    def nbytes(self) -> int:
        looks = sum(len(blob) for blob in self.looks)
        return self.headers.nbytes + self.groups.nbytes + self.channels.nbytes + len(self.reports) + looks

    def frame_ends(self) -> Ints:
        """Where each frame's bytes (header, rows, report) end, counted from the first frame's
        start: one more than the frames, from 0."""
        sizes = HEADER.itemsize + wire_rows(self.headers) + np.diff(self.ends.astype(np.int64))
        ends: Ints = np.concatenate([[0], np.cumsum(sizes)])
        return ends

    def losses(self) -> Counter[Relay]:
        """Frames dropped on the way, by the relay that dropped them."""
        return Counter({self.relays[i]: n for i, n in self.dropped.items()})

    def slice(self, start: int, stop: int) -> ColumnBatch:
        """Frames ``start`` to ``stop`` - 1, naming the same relays; what the batch says of
        drops and refusals, and its looks, stay with its first frames."""
        g, c = _row_starts(self.headers, "groups"), _row_starts(self.headers, "channels")
        e0, e1 = int(self.ends[start]), int(self.ends[stop])
        first = start == 0
        return ColumnBatch(
            self.headers[start:stop],
            self.groups[g[start] : g[stop]],
            self.channels[c[start] : c[stop]],
            self.reports[e0:e1],
            self.ends[start : stop + 1] - np.uint32(e0),
            self.relays,
            self.via[start:stop],
            dict(self.dropped) if first else {},
            Counter(self.refused) if first else Counter(),
            list(self.looks) if first else [],
        )

    def subset(self, chosen: Sequence[int] | Ints) -> ColumnBatch:
        """The frames at ``chosen`` (a sequence or an array of indices), in that order, with the
        relays they came through."""
        chosen = np.asarray(chosen, dtype=np.int64)
        if len(chosen) == len(self) and np.array_equal(chosen, np.arange(len(self))):
            return self
        ends = self.ends.astype(np.int64)
        lengths = (ends[1:] - ends[:-1])[chosen]
        sent = chosen[lengths > 0].tolist()
        reports = b"".join(self.reports[ends[i] : ends[i + 1]] for i in sent)
        return ColumnBatch(
            self.headers[chosen],
            self.groups[_row_index(self.headers, "groups", chosen)],
            self.channels[_row_index(self.headers, "channels", chosen)],
            reports,
            np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint32),
            self.relays,
            self.via[chosen],
        )

    @classmethod
    def merged(cls, batches: Sequence[ColumnBatch]) -> ColumnBatch:
        """One batch of several (a relay forwarding what the relays below it sent, the monitor
        taking in what came between two ticks), their relays listed once each."""
        relays, remaps = merge_relays([batch.relays for batch in batches])
        vias, ends, dropped, refused = [], [np.zeros(1, dtype=np.int64)], Counter[int](), Counter[str]()
        looks = [blob for batch in batches for blob in batch.looks]
        base = 0
        for batch, remap in zip(batches, remaps, strict=True):
            vias.append(np.array([*remap, -1], dtype=np.int32)[batch.via])
            ends.append(batch.ends[1:].astype(np.int64) + base)
            base += len(batch.reports)
            if batch.dropped:
                dropped.update({remap[i]: n for i, n in batch.dropped.items()})
            if batch.refused:
                refused.update(batch.refused)
        return cls(
            _joined([b.headers for b in batches], HEADER),
            _joined([b.groups for b in batches], GROUP),
            _joined([b.channels for b in batches], CHANNEL),
            b"".join(b.reports for b in batches),
            np.concatenate(ends).astype(np.uint32),
            relays,
            np.concatenate(vias) if vias else np.zeros(0, dtype=np.int32),
            dict(dropped),
            refused,
            looks,
        )

    @classmethod
    def of(cls, parsed: Parsed, send: npt.NDArray[np.bool_], relays: list[Relay]) -> ColumnBatch:
        """The frames of ``parsed`` (read from a batch naming ``relays``) as columns, the
        reports of those marked in ``send`` with them."""
        starts, stops = parsed.report_start[send].tolist(), parsed.report_end[send].tolist()
        payload = parsed.payload
        lengths = np.where(send, parsed.report_end - parsed.report_start, 0)
        return cls(
            parsed.headers,
            parsed.groups,
            parsed.channels,
            b"".join(payload[a:b] for a, b in zip(starts, stops, strict=True)),
            np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint32),
            relays,
            parsed.via.astype(np.int32),
            refused=Counter(parsed.refused),
        )

    def parsed(self) -> Parsed:
        """The batch read as the monitor reads frames: a header that is not of this frame
        version, or a report sent whose length is not the one its header gives, is refused
        as ``malformed``; the relays' own refusals are counted with them."""
        h = self.headers
        ends = self.ends.astype(np.int64)
        start, stop = ends[:-1], ends[1:]
        fits = (h["version"] == wire.FRAME_VERSION) & ((stop == start) | (stop - start == h["report"]))
        refused = Counter(self.refused)
        refused["malformed"] += int(np.count_nonzero(~fits))
        index = np.flatnonzero(fits)
        chosen = self if len(index) == len(self) else self.subset(index)
        group_of, group_slot = rows(chosen.headers["groups"].astype(np.int64))
        channel_of, channel_slot = rows(chosen.headers["channels"].astype(np.int64))
        kept = chosen.ends.astype(np.int64)
        return Parsed(
            payload=chosen.reports,
            index=index,
            headers=chosen.headers,
            groups=chosen.groups,
            group_of=group_of,
            group_slot=group_slot,
            channels=chosen.channels,
            channel_of=channel_of,
            channel_slot=channel_slot,
            report_start=kept[:-1],
            report_end=kept[1:],
            via=chosen.via.astype(np.int64),
            refused=+refused,
        )


Incoming = Batch | ColumnBatch
"""What the monitor takes in at once: frames (straight from ranks, or from a relay that
predates columns), or a relay's columns."""


def _joined(parts: list[Records], dtype: np.dtype[np.void]) -> Records:
    """The records of ``parts`` end to end, joined as bytes: numpy's concatenation of records
    works out their common type array by array, which a merge of a thousand small batches
    (a relay per node of eight ranks) pays for a thousand times."""
    raw = [np.ascontiguousarray(part).view(np.uint8).reshape(-1) for part in parts]
    joined: Records = np.concatenate(raw).view(dtype) if raw else _none(dtype)
    return joined


def wire_rows(headers: Records) -> Ints:
    """Per frame: the bytes of its group and channel rows."""
    return GROUP.itemsize * headers["groups"].astype(np.int64) + CHANNEL.itemsize * headers["channels"].astype(np.int64)


def _row_starts(headers: Records, counts: str) -> Ints:
    """Where each frame's rows start among all rows, and one past the last."""
    starts: Ints = np.concatenate([[0], np.cumsum(headers[counts].astype(np.int64))])
    return starts


def _row_index(headers: Records, counts: str, chosen: Ints) -> Ints:
    """The rows of the frames at ``chosen``, in that order."""
    n = headers[counts].astype(np.int64)[chosen]
    first = _row_starts(headers, counts)[:-1][chosen]
    within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    index: Ints = np.repeat(first, n) + within
    return index


def column_frames(batch: ColumnBatch) -> list[bytes]:
    header = msgpack.packb(
        {
            "relays": [[r.id, r.host] for r in batch.relays],
            "via": batch.via.astype("<i4").tobytes(),
            "ends": batch.ends.astype("<u4").tobytes(),
            **({"dropped": sorted(batch.dropped.items())} if batch.dropped else {}),
            **({"refused": dict(batch.refused)} if batch.refused else {}),
            **({"looks": batch.looks} if batch.looks else {}),
        }
    )
    return [
        COLUMNS_TAG,
        header,
        batch.headers.tobytes(),
        batch.groups.tobytes(),
        batch.channels.tobytes(),
        batch.reports,
    ]


def decode_columns(frames: list[bytes]) -> ColumnBatch:
    """``frames`` as sent by :func:`column_frames`; raises :class:`WireError` otherwise."""
    if len(frames) != 6 or frames[0] != COLUMNS_TAG:
        raise WireError(MALFORMED, f"{len(frames)} frames")
    if any(len(part) > MAX_BATCH_BYTES for part in frames[2:]):
        raise WireError("oversized_columns", f"a part of {max(len(part) for part in frames[2:])} bytes")
    try:
        header = msgpack.unpackb(frames[1], raw=False, max_bin_len=MAX_BATCH_BYTES, max_map_len=8)
        relays, via, ends = header["relays"], header["via"], header["ends"]
        dropped = {int(i): int(n) for i, n in header.get("dropped", [])}
        refused = Counter({str(why): int(n) for why, n in header.get("refused", {}).items()})
        looks = header.get("looks", [])
    except (ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException) as e:
        raise WireError(MALFORMED, str(e)) from None
    batch = assemble_columns(relays, via, ends, *frames[2:])
    if any(not 0 <= i < len(batch.relays) or not 0 < n <= MAX_DROPPED for i, n in dropped.items()):
        raise WireError(MALFORMED, "dropped frames name no relay of the batch, or too many")
    if any(why not in REFUSALS or not 0 < n <= MAX_DROPPED for why, n in refused.items()):
        raise WireError(MALFORMED, "refusals of no known reason, or too many")
    if not isinstance(looks, list) or len(looks) > MAX_LOOKS or not all(isinstance(b, bytes) for b in looks):
        raise WireError(MALFORMED, "looks that are not one blob a node")
    batch.dropped, batch.refused, batch.looks = dropped, refused, looks
    return batch


def assemble_columns(
    relays: Any, via: Any, ends: Any, headers: bytes, groups: bytes, channels: bytes, reports: bytes
) -> ColumnBatch:
    """A batch from its parts as :func:`column_frames` sends them and recordings store them
    (the arrays as their bytes). Raises :class:`WireError` where they are not that or do not
    fit together."""
    try:
        named = [Relay(str(i), str(h)) for i, h in relays]
        h = current_headers(_records(headers, header_type(headers)))
        g, c = _records(groups, GROUP), _records(channels, CHANNEL)
        through = np.frombuffer(via, dtype="<i4")
        limits = np.frombuffer(ends, dtype="<u4")
    except (ValueError, TypeError) as e:
        raise WireError(MALFORMED, str(e)) from None
    n = len(h)
    if (
        n > MAX_FRAMES
        or len(limits) != n + 1
        or limits[0] != 0
        or int(limits[-1]) != len(reports)
        or bool(np.any(limits[1:] < limits[:-1]))
        or len(through) != n
        or bool(np.any((through < -1) | (through >= len(named))))
        or len(g) != int(h["groups"].sum())
        or len(c) != int(h["channels"].sum())
    ):
        raise WireError(MALFORMED, "the parts do not fit together")
    return ColumnBatch(h, g, c, reports, limits, named, through)


def _records(data: bytes, dtype: np.dtype[np.void]) -> Records:
    if not isinstance(data, bytes) or len(data) % dtype.itemsize:
        raise ValueError(f"{len(data)} bytes are no whole number of {dtype.itemsize}-byte records")
    records: Records = np.frombuffer(data, dtype=dtype)
    return records


def shuffled(records: Records) -> bytes:
    """``records`` stored byte by byte of each: every record's first byte, then every one's
    second... A column's high bytes, which change little from rank to rank, then lie side by
    side, and zlib makes a fraction of the bytes of the records as they are, in less time."""
    raw = np.ascontiguousarray(records).view(np.uint8).reshape(len(records), records.dtype.itemsize)
    data: bytes = raw.T.tobytes()
    return data


def unshuffled(data: bytes, dtype: np.dtype[np.void]) -> Records:
    """The records :func:`shuffled` stored; raises :class:`WireError` for bytes that are not."""
    if not isinstance(data, bytes) or len(data) % dtype.itemsize:
        raise WireError(MALFORMED, "stored records of a size that is no whole number of records")
    planes = np.frombuffer(data, dtype=np.uint8).reshape(dtype.itemsize, len(data) // dtype.itemsize)
    records: Records = np.ascontiguousarray(planes.T).view(dtype).reshape(-1)
    return records


def pieces(batch: ColumnBatch, limit: int) -> list[ColumnBatch]:
    """``batch`` cut between frames into runs of at most ``limit`` bytes each (a frame larger
    than that alone); the batch itself when it fits."""
    if batch.nbytes <= limit:
        return [batch]
    ends = batch.frame_ends()
    cuts = [0]
    while cuts[-1] < len(batch):
        start = cuts[-1]
        fits = int(np.searchsorted(ends, ends[start] + limit, side="right")) - 1
        cuts.append(max(start + 1, fits))
    return [batch.slice(a, b) for a, b in itertools.pairwise(cuts)]
