"""A job's log read for what each rank said last: the collective its NCCL watchdog timed out
in, the Python exception it raised, or nothing at all.

Watchdog shapes read, by torch era (``Rank`` in a PG prefix is the group-local rank)::

    1.9-1.10  [E ProcessGroupNCCL.cpp:587] [Rank 1] Watchdog caught collective operation timeout:
                  WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800412 milliseconds ...
    2.0-2.3   [E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught ... WorkNCCL(SeqNum=51207, ...
    2.4       [PG 0 (default_pg) Rank 7] Exception (either an error or timeout) detected by watchdog
                  at work: 3312, last enqueued NCCL work: 3313, last completed NCCL work: 3311.
              [PG 3 Rank 2] Heartbeat monitor timed out! ...
    2.5-2.6   [PG ID 0 PG GUID 0(default_pg) Rank 1] Timeout at NCCL work: 417, last enqueued NCCL
                  work: 419, last completed NCCL work: 416.
    2.6+      [PG ID 1 PG GUID 1 Rank 3]  failure detected by watchdog at work sequence id: 9120 PG
                  status: last enqueued work: 9122, last completed work: 9119
              [PG ID 0 PG GUID 0(default_pg) Rank 7] ProcessGroupNCCL's watchdog got stuck for 480
                  seconds without making progress in monitoring enqueued collectives.

A line's rank is torchrun's ``[rankN]:`` prefix wherever it stands (after docker or logging
stamps, a host name, a progress bar), else the bare ``[Rank N]`` of old torch, else the
group-local rank of the default group. Lines a terminal wrapped are joined again. A rank's
``[rankN]:``-prefixed Python traceback is its last words, as are the traceback under
``mp.spawn``'s ``-- Process N terminated`` and torchrun's root cause in a ``ChildFailedError``
table. A rank the log shows without a watchdog line waits for nobody;
one it never shows was never heard from.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO

from distmon.visible import visible
from distmon.wire import PEER_LOST, ExceptionInfo, Frame, GroupStatus, rank_runs

MAX_LINE = 64 * 1024
"""Longer lines are cut there: a watchdog line is a few hundred characters."""
MAX_WRAPS = 8
"""Physical lines a terminal may have wrapped one watchdog line into."""
MAX_FRAMES = 64
MAX_TRACEBACK_LINES = 4096
"""Lines a traceback may run without its exception line before it is given up (its innermost
:data:`MAX_FRAMES` frames are kept)."""
DEFAULT_PG = "default_pg"
WORLD_GROUP = "0"
"""The world group's name: it is created first on every rank, in every torch era."""
SIGABRT = -6
"""torchrun's exit code of a rank its own watchdog aborted: a timeout's consequence, not a cause."""
SIGTERM = -15
"""torchrun's exit code of a rank it tore down after another failed."""

_RANK = re.compile(r"\[rank(\d{1,9})\]: ?")
_RECORD = re.compile(
    r"\[rank\d{1,9}\]:|\[[EWIF](?:\d{4} \d\d:| )"
    r"|^\s*(?:what\(\):|terminate called|\[(?:Rank|PG) |Traceback|frame #|Exception raised from|Root Cause|={8}|-{8})"
)
"""What starts a line of its own: a wrapped line's rest starts with none of these."""
_GLOG = re.compile(r"\[[EWIF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
STAMP_SPAN = 80
"""Where a docker or logging stamp may stand in a line: at its start, before the rank's prefix."""
_PG = re.compile(
    r"\[PG ?ID ?\d{1,9} ?PG ?GUID ?(\w{1,200})(?:\(([^)\]]{0,200})\))? ?Rank ?(\d{1,9})\]"
    r"|\[PG ?(\w{1,200})(?: ?\(([^)\]]{0,200})\))? ?Rank ?(\d{1,9})\]"
)
_BARE_RANK = re.compile(r"\[Rank ?(\d{1,9})\]")
_CAUGHT = re.compile(
    r"Watchdog caught collective operation timeout: ?WorkNCCL\((?:SeqNum=(\d{1,18}), ?)?OpType=(\w{1,40})"
)
_RAN_FOR = re.compile(r"ran for ?(\d{1,18}) ?milli")
_AT_WORK = re.compile(
    r"(?:detected by watchdog at work|Timeout at NCCL work): ?(-?\d{1,18}), ?last enqueued NCCL work: ?"
    r"(-?\d{1,18}), ?last completed NCCL work: ?(-?\d{1,18})"
)
_SEQ_ID = re.compile(
    r"detected by watchdog at work sequence id: ?(-?\d{1,18}) ?PG status: ?last enqueued work: ?(-?\d{1,18}), ?"
    r"last completed work: ?(-?\d{1,18})"
)
_STUCK = re.compile(r"watchdog got stuck for ?(\d{1,9}) ?seconds|Heartbeat monitor timed out|no heartbeat of its")
"""The watchdog itself stuck, in collectives it could no longer follow: a wait with no number."""
_WATCHDOG_WORDS = ("atchdog", "WorkNCCL", "NCCL work", "eartbeat", "ProcessGroupNCCL")
"""Words of a line that may be the start of a watchdog line a terminal wrapped."""
_OPTIONS = re.compile(r"ProcessGroupNCCL initialization options: ?size: ?(\d{1,9}), ?global rank: ?(\d{1,9})")
MAX_GROUP = 1 << 20
"""Ranks a group's ``initialization options`` line may claim: more is no real job's."""
_WORLD = re.compile(
    r"global_world_sizes=\[(\d{1,9})|dist_world_size=(\d{1,9})|MEMBER: ?\d{1,9}/(\d{1,9})|Num processes: ?(\d{1,9})"
)
"""The world as launchers print it: torchrun's rendezvous, DeepSpeed's launcher, Lightning's
``Initializing distributed``, accelerate's environment."""
_WORLD_WORDS = ("world_size", "MEMBER:", "Num processes")

_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r' {2}File "([^"]{1,1000})", line (\d{1,9}), in (.{1,200})')
_EXCEPTION = re.compile(r"([A-Za-z_][\w.]{0,200})(?:: ?(.*))?")
_BARE_EXCEPTIONS = ("Error", "Exception", "Interrupt", "Exit", "Iteration")
"""How the names of exceptions raised without a message end: a lone word of the rank's own
output between its frames is not one."""
_SPAWNED = re.compile(r"-- Process (\d{1,9}) terminated with the following error:")
_ROOT_CAUSE = "Root Cause (first observed failure):"
_TABLE_FIELD = re.compile(r"\s{0,8}(rank|exitcode|time|traceback)\s{0,8}: ?(.*)")
_TABLE_END = "=" * 20
_SIGNAL = re.compile(r"Signal (\d{1,3}) \((SIG\w{1,10})\)")

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
P2P_OPS = ("send", "recv")


@dataclass
class Timeout:
    """What a rank's watchdog said of one group."""

    group: str
    desc: str | None = None
    local: int | None = None
    """The rank's place in the group (``Rank k`` of the PG prefix)."""
    seq: int | None = None
    """The work that timed out; None where the line gives no number (torch 1.10 and older, a
    stuck watchdog)."""
    op: str | None = None
    enqueued: int = 0
    completed: int | None = None
    since: float | None = None
    """When that work was enqueued: the line's time less how long it ran."""
    said_at: float | None = None
    """When the watchdog said so."""


@dataclass
class Raised:
    """A rank's last words: the exception its traceback ended in."""

    type: str
    message: str
    frames: list[Frame]
    at: float | None
    """The time the log gives it (its own stamp, else the last one before it), if any."""


@dataclass
class Layout:
    """A group as its ``ProcessGroupNCCL initialization options`` lines tell it."""

    size: int
    members: dict[int, int] = field(default_factory=dict)
    """Group-local rank -> global rank, of the members that printed the line."""


@dataclass
class LogFacts:
    """A log's ranks: those it shows, each one's timeouts by group, and those that raised."""

    seen: set[int] = field(default_factory=set)
    timeouts: dict[int, dict[str, Timeout]] = field(default_factory=dict)
    raised: dict[int, Raised] = field(default_factory=dict)
    world: int | None = None
    """As a launcher printed it (:data:`_WORLD`), or the world group's ``initialization
    options`` line."""
    layouts: dict[str, Layout] = field(default_factory=dict)
    latest: float | None = None
    """The latest watchdog line's or exception's time."""
    unplaced: int = 0
    """Watchdog lines whose rank the log does not say."""
    matched: int = 0
    """Lines read that a rank's prefix, the watchdog or torchrun's failure table wrote."""

    def forget(self, rank: int) -> None:
        self.seen.discard(rank)
        self.timeouts.pop(rank, None)
        self.raised.pop(rank, None)

    def statuses(self, world: int, moment: float) -> dict[int, list[GroupStatus]]:
        """Each rank's timeouts as the group statuses its report would have held: the work
        that timed out is the oldest in flight, unless the group's other members had completed
        it (they passed it: this rank stopped short of it, and is the one behind). A wait the
        log gives no start for counts from the watchdog's line, else from ``moment``: it waited
        by then. A rank that raised without a watchdog line stood short of its peers' wait
        (:meth:`_Standings.stopped_short`)."""
        standings = _Standings(self, world)
        statuses: dict[int, list[GroupStatus]] = {}
        for rank, timeouts in self.timeouts.items():
            for t in timeouts.values():
                seq = standings.position(t)
                behind = standings.passed(t.group, seq)
                size, runs = standings.members(t.group)
                status = GroupStatus(
                    id=t.group,
                    backend="nccl",
                    size=size,
                    ranks=[list(run) for run in runs],
                    timeout=None,
                    enqueued=seq - 1 if behind else max(t.enqueued, seq),
                    completed=seq - 1,
                    desc=t.desc,
                    op=None if behind else t.op,
                    since=None if behind else next(s for s in (t.since, t.said_at, moment) if s is not None),
                )
                statuses.setdefault(rank, []).append(status)
        for rank in self.raised.keys() - self.timeouts.keys():
            stopped = standings.stopped_short(rank, self.raised[rank])
            if stopped is not None:
                statuses[rank] = [stopped]
        return statuses

    def last_words(self, rank: int, moment: float) -> ExceptionInfo | None:
        """The exception the rank raised, at its time in the log (at ``moment`` where the log
        gives none: ranks that raised without a stamp count as raising together)."""
        raised = self.raised.get(rank)
        if raised is None:
            return None
        where = raised.frames[-1] if raised.frames else None
        at = raised.at if raised.at is not None else moment
        return ExceptionInfo(raised.type, raised.message, where, raised.frames, at)


class _Standings:
    """Each group as the whole log shows it: how far its members went, and who they are."""

    def __init__(self, facts: LogFacts, world: int) -> None:
        self.world = world
        self.layouts = facts.layouts
        self.by_group: dict[str, list[tuple[int, Timeout]]] = {}
        self.widest: dict[str | None, int] = {}
        """Of each kind of group (its description), the most members a log line shows."""
        for rank, groups in facts.timeouts.items():
            for name, t in groups.items():
                self.by_group.setdefault(name, []).append((rank, t))
                if t.local is not None and t.desc is not None:
                    self.widest[t.desc] = max(self.widest.get(t.desc, 0), t.local + 1)
        self.furthest = {
            name: max((p.seq - 1 if p.seq is not None else (p.completed or 0) for _, p in ts), default=0)
            for name, ts in self.by_group.items()
            if not any(p.op in P2P_OPS for _, p in ts)
        }
        """Of each group, the most work a member had completed; not of a group that timed out in
        a send or receive, whose numbers count point-to-point ops apart on each rank."""
        self.named = {
            name: max((p.seq for _, p in ts if p.seq is not None), default=1) for name, ts in self.by_group.items()
        }
        """Of each group, the furthest work a member's line numbers."""
        self.known: dict[str, tuple[int, list[list[int]]]] = {}

    def stopped_short(self, rank: int, raised: Raised) -> GroupStatus | None:
        """Where a rank that raised on its own and printed no watchdog line stood in the world
        group: short of the oldest work its peers timed out in, which it never issued. None
        for a rank that raised because a peer was lost (it waited like the others), or where
        no peer timed out in the world group."""
        world_group = next((name for name, ts in self.by_group.items() if ts[0][1].desc == DEFAULT_PG), None)
        if world_group is None or rank >= self.world or PEER_LOST.search(raised.message):
            return None
        oldest = min(self.position(t) for _, t in self.by_group[world_group])
        size, runs = self.members(world_group)
        return GroupStatus(
            id=world_group,
            backend="nccl",
            size=size,
            ranks=[list(run) for run in runs],
            timeout=None,
            enqueued=oldest - 1,
            completed=oldest - 1,
            desc=DEFAULT_PG,
        )

    def position(self, t: Timeout) -> int:
        """The work a rank timed out at; for a line without a number, the furthest its peers
        name (the rank waited with them, and is not taken for behind), else 1."""
        return max(t.seq, 1) if t.seq is not None else self.named[t.group]

    def passed(self, group: str, seq: int) -> bool:
        return group in self.furthest and self.furthest[group] >= seq

    def members(self, group: str) -> tuple[int, list[list[int]]]:
        """A group's size and global ranks as runs (none where the log cannot say)."""
        if group not in self.known:
            members = self._members(group)
            self.known[group] = (len(members), rank_runs(members)) if members else (1, [])
        return self.known[group]

    def _members(self, group: str) -> list[int] | None:
        """The world for the default group; else as the group's ``initialization options``
        lines name them all; else from the members' group-local ranks where they fall on one
        arithmetic run (as subgroups of a regular layout do), as many as the group's size or
        the widest group of its kind shows."""
        timeouts = self.by_group[group]
        desc = timeouts[0][1].desc
        if desc == DEFAULT_PG:
            return list(range(self.world))
        layout = self.layouts.get(group)
        if layout is not None and len(layout.members) == layout.size:
            return sorted(m for m in layout.members.values() if m < self.world) or None
        told = layout.members.items() if layout else ()
        pairs = sorted({(t.local, rank) for rank, t in timeouts if t.local is not None} | set(told))
        if len(pairs) < 2 or pairs[1][0] == pairs[0][0]:
            return None
        (l0, g0), (l1, g1) = pairs[0], pairs[1]
        stride, rest = divmod(g1 - g0, l1 - l0)
        start = g0 - l0 * stride
        if rest or stride <= 0 or start < 0 or any(g != start + local * stride for local, g in pairs):
            return None
        size = max(pairs[-1][0] + 1, self.widest.get(desc, 0), layout.size if layout else 0)
        return [m for m in (start + k * stride for k in range(size)) if m < self.world] or None


@dataclass
class _Reader:
    facts: LogFacts
    year: int
    stamp: float | None = None
    """The last time a line gave: an unstamped traceback's."""
    tracebacks: dict[int, _Traceback] = field(default_factory=dict)
    table: _Table | None = None
    spawned: int | None = None
    """The process whose traceback ``torch.multiprocessing.spawn`` is printing."""

    def line(self, line: str) -> None:
        prefix = _RANK.search(line)
        rank = int(prefix.group(1)) if prefix else None
        at = self._time(line)
        if at is not None:
            self.stamp = at
        if rank is not None:
            self.facts.seen.add(rank)
            self.facts.matched += 1
        world = _WORLD.search(line) if any(words in line for words in _WORLD_WORDS) else None
        if world:
            self.facts.world = max(self.facts.world or 0, int(next(g for g in world.groups() if g)))
        if _watchdog_words(line):
            self._watchdog(line, rank, at)
            self._layout(line)
        body = line[prefix.end() :] if prefix else line
        if rank is not None:
            self._traceback(rank, body)
        else:
            self._spawn(body)
            self._table(body)

    def _time(self, line: str) -> float | None:
        """The glog stamp ``[E1124 03:12:44.123456789`` (its year that of the log's other
        stamps, else this year's), else a docker or logging stamp at the line's start; read as
        UTC, as only the differences between lines count."""
        iso = _ISO.search(line, 0, STAMP_SPAN)
        if iso:
            self.year = int(iso.group(1))
        glog = _GLOG.search(line)
        if glog:
            return _utc(self.year, *glog.groups())
        return _utc(*iso.groups()) if iso else None

    def _watchdog(self, line: str, rank: int | None, at: float | None) -> None:
        """A watchdog line; of a rank's lines on one group the last read counts (after a
        restart, its numbers start again)."""
        caught, at_work, seq_id = _CAUGHT.search(line), _AT_WORK.search(line), _SEQ_ID.search(line)
        stuck = None if (caught or at_work or seq_id) else _STUCK.search(line)
        if not (caught or at_work or seq_id or stuck):
            return
        pg = _PG.search(line)
        name, desc = (
            (WORLD_GROUP, DEFAULT_PG) if pg is None else (pg.group(1) or pg.group(4), pg.group(2) or pg.group(5))
        )
        desc = visible(desc, 200) if desc else (DEFAULT_PG if name == WORLD_GROUP else None)
        local = int(pg.group(3) or pg.group(6)) if pg else None
        if rank is None:
            bare = _BARE_RANK.search(line)
            if pg is None and bare:
                rank = int(bare.group(1))
            elif desc == DEFAULT_PG:
                rank = local
        self.facts.matched += 1
        if rank is None:
            self.facts.unplaced += 1
            return
        self.facts.seen.add(rank)
        if at is not None:
            self.facts.latest = max(self.facts.latest or at, at)
        timeout = self.facts.timeouts.setdefault(rank, {}).setdefault(name, Timeout(name))
        timeout.desc = desc or timeout.desc
        timeout.said_at = at if at is not None else timeout.said_at
        timeout.local = local if local is not None else (rank if desc == DEFAULT_PG else timeout.local)
        if caught:
            if caught.group(1) is not None:
                timeout.seq = int(caught.group(1))
            timeout.op = OPS.get(caught.group(2), caught.group(2).lower())
            ran = _RAN_FOR.search(line, caught.end())
            if at is not None and ran:
                timeout.since = at - int(ran.group(1)) / 1000
        counts = at_work or seq_id
        if counts:
            if caught is None or caught.group(1) is None:
                timeout.seq = int(counts.group(1))
            timeout.enqueued, timeout.completed = int(counts.group(2)), int(counts.group(3))
        if stuck and stuck.group(1) and at is not None and timeout.since is None:
            timeout.since = at - int(stuck.group(1))

    def _layout(self, line: str) -> None:
        """A group's size and one member, from the line torch prints as it creates the group
        (with ``TORCH_CPP_LOG_LEVEL=INFO``): even a rank that later says nothing printed it."""
        options = _OPTIONS.search(line)
        pg = _PG.search(line) if options else None
        if options is None or pg is None:
            return
        size, member = int(options.group(1)), int(options.group(2))
        name, desc = pg.group(1) or pg.group(4), pg.group(2) or pg.group(5)
        if size > MAX_GROUP or member >= MAX_GROUP:
            return
        self.facts.seen.add(member)
        self.facts.matched += 1
        if desc == DEFAULT_PG or name == WORLD_GROUP:
            self.facts.world = max(self.facts.world or 0, size)
            return
        layout = self.facts.layouts.setdefault(name, Layout(size))
        layout.size = max(layout.size, size)
        layout.members[int(pg.group(3) or pg.group(6))] = member

    def _traceback(self, rank: int, body: str) -> None:
        if body.startswith(_TRACEBACK):
            if rank not in self.facts.raised:
                self.tracebacks[rank] = _Traceback()
            return
        building = self.tracebacks.get(rank)
        if building is None:
            return
        raised = building.line(body, self.stamp)
        if raised is not None or building.lines > MAX_TRACEBACK_LINES:
            del self.tracebacks[rank]
        if raised is not None:
            self._raised(rank, raised)

    def _raised(self, rank: int, raised: Raised) -> None:
        self.facts.seen.add(rank)
        self.facts.raised.setdefault(rank, raised)
        if raised.at is not None:
            self.facts.latest = max(self.facts.latest or raised.at, raised.at)

    def _spawn(self, body: str) -> None:
        """``mp.spawn``'s ``-- Process N terminated with the following error:``: the traceback
        under it is process N's, its rank on one node."""
        found = _SPAWNED.search(body)
        if found:
            self.spawned = int(found.group(1))
            self.facts.matched += 1
        elif self.spawned is not None and body.strip():
            self._traceback(self.spawned, body)
            if self.spawned not in self.tracebacks:
                self.spawned = None

    def _table(self, body: str) -> None:
        """torchrun's ``ChildFailedError`` table: its root cause, the rank that failed first."""
        if _ROOT_CAUSE in body:
            self.table = _Table()
            return
        if self.table is None:
            return
        self.facts.matched += 1
        if body.strip().startswith(_TABLE_END) or self.table.lines > MAX_TRACEBACK_LINES:
            table, self.table = self.table, None
            if table.rank is not None and table.rank not in self.facts.raised:
                failure = table.failure(timed_out=table.rank in self.facts.timeouts)
                if failure is not None:
                    self._raised(table.rank, failure)
            return
        self.table.line(body)


@dataclass
class _Traceback:
    """A Python traceback read line by line, up to its exception line."""

    frames: list[Frame] = field(default_factory=list)
    lines: int = 0

    def line(self, body: str, stamp: float | None) -> Raised | None:
        self.lines += 1
        frame = _FRAME.match(body)
        if frame:
            if len(self.frames) == MAX_FRAMES:
                del self.frames[0]
            file, line, func = frame.groups()
            self.frames.append(Frame(visible(file), int(line), visible(func.strip(), 200)))
            return None
        if not body.strip() or body[:1].isspace():
            if self.frames and self.frames[-1].code is None and body.startswith("    "):
                code = body.strip()
                if code.strip("^~ "):
                    self.frames[-1].code = visible(code)
            return None
        exception = _EXCEPTION.fullmatch(body.rstrip())
        if exception is None or (exception.group(2) is None and not exception.group(1).endswith(_BARE_EXCEPTIONS)):
            return None
        return Raised(visible(exception.group(1), 200), visible((exception.group(2) or "").strip()), self.frames, stamp)


@dataclass
class _Table:
    """The root cause block of torchrun's failure table."""

    rank: int | None = None
    exitcode: int | None = None
    at: float | None = None
    traceback: _Traceback | None = None
    raised: Raised | None = None
    said: str = ""
    lines: int = 0

    def line(self, body: str) -> None:
        self.lines += 1
        if self.traceback is not None:
            if self.raised is None:
                self.raised = self.traceback.line(body[2:] if body.startswith("  ") else body, self.at)
            return
        found = _TABLE_FIELD.match(body)
        if found is None:
            return
        key, value = found.groups()
        number = re.match(r"-?\d{1,9}", value)
        if key == "rank" and number:
            self.rank = int(number.group())
        elif key == "exitcode" and number:
            self.exitcode = int(number.group())
        elif key == "time" and (iso := _ISO.match(value)):
            self.at = _utc(*iso.groups())
        elif key == "traceback":
            self.said = visible(value.strip())
            if value.startswith(_TRACEBACK):
                self.traceback = _Traceback()

    def failure(self, timed_out: bool) -> Raised | None:
        """The root cause as last words: the exception it raised, or the signal that killed
        it. None for a rank its own watchdog aborted or torchrun tore down, or one that timed
        out like its peers and left only an exit code: torchrun observed it first, no more."""
        if self.raised is not None:
            return self.raised
        if timed_out or self.exitcode is None or self.exitcode in (0, SIGABRT, SIGTERM):
            return None
        signal = _SIGNAL.search(self.said)
        if self.exitcode < 0 or signal:
            kind = f"Signal {signal.group(1)} ({signal.group(2)})" if signal else f"Signal {-self.exitcode}"
            return Raised(kind, "killed: torchrun's first observed failure", [], self.at)
        return Raised(
            "Exception",
            f"exit code {self.exitcode}, torchrun's first observed failure (its traceback not in the log)",
            [],
            self.at,
        )


def read_log(stream: IO[str], facts: LogFacts | None = None, year: int | None = None) -> LogFacts:
    """What the ranks said in one log (any size: read line by line)."""
    facts = facts or LogFacts()
    reader = _Reader(facts, year or time.gmtime().tm_year)
    for line in _joined(raw[:MAX_LINE] for raw in stream):
        reader.line(line)
    return facts


def _joined(lines: Iterable[str]) -> Iterator[str]:
    """Lines as written: a watchdog line a terminal wrapped (in the middle of a number, padded
    with spaces) is joined with the lines that carry on from it, up to :data:`MAX_WRAPS`. Every
    piece of a wrapped line but the last fills the terminal's width: a line that follows a
    shorter piece starts a line of its own."""
    pending: str | None = None
    width = wraps = 0
    piece = ""
    for line in lines:
        line = line.rstrip("\r\n")
        if pending is not None:
            full = wraps == 0 or len(piece) == width
            if full and wraps < MAX_WRAPS and line.strip() and not _RECORD.search(line):
                pending = (pending.rstrip() + line.strip())[:MAX_LINE]
                wraps, piece = wraps + 1, line
                if _whole(pending):
                    yield pending
                    pending = None
                continue
            yield pending
            pending = None
        if _cut_short(line):
            pending, width, wraps = line, len(line), 0
        else:
            yield line
    if pending is not None:
        yield pending


def _watchdog_words(line: str) -> bool:
    return any(word in line for word in _WATCHDOG_WORDS)


def _whole(line: str) -> bool:
    """Holds a whole watchdog message: one whose last number is followed by more text (a
    wrap may cut ``work: 3311.`` after ``work: 33``)."""
    caught = _CAUGHT.search(line)
    if caught:
        return bool(_RAN_FOR.search(line, caught.end()))
    end = len(line.rstrip())
    counts = _AT_WORK.search(line) or _SEQ_ID.search(line)
    return bool((counts and counts.end() < end) or _STUCK.search(line))


def _cut_short(line: str) -> bool:
    """A line of the watchdog's that stops short of a whole message: a wrap may have cut it."""
    return _watchdog_words(line) and not _whole(line)


def _utc(year: int | str, *parts: str | None) -> float | None:
    month, day, hour, minute, second, fraction = parts
    try:
        whole = calendar.timegm(
            (int(year), int(month or 0), int(day or 0), int(hour or 0), int(minute or 0), int(second or 0), 0, 0, 0)
        )
    except (OverflowError, ValueError):
        return None
    return whole + (float("0." + fraction) if fraction else 0.0)
