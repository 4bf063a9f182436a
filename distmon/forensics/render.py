"""``distmon analyze``'s output: the culprits and what happened, as ``distmon report`` words a
live incident, then where each rank stood; and the same as JSON for other tools."""

from __future__ import annotations

from typing import Any

from distmon.forensics.analysis import Analysis, RankFacts, entry_json
from distmon.forensics.evidence import evidence
from distmon.monitor.state.alerts import CRITICAL, Alert
from distmon.monitor.state.ending import cause
from distmon.monitor.state.words import count, date_time, duration, group_name, rank_word, ranks_text
from distmon.visible import MAX_LINE, visible, visible_lines
from distmon.wire import SEND, GroupStatus, expand_runs

NOTHING = "no rank was waiting in a collective or a send/recv when the files were written"


def first_cause(analysis: Analysis) -> Alert | None:
    """The alert naming the root, picked as the live header and ``distmon report`` pick it
    (:func:`~distmon.monitor.state.ending.cause`: a rank that raised before the peers it left
    waiting), else the first critical, else the first."""
    alerts = analysis.alerts
    return cause(alerts) or next(iter([a for a in alerts if a.severity == CRITICAL] or alerts), None)


def culprits(analysis: Analysis) -> list[int]:
    cause = first_cause(analysis)
    return sorted(cause.ranks) if cause else []


def summary(analysis: Analysis) -> str:
    cause = first_cause(analysis)
    if cause is not None:
        return cause.headline
    if not analysis.ranks:
        return "nothing to judge: no dump or watchdog line was read"
    return NOTHING


def render(analysis: Analysis) -> str:
    judged = date_time(analysis.t) if analysis.t else "an unknown time"
    lines = [
        f"Read {count(analysis.dumps, 'dump')} and {count(analysis.logs, 'log')}: {count(analysis.world, 'rank')} "
        f"(world size from {analysis.world_from}), judged as of {judged}",
    ]
    if analysis.missing:
        lines.append(_missing(analysis.missing))
    lines.append("")
    cause = first_cause(analysis)
    if cause is None:
        lines.append(summary(analysis).capitalize() + ".")
    else:
        lines.append(
            f"CULPRIT {rank_word(cause.ranks) if cause.ranks else '(none named)'}: {visible(cause.headline, MAX_LINE)}"
        )
        found = evidence(analysis, sorted(cause.ranks))
        for item in found:
            lines += ["  " + line for line in item.lines()]
        lines += ["  " + line for line in _detail(cause.detail, bool(found))]
        for a in analysis.alerts:
            if a is not cause:
                lines += [
                    "",
                    f"Also: {visible(a.headline, MAX_LINE)}",
                    *("  " + line for line in a.detail.splitlines()),
                ]
    lines += ["", "Where each rank stood:"]
    lines += ["  " + line for line in _standing(analysis)]
    if analysis.problems:
        lines += ["", "Files not read:"] + ["  " + visible(p, MAX_LINE) for p in analysis.problems]
    return visible_lines("\n".join(lines))


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


def _standing(analysis: Analysis) -> list[str]:
    """Ranks standing in the same place, one line each (thousands of ranks are a few lines)."""
    places: dict[str, list[int]] = {}
    named = {e.rank: e.why for e in evidence(analysis, culprits(analysis))}
    for rank, f in analysis.ranks.items():
        place = _place(f, analysis.t)
        places.setdefault(f"CULPRIT, {named[rank]}; {place}" if rank in named else place, []).append(rank)
    for rank, why in analysis.missing.items():
        if rank not in analysis.ranks:
            places.setdefault(f"no evidence ({why}): judged as never heard from", []).append(rank)
    ordered = sorted(places.items(), key=lambda item: min(item[1]))
    return [f"{rank_word(ranks)}: {place}" for place, ranks in ordered]


def _place(f: RankFacts, t: float) -> str:
    """Where the rank is held up (a dump's oldest pending work, a log's timed-out work), and
    how much of its work is queued behind that on its device."""
    flying = [g for g in f.groups if g.enqueued > g.completed]
    channels = f.dump.p2p if f.dump else []
    held = [g for g in flying if g.since] or ([] if f.dump else flying)
    blocked = [c for c in channels if c.blocked is not None]
    parts = [_in_collective(g, t) for g in held]
    for c in blocked:
        op = f"send #{c.blocked} to rank {c.peer}" if c.dir == SEND else f"recv #{c.blocked} from rank {c.peer}"
        waited = f" for {duration(t - c.blocked_since)}" if c.blocked_since else ""
        parts.append(f"in {op} (group {visible(c.group)}){waited}")
    queued = len(flying) - len(held) + sum(1 for c in channels if c.pending is not None and c.blocked is None)
    behind = f"; {queued} more of its groups and channels have work queued behind it" if queued and parts else ""
    if parts:
        return "waits " + "; ".join(parts) + behind
    if flying:
        return "waits in " + "; ".join(_in_collective(g, t) for g in flying)
    if f.dump is not None and not f.dump.groups:
        return "empty dump: no work recorded (it hung before any, or its dump was taken while stuck)"
    done = [g for g in f.groups if g.completed]
    last = ", ".join(f"#{g.completed} in {visible(g.desc or 'group ' + g.id)}" for g in done[:4])
    return f"nothing in flight (in its own code); completed {last or 'no collective'}"


def _in_collective(g: GroupStatus, t: float) -> str:
    op = f" ({visible(g.op)})" if g.op else ""
    waited = f" for {duration(t - g.since)}" if g.since else ""
    return f"in collective #{g.completed + 1}{op} of {visible(group_name(g.id, g))}{waited}"


def to_json(analysis: Analysis) -> dict[str, Any]:
    return {
        "culprits": culprits(analysis),
        "evidence": [e.to_json() for e in evidence(analysis, culprits(analysis))],
        "summary": summary(analysis),
        "world": analysis.world,
        "t": analysis.t,
        "alerts": [a.to_json() for a in analysis.alerts],
        "ranks": [_rank_json(analysis.ranks[r]) for r in sorted(analysis.ranks)],
        "missing": [{"rank": r, "reason": why} for r, why in sorted(analysis.missing.items())],
        "problems": analysis.problems,
    }


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
    g = next((g for g in f.groups if g.enqueued > g.completed), None)
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
