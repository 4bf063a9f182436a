"""A job's log read for what each rank said last: the collective its NCCL watchdog timed out
in (:mod:`~distmon.forensics.watchdog`), the Python exception it raised
(:mod:`~distmon.forensics.tracebacks`), the error of its own device, or nothing at all.

A line's rank is torchrun's ``[rankN]:`` prefix wherever it stands (after docker or logging
stamps, a host name, a progress bar), else the bare ``[Rank N]`` of old torch, else the
group-local rank of the default group. The log is first put back into the lines the ranks
wrote (:mod:`~distmon.forensics.pasted`). A watchdog line that names no group (``[Rank 0]
Watchdog caught ...`` of torch 2.0-2.5) is the work a line of the same rank with a PG prefix
names, where one does; alone, it is of the world group, as in old torch, unless the rank has
several such waits, which are then of groups the log does not name. A rank's
``[rankN]:``-prefixed Python traceback is its last words, as are the traceback under
``mp.spawn``'s ``-- Process N terminated`` and torchrun's root cause in a ``ChildFailedError``
table; a traceback with no rank is kept apart (:attr:`LogFacts.unplaced`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO

from distmon.forensics.pasted import lines_as_written
from distmon.forensics.tracebacks import (
    FRAME,
    ISO,
    ROOT_CAUSE,
    TRACEBACK,
    Raised,
    Table,
    Traceback,
    ends_table,
    utc,
)
from distmon.forensics.watchdog import GATHERS, OPTIONS, PG, SCATTERS, Said, said
from distmon.wire import PEER_LOST, ExceptionInfo

DEFAULT_PG = "default_pg"
WORLD_GROUP = "0"
"""The world group's name: it is created first on every rank, in every torch era."""
MAX_GROUP = 1 << 20
"""Ranks a group's ``initialization options`` line may claim: more is no real job's."""
MAX_UNPLACED = 16
"""Exceptions with no rank kept from one log."""

_RANK = re.compile(r"\[rank(\d{1,9})\]: ?")
_GLOG = re.compile(r"\[[EWIF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")
STAMP_SPAN = 80
"""Where a docker or logging stamp may stand in a line: at its start, before the rank's prefix."""
_WORLD = re.compile(
    r"global_world_sizes=\[(\d{1,9})|dist_world_size=(\d{1,9})|MEMBER: ?\d{1,9}/(\d{1,9})|Num processes: ?(\d{1,9})"
)
"""The world as launchers print it: torchrun's rendezvous, DeepSpeed's launcher, Lightning's
``Initializing distributed``, accelerate's environment."""
_WORLD_WORDS = ("world_size", "MEMBER:", "Num processes")
_NRANKS = re.compile(r"NCCL INFO .{0,300}?\bn[Rr]anks (\d{1,9})")
"""NCCL's own count of a communicator's ranks: the world's, or a subgroup's, never more."""
_LISTED = re.compile(r"^\s*rank\s{0,8}: ?(\d{1,9}) \(local_rank: ?\d{1,9}\)")
"""A rank torchrun's failure table lists: the world has at least as many."""
_MONITORED = re.compile(
    r"waiting for send/recv from rank (\d{1,9})|Ranks? ([\d, ]{1,200}) failed to pass monitoredBarrier"
)
"""A monitored barrier names the ranks that never answered it."""
_SPAWNED = re.compile(r"-- Process (\d{1,9}) terminated with the following error:")
_DISTRIBUTED = ("torch/distributed/", "deepspeed/comm/")
"""Where a traceback that ends in a collective call stands: a rank that waited raised there."""


@dataclass
class Timeout:
    """What a rank's watchdog said of one group (or, :attr:`group` None, of a group it did not
    name)."""

    group: str | None
    desc: str | None = None
    local: int | None = None
    """The rank's place in the group (``Rank k`` of the PG prefix)."""
    seq: int | None = None
    """The work that timed out; None where the line gives no number (torch 1.10 and older, a
    stuck watchdog)."""
    op: str | None = None
    enqueued: int = 0
    completed: int | None = None
    ran: float | None = None
    """Seconds it ran before the watchdog gave up, as the line says."""
    said_at: float | None = None
    """When the watchdog said so."""
    timeout_ms: int | None = None
    numel: tuple[int, int] | None = None
    stuck: float | None = None
    """The watchdog itself stuck (its heartbeat lines): seconds, 0 where they do not say."""

    def take(self, found: Said, at: float | None) -> None:
        """What one more line says of the same work (the last line read counts: after a
        restart, the numbers start again)."""
        self.desc = found.desc or self.desc
        self.local = found.local if found.local is not None else self.local
        self.said_at = at if at is not None else self.said_at
        if found.seq is not None:
            self.seq = found.seq
        self.op = found.op or self.op
        self.ran = found.ran if found.ran is not None else self.ran
        self.timeout_ms = found.timeout_ms or self.timeout_ms
        self.numel = found.numel or self.numel
        self.stuck = found.stuck if found.stuck is not None else self.stuck
        if found.enqueued is not None:
            self.enqueued, self.completed = found.enqueued, found.completed
        if self.seq is not None and self.completed is not None and not -1 <= self.completed < self.seq:
            self.completed = None  # a count no watchdog prints for the work it gave up on: garbled
        self.enqueued = max(self.enqueued, self.seq or 0)

    @property
    def since(self) -> float | None:
        """When the work was enqueued: the line's time less how long it ran."""
        if self.said_at is None:
            return None
        return self.said_at - (self.ran if self.ran is not None else self.stuck or 0.0)

    def size(self) -> int | None:
        """The group's size, from an all-gather's or a reduce-scatter's element counts."""
        if self.numel is None or not all(self.numel):
            return None
        n_in, n_out = self.numel
        ratio, rest = (
            divmod(n_out, n_in) if self.op in GATHERS else divmod(n_in, n_out) if self.op in SCATTERS else (0, 1)
        )
        return ratio if not rest and 1 < ratio <= MAX_GROUP else None


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
    loose: dict[int, list[Timeout]] = field(default_factory=dict)
    """Per rank, its watchdog lines that named no group, until :meth:`place` places them."""
    unnamed: dict[int, list[Timeout]] = field(default_factory=dict)
    """Per rank, its waits in groups the log does not name (several without a PG prefix)."""
    raised: dict[int, Raised] = field(default_factory=dict)
    unplaced: list[Raised] = field(default_factory=list)
    """Exceptions whose rank the log does not say."""
    named: dict[int, str] = field(default_factory=dict)
    """Ranks a peer's monitored barrier names as never answering, with its words."""
    world: int | None = None
    """As a launcher printed it (:data:`_WORLD`), or the world group's ``initialization
    options`` line."""
    nranks: int | None = None
    """The most ranks an NCCL communicator of the log has (``nranks 8``)."""
    listed: int | None = None
    """The highest rank torchrun's failure table lists."""
    layouts: dict[str, Layout] = field(default_factory=dict)
    latest: float | None = None
    """The latest watchdog line's or exception's time."""
    dated: bool = False
    """A line gave its year (glog stamps do not: theirs is taken from such a line, else this
    year's)."""
    unplaced_lines: int = 0
    """Watchdog lines whose rank the log does not say."""
    unplaced_said: list[str] = field(default_factory=list)
    """What the first of them say, in words."""
    matched: int = 0
    """Lines read that a rank's prefix, the watchdog or torchrun's failure table wrote."""

    def forget(self, rank: int) -> None:
        self.seen.discard(rank)
        for kept in (self.timeouts, self.loose, self.unnamed, self.raised, self.named):
            kept.pop(rank, None)

    def place(self) -> None:
        """Each line that named no group joined to its rank's line that names the same work,
        else to the group other ranks' lines name for the same work; else, alone, in the world
        group; else (several), in groups the log does not name."""
        rest: dict[int, list[Timeout]] = {}
        named: dict[tuple[int | None, str | None], str] = {}
        for rank, loose in self.loose.items():
            placed = self.timeouts.get(rank, {})
            for t in loose:
                same = next((p for p in placed.values() if t.seq is not None and p.seq == t.seq), None)
                if same is None:
                    rest.setdefault(rank, []).append(t)
                    continue
                _merge(same, t)
                named.setdefault((t.seq, t.op), same.group or WORLD_GROUP)
        for rank, loose in rest.items():
            placed = self.timeouts.setdefault(rank, {})
            if placed and all(t.seq is None and t.stuck is None for t in loose):
                continue  # the rank's watchdog fired: its numbered lines say on what
            guessed = {named.get((t.seq, t.op), WORLD_GROUP) for t in loose}
            if len({t.seq for t in loose if t.seq is not None}) > 1 or any(p.seq is not None for p in placed.values()):
                self.unnamed[rank] = loose
            else:
                group = guessed.pop() if len(guessed) == 1 else WORLD_GROUP
                world = group == WORLD_GROUP
                into = placed.setdefault(group, Timeout(group, DEFAULT_PG if world else None, rank if world else None))
                for t in loose:
                    _merge(into, t)
            if not placed:
                del self.timeouts[rank]
        self.loose.clear()

    @property
    def largest_group(self) -> int | None:
        """The most ranks a group has, as its all-gathers' or reduce-scatters' element counts
        say: the world has at least as many."""
        return max((s for ts in self.timeouts.values() for t in ts.values() if (s := t.size())), default=None)

    @property
    def waiting(self) -> set[int]:
        """Ranks the log shows waiting: in a collective, or with their watchdog stuck."""
        return set(self.timeouts) | set(self.unnamed)

    @property
    def timeouts_ms(self) -> list[int]:
        return [t.timeout_ms for ts in self.timeouts.values() for t in ts.values() if t.timeout_ms is not None]

    def last_words(self, rank: int, moment: float) -> ExceptionInfo | None:
        """The exception the rank raised, at its time in the log (at ``moment`` where the log
        gives none: ranks that raised without a stamp count as raising together)."""
        raised = self.raised.get(rank)
        if raised is None:
            return None
        where = raised.frames[-1] if raised.frames else None
        at = raised.at if raised.at is not None else moment
        return ExceptionInfo(raised.type, raised.said, where, raised.frames, at)


def _merge(into: Timeout, loose: Timeout) -> None:
    into.op = into.op or loose.op
    into.ran = into.ran if into.ran is not None else loose.ran
    into.timeout_ms = into.timeout_ms or loose.timeout_ms
    into.numel = into.numel or loose.numel
    into.said_at = into.said_at if into.said_at is not None else loose.said_at
    into.seq = into.seq if into.seq is not None else loose.seq
    into.stuck = into.stuck if into.stuck is not None else loose.stuck
    into.enqueued = max(into.enqueued, loose.enqueued)


@dataclass
class _Reader:
    facts: LogFacts
    year: int
    stamp: float | None = None
    """The last time a line gave: an unstamped traceback's."""
    tracebacks: dict[int, Traceback] = field(default_factory=dict)
    table: Table | None = None
    spawned: int | None = None
    """The process whose traceback ``torch.multiprocessing.spawn`` is printing."""
    nameless: Traceback | None = None
    """A traceback no rank prefixes, nor ``mp.spawn`` names."""
    headers: int = 0
    """Tracebacks of several processes begun in :attr:`nameless`, interleaved line by line."""

    def line(self, line: str) -> None:
        prefix = _RANK.search(line)
        rank = int(prefix.group(1)) if prefix else None
        at = self._time(line)
        if at is not None:
            self.stamp = at
        if rank is not None:
            self.facts.seen.add(rank)
            self.facts.matched += 1
        self._world(line)
        found = said(line)
        if found is not None:
            self._watchdog(found, rank, at)
        elif "initialization options" in line:
            self._layout(line)
        if "monitoredBarrier" in line:
            self._monitored(line)
        body = line[prefix.end() :] if prefix else line
        if rank is not None:
            self._traceback(rank, body)
        elif not self._spawn(body) and not self._table(body):
            self._nameless(body)

    def finish(self) -> None:
        """What the log ended in the middle of: tracebacks cut before their exception line."""
        consequences = any(PEER_LOST.search(r.said) for r in self.facts.raised.values())
        for rank, building in self.tracebacks.items():
            cut = building.cut(self.stamp)
            if cut is not None and not consequences and not _in_a_collective(cut):
                self._raised(rank, cut)
        self.facts.place()

    def _time(self, line: str) -> float | None:
        """The glog stamp ``[E1124 03:12:44.123456789`` (its year that of the log's other
        stamps, else this year's), else a docker or logging stamp at the line's start; read as
        UTC, as only the differences between lines count."""
        iso = ISO.search(line, 0, STAMP_SPAN)
        if iso:
            self.year = int(iso.group(1))
            self.facts.dated = True
        glog = _GLOG.search(line)
        if glog:
            return utc(self.year, *glog.groups())
        return utc(*iso.groups()) if iso else None

    def _world(self, line: str) -> None:
        world = _WORLD.search(line) if any(words in line for words in _WORLD_WORDS) else None
        if world:
            self.facts.world = max(self.facts.world or 0, int(next(g for g in world.groups() if g)))
        nranks = _NRANKS.search(line) if "NCCL INFO" in line else None
        if nranks and int(nranks.group(1)) <= MAX_GROUP:
            self.facts.nranks = max(self.facts.nranks or 0, int(nranks.group(1)))
        listed = _LISTED.match(line) if "local_rank" in line else None
        if listed and int(listed.group(1)) < MAX_GROUP:
            self.facts.listed = max(self.facts.listed or 0, int(listed.group(1)))

    def _watchdog(self, found: Said, rank: int | None, at: float | None) -> None:
        """A watchdog line: the rank from its prefix, else its bare ``[Rank N]`` (old torch,
        no group named), else its rank in the default group."""
        desc = found.desc or (DEFAULT_PG if found.group == WORLD_GROUP else None)
        if rank is None:
            rank = found.bare if found.group is None else found.local if desc == DEFAULT_PG else None
        self.facts.matched += 1
        if rank is None and found.fired:
            return  # names no work, no rank: says nothing of anyone
        if rank is None:
            self.facts.unplaced_lines += 1
            if len(self.facts.unplaced_said) < MAX_UNPLACED:
                self.facts.unplaced_said.append(_unplaced(found))
            return
        self.facts.seen.add(rank)
        if at is not None:
            self.facts.latest = max(self.facts.latest or at, at)
        if found.device_error is not None:
            kind, _, message = found.device_error.partition(": ")
            self._raised(rank, Raised(kind, message, [], at))
            return
        if found.group is None:
            timeout = Timeout(None)
            self.facts.loose.setdefault(rank, []).append(timeout)
        else:
            groups = self.facts.timeouts.setdefault(rank, {})
            timeout = groups.setdefault(found.group, Timeout(found.group))
            found.desc = desc
        timeout.take(found, at)

    def _layout(self, line: str) -> None:
        """A group's size and one member, from the line torch prints as it creates the group
        (with ``TORCH_CPP_LOG_LEVEL=INFO``): even a rank that later says nothing printed it."""
        options = OPTIONS.search(line)
        pg = PG.search(line) if options else None
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

    def _monitored(self, line: str) -> None:
        found = _MONITORED.search(line)
        if found is None:
            return
        ranks = [found.group(1)] if found.group(1) else re.findall(r"\d{1,9}", found.group(2))
        for rank in ranks:
            self.facts.named.setdefault(int(rank), found.group(0))

    def _traceback(self, rank: int, body: str) -> None:
        building = self.tracebacks.get(rank)
        if body.startswith(TRACEBACK) or (building is None and FRAME.match(body)):
            if rank in self.facts.raised:
                return
            building = self.tracebacks[rank] = Traceback()
            if body.startswith(TRACEBACK):
                return
        if building is None:
            return
        raised = building.line(body, self.stamp)
        if raised is not None:
            self._raised(rank, raised)
        if building.done:
            del self.tracebacks[rank]

    def _raised(self, rank: int, raised: Raised) -> None:
        self.facts.seen.add(rank)
        self.facts.raised.setdefault(rank, raised)
        if raised.at is not None:
            self.facts.latest = max(self.facts.latest or raised.at, raised.at)

    def _spawn(self, body: str) -> bool:
        """``mp.spawn``'s ``-- Process N terminated with the following error:``: the traceback
        under it is process N's, its rank on one node."""
        found = _SPAWNED.search(body)
        if found:
            self.spawned = int(found.group(1))
            self.facts.matched += 1
            return True
        if self.spawned is None or not body.strip():
            return False
        self._traceback(self.spawned, body)
        if self.spawned not in self.tracebacks:
            self.spawned = None
        return True

    def _table(self, body: str) -> bool:
        """torchrun's ``ChildFailedError`` table: its root cause, the rank that failed first."""
        if ROOT_CAUSE in body:
            self.table = Table()
            return True
        if self.table is None:
            return False
        self.facts.matched += 1
        if ends_table(body) or self.table.done:
            table, self.table = self.table, None
            if table.rank is not None and table.rank not in self.facts.raised:
                timed_out = table.rank in self.facts.timeouts or table.rank in self.facts.loose
                failure = table.failure(timed_out=timed_out)
                if failure is not None:
                    self._raised(table.rank, failure)
            return True
        self.table.line(body)
        return True

    def _nameless(self, body: str) -> None:
        """A traceback no rank prefixes: its exception kept apart; several processes'
        tracebacks interleaved line by line end in as many exception lines in a row."""
        if body.startswith(TRACEBACK):
            fresh = self.nameless is None or self.nameless.raised is not None
            self.nameless = Traceback() if fresh else self.nameless
            self.headers = 1 if fresh else self.headers + 1
            return
        building = self.nameless
        if building is None:
            return
        if building.raised is not None and self.headers > 1:
            again = Traceback(frames=building.frames).line(body, self.stamp)
            if again is not None:
                self.headers -= 1
                self._unplaced(again)
                return
        raised = building.line(body, self.stamp)
        if raised is not None:
            self._unplaced(raised)
        if building.done:
            self.nameless = None

    def _unplaced(self, raised: Raised) -> None:
        if len(self.facts.unplaced) < MAX_UNPLACED:
            self.facts.unplaced.append(raised)


def _unplaced(found: Said) -> str:
    """``rank 5 of group 3: _all_gather_base #9141`` (its global rank not in the line)."""
    who = f"rank {found.local} of group {found.group}" if found.group is not None else "a rank"
    what = found.device_error or " ".join(
        p for p in (found.op, f"#{found.seq}" if found.seq is not None else None) if p
    )
    return f"{who}: {what or 'its watchdog fired'}"


def _in_a_collective(raised: Raised) -> bool:
    """Its innermost frames are torch's collective calls: the rank raised while waiting."""
    return any(part in f.file for f in raised.frames[-3:] for part in _DISTRIBUTED)


def read_log(stream: IO[str] | Iterable[str], facts: LogFacts | None = None, year: int | None = None) -> LogFacts:
    """What the ranks said in one log (any size: read line by line)."""
    facts = facts or LogFacts()
    reader = _Reader(facts, year or time.gmtime().tm_year)
    for line in lines_as_written(stream):
        reader.line(line)
    reader.finish()
    return facts
