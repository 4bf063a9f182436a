"""Horovod's stall inspector: the tensors some ranks submitted for a collective while others
have not, printed after a minute of waiting (``stall_inspector.cc``, ``operations.cc`` before
it), in three shapes across its versions::

    Stalled ops: allreduce.conv1.weight [ready ranks: 5, 1, 4, 7, 2, 3], ...     (until 0.15)
    Stalled ops:
    HorovodBroadcast_dense_bias_0 [missing ranks: 1]                               (until 0.20)
    Missing ranks:              (or "Stalled ranks:"; "0!" for a rank about to be shut down)
    0: [DistributedSGD_Allreduce/HorovodAllreduce_grads_0, ...]

Horovod's coordinator knows which ranks submitted each tensor: a rank missing from every
stalled tensor has submitted none of them (it is elsewhere in its code); ranks missing from a
few while others miss many submitted different tensors, and the rank missing the most is the
one on another path. Where a "ready" list is all it prints, the ranks below the highest ready
one that it leaves out are missing. Where every rank is missing from some tensor another
submitted, each waits on another: the paths diverged, nobody is behind. One stalled tensor
that more ranks miss than submitted it (an excerpt may show no more) proves nothing: the few
that submitted it may be the ones on another path, as likely as the others behind; both are
suspected, the few first.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from distmon.guards.text import visible

MAX_TENSORS = 4096
"""Stalled tensors kept from one log."""
MAX_RANKS = 1 << 17
"""Ranks a "ready" list is read against: the ranks it leaves out are counted up to there."""

STALLED = "submitted to be reduced, gathered or broadcasted by subset of ranks"
_LISTED = re.compile(r"(?<![\w./:-])([\w./:-]{1,300}) \[(missing|ready) ranks: ?([\d, ]{0,20000})\]")
_HEADER = re.compile(r"(?:Missing|Stalled) ranks:\s*$")
_MISSING_LINE = re.compile(r"^\s*(\d{1,9})!?: \[([^\]]{0,20000})\]?")


@dataclass
class HorovodStalls:
    """Per stalled tensor, the ranks missing from it (or, in the oldest shape, those ready)."""

    missing: dict[str, set[int]] = field(default_factory=dict)
    ready: dict[str, set[int]] = field(default_factory=dict)
    listing: bool = False
    """After a "Missing ranks:" header: the lines that follow name a rank each."""
    open: int | None = None
    """The rank whose list of tensors a line ended before its ``]``: a terminal or a person wrapped
    it, and the next line carries on with its tensors."""

    def line(self, body: str) -> bool:
        """Reads ``body`` if it is one of the stall inspector's lines."""
        if STALLED in body or _HEADER.search(body):
            self.listing, self.open = bool(_HEADER.search(body)), None
            self._listed(body)
            return True
        if self.listing and not body.strip():
            return False  # a collector's blank line between the header and its list
        if self.listing and (rank := _MISSING_LINE.match(body)) is not None:
            self._tensors(int(rank.group(1)), rank.group(2), closed="]" in body[rank.start(2) :])
            return True
        if self.listing and self.open is not None and body.strip() and not body.startswith((" ", "\t")):
            self._tensors(self.open, body.split("]", 1)[0], closed="]" in body)
            return True
        self.listing = False
        return self._listed(body)

    def _tensors(self, rank: int, listed: str, closed: bool) -> None:
        """The tensors of ``rank``'s list (Horovod ends a long one with `` ...``)."""
        for tensor in listed.split(",")[:MAX_TENSORS]:
            name = tensor.strip().removesuffix("...").strip()
            if name:
                self._add(self.missing, visible(name, 300), [rank])
        self.open = None if closed else rank

    def _listed(self, body: str) -> bool:
        if "ranks:" not in body:
            return False
        found = False
        for match in _LISTED.finditer(body):
            tensor, kind, ranks = match.groups()
            named = [int(r) for r in re.findall(r"\d{1,9}", ranks)]
            self._add(self.missing if kind == "missing" else self.ready, visible(tensor, 300), named)
            found = True
        return found

    def _add(self, into: dict[str, set[int]], tensor: str, ranks: list[int]) -> None:
        """Adds ``ranks`` to the tensor's, within :data:`MAX_TENSORS` tensors of :data:`MAX_RANKS`
        ranks each (a rank from :data:`MAX_RANKS` on is no real job's)."""
        if tensor not in into and len(into) >= MAX_TENSORS:
            return
        held = into.setdefault(tensor, set())
        for rank in ranks:
            if len(held) >= MAX_RANKS:
                break
            if rank < MAX_RANKS:
                held.add(rank)

    def listed(self) -> set[int]:
        """Every rank a stall line names."""
        return {r for named in (self.missing, self.ready) for ranks in named.values() for r in ranks}

    def least_world(self) -> int:
        """The fewest ranks the job can have: each stalled tensor was submitted by a rank not
        missing from it (two ranks both missing from one tensor are not the whole world)."""
        world = max(self.listed(), default=-1) + 1
        every = any(len(missing) >= world for missing in self.missing.values())  # each rank below the world
        return world + 1 if every else world

    def holding_up(self, world: int | None) -> tuple[list[int], str] | None:
        """The ranks missing from the most stalled tensors, with why; None where no tensor
        stalled, every rank is missing from as many, or the one tensor stalled has fewer ranks
        submitting it than missing it (:meth:`suspected`)."""
        held = None if self._everyone_missing(world) else self._held(world)
        return None if held is None or held.few else (held.ranks, held.why)

    def suspected(self, world: int | None) -> list[tuple[int, str]]:
        """Where the one stalled tensor has fewer ranks submitting it than missing it, which
        proves nobody held it up: the few that submitted it, then those missing from it."""
        held = self._held(world)
        if held is None or not held.few:
            return []
        missing = "missing from the stalled tensor (Horovod's stall inspector)"
        return [(r, _FEW) for r in held.few] + [(r, missing) for r in held.ranks]

    def diverged(self, world: int | None) -> str | None:
        """Why no rank is to blame where every rank of the world is missing from a stalled tensor
        another submitted: each waits on another, none is elsewhere alone (their paths through the
        program differ: a join, uneven data, a rank-dependent branch)."""
        if not self._everyone_missing(world):
            return None
        return (
            f"each of the {world} ranks is missing from a stalled tensor another submitted (Horovod's stall "
            "inspector): their paths through the program diverged (a join, uneven data, a branch on the rank), "
            "not one rank behind"
        )

    def _everyone_missing(self, world: int | None) -> bool:
        missing = {r for ranks in self.missing.values() for r in ranks}
        return bool(world and world > 1 and len(self.missing) > 1 and missing >= set(range(world)))

    def _held(self, world: int | None) -> _Held | None:
        ready = [r for ranks in self.ready.values() for r in ranks if r < MAX_RANKS]
        size = min(max([world or 0, *(r + 1 for r in ready)], default=0), MAX_RANKS)
        counts = Counter(r for ranks in self.missing.values() for r in ranks)
        present = Counter(ready)
        for rank in range(size) if self.ready else ():
            if absent := len(self.ready) - present[rank]:
                counts[rank] += absent
        tensors = len(self.missing.keys() | self.ready.keys())
        if not counts:
            return None
        most = max(counts.values())
        held = sorted(r for r, n in counts.items() if n == most)
        if len(held) == len(counts) and most < tensors:
            return None  # every rank missing from as many tensors: they submitted different ones, evenly
        if most == tensors:
            how = "every stalled tensor" if most > 1 else "the stalled tensor"
        else:
            how = f"{most} of the {tensors} stalled tensors"
        few = [r for r in range(size) if r not in held] if tensors == 1 and 2 * len(held) > size else []
        return _Held(held, f"missing from {how}, which its peers submitted (Horovod's stall inspector)", few)


_FEW = "submitted the stalled tensor its peers did not (Horovod's stall inspector): it may be on another path"


@dataclass(frozen=True)
class _Held:
    ranks: list[int]
    """Missing from the most stalled tensors."""
    why: str
    few: list[int]
    """The ranks that submitted the one stalled tensor, where fewer than missed it: then the
    tensor proves nobody held it up."""
