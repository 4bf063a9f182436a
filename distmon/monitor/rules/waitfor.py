"""The wait-for relation over every process group and point-to-point channel, built from the
ranks' waits at one moment (:mod:`distmon.monitor.rules.hang` reads it into incidents):

- a rank waiting in collective N of group G waits for the members of G that have not
  issued N;
- a rank blocked in receive #k from rank p waits for p if p has posted fewer than k sends
  to it, and a rank blocked in send #k to p waits for p if p has posted fewer than k
  receives from it (ops on a channel match in the order posted).

A rank's edges lead to what it waits in, read off its waits; the collectives' and messages'
edges lead to the ranks they wait for. 131,071 ranks waiting in one collective stay one wait
and one array.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.flightrecorder.fields import ROOTED, op_family
from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.array_sets import expand, within
from distmon.monitor.state.columns import F8, I8
from distmon.monitor.state.words import group_name
from distmon.wire import ANY_SOURCE, RECV, SEND, GroupStatus

Collective = tuple[str, int]
"""Collective N of group G, as ``(G, N)``."""
Transfer = tuple[str, int, int, int]
"""Message k from rank s to rank d in group G, as ``(G, s, d, k)``: a send #k and its receive."""
Node = int | Collective | Transfer | str
"""A rank, or what ranks wait in: a collective, or a message (a transfer)."""
DELIVERED = "delivered"
"""Where a message leads that one end reports completed: a wait that is over, not an end."""


@dataclass(slots=True)
class Wait:
    """Ranks waiting in the same place: collective ``seq`` of group ``gid`` issued as the same
    op (the op's hash), or one rank's blocked send or receive. A hang at 8192 ranks has a few
    of these, not 8192."""

    job: JobState
    node: Collective | Transfer
    ranks: I8
    ages: F8
    """How long each rank has waited, in the order of ``ranks``."""
    age: float
    """The longest of them."""
    gid: str | None = None
    """The group of the collective waited in; None for a send or receive."""
    seq: int = 0
    op: int = 0

    @property
    def rank(self) -> int:
        """The rank of a send or receive; the first of those in a collective."""
        return int(self.ranks[0])

    def state(self, rank: int | None = None) -> RankState:
        return RankState(self.job, self.rank if rank is None else rank)


def _rooted(w: Wait) -> bool:
    """A collective with a root, which may complete on the root before the others: a member that completed it
    does not prove the others' devices behind."""
    return op_family(wait_op(w) or "") in ROOTED


def wait_op(w: Wait) -> str | None:
    """The op of the collective ``w`` waits in, from its rank's report."""
    if not w.op:
        return None
    return next((g.op for g in w.state().report.groups if g.id == w.gid), None)


@dataclass
class Group:
    """What the relation needs of one group that ranks wait in, gathered from the state's
    columns: at 8192 ranks in four groups each, a tick must not allocate 32,768 objects."""

    sample: GroupStatus
    behind: I8 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Members that have not issued the latest collective waited in ..."""
    enqueued: I8 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """... and the collectives each has issued."""
    reporting: int = 0
    live: int = 0
    quiet: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Of ``behind``, those no longer live (silent or exited): whatever their last report
    said they issued, the collective waits for them."""
    missing: I8 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Members that never reported."""
    completed: int = 0
    """The most collectives any member has completed: a collective at or below it is done,
    and a rank still shown waiting in it sent its report before it saw so."""
    waits: list[Wait] = field(default_factory=list)

    @cached_property
    def name(self) -> str:
        return group_name(self.sample.id, self.sample)

    @property
    def waiting(self) -> int:
        return sum(len(w.ranks) for w in self.waits)

    def laggards(self, seq: int) -> list[int]:
        return [*self.behind[(self.enqueued < seq) | self.quiet].tolist(), *self.missing.tolist()]


def waits(job: JobState, ctx: Context, live: npt.NDArray[np.bool_]) -> list[Wait]:
    """What the live ranks wait in, read off the columns: the ranks in each collective
    gathered into one wait, a wait per blocked send or receive. In a healthy job only the
    few ranks caught inside a collective or a blocking send wait."""
    c, now = job.cols, ctx.now
    ranks = np.flatnonzero(live & ~np.isnan(c.collective_since))
    found: list[Wait] = []
    names: dict[int, str] = {}

    def name(gid: int, rank: int) -> str:
        if gid not in names:
            names[gid] = job.group_id(gid, rank)
        return names[gid]

    if len(ranks):
        oldest = c.collective_slot[ranks]
        ages = job.ages(c.collective_since[ranks], now, ranks)
        gids, seqs, ops = c.g_id[ranks, oldest], c.g_comp[ranks, oldest] + 1, c.g_op[ranks, oldest]
        order = np.lexsort((ops, seqs, gids))
        ranks, ages, gids, seqs, ops = ranks[order], ages[order], gids[order], seqs[order], ops[order]
        cut = np.flatnonzero((np.diff(gids) != 0) | (np.diff(seqs) != 0) | (np.diff(ops) != 0)) + 1
        for a, b in zip([0, *cut.tolist()], [*cut.tolist(), len(ranks)], strict=True):
            group, seq = name(int(gids[a]), int(ranks[a])), int(seqs[a])
            mine = ages[a:b]
            found.append(Wait(job, (group, seq), ranks[a:b], mine, float(mine.max()), group, seq, int(ops[a])))
    held = np.flatnonzero(live & c.in_p2p)
    at, slots = np.nonzero(job.blocked(held) & ~np.isnan(c.c_blocked_since[held]))
    held = held[at]
    ages = job.ages(c.c_blocked_since[held, slots], now, held)
    rows = zip(
        held.tolist(),
        c.c_group[held, slots].tolist(),
        c.c_peer[held, slots].tolist(),
        c.c_dir[held, slots].tolist(),
        c.c_blocked[held, slots].tolist(),
        ages.tolist(),
        strict=True,
    )
    for rank, gid, peer, direction, k, age in rows:
        src, dst = (rank, peer) if direction == 0 else (peer, rank)
        found.append(Wait(job, (name(gid, rank), src, dst, k), np.array([rank]), np.array([age]), age))
    return found


def collect_groups(job: JobState, waiting: list[Wait], live: npt.NDArray[np.bool_]) -> dict[str, Group]:
    """The groups ranks wait in collectives of, with the members behind the latest one."""
    groups: dict[str, Group] = {}
    latest: dict[str, int] = {}
    for w in waiting:
        if w.gid is None:
            continue
        if w.gid not in groups:
            sample = job.group(wire.name_hash(w.gid))
            assert sample is not None, "a group waited in is described by its members' reports"
            groups[w.gid] = Group(sample)
        groups[w.gid].waits.append(w)
        latest[w.gid] = max(latest.get(w.gid, 0), w.seq)
    if not groups:
        return groups
    # One pass over every rank's group rows for all the groups at once: a TP x PP x DP job
    # waits in thousands of groups.
    c = job.cols
    views = list(groups.values())
    hashes = np.array([wire.name_hash(gid) for gid in groups], dtype=np.uint64)
    order = np.argsort(hashes)
    used = int(c.groups.max(initial=0))  # the slots any rank uses: one to four, as a rule
    ids = c.g_id[:, :used]
    at = np.searchsorted(hashes[order], ids).clip(max=len(hashes) - 1)
    rows = (np.arange(used) < c.groups[:, None]) & c.present[:, None]
    ranks, slots = np.nonzero(rows & (hashes[order][at] == ids))
    which = order[at[ranks, slots]]
    reporting = np.bincount(which, minlength=len(views))
    lives = np.bincount(which, weights=live[ranks], minlength=len(views))
    enqueued = c.g_enq[ranks, slots]
    completed = np.zeros(len(views), dtype=np.int64)
    np.maximum.at(completed, which, c.g_comp[ranks, slots])
    behind = np.flatnonzero((enqueued < np.array([latest[gid] for gid in groups])[which]) | ~live[ranks])
    behind = behind[np.argsort(which[behind], kind="stable")]
    starts = np.searchsorted(which[behind], np.arange(len(views) + 1))
    laggards, lagging = ranks[behind], enqueued[behind]
    for i, group in enumerate(views):
        group.reporting, group.live, group.completed = int(reporting[i]), int(lives[i]), int(completed[i])
        a, b = int(starts[i]), int(starts[i + 1])
        group.behind, group.enqueued = laggards[a:b], lagging[a:b]
        group.quiet = ~live[group.behind]
        if group.reporting < group.sample.size:
            members = expand(group.sample.ranks)
            group.missing = members[~within(c.present, members)]
    return groups


def current(job: JobState, waiting: list[Wait], groups: dict[str, Group], ctx: Context) -> list[Wait]:
    """``waiting`` but the waits that are over: in a collective a member has completed since,
    reported by ranks overdue since (stopped, or their reports starved): old news, not a rank
    waiting. A rank still reporting such a wait is another matter (:meth:`WaitFor._device_behind`)."""
    c = job.cols

    def over(w: Wait) -> bool:
        if w.gid is None or groups[w.gid].completed < w.seq:
            return False
        return bool((ctx.now - c.received[w.ranks] > ctx.limits.overdue_after(c.interval[w.ranks])).all())

    return [w for w in waiting if not over(w)]


class WaitFor:
    """The wait-for relation of one moment: who waits in what, and what waits for whom."""

    def __init__(
        self,
        job: JobState,
        waiting: list[Wait],
        groups: dict[str, Group],
        diverged: set[str],
    ) -> None:
        self.job = job
        self.passed = [w for w in waiting if w.gid is not None and self._device_behind(w, groups[w.gid])]
        """Waits in a collective a member has completed, or in a message the other end
        completed, that the rank still reports pending in a report no older than the one
        that said so: not a wait for anyone, the rank's device stopped completing what its
        host enqueued (a GPU fault's signature). An older report is only behind: it stays a
        wait that leads nowhere until the rank's next report."""
        waiting = [w for w in waiting if not any(w is p for p in self.passed)]
        self.all = waiting
        self.groups = groups
        self.diverged = diverged
        """Groups with a divergence alert of their own: the ends of the relation they hold."""
        self.collectives = [w for w in waiting if w.gid is not None]
        self.collective = np.full(len(job.cols.present), -1, dtype=np.int64)
        """Per rank, the index in ``collectives`` of the collective it waits in (-1: none):
        131,071 ranks waiting in one collective stay an array."""
        self.waited = np.zeros(len(job.cols.present))
        """Per rank, how long it has waited in its collective, or its longest send or receive."""
        for i, w in enumerate(self.collectives):
            self.collective[w.ranks] = i
            self.waited[w.ranks] = w.ages
        self.p2p_of: dict[int, list[Wait]] = defaultdict(list)
        for w in waiting:
            if w.gid is None:
                self.p2p_of[w.rank].append(w)
                self.waited[w.rank] = max(self.waited[w.rank], w.age)
        self.held: set[Node] = set()
        """Collectives every member issued that wait for members held up in older work of their own."""
        self.edges: dict[Node, list[Node]] = {}
        for w in waiting:
            if w.node not in self.edges:
                self.edges[w.node] = self._awaited(w)
        delivered = [w for w in waiting if self.edges[w.node] == [DELIVERED] and self._message_behind(w)]
        if delivered:
            # As with a collective a member completed: a send or receive the other end
            # completed is no wait for anyone (while it stays so, the rank's device is stuck).
            self.passed += delivered
            self.all = [w for w in self.all if not any(w is d for d in delivered)]
            for w in delivered:
                mine = [m for m in self.p2p_of.get(w.rank, []) if m is not w]
                if mine:
                    self.p2p_of[w.rank] = mine
                else:
                    self.p2p_of.pop(w.rank, None)

    def _device_behind(self, w: Wait, group: Group) -> bool:
        """A member completed collective ``w`` waits in, and every rank of ``w`` reported it
        pending no earlier than that member reported it done."""
        if group.completed < w.seq:
            return False
        c = self.job.cols
        used = int(c.groups.max(initial=0))
        done = (c.g_id[:, :used] == wire.name_hash(group.sample.id)) & (c.g_comp[:, :used] >= w.seq)
        done &= (np.arange(used) < c.groups[:, None]) & c.present[:, None]
        completers = np.flatnonzero(done.any(axis=1))
        return bool(len(completers)) and bool((c.t[w.ranks] >= c.t[completers].min()).all())

    def _message_behind(self, w: Wait) -> bool:
        """The other end of message ``w`` completed it, in a report no newer than ``w``'s rank's."""
        _, src, dst, _ = w.node  # type: ignore[misc]
        other = dst if w.rank == src else src
        c = self.job.cols
        return other in self.job.ranks and float(c.t[w.rank]) >= float(c.t[other])

    def waits_of(self, rank: int) -> list[Wait]:
        i = int(self.collective[rank]) if rank < len(self.collective) else -1
        return ([self.collectives[i]] if i >= 0 else []) + self.p2p_of.get(rank, [])

    def waiting(self, rank: int) -> bool:
        return (rank < len(self.collective) and self.collective[rank] >= 0) or rank in self.p2p_of

    def _waiting_among(self, ranks: I8) -> npt.NDArray[np.bool_]:
        return within(self.collective >= 0, ranks) | np.isin(ranks, list(self.p2p_of))

    def successors(self, node: Node) -> list[Node]:
        if isinstance(node, int):
            return [w.node for w in self.waits_of(node)]
        return self.edges.get(node, [])

    def _awaited(self, w: Wait) -> list[Node]:
        """Whom the collective or message ``w`` waits in waits for."""
        if w.gid is not None:
            if w.gid in self.diverged:
                return []
            stuck = [
                r for p in self.passed if p.gid == w.gid and p.seq < w.seq and not _rooted(p) for r in p.ranks.tolist()
            ]
            awaited = [*self.groups[w.gid].laggards(w.seq), *stuck]
            if not awaited and (awaited := self._held_elsewhere(w)):
                self.held.add(w.node)
            return awaited
        gid, src, dst, k = w.node  # type: ignore[misc]
        if src == ANY_SOURCE:  # a receive from anyone: any member that is free to send would do
            others = self._members(gid, w)
            others = others[others != dst]
            free = others[~self._waiting_among(others)]
            anyone: list[Node] = (free if len(free) else others).tolist()
            return anyone
        ends = ((src, self._channel(src, gid, dst, SEND)), (dst, self._channel(dst, gid, src, RECV)))
        if max(completed for _, (_, completed, _) in ends) >= k:
            return [DELIVERED]  # one end has completed it: the other's report is older than that
        behind = [rank for rank, (posted, _, _) in ends if posted < k]
        # Posted on both ends: an end not held up in it is held up in older work of its own
        # (NCCL runs a device's work in order), and the message waits for that end.
        return behind or [rank for rank, (_, _, blocked) in ends if blocked != k]

    def _held_elsewhere(self, w: Wait) -> list[Node]:
        """Members of a collective every member issued that wait in older work of their own (another
        collective, a send or receive, waited in since before this one): their device runs its work in
        order, so this one waits for them. Not a member waiting in later work (it went past this one: a
        report that says otherwise is older)."""
        members = expand(self.groups[w.gid].sample.ranks)  # type: ignore[index]
        members = members[members < len(self.collective)]
        elsewhere = np.array([c.node != w.node for c in self.collectives] + [False])  # -1 (in none) last
        held = elsewhere[self.collective[members]] | np.isin(members, list(self.p2p_of))
        return [int(r) for r in members[held & (self.waited[members] >= w.ages.min())]]

    def _members(self, gid: str, w: Wait) -> I8:
        sample = next((g for g in w.state().report.groups if g.id == gid), None)
        return expand(sample.ranks if sample is not None else [])

    def _channel(self, rank: int, gid: str, peer: int, direction: str) -> tuple[int, int, int]:
        """(posted, completed, blocked) of a rank's channel (blocked -1: in none); nothing for a
        rank never heard from."""
        c = self.job.cols
        if rank not in self.job.ranks:
            return 0, 0, -1
        n = int(c.channels[rank])
        match = (
            (c.c_group[rank, :n] == wire.name_hash(gid))
            & (c.c_peer[rank, :n] == peer)
            & (c.c_dir[rank, :n] == (0 if direction == SEND else 1))
        )
        slot = np.flatnonzero(match)
        if not len(slot):
            return 0, 0, -1
        at = slot[0]
        return int(c.c_posted[rank, at]), int(c.c_completed[rank, at]), int(c.c_blocked[rank, at])

    def reachable(self, first: list[Wait]) -> set[Node]:
        """What the stuck ranks wait in (``first``), and all that leads to: the collectives
        and messages, and the ranks they wait for (not the ranks waiting in them, which may
        be all but one of 131,072)."""
        seen: set[Node] = {w.node for w in first}
        todo: list[Node] = list(seen)
        while todo:
            for nxt in self.successors(todo.pop()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    def joined(self, reach: set[Node]) -> set[Node]:
        """``reach`` and every collective or message whose ranks wait for a rank of it (one it
        waits for, or one waiting in it), however briefly yet: they wait for its roots as much.
        A walk back through the ranks, each wait entered once."""
        by_awaited: dict[int, list[Wait]] = defaultdict(list)
        for w in self.all:
            if w.node not in reach:
                for rank in self.edges.get(w.node, ()):
                    if isinstance(rank, int):
                        by_awaited[rank].append(w)
        nodes = set(reach)
        if not by_awaited:
            return nodes
        keys = np.fromiter(by_awaited, np.int64, len(by_awaited))
        todo = [n for n in reach if isinstance(n, int)]
        for w in self.all:
            if w.node in reach:
                todo += w.ranks[np.isin(w.ranks, keys)].tolist()
        while todo:
            for w in by_awaited.pop(todo.pop(), []):
                if w.node not in nodes:
                    nodes.add(w.node)
                    todo += w.ranks[np.isin(w.ranks, keys)].tolist()
        return nodes

    def awaited_ranks(self, reach: set[Node]) -> set[Node]:
        """The ranks some collective or message in ``reach`` waits for: of the ranks, the only
        ones a path through the relation can pass."""
        return {n for node in reach if not isinstance(node, int) for n in self.edges.get(node, ())}

    def short_of(self, reach: set[Node]) -> set[int]:
        """The ranks some collective or message in ``reach`` waits for that never issued it (not those
        held up in older work of their own)."""
        return {
            n
            for node in reach - self.held
            if not isinstance(node, int)
            for n in self.edges.get(node, ())
            if isinstance(n, int)
        }

    def ring(self, reach: set[Node]) -> list[int]:
        """Ranks on a cycle of the relation. A rank waits for all it waits in, so a cycle is a
        deadlock even where some of its ranks also wait for others: found as the strongly
        connected components of more than one node (Tarjan's, without recursion). A rank
        nobody waits for is on no cycle: only the collectives and messages waited in, and the
        ranks they wait for, are walked."""
        awaited = self.awaited_ranks(reach)
        index: dict[Node, int] = {}
        low: dict[Node, int] = {}
        on_stack: set[Node] = set()
        stack: list[Node] = []
        ring: list[int] = []
        for root in reach:
            if root in index or (isinstance(root, int) and root not in awaited):
                continue
            work: list[tuple[Node, int]] = [(root, 0)]
            while work:
                node, i = work.pop()
                if i == 0:
                    index[node] = low[node] = len(index)
                    stack.append(node)
                    on_stack.add(node)
                successors = self.successors(node)
                if i < len(successors):
                    work.append((node, i + 1))
                    nxt = successors[i]
                    if nxt not in index:
                        work.append((nxt, 0))
                    elif nxt in on_stack:
                        low[node] = min(low[node], index[nxt])
                    continue
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        ring.extend(n for n in component if isinstance(n, int))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
        return sorted(ring)

    # --- what a person reads -------------------------------------------------------------

    def hops(self, roots: list[int], reach: set[Node]) -> dict[Node, int]:
        """How many waits separate each collective or message from the roots (a breadth-first
        walk back, through the ranks that are waited for)."""
        waiters: dict[Node, list[Node]] = defaultdict(list)
        for node in reach:
            if not isinstance(node, int):
                for nxt in self.edges.get(node, ()):
                    waiters[nxt].append(node)
        for rank in self.awaited_ranks(reach):
            if isinstance(rank, int):
                for w in self.waits_of(rank):
                    waiters[w.node].append(rank)
        hops: dict[Node, int] = dict.fromkeys(roots, 0)
        frontier: list[Node] = list(roots)
        while frontier:
            later = []
            for node in frontier:
                for prev in waiters[node]:
                    if prev not in hops:
                        hops[prev] = hops[node] + 1
                        later.append(prev)
            frontier = later
        return hops


def message_words(node: Transfer, rank: int, group: str) -> str:
    """The op ``rank`` waits in on message ``node``, from its own side."""
    _, src, dst, k = node
    if rank == src:
        return f"send #{k} to rank {dst} in {group}"
    peer = "any rank" if src == ANY_SOURCE else f"rank {src}"
    return f"recv #{k} from {peer} in {group}"
