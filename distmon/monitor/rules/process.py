"""What a culprit's process is doing, for the rules: the kernel's view of it (the prober on
the monitor's host, :mod:`distmon.monitor.outside.verdicts`) judged with its stack, its own report's
when it still reports, py-spy's from outside when it does not.

The words decide the severity: a culprit making progress (CPU, bytes written) is working,
and holding the others up while it works is a warning until the work stops or the
collective timeout nears; anything else is critical. Without a prober (a replay, a rank on
another host) a rank that still reports tells whether it works itself (its report's
``usage``: CPU time and bytes moved over the last seconds); a silent one is judged as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import islice

import numpy as np

from distmon import wire
from distmon.monitor.outside.sight import AGREED, SPAN, Seen
from distmon.monitor.outside.verdicts import (
    SLEEP_CALLS,
    GilHeld,
    Moved,
    Verdict,
    holding_the_gil,
    judge_process,
    judge_usage,
    working,
)
from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState, RankState, statuses
from distmon.monitor.state.alerts import Finding
from distmon.monitor.state.columns import I8
from distmon.monitor.state.kinds import IDLE_VERDICTS, MOVING_VERDICTS, Doing
from distmon.monitor.state.whereabouts import classify, frame_lines
from distmon.node.proc import GIL_WAIT_WAKES, Sample
from distmon.node.pyspy import OutsideStack

MAX_WATCHED = 16
"""Would-be culprits the prober starts looking at before any rule names them."""
LAST_WORDS_GRACE = 0.1
"""Seconds after its eye told a rank's process gone before its lack of last words is final: a
turn of the monitor's feed, which takes in what came on the socket before what its own eye saw
(last words go out before a process ends). Behind a relay, the relay's next batch besides (it
sends one soon after it tells an end: :class:`~distmon.node.relay.NodeRelay`)."""


def ended_unheard(job: JobState, ctx: Context) -> I8:
    """The ranks whose process their node's eye saw end while they reported on (neither silent
    nor stalled by their own account) without a last word: no exception, no exit, no signal
    caught. Killed by a signal nobody catches (the OOM killer's SIGKILL), each is lost at once,
    not once its silence has lasted. Final only :data:`LAST_WORDS_GRACE` after its eye told
    it, and for a rank behind a relay once that relay was heard since: its batch would carry
    last words sent before the end."""
    if ctx.ended is None:
        return np.zeros(0, dtype=np.int64)
    c = job.cols
    window = float(np.max(ctx.limits.silent_after(job.interval())))
    told = {(host, pid): when for host, pid, when in ctx.ended(ctx.now - window) if ctx.now - when >= LAST_WORDS_GRACE}
    if not told:
        return np.zeros(0, dtype=np.int64)
    unheard = c.present & ~job.flagged(wire.FLAG_EXITED | wire.FLAG_RAISED | wire.FLAG_STALLED) & ~job.silent(ctx.now)
    unheard &= ~job.found()  # seen from outside only, a process says no words: found_gone judges its end
    found = []
    for rank in np.flatnonzero(unheard & np.isin(c.pid, [pid for _, pid in told])).tolist():
        when = told.get(job.process_of(rank))
        via = int(c.via[rank])
        if when is not None and (via < 0 or job.relay_heard[via] > when):
            found.append(rank)
    return np.array(found, dtype=np.int64)


def watch_ahead(job: JobState, ctx: Context) -> list[Finding]:
    """Start the prober on the ranks that may soon be named (not exited, and quiet for two
    intervals, or stalled by their own account and waiting in no collective or send), so
    that its first verdict is ready when a rule names them. Finds nothing itself."""
    if ctx.outside is None:
        return []
    c = job.cols
    quiet = ctx.now - c.received > ctx.limits.overdue_after(c.interval)
    maybe = c.present & ~job.flagged(wire.FLAG_EXITED)
    maybe &= quiet | (job.flagged(wire.FLAG_STALLED) & ~c.in_collective & ~c.in_p2p)
    for rank in np.flatnonzero(maybe)[:MAX_WATCHED].tolist():
        with contextlib.suppress(Exception):
            ctx.outside(*job.process_of(rank))  # from the columns: no report decoded to ask
    return []


@dataclass(frozen=True)
class Look:
    """One culprit's process: the verdict, or that the prober has yet to look twice."""

    verdict: Verdict | None
    pending: bool = False
    """The prober is looking and has no answer yet (its first look, or py-spy running)."""
    stack: tuple[str, ...] = ()
    """Its stack from outside, or why it could not be taken."""

    @property
    def working(self) -> bool:
        return self.verdict is not None and self.verdict.working


def look_at(s: RankState, ctx: Context, silent: bool, take: bool = True, waited: float | None = None) -> Look:
    """Rank ``s``'s process now: over the prober's looks of the last ``waited`` seconds (what
    it did while the others waited for it), or all it kept. A ``silent`` rank's threads
    cannot report: its stack is taken from outside, once per silence (with ``take`` False,
    only one taken before: the process is gone)."""
    r = s.report
    seen = None
    if ctx.outside is not None:
        with contextlib.suppress(Exception):
            seen = ctx.outside(r.host, r.pid)
    frames, owns_gil = r.stack, False
    stack: tuple[str, ...] = ()
    if silent and ctx.stacks is not None:
        taken, stack = _outside_stack(s, ctx, take and (seen is None or seen.last is not None))
        if taken is not None and taken.frames:
            frames, owns_gil = taken.frames, taken.owns_gil
    told = None if silent else judge_usage(r.usage, frames)  # its own account, where it still reports
    if ctx.outside is None:
        return Look(told, stack=stack)
    if seen is None:
        return Look(told, pending=told is None and _on_this_host(s, ctx), stack=stack)
    looks = seen.within(waited) if waited is not None else ()
    first = looks[0] if len(looks) > 1 else seen.first
    halted = seen.last is not None and (seen.last.stopped or seen.last.state == "Z")
    if first is None or (seen.last is not None and first.t == seen.last.t and not halted):
        return Look(told, pending=told is None, stack=stack)  # one look: no progress to measure yet
    verdict = judge_process(r.host, first, seen.last, frames, owns_gil)
    if verdict.kind in MOVING_VERDICTS and seen.last is not None and len({_doing(look) for look in looks}) > 1:
        # its main thread went from call to call over the wait: it moves (steps, with a sleep in each)
        verdict = working(Moved.between(first, seen.last), frames, owns_gil, verdict.evidence)
    if verdict.working and seen.last is not None and gil_held(s, ctx):
        if _burning(seen):
            moved = Moved.between(first, seen.last)
            verdict = holding_the_gil(moved, _gil_for(s, ctx), frames if silent else None, verdict.evidence)
        else:  # it worked, then blocked holding the GIL (a C++ open of a FIFO): what it does now
            verdict = judge_process(r.host, seen.recent or first, seen.last, frames, owns_gil)
    return Look(verdict, stack=stack)


def stopped_now(s: RankState, ctx: Context, waited: float) -> Verdict | None:
    """What rank ``s``'s process does if it does nothing now: stopped; or, over the looks of
    the ``waited`` seconds the others have waited for it (:data:`AGREED` of them at least),
    asleep, blocked or waiting on a lock in every look; or, over half a second of them at
    least, burning CPU while holding the GIL (:func:`gil_held`: its own proof).
    None while it moves, before the prober has looked long enough (the first call starts it
    looking), or without a prober. What it says holds for the whole time it looked: a rank
    busy for the wait and then back at its steps is not named for the sleep between two
    steps that the last look caught."""
    r = s.report
    seen = None
    if ctx.outside is not None:
        with contextlib.suppress(Exception):
            seen = ctx.outside(r.host, r.pid)
    if seen is None or seen.last is None:
        return None
    if seen.last.stopped:
        return judge_process(r.host, seen.last, seen.last, r.stack)
    looks = seen.within(waited)
    span = seen.last.t - looks[0].t if looks else 0.0
    if span < SPAN / 2:
        return None
    verdict = judge_process(r.host, looks[0], seen.last, r.stack)
    if span >= AGREED and verdict.kind in IDLE_VERDICTS and len({_doing(look) for look in looks}) == 1:
        return verdict if _told_since(s, ctx, seen, looks[0]) else None
    if verdict.working and _burning(seen) and gil_held(s, ctx):
        taken, _ = _outside_stack(s, ctx, alive=True) if ctx.stacks is not None else (None, ())
        moved = Moved.between(looks[0], seen.last)
        return holding_the_gil(moved, _gil_for(s, ctx), taken.frames if taken else None, verdict.evidence)
    return None


def _burning(seen: Seen) -> bool:
    """Its process used CPU over its last second of looks: what "burning CPU" says holds now,
    not only earlier in the wait."""
    since = seen.recent or seen.first
    return since is not None and seen.last is not None and Moved.between(since, seen.last).busy


def _told_since(s: RankState, ctx: Context, seen: Seen, first: Sample) -> bool:
    """Whether where rank ``s``'s report places it (in no collective, no send) holds over the
    looks since ``first``: its report was taken after that look, or none comes on time any
    more (its reporting thread cannot run). A rank that reported just before it entered a
    collective does nothing in it, waiting like its peers: its next report tells."""
    if s.report.outside is not None or seen.now is None:
        return True
    if s.silent_for(ctx.now) > ctx.limits.overdue_after(s.interval):
        return True
    return s.taken() >= first.t + (ctx.now - seen.now)


def _doing(look: Sample) -> str | None:
    """What one look caught the main thread in, for telling whether looks agree: a sleep
    resumed after a signal (``restart_syscall``) is still the sleep."""
    return "sleep" if look.syscall in SLEEP_CALLS else look.syscall or look.state


def gil_held(s: RankState, ctx: Context) -> bool:
    """Rank ``s``'s own reporting thread cannot run: a process that burns CPU meanwhile holds
    the GIL in one long call. Told once its report is half a second late by that thread
    waking to ask for the GIL over the last second of looks (:func:`waits_for_the_gil`): it
    gets it within milliseconds otherwise. Where its node's eye cannot count those wakes (a
    rank that predates ``Report.reporter``), by its silence for a second past its being overdue
    (:meth:`~distmon.monitor.state.limits.Thresholds.overdue_after`): a garbage-collection pass
    delays a report, it does not silence it that long. A rank found from outside has no
    reporting thread: its training thread's stack, taken from outside, stood still while
    holding the GIL."""
    outside = s.report.outside
    if outside is not None:
        return outside.owns_gil and s.report.stalled_since is not None
    silent = s.silent_for(ctx.now)
    if silent >= ctx.limits.overdue_after(s.interval) + SPAN:
        return True
    if silent < s.interval + SPAN / 2 or ctx.outside is None:
        return False
    seen = None
    with contextlib.suppress(Exception):
        seen = ctx.outside(s.report.host, s.report.pid)
    return seen is not None and waits_for_the_gil(seen)


def _gil_for(s: RankState, ctx: Context) -> GilHeld:
    """How long rank ``s`` has been seen holding the GIL, and by what."""
    if s.report.outside is not None:
        return GilHeld(s.stalled_for(ctx.now) or 0.0, outside=True)
    return GilHeld(s.silent_for(ctx.now))


def waits_for_the_gil(seen: Seen) -> bool:
    """The reporting thread woke :data:`~distmon.node.proc.GIL_WAIT_WAKES` times a second or
    more over the last second of looks (half a second of them at least): it waited for the GIL
    (it wakes on a timer for it). Waiting for its next report, it wakes about once a second."""
    looks = [look for look in seen.within(SPAN) if look.reporter_wakes is not None]
    if len(looks) < 2 or looks[-1].t - looks[0].t < SPAN / 2:
        return False
    first, last = looks[0], looks[-1]
    assert first.reporter_wakes is not None and last.reporter_wakes is not None
    return (last.reporter_wakes - first.reporter_wakes) / (last.t - first.t) >= GIL_WAIT_WAKES


def keep_looking(s: RankState, ctx: Context) -> None:
    """Have rank ``s``'s node's eye look at its process closely, as a rule that will judge it
    soon does: the looks are there when it judges."""
    if ctx.outside is not None:
        with contextlib.suppress(Exception):
            ctx.outside(s.report.host, s.report.pid)


def doing_nothing(s: RankState, ctx: Context, waited: float) -> Verdict | None:
    """What rank ``s`` does, named before the thresholds because it does nothing while the
    others have waited ``waited`` seconds for it: :func:`stopped_now`, or what it was last
    seen doing so in this incident. Once named, a rank stays named while the wait lasts (the
    detector forgets it when no alert names it any more): one busy second of its reporting
    thread, or a prober that falls behind on a loaded host, does not end the warning only to
    raise it again."""
    verdict = stopped_now(s, ctx, waited)
    if verdict is None:
        return ctx.named_early.get(s.rank)
    ctx.named_early[s.rank] = verdict
    return verdict


def _on_this_host(s: RankState, ctx: Context) -> bool:
    try:
        return ctx.probe is not None and ctx.probe(s.report.host, s.report.pid) is not None
    except Exception:
        return False


def _outside_stack(s: RankState, ctx: Context, alive: bool) -> tuple[OutsideStack | None, tuple[str, ...]]:
    """Its stack from outside (py-spy), once per silence; a process gone since keeps the
    stack taken while it was alive."""
    r = s.report
    assert ctx.stacks is not None
    # one stack per silence, or for a rank found from outside (which its eye reports for, silent
    # or not), per time its stack stood still
    since = r.stalled_since if r.outside is not None and r.stalled_since is not None else s.received
    try:
        taken = ctx.stacks(r.host, r.pid, since, take=alive)
    except Exception as e:
        taken = OutsideStack(error=str(e))
    if taken is None:
        return None, (("being taken from outside with py-spy",) if alive else ())
    if not taken.frames:
        return taken, (f"its stack could not be taken from outside: {taken.error or 'py-spy found no frames'}",)
    place = classify(taken.frames, taken.owns_gil)
    gil = ", holding the GIL" if taken.owns_gil and place.kind != Doing.GIL else ""
    lines = [f"its main thread, from outside with {taken.how}{gil}: {place.words}"]
    if taken.partial:
        lines.append(f"  (Python frames only: {taken.partial})")
    return taken, (*lines, *frame_lines(taken.frames, depth=4, indent="  "))


def doing(s: RankState, ctx: Context, look: Look | None = None) -> str:
    """What rank ``s``, named by a finding, does, in its status's words: how it ended, else
    what ``look`` (the finding's own) saw its process do, else where its stack stands."""
    r = s.report
    if s.finished or r.exception is not None:
        return statuses.ended(r)
    if look is not None and look.verdict is not None:
        return statuses.process_doing(look.verdict.kind, look.verdict.call)
    place = classify(r.stack).kind if r.stack else None
    return statuses.place_doing(place, s.silent(ctx.now))


def said(job: JobState, ranks: Iterable[int], ctx: Context, looks: Mapping[int, Look] | None = None) -> dict[int, str]:
    """What each of ``ranks`` (the first :data:`~distmon.monitor.state.statuses.MAX_SAID` heard
    from) does, for the finding that names them: :func:`doing`, with the look the finding took
    at it, if any."""
    looks = looks or {}
    return {
        rank: doing(job.ranks[rank], ctx, looks.get(rank))
        for rank in islice((rank for rank in ranks if rank in job.ranks), statuses.MAX_SAID)
    }


def look_lines(look: Look, indent: str = "    ") -> list[str]:
    """The evidence of ``look``: what the process is doing, what /proc showed, its stack."""
    lines = []
    if look.verdict is not None:
        lines.append(f"{indent}its process {look.verdict.words}")
        lines.extend(f"{indent}  {e}" for e in look.verdict.evidence)
    elif look.pending:
        lines.append(f"{indent}its process: being looked at from outside (/proc, py-spy)")
    lines.extend(f"{indent}{line}" for line in look.stack)
    return lines


def look_step(rank: int, look: Look) -> str | None:
    """``What to do about rank 2: `kill -CONT 4242` ...``; None without a verdict."""
    if look.verdict is None:
        return None
    return f"What to do about rank {rank}: {look.verdict.next_step}."


def all_working(looks: list[Look]) -> bool:
    """Every culprit makes progress, or is being looked at: at most a warning for now."""
    return bool(looks) and all(look.working or look.pending for look in looks)


def why_a_warning(who: str, many: bool, looks: list[Look], not_a: str, until: str) -> str:
    """Why an alert naming ``who`` (all of whom :func:`all_working`) is a warning for now:
    they make progress (``not_a`` hang, a stop; critical ``until``), or the prober has yet to say."""
    be = "are" if many else "is"
    if all(look.working for look in looks):
        return f"{who} {be} making progress: a pause, not {not_a}. This alert turns critical if {until}."
    return (
        f"{who} {be} being looked at from outside (/proc, py-spy): this alert is a warning for the "
        "seconds that takes, and turns critical unless the look finds the work going on."
    )
