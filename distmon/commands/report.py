"""``distmon report FILE``: the post-mortem of a recorded run, first cause on top.

``--json`` prints the alerts as a JSON list of objects with exactly the fields
``kind, severity, ranks, t, summary, detail``, in the order they were raised. ``--html OUT``
writes the same post-mortem with plots as one self-contained page (see
:mod:`distmon.export.html`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from distmon.monitor.postmortem import Postmortem, load
from distmon.monitor.recording import RecordingError
from distmon.monitor.rules.text import duration, ranks_text
from distmon.monitor.state import RankState
from distmon.wire import ENDED, INTERRUPTED, TERMINATED

ENDINGS = {
    TERMINATED: "terminated by SIGTERM (the launcher's teardown)",
    INTERRUPTED: "interrupted (Ctrl-C)",
    ENDED: "ended by distmon (--abort-on-hang)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a recording made by distmon record or distmon watch --record")
    parser.add_argument("--json", action="store_true", help="print the alerts as JSON for other tools")
    parser.add_argument("--html", metavar="OUT", help="also write the post-mortem with plots to OUT, one offline page")


def run(args: argparse.Namespace) -> int:
    try:
        pm = load(args.file)
    except RecordingError as e:
        print(f"distmon report: {e}", file=sys.stderr)
        return 2
    text = render(pm)
    if args.json:
        json.dump([a.to_json() for a in pm.alerts], sys.stdout, indent=2)
        print()
    else:
        print(text)
    return _write_html(pm, args.file, text, args.html) if args.html else 0


def _write_html(pm: Postmortem, path: str, text: str, out: str) -> int:
    from distmon.export.html import MissingPlotly, render_page

    try:
        page = render_page(pm, path, text)
    except MissingPlotly as e:
        print(f"distmon report: {e}", file=sys.stderr)
        return 2
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as e:
        print(f"distmon report: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"distmon report: wrote {out} ({len(page) / 1e6:.1f} MB, opens offline)", file=sys.stderr)
    return 0


def render(pm: Postmortem) -> str:
    state = pm.state
    start = pm.first or pm.header.get("created", 0.0)
    span = (pm.last or start) - start
    lines = [
        f"Job {state.job or '(no rank reported)'}: {state.world} ranks on {len(state.hosts)} hosts, "
        f"recorded {_clock(start)} for {duration(span)}",
        f"{state.received} messages" + _dropped(pm),
        f"Ended: {pm.ending()}",
        "",
    ]
    cause = pm.first_cause
    if cause is None and not state.ranks:
        lines.append("No rank reported: nothing was monitored (check the ranks' DISTMON_ENDPOINT).")
    elif cause is None and not pm.progressed:
        lines.append("No alerts, but no rank made any progress (no step, no collective): not a healthy run.")
    elif cause is None:
        lines.append("No alerts: the job looked healthy for the whole recording.")
    else:
        lines += [
            f"FIRST CAUSE (+{duration(cause.t - start)}): {cause.summary}",
            *("  " + line for line in cause.detail.splitlines()),
            "",
            "Timeline:",
        ]
        for a in pm.alerts:
            until = f", resolved at +{duration(a.resolved - start)}" if a.resolved else ""
            if a.resolved is None and state.ranks and all(r.finished for r in state.ranks.values()):
                until = ", ended with the job"
            lines.append(f"  +{duration(a.t - start):>6}  {a.severity:<8} {a.kind:<15} {a.summary}{until}")
        for a in pm.alerts:
            if a is not cause:
                lines += ["", f"{a.kind} (+{duration(a.t - start)}): {a.summary}"]
                lines += ["  " + line for line in a.detail.splitlines()]
    lines += ["", "Ranks at the end of the recording:"]
    for rank in sorted(state.ranks):
        s = state.ranks[rank]
        r = s.report
        lines.append(f"  rank {rank:>5}  {r.host:<20} step {r.steps:>8}  {_ending(s, pm.last or start)}")
    unknown = set(range(state.world)) - set(state.ranks)
    if unknown:
        lines.append(f"  never reported: ranks {ranks_text(unknown)}")
    return "\n".join(lines)


def _ending(s: RankState, end: float) -> str:
    r = s.report
    if r.exception is not None:
        first_line = (r.exception.message.strip().splitlines() or [""])[0]
        return f"raised {r.exception.type}: {first_line[:80]}"
    if r.exit is not None:
        return ENDINGS.get(r.exit.how, "exited cleanly")
    silent = end - s.received
    return f"silent for {duration(silent)} at the end" if silent > 3 * r.interval else "running"


def _dropped(pm: Postmortem) -> str:
    dropped = pm.state.dropped
    if not dropped:
        return ""
    return "; dropped: " + ", ".join(f"{n} {why}" for why, n in sorted(dropped.items()))


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
