"""What Flight Recorder's analyzer (``torch.distributed.flight_recorder``'s ``fr_trace``, torch 2.5+;
torchcomms' too) prints of a collective that not every rank of its group joined, or that the ranks
issued differently, having read every rank's dump::

    Not all ranks joining collective: sequence number: 31117    (", sequence number"; 2.5: "collective 3 at entry 2")
    internal record id: 31116
    group info: 0:default_pg                                     (torchcomms: "main_comm:gloo", or none)
    collective: nccl:all_reduce
    missing ranks: {3, 4, 5, 6, 7}
    expected ranks: {0, 1, 2, 3, 4, 5, 6, 7}                     (some eras: their count; "world size: 8")

    Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce  Missing ranks are {1}
        [[3, 4]] [[3, 4]] 2 scheduled                            (its first era: one line, the count after sizes)

    Collective sequence number: 7 has errors                     (2.5: "Collective 7 at entry 6 errors")
    error msg: Culprit rank 3; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1024]]' does not
        match found input sizes: '[[512]]'

The missing ranks' dumps hold no entry of it: they never issued it, while the others did and wait
in it. Its ranks are the job's in every group (the analyzer reads each group's members as global
ranks from the dumps), so a rank missing from one collective may be waiting in another the reports
name, or that its own watchdog line shows: only a rank that waits in none never came. Where every
rank missing from one waits in another, the ranks issued the collectives in different orders: the
program's order, not a rank. A report of errors compares each rank's entry with the first rank's:
its "culprits" are the ranks that differ from that one, so the side fewer ranks stand on is the odd
one, whichever it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.desync import ranks
from distmon.guards.text import visible
from distmon.monitor.state.words import rank_word

MAX_REPORTS = 64
"""Collectives kept from one log: the analyzer reports each collective that went wrong."""

_BEGUN = re.compile(
    r"Not all ranks joining collective(?:[:,] sequence number: (\d{1,18})| (\d{1,18}) at entry \d{1,18}"
    r"| for group (\S{1,200}) collective (?:\w{1,20}:)?(\w{1,60}).{0,40}?Missing ranks are \{([\d, ]{1,2000000})\}"
    r"(?:.{0,400}?\]\] (\d{1,9}) [a-z]{1,20})?)"
)
_ERRORS = re.compile(r"Collective (?:sequence number: )?(\d{1,18}) (?:has errors|at entry \d{1,18} errors)")
_HEADER = re.compile(r"sequence number|at entry \d|has errors")
"""The start of another of the analyzer's reports."""
_GROUP = re.compile(r"^\s*group info: (\S{1,200})")
_OP = re.compile(r"^\s*collective: (?:\w{1,20}:)?(\w{1,60})")
_RANKS = re.compile(r"^\s*(missing|expected) ranks: \{([\d, ]{1,2000000})\}")
_COUNT = re.compile(r"^\s*(?:expected ranks|world size): (\d{1,9})\s*$")
_CULPRIT = re.compile(r"Culprit rank (\d{1,9}); (?:Error type: )?(\w{1,60})")


@dataclass
class AnalyzerReport:
    """A collective the analyzer found not joined by every rank of its group, or issued differently."""

    seq: int | None
    """Its sequence number in its group (the first era's report gives none)."""
    group: str | None = None
    """The group's name and description (``0:default_pg``), where the report gives them."""
    op: str | None = None
    missing: list[int] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)
    """The group's ranks, where the report lists them."""
    size: int | None = None
    """The group's size, where the report counts its ranks."""
    differ: dict[int, str] = field(default_factory=dict)
    """Ranks whose entry differs from the first rank's, and how (a report of errors)."""

    def joined(self) -> set[int]:
        """The ranks that issued it and wait in it."""
        return set(self.expected) - set(self.missing)

    def said(self) -> str:
        seq = f" #{self.seq}" if self.seq is not None else ""
        op = f" ({visible(self.op, 60)})" if self.op else ""
        group = f" of group {visible(self.group, 200)}" if self.group else ""
        return f"collective{seq}{op}{group}"

    def odd(self) -> tuple[list[int], str] | None:
        """The ranks on the side fewer ranks stand on, where a report of errors lists its group: the
        ranks it names, else the others (the first rank's side)."""
        if not self.differ or not self.expected:
            return None
        named = sorted(self.differ)
        rest = sorted(set(self.expected) - set(named))
        how = ", ".join(sorted(set(self.differ.values())))
        if len(named) == len(rest):
            return None
        odd, others = (named, rest) if len(named) < len(rest) else (rest, named)
        return odd, (
            f"issued {self.said()} otherwise than {rank_word(others)} ({how}, as Flight Recorder's analyzer "
            "fr_trace compared them)"
        )


@dataclass
class AnalyzerFindings:
    """What the analyzer's reports prove, point to, or clear."""

    proven: list[tuple[list[int], str]] = field(default_factory=list)
    suspected: list[tuple[int, str]] = field(default_factory=list)
    nobody: str | None = None


@dataclass
class FrTraceLines:
    """Reads the analyzer's reports line by line; a line of a report that has begun adds to it."""

    reports: list[AnalyzerReport] = field(default_factory=list)
    open: bool = False
    """The last report begun is still being read (another report's start ends it)."""

    def line(self, body: str) -> bool:
        if "Not all ranks joining" in body and (begun := _BEGUN.search(body)) is not None:
            seq, entry, group, op, missing, size = begun.groups()
            number = seq or entry
            return self._begin(
                AnalyzerReport(int(number) if number else None, group and visible(group, 200), op),
                ranks(missing) if missing else None,
                int(size) if size else None,
            )
        if "errors" in body and (errors := _ERRORS.search(body)) is not None:
            return self._begin(AnalyzerReport(int(errors.group(1))), None, None)
        if self.open and _HEADER.search(body) is not None:
            self.open = False
        if not self.open or not any(word in body for word in ("group info:", "collective:", "ranks:", "size:", "msg:")):
            return False
        return self._detail(self.reports[-1], body)

    def _begin(self, report: AnalyzerReport, missing: list[int] | None, size: int | None) -> bool:
        """A report begun; the first era's, whole in its one line, is not open to the next."""
        self.open = len(self.reports) < MAX_REPORTS and missing is None
        if len(self.reports) < MAX_REPORTS:
            report.missing, report.size = missing or [], size
            self.reports.append(report)
        return True

    def _detail(self, report: AnalyzerReport, body: str) -> bool:
        if (group := _GROUP.match(body)) is not None:
            report.group = report.group or group.group(1)
        elif (op := _OP.match(body)) is not None:
            report.op = op.group(1)
        elif (listed := _RANKS.match(body)) is not None:
            setattr(report, listed.group(1), ranks(listed.group(2)))
        elif (count := _COUNT.match(body)) is not None:
            report.size = int(count.group(1))
        elif "Culprit rank" in body:
            for rank, how in _CULPRIT.findall(body)[:MAX_REPORTS]:
                report.differ.setdefault(int(rank), how)
        else:
            return False
        return True

    def joined(self, rank: int) -> AnalyzerReport | None:
        """The first reported collective ``rank`` issued and waits in."""
        return next((report for report in self.reports if rank in report.joined()), None)

    def listed(self) -> set[int]:
        """The job's ranks the reports name."""
        named = {rank for report in self.reports for rank in (*report.missing, *report.expected, *report.differ)}
        sized = max((report.size for report in self.reports if report.size), default=0)
        return named | ({sized - 1} if sized else set())

    def judged(self, waiting: set[int]) -> AnalyzerFindings:
        """The ranks that never issued a collective the others wait in: missing from one, waiting in
        none of the reported collectives nor where their own lines (``waiting``) show them. Proven where
        each report lists its group's ranks, or one report alone names them; else suspected. Where
        every missing rank waits in another, the ranks issued the collectives in different orders."""
        found = AnalyzerFindings()
        unjoined = [report for report in self.reports if report.missing]
        waits = waiting.union(*(report.joined() for report in unjoined))
        idle = [(report, sorted(set(report.missing) - waits)) for report in unjoined]
        idle = [(report, never) for report, never in idle if never]
        known = all(report.expected for report in unjoined) or len(unjoined) == 1
        named: set[int] = set()
        for report, never in idle:
            first = [rank for rank in never if rank not in named]
            if not first:
                continue
            named.update(first)
            why = f"never issued {report.said()}, which the others did (Flight Recorder's analyzer fr_trace)"
            if known:
                found.proven.append((first, why))
            else:  # a rank missing here may wait in another collective whose members the report only counts
                found.suspected += [
                    (rank, f"{why}; whether it waits in another, the report does not say") for rank in first
                ]
        if unjoined and not idle and all(report.expected for report in unjoined):
            said = "; ".join(f"{rank_word(report.missing)} missing from {report.said()}" for report in unjoined[:4])
            found.nobody = (
                f"the ranks issued collectives in different orders, each waiting in one another never issued ({said}, "
                "as Flight Recorder's analyzer fr_trace read the dumps): the program's order of collectives, not a rank"
            )
        for report in self.reports:
            odd = report.odd()
            if odd is not None and not named:
                found.suspected += [(rank, odd[1]) for rank in odd[0]]
        return found
