"""A simulated job's reports as ``distmon relay`` sends them, without its sockets: each
interval's frames, per relay, read as columns with only their news whole
(:mod:`distmon.wire.column_batch`), arriving at the interval's end."""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Iterable, Iterator

from distmon.monitor.recording.format import ColumnRecord
from distmon.node.news import REFRESH, News
from distmon.wire import HEADER_FIELDS
from distmon.wire.arrays import parse
from distmon.wire.column_batch import ColumnBatch
from distmon.wire.sockets import Batch, Relay

RANK = struct.Struct("<i")
RANK_AT = struct.calcsize(
    "<" + "".join(code for _, code in HEADER_FIELDS[: [n for n, _ in HEADER_FIELDS].index("rank")])
)


class SimRelays:
    """``relays`` relays for a job of ``world`` ranks, consecutive ranks through each."""

    def __init__(self, relays: int, world: int, refresh: float = REFRESH) -> None:
        self.relays = [Relay(f"relay-{i}:{100 + i}", f"relay-{i}") for i in range(relays)]
        self.news = [News(refresh, seed=i) for i in range(relays)]
        self.per_relay = max(1, -(-world // relays))

    def batches(self, frames: list[tuple[int, bytes]], now: float) -> list[ColumnBatch]:
        """Each relay's batch of ``frames`` (rank, frame), at ``now`` on the relays' clocks;
        an idle relay's empty batch too."""
        out = []
        for i, (relay, news) in enumerate(zip(self.relays, self.news, strict=True)):
            mine = Batch.of([frame for rank, frame in frames if rank // self.per_relay == i], relay=relay)
            parsed = parse(mine)
            out.append(ColumnBatch.of(parsed, news.choose(parsed, now), mine.relays))
        return out


def relayed(
    stream: Iterable[tuple[float, bytes]], relays: SimRelays, start: float, until: float, interval: float = 1.0
) -> Iterator[ColumnRecord]:
    """``stream`` (time, frame) as the relays send it up to ``until`` seconds: the frames of
    each ``interval`` from ``start``, one batch per relay (empty when it heard nothing: its
    sign of life), arriving at the interval's end."""
    seconds = itertools.groupby(stream, key=lambda item: math.floor((item[0] - start) / interval))
    due = next(seconds, None)
    for k in range(math.ceil(until / interval)):
        frames = []
        if due is not None and due[0] <= k:
            frames = [(RANK.unpack_from(raw, RANK_AT)[0], raw) for _, raw in due[1]]
            due = next(seconds, None)
        arrival = start + (k + 1) * interval
        for batch in relays.batches(frames, arrival):
            yield ColumnRecord(arrival, batch)
