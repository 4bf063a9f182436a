"""``straggler``: a rank, or a node, that holds the job up in every step.

Step rates stay equal, because every rank waits for the slowest in each collective; so the
straggler shows as the rank that waits least, by its own samples, against its peers in its
groups of collectives (:mod:`distmon.monitor.state.pace` works the hold-ups out). It is named
once the hold-up is sure (``Thresholds.straggler_sure`` standard errors: the more samples,
the smaller a slowdown that is sure) and costs the job ``straggler_cost`` of its time or more;
it stays named while it is ``straggler_still`` sure and costs half that, so a straggler near
the line is one alert, not one a minute. A rank its peers in some group hold up is no
straggler, whoever it holds up in turn: a victim of a slow tensor-parallel peer comes late to
its data-parallel group, for the peer's sake. A node whose every rank is one is named as the
node. Pauses count for nothing: the ranks sample their steps only
(:class:`~distmon.wire.Pace`), so a metrics upload every 25 steps, a checkpoint or a stall
make no straggler, and belong to the routine and the hang rule.

This module decides; :mod:`distmon.monitor.rules.pace_words` words what it decides.
"""

from __future__ import annotations

import contextlib

import numpy as np

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.pace_words import Straggler, finding
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import Finding
from distmon.node.proc import CPUS

STARVED_SHARE = 0.2
"""A straggler whose training thread waited for a CPU this share of the time or more is
named as short of CPU."""
STARVED_OF_DATA = 3.0
"""A straggler that waits for data this many times as long as its peers (and 5% of the time
more) is starved of data."""


def straggler(job: JobState, ctx: Context) -> list[Finding]:
    held = job.holdups()
    limits = ctx.limits
    cost = held.share / (1 - held.share)
    standing = np.zeros(len(cost), dtype=bool)
    for key in ctx.standing:
        for rank in _named_in(key, job):
            standing[rank] = True
    with np.errstate(invalid="ignore"):
        sure = (held.sure >= limits.straggler_sure) & (cost >= limits.straggler_cost)
        still = standing & (held.sure >= limits.straggler_still) & (cost >= limits.straggler_cost / 2)
        named = (sure | still) & (held.held > -limits.straggler_still)
    ranks = np.flatnonzero(named)
    if not len(ranks):
        return []
    data = job.cols.data_wait_share
    peers_data = float(np.median(data[~np.isnan(held.waits)]))
    findings = []
    for culprits, host in _by_node(job, ranks):
        first = culprits[0]
        looked, starved = _starved(job, culprits, ctx)
        if not looked:
            continue
        slow_data = all(data[r] >= STARVED_OF_DATA * peers_data + 0.05 for r in culprits)
        share = float(np.median(held.share[culprits]))
        facts = Straggler(
            ranks=tuple(culprits),
            host=host,
            share=share,
            waits=float(np.median(held.waits[culprits])),
            peers=float(np.median(held.peers[culprits])),
            group=job.group(int(job.cols.g_id[first, held.slot[first]])),
            data=float(np.median(data[culprits])),
            peers_data=peers_data,
            slow_data=slow_data,
            starved=starved,
            report=job.report_of(first),
        )
        findings.append(finding(facts))
    return findings


def _named_in(key: str, job: JobState) -> list[int]:
    """The ranks a straggler's key names (:func:`~distmon.monitor.rules.pace_words.key`)."""
    kind, _, who = key.partition(":")
    if kind != "straggler":
        return []
    if who.startswith("node "):
        c = job.cols
        named: list[int] = np.flatnonzero(c.present & (c.host == wire.name_hash(who.removeprefix("node ")))).tolist()
        return named
    return [int(who)] if who.isdigit() and int(who) < job.cols.capacity else []


def _by_node(job: JobState, ranks: np.ndarray) -> list[tuple[list[int], str | None]]:
    """The stragglers, a node's together where every rank of it that steps is one (two or
    more, and ranks elsewhere step too), each other one alone."""
    c = job.cols
    stepping = ~np.isnan(job.holdups().waits)
    found: list[tuple[list[int], str | None]] = []
    alone = []
    for host in np.unique(c.host[ranks]).tolist():
        mine = ranks[c.host[ranks] == host].tolist()
        on_host = np.flatnonzero(stepping & (c.host == host))
        whole = len(mine) >= 2 and len(mine) == len(on_host) and np.count_nonzero(stepping) > len(on_host)
        if whole:
            found.append((mine, job.host_name(int(host))))
        else:
            alone += mine
    return found + [([r], None) for r in sorted(alone)]


def _starved(job: JobState, ranks: list[int], ctx: Context) -> tuple[bool, str | None]:
    """Whether the ranks could be looked at, and, where the prober sees the first one's
    process (on this host), how much of the time its training thread waited for a CPU when
    that is a fifth or more: then it is slow because its host runs more than it has CPUs for,
    not because of its own work or its GPU. A rank on this host that the prober has yet to
    look at for a second is not named yet (the first call starts the looking; the rule runs
    again seconds later)."""
    host, pid = job.process_of(ranks[0])
    seen = on_host = None
    with contextlib.suppress(Exception):
        on_host = ctx.probe(host, pid) if ctx.probe is not None else None
        seen = ctx.outside(host, pid) if ctx.outside is not None else None
    if seen is None or seen.first is None or seen.last is None or seen.last.t - seen.first.t < 1.0:
        return on_host is None or ctx.outside is None, None
    share = (seen.last.queued - seen.first.queued) / (seen.last.t - seen.first.t)
    if share < STARVED_SHARE:
        return True, None
    load = f"host load {seen.last.load:.1f} on {CPUS} CPUs"
    return True, f"its training thread waited for a CPU {share:.0%} of the time ({load})"
