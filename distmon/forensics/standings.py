"""Each rank's timeouts in a log as the group statuses its report would have held, read
against its peers': how far each group's members went, and who they are."""

from __future__ import annotations

from distmon.flightrecorder.fields import ROOTED, op_family
from distmon.forensics.logfacts import LogFacts, Timeout
from distmon.forensics.tracebacks import Raised
from distmon.forensics.watchdog import DEFAULT_PG, WORLD_GROUP
from distmon.monitor.state.words import rank_word
from distmon.wire import GroupStatus, rank_runs

P2P_OPS = ("send", "recv")


def statuses(facts: LogFacts, world: int, moment: float) -> dict[int, list[GroupStatus]]:
    """Each rank's timeouts as the group statuses its report would have held: the work that
    timed out is the oldest in flight, unless the group's other members had completed it
    (they passed it: this rank stopped short of it, and is the one behind); not so a collective
    with a root, which its root completes before the others receive. A wait the log
    gives no time for ran, by ``moment``, as long as its line says, else from ``moment``. A
    rank that raised without a watchdog line stood short of its peers' wait
    (:meth:`Standings.stopped_short`). A group with nothing in flight (a dump signal's counts)
    stands at its last completed work, as a rank behind does."""
    standings = Standings(facts, world)
    found: dict[int, list[GroupStatus]] = {}
    for rank, timeouts in facts.timeouts.items():
        for t in timeouts.values():
            assert t.group is not None, "placed"
            if t.op in P2P_OPS and standings.mixed(t.group):
                continue  # sends and receives number each rank's own: no place against its peers
            seq = standings.position(t)
            behind = t.idle or (op_family(t.op or "") not in ROOTED and standings.passed(t.group, seq))
            size, runs = standings.members(t.group)
            since = t.since if t.since is not None else moment - (t.ran or t.stuck or 0.0)
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
                since=None if behind else since,
            )
            found.setdefault(rank, []).append(status)
    for rank in facts.raised.keys() - facts.timeouts.keys():
        stopped = standings.stopped_short(rank, facts.raised[rank])
        if stopped is not None:
            found[rank] = [stopped]
    return found


class Standings:
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
        if world_group is None or rank >= self.world or raised.consequence:
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
        assert t.group is not None, "placed"
        if t.idle and t.completed is not None:
            return max(t.completed + 1, 1)
        return max(t.seq, 1) if t.seq is not None else self.named[t.group]

    def mixed(self, group: str) -> bool:
        """The group's members timed out in sends or receives at different numbers."""
        return len({t.seq for _, t in self.by_group[group]}) > 1

    def passed(self, group: str, seq: int) -> bool:
        return group in self.furthest and self.furthest[group] >= seq

    def members(self, group: str) -> tuple[int, list[list[int]]]:
        """A group's size and global ranks as runs (none where the log cannot say)."""
        if group not in self.known:
            members = self._members(group)
            self.known[group] = (self._size(group, members), rank_runs(members)) if members else (1, [])
        return self.known[group]

    def _size(self, group: str, members: list[int]) -> int:
        """A group's size: its members', but where a subgroup's works say it is smaller (an all-gather's element
        counts), that: its members are some of ``members``, the log does not say which."""
        if group == WORLD_GROUP or self.by_group[group][0][1].desc == DEFAULT_PG:
            return len(members)
        return min(
            (size for _, t in self.by_group[group] if (size := t.size()) and size < len(members)), default=len(members)
        )

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
            return self._unknown(group)
        (l0, g0), (l1, g1) = pairs[0], pairs[1]
        stride, rest = divmod(g1 - g0, l1 - l0)
        start = g0 - l0 * stride
        if rest or stride <= 0 or start < 0 or any(g != start + local * stride for local, g in pairs):
            return self._unknown(group)
        size = max(pairs[-1][0] + 1, self.widest.get(desc, 0), layout.size if layout else 0)
        size = max(size, max((s for _, t in timeouts if (s := t.size())), default=0))
        for rank, t in timeouts:  # a member whose line named no place in the group is on the run
            if t.local is None and rank >= start and (rank - start) % stride == 0:
                size = max(size, (rank - start) // stride + 1)
        return [m for m in (start + k * stride for k in range(size)) if m < self.world] or None

    def _unknown(self, group: str) -> list[int] | None:
        """A group the log does not say the members of: any rank may be one, so the world
        (ranks the log does not show may be the ones it waits for), but for the ranks below its
        first (a member whose group-local rank is 0: torch numbers a group's members in order);
        none for a group of sends and receives, a pair."""
        if any(t.op in P2P_OPS for _, t in self.by_group[group]):
            return None
        first = min((rank for rank, t in self.by_group[group] if t.local == 0), default=0)
        return list(range(first, self.world))


def waits_unplaced(log: LogFacts) -> str | None:
    """Ranks the log shows waiting in works it gives no place against their peers': sends and receives
    (each rank numbers its own), groups no line names (torch before 2.2 printed none)."""
    passing = sorted(r for r, ts in log.timeouts.items() if any(t.op in P2P_OPS for t in ts.values()))
    if passing:
        return f"{rank_word(passing)} wait in sends or receives, which each rank numbers its own"
    return f"{rank_word(sorted(log.unnamed))} wait in groups no line names" if log.unnamed else None
