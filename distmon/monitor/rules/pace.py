"""``straggler``: a rank persistently slower than its peers.

Step rates stay equal, because every rank waits for the slowest in each collective; so
the straggler shows as the rank that waits least. Each rank samples itself every
interval: inside a collective or not. Averaged, that is the share of time it waits on
its peers: high for the ranks held up, near zero for the one holding them up. A rank
whose DataLoader wait dwarfs its peers' is slow for want of data.
"""

from __future__ import annotations

import bisect

from distmon.monitor.alerts import WARNING, Finding
from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState, RankState


def straggler(job: JobState, ctx: Context) -> list[Finding]:
    limits = ctx.limits
    ranks = [
        s
        for s in job.ranks.values()
        if s.samples >= limits.straggler_min_samples and not s.finished and s.report.stalled_since is None
    ]
    if len(ranks) < 2:
        return []
    findings = []
    waits = sorted(s.inflight_share for s in ranks)
    data = sorted(s.data_wait_share for s in ranks)
    for s in ranks:
        peer_wait = _median_without(waits, s.inflight_share)
        peer_data = _median_without(data, s.data_wait_share)
        slow_compute = (
            peer_wait >= limits.straggler_min_peer_wait and s.inflight_share <= limits.straggler_wait_ratio * peer_wait
        )
        slow_data = s.data_wait_share >= limits.straggler_data_wait and s.data_wait_share >= 3 * peer_data + 0.05
        if slow_compute or slow_data:
            findings.append(_finding(s, peer_wait, peer_data, slow_data))
    return findings


def _median_without(ordered: list[float], value: float) -> float:
    """The peers' median: that of the sorted list minus one occurrence of this rank's own
    value, read off by index so that thousands of ranks cost thousands of steps, not millions."""
    skip = bisect.bisect_left(ordered, value)
    n = len(ordered) - 1

    def rest(k: int) -> float:
        return ordered[k] if k < skip else ordered[k + 1]

    return rest(n // 2) if n % 2 else (rest(n // 2 - 1) + rest(n // 2)) / 2


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
