"""``monitor_behind``: the monitor itself cannot keep up (:mod:`distmon.monitor.intake`), and
says so in one alert without ranks instead of blaming the ranks whose reports it lost. It
resolves when the monitor has caught up."""

from __future__ import annotations

from distmon.monitor.alerts import WARNING, Finding
from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState


def monitor_behind(job: JobState, ctx: Context) -> list[Finding]:
    if ctx.behind is None:
        return []
    detail = "\n".join(
        [
            f"{ctx.behind.detail[:1].upper()}{ctx.behind.detail[1:]}." if ctx.behind.detail else "",
            "Ranks whose reports it lost or has yet to take in look silent: it names no rank for that "
            "silence until it has caught up, and names culprits again then.",
            "What to do: give the monitor fewer reports to take in: a relay per node (distmon relay), "
            "a longer report interval (DISTMON_INTERVAL), or a machine of its own.",
        ]
    ).strip()
    return [Finding("monitor_behind", "monitor_behind", WARNING, [], ctx.behind.summary, detail)]
