"""``straggler``: a rank persistently slower than its peers.

Step rates stay equal, because every rank waits for the slowest in each collective; so
the straggler shows as the rank that waits least. Each rank samples itself every
interval: inside a collective or not. Averaged, that is the share of time it waits on
its peers: high for the ranks held up, near zero for the one holding them up. A rank
whose DataLoader wait dwarfs its peers' is slow for want of data. The shares are of the
job's pace, not of its pauses (:data:`~distmon.monitor.state.limits.PAUSE_STEPS`): the
waits for a pause the job takes as a habit every N steps (a metrics upload,
:mod:`~distmon.monitor.rules.routine`) are left out of them, so its rank is no straggler,
while a rank the others wait for in every step, or every other one, is one whatever the
routine has seen.
"""

from __future__ import annotations

import contextlib

import numpy as np

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import WARNING, Finding
from distmon.monitor.state.columns import F8
from distmon.node.proc import CPUS

STARVED_SHARE = 0.2
"""A straggler whose training thread waited for a CPU this share of the time or more is
named as short of CPU."""


def straggler(job: JobState, ctx: Context) -> list[Finding]:
    """Judged over the whole job: while some rank is silent (a node unwatched, a rank stopped),
    whom the others wait for cannot be told from the ranks still heard, and nobody is named."""
    limits, c = ctx.limits, job.cols
    if job.silent(ctx.now).any():
        return []
    ranks = np.flatnonzero(
        c.present
        & (c.samples >= limits.straggler_min_samples)
        & ~job.flagged(wire.FLAG_EXITED)
        & np.isnan(c.stalled_since)
    )
    if len(ranks) < 2:
        return []
    wait, data = c.inflight_share[ranks], c.data_wait_share[ranks]
    peer_wait, peer_data = _medians_without(wait), _medians_without(data)
    slow_compute = (peer_wait >= limits.straggler_min_peer_wait) & (wait <= limits.straggler_wait_ratio * peer_wait)
    slow_data = (data >= limits.straggler_data_wait) & (data >= 3 * peer_data + 0.05)
    findings = []
    for i in np.flatnonzero(slow_compute | slow_data).tolist():
        s = RankState(job, int(ranks[i]))
        looked, starved = _starved(s, ctx)
        if looked:
            findings.append(_finding(s, float(peer_wait[i]), float(peer_data[i]), bool(slow_data[i]), starved))
    return findings


def _starved(s: RankState, ctx: Context) -> tuple[bool, str | None]:
    """Whether the rank could be looked at, and, where the prober sees its process (on this
    host), how much of the time its training thread waited for a CPU when that is a fifth or
    more: then it is slow because its host runs more than it has CPUs for, not because of its
    own work or its GPU. A rank on this host that the prober has yet to look at for a second
    is not named yet (the first call starts the looking; the rule runs again seconds later)."""
    r = s.report
    seen = on_host = None
    with contextlib.suppress(Exception):
        on_host = ctx.probe(r.host, r.pid) if ctx.probe is not None else None
        seen = ctx.outside(r.host, r.pid) if ctx.outside is not None else None
    if seen is None or seen.first is None or seen.last is None or seen.last.t - seen.first.t < 1.0:
        return on_host is None or ctx.outside is None, None
    share = (seen.last.queued - seen.first.queued) / (seen.last.t - seen.first.t)
    if share < STARVED_SHARE:
        return True, None
    load = f"host load {seen.last.load:.1f} on {CPUS} CPUs"
    return True, f"its training thread waited for a CPU {share:.0%} of the time ({load})"


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


def _finding(s: RankState, peer_wait: float, peer_data: float, slow_data: bool, starved: str | None) -> Finding:
    r = s.report
    step = f"{r.step_time.p50 * 1000:.0f} ms" if r.step_time else "unknown"
    summary = (
        f"rank {r.rank} waits for peers {s.inflight_share:.0%} of the time, "
        f"its peers {peer_wait:.0%}: everyone waits for it"
    )
    if starved is not None:
        summary = f"rank {r.rank} is short of CPU: {starved}; its peers wait for it {peer_wait:.0%} of the time"
    lines = [
        f"rank {r.rank} ({r.host}, pid {r.pid}) spends {s.inflight_share:.0%} of its time in "
        f"collectives against {peer_wait:.0%} for its peers (median); step time {step} for all, "
        "because the others wait for it in every collective.",
        f"Its DataLoader wait is {s.data_wait_share:.0%} of the time (peers {peer_data:.0%}).",
    ]
    if starved is not None:
        lines.append(
            f"What to do: other processes take {r.host}'s CPUs (another job, DataLoader workers, a "
            "compile): `top` on it; give the job the host's CPUs, or fewer workers or threads per rank "
            "(num_workers, OMP_NUM_THREADS)."
        )
    elif slow_data:
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
