"""Which well-formed reports the monitor lets into its state, whatever the senders do.

A report is a claim by whoever sent it. It is admitted only if it fits the job as seen so
far: a rank inside the job's world, the world size the job started with, and one process
per rank, replaced only the way a restart replaces it. So the monitor's memory is bounded by
the job's own world size and, whatever that claims, by :data:`MAX_WORLD` ranks and
:data:`MAX_RETAINED_BYTES` of reports.

Each refusal has a reason, counted next to the wire's (``malformed``, ``oversized``...):
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MAX_WORLD = 262_144
"""The largest world size followed by default (``--max-world`` changes it): twice the largest
jobs distmon is built for. The monitor's state per rank (columns and two-minute histories,
the latest report as received; ``benchmarks/README.md`` gives its size) is allocated as ranks
appear."""
MAX_RETAINED_BYTES = 1024 * 1024 * 1024
"""The most report bytes (as received) kept across all ranks: 4 KiB a rank at ``MAX_WORLD``
ranks, well above a real report (``benchmarks/bench_hook.py`` measures its bytes), so only a
flood of maximal reports reaches it."""
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


REASONS = (None, WORLD_TOO_LARGE, WORLD_CHANGED, RANK_OUT_OF_RANGE, PROCESS_CHURN)
"""Refusal codes as :func:`refusals` returns them: 0 admits."""


def refusals(
    world: npt.NDArray[np.int64],
    rank: npt.NDArray[np.int64],
    job_world: int | None,
    max_world: int,
    churn: npt.NDArray[np.bool_],
) -> npt.NDArray[np.int8]:
    """Why each report is refused (an index into :data:`REASONS`, 0 to admit it), from the
    world size and rank it claims. ``job_world`` is the job's world size so far (None before
    its first report); ``churn`` marks reports from another process than the one reporting
    for their rank while that one is alive (:func:`restarted`)."""
    reason = np.zeros(len(rank), dtype=np.int8)
    reason[churn] = 4
    reason[(rank < 0) | (rank >= world)] = 3
    if job_world is not None:
        reason[world != job_world] = 2
    reason[(world < 1) | (world > max_world)] = 1
    return reason


def restart_quiet(interval: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """How long a rank's process must have been silent for another to take its place."""
    quiet: npt.NDArray[np.float64] = np.minimum(RESTART_QUIET_MAX, np.maximum(RESTART_QUIET, 2.0 * interval))
    return quiet
