"""``straggler``: a rank, or a node, that holds the job up in every step.

Step rates stay equal, because every rank waits for the slowest in each collective; so the
straggler shows as the rank that waits least, by its own samples, against its peers in its
groups of collectives (:mod:`distmon.monitor.state.pace` works the hold-ups out). It is named
once the hold-up is sure (``Thresholds.straggler_sure`` standard errors: the more samples,
the smaller a slowdown that is sure) and costs the job ``straggler_cost`` of its time or more;
it stays named while it is ``straggler_still`` sure and still holds its peers up at all, so a
straggler near the line, or on a host whose load comes and goes, is one alert, not one a
minute. A rank its peers in some group hold up is no
straggler, whoever it holds up in turn: a victim of a slow tensor-parallel peer comes late to
its data-parallel group, for the peer's sake. A node whose every rank is one is named as the
node. Pauses count for nothing: the ranks sample their steps only
(:class:`~distmon.wire.Pace`), so a metrics upload every 25 steps, a checkpoint or a stall
make no straggler, and belong to the routine and the hang rule.

Ranks that share a host with more work than CPUs come to their collectives late by as much as
the scheduler keeps them waiting, whatever their own pace: where an eye sees its host, a rank
whose peers share its CPUs is named only if it holds them up by :data:`SCHEDULED` times the
share of time it waited for a CPU. A rank whose wait for a CPU beyond its peers' makes up half
its hold-up or more (a busy neighbour on its node) is named as short of CPU; where its peers
wait as long, or its own work holds them up most, the wait is not what makes it slower, and it
is named as holding its peers up.

This module decides; :mod:`distmon.monitor.rules.pace_words` words what it decides.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.rules.pace_words import Straggler, finding
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import Finding
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.pace import Holdups

STARVED_SHARE = 0.2
"""A straggler whose training thread waited for a CPU this share of the time or more, where
what it waited beyond its peers makes up half its hold-up, is named as short of CPU."""
SCHEDULED = 2.0
"""Ranks that wait for a CPU some share of the time may come to their collectives that much
late, for the scheduler's sake alone: where its peers share its host and wait for its CPUs
too, a rank holds them up only if it does so by this many times that share or more."""
JUDGED = 8
"""A job of this many ranks judged or fewer names a straggler as sure as the thresholds say."""
LOOKED_AT = 8
"""Peers on its host looked at, at most, to tell whether they wait for its CPUs too."""
STARVED_OF_DATA = 3.0
"""A straggler that waits for data this many times as long as its peers (and 5% of the time
more) is starved of data."""


@dataclass(frozen=True)
class Cpu:
    """What a rank's host says of its CPUs, where an eye sees that host."""

    waited: float
    """The share of the time the rank's training thread waited, runnable, for a CPU."""
    load: float
    cpus: int
    """The host's CPUs; 0 where its eye does not say."""


def straggler(job: JobState, ctx: Context) -> list[Finding]:
    """Judged over the whole job: while some rank is silent (a node unwatched, a rank stopped),
    whom the others wait for cannot be told from the ranks still heard, and nobody is named."""
    if job.silent(ctx.now).any():
        return []
    held = job.holdups()
    limits = ctx.limits
    cost = held.share / (1 - held.share)
    standing = np.zeros(len(cost), dtype=bool)
    for key in ctx.standing:
        standing[_named_in(key, job)] = True
    with np.errstate(invalid="ignore"):
        unheld = (held.held > -limits.straggler_still) & ~job.flagged(wire.FLAG_EXITED)
        near = unheld & (held.sure >= limits.straggler_still) & (cost >= limits.straggler_cost / 2)
        sure = unheld & (held.sure >= _bar(limits.straggler_sure, held)) & (cost >= limits.straggler_cost)
        still = standing & unheld & (held.sure >= limits.straggler_still) & (held.share > 0)
    named: dict[int, Cpu | None] = {}  # each rank named, with its CPUs where it is short of them
    for rank in np.flatnonzero(near | still).tolist():  # looked at from outside once near the line, to be ready
        looked, cpu = _cpu(job, rank, ctx)
        short = _starved(job, held, rank, cpu, ctx)
        if still[rank] or (looked and sure[rank] and short is not None and _own(job, held, rank, cpu, ctx)):
            named[rank] = cpu if short else None
    if not named:
        return []
    data = job.cols.data_wait_share
    peers_data = float(np.median(data[~np.isnan(held.waits)]))
    findings = []
    for culprits, host in _by_node(job, np.array(sorted(named)), near | still):
        first = culprits[0]
        cpu = next((named[r] for r in culprits if named.get(r) is not None), None)
        facts = Straggler(
            ranks=tuple(culprits),
            host=host,
            share=float(np.median(held.share[culprits])),
            waits=float(np.median(held.waits[culprits])),
            peers=float(np.median(held.peers[culprits])),
            group=job.group(int(job.cols.g_id[first, held.slot[first]])),
            data=float(np.median(data[culprits])),
            peers_data=peers_data,
            slow_data=all(data[r] >= STARVED_OF_DATA * peers_data + 0.05 for r in culprits),
            starved=_starved_words(cpu) if cpu is not None else None,
            report=job.report_of(first),
        )
        findings.append(finding(facts))
    return findings


def _bar(sure: float, held: Holdups) -> float:
    """How sure a hold-up must be to name its rank, among this many ranks judged: ``sure``
    among :data:`JUDGED` or fewer; more among more, as the largest of their chance deviations
    grows (as the root of twice its log), so a job of 131,072 ranks names no more ranks by
    chance than one of eight."""
    judged = np.count_nonzero(~np.isnan(held.sure))
    return math.hypot(sure, math.sqrt(2 * math.log(max(1.0, judged / JUDGED))))


def _named_in(key: str, job: JobState) -> list[int]:
    """The ranks a straggler's key names (:func:`~distmon.monitor.rules.pace_words.key`)."""
    kind, _, who = key.partition(":")
    if kind != AlertKind.STRAGGLER:
        return []
    if who.startswith("node "):
        c = job.cols
        named: list[int] = np.flatnonzero(c.present & (c.host == wire.name_hash(who.removeprefix("node ")))).tolist()
        return named
    return [int(who)] if who.isdigit() and int(who) < job.cols.capacity else []


def _own(job: JobState, held: Holdups, rank: int, cpu: Cpu | None, ctx: Context) -> bool:
    """Whether the rank's hold-up is its own, not its host's scheduler's: unless its peers in
    the group it holds up all share its host and wait for its CPUs too (their median share of
    time waiting for one; the first :data:`LOOKED_AT` looked at), and it holds them up by less
    than :data:`SCHEDULED` times what it and they waited. False too while they have yet to be
    looked at."""
    if cpu is None or held.share[rank] >= SCHEDULED * cpu.waited:
        return True
    peers = _peers(job, held, rank)
    if (job.cols.host[peers] != job.cols.host[rank]).any():
        return True
    waited = _peer_waits(job, peers, ctx)
    if waited is None:
        return False
    shared = min(cpu.waited, float(np.median(waited))) if waited else 0.0
    return bool(held.share[rank] >= SCHEDULED * shared)


def _starved(job: JobState, held: Holdups, rank: int, cpu: Cpu | None, ctx: Context) -> bool | None:
    """Whether the rank is short of CPU: its training thread waited for one :data:`STARVED_SHARE`
    of the time or more, and what it waited beyond its peers an eye sees (their median) makes
    up one :data:`SCHEDULED`-th of its hold-up or more. None while they have yet to be looked at."""
    if cpu is None or cpu.waited < STARVED_SHARE:
        return False
    waited = _peer_waits(job, _peers(job, held, rank), ctx)
    if waited is None:
        return None
    beyond = cpu.waited - (float(np.median(waited)) if waited else 0.0)
    return bool(beyond * SCHEDULED >= held.share[rank])


def _peers(job: JobState, held: Holdups, rank: int) -> np.ndarray:
    """The ranks that step in the group the rank holds up, but it."""
    c = job.cols
    gid = c.g_id[rank, held.slot[rank]]
    peers: np.ndarray = np.flatnonzero(c.present & (c.g_id == gid).any(axis=1) & ~np.isnan(held.waits))
    others: np.ndarray = peers[peers != rank]
    return others


def _peer_waits(job: JobState, peers: np.ndarray, ctx: Context) -> list[float] | None:
    """The share of the time each of the first :data:`LOOKED_AT` peers waited for a CPU, those an
    eye sees; None while some have yet to be looked at."""
    theirs = [_cpu(job, peer, ctx) for peer in peers[:LOOKED_AT].tolist()]
    if not all(looked for looked, _ in theirs):
        return None
    return [peer.waited for _, peer in theirs if peer is not None]


def _by_node(job: JobState, ranks: np.ndarray, near: np.ndarray) -> list[tuple[list[int], str | None]]:
    """The stragglers, a node's together where every rank of it that steps is one or ``near``
    the line (two or more, and ranks elsewhere step too: its ranks turn slow together, and are
    sure one by one), each other one alone."""
    c = job.cols
    stepping = ~np.isnan(job.holdups().waits)
    found: list[tuple[list[int], str | None]] = []
    alone = []
    for host in np.unique(c.host[ranks]).tolist():
        on_host = np.flatnonzero(stepping & (c.host == host))
        whole = len(on_host) >= 2 and near[on_host].all() and np.count_nonzero(stepping) > len(on_host)
        if whole:
            found.append((on_host.tolist(), job.host_name(int(host))))
        else:
            alone += ranks[c.host[ranks] == host].tolist()
    return found + [([r], None) for r in sorted(alone)]


def _cpu(job: JobState, rank: int, ctx: Context) -> tuple[bool, Cpu | None]:
    """Whether the rank could be looked at, and, where an eye sees its host, how much of the
    time its training thread waited for a CPU. A rank an eye sees but has yet to look at for
    a second is not judged yet (the first call starts the looking; the rule runs again
    seconds later)."""
    host, pid = job.process_of(rank)
    seen = on_host = None
    with contextlib.suppress(Exception):
        on_host = ctx.probe(host, pid) if ctx.probe is not None else None
        seen = ctx.outside(host, pid) if ctx.outside is not None else None
    if seen is None or seen.first is None or seen.last is None or seen.last.t - seen.first.t < 1.0:
        return on_host is None or ctx.outside is None, None
    waited = (seen.last.queued - seen.first.queued) / (seen.last.t - seen.first.t)
    return True, Cpu(waited, seen.last.load, seen.last.cpus)


def _starved_words(cpu: Cpu) -> str:
    on = f" on {cpu.cpus} CPUs" if cpu.cpus else ""
    return f"its training thread waited for a CPU {cpu.waited:.0%} of the time (host load {cpu.load:.1f}{on})"
