"""Ranks that reached the same collective number of a group without issuing the same
collective, as their own lines show it: the watchdog names each rank's op and element counts,
a rank that raised inside a call names it in its traceback.

Torch matches collectives by number only: where the ranks' numbers agree and their ops or sizes
do not, one side issued another collective than its peers. The fewer side is the odd one where
three ranks or more show which side they are on; where the lines show as many on each side (two
ranks, one each), they say that the ranks disagree, not which is odd.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from distmon.flightrecorder.fields import number, op_family
from distmon.forensics.analysis import Analysis
from distmon.monitor.state.words import count, rank_word
from distmon.wire import GroupStatus

SAME_SIZE = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter")
"""Collectives every rank issues with the same input's element count."""


@dataclass
class Mismatch:
    """Ranks at odds over one collective: the odd ones where proven, else every rank at odds."""

    ranks: list[int]
    why: str
    proven: bool


def at_one_collective(analysis: Analysis) -> Mismatch | None:
    """The ranks whose collective, at a number their peers reached too, is another: by op (a
    tie the monitor's divergence rule settles by rank order), by size, or by the call a peer
    raised in."""
    return _by_op(analysis) or _by_size(analysis) or _by_traceback(analysis)


def _sides(sides: dict[object, list[int]], what: str) -> Mismatch | None:
    """The fewer side odd where three ranks or more take sides, else every rank at odds."""
    if len(sides) < 2:
        return None
    ordered = sorted(sides.items(), key=lambda item: (len(item[1]), min(item[1])))
    (odd, few), (usual, many) = ordered[0], ordered[-1]
    if len(few) < len(many) and (len(ordered) == 2 or len(ordered[1][1]) > len(few)):
        return Mismatch(sorted(few), f"issued {odd} where {rank_word(sorted(many))} issued {usual} {what}", True)
    ranks = sorted(r for ranks in sides.values() for r in ranks)
    said = "; ".join(f"{rank_word(sorted(r))} {side}" for side, r in ordered)
    return Mismatch(ranks, f"at odds {what} ({said}): which side is odd, the lines do not say", False)


def _in_flight(analysis: Analysis) -> dict[tuple[str, int], list[tuple[int, GroupStatus]]]:
    found: dict[tuple[str, int], list[tuple[int, GroupStatus]]] = {}
    for f in analysis.ranks.values():
        for g in f.groups:
            if g.since is not None and g.op:
                found.setdefault((g.id, g.completed + 1), []).append((f.rank, g))
    return found


def _by_op(analysis: Analysis) -> Mismatch | None:
    """As many ranks in one op as in another at the same number: the monitor's divergence
    rule names the fewer side where there is one, and settles a tie by rank order, which the
    lines do not prove."""
    for (_, seq), members in _in_flight(analysis).items():
        sides: dict[object, list[int]] = {}
        for rank, g in members:
            sides.setdefault(g.op, []).append(rank)
        found = _sides(sides, f"at collective #{seq}")
        if found is not None and not found.proven:
            return found
    return None


def _by_size(analysis: Analysis) -> Mismatch | None:
    """Ranks that timed out in the same op at the same number with another input's element
    count, where every rank gives the same: not coalesced work, sends and receives, an
    all-to-all's uneven splits, or a gather's or scatter's root."""
    for (gid, seq), members in _in_flight(analysis).items():
        by_op: dict[str, dict[object, list[int]]] = {}
        for rank, g in members:
            size = _size(analysis, rank, gid, seq)
            if g.op and op_family(g.op) in SAME_SIZE and size is not None:
                by_op.setdefault(g.op, {}).setdefault(f"{g.op} of {count(size, 'element')}", []).append(rank)
        for sides in by_op.values():
            found = _sides(sides, f"at collective #{seq}")
            if found is not None:
                return found
    return None


def _size(analysis: Analysis, rank: int, gid: str, seq: int) -> int | None:
    """The element count of a rank's collective in flight: its watchdog line's, else its dump's entry's first
    input's."""
    said = analysis.log.timeouts.get(rank, {}).get(gid)
    if said is not None and said.numel is not None:
        return said.numel[0]
    f = analysis.ranks[rank]
    entry = f.dump.pending.get(gid) if f.dump is not None else None
    if entry is None or number(entry, "collective_seq_id") != seq:
        return None
    sizes = entry.get("input_sizes")
    shape = sizes[0] if isinstance(sizes, list) and sizes and isinstance(sizes[0], list) else None
    if shape is None or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        return None
    return math.prod(shape)


def _by_traceback(analysis: Analysis) -> Mismatch | None:
    """The ranks that wait, all in one collective, and the ranks that raised on losing them
    inside another (their tracebacks' innermost collective call)."""
    waits = {
        f.rank: family
        for f in analysis.ranks.values()
        for g in f.groups
        if g.since is not None and g.op and (family := op_family(g.op))
    }
    raised = {
        r: family
        for r, x in analysis.log.raised.items()
        if r not in waits and x.consequence and (family := x.collective)
    }
    if len(set(waits.values())) != 1 or len(set(raised.values())) != 1 or set(waits.values()) == set(raised.values()):
        return None
    sides: dict[object, list[int]] = {}
    for rank, family in {**waits, **raised}.items():
        sides.setdefault(family, []).append(rank)
    return _sides(sides, "(the waiting ranks' watchdog lines, the others' tracebacks)")
