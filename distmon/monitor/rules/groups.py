"""Stops across process groups: ``hang`` (ranks wait for a rank that does not come) and
``divergence`` (ranks issued different collectives, or different numbers of them).

A job of several groups (tensor, pipeline and data parallel; FSDP/HSDP; DeviceMesh) stops
as a whole within seconds of one rank stopping: its tensor-parallel peers wait for it, its
pipeline neighbours block in a send or receive to it, each data-parallel group then waits
for one of those, and so on. Judging each group alone names victims. So the hang rule builds
one wait-for relation over all groups and all point-to-point traffic:

- a rank waiting in collective N of group G waits for the members of G that have not
  issued N;
- a rank blocked in receive #k from rank p waits for p if p has posted fewer than k sends
  to it, and a rank blocked in send #k to p waits for p if p has posted fewer than k
  receives from it (ops on a channel match in the order posted).

The ranks at its end, waiting for nobody (stalled elsewhere, exited, silent, never heard),
are the root; everyone else is evidence. A collective every member issued, or a send and
its receive both posted, that still does not complete, is the transport. A cycle of the
relation (two collectives issued in different orders, two blocking receives facing each
other) is a deadlock.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from distmon import wire
from distmon.monitor.alerts import CRITICAL, Finding
from distmon.monitor.rules.base import Context
from distmon.monitor.state import MAX_GROUPS, JobState, RankState
from distmon.monitor.whereabouts import user_frame
from distmon.monitor.words import duration, group_name, rank_lines, rank_word, ranks_text, stack_lines, where
from distmon.wire import ANY_SOURCE, RECV, SEND, STOPPED, GroupStatus, expand_runs

MAX_SHOWN = 4
"""Root ranks whose stacks the evidence shows."""
MAX_GROUPS_SHOWN = 6
"""Collectives and messages waited in that the evidence lists; the rest are counted."""

Collective = tuple[str, int]
"""Collective N of group G, as ``(G, N)``."""
Message = tuple[str, int, int, int]
"""Message k from rank s to rank d in group G, as ``(G, s, d, k)``: a send #k and its receive."""
Node = int | Collective | Message | str
"""A rank, or what ranks wait in: a collective, or a message."""
DELIVERED = "delivered"
"""Where a message leads that one end reports completed: a wait that is over, not an end."""


@dataclass(slots=True)
class Wait:
    """What a live rank waits in: its oldest incomplete collective (``gid``, ``seq``, the
    op's hash), or a point-to-point op it is blocked in (one per channel)."""

    job: JobState
    rank: int
    node: Collective | Message
    age: float
    gid: str | None = None
    """The group of the collective waited in; None for a send or receive."""
    seq: int = 0
    op: int = 0

    @property
    def state(self) -> RankState:
        return RankState(self.job, self.rank)


@dataclass
class Group:
    """What the relation needs of one group that ranks wait in, gathered from the state's
    columns: at 8192 ranks in four groups each, a tick must not allocate 32,768 objects."""

    sample: GroupStatus
    behind: list[tuple[int, int]] = field(default_factory=list)
    """(rank, enqueued) of members that have not issued the latest collective waited in."""
    reporting: int = 0
    live: int = 0
    missing: list[int] = field(default_factory=list)
    """Members that never reported."""
    waits: list[Wait] = field(default_factory=list)

    @property
    def name(self) -> str:
        return group_name(self.sample.id, self.sample)

    def laggards(self, seq: int) -> list[int]:
        return [rank for rank, enqueued in self.behind if enqueued < seq] + self.missing


def waits(job: JobState, ctx: Context) -> dict[int, list[Wait]]:
    """What each live rank waits in, read off the columns: in a healthy job only the few
    ranks caught inside a collective or a blocking send have a wait."""
    c, now = job.cols, ctx.now
    in_flight = job.in_flight() & ~np.isnan(c.g_since)
    blocked = job.blocked() & ~np.isnan(c.c_blocked_since)
    ranks = np.flatnonzero(job.live(now, ctx.limits) & (in_flight.any(axis=1) | blocked.any(axis=1)))
    found: dict[int, list[Wait]] = {}
    if not len(ranks):
        return found
    since = np.where(in_flight[ranks], c.g_since[ranks], np.inf)
    oldest = since.argmin(axis=1)
    row = np.arange(len(ranks))
    has_group = np.any(in_flight[ranks], axis=1).tolist()
    group_ages = job.ages(since[row, oldest], now, ranks)
    gids, seqs, ops = c.g_id[ranks, oldest].tolist(), (c.g_comp[ranks, oldest] + 1).tolist(), c.g_op[ranks, oldest]
    names: dict[int, str] = {}
    for gid, rank in zip(gids, ranks.tolist(), strict=True):
        if gid not in names:
            names[gid] = job.group_id(gid, rank)
    for rank, grouped, gid, seq, age, op in zip(
        ranks.tolist(), has_group, gids, seqs, group_ages.tolist(), ops.tolist(), strict=True
    ):
        name = names.get(gid, "")
        found[rank] = [Wait(job, rank, (name, seq), age, gid=name, seq=seq, op=op)] if grouped else []
    held, slots = np.nonzero(blocked)
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
        if rank not in found:
            continue  # not live
        if gid not in names:
            names[gid] = job.group_id(gid, rank)
        src, dst = (rank, peer) if direction == 0 else (peer, rank)
        found[rank].append(Wait(job, rank, (names[gid], src, dst, k), age))
    return found


def hang_and_divergence(job: JobState, ctx: Context) -> list[Finding]:
    waiting = waits(job, ctx)
    hang_after = ctx.hang_after
    if not any(w.age >= hang_after or w.op for ws in waiting.values() for w in ws):
        return []
    groups = _groups(job, waiting, ctx)
    findings = []
    diverged = set()
    for gid in sorted(groups):
        found = _divergence_in(groups[gid], ctx)
        if found:
            diverged.add(gid)
            findings.append(found)
    findings.extend(WaitFor(job, waiting, groups, diverged, ctx).findings())
    return findings


def _groups(job: JobState, waiting: dict[int, list[Wait]], ctx: Context) -> dict[str, Group]:
    """The groups ranks wait in collectives of, with the members behind the latest one."""
    groups: dict[str, Group] = {}
    latest: dict[str, int] = {}
    for ws in waiting.values():
        for w in ws:
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
    c = job.cols
    live = job.live(ctx.now, ctx.limits)
    rows = (np.arange(MAX_GROUPS)[None, :] < c.groups[:, None]) & c.present[:, None]
    for gid, group in groups.items():
        member = rows & (c.g_id == wire.name_hash(gid))
        ranks, slots = np.nonzero(member)
        group.reporting = len(ranks)
        group.live = int(np.count_nonzero(live[ranks]))
        enqueued = c.g_enq[ranks, slots]
        behind = enqueued < latest[gid]
        group.behind = list(zip(ranks[behind].tolist(), enqueued[behind].tolist(), strict=True))
        if group.reporting < group.sample.size:
            group.missing = [r for r in expand_runs(group.sample.ranks) if r not in job.ranks]
    return groups


class WaitFor:
    """The wait-for relation of one moment, and the incidents at its ends.

    Following the relation from the ranks that have waited too long ends in one of: a rank
    that waits for nobody (the root of a hang), a collective every member issued or a
    message both ends posted that still does not complete (the transport), a group whose
    ranks diverged (its own alert), or a cycle (a deadlock).
    """

    def __init__(
        self,
        job: JobState,
        waiting: dict[int, list[Wait]],
        groups: dict[str, Group],
        diverged: set[str],
        ctx: Context,
    ) -> None:
        self.job = job
        self.waits = waiting
        self.groups = groups
        self.ctx = ctx
        self.diverged = diverged
        """Groups with a divergence alert of their own: the ends of the relation they hold."""
        self.edges: dict[Node, list[Node]] = {}
        for rank, ws in waiting.items():
            self.edges[rank] = [w.node for w in ws]
            for w in ws:
                if w.node not in self.edges:
                    self.edges[w.node] = self._awaited(w)

    def _awaited(self, w: Wait) -> list[Node]:
        """Whom the collective or message ``w`` waits in waits for."""
        if w.gid is not None:
            return [] if w.gid in self.diverged else list(self.groups[w.gid].laggards(w.seq))
        gid, src, dst, k = w.node  # type: ignore[misc]
        if src == ANY_SOURCE:  # a receive from anyone: any member that is free to send would do
            others = [r for r in self._members(gid, w) if r != dst]
            return [r for r in others if r not in self.waits] or list(others)
        sent, received = self._channel(src, gid, dst, SEND), self._channel(dst, gid, src, RECV)
        if max(sent[1], received[1]) >= k:
            return [DELIVERED]  # one end has completed it: the other's report is older than that
        return [rank for rank, (posted, _) in ((src, sent), (dst, received)) if posted < k]

    def _members(self, gid: str, w: Wait) -> list[int]:
        sample = next((g for g in w.state.report.groups if g.id == gid), None)
        return expand_runs(sample.ranks) if sample is not None else []

    def _channel(self, rank: int, gid: str, peer: int, direction: str) -> tuple[int, int]:
        """(posted, completed) of a rank's channel; nothing for a rank never heard from."""
        c = self.job.cols
        if rank not in self.job.ranks:
            return 0, 0
        n = int(c.channels[rank])
        match = (
            (c.c_group[rank, :n] == wire.name_hash(gid))
            & (c.c_peer[rank, :n] == peer)
            & (c.c_dir[rank, :n] == (0 if direction == SEND else 1))
        )
        slot = np.flatnonzero(match)
        return (int(c.c_posted[rank, slot[0]]), int(c.c_completed[rank, slot[0]])) if len(slot) else (0, 0)

    def findings(self) -> list[Finding]:
        hang_after = self.ctx.hang_after
        stuck = [r for r, ws in self.waits.items() if max(w.age for w in ws) >= hang_after]
        if not stuck:
            return []
        reach = self._reachable(stuck)
        roots = sorted(n for n in reach if isinstance(n, int) and n not in self.waits)
        findings = []
        if roots:
            findings.append(self._hang(roots, reach))
        for node in sorted((n for n in reach if isinstance(n, tuple) and not self.edges[n]), key=str):
            # a collective or message that waits for nobody yet does not complete
            if len(node) == 2 and node[0] not in self.diverged:
                gid, seq = node
                findings.append(self._stuck_collective(gid, seq))
            elif len(node) == 4 and ANY_SOURCE not in node[1:3]:
                findings.append(self._stuck_message(node))
        ring = self._ring(reach)
        if ring:
            findings.append(self._deadlock(ring))
        return findings

    def _reachable(self, start: list[int]) -> set[Node]:
        seen: set[Node] = set(start)
        todo: list[Node] = list(start)
        while todo:
            for nxt in self.edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    def _ring(self, reach: set[Node]) -> list[int]:
        """Ranks on a cycle of the relation. A rank waits for all it waits in, so a cycle is a
        deadlock even where some of its ranks also wait for others: found as the strongly
        connected components of more than one node (Tarjan's, without recursion). A rank
        nobody waits for is on no cycle: only the collectives and messages waited in, and the
        ranks they wait for, are walked (a few, where thousands of ranks wait)."""
        awaited = {n for node in reach if not isinstance(node, int) for n in self.edges.get(node, ())}
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
                successors = self.edges.get(node, [])
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

    def _waiting(self, roots: list[int], reach: set[Node]) -> list[tuple[float, Node, list[Wait]]]:
        """(oldest wait, node, the waits in it) per collective or message waited in: those
        waiting for the roots themselves first, then those waiting for them, and so on."""
        by_node: dict[Node, list[Wait]] = defaultdict(list)
        for rank, ws in self.waits.items():
            if rank in reach:
                for w in ws:
                    by_node[w.node].append(w)
        hops = self._hops(roots, reach)
        rows = [(max(w.age for w in ws), node, ws) for node, ws in by_node.items()]
        return sorted(rows, key=lambda row: (hops.get(row[1], len(reach)), -len(row[2]), -row[0], str(row[1])))

    def _hops(self, roots: list[int], reach: set[Node]) -> dict[Node, int]:
        """How many waits separate each node from the roots (a breadth-first walk back)."""
        waiters: dict[Node, list[Node]] = defaultdict(list)
        for node in reach:
            for nxt in self.edges.get(node, ()):
                waiters[nxt].append(node)
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

    def _group_label(self, gid: str) -> str:
        view = self.groups.get(gid)
        if view is not None:
            return view.name
        sample = self.job.group(wire.name_hash(gid))
        return group_name(gid, sample) if sample is not None else f"group {gid}"

    def _what(self, w: Wait) -> str:
        """``collective #7 (all_reduce) of group 4 (...)``, or ``recv #12 from rank 2 in group 3 (...)``."""
        if w.gid is not None:
            op = next((_op_name(m) for m in self.groups[w.gid].waits if m.op), None)
            return f"collective #{w.seq}{f' ({op})' if op else ''} of {self.groups[w.gid].name}"
        return message_words(w.node, w.rank, self._group_label(w.node[0]))  # type: ignore[arg-type]

    def _hang(self, roots: list[int], reach: set[Node]) -> Finding:
        rows = self._waiting(roots, reach)
        waiting = sorted({w.rank for row in rows for w in row[2]})
        oldest = max(row[0] for row in rows)
        _, _, first = rows[0]
        samples = [(age, self.groups[ws[0].gid].sample) for age, _, ws in rows if ws[0].gid is not None]
        timeouts = [sample.timeout - age for age, sample in samples if sample.timeout]
        left = min(timeouts, default=None)
        countdown = f"; the earliest collective timeout fires in {duration(left)}" if left is not None else ""
        more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
        who = rank_word(roots)
        holds = "holds" if len(roots) == 1 else "hold"
        them = "it" if len(roots) == 1 else "them"
        summary = (
            f"{who} {holds} up the job: {len(waiting)} {'rank waits' if len(waiting) == 1 else 'ranks wait'} "
            f"for {them}, in {self._what(first[0])}{more}, for up to {duration(oldest)}"
        )
        detail = [
            f"{who} {'waits' if len(roots) == 1 else 'wait'} for nobody, and every waiting rank waits for "
            f"{them}, directly or through a peer: the oldest wait is {duration(oldest)}{countdown}.",
        ]
        for rank in roots[:MAX_SHOWN]:
            detail.extend(self._root_lines(rank))
        if len(roots) > MAX_SHOWN:
            detail.append(f"  ... and {len(roots) - MAX_SHOWN} more: {ranks_text(roots)}")
        detail.append("Waiting:")
        for age, node, ws in rows[:MAX_GROUPS_SHOWN]:
            awaited = [n for n in self.edges[node] if isinstance(n, int)]
            for_whom = f" for {rank_word(awaited)}" if awaited else ""
            detail.append(f"  {rank_word(w.rank for w in ws)} in {self._what(ws[0])}{for_whom}, {duration(age)}")
        if len(rows) > MAX_GROUPS_SHOWN:
            rest = rows[MAX_GROUPS_SHOWN:]
            others = sum(len(r[2]) for r in rest)
            detail.append(f"  ... and {others} more ranks in {len(rest)} more collectives or sends")
        detail.append(
            f"What to do: find why {who} stopped short of its next collective or send; the stack "
            "shows where it is. The usual causes: a code path only some ranks take (if rank == 0: "
            "checkpoint, evaluation, logging), I/O or a lock on one rank, a rank with fewer "
            "batches, or a pipeline stage stuck in its own compute. `py-spy dump --pid PID` on its "
            "host shows every thread."
        )
        return Finding("hang", "hang", CRITICAL, roots, summary, "\n".join(detail))

    def _root_lines(self, rank: int) -> list[str]:
        s = self.job.ranks.get(rank)
        if s is None:
            return [f"  rank {rank}: never reported (not monitored, or not started)"]
        r = s.report
        last = ", ".join(f"#{g.enqueued} in {g.desc or 'group ' + g.id}" for g in r.groups if g.enqueued)
        sent = [
            f"{'sent' if c.dir == SEND else 'received'} #{c.posted} {'to' if c.dir == SEND else 'from'} rank {c.peer}"
            for c in r.p2p
            if c.posted and c.peer != ANY_SOURCE
        ]
        story = [f"last collectives {last or 'none'}" if last or not sent else "", *sent]
        head = f"  rank {rank} ({r.host}, pid {r.pid}): step {r.steps}, {', '.join(p for p in story if p) or 'none'}; "
        if s.finished:
            how = r.exit.how if r.exit else ""
            if r.exception:
                return [head + f"raised {r.exception.type}: it left while the others still expect it"]
            if how in STOPPED:
                return [head + f"was {how} while the others still expect it"]
            return [head + "exited cleanly while the others still expect it (uneven batch counts?)"]
        if s.silent(self.ctx.now, self.ctx.limits):
            return [head + f"silent for {duration(s.silent_for(self.ctx.now))}", *rank_lines(r, 3, "    ")]
        stalled = f"stalled for {duration(r.t - r.stalled_since)}, " if r.stalled_since else ""
        return [head + stalled + "at:", *rank_lines(r, 4, "    ")]

    def _stuck_collective(self, gid: str, seq: int) -> Finding:
        view = self.groups[gid]
        members = [w for w in view.waits if w.seq == seq]
        age = max((m.age for m in members), default=0.0)
        op = next((_op_name(m) for m in members if m.op), None)
        what = f"collective #{seq}" + (f" ({op})" if op else "")
        timeout = view.sample.timeout
        left = f"; the {duration(timeout)} collective timeout fires in {duration(timeout - age)}" if timeout else ""
        summary = f"all ranks of {view.name} stuck in {what} for {duration(age)}, none behind"
        detail = [
            f"Every rank of {view.name} issued {what} and has waited {duration(age)}{left}.",
            "No rank is behind: the collective itself does not complete.",
            "What to do: suspect the transport or a device: NCCL's network (NCCL_DEBUG=INFO, "
            "NCCL_SOCKET_IFNAME), a GPU fault (dmesg, nvidia-smi -q), or an overloaded host.",
        ]
        return Finding(f"hang:{gid}", "hang", CRITICAL, [], summary, "\n".join(detail))

    def _stuck_message(self, node: Message) -> Finding:
        gid, src, dst, k = node
        waiting = [w for ws in self.waits.values() for w in ws if w.node == node]
        age = max(w.age for w in waiting)
        where = self._group_label(gid)
        summary = (
            f"rank {src}'s send #{k} to rank {dst} in {where} is posted on both ends and does not "
            f"complete after {duration(age)}"
        )
        detail = [
            f"Rank {src} posted send #{k} to rank {dst}, and rank {dst} its receive #{k} from rank {src}; "
            f"{rank_word(w.rank for w in waiting)} has waited in it {duration(age)}. Neither end is behind: "
            "the message does not arrive.",
            "What to do: suspect the link between the two ranks' hosts (NCCL_DEBUG=INFO, a firewall between "
            "nodes, NCCL_SOCKET_IFNAME), or sends and receives that disagree on tag, size or dtype.",
        ]
        return Finding(f"hang:{gid}:{src}>{dst}", "hang", CRITICAL, sorted({src, dst}), summary, "\n".join(detail))

    def _deadlock(self, ring: list[int]) -> Finding:
        lines = []
        for rank in ring[: MAX_SHOWN * 2]:
            for w in self.waits[rank]:
                awaited = [n for n in self.edges[w.node] if isinstance(n, int)]
                if not set(awaited) & set(ring):
                    continue
                lines.append(f"  rank {rank} waits in {self._what(w)} for {rank_word(awaited)}, {duration(w.age)}")
            stack = self.waits[rank][0].state.report.stack
            if stack:
                lines.append(f"    at {where(user_frame(stack) or stack[-1])}")
        collective = any(w.gid is not None for r in ring for w in self.waits[r])
        p2p = any(w.gid is None for r in ring for w in self.waits[r])
        groups = sorted({str(w.node[0]) for r in ring for w in self.waits[r]})
        if p2p and not collective:
            how = "their sends and receives are ordered so that each waits for the other"
            advice = (
                "What to do: a rank that receives before it sends waits for a peer doing the same. Post "
                "the pair together (batch_isend_irecv), or order them by stage (even stages send first, "
                "odd ones receive first); look for a branch on rank or stage that orders them differently."
            )
        else:
            how = (
                "their sends, receives and collectives are ordered differently"
                if p2p
                else ("they issue those groups' collectives in different orders")
            )
            advice = (
                "What to do: every rank must issue the collectives of overlapping groups in the same "
                "order, and post its sends and receives so that none waits for a reply first. Look for "
                "a code path that orders them by rank (pipeline stages, a branch on rank, an unordered "
                "dict of groups)."
            )
        where_ = "group" if len(groups) == 1 else "groups"
        summary = f"deadlock: {rank_word(ring)} wait for each other in {where_} {', '.join(groups)}: {how}"
        detail = [
            f"{rank_word(ring)} each wait for another of them, which waits in turn: a cycle nobody can leave.",
            *lines,
            advice,
        ]
        return Finding("hang:cycle", "hang", CRITICAL, ring, summary, "\n".join(detail))


def message_words(node: Message, rank: int, group: str) -> str:
    """The op ``rank`` waits in on message ``node``, from its own side."""
    _, src, dst, k = node
    if rank == src:
        return f"send #{k} to rank {dst} in {group}"
    peer = "any rank" if src == ANY_SOURCE else f"rank {src}"
    return f"recv #{k} from {peer} in {group}"


def _divergence_in(group: Group, ctx: Context) -> Finding | None:
    mismatch = _op_mismatch(group.waits)
    if mismatch:
        return _divergence(group, *mismatch, reason="op")
    if group.missing or group.live > len(group.waits) or not any(w.age >= ctx.hang_after for w in group.waits):
        return None
    by_seq = Counter(w.seq for w in group.waits)
    if len(by_seq) < 2:
        return None
    usual = by_seq.most_common(1)[0][0]
    odd = [w for w in group.waits if w.seq != usual]
    return _divergence(group, odd, [w for w in group.waits if w.seq == usual], reason="count")


def _op_name(w: Wait) -> str | None:
    """The op of the collective ``w`` waits in, from its rank's report."""
    if not w.op:
        return None
    return next((g.op for g in w.state.report.groups if g.id == w.gid), None)


def _op_mismatch(waiting: list[Wait]) -> tuple[list[Wait], list[Wait]] | None:
    """Ranks in flight at the same seq with different ops: (odd ones, the usual ones)."""
    by_seq: dict[int, list[Wait]] = {}
    for m in waiting:
        if m.op:
            by_seq.setdefault(m.seq, []).append(m)
    for members in by_seq.values():
        ops = Counter(m.op for m in members)
        if len(ops) > 1:
            usual = ops.most_common(1)[0][0]
            return [m for m in members if m.op != usual], [m for m in members if m.op == usual]
    return None


def _divergence(view: Group, odd: list[Wait], usual: list[Wait], reason: str) -> Finding:
    odd_ranks = sorted(m.rank for m in odd)
    usual_ranks = sorted(m.rank for m in usual)
    odd_m, usual_m = odd[0], usual[0]
    if reason == "op":
        what = (
            f"at collective #{odd_m.seq}, {rank_word(odd_ranks)} issued {_op_name(odd_m)} while "
            f"{rank_word(usual_ranks)} issued {_op_name(usual_m)}"
        )
        summary = f"{rank_word(odd_ranks)} in {_op_name(odd_m)}, the others in {_op_name(usual_m)} (#{odd_m.seq})"
    else:
        what = (
            f"{rank_word(odd_ranks)} issued {abs(odd_m.seq - usual_m.seq)} "
            f"{'more' if odd_m.seq > usual_m.seq else 'fewer'} collectives than {rank_word(usual_ranks)} "
            f"(#{odd_m.seq} against #{usual_m.seq}), and all wait"
        )
        summary = f"{rank_word(odd_ranks)} at collective #{odd_m.seq}, the others at #{usual_m.seq}"
    lines = [f"In {view.name}, {what}."]
    steps = Counter(m.state.steps for m in usual).most_common(1)[0][0]
    for m in sorted(odd, key=lambda m: m.rank)[:MAX_SHOWN]:
        r = m.state.report
        gap = f" (the others are at step {steps}: uneven batch counts?)" if r.steps != steps else ""
        top = r.stack[-1] if r.stack else None
        lines.append(f"  rank {r.rank} ({r.host}): step {r.steps}{gap}, at {where(top)}")
        lines.extend(stack_lines(r.stack, 3, "    "))
    lines.append(
        "What to do: every rank must issue the same collectives in the same order. Move the "
        "collective out of any `if rank == ...` branch, and give every rank the same number "
        "of batches (DistributedSampler(drop_last=True), equal shards for an IterableDataset)."
    )
    return Finding(f"divergence:{view.sample.id}", "divergence", CRITICAL, odd_ranks, summary, "\n".join(lines))
