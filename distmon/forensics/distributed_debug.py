"""What ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` makes torch check and print: every collective's
fingerprint compared across the ranks before it runs (``ProcessGroupWrapper``), and the
monitored barrier's ranks that never answered.

The fingerprint check: each rank gathers every rank's fingerprint, walks them in rank order and
raises at the first that differs from its own (``CollectiveFingerPrint::verify``)::

    RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective:
        CollectiveFingerPrint(SequenceNumber=101, OpType=ALLGATHER, TensorShape=[1], ...), but
        Rank 7 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE).
    (torch 1.10-1.12: "Rank 0 is running inconsistent collective: CollectiveFingerPrint(...)")

so rank 1's message proves that ranks 0 and 2-6 ran what rank 1 ran, and rank 7 did not: the
rank that ran another collective than the others is the odd one. Where the message leaves only
two ranks that disagree (rank 1 naming rank 0), it does not say which of them is.

The monitored barrier (``dist.monitored_barrier``): rank 0 waits for every other rank, then answers
each; it names those that never came (``Rank 1 failed to pass monitoredBarrier``). A rank that came
and got no answer says ``... waiting for send/recv from rank 0. Please check rank 0 logs for faulty
rank``: rank 0 never answered, held up itself or waiting for a rank its own report names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.nccl import MAX_GROUP
from distmon.guards.text import visible
from distmon.monitor.state.words import rank_word

MISMATCH = "Detected mismatch between collectives"
"""What a rank raises when the fingerprint check fails: a report of the others, no fault of its own."""
MAX_INFERRED = 4096
"""Ranks a message is read to prove ran its reporter's collective (those checked before the one
it names): beyond, the message is read for the two ranks it names only."""
MAX_RANKS = MAX_GROUP
"""Ranks a message may name: more is no real job's."""

_RUNNING = re.compile(r"Rank (\d{1,9}) is running (inconsistent )?collective: ")
_BUT = re.compile(r", but Rank (\d{1,9}) is running collective: ")
_WRAPPED = re.compile(r"\[Rank (\d{1,9})\] Running collective: (CollectiveFingerPrint\(.{0,400})")
"""``ProcessGroupWrapper``'s line as each rank starts a collective (DETAIL, logged at INFO)."""
_SEQ = re.compile(r"SequenceNumber=(\d{1,18})(?=[,)O])")
_OP = re.compile(r"OpType=(\w{1,40})(?=[,)])")
"""A number and an op read whole: followed by the next field (or glued to it) or the fingerprint's end, not cut
with the paste's end."""
_SHAPE = re.compile(r"TensorShape=\[([\d, ]{0,200})\]")
_MONITORED = re.compile(
    r"waiting for send/recv from rank (\d{1,9})|Ranks? ([\d, ]{1,200}) failed to pass monitoredBarrier"
)
_REPORTER = re.compile(
    r"\[Rank (\d{1,9})\]: Ranks? [\d, ]{1,200} failed|Rank (\d{1,9}) successfully reached monitoredBarrier"
)
"""The reporter's rank in the barrier's group: rank 0's ``[Rank 0]: Rank 3 failed ...``, a rank that came's
``Rank 1 successfully reached monitoredBarrier``."""


@dataclass(frozen=True)
class Fingerprint:
    """A collective as the check compares it: its number, op and first tensor's shape."""

    seq: int | None
    op: str | None
    shape: str | None

    @classmethod
    def read(cls, text: str) -> Fingerprint:
        seq, op, shape = _SEQ.search(text), _OP.search(text), _SHAPE.search(text)
        return cls(
            int(seq.group(1)) if seq else None,
            visible(op.group(1), 40) if op else None,
            shape.group(1).replace(" ", "") if shape else None,
        )

    def __str__(self) -> str:
        number = f" #{self.seq}" if self.seq is not None else ""
        shape = f" of [{self.shape}]" if self.shape else ""
        return f"{self.op or 'a collective'}{number}{shape}"


@dataclass
class DebugChecks:
    """What the fingerprint checks and monitored barriers of a log said, rank by rank."""

    ran: dict[int, Fingerprint] = field(default_factory=dict)
    """Each rank's collective as its own message states it."""
    said: dict[int, Fingerprint] = field(default_factory=dict)
    """Each rank's collective as another's message states it: what that one received, which its own message
    overrules (where the check's exchange fell out of step, ``SequenceNumber=0OpType=SCATTER``)."""
    agreed: dict[int, Fingerprint] = field(default_factory=dict)
    """Ranks a message proves ran its reporter's collective (checked before the one it names)."""
    failed: dict[int, str] = field(default_factory=dict)
    """Ranks rank 0's monitored barrier names as never coming, with its words."""
    unacked: dict[int, str] = field(default_factory=dict)
    """Ranks a rank that came to a monitored barrier waited for an answer from (rank 0)."""
    running: dict[int, Fingerprint] = field(default_factory=dict)
    """Each rank's latest collective, as ``ProcessGroupWrapper`` logs it starting."""
    of_group: bool = False
    """A monitored barrier is called on a group (``monitored_barrier(group=...)``, a traceback's line):
    the ranks it names are that group's."""

    def unanswering(self) -> dict[int, str]:
        """Rank 0, where ranks that came to its monitored barrier say it never answered and no report of
        its own names a rank that never came: it held them up, or waited for a rank its log names."""
        return {} if self.failed else self.unacked

    def line(self, body: str, rank: int | None = None) -> bool:
        """Reads ``body`` if it is a fingerprint mismatch or a monitored barrier's failure (said by
        ``rank``, where its label gives it)."""
        if "monitored_barrier(" in body and "group=" in body:
            self.of_group = True
            return True
        if "monitoredBarrier" in body or "waiting for send/recv" in body:
            return self._barrier(body, rank)
        if "Running collective: CollectiveFingerPrint" in body and (wrapped := _WRAPPED.search(body)) is not None:
            if int(wrapped.group(1)) < MAX_RANKS:
                self.running[int(wrapped.group(1))] = Fingerprint.read(wrapped.group(2))
            return True
        if MISMATCH not in body or (running := _RUNNING.search(body)) is None:
            return False
        reporter = int(running.group(1))
        rest = body[running.end() :]
        but = _BUT.search(rest)
        if reporter >= MAX_RANKS or (but is not None and int(but.group(1)) >= MAX_RANKS):
            return True
        self.ran.setdefault(reporter, Fingerprint.read(rest[: but.start()] if but else rest))
        if but is not None:
            other = int(but.group(1))
            self.said.setdefault(other, Fingerprint.read(rest[but.end() :]))
            if other <= MAX_INFERRED and len(self.agreed) < MAX_INFERRED:
                for rank in range(other):
                    if rank != reporter:
                        self.agreed.setdefault(rank, self.ran[reporter])
        return True

    def _barrier(self, body: str, rank: int | None) -> bool:
        """The ranks a monitored barrier names, as ranks of its group: the job's only where it is the
        world's, so not where the reporter's label gives another rank than the one it has there (a
        subgroup's barrier, whose members the log does not say)."""
        found = _MONITORED.search(body)
        if found is None:
            return False
        reporter = _REPORTER.search(body)
        if rank is not None and reporter is not None and int(reporter.group(1) or reporter.group(2)) != rank:
            return True
        named = [found.group(1)] if found.group(1) else re.findall(r"\d{1,9}", found.group(2))
        kept = self.unacked if found.group(1) else self.failed
        why = visible(found.group(0), 300)
        for one in map(int, named):
            if len(kept) >= MAX_RANKS:
                break
            if one < MAX_RANKS:
                kept.setdefault(one, why)
        return True

    def odd(self) -> tuple[list[int], str] | None:
        """The ranks whose collective differs from what the most ranks ran, with why; None
        where the messages leave it open (two ranks disagree, as many on each side)."""
        by: dict[Fingerprint, set[int]] = {}
        for rank, print_ in self.stated().items():
            by.setdefault(print_, set()).add(rank)
        if len(by) < 2:
            return None
        ordered = sorted(by.items(), key=lambda item: (len(item[1]), min(item[1])))
        (fewest, odd), (most, many) = ordered[0], ordered[-1]
        if len(odd) >= len(many) or (len(ordered) > 2 and len(ordered[1][1]) == len(odd)):
            return None
        return sorted(odd), f"ran {fewest} where {len(many)} ranks ran {most} (TORCH_DISTRIBUTED_DEBUG's check)"

    def stated(self) -> dict[int, Fingerprint]:
        """Each rank's collective: its own message's, else another's, else the one a message proves it ran."""
        return {**self.agreed, **self.said, **self.ran}

    def disagreeing(self) -> list[int]:
        """The ranks the messages show at odds, where they do not say which is the odd one."""
        named = self.ran.keys() | self.said.keys()
        return sorted(named) if named and self.odd() is None else []

    def behind(self) -> tuple[list[int], str] | None:
        """The ranks whose latest collective, as ``ProcessGroupWrapper`` logs each starting, is
        numbered below the one two ranks or more agree they are in: they issued fewer collectives
        (a branch of their own, a sync the others made), with why. A paste may cut a rank's later
        lines: suspected, not proven."""
        latest = {rank: p for rank, p in self.running.items() if p.seq is not None}
        if len(latest) < 3:
            return None
        top = max(p.seq for p in latest.values())  # type: ignore[type-var]
        ahead = sorted(r for r, p in latest.items() if p.seq == top)
        late = sorted(r for r, p in latest.items() if p.seq != top)
        if len(ahead) < 2 or not late or len(late) >= len(ahead):
            return None
        return late, (
            f"its last collective is {latest[late[0]]} where {rank_word(ahead)} run {latest[ahead[0]]} "
            "(TORCH_DISTRIBUTED_DEBUG's lines): it issued fewer collectives than they"
        )
