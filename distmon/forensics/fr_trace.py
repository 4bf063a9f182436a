"""What Flight Recorder's analyzer (``torch.distributed.flight_recorder``'s ``fr_trace``, torch 2.5+)
prints of a collective that not every rank of its group joined, having read every rank's dump::

    Not all ranks joining collective: sequence number: 31117    (", sequence number"; 2.5: "collective 3 at entry 2")
    internal record id: 31116
    group info: 0:default_pg
    collective: nccl:all_reduce
    missing ranks: {3, 4, 5, 6, 7}

The missing ranks' dumps hold no entry of it: they never issued it, while the others did and wait
in it. Their numbers are ranks of the group the report names: the job's only for the world group
(``default_pg``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.desync import ranks
from distmon.guards.text import visible

MAX_REPORTS = 64
"""Collectives kept from one log: the analyzer reports each collective that went wrong."""
WORLD = "default_pg"

_BEGUN = re.compile(
    r"Not all ranks joining collective(?:[:,] sequence number: (\d{1,18})| (\d{1,18}) at entry \d{1,18})"
)
_HEADER = re.compile(r"sequence number|at entry \d|has errors")
"""The start of another of the analyzer's reports (of a collective's errors, not its joining)."""
_GROUP = re.compile(r"^\s*group info: (\d{1,9}):(\S{1,200})")
_OP = re.compile(r"^\s*collective: (?:\w{1,20}:)?(\w{1,60})")
_RANKS = re.compile(r"^\s*(missing|expected) ranks: \{([\d, ]{1,2000000})\}")


@dataclass
class Unjoined:
    """A collective the analyzer found not every rank of its group joined."""

    seq: int
    group: str | None = None
    op: str | None = None
    missing: list[int] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)
    """The group's ranks."""

    def listed(self) -> list[int]:
        """The job's ranks it names (the world group's), where it names them."""
        return [*self.missing, *self.expected] if self.group == WORLD else []

    def culprits(self) -> tuple[list[int], str] | None:
        """The ranks that never issued it, with why, where they are the job's (the world group's)."""
        if not self.missing or self.group != WORLD:
            return None
        op = f" ({visible(self.op, 60)})" if self.op else ""
        return self.missing, (
            f"never issued collective #{self.seq}{op}, which the others did (Flight Recorder's dumps, as its "
            "analyzer fr_trace read them)"
        )


@dataclass
class FrTraceLines:
    """Reads the analyzer's reports line by line; a line of a report that has begun adds to it."""

    reports: list[Unjoined] = field(default_factory=list)
    open: bool = False
    """The last report begun is still being read (another report's start ends it)."""

    def line(self, body: str) -> bool:
        if "Not all ranks joining" in body and (begun := _BEGUN.search(body)) is not None:
            self.open = len(self.reports) < MAX_REPORTS
            if self.open:
                self.reports.append(Unjoined(int(begun.group(1) or begun.group(2))))
            return True
        if self.open and _HEADER.search(body) is not None:
            self.open = False
        if not self.open or not any(word in body for word in ("group info:", "collective:", "ranks:")):
            return False
        last = self.reports[-1]
        if (group := _GROUP.match(body)) is not None:
            last.group = last.group or visible(group.group(2), 200)
        elif (op := _OP.match(body)) is not None:
            last.op = op.group(1)
        elif (listed := _RANKS.match(body)) is not None:
            setattr(last, listed.group(1), ranks(listed.group(2)))
        else:
            return False
        return True

    def first(self) -> tuple[list[int], str] | None:
        """The ranks the earliest collective found not joined names, with why (the analyzer reports
        every collective after it that the same ranks never issued too); none where a subgroup's
        collective too was not joined by all: a rank missing from the world's may be waiting in it."""
        if any(report.missing and report.group != WORLD for report in self.reports):
            return None
        found = [report for report in self.reports if report.culprits() is not None]
        return min(found, key=lambda report: report.seq).culprits() if found else None
