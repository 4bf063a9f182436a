"""The text exports: the post-mortem report of a recording, first cause on top, and one
line per alert change for a batch job's log."""

from __future__ import annotations

from distmon.guards.text import MAX_LINE, visible, visible_lines
from distmon.monitor.recording.readback import Postmortem
from distmon.monitor.state.alerts import Change
from distmon.monitor.state.ending import fates, rank_ending
from distmon.monitor.state.words import (
    MAX_LISTED,
    blind_words,
    count,
    date_time,
    dropped_words,
    duration,
    pace_words,
    rank_word,
    reach_line,
    stackless_words,
    time_of_day,
    unwatched_words,
)


def alert_line(change: Change, t: float) -> str | None:
    """The line a batch job's log gets for an alert change at time ``t`` (``distmon record``,
    ``replay --headless``): one when it is raised, turns critical or is resolved; None for the
    rewording of its evidence at every tick."""
    a = change.then
    stamp, since = time_of_day(t), time_of_day(a.t)
    if change.event == "resolved":
        return f"distmon {stamp} resolved {visible(a.headline, MAX_LINE)}"
    if change.escalated:
        return f"distmon {stamp} {a.severity.upper()} {visible(a.headline, MAX_LINE)} (a warning since {since})"
    if change.event == "updated":
        return None
    return f"distmon {stamp} {a.severity.upper()} {visible(a.headline, MAX_LINE)}"


def render(pm: Postmortem) -> str:
    state = pm.state
    start = pm.first or pm.header.get("created", 0.0)
    end = pm.last or start
    span = end - start
    found = int(state.found().sum())
    seen = "found without the hook (judged from outside), " if found else ""
    lines = [
        f"Job {visible(state.job or '(no rank reported)')}: {count(state.world, 'rank')} on "
        f"{count(len(state.hosts), 'host')}, {seen}recorded {date_time(start)} for {duration(span)}",
        count(state.received, "message") + _dropped(pm),
        f"Ended: {pm.ending()}",
        *([f"Not seen from outside: {visible(blind)}"] if (blind := blind_words(state.unwatched_hosts())) else []),
        *([f"Not seen from outside: {visible(unseen)}"] if (unseen := stackless_words(*state.stackless(end))) else []),
        *(f"Not seen: {visible(line)}" for r in state.told.reached.values() if (line := reach_line(r))),
        "",
    ]
    cause = pm.first_cause
    if cause is None and not state.ranks:
        lines.append("No rank reported: nothing was monitored (check the ranks' DISTMON_ENDPOINT).")
    elif cause is None and not pm.alerts and found and unseen:
        lines.append(
            "No alerts, but nothing could be judged: without their stacks, ranks found from outside say nothing."
        )
    elif cause is None and not pm.alerts and found:
        lines.append("No alerts: seen from outside, no rank held the others up for the whole recording.")
    elif cause is None and not pm.alerts and not pm.progressed:
        lines.append("No alerts, but no rank made any progress (no step, no collective): not a healthy run.")
    elif cause is None and not pm.alerts:
        lines.append("No alerts: the job looked healthy for the whole recording.")
    elif cause is None:
        lines.append(pm.no_cause())
    else:
        lines += [
            f"FIRST CAUSE (+{duration(cause.t - start)}): {visible(cause.headline, MAX_LINE)}",
            *("  " + line for line in cause.detail.splitlines()),
        ]
    if pm.alerts:
        lines += ["", "Timeline:"]
        for a in pm.alerts:
            until = f", resolved at +{duration(a.resolved - start)}" if a.resolved else ""
            if a.resolved is None and state.ranks and all(r.finished for r in state.ranks.values()):
                until = ", ended with the job"
            lines.append(
                f"  +{duration(a.t - start):>6}  {a.severity:<8} {visible(a.kind):<15} {visible(a.summary)}{until}"
            )
        for a in pm.alerts:
            if a is not cause:
                lines += ["", f"+{duration(a.t - start)}: {visible(a.headline, MAX_LINE)}"]
                lines += ["  " + line for line in a.detail.splitlines()]
    lines += ["", "Ranks at the end of the recording:"]
    end = pm.last or start
    known = fates(state, pm.alerts, end)
    for rank in sorted(state.ranks):
        s = state.ranks[rank]
        r = s.report
        steps = "-" if r.outside is not None else r.steps
        lines.append(f"  rank {rank:>5}  {visible(r.host):<20} step {steps:>8}  {rank_ending(s, end, known)}")
    unknown = set(range(state.world)) - set(state.ranks)
    if unknown:
        lines.append(f"  never reported: {rank_word(unknown)}")
    return visible_lines("\n".join([*lines, *_pace(pm)]))


def _pace(pm: Postmortem) -> list[str]:
    """Who held the others up at the job's pace at the end (the ranks that did, by their
    share of the others' time, most first): the straggler's measure, read after the fact."""
    paces = {rank: s.pace() for rank, s in pm.state.ranks.items()}
    holding = sorted(((p.holds, rank) for rank, p in paces.items() if p is not None and p.holds), reverse=True)
    if not holding:
        known = any(p is not None and p.holds is not None for p in paces.values())
        return ["", "Pace: no rank held the others up beyond chance."] if known else []
    shown = [f"  rank {rank}: {pace_words(paces[rank])}" for _, rank in holding[:MAX_LISTED]]
    more = [f"  and {count(len(holding) - MAX_LISTED, 'rank')} more"] if len(holding) > MAX_LISTED else []
    return ["", "Pace, at the end (who held the others up):", *shown, *more]


def _dropped(pm: Postmortem) -> str:
    """Messages dropped, and seconds the monitor did not watch, each in its own unit."""
    dropped, unwatched = dropped_words(pm.state.dropped), unwatched_words(pm.state.unwatched)
    return (f"; dropped: {dropped}" if dropped else "") + (f"; not watched: {unwatched}" if unwatched else "")
