"""``distmon analyze``'s output: the culprits and what happened, as ``distmon report`` words a
live incident, then where each rank stood; and the same as JSON for other tools."""

from __future__ import annotations

import time
from typing import Any

from distmon.forensics.analysis import Analysis, RankFacts, entry_json
from distmon.forensics.blame import NO_ORDER, Blame, assign_blame, cut_only
from distmon.forensics.evidence import RAISED, Evidence, evidence
from distmon.forensics.failures import is_own
from distmon.forensics.worker_exits import SIGTERM
from distmon.guards.text import MAX_LINE, visible, visible_lines
from distmon.monitor.rules.failures import FOLLOWS
from distmon.monitor.state.kinds import FAILURE_KINDS
from distmon.monitor.state.whereabouts import frame_lines
from distmon.monitor.state.words import (
    count,
    date_time,
    duration,
    first_line,
    group_label,
    group_name,
    in_flight,
    rank_word,
    ranks_text,
)
from distmon.wire import SEND, GroupStatus, expand_runs


def culprits(analysis: Analysis) -> list[int]:
    """The ranks the files prove at fault (:mod:`~distmon.forensics.blame`)."""
    return assign_blame(analysis).culprits


def analysis_summary(analysis: Analysis) -> str:
    return assign_blame(analysis).headline


def render_analysis(analysis: Analysis) -> str:
    judged = _judged(analysis)
    ranks = (
        f"{count(analysis.world, 'rank')} (world size from {analysis.world_from})"
        if analysis.world
        else ("it names no rank" if analysis.dumps + analysis.logs == 1 else "they name no rank")
    )
    lines = [f"Read {count(analysis.dumps, 'dump')} and {count(analysis.logs, 'log')}: {ranks}, judged as of {judged}"]
    if analysis.missing:
        lines.append(_missing(analysis.missing))
    lines += [visible(said, MAX_LINE) for said in analysis.log.restarts]
    lines.append("")
    verdict = assign_blame(analysis)
    lines += _verdict(analysis, verdict)
    for a in [] if verdict.accounted else analysis.alerts:
        if a is not verdict.cause and not cut_only(analysis.log, a):
            same = bool(set(a.ranks) & set(verdict.culprits))  # the culprits' evidence above says why: who waits
            lines += ["", f"Also: {visible(a.headline, MAX_LINE)}", *("  " + line for line in _detail(a.detail, same))]
    standing = _standing(analysis, verdict)
    if standing:
        lines += ["", "Where each rank stood:", *("  " + line for line in standing)]
    if analysis.problems:
        lines += ["", "Files not read:"] + ["  " + visible(p, MAX_LINE) for p in analysis.problems]
    return visible_lines("\n".join(lines))


def _judged(analysis: Analysis) -> str:
    """The moment judged: a dump's in local time; a log's on the log's own clock, without a
    year where no line gives one."""
    if not analysis.t or not analysis.timed:
        return "an unknown time"
    if analysis.dumps:
        return date_time(analysis.t)
    if analysis.log.dated:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(analysis.t)) + " (the log's clock)"
    return time.strftime("%m-%d %H:%M:%S", time.gmtime(analysis.t)) + " (the log's clock; it gives no year)"


def _verdict(analysis: Analysis, verdict: Blame) -> list[str]:
    """The first cause: the culprits proven and their evidence, the ranks suspected and why,
    or why nobody is to blame."""
    headline = visible(verdict.headline, MAX_LINE)
    if verdict.nobody is not None:
        raised = _raised(analysis) if verdict.accounted else []
        return [f"NOBODY TO BLAME: {visible(verdict.nobody, MAX_LINE)}", *("  " + line for line in raised)]
    if named := _told(verdict):  # a failure the log shows alone is told as a culprit's, suspected
        lines = [f"{'CULPRIT' if verdict.culprits else 'SUSPECTED'} {rank_word(named)}: {headline}"]
        found = evidence(analysis, named, verdict.reported)
        lines += ["  " + line for line in _grouped(found, verdict.headline)]
        if verdict.cause is not None and not (found and verdict.cause.kind in FAILURE_KINDS):
            detail = verdict.cause.detail
            for follows in FOLLOWS if verdict.alone else ():  # the log shows no other rank to follow from it
                detail = detail.replace(follows, "")
            lines += ["  " + line for line in _detail(detail, bool(found))]
    elif verdict.suspects:
        lead = rank_word(verdict.leading)
        alike = NO_ORDER if len(verdict.leading) > 1 else ""
        said = f"suspected: {lead}{alike} ("  # the headline is the suspicion alone: said once, not twice
        if headline.startswith(said) and headline.endswith(")"):
            headline = headline[len(said) : -1]
        lines = [f"SUSPECTED {lead}: {headline}"]
        if len(verdict.suspects) == 1 and headline == visible(verdict.suspects[0].why, MAX_LINE):
            return lines  # the one suspect, and why, said already
    else:
        return [headline[:1].upper() + headline[1:] + "."]
    if verdict.suspects and not verdict.alone:
        lines.append("  Suspected, in order (no line proves it):" if not verdict.culprits else "  Also suspected:")
        lines += ["    " + line for line in _suspected(verdict)]
    return lines


STOPPED = frozenset({"KeyboardInterrupt", "SystemExit"})
"""Exceptions that stop a program from outside or by its own choice: where they were raised is no fault."""


def _raised(analysis: Analysis) -> list[str]:
    """Where the first exception of a process's own was raised, innermost last: the verdict says
    what to check rather than whom to fix, and the user's code is where to look."""
    raised = next((r for r in analysis.log.exceptions if is_own(r) and r.frames and r.type not in STOPPED), None)
    if raised is not None:
        return [f"where it raised {raised.type}:", *frame_lines(raised.frames, depth=4)]
    cut = next((r for r in analysis.log.exceptions if r.cut and not r.consequence and r.frames), None)
    return [] if cut is None else ["where it raised (its exception line cut):", *frame_lines(cut.frames, depth=4)]


def _suspected(verdict: Blame) -> list[str]:
    """One line per reason, in the order suspected: ``ranks 1-2, 4-10: no line in the log``."""
    by_why: dict[str, list[int]] = {}
    for s in verdict.suspects:
        by_why.setdefault(s.why, []).append(s.rank)
    return [f"{rank_word(ranks)}: {visible(why, MAX_LINE)}" for why, ranks in by_why.items()]


def _grouped(found: list[Evidence], headline: str) -> list[str]:
    """The culprits' evidence, culprits with the same evidence on one entry; its why not said
    again where the headline says it."""
    by_lines: dict[tuple[str, ...], list[int]] = {}
    for item in found:
        by_lines.setdefault(tuple(item.lines()[1:]), []).append(item.rank)
    out = []
    for rest, ranks in by_lines.items():
        why = next(e.why for e in found if e.rank == ranks[0])
        if headline == f"{rank_word(ranks)} {why}":
            out += [line[2:] for line in rest]
        else:
            out += [f"{rank_word(ranks)}: {why}", *rest]
    return out


def _detail(detail: str, explained: bool) -> list[str]:
    """The alert's detail; where the dumps explained each culprit, only whom the others wait
    in (its lines on the culprits speak of a live rank: its pid, its stack, its step)."""
    lines = detail.splitlines()
    if not explained or "Waiting:" not in lines:
        return lines
    waiting = lines[lines.index("Waiting:") :]
    return [line for line in waiting if not line.startswith("What to do")]


def _missing(missing: dict[int, str]) -> str:
    by_why: dict[str, list[int]] = {}
    for rank, why in missing.items():
        by_why.setdefault(why, []).append(rank)
    return "No evidence from: " + "; ".join(f"{rank_word(r)} ({why})" for why, r in sorted(by_why.items()))


def _standing(analysis: Analysis, verdict: Blame) -> list[str]:
    """Ranks standing in the same place, one line each (thousands of ranks are a few lines)."""
    places: dict[str, list[int]] = {}
    named = {e.rank: e.why for e in evidence(analysis, verdict.culprits, verdict.reported)}
    suspected = {s.rank for s in verdict.suspects}
    for rank, f in analysis.ranks.items():
        place = _place(f, analysis)
        if rank in named:
            place = f"CULPRIT, {named[rank]}" + ("" if named[rank].startswith(RAISED) else f"; {place}")
        places.setdefault(place, []).append(rank)
    for rank, why in analysis.missing.items():
        if rank not in analysis.ranks:
            torn = analysis.log.ended(rank)
            unheard = "its lines say nothing of where it stood" if rank in analysis.log.seen else None
            judged = "suspected" if rank in suspected else unheard or "judged as never heard from"
            judged = f"ended by {torn.how}" if torn is not None and rank not in suspected else judged
            if torn is not None and torn.code == SIGTERM and rank not in suspected:
                judged = f"torn down by {torn.by} (running until then)"
            if rank in analysis.log.went_on and rank not in suspected:
                judged = "its lines go on past another rank's failure"
            if rank in analysis.log.unnamed:
                judged = _unnamed(analysis, rank)
            if rank in analysis.log.cut_in and rank not in suspected:
                judged = "it waited in a collective"
            if (pasted := analysis.log.stacks.ranked.get(rank)) is not None and rank not in suspected:
                judged = pasted.words()
            if (crash := analysis.log.crashes.of(rank)) is not None:
                judged = f"it aborted ({crash.said})" + ("; suspected" if rank in suspected else "")
            if (joined := analysis.log.fr_trace.joined(rank)) is not None:
                judged = f"waits in {joined.said()} (Flight Recorder's analyzer fr_trace)"
            if rank in named:
                judged = f"CULPRIT, {named[rank]}"
            places.setdefault(f"no evidence ({why}): {judged}", []).append(rank)
    ordered = sorted(places.items(), key=lambda item: min(item[1]))
    return [f"{rank_word(ranks)}: {place}" for place, ranks in ordered]


def _unnamed(analysis: Analysis, rank: int) -> str:
    waits = analysis.log.unnamed[rank]
    numbers = ", ".join(f"#{t.seq}" + (f" ({t.op})" if t.op else "") for t in waits[:4] if t.seq is not None)
    return f"waits in collectives {numbers} of groups the log does not name"


def _place(f: RankFacts, analysis: Analysis) -> str:
    """Where the rank is held up (a dump's oldest pending work, a log's timed-out work), and
    how much of its work is queued behind that on its device."""
    t = analysis.t
    flying = [g for g in f.groups if in_flight(g)]
    channels = f.dump.p2p if f.dump else []
    held = [g for g in flying if g.since] or ([] if f.dump else flying)
    blocked = [c for c in channels if c.blocked is not None]
    parts = [_in_collective(g, f.rank, analysis) for g in held]
    for c in blocked:
        op = f"send #{c.blocked} to rank {c.peer}" if c.dir == SEND else f"recv #{c.blocked} from rank {c.peer}"
        waited = f" for {duration(t - c.blocked_since)}" if c.blocked_since else ""
        parts.append(f"in {op} (group {visible(c.group)}){waited}")
    queued = len(flying) - len(held) + sum(1 for c in channels if c.pending is not None and c.blocked is None)
    behind = f"; {queued} more of its groups and channels have work queued behind it" if queued and parts else ""
    if parts:
        return "waits " + "; ".join(parts) + behind
    if flying:
        return "waits " + "; ".join(_in_collective(g, f.rank, analysis) for g in flying)
    raised = analysis.log.raised.get(f.rank)
    if raised is not None and f.dump is None and raised.launcher is not None:  # a launcher's word, no exception
        how = "" if raised.type == "Exception" else f"{visible(raised.type, 200)}, "  # Signal 11 (...), MPI_Abort
        return f"ended: {how}{visible(first_line(raised.message))}"
    if raised is not None and f.dump is None:
        return f"raised {visible(raised.type, 200)}: {visible(first_line(raised.message))}"
    if f.dump is not None and not f.dump.groups:
        return "empty dump: no work recorded (it hung before any, or its dump was taken while stuck)"
    done = [g for g in f.groups if g.completed]
    last = ", ".join(f"#{g.completed} in {visible(group_label(g.id, g.desc))}" for g in done[:4])
    return f"nothing in flight (in its own code); completed {last or 'no collective'}"


def _in_collective(g: GroupStatus, rank: int, analysis: Analysis) -> str:
    """``in collective #N (op) of group G for 10m00s``; a watchdog stuck with no number of
    its own says so."""
    said = analysis.log.timeouts.get(rank, {}).get(g.id)
    stated = analysis.ranks[rank].dump is not None or (said is not None and (said.ran is not None or said.stuck))
    waited = f" for {duration(analysis.t - g.since)}" if g.since is not None and stated else ""
    if said is not None and said.seq is None and said.stuck is not None:
        return f"with its watchdog stuck in {visible(group_name(g.id, g))}{waited}"
    op, group = f" ({visible(g.op)})" if g.op else "", visible(group_name(g.id, g))
    if said is not None and said.seq is None:  # torch <=1.10's lines give no number: none is made up
        return f"in {visible(g.op or 'a collective')} (its number not in the log) of {group}{waited}"
    return f"in collective #{g.completed + 1}{op} of {group}{waited}"


def analysis_json(analysis: Analysis) -> dict[str, Any]:
    verdict = assign_blame(analysis)
    return {
        "culprits": verdict.culprits,
        "suspects": [s.to_json() for s in verdict.suspects],
        "nobody": verdict.nobody,
        "evidence": [e.to_json() for e in evidence(analysis, _told(verdict), verdict.reported)],
        "summary": verdict.headline,
        "world": analysis.world,
        "t": analysis.t,
        "alerts": [] if verdict.accounted else [a.to_json() for a in analysis.alerts],  # as the text: none it explains
        "ranks": [_rank_json(analysis.ranks[r]) for r in sorted(analysis.ranks)],
        "missing": [{"rank": r, "reason": why} for r, why in sorted(analysis.missing.items())],
        "problems": analysis.problems,
        "restarts": analysis.log.restarts,
        "stacks": analysis.log.stacks.to_json(),
    }


def _told(verdict: Blame) -> list[int]:
    """The ranks whose evidence a verdict tells: its culprits, or the rank whose failure it shows alone."""
    return verdict.culprits or ([s.rank for s in verdict.suspects] if verdict.alone else [])


def _rank_json(f: RankFacts) -> dict[str, Any]:
    dump = f.dump
    return {
        "rank": f.rank,
        "source": f.source,
        "groups": [
            {
                "id": g.id,
                "desc": g.desc,
                "ranks": ranks_text(expand_runs(g.ranks)),
                "enqueued": g.enqueued,
                "completed": g.completed,
                "op": g.op,
                "since": g.since,
            }
            for g in f.groups
        ],
        "last_started": entry_json(dump.last_started) if dump else None,
        "last_completed": entry_json(dump.last_completed) if dump else None,
        "oldest_pending": entry_json(dump.oldest_pending) if dump else _log_pending(f),
        "version": dump.version if dump else None,
        "unnamed_groups": dump.unnamed if dump else [],
    }


def _log_pending(f: RankFacts) -> dict[str, Any] | None:
    """From a log: the work the watchdog timed out in."""
    g = next((g for g in f.groups if in_flight(g)), None)
    if g is None:
        return None
    return {
        "group": g.id,
        "op": g.op,
        "seq": g.completed + 1,
        "p2p": g.op in ("send", "recv"),
        "state": None,
        "created": g.since,
    }
