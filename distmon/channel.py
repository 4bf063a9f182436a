"""The channel between the ranks and the monitor, both ways, on one connection per rank.

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

from dataclasses import dataclass

import msgpack
import zmq

from distmon.wire import MAX_MESSAGE_BYTES, WireError

RANK_SOCKET = zmq.DEALER
MONITOR_SOCKET = zmq.ROUTER
DUMP_TAG = b"distmon-fr-dump/1"
MAX_DUMP_BYTES = 2 * MAX_MESSAGE_BYTES - 64 * 1024
"""A dump's pickle fits one frame of the monitor's per-frame limit (``MAXMSGSIZE``): the rank
drops its oldest entries until it does."""

DUMP = "dump"
END = "end"
ACTIONS = (DUMP, END)


@dataclass
class Command:
    """What the monitor asks of the ranks of ``job`` (all of them, or those in ``ranks``)."""

    action: str
    job: str
    reason: str
    request: int = 0
    """Numbers a dump request, so that the dumps answering it land in the right bundle."""
    ranks: list[int] | None = None

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
        }
    )


def decode_command(data: bytes) -> Command:
    """Raises :class:`WireError` for anything that is not a command."""
    try:
        obj = msgpack.unpackb(data, raw=False, max_str_len=4096, max_array_len=100_000, max_map_len=16)
        command = Command(obj["action"], obj["job"], obj["reason"], obj["request"], obj["ranks"])
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as e:
        raise WireError("malformed_command", str(e)) from None
    ranks_ok = command.ranks is None or (
        isinstance(command.ranks, list) and all(isinstance(r, int) for r in command.ranks)
    )
    if command.action not in ACTIONS or not (isinstance(command.job, str) and isinstance(command.request, int)):
        raise WireError("malformed_command", f"action {command.action!r}")
    if not ranks_ok:
        raise WireError("malformed_command", "ranks")
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
    if len(frames[2]) > MAX_DUMP_BYTES:
        raise WireError("oversized_dump", f"{len(frames[2])} bytes")
    return Dump(job, rank, request, frames[2])
