"""``straggler``: a rank persistently slower than its peers.

Step rates stay equal, because every rank waits for the slowest in each collective; so
the straggler shows as the rank that waits least. Each rank samples itself every
interval: inside a collective or not. Averaged, that is the share of time it waits on
its peers: high for the ranks held up, near zero for the one holding them up. A rank
whose DataLoader wait dwarfs its peers' is slow for want of data.
"""

from __future__ import annotations

import numpy as np

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.state.alerts import WARNING, Finding
from distmon.monitor.state.columns import F8
from distmon.monitor.state.job import JobState, RankState


def straggler(job: JobState, ctx: Context) -> list[Finding]:
    limits, c = ctx.limits, job.cols
    ranks = np.flatnonzero(
        c.present & (c.samples >= limits.straggler_min_samples) & ~job.flagged(wire.EXITED) & np.isnan(c.stalled_since)
    )
    if len(ranks) < 2:
        return []
    wait, data = c.inflight_share[ranks], c.data_wait_share[ranks]
    peer_wait, peer_data = _medians_without(wait), _medians_without(data)
    slow_compute = (peer_wait >= limits.straggler_min_peer_wait) & (wait <= limits.straggler_wait_ratio * peer_wait)
    slow_data = (data >= limits.straggler_data_wait) & (data >= 3 * peer_data + 0.05)
    return [
        _finding(RankState(job, int(ranks[i])), float(peer_wait[i]), float(peer_data[i]), bool(slow_data[i]))
        for i in np.flatnonzero(slow_compute | slow_data).tolist()
    ]


def _medians_without(values: F8) -> F8:
    """For each value, the median of the others (its peers'): read off the sorted values by
    index, one occurrence of the value itself skipped."""
    ordered = np.sort(values)
    skip = np.searchsorted(ordered, values, side="left")
    n = len(values) - 1

    def rest(k: int) -> F8:
        value: F8 = np.where(k < skip, ordered[k], ordered[min(k + 1, n)])
        return value

    medians: F8 = rest(n // 2) if n % 2 else (rest(n // 2 - 1) + rest(n // 2)) / 2
    return medians


def _finding(s: RankState, peer_wait: float, peer_data: float, slow_data: bool) -> Finding:
    r = s.report
    step = f"{r.step_time.p50 * 1000:.0f} ms" if r.step_time else "unknown"
    summary = (
        f"rank {r.rank} waits for peers {s.inflight_share:.0%} of the time, "
        f"its peers {peer_wait:.0%}: everyone waits for it"
    )
    lines = [
        f"rank {r.rank} ({r.host}, pid {r.pid}) spends {s.inflight_share:.0%} of its time in "
        f"collectives against {peer_wait:.0%} for its peers (median); step time {step} for all, "
        "because the others wait for it in every collective.",
        f"Its DataLoader wait is {s.data_wait_share:.0%} of the time (peers {peer_data:.0%}).",
    ]
    if slow_data:
        lines.append(
            "What to do: it is starved of data: raise num_workers or prefetch_factor on it, check "
            "its host's storage and CPU load, and that its shard is not larger or slower to decode."
        )
    else:
        lines.append(
            f"What to do: look at {r.host}: GPU clocks and throttling (nvidia-smi -q -d "
            "PERFORMANCE), other processes on its CPUs or GPU, a slower device or link."
        )
    return Finding(f"straggler:{r.rank}", "straggler", WARNING, [r.rank], summary, "\n".join(lines))
