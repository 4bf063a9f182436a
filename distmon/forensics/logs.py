"""The NCCL watchdog's lines in a job's log: which collective each rank timed out in.

Shapes (torchrun prefixes rank N's lines with ``[rankN]:``; ``Rank`` in a PG prefix is the
group-local rank; older torch prints ``[PG 1 Rank 0]`` and a bare ``[Rank 0]``)::

    [rank0]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective
        operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, ...) ran for 600060 milliseconds ...
    [rank0]:[E1124 ...] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout)
        detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.
    [rank4]:[E1124 ...] [PG ID 2 PG GUID 3(TENSOR_MODEL_PARALLEL_GROUP) Rank 0]  failure detected by
        watchdog at work sequence id: 5653 PG status: last enqueued work: 5654, last completed work: 5652

A rank stuck in its own code prints no watchdog line: a rank the log shows (any line with its
prefix) without one waits for nobody, and a rank the log never shows was never heard from.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field
from typing import IO

MAX_LINE = 64 * 1024
"""Longer lines are cut there: a watchdog line is a few hundred characters."""

_RANK = re.compile(r"^\[rank(\d{1,9})\]:")
_STAMP = re.compile(r"\[[EWIF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")
_PG = re.compile(
    r"\[PG ID \d+ PG GUID (\w{1,200})(?:\(([^)\]]{0,200})\))? Rank (\d{1,9})\]|\[PG (\w{1,200}) Rank (\d{1,9})\]"
)
_BARE_RANK = re.compile(r"\[Rank (\d{1,9})\]")
_CAUGHT = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d{1,18}), OpType=(\w{1,40})"
    r".*?ran for (\d{1,18}) milli"
)
_AT_WORK = re.compile(
    r"detected by watchdog at work: (\d{1,18}), last enqueued NCCL work: (\d{1,18}), "
    r"last completed NCCL work: (\d{1,18})"
)
_SEQ_ID = re.compile(
    r"detected by watchdog at work sequence id: (\d{1,18}) PG status: last enqueued work: (\d{1,18}), "
    r"last completed work: (\d{1,18})"
)
_WORLD = re.compile(r"global_world_sizes=\[(\d{1,9})")

OPS = {
    "ALLREDUCE": "all_reduce",
    "_ALLGATHER_BASE": "_all_gather_base",
    "ALLGATHER": "all_gather",
    "_REDUCE_SCATTER_BASE": "_reduce_scatter_base",
    "REDUCE_SCATTER": "reduce_scatter",
    "ALLTOALL_BASE": "all_to_all",
    "ALLTOALL": "all_to_all",
    "BROADCAST": "broadcast",
    "REDUCE": "reduce",
    "BARRIER": "barrier",
    "COALESCED": "coalesced",
    "SEND": "send",
    "RECV": "recv",
}
"""The watchdog's ``OpType`` as the Flight Recorder names the op."""


@dataclass
class Timeout:
    """What a rank's watchdog said of one group."""

    group: str
    desc: str | None = None
    seq: int = 0
    """The work that timed out."""
    op: str | None = None
    enqueued: int = 0
    completed: int | None = None
    since: float | None = None
    """When that work was enqueued: the line's time less how long it ran."""


@dataclass
class LogFacts:
    """A log's ranks: those it shows, and each one's timeouts by group."""

    seen: set[int] = field(default_factory=set)
    timeouts: dict[int, dict[str, Timeout]] = field(default_factory=dict)
    world: int | None = None
    """As torchrun's rendezvous printed it (``global_world_sizes=[64, ...``)."""
    latest: float | None = None
    """The latest watchdog line's time."""
    unplaced: int = 0
    """Watchdog lines whose rank the log does not say."""
    matched: int = 0
    """Lines read that a rank's prefix or the watchdog wrote."""


def read_log(stream: IO[str], facts: LogFacts | None = None, year: int | None = None) -> LogFacts:
    """The watchdog's lines of one log (any size: read line by line)."""
    facts = facts or LogFacts()
    year = year or time.gmtime().tm_year
    for raw in stream:
        line = raw[:MAX_LINE]
        prefix = _RANK.match(line)
        rank = int(prefix.group(1)) if prefix else None
        if rank is not None:
            facts.seen.add(rank)
            facts.matched += 1
        world = _WORLD.search(line) if "global_world_sizes" in line else None
        if world:
            facts.world = max(facts.world or 0, int(world.group(1)))
        if "watchdog" in line.lower():
            _watchdog(line, rank, facts, year)
    return facts


def _watchdog(line: str, rank: int | None, facts: LogFacts, year: int) -> None:
    caught, at_work, seq_id = _CAUGHT.search(line), _AT_WORK.search(line), _SEQ_ID.search(line)
    if not (caught or at_work or seq_id):
        return
    pg = _PG.search(line)
    name, desc = ("0", "default_pg") if pg is None else (pg.group(1) or pg.group(4), pg.group(2))
    local = int(pg.group(3) or pg.group(5)) if pg else None
    if rank is None:
        bare = _BARE_RANK.search(line)
        if pg is None and bare:
            rank = int(bare.group(1))
        elif desc == "default_pg" and local is not None:
            rank = local
    if rank is None:
        facts.unplaced += 1
        return
    facts.seen.add(rank)
    facts.matched += 1
    at = _time(line, year)
    if at is not None:
        facts.latest = max(facts.latest or at, at)
    timeout = facts.timeouts.setdefault(rank, {}).setdefault(name, Timeout(name))
    timeout.desc = desc or timeout.desc
    if caught:
        timeout.seq = int(caught.group(1))
        timeout.op = OPS.get(caught.group(2), caught.group(2).lower())
        if at is not None:
            timeout.since = at - int(caught.group(3)) / 1000
    for found in (at_work, seq_id):
        if found:
            timeout.seq = timeout.seq or int(found.group(1))
            timeout.enqueued = max(timeout.enqueued, int(found.group(2)))
            timeout.completed = int(found.group(3))


def _time(line: str, year: int) -> float | None:
    """The glog stamp ``[E1124 03:12:44.123456789`` (no year: this year's; read as UTC, as only
    the differences between lines count)."""
    stamp = _STAMP.search(line)
    if stamp is None:
        return None
    month, day, hour, minute, second = (int(g) for g in stamp.groups()[:5])
    fraction = float("0." + stamp.group(6)) if stamp.group(6) else 0.0
    try:
        return calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) + fraction
    except (OverflowError, ValueError):
        return None
