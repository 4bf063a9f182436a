"""``monitor_behind``: the monitor itself cannot keep up, or did not watch for a while (its loop
stood still, its clock jumped; :mod:`distmon.monitor.rules.keeping_up`), and says so in one alert without
ranks instead of blaming the ranks whose reports it lost or whose seconds it did not see. It
resolves when the monitor has caught up."""

from __future__ import annotations

from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import WARNING, Finding
from distmon.monitor.state.kinds import AlertKind

AWAY_ADVICE = (
    "What to do: nothing about the job. If the monitor's host suspends or swaps (a laptop, a busy "
    "login node), or something stops the monitor, run it where it keeps running."
)
ON_THE_WAY_ADVICE = (
    "What to do: relieve the relays' upstream: relays in a tree (a relay per rack as the node relays' "
    "--upstream), a longer --interval, or a monitor with a machine of its own."
)
BEHIND_ADVICE = (
    "What to do: give the monitor fewer reports to take in: a relay per node (distmon relay), "
    "a longer report interval (DISTMON_INTERVAL), or a machine of its own."
)


def monitor_behind(job: JobState, ctx: Context) -> list[Finding]:
    if ctx.behind is None:
        return []
    detail = "\n".join(
        [
            f"{ctx.behind.detail[:1].upper()}{ctx.behind.detail[1:]}." if ctx.behind.detail else "",
            "Ranks whose reports it lost or has yet to take in look silent: it names no rank for that "
            "silence until it has caught up, and names culprits again then.",
            AWAY_ADVICE if ctx.behind.away else ON_THE_WAY_ADVICE if ctx.behind.on_the_way else BEHIND_ADVICE,
        ]
    ).strip()
    return [Finding("monitor_behind", AlertKind.MONITOR_BEHIND, WARNING, [], ctx.behind.summary, detail)]
