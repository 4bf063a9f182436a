"""Stops across process groups: ``hang`` (ranks wait for a rank that does not come) and
``divergence`` (ranks issued different collectives, or different numbers of them).

A job of several groups (tensor, pipeline and data parallel; FSDP/HSDP; DeviceMesh) stops
as a whole within seconds of one rank stopping: its tensor-parallel peers wait for it, each
data-parallel group then waits for one of those peers, and so on. Judging each group alone
names victims. So the hang rule builds the wait-for relation over all groups: a rank
waiting in collective N of group G waits for the members of G that have not issued N. The
ranks at its end, waiting for nobody (stalled elsewhere, exited, silent, never heard), are
the root; everyone else is evidence. A relation that ends in a ring instead is a deadlock.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from distmon.monitor.alerts import CRITICAL, Finding
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.text import duration, rank_lines, rank_word, ranks_text, stack_lines, where
from distmon.monitor.state import JobState, RankState
from distmon.wire import STOPPED, GroupStatus, expand_runs

MAX_SHOWN = 4
"""Root ranks whose stacks the evidence shows."""
MAX_GROUPS_SHOWN = 6
"""Waiting groups listed in the evidence; the rest are counted."""


@dataclass(slots=True)
class Wait:
    """A live rank waiting in its oldest incomplete collective."""

    rank: int
    state: RankState
    group: GroupStatus
    age: float
    """How long that collective has been incomplete."""

    @property
    def seq(self) -> int:
        return self.group.completed + 1


@dataclass
class Group:
    """What the relation needs of one group that ranks wait in, gathered without a record
    per member: at 8192 ranks in four groups each, a tick must not allocate 32,768 objects."""

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


def group_name(gid: str, g: GroupStatus) -> str:
    """``group 7 (mesh_tp, ranks 4-5)``: the description users gave, and always the ranks."""
    desc = f"{g.desc}, " if g.desc else ""
    return f"group {gid} ({desc}ranks {ranks_text(expand_runs(g.ranks))})"


def _live(s: RankState, ctx: Context) -> bool:
    """Still reporting: not exited and not silent for longer than a few intervals."""
    return not s.finished and s.silent_for(ctx.now) < max(ctx.limits.lost_floor, 4 * s.report.interval)


def waits(job: JobState, ctx: Context) -> dict[int, Wait]:
    """Each live rank's oldest incomplete collective. In a healthy job only the few ranks
    caught inside a collective have one, so this pass is all a healthy tick costs."""
    found = {}
    for s in job.ranks.values():
        lag = ctx.now - s.received + s.report.t
        oldest, since = None, 0.0
        for g in s.report.groups:
            if g.enqueued > g.completed and g.since is not None and (oldest is None or g.since < since):
                oldest, since = g, g.since
        if oldest is not None and _live(s, ctx):
            found[s.rank] = Wait(s.rank, s, oldest, lag - since)
    return found


def hang_and_divergence(job: JobState, ctx: Context) -> list[Finding]:
    waiting = waits(job, ctx)
    hang_after = ctx.hang_after
    if not any(w.age >= hang_after or w.group.op for w in waiting.values()):
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


def _groups(job: JobState, waiting: dict[int, Wait], ctx: Context) -> dict[str, Group]:
    """The groups ranks wait in, with the members behind the latest collective waited in."""
    groups: dict[str, Group] = {}
    latest: dict[str, int] = {}
    for w in waiting.values():
        gid = w.group.id
        if gid not in groups:
            groups[gid] = Group(w.group)
        groups[gid].waits.append(w)
        latest[gid] = max(latest.get(gid, 0), w.seq)
    for s in job.ranks.values():
        live = _live(s, ctx)
        for g in s.report.groups:
            group = groups.get(g.id)
            if group is not None:
                group.reporting += 1
                group.live += live
                if g.enqueued < latest[g.id]:
                    group.behind.append((s.rank, g.enqueued))
    for group in groups.values():
        if group.reporting < group.sample.size:
            group.missing = [r for r in expand_runs(group.sample.ranks) if r not in job.ranks]
    return groups


Node = int | tuple[str, int]
"""A rank, or collective N of group G as ``(G, N)``: what the ranks waiting in it wait for."""


class WaitFor:
    """The wait-for relation of one moment, and the incidents at its ends.

    Each live rank waits in at most one collective, its oldest incomplete one. That node
    waits for the members that have not issued it. Following the relation from the ranks
    that have waited too long ends in one of: a rank that waits for nobody (the root of a
    hang), a collective every member issued that still does not complete (the transport),
    a group whose ranks diverged (its own alert), or a ring of ranks (a deadlock).
    """

    def __init__(
        self, job: JobState, waiting: dict[int, Wait], groups: dict[str, Group], diverged: set[str], ctx: Context
    ) -> None:
        self.job = job
        self.waits = waiting
        self.groups = groups
        self.ctx = ctx
        self.diverged = diverged
        """Groups with a divergence alert of their own: the ends of the relation they hold."""
        self.edges: dict[Node, list[Node]] = {}
        for rank, w in waiting.items():
            node = (w.group.id, w.seq)
            self.edges[rank] = [node]
            if node not in self.edges:
                self.edges[node] = [] if w.group.id in diverged else list(groups[w.group.id].laggards(w.seq))

    def findings(self) -> list[Finding]:
        hang_after = self.ctx.hang_after
        stuck = [r for r, m in self.waits.items() if m.age >= hang_after]
        if not stuck:
            return []
        reach = self._reachable(stuck)
        roots = sorted(n for n in reach if isinstance(n, int) and n not in self.waits)
        findings = []
        if roots:
            findings.append(self._hang(roots, reach))
        for node in sorted((n for n in reach if isinstance(n, tuple) and not self.edges[n]), key=str):
            gid, seq = node
            if gid not in self.diverged:
                findings.append(self._stuck_collective(gid, seq))
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
        """Ranks on a cycle of the relation: those that can reach no end at all."""
        ends = {n for n in reach if not self.edges.get(n)}
        waiters: dict[Node, list[Node]] = defaultdict(list)
        for node in reach:
            for nxt in self.edges.get(node, ()):
                waiters[nxt].append(node)
        ending: set[Node] = set(ends)
        todo = list(ends)
        while todo:
            for prev in waiters[todo.pop()]:
                if prev not in ending:
                    ending.add(prev)
                    todo.append(prev)
        trapped = reach - ending
        on_cycle = [n for n in trapped if isinstance(n, int) and n in self._reachable_from_successors(n, trapped)]
        return sorted(on_cycle)

    def _reachable_from_successors(self, node: Node, within: set[Node]) -> set[Node]:
        seen: set[Node] = set()
        todo = [n for n in self.edges.get(node, ()) if n in within]
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(x for x in self.edges.get(n, ()) if x in within)
        return seen

    # --- what a person reads -------------------------------------------------------------

    def _waiting(self, roots: list[int], reach: set[Node]) -> list[tuple[float, str, int, list[Wait]]]:
        """(oldest wait, group, collective, waiting members) per collective waited in: those
        waiting for the roots themselves first, then those waiting for them, and so on."""
        by_node: dict[tuple[str, int], list[Wait]] = defaultdict(list)
        for rank, m in self.waits.items():
            if rank in reach:
                by_node[(m.group.id, m.seq)].append(m)
        hops = self._hops(roots, reach)
        rows = [(max(m.age for m in ms), gid, seq, ms) for (gid, seq), ms in by_node.items()]
        return sorted(rows, key=lambda row: (hops.get((row[1], row[2]), len(reach)), -len(row[3]), -row[0], row[1]))

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

    def _collective(self, gid: str, seq: int, members: list[Wait]) -> str:
        op = next((m.group.op for m in members if m.group.op), None)
        return f"collective #{seq}{f' ({op})' if op else ''} of {self.groups[gid].name}"

    def _hang(self, roots: list[int], reach: set[Node]) -> Finding:
        rows = self._waiting(roots, reach)
        waiting = [m.rank for row in rows for m in row[3]]
        oldest = max(row[0] for row in rows)
        _, gid, seq, members = rows[0]
        left = min((ms[0].group.timeout - age for age, _, _, ms in rows if ms[0].group.timeout), default=None)
        countdown = f"; the earliest collective timeout fires in {duration(left)}" if left is not None else ""
        more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
        summary = (
            f"hang: {rank_word(roots)} holds up the job: {len(waiting)} "
            f"{'rank waits' if len(waiting) == 1 else 'ranks wait'} for it, in "
            f"{self._collective(gid, seq, members)}{more}, for up to {duration(oldest)}"
        )
        detail = [
            f"{rank_word(roots)} waits for nobody, and every waiting rank waits for it, directly or "
            f"through a peer: the oldest wait is {duration(oldest)}{countdown}.",
        ]
        for rank in roots[:MAX_SHOWN]:
            detail.extend(self._root_lines(rank))
        if len(roots) > MAX_SHOWN:
            detail.append(f"  ... and {len(roots) - MAX_SHOWN} more: {ranks_text(roots)}")
        detail.append("Waiting:")
        for age, gid, seq, members in rows[:MAX_GROUPS_SHOWN]:
            awaited = [n for n in self.edges[(gid, seq)] if isinstance(n, int)]
            for_whom = f" for {rank_word(awaited)}" if awaited else ""
            detail.append(
                f"  {rank_word(m.rank for m in members)} in {self._collective(gid, seq, members)}"
                f"{for_whom}, {duration(age)}"
            )
        if len(rows) > MAX_GROUPS_SHOWN:
            rest = rows[MAX_GROUPS_SHOWN:]
            detail.append(f"  ... and {sum(len(r[3]) for r in rest)} more ranks in {len(rest)} more collectives")
        detail.append(
            f"What to do: find why {rank_word(roots)} stopped short of its next collective; the stack "
            "shows where it is. The usual causes: a code path only some ranks take (if rank == 0: "
            "checkpoint, evaluation, logging), I/O or a lock on one rank, or a rank with fewer "
            "batches. `py-spy dump --pid PID` on its host shows every thread."
        )
        return Finding("hang", "hang", CRITICAL, roots, summary, "\n".join(detail))

    def _root_lines(self, rank: int) -> list[str]:
        s = self.job.ranks.get(rank)
        if s is None:
            return [f"  rank {rank}: never reported (not monitored, or not started)"]
        r = s.report
        last = ", ".join(f"#{g.enqueued} in {g.desc or 'group ' + g.id}" for g in r.groups if g.enqueued) or "none"
        head = f"  rank {rank} ({r.host}, pid {r.pid}): step {r.steps}, last collectives {last}; "
        if s.finished:
            how = r.exit.how if r.exit else ""
            if r.exception:
                return [head + f"raised {r.exception.type}: it left while the others still expect it"]
            if how in STOPPED:
                return [head + f"was {how} while the others still expect it"]
            return [head + "exited cleanly while the others still expect it (uneven batch counts?)"]
        if s.silent_for(self.ctx.now) >= max(self.ctx.limits.lost_floor, 4 * r.interval):
            return [head + f"silent for {duration(s.silent_for(self.ctx.now))}", *rank_lines(r, 3, "    ")]
        stalled = f"stalled for {duration(r.t - r.stalled_since)}, " if r.stalled_since else ""
        return [head + stalled + "at:", *rank_lines(r, 4, "    ")]

    def _stuck_collective(self, gid: str, seq: int) -> Finding:
        view = self.groups[gid]
        members = [w for w in view.waits if w.seq == seq]
        age = max((m.age for m in members), default=0.0)
        op = next((m.group.op for m in members if m.group.op), None)
        what = f"collective #{seq}" + (f" ({op})" if op else "")
        timeout = view.sample.timeout
        left = f"; the {duration(timeout)} collective timeout fires in {duration(timeout - age)}" if timeout else ""
        summary = f"hang: all ranks of {view.name} stuck in {what} for {duration(age)}, none behind"
        detail = [
            f"Every rank of {view.name} issued {what} and has waited {duration(age)}{left}.",
            "No rank is behind: the collective itself does not complete.",
            "What to do: suspect the transport or a device: NCCL's network (NCCL_DEBUG=INFO, "
            "NCCL_SOCKET_IFNAME), a GPU fault (dmesg, nvidia-smi -q), or an overloaded host.",
        ]
        return Finding(f"hang:{gid}", "hang", CRITICAL, [], summary, "\n".join(detail))

    def _deadlock(self, ring: list[int]) -> Finding:
        lines = []
        for rank in ring[: MAX_SHOWN * 2]:
            m = self.waits[rank]
            awaited = [n for n in self.edges[(m.group.id, m.seq)] if isinstance(n, int)]
            op = f" ({m.group.op})" if m.group.op else ""
            lines.append(
                f"  rank {rank} waits in collective #{m.seq}{op} of {self.groups[m.group.id].name} "
                f"for {rank_word(awaited)}, {duration(m.age)}"
            )
            top = m.state.report.stack[-1] if m.state.report.stack else None
            if top is not None:
                lines.append(f"    at {where(top)}")
        groups = sorted({self.waits[r].group.id for r in ring})
        summary = (
            f"hang: deadlock: {rank_word(ring)} wait for each other across groups "
            f"{', '.join(groups)}: they issue those groups' collectives in different orders"
        )
        detail = [
            f"{rank_word(ring)} each wait in a collective that another of them has not issued, "
            "because it waits in a collective of another group first: a cycle nobody can leave.",
            *lines,
            "What to do: every rank must issue the collectives of overlapping groups in the same "
            "order. Look for a code path that calls them in a rank-dependent order (pipeline "
            "stages, a branch on rank, an unordered dict of groups).",
        ]
        return Finding("hang:cycle", "hang", CRITICAL, ring, summary, "\n".join(detail))


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


def _op_mismatch(waiting: list[Wait]) -> tuple[list[Wait], list[Wait]] | None:
    """Ranks in flight at the same seq with different ops: (odd ones, the usual ones)."""
    by_seq: dict[int, list[Wait]] = {}
    for m in waiting:
        if m.group.op:
            by_seq.setdefault(m.seq, []).append(m)
    for members in by_seq.values():
        ops = Counter(m.group.op for m in members)
        if len(ops) > 1:
            usual = ops.most_common(1)[0][0]
            return [m for m in members if m.group.op != usual], [m for m in members if m.group.op == usual]
    return None


def _divergence(view: Group, odd: list[Wait], usual: list[Wait], reason: str) -> Finding:
    odd_ranks = sorted(m.rank for m in odd)
    usual_ranks = sorted(m.rank for m in usual)
    odd_m, usual_m = odd[0], usual[0]
    if reason == "op":
        what = (
            f"at collective #{odd_m.seq}, {rank_word(odd_ranks)} issued {odd_m.group.op} while "
            f"{rank_word(usual_ranks)} issued {usual_m.group.op}"
        )
        summary = (
            f"divergence: {rank_word(odd_ranks)} in {odd_m.group.op}, the others in {usual_m.group.op} (#{odd_m.seq})"
        )
    else:
        what = (
            f"{rank_word(odd_ranks)} issued {abs(odd_m.seq - usual_m.seq)} "
            f"{'more' if odd_m.seq > usual_m.seq else 'fewer'} collectives than {rank_word(usual_ranks)} "
            f"(#{odd_m.seq} against #{usual_m.seq}), and all wait"
        )
        summary = f"divergence: {rank_word(odd_ranks)} at collective #{odd_m.seq}, the others at #{usual_m.seq}"
    lines = [f"In {view.name}, {what}."]
    steps = Counter(m.state.report.steps for m in usual).most_common(1)[0][0]
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
