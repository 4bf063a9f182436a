"""Deaths: ``rank_exception`` (a rank raised) and ``rank_lost`` (a rank's process is gone; a
node gone with its ranks is :mod:`~distmon.monitor.rules.nodes`').

When one rank dies, its peers die of it: gloo raises "Connection closed by peer" in them
within milliseconds, NCCL's watchdog times out, and torchrun then kills whoever is left.
Those are consequences. These rules name the first failure and list the rest as victims.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.outside.sight import ALIVE, GONE
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.nodes import TEARDOWN_SLACK, node_ranks, process_state
from distmon.monitor.rules.process import (
    Look,
    all_working,
    ended_unheard,
    look_at,
    look_lines,
    look_step,
    said,
)
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Finding
from distmon.monitor.state.consequences import LOST_PEER
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.words import (
    FIRST_LINE_IN_DETAIL,
    duration,
    first_line,
    rank_word,
    stack_lines,
    time_of_day,
    traceback_lines,
    where,
)

SIMULTANEOUS = 1.0
"""Primary exceptions this close to the first are failures of their own, not consequences."""
MAX_LOOKED_AT = 4
"""Silent ranks whose processes an alert describes."""


def lost_ranks(job: JobState, ctx: Context) -> list[RankState]:
    """Ranks silent too long without last words, and those whose process their node's eye saw
    end without a word (:func:`~distmon.monitor.rules.process.ended_unheard`: at once), minus
    those torn down after a failure and those of a node silent as a whole.

    Once peers report a lost connection, or are torn down by the launcher, a rank silent
    since before that is the one that died: it is named after one missed report instead of
    the usual several.
    """
    failed_at = job.first_failure()
    peers_lost_at = min(
        [s.report.exception.t for s in job.views(job.consequences(LOST_PEER))]  # type: ignore[union-attr]
        + [s.report.exit.t for s in job.views(job.flagged(wire.FLAG_STOPPED_BY_SIGNAL)) if s.torn_down()],  # type: ignore[union-attr]
        default=None,
    )
    c = job.cols
    suspects = _suspects(job)
    silent = job.silent(ctx.now)
    if peers_lost_at is not None:
        silent |= (c.received < peers_lost_at) & (ctx.now - c.received >= c.interval + TEARDOWN_SLACK)
    lost = suspects & silent
    lost[ended_unheard(job, ctx)] = True
    lost[node_ranks(job, ctx)] = False  # their node fell silent as a whole: node_lost names it instead
    if failed_at is not None:
        lost &= c.received + c.interval + TEARDOWN_SLACK < failed_at  # alive at the failure: killed in the teardown
    return job.views(lost)


def _suspects(job: JobState) -> npt.NDArray[np.bool_]:
    """Per rank: neither exited nor said last words, so it may yet turn out to be lost."""
    mask: npt.NDArray[np.bool_] = job.cols.present & ~job.flagged(wire.FLAG_EXITED | wire.FLAG_RAISED)
    return mask


def rank_exception(job: JobState, ctx: Context) -> list[Finding]:
    raised = job.views(job.flagged(wire.FLAG_RAISED))
    primary = [s for s in raised if not s.lost_a_peer() and not s.lost_a_worker()]
    secondary = [s for s in raised if s.lost_a_peer()]
    if primary:
        first = min(s.report.exception.t for s in primary)  # type: ignore[union-attr]
        culprits = sorted(
            (s for s in primary if s.report.exception.t - first <= SIMULTANEOUS),  # type: ignore[union-attr]
            key=lambda s: s.rank,
        )
        return [_exception_finding(job, culprits, secondary, ctx)]
    lost_a_worker = any(s.lost_a_worker() for s in raised)
    # the peer is unknown unless they gave up waiting for a rank standing still (the hang names it)
    if secondary and not _suspects(job).any() and not lost_a_worker and not died_waiting(job)[1]:
        return [_orphan_finding(job, secondary, ctx)]
    return []


def died_waiting(job: JobState) -> tuple[list[RankState], list[RankState]]:
    """When ranks raised only on losing a peer (their collective timed out, the connection
    closed): those ranks, and the ranks that had stood still since before the first of them
    raised without raising themselves, the peers they gave up waiting for, whether still there
    or since torn down by the launcher. Either list empty when there is none."""
    raised = job.views(job.flagged(wire.FLAG_RAISED))
    if any(not s.lost_a_peer() and not s.lost_a_worker() for s in raised):
        return [], []
    victims = [s for s in raised if s.lost_a_peer()]
    if not victims:
        return [], []
    gave_up = min(s.report.exception.t for s in victims)  # type: ignore[union-attr]
    c = job.cols
    stood = c.present & ~job.flagged(wire.FLAG_RAISED) & (c.stalled_since < gave_up)
    return victims, job.views(stood)


def gave_up_waiting(job: JobState, ctx: Context) -> list[Finding]:
    """The end of a hang nobody ended: the ranks that waited for a rank standing still gave up
    (a collective timeout, ten minutes on NCCL), so nobody waits any more, but the incident is
    still the rank they waited for. Named under the hang's key, so that the hang stays one
    alert, and the job's first cause, as the timeouts and the launcher's teardown follow. Not
    the ranks of a node lost as a whole: ``node_lost`` names them."""
    victims, roots = died_waiting(job)
    if roots:
        nodes = node_ranks(job, ctx, training=False)
        roots = [s for s in roots if s.rank not in nodes]
    if not roots:
        return []
    ranks = [s.rank for s in roots]
    exc = victims[0].report.exception
    assert exc is not None
    gave_up = min(s.report.exception.t for s in victims)  # type: ignore[union-attr]
    stood = gave_up - float(np.min(job.cols.stalled_since[ranks]))
    summary = (
        f"{rank_word(ranks)} stood still {duration(stood)}, until {rank_word(s.rank for s in victims)} "
        f"gave up waiting for it ({exc.type}: {first_line(exc.message)})"
    )
    lines = []
    for s in roots[:MAX_LOOKED_AT]:
        r = s.report
        ended = f"; its process then ended ({r.exit.how})" if r.exit else ""
        lines.append(f"rank {r.rank} ({r.host}, pid {r.pid}) made no progress after step {r.steps}{ended}, at:")
        lines.extend(stack_lines(r.stack, depth=6))
    lines += [
        f"Then {rank_word(s.rank for s in victims)} raised {exc.type}: {first_line(exc.message, FIRST_LINE_IN_DETAIL)}",
        "(waiting for it: consequences, not causes).",
        f"What to do: look at where {rank_word(ranks)} stood (above): that is what the others waited for. "
        "Their timeouts and the launcher's report of a failed worker (torchrun's ChildFailedError) follow from it.",
    ]
    return [Finding("hang", AlertKind.HANG, CRITICAL, ranks, summary, "\n".join(lines), said(job, ranks, ctx))]


_NAMED = re.compile(r"[A-Za-z_][\w.]{0,200}")
"""An exception's class as Python prints it (not a launcher's words for one it did not see)."""
FOLLOWS = (
    " The other ranks' ends follow from it.",
    " The other ranks' timeouts and the launcher's report of a failed worker follow from it.",
)
"""What a rank's failure says of the others: ``distmon analyze`` leaves it out where the log shows none of them."""
KILLED = "killed (SIGKILL), which a process cannot catch nor send itself"
KILLER = (
    "most often the kernel's out-of-memory killer, for its node's host memory (`dmesg -T | grep -i 'killed process'` "
    "on its node; the cgroup's, the container's or Slurm's memory limit), else a user or the scheduler"
)
"""Who kills a rank with SIGKILL, and where to look."""


def _raised(state: RankState) -> wire.ExceptionInfo:
    exc = state.report.exception
    assert exc is not None
    return exc


def _exception_finding(job: JobState, culprits: list[RankState], victims: list[RankState], ctx: Context) -> Finding:
    whole = [s for s in culprits if _NAMED.fullmatch(_raised(s).type)]  # not cut before the exception's line
    lead = (whole or culprits)[0].report
    exc = lead.exception
    assert exc is not None
    ranks = [s.rank for s in culprits]
    summary = f"{rank_word(ranks)} raised {exc.type}: {first_line(exc.message)}"
    others = {_raised(s).type for s in whole} - {exc.type}
    if others:
        summary = f"{rank_word(ranks)} raised exceptions of their own ({exc.type} first, {', '.join(sorted(others))})"
    elif whole and len(whole) < len(culprits):  # the exception of the ranks whose line the log cut is not said
        cut = [s for s in culprits if s not in whole]
        summary = (
            f"{rank_word(s.rank for s in whole)} raised {exc.type}: {first_line(exc.message)}; "
            f"{rank_word(s.rank for s in cut)} raised {_raised(cut[0]).type}: {first_line(_raised(cut[0]).message)}"
        )
    # a report read from a file (``distmon analyze``) has no process, nor a step it is known at
    seen = f" ({lead.host}, pid {lead.pid})" if lead.pid else ""
    step = f"at step {lead.steps}, " if lead.pid else ""
    lines = [
        f"{rank_word(ranks)}{seen} raised {exc.type} {step}at {where(exc.where)}:",
        f"    {exc.type}: {first_line(exc.message, FIRST_LINE_IN_DETAIL)}",
    ]
    if exc.traceback:
        lines += ["Traceback (innermost last):", *traceback_lines(exc.traceback, depth=8)]
    if victims:
        lines.append(
            f"Then {rank_word(s.rank for s in victims)} failed because of it "
            f"({victims[0].report.exception.type}: connection to a peer lost): "  # type: ignore[union-attr]
            "consequences, not causes."
        )
    if "encountered in worker" in exc.message:  # torch's handler in a DataLoader worker, on its signal
        lines.append(
            f"What to do: {rank_word(ranks)}'s DataLoader worker crashed natively: a C extension its dataset calls "
            "(an image or audio decoder, a tokenizer). With num_workers=0 the crash comes in the main process, "
            f"where PYTHONFAULTHANDLER=1 prints its Python stack.{FOLLOWS[0]}"
        )
    elif exc.type.startswith("Signal 9 ") and not exc.traceback:  # SIGKILL: sent, never a crash of its own
        lines.append(f"What to do: {rank_word(ranks)} was {KILLED}: {KILLER}.{FOLLOWS[0]}")
    elif exc.type.startswith("Signal ") and not exc.traceback:  # a launcher's word: killed, no exception
        lines.append(
            f"What to do: {rank_word(ranks)} died of a signal, not of a Python exception: a native crash (a "
            "library, a driver, the node's memory). Its stderr and its node's kernel log (dmesg) say where; "
            f"PYTHONFAULTHANDLER=1 prints its Python stack when it crashes.{FOLLOWS[0]}"
        )
    else:
        lines.append(
            f"What to do: fix the error above on {rank_word(ranks)}; its full traceback is in that "
            "rank's stderr (under torchrun, its lines prefixed [rank"
            f"{ranks[0]}]).{FOLLOWS[1]}"
        )
    return Finding(
        "rank_exception", "rank_exception", CRITICAL, ranks, summary, "\n".join(lines), said(job, ranks, ctx)
    )


def _orphan_finding(job: JobState, victims: list[RankState], ctx: Context) -> Finding:
    ranks = [s.rank for s in victims]
    exc = victims[0].report.exception
    assert exc is not None
    summary = f"{rank_word(ranks)} lost the connection to a peer that did not report its failure"
    detail = "\n".join(
        [
            f"{rank_word(ranks)} raised {exc.type}: {first_line(exc.message, FIRST_LINE_IN_DETAIL)}",
            "No monitored rank reported a failure of its own: the peer that died first was "
            "not monitored, or died before its first report.",
            "What to do: check every rank's stderr and the nodes' kernel logs (dmesg: OOM "
            "killer, segfaults) for the process that exited first.",
        ]
    )
    return Finding("rank_exception", AlertKind.RANK_EXCEPTION, CRITICAL, ranks, summary, detail, said(job, ranks, ctx))


def rank_lost(job: JobState, ctx: Context) -> list[Finding]:
    """A silent rank whose process is gone: ``rank_lost``. One whose process is alive is not
    lost: while the others wait for it the hang rule names it, with what its process does;
    while nobody waits, :func:`_silent` does, under the hang's key, so that the incident
    stays one alert when the others start to wait. Nothing while the monitor is behind: the
    silence may be its own."""
    if ctx.behind is not None:
        return []
    lost = lost_ranks(job, ctx)
    if not lost:
        return []
    lost.sort(key=lambda s: s.received)
    states = {s.rank: process_state(job, s.rank, ctx) for s in lost}
    waited_for = bool((job.cols.in_collective | job.cols.in_p2p)[job.live(ctx.now)].any())
    alive = [s for s in lost if states[s.rank] == ALIVE]
    unseen = [s for s in lost if states[s.rank] is None and job.eye_on(s.report.host) is None]
    dead = [s for s in lost if states[s.rank] == GONE or (s in unseen and not waited_for)]
    findings = [_lost(job, dead, states, ctx)] if dead else []
    if alive and not waited_for:
        findings.append(_silent(job, alive, ctx))
    return findings


def _lost(job: JobState, lost: list[RankState], states: dict[int, str | None], ctx: Context) -> Finding:
    ranks = [s.rank for s in lost]
    gone = [r for r, st in states.items() if st == GONE and r in ranks]
    consequences = job.consequences(LOST_PEER) | job.flagged(wire.FLAG_STOPPED_BY_SIGNAL)
    victims = [s.rank for s in job.views(consequences) if s.lost_a_peer() or s.torn_down()]
    if gone:
        cause = "process gone"
        why = "it died without last words: killed by a signal (the OOM killer's SIGKILL, a segfault)"
    else:
        cause, why = "no last words", "it went silent without an exception or exit, and no eye sees its process"
    told = {(host, pid): when for host, pid, when in ctx.ended(0.0)} if ctx.ended is not None else {}
    silent = ctx.now - lost[0].received
    summary = f"{rank_word(ranks)} stopped reporting {duration(silent)} ago: {cause}"
    lines = [f"{rank_word(ranks)}: {why}."]
    looks = {}
    for s in lost[:8]:
        r = s.report
        lines.append(
            f"  rank {r.rank} on {r.host} (pid {r.pid}): last report {duration(ctx.now - s.received)} "
            f"ago at step {r.steps}; {_process_words(job, r.host, r.pid, states[r.rank], told)}"
        )
        look = looks[r.rank] = look_at(s, ctx, silent=True, take=False) if states[r.rank] == GONE else Look(None)
        if look.stack:
            lines.extend(look_lines(look))
        elif r.stack:
            lines.extend(stack_lines(r.stack, depth=3, indent="    "))
    if victims:
        lines.append(
            f"Then {rank_word(victims)} lost their connection to it or were stopped by the launcher: consequences."
        )
    lines.append(
        "What to do: check the node's kernel log (`dmesg -T | grep -i -e oom -e killed -e segfault`) "
        "and the job scheduler's log for why the process died; host memory pressure is the usual cause."
    )
    return Finding(
        "rank_lost", AlertKind.RANK_LOST, CRITICAL, ranks, summary, "\n".join(lines), said(job, ranks, ctx, looks)
    )


def _process_words(job: JobState, host: str, pid: int, state: str | None, told: dict[tuple[str, int], float]) -> str:
    """What became of a lost rank's process (gone, or unseen), and which eye saw it, or why
    none could."""
    if state != GONE:
        return f"its process unseen: no eye watches {host} (no distmon relay runs there, nor the monitor)"
    when = told.get((host, pid))
    at = f" at {time_of_day(when)}" if when is not None else ""
    return f"its process gone, as {job.eye_on(host) or 'its eye'} saw{at}"


def _silent(job: JobState, silent: list[RankState], ctx: Context) -> Finding:
    """Ranks that stopped reporting while their processes live, and nobody waits for them
    (yet): what their processes do, and what to do about it."""
    ranks = [s.rank for s in silent]
    looks = {s.rank: look_at(s, ctx, silent=True) for s in silent[:MAX_LOOKED_AT]}
    first = looks[ranks[0]]
    doing = f": its process {first.verdict.summary}" if first.verdict is not None and len(ranks) == 1 else ""
    summary = f"{rank_word(ranks)} stopped reporting {duration(ctx.now - silent[0].received)} ago{doing}"
    lines = [f"{rank_word(ranks)} sent nothing for {duration(ctx.now - silent[0].received)}; the process lives."]
    for s in silent[:MAX_LOOKED_AT]:
        r = s.report
        lines.append(f"  rank {r.rank} on {r.host} (pid {r.pid}): last report at step {r.steps}")
        lines.extend(look_lines(looks[r.rank]))
    steps = [next_step for rank, look in looks.items() if (next_step := look_step(rank, look))]
    lines.extend(
        steps or [f"What to do: `py-spy dump --native --pid {silent[0].report.pid}` on {silent[0].report.host}."]
    )
    severity = WARNING if all_working(list(looks.values())) else CRITICAL
    return Finding("hang", AlertKind.HANG, severity, ranks, summary, "\n".join(lines), said(job, ranks, ctx, looks))
