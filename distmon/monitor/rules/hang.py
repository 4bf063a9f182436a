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
from distmon.monitor.rules.nodes import node_ranks
from distmon.monitor.rules.process import (
    Look,
    all_working,
    doing_nothing,
    look_at,
    look_lines,
    look_step,
    said,
    starved,
    why_a_warning,
)
from distmon.monitor.rules.routine import Habit, Mark, about
from distmon.monitor.rules.waitfor import (
    Collective,
    Node,
    Transfer,
    Wait,
    WaitFor,
    collect_groups,
    current,
    message_words,
    op_name,
    waits,
)
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Finding
from distmon.monitor.state.arrays import distinct
from distmon.monitor.state.columns import I8
from distmon.monitor.state.limits import pause_after
from distmon.monitor.state.whereabouts import user_frame
from distmon.monitor.state.words import (
    duration,
    group_label,
    group_name,
    rank_lines,
    rank_word,
    ranks_text,
    timeout_left,
    where,
)
from distmon.wire import ANY_SOURCE, SEND, STOPPED_HOWS

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


@dataclass
class WaitLine:
    """The ranks of the relation waiting in one collective or message: a line of the evidence."""

    age: float
    node: Node
    ranks: I8
    wait: Wait


class Incidents:
    """The incidents at the ends of the relation, in words.

    Following the relation from the ranks that have waited too long ends in one of: a rank
    that waits for nobody (the root of a hang), a collective every member issued or a
    message both ends posted that still does not complete (the transport), a group whose
    ranks diverged (its own alert), or a cycle (a deadlock).
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
        _, stuck, reach = self._relation(hang_after)
        roots = self._roots(reach)
        findings = []
        if roots:
            waited = max(w.age for w in self.relation.all if w.node in reach)
            looks = {rank: self._look(rank, waited=waited) for rank in roots[:MAX_SHOWN]}
            habit = self._observe(roots, reach, {rank: look.verdict for rank, look in looks.items()})
            if habit is None:
                findings.append(self._hang(roots, reach, stuck, looks))
            elif self._outlasts(habit, reach):
                self.ctx.routine.outlasted(roots)
                findings.append(self._hang(roots, reach, stuck, looks, habit=habit))
        for node in sorted((n for n in reach if isinstance(n, tuple) and not self.relation.edges[n]), key=str):
            # a collective or message that waits for nobody yet does not complete
            if len(node) == 2 and node[0] not in self.relation.diverged and self._everyone_waited(node, hang_after):
                gid, seq = node
                findings.append(self._stuck_collective(gid, seq, reach))
            elif len(node) == 4 and ANY_SOURCE not in node[1:3]:
                findings.append(self._stuck_message(node))
        ring = self.relation.ring(reach)
        if ring:
            findings.append(self._deadlock(ring))
        return findings

    def _relation(self, after: float) -> tuple[list[Wait], npt.NDArray[np.bool_], set[Node]]:
        """The waits at least ``after`` old (and the sends and receives of their ranks), the
        ranks in them, and what the relation reaches from them."""
        first = [w for w in self.relation.all if w.age >= after]
        stuck = np.zeros(len(self.relation.collective), dtype=bool)
        """The ranks that have waited too long."""
        for w in first:
            stuck[w.ranks[w.ages >= after]] = True
        first += [w for rank, mine in self.relation.p2p_of.items() if stuck[rank] for w in mine if w.age < after]
        return first, stuck, self.relation.reachable(first)

    @cached_property
    def _node_ranks(self) -> set[int]:
        return set(node_ranks(self.job, self.ctx, training=False).tolist())

    def _roots(self, reach: set[Node]) -> list[int]:
        """The ranks of ``reach`` that wait for nobody and are this incident's
        (:meth:`_own_incident`): decided as arrays where the answer needs no more (a
        collective of 131,072 ranks may reach tens of thousands yet to enter it), rank by
        rank where it does (silent: its process asked about; a silent node; the monitor
        behind)."""
        ranks = np.array(sorted(n for n in reach if isinstance(n, int) and not self.relation.waiting(n)), np.int64)
        if not len(ranks):
            return []
        present = self.job.heard(ranks)
        ours = np.full(len(ranks), self.ctx.behind is None)
        known = ranks[present]
        finished = self.job.flagged(wire.FLAG_EXITED, known)
        plain = finished | (~self.job.held_up(known) & ~self.job.silent(self.ctx.now, known))
        held = ~finished & self.job.held_up(known)
        if self.ctx.behind is None:
            doubt = ~plain & ~held
            doubt |= np.isin(known, list(self._node_ranks)) & ~finished
        else:
            doubt = np.ones(len(known), dtype=bool)
        decided = np.where(held, False, True)
        for i in np.flatnonzero(doubt).tolist():
            decided[i] = self._own_incident(int(known[i]))
        ours[present] = decided
        roots: list[int] = ranks[ours].tolist()
        return roots

    def _early(self) -> list[Finding]:
        """Before a wait is a hang: the ranks that waits of half the early threshold lead to
        are looked at from outside, and once a wait reaches it, ranks that the prober has
        seen do nothing for a second (stopped, asleep, blocked, on a lock, holding the GIL)
        are named, as a warning saying so. A rank that works, or that the prober has yet to
        see, waits for the hang threshold as before; a pause the job usually takes
        (:mod:`~distmon.monitor.rules.routine`) is named only once it outlasts itself."""
        first, stuck, reach = self._relation(self.ctx.looked_after)
        if not first:
            return []
        roots = self._roots(reach)
        if not roots or len(roots) > MAX_SHOWN:
            return []
        views = [self.job.ranks.get(rank) for rank in roots]
        if any(s is not None and self._maybe_waiting(s) for s in views):
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
        return [self._hang(roots, reach, stuck, looks, early=True)]

    def _maybe_waiting(self, s: RankState) -> bool:
        """Inside a collective or a send its report does not call a wait yet: it may wait
        itself. Not once that report is overdue: it is old news."""
        cols, limits = self.job.cols, self.ctx.limits
        inside = bool(cols.in_collective[s.rank] or cols.in_p2p[s.rank])
        return inside and s.silent_for(self.ctx.now) <= limits.overdue_after(float(cols.interval[s.rank]))

    def _observe(self, roots: list[int], reach: set[Node], verdicts: dict[int, Verdict | None]) -> Habit | None:
        """Tell the job's routine that ``roots`` hold the others up, each where its report's
        stack and ``verdicts`` say; the habit this pause is, if the job takes it usually."""
        if len(roots) > MAX_SHOWN:
            return None
        mine = [w for w in self.relation.all if w.node in reach]
        waited = max((w.age for w in mine), default=0.0)
        marks, steps = {}, {}
        for rank in roots:
            s = self.job.ranks.get(rank)
            if s is None:
                return None
            frame = user_frame(s.report.stack or [])
            verdict = verdicts.get(rank)
            doing = verdict.habit if verdict is not None else "silent" if s.silent(self.ctx.now) else None
            words = verdict.summary.removeprefix("is ") if verdict is not None else ""
            marks[rank] = Mark(f"{PurePath(frame.file).name}:{frame.func}" if frame else None, doing, words)
            steps[rank] = s.steps
        return self.ctx.routine.observe(roots, waited, marks, steps, self._paused(mine))

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

    def _waiting(self, roots: list[int], reach: set[Node], stuck: npt.NDArray[np.bool_]) -> list[WaitLine]:
        """A row per collective or message the ranks of the relation (those ``stuck``, and
        those reached) wait in: those waiting for the roots themselves first, then those
        waiting for them, and so on."""
        reached = np.array([n for n in reach if isinstance(n, int)], dtype=np.int64)
        rows: dict[Node, WaitLine] = {}
        for w in self.relation.all:
            if w.node not in reach:
                continue
            mine = stuck[w.ranks] | np.isin(w.ranks, reached)
            if not mine.any():
                continue
            ranks, age = w.ranks[mine], float(w.ages[mine].max())
            row = rows.get(w.node)
            if row is None:
                rows[w.node] = WaitLine(age, w.node, ranks, w)
            else:
                row.ranks, row.age = np.concatenate([row.ranks, ranks]), max(row.age, age)
        hops = self.relation.hops(roots, reach)
        return sorted(
            rows.values(), key=lambda row: (hops.get(row.node, len(reach)), -len(row.ranks), -row.age, str(row.node))
        )

    def _group_label(self, gid: str) -> str:
        view = self.groups.get(gid)
        if view is not None:
            return view.name
        sample = self.job.group(wire.name_hash(gid))
        return group_name(gid, sample) if sample is not None else group_label(gid, None)

    def _what(self, w: Wait) -> str:
        """``collective #7 (all_reduce) of group 4 (...)``, or ``recv #12 from rank 2 in group 3 (...)``."""
        if w.gid is not None:
            op = next((op_name(m) for m in self.groups[w.gid].waits if m.op), None)
            return f"collective #{w.seq}{f' ({op})' if op else ''} of {self.groups[w.gid].name}"
        return message_words(w.node, w.rank, self._group_label(w.node[0]))  # type: ignore[arg-type]

    def _hang(
        self,
        roots: list[int],
        reach: set[Node],
        stuck: npt.NDArray[np.bool_],
        looks: dict[int, Look],
        early: bool = False,
        habit: Habit | None = None,
    ) -> Finding:
        """The hang's alert, with ``looks`` at the roots; ``early``, named before the hang
        threshold: a warning saying what they do; ``habit``, the usual pause this one outlasts."""
        rows = self._waiting(roots, reach, stuck)
        waiting = distinct(np.concatenate([row.ranks for row in rows]))
        oldest = max(row.age for row in rows)
        samples = [(row.age, self.groups[row.wait.gid].sample) for row in rows if row.wait.gid is not None]
        left = min((t for age, sample in samples if (t := timeout_left(sample, age)) is not None), default=None)
        countdown = f"; the earliest collective timeout fires in {duration(left)}" if left is not None else ""
        more = f" and {len(rows) - 1} more" if len(rows) > 1 else ""
        who = rank_word(roots)
        them = "it" if len(roots) == 1 else "them"
        doing = looks[roots[0]].verdict if len(roots) == 1 else None
        who_does = (
            f"{who} {doing.summary}; "
            if doing is not None
            else f"{who} {'holds' if len(roots) == 1 else 'hold'} up the job: "
        )
        usually = f"; this pause usually ends within {about(habit.longest)}" if habit is not None else ""
        summary = (
            f"{who_does}{len(waiting)} {'rank waits' if len(waiting) == 1 else 'ranks wait'} "
            f"for {them}, in {self._what(rows[0].wait)}{more}, for up to {duration(oldest)}{usually}"
        )
        detail = [
            f"{who} {'waits' if len(roots) == 1 else 'wait'} for nobody, and every waiting rank waits for "
            f"{them}, directly or through a peer: the oldest wait is {duration(oldest)}{countdown}.",
        ]
        if habit is not None:
            detail.append(
                f"The job pauses so as a habit ({habit.words()}, {habit.taken} times so far) and always came "
                f"out within {about(habit.longest)}; this time it has not, after {duration(oldest)}."
            )
        for rank in roots[:MAX_SHOWN]:
            detail.extend(self._root_lines(rank, bool(looks[rank].stack)))
            detail.extend(look_lines(looks[rank]))
        if len(roots) > MAX_SHOWN:
            detail.append(f"  ... and {len(roots) - MAX_SHOWN} more: {ranks_text(roots)}")
        detail.append("Waiting:")
        for row in rows[:MAX_GROUPS_SHOWN]:
            awaited = [n for n in self.relation.edges[row.node] if isinstance(n, int)]
            for_whom = f" for {rank_word(awaited)}" if awaited else ""
            detail.append(f"  {rank_word(row.ranks)} in {self._what(row.wait)}{for_whom}, {duration(row.age)}")
        if len(rows) > MAX_GROUPS_SHOWN:
            rest = rows[MAX_GROUPS_SHOWN:]
            others = sum(len(r.ranks) for r in rest)
            detail.append(f"  ... and {others} more ranks in {len(rest)} more collectives or sends")
        shortest = min((sample.timeout for _, sample in samples if sample.timeout), default=None)
        near = left is not None and shortest is not None and left <= self.ctx.limits.near_timeout * shortest
        working = all_working(list(looks.values())) and not near
        detail.extend(self._advice(who, len(roots) > 1, looks, early, working))
        severity = WARNING if working or early else CRITICAL
        return Finding(
            "hang", "hang", severity, roots, summary, "\n".join(detail), said(self.job, roots, self.ctx, looks)
        )

    def _advice(self, who: str, many: bool, looks: dict[int, Look], early: bool, working: bool) -> list[str]:
        """What the hang's alert ends with: why it is a warning, or what to do."""
        lines = []
        if early:
            lines.append(
                f"A warning for now: {who} {'do' if many else 'does'} nothing, seen from outside, "
                f"while the others wait; it turns critical once the wait reaches {duration(self.ctx.hang_after)}."
            )
        steps = [step for rank, look in looks.items() if (step := look_step(rank, look))]
        if working:
            lines.append(
                why_a_warning(
                    who, many, list(looks.values()), "a hang", "the progress stops or the collective timeout nears"
                )
            )
        elif steps:
            lines.extend(steps)
        if not steps and not working:
            lines.append(
                f"What to do: find why {who} stopped short of its next collective or send; the stack "
                "shows where it is. The usual causes: a code path only some ranks take (if rank == 0: "
                "checkpoint, evaluation, logging), I/O or a lock on one rank, a rank with fewer "
                "batches, or a pipeline stage stuck in its own compute. `py-spy dump --pid PID` on its "
                "host shows every thread."
            )
        return lines

    def _look(self, rank: int, verdict: Verdict | None = None, waited: float | None = None) -> Look:
        """Rank ``rank``'s process over the ``waited`` seconds the others waited for it, its
        stack taken from outside once its reports are overdue; ``verdict``, what it was named
        early for, in place of the look's."""
        s = self.job.ranks.get(rank)
        if s is None:
            return Look(verdict)
        silent = s.silent(self.ctx.now) or starved(s, self.ctx)
        look = look_at(s, self.ctx, silent=silent, waited=waited)
        return look if verdict is None else replace(look, verdict=verdict, pending=False)

    def _root_lines(self, rank: int, outside: bool = False) -> list[str]:
        """Where ``rank`` is, by its reports (its last stack: not for a silent rank whose
        stack was taken from ``outside``)."""
        s = self.job.ranks.get(rank)
        if s is None:
            return [f"  rank {rank}: never reported (not monitored, or not started)"]
        r = s.report
        last = ", ".join(f"#{g.enqueued} in {group_label(g.id, g.desc)}" for g in r.groups if g.enqueued)
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
            if how in STOPPED_HOWS:
                return [head + f"was {how} while the others still expect it"]
            return [head + "exited cleanly while the others still expect it (uneven batch counts?)"]
        if s.silent(self.ctx.now):
            stack = [] if outside else rank_lines(r, 3, "    ")
            return [head + f"silent for {duration(s.silent_for(self.ctx.now))}", *stack]
        stalled = f"stalled for {duration(r.t - r.stalled_since)}, " if r.stalled_since else ""
        return [head + stalled + "at:", *rank_lines(r, 4, "    ")]

    def _stuck_collective(self, gid: str, seq: int, reach: set[Node]) -> Finding:
        """Every member issued it and it does not complete. Where some of its members are also
        what other waits wait for (they never issued work their peers elsewhere did), those
        members are named: their peers in this group went on, they did not."""
        view = self.groups[gid]
        members = [w for w in view.waits if w.seq == seq]
        age = max((m.age for m in members), default=0.0)
        op = next((op_name(m) for m in members if m.op), None)
        what = f"collective #{seq}" + (f" ({op})" if op else "")
        timeout, fires = view.sample.timeout, timeout_left(view.sample, age)
        left = (
            f"; the {duration(timeout)} collective timeout fires in {duration(fires)}"
            if timeout and fires is not None
            else ""
        )
        inside = {int(r) for m in members for r in m.ranks}
        suspects = sorted(inside & {n for n in self.relation.awaited_ranks(reach) if isinstance(n, int)})
        summary = f"all ranks of {view.name} stuck in {what} for {duration(age)}, none behind"
        detail = [
            f"Every rank of {view.name} issued {what} and has waited {duration(age)}{left}.",
            "No rank is behind: the collective itself does not complete.",
        ]
        if suspects:
            summary += f"; {rank_word(suspects)} also {'holds' if len(suspects) == 1 else 'hold'} up other groups"
            detail.append(
                f"{rank_word(suspects)} never issued work that {'its' if len(suspects) == 1 else 'their'} peers in "
                "other groups issued and wait in, while the other members of this group did: the device or host "
                f"of {rank_word(suspects)} is the likeliest cause."
            )
        detail.append(
            "What to do: suspect the transport or a device: NCCL's network (NCCL_DEBUG=INFO, "
            "NCCL_SOCKET_IFNAME), a GPU fault (dmesg, nvidia-smi -q), or an overloaded host."
        )
        doing = said(self.job, suspects, self.ctx)
        return Finding(f"hang:{gid}", "hang", CRITICAL, suspects, summary, "\n".join(detail), doing)

    def _stuck_message(self, node: Transfer) -> Finding:
        gid, src, dst, k = node
        waiting = [w for w in self.relation.all if w.node == node]
        age = max(w.age for w in waiting)
        where = self._group_label(gid)
        summary = (
            f"rank {src}'s send #{k} to rank {dst} in {where} is posted on both ends and does not "
            f"complete after {duration(age)}"
        )
        detail = [
            f"Rank {src} posted send #{k} to rank {dst}, and rank {dst} its receive #{k} from rank {src}; "
            f"{rank_word(np.concatenate([w.ranks for w in waiting]))} has waited in it {duration(age)}. Neither end is "
            "behind: the message does not arrive.",
            "What to do: suspect the link between the two ranks' hosts (NCCL_DEBUG=INFO, a firewall between "
            "nodes, NCCL_SOCKET_IFNAME), or sends and receives that disagree on tag, size or dtype.",
        ]
        ends = sorted({src, dst})
        doing = said(self.job, ends, self.ctx)
        return Finding(f"hang:{gid}:{src}>{dst}", "hang", CRITICAL, ends, summary, "\n".join(detail), doing)

    def _deadlock(self, ring: list[int]) -> Finding:
        lines = []
        for rank in ring[: MAX_SHOWN * 2]:
            for w in self.relation.waits_of(rank):
                awaited = [n for n in self.relation.edges[w.node] if isinstance(n, int)]
                if not set(awaited) & set(ring):
                    continue
                age = float(w.ages[w.ranks == rank][0])
                lines.append(f"  rank {rank} waits in {self._what(w)} for {rank_word(awaited)}, {duration(age)}")
            stack = RankState(self.job, rank).report.stack
            if stack:
                lines.append(f"    at {where(user_frame(stack) or stack[-1])}")
        collective = any(w.gid is not None for r in ring for w in self.relation.waits_of(r))
        p2p = any(w.gid is None for r in ring for w in self.relation.waits_of(r))
        groups = sorted({str(w.node[0]) for r in ring for w in self.relation.waits_of(r)})
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
        return Finding("hang:cycle", "hang", CRITICAL, ring, summary, "\n".join(detail), said(self.job, ring, self.ctx))
