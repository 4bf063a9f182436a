"""``hang``: ranks wait for a rank that does not come, across every process group and
point-to-point channel.

A job of several groups (tensor, pipeline and data parallel; FSDP/HSDP; DeviceMesh) stops
as a whole within seconds of one rank stopping: its tensor-parallel peers wait for it, its
pipeline neighbours block in a send or receive to it, each data-parallel group then waits
for one of those, and so on. Judging each group alone names victims. So the hang is read off
one wait-for relation over all groups and all point-to-point traffic
(:mod:`distmon.monitor.rules.waitfor` builds it). The ranks at its end, waiting for nobody
(stalled elsewhere, exited, silent, never heard), are the root; everyone else is evidence. A
collective every member issued, or a send and its receive both posted, that still does not
complete, is the transport. A cycle of the relation (two collectives issued in different
orders, two blocking receives facing each other) is a deadlock. A group whose ranks diverged
(:mod:`distmon.monitor.rules.divergence`) has its own alert, and the relation ends there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import PurePath

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.outside.sight import GONE
from distmon.monitor.outside.verdicts import Verdict
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.divergence import divergence_in
from distmon.monitor.rules.failures import gave_up_waiting
from distmon.monitor.rules.hang_words import (
    Deadlock,
    Hang,
    InRing,
    Root,
    StuckCollective,
    StuckMessage,
    WaitedIn,
    WaitLine,
    deadlock_words,
    hang_words,
    stuck_collective_words,
    stuck_message_words,
)
from distmon.monitor.rules.links import dropped_over
from distmon.monitor.rules.nodes import node_ranks
from distmon.monitor.rules.process import (
    Look,
    all_working,
    doing_nothing,
    ended_unheard,
    gil_held,
    keep_looking,
    look_at,
    said,
)
from distmon.monitor.rules.routine import Habit, Mark
from distmon.monitor.rules.waitfor import (
    Collective,
    Node,
    Transfer,
    Wait,
    WaitFor,
    collect_groups,
    current,
    wait_op,
    waits,
)
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Finding
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.columns import I8
from distmon.monitor.state.consequences import LOST_PEER
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.limits import pause_after
from distmon.monitor.state.whereabouts import user_frame
from distmon.monitor.state.words import group_label, group_name, timeout_left
from distmon.wire import ANY_SOURCE

MAX_SHOWN = 4
"""Root ranks whose stacks the evidence shows."""
MAX_GROUPS_SHOWN = 6
"""Collectives and messages waited in that the evidence lists; the rest are counted."""


def hang_and_divergence(job: JobState, ctx: Context) -> list[Finding]:
    live = job.live(ctx.now)
    waiting = waits(job, ctx, live)
    if not waiting:
        return gave_up_waiting(job, ctx)
    looked_after = ctx.looked_after
    if not any(w.age >= looked_after or w.op for w in waiting):
        return []
    groups = collect_groups(job, waiting, live)
    findings = []
    diverged = set()
    for gid in sorted(groups):
        found = divergence_in(groups[gid], ctx)
        if found:
            diverged.add(gid)
            findings.append(found)
    findings.extend(Incidents(WaitFor(job, current(job, waiting, groups, ctx), groups, diverged), ctx).findings())
    return findings


def observe(
    job: JobState,
    ctx: Context,
    roots: list[int],
    waited: float,
    verdicts: dict[int, Verdict | None],
    paused: Callable[[], bool],
) -> Habit | None:
    """Tell the job's routine that ``roots`` have held the others up for ``waited`` seconds,
    each where its report's stack and ``verdicts`` say (``paused``: whether the waits show the
    job standing still, not its pace); the habit this pause is, if the job takes it usually."""
    if len(roots) > MAX_SHOWN:
        return None
    marks, steps = {}, {}
    for rank in roots:
        s = job.ranks.get(rank)
        if s is None:
            return None
        frame = user_frame(s.report.stack or [])
        verdict = verdicts.get(rank)
        doing = verdict.habit if verdict is not None else "silent" if s.silent(ctx.now) else None
        words = verdict.summary.removeprefix("is ") if verdict is not None else ""
        marks[rank] = Mark(f"{PurePath(frame.file).name}:{frame.func}" if frame else None, doing, words)
        steps[rank] = s.steps
    return ctx.routine.observe(roots, waited, marks, steps, paused())


@dataclass
class _Row:
    """The ranks of the relation waiting in one collective or message, gathered wait by wait."""

    age: float
    node: Node
    ranks: I8
    wait: Wait


class Incidents:
    """The incidents at the ends of the relation, decided.

    Following the relation from the ranks that have waited too long ends in one of: a rank
    that waits for nobody (the root of a hang), a collective every member issued or a
    message both ends posted that still does not complete (the transport), a group whose
    ranks diverged (its own alert), or a cycle (a deadlock). Each is decided here as facts,
    severity included, and worded by :mod:`~distmon.monitor.rules.hang_words`.
    """

    def __init__(self, relation: WaitFor, ctx: Context) -> None:
        self.relation = relation
        self.job = relation.job
        self.groups = relation.groups
        self.ctx = ctx

    def findings(self) -> list[Finding]:
        hang_after = self.ctx.hang_after
        if not any(w.age >= hang_after for w in self.relation.all):
            return self._early()
        _, reach = self._relation(hang_after)
        roots = self._roots(reach)
        findings = []
        if roots:
            waited = max(w.age for w in self.relation.all if w.node in reach)
            looks = {rank: self._look(rank, waited=waited) for rank in roots[:MAX_SHOWN]}
            habit = self._observe(roots, reach, {rank: look.verdict for rank, look in looks.items()})
            if habit is None:
                findings.append(self._hang(roots, reach, looks))
            elif self._outlasts(habit, reach):
                self.ctx.routine.outlasted(roots)
                findings.append(self._hang(roots, reach, looks, habit=habit))
        for node in sorted((n for n in reach if isinstance(n, tuple) and not self.relation.edges[n]), key=str):
            # a collective or message that waits for nobody yet does not complete
            if len(node) == 2 and node[0] not in self.relation.diverged and self._everyone_waited(node, hang_after):
                gid, seq = node
                if not self._link_dropped(gid, seq) and not self._member_unheard(gid, seq):
                    findings.append(self._stuck_collective(gid, seq, reach))
            elif len(node) == 4 and ANY_SOURCE not in node[1:3]:
                findings.append(self._stuck_message(node))
        ring = self.relation.ring(reach)
        if ring:
            findings.append(self._deadlock(ring))
        return findings

    def _relation(self, after: float) -> tuple[list[Wait], set[Node]]:
        """The waits at least ``after`` old (and the sends and receives of their ranks), and
        what the relation reaches from them."""
        first = [w for w in self.relation.all if w.age >= after]
        stuck = np.zeros(len(self.relation.collective), dtype=bool)
        """The ranks that have waited too long."""
        for w in first:
            stuck[w.ranks[w.ages >= after]] = True
        first += [w for rank, mine in self.relation.p2p_of.items() if stuck[rank] for w in mine if w.age < after]
        return first, self.relation.reachable(first)

    @cached_property
    def _node_ranks(self) -> set[int]:
        return set(node_ranks(self.job, self.ctx, training=False).tolist())

    @cached_property
    def _ended(self) -> set[int]:
        """Ranks whose process ended without a word while they reported on: ``rank_lost``'s."""
        return set(ended_unheard(self.job, self.ctx).tolist())

    def _roots(self, reach: set[Node]) -> list[int]:
        """The ranks of ``reach`` that wait for nobody and are this incident's
        (:meth:`_own_incident`): decided as arrays where the answer needs no more (a
        collective of 131,072 ranks may reach tens of thousands yet to enter it), rank by
        rank where it does (silent: its process asked about; a silent node; the monitor
        behind). Never a rank that raised on losing a peer: it left because another did, and
        that one is the incident (the job coming down, a lost rank, the hang before it)."""
        ranks = np.array(sorted(n for n in reach if isinstance(n, int) and not self.relation.waiting(n)), np.int64)
        if not len(ranks):
            return []
        present = self.job.heard(ranks)
        ours = np.full(len(ranks), self.ctx.behind is None)
        known = ranks[present]
        finished = self.job.flagged(wire.FLAG_EXITED, known)
        left = self.job.flagged(wire.FLAG_RAISED, known) & self.job.consequences(LOST_PEER, known)
        plain = finished | (~self.job.held_up(known) & ~self.job.silent(self.ctx.now, known))
        held = ~finished & self.job.held_up(known)
        if self.ctx.behind is None:
            doubt = ~plain & ~held
            doubt |= np.isin(known, list(self._node_ranks | self._ended)) & ~finished
        else:
            doubt = np.ones(len(known), dtype=bool)
        doubt &= ~left
        decided = np.where(held | left, False, True)
        for i in np.flatnonzero(doubt).tolist():
            decided[i] = self._own_incident(int(known[i]))
        ours[present] = decided & ~self._catching_up(known, reach)
        roots: list[int] = ranks[ours].tolist()
        return roots

    def _catching_up(self, ranks: I8, reach: set[Node]) -> npt.NDArray[np.bool_]:
        """Of ``ranks``, those that were waiting themselves when the oldest of these waits began,
        and came out of it since (:meth:`JobState.freed`), less than the hang threshold ago: the
        rank they waited for moved on, and they are on their way; the waits are that one's. Where
        one of them stops again, it is named once it has held the others up that long itself."""
        oldest = max((w.age for w in self.relation.all if w.node in reach), default=0.0)
        within = min(self.ctx.hang_after, oldest)
        return self.job.freed(ranks, self.ctx.now, lasted=self.ctx.looked_after, within=within)

    def _early(self) -> list[Finding]:
        """Before a wait is a hang: the ranks that waits of half the early threshold lead to
        are looked at from outside, and once a wait reaches it, ranks that the prober has
        seen do nothing for a second (stopped, asleep, blocked, on a lock, holding the GIL)
        are named, as a warning saying so (not while a report is behind, :meth:`_behind`). A rank
        that works, or that the prober has yet to see, waits for the hang threshold as before; a
        pause the job usually takes (:mod:`~distmon.monitor.rules.routine`) is named only once it
        outlasts itself."""
        first, reach = self._relation(self.ctx.looked_after)
        if not first or self._behind(reach):
            return []
        roots = self._roots(reach)
        if not roots or len(roots) > MAX_SHOWN:
            return []
        views = [self.job.ranks.get(rank) for rank in roots]
        if any(s is not None and self._maybe_waiting(s) for s in views):
            for s in views:  # its eye goes on looking, to judge it once its report is old news
                if s is not None:
                    keep_looking(s, self.ctx)
            return []
        waited = max(w.age for w in first)
        # the first call for a rank starts the prober looking
        seen = [doing_nothing(s, self.ctx, waited) if s is not None and not s.finished else None for s in views]
        verdicts = {rank: verdict for rank, verdict in zip(roots, seen, strict=True) if verdict is not None}
        if self._observe(roots, reach, dict(verdicts)) is not None:
            return []  # a pause the job usually takes: it outlasts itself only past the hang threshold
        if len(verdicts) < len(roots) or waited < self.ctx.early_after:
            return []
        looks = {rank: self._look(rank, verdicts[rank]) for rank in roots}
        return [self._hang(roots, reach, looks, early=True)]

    def _behind(self, reach: set[Node]) -> bool:
        """Some rank the waits lead to reports a wait in a collective a member has completed since:
        its report is behind (held up on the way, its node's relay late or cut off), and where it
        stands now, and so who holds whom up, is not known. No rank is named early on such a
        picture: the hang threshold, or the node's silence, decides."""
        return any(isinstance(n, tuple) and len(n) == 2 and self.groups[n[0]].completed >= n[1] for n in reach)

    def _maybe_waiting(self, s: RankState) -> bool:
        """Inside a collective or a send its report does not call a wait yet: it may wait
        itself. Not once that report is overdue: it is old news."""
        cols, limits = self.job.cols, self.ctx.limits
        inside = bool(cols.in_collective[s.rank] or cols.in_p2p[s.rank])
        return inside and s.silent_for(self.ctx.now) <= limits.overdue_after(float(cols.interval[s.rank]))

    def _observe(self, roots: list[int], reach: set[Node], verdicts: dict[int, Verdict | None]) -> Habit | None:
        """Tell the job's routine that ``roots`` hold the others up, each where its report's
        stack and ``verdicts`` say; the habit this pause is, if the job takes it usually."""
        mine = [w for w in self.relation.all if w.node in reach]
        waited = max((w.age for w in mine), default=0.0)
        return observe(self.job, self.ctx, roots, waited, verdicts, lambda: self._paused(mine))

    def _paused(self, waits: list[Wait]) -> bool:
        """Whether the waiting ranks' own reports show one of them waiting longer than a few of
        the job's steps (:func:`~distmon.monitor.state.limits.pause_after`): how long it had
        waited when it reported, not how old its wait looks by the monitor's clock, which
        ages between two reports even if it ended a moment after the first. Before the job's
        first step it has no pace to keep: any wait is a pause."""
        if self.ctx.pace is None:
            return True
        received = self.job.cols.received
        shown = (float(np.max(w.ages - (self.ctx.now - received[w.ranks]))) for w in waits)
        return max(shown, default=0.0) > pause_after(self.ctx.pace)

    def _outlasts(self, habit: Habit, reach: set[Node]) -> bool:
        waited = max((w.age for w in self.relation.all if w.node in reach), default=0.0)
        return waited > habit.allowance(self.ctx.hang_after)

    def _everyone_waited(self, node: Collective, hang_after: float) -> bool:
        """Every rank in collective ``node`` has waited in it long enough: one that has just
        issued it (a culprit come back) lets it complete any moment, it is not stuck; nor is
        one a member has completed (the waiters' reports predate it)."""
        gid, seq = node
        group = self.groups[gid]
        if group.completed >= seq:
            return False
        return min(float(w.ages.min()) for w in group.waits if w.seq == seq) >= hang_after

    def _own_incident(self, rank: int) -> bool:
        """Whether the hang names ``rank``: not a rank whose process is gone (``rank_lost``
        names it), nor one whose node fell silent as a whole (``node_lost`` names it), nor,
        while the monitor is behind, one it has never heard from or whose latest report it
        has is overdue (:meth:`_stale`: its reports may be dropped, or still queued), nor one
        whose latest report was held up on the way
        (:meth:`~distmon.monitor.state.job.JobState.held_up`): named once its reports come on
        time and still show it holding the others up."""
        s = self.job.ranks.get(rank)
        if s is None:
            return self.ctx.behind is None
        if s.finished:
            return True
        if rank in self._node_ranks:
            return False  # its node fell silent as a whole: node_lost names it
        if rank in self._ended:
            return False  # its process ended without a word: rank_lost names it
        if self.ctx.behind is not None and self._stale(rank):
            return False
        if self.job.held_up(np.array([rank]))[0]:
            return False  # its report is old news: held up on the way, it shows where the rank was
        if not s.silent(self.ctx.now):
            return True
        try:
            return self.ctx.probe is None or self.ctx.probe(*self.job.process_of(rank)) != GONE
        except Exception:
            return True

    def _stale(self, rank: int) -> bool:
        """Its latest report is overdue (:meth:`~distmon.monitor.state.limits.Thresholds.overdue_after`):
        sent that long ago, by its own clock set against the monitor's (a report taken in late is
        old), or arrived that long ago."""
        c, offset = self.job.cols, self.ctx.behind.offset if self.ctx.behind is not None else 0.0
        sent_ago = self.ctx.now - float(c.t[rank]) - offset
        overdue = self.ctx.limits.overdue_after(float(c.interval[rank]))
        return max(sent_ago, float(self.ctx.now - c.received[rank])) > overdue

    def _waiting(self, roots: list[int], reach: set[Node]) -> list[_Row]:
        """A row per collective or message of the relation that waits for the roots, with every
        rank waiting in it, however long it has (a rank that came in last waits for the roots
        as much: counted only once its wait reached the threshold, a rank would drop out of the
        alert as it turned critical): those waiting for the roots themselves first, then those
        waiting for them, and so on."""
        rows: dict[Node, _Row] = {}
        joined = self.relation.joined(reach)
        for w in self.relation.all:
            if w.node not in joined or not len(w.ranks):
                continue
            ranks, age = w.ranks, float(w.ages.max())
            row = rows.get(w.node)
            if row is None:
                rows[w.node] = _Row(age, w.node, ranks, w)
            else:
                row.ranks, row.age = np.concatenate([row.ranks, ranks]), max(row.age, age)
        hops = self.relation.hops(roots, joined)
        return sorted(
            rows.values(), key=lambda row: (hops.get(row.node, len(joined)), -len(row.ranks), -row.age, str(row.node))
        )

    def _group_label(self, gid: str) -> str:
        view = self.groups.get(gid)
        if view is not None:
            return view.name
        sample = self.job.group(wire.name_hash(gid))
        return group_name(gid, sample) if sample is not None else group_label(gid, None)

    def _place(self, w: Wait) -> WaitedIn:
        if w.gid is not None:
            group = self.groups[w.gid]
            return WaitedIn(group.name, w.seq, next((wait_op(m) for m in group.waits if m.op), None))
        return WaitedIn(self._group_label(w.node[0]), message=w.node, rank=w.rank)  # type: ignore[arg-type]

    def _line(self, row: _Row) -> WaitLine:
        awaited = tuple(n for n in self.relation.edges[row.node] if isinstance(n, int))
        return WaitLine(row.age, row.ranks, self._place(row.wait), awaited)

    def _hang(
        self,
        roots: list[int],
        reach: set[Node],
        looks: dict[int, Look],
        early: bool = False,
        habit: Habit | None = None,
    ) -> Finding:
        """The hang's alert, with ``looks`` at the roots; ``early``, named before the hang
        threshold: a warning saying what they do; ``habit``, the usual pause this one outlasts."""
        rows = self._waiting(roots, reach)
        samples = [(row.age, self.groups[row.wait.gid].sample) for row in rows if row.wait.gid is not None]
        left = min((t for age, sample in samples if (t := timeout_left(sample, age)) is not None), default=None)
        shortest = min((sample.timeout for _, sample in samples if sample.timeout), default=None)
        near = left is not None and shortest is not None and left <= self.ctx.limits.near_timeout * shortest
        working = all_working(list(looks.values())) and not near
        hang = Hang(
            severity=WARNING if working or early else CRITICAL,
            roots=tuple(roots),
            shown=tuple(self._root(rank, looks[rank]) for rank in roots[:MAX_SHOWN]),
            lines=tuple(self._line(row) for row in rows[:MAX_GROUPS_SHOWN]),
            places=len(rows),
            unshown=sum(len(row.ranks) for row in rows[MAX_GROUPS_SHOWN:]),
            waiting=len(distinct(np.concatenate([row.ranks for row in rows]))),
            oldest=max(row.age for row in rows),
            timeout_left=left,
            early=early,
            working=working,
            hang_after=self.ctx.hang_after,
            habit=habit,
        )
        summary, detail = hang_words(hang)
        doing = said(self.job, roots, self.ctx, looks)
        return Finding("hang", AlertKind.HANG, hang.severity, roots, summary, detail, doing)

    def _look(self, rank: int, verdict: Verdict | None = None, waited: float | None = None) -> Look:
        """Rank ``rank``'s process over the ``waited`` seconds the others waited for it, its
        stack taken from outside once its reports are overdue; ``verdict``, what it was named
        early for, in place of the look's."""
        s = self.job.ranks.get(rank)
        if s is None:
            return Look(verdict)
        silent = s.silent(self.ctx.now) or gil_held(s, self.ctx)
        look = look_at(s, self.ctx, silent=silent, waited=waited)
        return look if verdict is None else replace(look, verdict=verdict, pending=False)

    def _root(self, rank: int, look: Look) -> Root:
        s = self.job.ranks.get(rank)
        if s is None:
            return Root(rank, look)
        silent_for = s.silent_for(self.ctx.now) if s.silent(self.ctx.now) else None
        return Root(rank, look, s.report, s.finished, silent_for)

    def _link_dropped(self, gid: str, seq: int) -> bool:
        """A link of a node of the collective's members went down while they waited in it and
        came back less than a hang threshold ago: the link's incident (``link_flapping``, or no
        alarm for one drop), not a collective that does not complete."""
        members = [w for w in self.groups[gid].waits if w.seq == seq]
        hosts = {self.job.host_name(int(h)) for h in distinct(self.job.cols.host[self._members(gid, seq)])}
        began = self.ctx.now - max((w.age for w in members), default=0.0)
        return dropped_over(self.job, hosts, began, self.ctx.now, self.ctx.hang_after)

    def _member_unheard(self, gid: str, seq: int) -> bool:
        """A member of the collective is on a node fallen silent, or about to be, or its process
        ended without a word: its last report, in the collective, is old news, and the incident
        is its node's (``node_lost``) or its own (``rank_lost``), not the transport's."""
        return bool(np.isin(self._members(gid, seq), list(self._node_ranks | self._ended)).any())

    def _members(self, gid: str, seq: int) -> I8:
        """The ranks waiting in collective ``seq`` of group ``gid``."""
        members = [w.ranks for w in self.groups[gid].waits if w.seq == seq]
        return np.unique(np.concatenate(members)) if members else np.zeros(0, dtype=np.int64)

    def _stuck_collective(self, gid: str, seq: int, reach: set[Node]) -> Finding:
        """Every member issued it and it does not complete. Its members that are also what
        other waits wait for are suspects: their peers in this group went on, they did not."""
        view = self.groups[gid]
        members = [w for w in view.waits if w.seq == seq]
        age = max((m.age for m in members), default=0.0)
        op = next((wait_op(m) for m in members if m.op), None)
        inside = {int(r) for m in members for r in m.ranks}
        suspects = sorted(inside & self.relation.short_of(reach))
        fires = timeout_left(view.sample, age)
        stuck = StuckCollective(WaitedIn(view.name, seq, op), age, view.sample.timeout, fires, tuple(suspects))
        summary, detail = stuck_collective_words(stuck)
        return Finding(
            f"hang:{gid}", AlertKind.HANG, CRITICAL, suspects, summary, detail, said(self.job, suspects, self.ctx)
        )

    def _stuck_message(self, node: Transfer) -> Finding:
        gid, src, dst, _ = node
        waiting = [w for w in self.relation.all if w.node == node]
        age = max(w.age for w in waiting)
        ranks = np.concatenate([w.ranks for w in waiting])
        summary, detail = stuck_message_words(StuckMessage(node, self._group_label(gid), age, ranks))
        ends = sorted({src, dst})
        doing = said(self.job, ends, self.ctx)
        return Finding(f"hang:{gid}:{src}>{dst}", AlertKind.HANG, CRITICAL, ends, summary, detail, doing)

    def _deadlock(self, ring: list[int]) -> Finding:
        shown = []
        for rank in ring[: MAX_SHOWN * 2]:
            lines = []
            for w in self.relation.waits_of(rank):
                awaited = tuple(n for n in self.relation.edges[w.node] if isinstance(n, int))
                if set(awaited) & set(ring):
                    age = float(w.ages[w.ranks == rank][0])
                    lines.append(WaitLine(age, np.array([rank], dtype=np.int64), self._place(w), awaited))
            stack = RankState(self.job, rank).report.stack
            shown.append(InRing(tuple(lines), (user_frame(stack) or stack[-1]) if stack else None))
        waits = [w for r in ring for w in self.relation.waits_of(r)]
        groups = tuple(sorted({str(w.node[0]) for w in waits}))
        collective, p2p = any(w.gid is not None for w in waits), any(w.gid is None for w in waits)
        summary, detail = deadlock_words(Deadlock(tuple(ring), tuple(shown), collective, p2p, groups))
        return Finding("hang:cycle", AlertKind.HANG, CRITICAL, ring, summary, detail, said(self.job, ring, self.ctx))
