"""The sockets between the ranks and the monitor, both ways, one connection per rank
(or per relay, see :mod:`distmon.node.relay`).

Each rank's agent holds a DEALER socket connected to the monitor's ROUTER. Reports go up as
single frames (:mod:`distmon.wire`). Against that direction go :class:`Command`\\s: take a
Flight Recorder dump for the evidence, or end the rank (``--abort-on-hang``). A dump comes
back as three frames, ``[DUMP_TAG, header, pickle]``, so the monitor never mistakes it for
a report and never unpickles it: it only writes the bytes where torch's analyzer reads them.

Commands travel on the reports' own connection, so they need no second port and are
authenticated exactly as the reports are: with a job key (:mod:`distmon.keys`) a rank is a
CURVE client that accepts only the server holding the job's server key, so nobody else can
order it to dump or end. A command names its job; an agent obeys only its own job's.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import zmq

from distmon.wire import MAX_MESSAGE_BYTES, WireError

RANK_SOCKET = zmq.DEALER
MONITOR_SOCKET = zmq.ROUTER
DUMP_TAG = b"distmon-fr-dump/1"
MAX_DUMP_MESSAGE_BYTES = 2 * MAX_MESSAGE_BYTES - 64 * 1024
"""A Flight Recorder dump a rank sends the monitor, in one message: its pickle fits one frame
of the monitor's per-frame limit (``MAXMSGSIZE``), and the rank drops its oldest entries until
it does. (A dump file read from disk has its own bound, :data:`distmon.flightrecorder.loading.MAX_DUMP_FILE_BYTES`.)"""

RELAY_DROPPED = "relay_dropped"
"""Why reports the monitor never saw went missing: a relay on the way dropped them, its
upstream slow (counted in the monitor's refusals under this name)."""
MAX_DROPPED = 2**40
"""More frames than any relay could have dropped: a larger count is not believed."""
DUMP = "dump"
END = "end"
DETAILS = "details"
"""For relays, not ranks: send the whole reports of ``ranks`` with their columns for a few
seconds (:mod:`distmon.node.news`); a rank ignores it."""
LOOK = "look"
"""For the nodes' eyes (relays, and the monitor's own): look at the processes ``looks`` names,
and take the stacks it asks for (:mod:`distmon.node`); a rank ignores it."""
ACTIONS = (DUMP, END, DETAILS, LOOK)
MAX_LOOKED = 4096
"""Processes one ``look`` command names at most."""


@dataclass
class Command:
    """What the monitor asks of the ranks of ``job`` (all of them, or those in ``ranks``)."""

    action: str
    job: str
    reason: str
    request: int = 0
    """Numbers a dump request, so that the dumps answering it land in the right bundle."""
    ranks: list[int] | None = None
    looks: list[list[Any]] | None = None
    """For ``look``: ``[host, pid, stack]`` each, ``stack`` None or ``[since, stopped]`` (the
    stall it answers, whether the process is stopped); read by :mod:`distmon.node.looks`."""

    def concerns(self, job: str, rank: int) -> bool:
        return self.job == job and (self.ranks is None or rank in self.ranks)


@dataclass
class Dump:
    """One rank's Flight Recorder dump, as torch pickles it, answering ``request``."""

    job: str
    rank: int
    request: int
    data: bytes


def encode_command(command: Command) -> bytes:
    return msgpack.packb(
        {
            "action": command.action,
            "job": command.job,
            "reason": command.reason,
            "request": command.request,
            "ranks": command.ranks,
            **({"looks": command.looks} if command.looks is not None else {}),
        }
    )


def decode_command(data: bytes) -> Command:
    """Raises :class:`WireError` for anything that is not a command."""
    try:
        obj = msgpack.unpackb(data, raw=False, max_str_len=4096, max_array_len=100_000, max_map_len=16)
        command = Command(obj["action"], obj["job"], obj["reason"], obj["request"], obj["ranks"], obj.get("looks"))
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as e:
        raise WireError("malformed_command", str(e)) from None
    ranks_ok = command.ranks is None or (
        isinstance(command.ranks, list) and all(isinstance(r, int) for r in command.ranks)
    )
    if command.action not in ACTIONS or not (isinstance(command.job, str) and isinstance(command.request, int)):
        raise WireError("malformed_command", f"action {command.action!r}")
    if not ranks_ok:
        raise WireError("malformed_command", "ranks")
    looks = command.looks
    if looks is not None and not (
        isinstance(looks, list) and len(looks) <= MAX_LOOKED and all(isinstance(x, list) for x in looks)
    ):
        raise WireError("malformed_command", "looks")
    return command


def dump_frames(dump: Dump) -> list[bytes]:
    return [DUMP_TAG, msgpack.packb({"job": dump.job, "rank": dump.rank, "request": dump.request}), dump.data]


def decode_dump(frames: list[bytes]) -> Dump:
    """``frames`` as sent by :func:`dump_frames`; raises :class:`WireError` otherwise."""
    if len(frames) != 3 or frames[0] != DUMP_TAG:
        raise WireError("malformed_dump", f"{len(frames)} frames")
    try:
        header = msgpack.unpackb(frames[1], raw=False, max_str_len=4096, max_map_len=8)
        job, rank, request = header["job"], header["rank"], header["request"]
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as e:
        raise WireError("malformed_dump", str(e)) from None
    if not (isinstance(job, str) and isinstance(rank, int) and isinstance(request, int)) or rank < 0:
        raise WireError("malformed_dump", "bad header")
    if len(frames[2]) > MAX_DUMP_MESSAGE_BYTES:
        raise WireError("oversized_dump", f"{len(frames[2])} bytes")
    return Dump(job, rank, request, frames[2])


BATCH_TAG = b"distmon-batch/1"
MAX_BATCH_BYTES = 64 * 1024 * 1024
"""A batch's payload, at most: a relay sends one a second, or sooner once it holds this much."""
MAX_BATCH_FRAME = MAX_BATCH_BYTES + 4 * 1024 * 1024
"""The largest frame a listener (the monitor, a relay) takes (``MAXMSGSIZE``): a batch's
payload, or its header (8 bytes a frame, and the relays it names)."""
QUEUE_PER_SENDER = 100
"""Messages ZeroMQ holds per connection while the monitor is busy: a hundred seconds of a
rank's reports, or of a relay's batches. A frame over ``MAX_BATCH_FRAME`` cuts the
connection; a rank's frame over ``MAX_MESSAGE_BYTES`` is counted as ``oversized``. A full
queue stops reading that connection, and the rank (or relay) drops reports rather than
wait. Batches of up to 64 MiB make the worst case large (100 of them per connection): a
monitor reachable beyond its host wants a job key."""


def listening_socket(context: zmq.Context[zmq.Socket[bytes]]) -> zmq.Socket[bytes]:
    """Where ranks (or relays below) connect, for the monitor and a relay alike: a queue of
    :data:`QUEUE_PER_SENDER` per connection, frames up to ``MAX_BATCH_FRAME``, no linger."""
    socket = context.socket(MONITOR_SOCKET)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVHWM, QUEUE_PER_SENDER)
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_BATCH_FRAME)
    return socket


@dataclass(frozen=True)
class Relay:
    """A relay a batch came through: its id (``host:pid``, unique per relay process) and host."""

    id: str
    host: str


@dataclass
class Batch:
    """Rank frames taken in together: one relay's batch, or the frames that reached the
    monitor straight from the ranks in one cycle of its reader.

    The frames (each a rank's message as it sent it, :mod:`distmon.wire`) lie end to end in
    ``payload``, frame ``i`` at ``payload[offsets[i]:offsets[i + 1]]``. ``via[i]`` is the
    index in ``relays`` of the relay nearest the rank that frame ``i`` came through, -1 for
    none. A relay with nothing to send still sends an empty batch each interval, naming
    itself in ``relays``: that is how the monitor knows it is alive.
    """

    payload: bytes = b""
    offsets: array[int] = field(default_factory=lambda: array("I", [0]))
    relays: list[Relay] = field(default_factory=list)
    via: array[int] = field(default_factory=lambda: array("i"))
    dropped: dict[int, int] = field(default_factory=dict)
    """Frames each relay (by index in ``relays``) dropped since its last batch that went
    (its upstream slow): the monitor's sign that the silence of those ranks is the path's,
    not theirs. Only live: a recording keeps the count as the monitor's ``relay_dropped``."""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return len(self.payload)

    def frame_ends(self) -> array[int]:
        """Where each frame's bytes end, counted from the first frame's start: one more than
        the frames, from 0."""
        return self.offsets

    def frames(self) -> list[bytes]:
        o = self.offsets
        return [self.payload[o[i] : o[i + 1]] for i in range(len(self))]

    @classmethod
    def of(cls, frames: Sequence[bytes], relay: Relay | None = None) -> Batch:
        """``frames`` straight from ranks: through ``relay``, or none."""
        offsets = array("I", [0])
        total = 0
        for frame in frames:
            total += len(frame)
            offsets.append(total)
        via = array("i", [0 if relay is not None else -1]) * len(frames)
        return cls(b"".join(frames), offsets, [relay] if relay is not None else [], via)

    def subset(self, chosen: Sequence[int] | Any) -> Batch:
        """The frames at ``chosen`` (a sequence or an array of indices), in that order, with the
        relays they came through."""
        chosen = [int(i) for i in chosen]
        if len(chosen) == len(self) and chosen == list(range(len(self))):
            return self
        o = self.offsets
        frames = [self.payload[o[i] : o[i + 1]] for i in chosen]
        offsets = array("I", [0, *itertools.accumulate(map(len, frames))])
        return Batch(b"".join(frames), offsets, self.relays, array("i", [self.via[i] for i in chosen]))

    def slice(self, start: int, stop: int) -> Batch:
        """Frames ``start`` to ``stop`` - 1: one copy of their bytes, none a frame; what the
        batch says of drops stays with its first frames."""
        o = self.offsets
        offsets = array("I", (offset - o[start] for offset in o[start : stop + 1]))
        dropped = dict(self.dropped) if start == 0 else {}
        return Batch(self.payload[o[start] : o[stop]], offsets, self.relays, self.via[start:stop], dropped)

    @classmethod
    def merged(cls, batches: Sequence[Batch]) -> Batch:
        """One batch of several (a relay forwarding what the relays below it sent), their
        relays listed once each."""
        relays, remaps = merge_relays([batch.relays for batch in batches])
        offsets = array("I", [0])
        via = array("i")
        dropped: Counter[int] = Counter()
        for batch, remap in zip(batches, remaps, strict=True):
            base = offsets[-1]
            offsets.extend(base + o for o in batch.offsets[1:])
            via.extend(remap[v] if v >= 0 else -1 for v in batch.via)
            dropped.update({remap[i]: n for i, n in batch.dropped.items()})
        return cls(b"".join(b.payload for b in batches), offsets, relays, via, dict(dropped))

    def losses(self) -> Counter[Relay]:
        """Frames dropped on the way, by the relay that dropped them."""
        return Counter({self.relays[i]: n for i, n in self.dropped.items()})


def merge_relays(lists: Sequence[Sequence[Relay]]) -> tuple[list[Relay], list[list[int]]]:
    """Several batches' relay lists as one, each relay once, and per batch where each of its
    relays went: what merging batches renumbers their ``via`` and ``dropped`` by."""
    relays: list[Relay] = []
    index: dict[Relay, int] = {}
    remaps = []
    for listed in lists:
        remap = []
        for relay in listed:
            if relay not in index:
                index[relay] = len(relays)
                relays.append(relay)
            remap.append(index[relay])
        remaps.append(remap)
    return relays, remaps


def batch_frames(batch: Batch) -> list[bytes]:
    header = msgpack.packb(
        {
            "offsets": batch.offsets.tobytes(),
            "relays": [[r.id, r.host] for r in batch.relays],
            "via": batch.via.tobytes(),
            **({"dropped": sorted(batch.dropped.items())} if batch.dropped else {}),
        }
    )
    return [BATCH_TAG, header, batch.payload]


def decode_batch(frames: list[bytes]) -> Batch:
    """``frames`` as sent by :func:`batch_frames`; raises :class:`WireError` otherwise."""
    if len(frames) != 3 or frames[0] != BATCH_TAG:
        raise WireError("malformed_batch", f"{len(frames)} frames")
    if len(frames[2]) > MAX_BATCH_BYTES:
        raise WireError("oversized_batch", f"{len(frames[2])} bytes")
    try:
        header = msgpack.unpackb(frames[1], raw=False, max_bin_len=MAX_BATCH_BYTES, max_map_len=8)
        offsets, relays, via = header["offsets"], header["relays"], header["via"]
        dropped = {int(i): int(n) for i, n in header.get("dropped", [])}
    except (ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException) as e:
        raise WireError("malformed_batch", str(e)) from None
    batch = assemble_batch(frames[2], offsets, relays, via)
    if any(not 0 <= i < len(batch.relays) or not 0 < n <= MAX_DROPPED for i, n in dropped.items()):
        raise WireError("malformed_batch", "dropped frames name no relay of the batch, or too many")
    batch.dropped = dropped
    return batch


def assemble_batch(payload: bytes, offsets: Any, relays: Any, via: Any) -> Batch:
    """A batch from its parts as :func:`batch_frames` sends them and recordings store them:
    offsets and relay indices as bytes in the machine's own byte order (little-endian, as on
    every host torch runs on), relays as ``[id, host]`` pairs. Raises :class:`WireError`
    where the parts are not that or do not fit together."""
    try:
        ends, through = array("I", offsets), array("i", via)
        named = [Relay(str(i), str(h)) for i, h in relays]
    except (ValueError, TypeError, OverflowError) as e:
        raise WireError("malformed_batch", str(e)) from None
    n = len(ends) - 1
    if (
        n < 0
        or ends[0] != 0
        or ends[-1] != len(payload)
        or any(a > b for a, b in itertools.pairwise(ends))
        or len(through) != n
        or any(not -1 <= v < len(named) for v in through)
    ):
        raise WireError("malformed_batch", "offsets or relays do not fit the payload")
    return Batch(payload, ends, named, through)
