"""NCCL's RAS client's report (``ncclras``, NCCL 2.24+), where a communicator's ranks have
launched different numbers of operations (``client_support.cc``: the counts most frequent first,
the ranks of a count listed where they are few)::

    #0-0 (fa93daea854b060b) MISMATCH
      Communicator ranks have different AllGather operation counts
      30 ranks have launched up to operation 640
      2 ranks have launched up to operation 641
      Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124
      Rank 13 -- GPU 5 managed by process 323033 on node 10.137.190.124
      Rank 7 has launched up to operation 60 -- GPU 3 managed by process 1650386 on node node1

The ranks that launched the fewest are behind: the others wait in the operations those never
launched. Where those ranks are the many and RAS lists only the few ahead, they are the
communicator's other ranks. One report is a moment: NCCL's launches outpace RAS's query, so a
rank one operation behind may be catching up; a rank that stays behind across reports is stuck.
The ranks are the communicator's own, the job's where the communicator spans every process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_COMMUNICATORS = 64
"""Communicators kept from one report."""
MAX_RANKS = 1 << 17
"""Ranks of one communicator read."""
MAX_COUNTS = 64
"""Distinct operation counts kept of one communicator."""

_SUMMARY = re.compile(r"^\(total\)\s+per node\s+per process\s+\(total\)\s+\(total\)$")
_SIZES = re.compile(r"^(\d{1,7})\s+(\d{1,7})\s+(\d{1,7})\s+(\d{1,7})\s+(\d{1,7})$")
"""The job summary's figures: nodes, processes per node, GPUs per process, processes, GPUs."""
_BLOCK = re.compile(r"^#\d{1,6}-\d{1,6} \(([0-9a-f]{1,16})\) MISMATCH")
_OPS = re.compile(r"^Communicator ranks have different (\w{1,40}) operation counts")
_COUNT = re.compile(r"^(\d{1,7}) ranks have (?:launched up to operation (\d{1,20})|not launched any operations)")
_RANK = re.compile(r"^Rank (\d{1,7})(?: has (?:launched up to operation (\d{1,20})|not launched any operations))? -- ")
"""A rank of a count, with the process RAS found it in (``-- GPU 4 managed by process ...``) or not."""


@dataclass
class OperationCounts:
    """One communicator's operation counts: how many ranks launched up to each, and the ranks RAS
    lists of a count."""

    hash: str = ""
    """The communicator's hash, as NCCL's own lines give it too: the same communicator in two reports."""
    ops: str = "collective"
    counts: dict[int, int] = field(default_factory=dict)
    """Operations launched -> ranks that launched that many."""
    listed: dict[int, set[int]] = field(default_factory=dict)
    """Operations launched -> the ranks RAS lists with that count."""
    last: int | None = None
    """The count the last count line gave: the rank lines after it have it."""

    def behind(self) -> tuple[list[int], int, int] | None:
        """The ranks that launched the fewest, how many they launched and how many the most did,
        where RAS's lists say who they are."""
        if len(self.counts) < 2:
            return None
        low, high = min(self.counts), max(self.counts)
        size = sum(self.counts.values())
        if len(self.listed.get(low, ())) == self.counts[low]:
            return sorted(self.listed[low]), low, high
        others = {r for count, ranks in self.listed.items() if count != low for r in ranks}
        if size > MAX_RANKS or sum(self.counts[c] for c in self.counts if c != low) != len(others):
            return None
        return sorted(set(range(size)) - others), low, high


@dataclass
class RasReport:
    """The mismatches of NCCL's RAS report, per communicator."""

    mismatches: list[OperationCounts] = field(default_factory=list)
    reading: bool = False
    processes: int | None = None
    """The job's processes, as the report's summary counts them: a communicator of them all numbers
    its ranks as the job does."""
    summary: bool = False
    """The line after the summary's headings: its figures."""

    def line(self, body: str) -> bool:
        """Reads ``body`` if it is a line of a mismatch RAS reports."""
        text = body.strip()
        if self.summary and (sizes := _SIZES.match(text)) is not None:
            self.processes, self.summary = int(sizes.group(4)), False
            return True
        if "per process" in text and _SUMMARY.match(text):
            self.summary = True
            return True
        if "MISMATCH" in text and (block := _BLOCK.match(text)) is not None:
            self.reading = len(self.mismatches) < MAX_COMMUNICATORS
            if self.reading:
                self.mismatches.append(OperationCounts(block.group(1)))
            return True
        if not self.reading or not self.mismatches:
            return False
        if not text:
            return False  # a blank line between a block's sections: the block goes on
        current = self.mismatches[-1]
        if (ops := _OPS.match(text)) is not None:
            current.ops = ops.group(1)
        elif (count := _COUNT.match(text)) is not None:
            current.last = int(count.group(2) or 0)
            if len(current.counts) < MAX_COUNTS:
                current.counts[current.last] = int(count.group(1))
        elif (rank := _RANK.match(text)) is not None:
            alone = rank.group(2) is not None or " has not launched" in text  # a count of one rank: its own line
            launched = int(rank.group(2) or 0) if alone else current.last
            if launched is None:
                return False
            if alone and launched not in current.counts and len(current.counts) >= MAX_COUNTS:
                return True
            if alone:
                current.counts[launched] = current.counts.get(launched, 0) + 1
            ranks = current.listed.setdefault(launched, set())
            if len(ranks) < MAX_RANKS:
                ranks.add(int(rank.group(1)))
        else:
            self.reading = False
            return False
        return True

    @property
    def largest(self) -> int:
        """The job's processes, as the report's summary counts them, or the most ranks a communicator
        of the report has."""
        return max([self.processes or 0, *(sum(m.counts.values()) for m in self.mismatches)])

    def suspected(self, world: int) -> list[tuple[int, str]]:
        """The ranks behind in each communicator's last report, where RAS's lists say who they are,
        of a communicator of the job's every process (the summary's count, or the world: another's
        ranks are its own, not the job's), and not where an earlier report of it had them further
        behind (they moved on: a job working, RAS sampling it)."""
        found: list[tuple[int, str]] = []
        last = {m.hash: m for m in self.mismatches}
        for mismatch in last.values():
            behind = mismatch.behind()
            size = sum(mismatch.counts.values())
            if behind is None or size != (self.processes or world or size):
                continue
            ranks, low, high = behind
            earlier = [min(m.counts) for m in self.mismatches if m.hash == mismatch.hash and m is not mismatch]
            if any(count < low for count in earlier):
                continue
            again = (
                "still there in an earlier report: stuck, or running far behind"
                if earlier
                else "still running behind, or stuck; a second report says which (`ncclras` again: its count moves, "
                "or not)"
            )
            why = (
                f"behind in the communicator's {mismatch.ops} operations, as NCCL's RAS reports (launched up to "
                f"#{low} where others launched up to #{high}): {again}"
            )
            found += [(r, why) for r in ranks if not world or r < world]
        return found
