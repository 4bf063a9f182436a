"""What Flight Recorder's analyzer (``torch.distributed.flight_recorder``'s ``fr_trace``, torch 2.5+;
torchcomms' too) prints of a collective that not every rank of its group joined, having read every
rank's dump::

    Not all ranks joining collective: sequence number: 31117    (", sequence number"; 2.5: "collective 3 at entry 2")
    internal record id: 31116
    group info: 0:default_pg                                     (torchcomms: "main_comm:gloo", or none)
    collective: nccl:all_reduce
    missing ranks: {3, 4, 5, 6, 7}
    expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}                     (some eras: their count)

    Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce  Missing ranks are {1}
                                                                 (its first era, one line)

The missing ranks' dumps hold no entry of it: they never issued it, while the others did and wait
in it. Its ranks are the job's in every group (the analyzer reads each group's members as global
ranks from the dumps), so a rank missing from one collective may be waiting in another the report
names: only a rank that joined none of them never came.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.desync import ranks
from distmon.guards.text import visible

MAX_REPORTS = 64
"""Collectives kept from one log: the analyzer reports each collective that went wrong."""

_BEGUN = re.compile(
    r"Not all ranks joining collective(?:[:,] sequence number: (\d{1,18})| (\d{1,18}) at entry \d{1,18}"
    r"| for group (\S{1,200}) collective (?:\w{1,20}:)?(\w{1,60}).{0,40}?Missing ranks are \{([\d, ]{1,2000000})\})"
)
_HEADER = re.compile(r"sequence number|at entry \d|has errors")
"""The start of another of the analyzer's reports (of a collective's errors, not its joining)."""
_GROUP = re.compile(r"^\s*group info: (\S{1,200})")
_OP = re.compile(r"^\s*collective: (?:\w{1,20}:)?(\w{1,60})")
_RANKS = re.compile(r"^\s*(missing|expected) ranks: \{([\d, ]{1,2000000})\}")


@dataclass
class Unjoined:
    """A collective the analyzer found not every rank of its group joined."""

    seq: int | None
    """Its sequence number in its group (the first era's report gives none)."""
    group: str | None = None
    """The group's name and description (``0:default_pg``), where the report gives them."""
    op: str | None = None
    missing: list[int] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)
    """The group's ranks."""

    def joined(self) -> set[int]:
        """The ranks that issued it and wait in it."""
        return set(self.expected) - set(self.missing)

    def said(self) -> str:
        seq = f" #{self.seq}" if self.seq is not None else ""
        op = f" ({visible(self.op, 60)})" if self.op else ""
        group = f" of group {visible(self.group, 200)}" if self.group else ""
        return f"collective{seq}{op}{group}"


@dataclass
class FrTraceLines:
    """Reads the analyzer's reports line by line; a line of a report that has begun adds to it."""

    reports: list[Unjoined] = field(default_factory=list)
    open: bool = False
    """The last report begun is still being read (another report's start ends it)."""

    def line(self, body: str) -> bool:
        if "Not all ranks joining" in body and (begun := _BEGUN.search(body)) is not None:
            seq, entry, group, op, missing = begun.groups()
            self.open = len(self.reports) < MAX_REPORTS and missing is None
            if len(self.reports) < MAX_REPORTS:
                found = Unjoined(int(seq or entry) if seq or entry else None, group and visible(group, 200), op)
                found.missing = ranks(missing) if missing else []
                self.reports.append(found)
            return True
        if self.open and _HEADER.search(body) is not None:
            self.open = False
        if not self.open or not any(word in body for word in ("group info:", "collective:", "ranks:")):
            return False
        last = self.reports[-1]
        if (group := _GROUP.match(body)) is not None:
            last.group = last.group or group.group(1)
        elif (op := _OP.match(body)) is not None:
            last.op = op.group(1)
        elif (listed := _RANKS.match(body)) is not None:
            setattr(last, listed.group(1), ranks(listed.group(2)))
        else:
            return False
        return True

    def listed(self) -> set[int]:
        """The job's ranks the reports name."""
        return {rank for report in self.reports for rank in (*report.missing, *report.expected)}

    def first(self) -> tuple[list[int], str] | None:
        """The ranks that never issued a collective the others wait in, with why: missing from one,
        joined in none (a rank missing from one collective and waiting in another waits for that
        one's missing ranks; where every missing rank waits in another, the ranks took the
        collectives in different orders, and none is the first)."""
        waiting = set().union(*(report.joined() for report in self.reports))
        named = [report for report in self.reports if set(report.missing) - waiting]
        if not named:
            return None
        culprits = sorted(set().union(*(set(report.missing) for report in named)) - waiting)
        return culprits, (
            f"never issued {named[0].said()}, which the others did (Flight Recorder's dumps, as its analyzer "
            "fr_trace read them)"
        )
