"""PyTorch's own desync report (``TORCH_NCCL_DESYNC_DEBUG=1``, or ``TORCH_DISTRIBUTED_DEBUG``
at INFO and above in torch 1.11-1.13), which a rank's watchdog prints on a timeout after reading
every rank's last collective from the store (``retrieveDesyncReport`` in c10d's TraceUtils.h)::

    - [0] Timeout at collective: ALLREDUCE, #315
    - To our best knowledge, ranks [2, 3] are the lagging ranks that caused this timeout. They
      never joined any collectives
    - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:
      - [1] joined but didn't finish collective #11 (count from 1)
        [7] finished collective #182, but didn't join collective #183 (count from 1)
    - Snapshot of ranks' latest states:
      #182 finished ranks:
        [7] finished ALLREDUCE
      #315 started ranks:
        [0, 1, 2] started ALLREDUCE

Torch lists the ranks at the lowest collective number any rank reached: those that never
joined one, those that finished it and never started the next (they stopped in their own code),
or those inside it. The last are at fault only where other ranks went further, or where they
started another op than their peers at that number; where every rank started the same op at
the same number, every rank issued it and none holds it up. The ranks are the process group's
own, as its ``[k]`` says: a rank's place in the group the report is of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.watchdog import PG, pg_prefix
from distmon.guards.text import visible

MAX_LISTED = 1 << 17
"""Ranks one line of the report may list: more is no real job's."""
MAX_PIECES = 64
"""Lines of a report one line of the log may hold."""
MAX_REPORTS = 64
"""Reports kept from one log (each rank prints its own, of the same timeout)."""
MAX_NUMBERS = 64
"""Collective numbers a report's snapshot lists ranks at; ops at each, too."""

_TIMEOUT = re.compile(r"- \[(\d{1,9})\] Timeout at collective: (\w{1,40}), #(\d{1,18})")
_MISSING = re.compile(r"ranks \[([\d, ]{1,2000000})\] are the lagging ranks that caused this timeout")
_JOINED = re.compile(r"\[([\d, ]{1,2000000})\] joined but didn't finish collective #(\d{1,18})")
_STOPPED = re.compile(r"\[([\d, ]{1,2000000})\] finished collective #(\d{1,18}), but didn't join collective")
_SNAPSHOT = re.compile(r"^\s*#(\d{1,18}) (started|finished) ranks:\s*$")
_WORDS = ("lagging", "collective #", "ranks:", "] started ", "] finished ")
"""Words of a line that may carry on a report."""
_STATE = re.compile(r"^\s*\[([\d, ]{1,2000000})\] (started|finished) (\w{1,40})\s*$")


@dataclass
class DesyncReport:
    """One rank's desync report; the ranks are the group's."""

    reporter: int
    op: str
    seq: int
    prefix: int | None = None
    """The global rank whose line began it, where torchrun's prefix says."""
    world: bool | None = None
    """The group's own prefix on its first line (``[PG ID 2 PG GUID 5(tp) Rank 0]``) says it is the
    world's, or another's; None where the line has none."""
    missing: list[int] = field(default_factory=list)
    """Never joined any collective."""
    joined: list[int] = field(default_factory=list)
    """Joined the lowest collective any rank reached and did not finish it."""
    stopped: list[int] = field(default_factory=list)
    """Finished the lowest collective and never started the next."""
    lag: int | None = None
    """That lowest collective's number."""
    started: dict[int, dict[str, set[int]]] = field(default_factory=dict)
    """The snapshot: at each number, the ranks that started each op (and did not finish it)."""
    numbers: set[int] = field(default_factory=set)
    """The collective numbers the snapshot lists ranks at."""
    snapshot: int | None = None
    """The number whose ranks the snapshot lines now list."""

    @property
    def of_world(self) -> bool:
        """Its ranks are global: the world group's report (the group's prefix says so; else its
        reporter's place in the group is the global rank its line carries, or no line says otherwise)."""
        if self.world is not None:
            return self.world
        return self.prefix is None or self.prefix == self.reporter

    def listed(self) -> set[int]:
        """Every rank the report lists."""
        started = {r for ops in self.started.values() for ranks in ops.values() for r in ranks}
        return {self.reporter, *self.missing, *self.joined, *self.stopped, *started}

    def culprits(self) -> tuple[list[int], str] | None:
        """The ranks the report shows holding the others up, with why; None where it shows none."""
        if self.missing:
            return self.missing, "never joined a collective (torch's desync report)"
        if self.stopped and not self.two_alone:
            return self.stopped, (
                f"finished collective #{self.lag} and never started #{(self.lag or 0) + 1}, which its peers went "
                "on to (torch's desync report)"
            )
        later = [seq for seq in self.numbers if self.lag is not None and seq > self.lag]
        if self.joined and later:
            return self.joined, f"still inside collective #{self.lag}, while its peers went on to #{min(later)}"
        ops = self.started.get(self.lag, {}) if self.lag is not None else {}
        if len(ops) > 1:
            fewest = min(ops.items(), key=lambda item: (len(item[1]), item[0]))
            others = sorted(op for op in ops if op != fewest[0])
            return sorted(fewest[1]), (
                f"started {visible(fewest[0], 40)} as collective #{self.lag} where its peers started "
                f"{', '.join(visible(op, 40) for op in others)} (torch's desync report)"
            )
        return None

    @property
    def two_alone(self) -> bool:
        """A rank stopped short of the next collective, which one peer alone went on to: one against one, the
        report cannot say which is odd (the one stopped in its own code, or the peer issuing a collective only
        it calls, under ``if rank == 0``)."""
        return bool(self.stopped) and len(self.listed()) == 2

    def at_odds(self) -> list[tuple[int, str]]:
        """Where the report is :attr:`two_alone`: both ranks, the one stopped first (the report's lagging rank),
        with why."""
        if not self.two_alone:
            return []
        [peer] = self.listed() - set(self.stopped)
        then = (self.lag or 0) + 1
        return [
            (
                self.stopped[0],
                f"finished collective #{self.lag} and never started #{then}, which its one peer went on "
                "to (torch's desync report): stopped in its own code, or never meant to call it",
            ),
            (
                peer,
                f"went on alone to collective #{then}, which its one peer never started (torch's desync report): "
                "a collective only it calls (under if rank == 0) is one the other never joins",
            ),
        ]

    def everyone_joined(self) -> str | None:
        """Where every rank the report lists started the same collective and none finished it."""
        if self.missing or self.stopped or self.lag is None or self.numbers != {self.lag}:
            return None
        ops = self.started.get(self.lag, {})  # the snapshot cut after its number: no ranks under it
        if len(ops) != 1:
            return None
        [op] = ops
        return (
            f"torch's desync report: every rank joined collective #{self.lag} ({visible(op, 40)}) and none finished it"
        )


@dataclass
class DesyncLines:
    """Reads desync reports line by line; a line of a report that has begun adds to it."""

    reports: list[DesyncReport] = field(default_factory=list)
    taking: bool = True
    """The last report begun is kept (beyond :data:`MAX_REPORTS`, its lines are no kept one's)."""

    def line(self, body: str, rank: int | None) -> DesyncReport | None:
        """The report ``body`` begins or adds to, if it is one of a report's lines (``rank``:
        the global rank its line carries, if any); a report an exception's text holds on one
        line (``\\n\\t - ...``) is read piece by piece."""
        if "\\n" in body and "Timeout at collective:" in body:
            pieces = body.replace("\\t", " ").split("\\n")[:MAX_PIECES]
            found = [self._line(piece, rank) for piece in pieces]
            return next((report for report in reversed(found) if report is not None), None)
        return self._line(body, rank)

    def _line(self, body: str, rank: int | None) -> DesyncReport | None:
        if "Timeout at collective:" in body and (begun := _TIMEOUT.search(body)):
            self.taking = len(self.reports) < MAX_REPORTS
            if not self.taking:
                return None
            report = DesyncReport(int(begun.group(1)), visible(begun.group(2), 40), int(begun.group(3)), rank)
            if (group := PG.search(body)) is not None:
                name, desc, _ = pg_prefix(group)
                report.world = desc == "default_pg" if desc else name == "0"
            self.reports.append(report)
            return report
        if not self.reports or not self.taking or not any(word in body for word in _WORDS):
            return None
        last = self.reports[-1]
        return last if _add(last, body) else None


def _add(report: DesyncReport, body: str) -> bool:
    if (missing := _MISSING.search(body)) is not None:
        report.missing = ranks(missing.group(1))
    elif (stopped := _STOPPED.search(body)) is not None:
        report.stopped, report.lag = ranks(stopped.group(1)), int(stopped.group(2))
    elif (joined := _JOINED.search(body)) is not None:
        report.joined, report.lag = ranks(joined.group(1)), int(joined.group(2))
    elif (snapshot := _SNAPSHOT.match(body)) is not None:
        number = int(snapshot.group(1))
        if number in report.numbers or len(report.numbers) < MAX_NUMBERS:
            report.numbers.add(number)
            report.snapshot = number if snapshot.group(2) == "started" else None
        else:
            report.snapshot = None
    elif (state := _STATE.match(body)) is not None:
        if state.group(2) == "started" and report.snapshot is not None:
            at = report.started.setdefault(report.snapshot, {})
            op = visible(state.group(3), 40)
            if op in at or len(at) < MAX_NUMBERS:
                held = at.setdefault(op, set())
                held.update(ranks(state.group(1))[: MAX_LISTED - len(held)])
    else:
        return False
    return True


def ranks(listed: str) -> list[int]:
    """``0, 1, 2`` as ranks, within :data:`MAX_LISTED`."""
    return [int(r) for r in re.findall(r"\d{1,9}", listed)[:MAX_LISTED]]
