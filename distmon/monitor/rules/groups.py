"""Stops in a process group: ``hang`` (ranks wait for ranks that have not issued the
collective) and ``divergence`` (ranks issued different collectives, or different numbers).

Both read the collective sequence numbers every rank reports for every group: the ranks
waiting in collective N for long, and the members whose last collective is below N, are
the victims and the culprits of a hang.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from distmon.monitor.alerts import CRITICAL, Finding
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.text import duration, rank_word, ranks_text, stack_lines, where
from distmon.monitor.state import JobState, RankState
from distmon.wire import GroupStatus, expand_runs

MAX_SHOWN = 4
"""Culprits whose stacks the evidence shows."""


@dataclass
class Member:
    rank: int
    state: RankState
    group: GroupStatus
    age: float | None
    """How long its collective has been in flight, None when none is."""

    @property
    def seq(self) -> int:
        return self.group.enqueued


@dataclass
class GroupView:
    """One process group across all ranks, at one moment."""

    id: str
    sample: GroupStatus
    members: list[Member]
    missing: list[int]
    """Members that never reported."""

    @property
    def name(self) -> str:
        desc = f"{self.sample.desc}, " if self.sample.desc else ""
        return f"group {self.id} ({desc}{self.sample.size} ranks)"


def suspect_groups(job: JobState, ctx: Context) -> set[str]:
    """Groups where some rank waits too long, or waits in an op it has named: the only ones
    worth a full look. A cheap pass, since in a healthy job it is all there is."""
    suspects = set()
    hang_after = ctx.hang_after
    for s in job.ranks.values():
        lag = ctx.now - s.received + s.report.t
        for g in s.report.groups:
            if g.enqueued > g.completed and g.since is not None and (g.op or lag - g.since >= hang_after):
                suspects.add(g.id)
    return suspects


def group_view(job: JobState, gid: str, now: float) -> GroupView:
    members = []
    for s in job.ranks.values():
        for g in s.report.groups:
            if g.id == gid:
                age = None
                if g.enqueued > g.completed and g.since is not None:
                    age = (s.report.t - g.since) + (now - s.received)
                members.append(Member(s.rank, s, g, age))
    sample = members[0].group
    seen = {m.rank for m in members}
    missing = [r for r in expand_runs(sample.ranks) if r not in seen and r not in job.ranks]
    return GroupView(gid, sample, members, missing)


def hang_and_divergence(job: JobState, ctx: Context) -> list[Finding]:
    findings = []
    for gid in sorted(suspect_groups(job, ctx)):
        findings.extend(_judge(group_view(job, gid, ctx.now), ctx))
    return findings


def _judge(view: GroupView, ctx: Context) -> list[Finding]:
    waiting = [m for m in view.members if m.age is not None and _live(m, ctx)]
    mismatch = _op_mismatch(waiting)
    if mismatch:
        return [_divergence(view, *mismatch, reason="op")]
    stuck = [m for m in waiting if m.age is not None and m.age >= ctx.hang_after]
    if not stuck:
        return []
    top = max(m.seq for m in stuck)
    laggards = [m for m in view.members if m.seq < top and (m.age is None or not _live(m, ctx))]
    if laggards or view.missing:
        return [_hang(view, stuck, laggards, top, ctx)]
    live = [m for m in view.members if _live(m, ctx)]
    if all(m.age is not None for m in live) and len({m.seq for m in live}) > 1:
        by_seq = Counter(m.seq for m in live)
        usual = by_seq.most_common(1)[0][0]
        odd = [m for m in live if m.seq != usual]
        return [_divergence(view, odd, [m for m in live if m.seq == usual], reason="count")]
    return [_hang(view, stuck, [], top, ctx)]


def _live(m: Member, ctx: Context) -> bool:
    """Still reporting: not exited and not silent for longer than a few intervals."""
    s = m.state
    return not s.finished and s.silent_for(ctx.now) < max(ctx.limits.lost_floor, 4 * s.report.interval)


def _op_mismatch(waiting: list[Member]) -> tuple[list[Member], list[Member]] | None:
    """Ranks in flight at the same seq with different ops: (odd ones, the usual ones)."""
    by_seq: dict[int, list[Member]] = {}
    for m in waiting:
        if m.group.op:
            by_seq.setdefault(m.seq, []).append(m)
    for members in by_seq.values():
        ops = Counter(m.group.op for m in members)
        if len(ops) > 1:
            usual = ops.most_common(1)[0][0]
            return [m for m in members if m.group.op != usual], [m for m in members if m.group.op == usual]
    return None


def _hang(view: GroupView, stuck: list[Member], laggards: list[Member], top: int, ctx: Context) -> Finding:
    age = max(m.age or 0.0 for m in stuck)
    op = next((m.group.op for m in stuck if m.seq == top and m.group.op), None)
    what = f"collective #{top}" + (f" ({op})" if op else "")
    waiting = [m.rank for m in stuck]
    culprits = sorted([m.rank for m in laggards] + view.missing)
    timeout = view.sample.timeout
    left = f"; the {duration(timeout)} collective timeout fires in {duration(timeout - age)}" if timeout else ""
    if culprits:
        summary = f"hang: {rank_word(waiting)} wait {duration(age)} in {what} for {rank_word(culprits)}"
        lines = [
            f"{rank_word(culprits)} of {view.name} did not issue {what}; "
            f"{rank_word(waiting)} have waited in it for {duration(age)}{left}."
        ]
    else:
        summary = f"hang: all ranks of {view.name} stuck in {what} for {duration(age)}, none behind"
        lines = [
            f"Every rank of {view.name} issued {what} and has waited {duration(age)}{left}.",
            "No rank is behind: the collective itself does not complete.",
        ]
    for m in sorted(laggards, key=lambda m: m.rank)[:MAX_SHOWN]:
        lines.extend(_laggard_lines(m, ctx))
    if view.missing:
        lines.append(f"  {rank_word(view.missing)}: never reported (not monitored, or not started)")
    if len(laggards) > MAX_SHOWN:
        lines.append(f"  ... and {len(laggards) - MAX_SHOWN} more: {ranks_text(m.rank for m in laggards)}")
    if culprits:
        lines.append(
            f"What to do: find why {rank_word(culprits)} stopped short of the collective; the stack "
            "shows where it is. The usual causes: a code path only some ranks take (if rank == 0: "
            "checkpoint, evaluation, logging), I/O or a lock on one rank, or a rank with fewer "
            "batches. `py-spy dump --pid PID` on its host shows every thread."
        )
    else:
        lines.append(
            "What to do: suspect the transport or a device: NCCL's network (NCCL_DEBUG=INFO, "
            "NCCL_SOCKET_IFNAME), a GPU fault (dmesg, nvidia-smi -q), or an overloaded host."
        )
    return Finding(f"hang:{view.id}", "hang", CRITICAL, culprits, summary, "\n".join(lines))


def _laggard_lines(m: Member, ctx: Context) -> list[str]:
    s = m.state
    r = s.report
    head = f"  rank {r.rank} ({r.host}, pid {r.pid}): last collective #{m.seq}, step {r.steps}, "
    if s.finished:
        how = (
            "raised " + r.exception.type
            if r.exception
            else {"terminated": "was terminated"}.get(r.exit.how if r.exit else "", "exited cleanly")
        )
        return [head + f"{how}: it left while the others still expect it (uneven batch counts?)"]
    if not _live(m, ctx):
        return [
            head + f"silent for {duration(s.silent_for(ctx.now))}",
            *stack_lines(r.stack, 3, "    "),
        ]
    stalled = f"stalled for {duration(r.t - r.stalled_since)}, " if r.stalled_since else ""
    return [head + stalled + "at:", *stack_lines(r.stack, 4, "    ")]


def _divergence(view: GroupView, odd: list[Member], usual: list[Member], reason: str) -> Finding:
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
    return Finding(f"divergence:{view.id}", "divergence", CRITICAL, odd_ranks, summary, "\n".join(lines))
