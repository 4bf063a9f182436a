"""``divergence``: the ranks of a process group issued different collectives at the same
number (an ``all_reduce`` where the others ``broadcast``), or different numbers of them, and all
wait: a collective under ``if rank == ...``, or uneven batch counts. The group's own alert; the
hang's relation (:mod:`distmon.monitor.rules.hang`) ends at it.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from distmon.monitor.rules.base import Context
from distmon.monitor.rules.process import said
from distmon.monitor.rules.waitfor import Group, Wait, wait_op
from distmon.monitor.state.alerts import CRITICAL, Finding
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.words import rank_word, stack_lines, where

MAX_SHOWN = 4
"""Odd ranks whose stacks the evidence shows."""


def divergence_in(group: Group, ctx: Context) -> Finding | None:
    """Group ``group``'s ranks issued different collectives at one number, or different
    numbers of them and all wait: its ``divergence``, or None."""
    # A wait in a collective a member has completed is a report older than that member's,
    # not a rank at another count: judged on the waits that are current.
    current = [w for w in group.waits if w.seq > group.completed]
    mismatch = _op_mismatch(current)
    if mismatch:
        return _divergence(group, *mismatch, reason="op", ctx=ctx)
    waiting = sum(len(w.ranks) for w in current)
    if len(group.missing) or group.live > waiting or not any(w.age >= ctx.hang_after for w in current):
        return None
    by_seq: Counter[int] = Counter()
    for w in sorted(current, key=lambda w: w.rank):
        by_seq[w.seq] += len(w.ranks)
    if len(by_seq) < 2:
        return None
    usual = by_seq.most_common(1)[0][0]
    odd = [w for w in current if w.seq != usual]
    return _divergence(group, odd, [w for w in current if w.seq == usual], reason="count", ctx=ctx)


def _op_mismatch(waiting: list[Wait]) -> tuple[list[Wait], list[Wait]] | None:
    """Ranks in flight at the same seq with different ops: (odd ones, the usual ones)."""
    by_seq: dict[int, list[Wait]] = {}
    for m in sorted(waiting, key=lambda m: m.rank):
        if m.op:
            by_seq.setdefault(m.seq, []).append(m)
    for members in by_seq.values():
        ops: Counter[int] = Counter()
        for m in members:
            ops[m.op] += len(m.ranks)
        if len(ops) > 1:
            usual = ops.most_common(1)[0][0]
            return [m for m in members if m.op != usual], [m for m in members if m.op == usual]
    return None


def _divergence(view: Group, odd: list[Wait], usual: list[Wait], reason: str, ctx: Context) -> Finding:
    odd_ranks = np.sort(np.concatenate([m.ranks for m in odd]))
    usual_ranks = np.concatenate([m.ranks for m in usual])
    odd_m, usual_m = odd[0], usual[0]
    if reason == "op":
        what = (
            f"at collective #{odd_m.seq}, {rank_word(odd_ranks)} issued {wait_op(odd_m)} while "
            f"{rank_word(usual_ranks)} issued {wait_op(usual_m)}"
        )
        summary = f"{rank_word(odd_ranks)} in {wait_op(odd_m)}, the others in {wait_op(usual_m)} (#{odd_m.seq})"
    else:
        what = (
            f"{rank_word(odd_ranks)} issued {abs(odd_m.seq - usual_m.seq)} "
            f"{'more' if odd_m.seq > usual_m.seq else 'fewer'} collectives than {rank_word(usual_ranks)} "
            f"(#{odd_m.seq} against #{usual_m.seq}), and all wait"
        )
        summary = f"{rank_word(odd_ranks)} at collective #{odd_m.seq}, the others at #{usual_m.seq}"
    lines = [f"In {view.name}, {what}."]
    values, counts = np.unique(odd_m.job.cols.steps[usual_ranks], return_counts=True)
    steps = int(values[counts.argmax()])
    for rank in odd_ranks[:MAX_SHOWN].tolist():
        r = odd_m.state(rank).report
        if not r.pid and not r.stack:
            continue  # a rank read from a log (no process): no step nor stack of it is known
        gap = f" (the others are at step {steps}: uneven batch counts?)" if r.steps != steps else ""
        top = r.stack[-1] if r.stack else None
        lines.append(f"  rank {r.rank} ({r.host}): step {r.steps}{gap}, at {where(top)}")
        lines.extend(stack_lines(r.stack, 3, "    "))
    lines.append(
        "What to do: every rank must issue the same collectives in the same order. Move the "
        "collective out of any `if rank == ...` branch, and give every rank the same number "
        "of batches (DistributedSampler(drop_last=True), equal shards for an IterableDataset)."
    )
    key, named = f"divergence:{view.sample.id}", odd_ranks.tolist()
    return Finding(key, AlertKind.DIVERGENCE, CRITICAL, named, summary, "\n".join(lines), said(odd_m.job, named, ctx))
