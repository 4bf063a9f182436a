"""Which well-formed reports the monitor lets into its state, whatever the senders do.

A report is a claim by whoever sent it. It is admitted only if it fits the job as seen so
far: a rank inside the job's world, the world size the job started with, and one process
per rank, replaced only the way a restart replaces it. So the monitor's memory is bounded by
the job's own world size and, whatever that claims, by :data:`MAX_WORLD` ranks and
:data:`MAX_RETAINED_BYTES` of reports.

Each refusal has a reason, counted next to the wire's (``malformed``, ``oversized``...):
"""

from __future__ import annotations

from distmon.wire import Report

MAX_WORLD = 16_384
"""The largest world size followed: twice the largest jobs distmon is built for, about
180 MB of monitor state when every rank reports (11 KB a rank)."""
MAX_RETAINED_BYTES = 256 * 1024 * 1024
"""The most report bytes (as received) kept across all ranks: 4 KB a rank at 8,192 ranks
is 32 MB, so only a flood of maximal reports reaches it."""
RESTART_QUIET = 1.0
"""A rank's new process (another pid or host) is a restart only once the old one has
exited or has been silent this long, or two of its intervals if longer."""
RESTART_QUIET_MAX = 60.0
"""However long the interval the old process claimed, a minute of silence is a restart."""

WORLD_TOO_LARGE = "world_too_large"
"""The report's world size is below 1 or above :data:`MAX_WORLD`."""
WORLD_CHANGED = "world_changed"
"""The world size differs from the one the job's first admitted report gave."""
RANK_OUT_OF_RANGE = "rank_out_of_range"
"""The rank is outside ``[0, world)``."""
PROCESS_CHURN = "process_churn"
"""Another process claims a rank whose process is alive and reporting: two senders for one
rank (a spoof or two jobs sharing a job id), or pids and hosts changing faster than any
restart."""
OVER_BUDGET = "over_budget"
"""Keeping the report would take the job past :data:`MAX_RETAINED_BYTES`."""


def refusal(report: Report, world: int | None, current: Report | None, silent: float) -> str | None:
    """Why ``report`` is refused, or None to admit it.

    ``world`` is the job's world size so far (None before its first report), ``current``
    the rank's latest admitted report and ``silent`` the seconds since it arrived.
    """
    if not 1 <= report.world <= MAX_WORLD:
        return WORLD_TOO_LARGE
    if world is not None and report.world != world:
        return WORLD_CHANGED
    if not 0 <= report.rank < report.world:
        return RANK_OUT_OF_RANGE
    if current is not None and not _same_process(current, report) and not _restarted(current, silent):
        return PROCESS_CHURN
    return None


def _same_process(a: Report, b: Report) -> bool:
    return a.pid == b.pid and a.host == b.host


def _restarted(old: Report, silent: float) -> bool:
    """The old process is gone, as far as the monitor can tell."""
    quiet = min(RESTART_QUIET_MAX, max(RESTART_QUIET, 2 * old.interval))
    return old.exit is not None or silent >= quiet
