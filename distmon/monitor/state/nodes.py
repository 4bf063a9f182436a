"""Nodes: a node falls silent as a whole (its relay and every rank behind it, or, without a
relay, every rank of one host together), and its network links as its relay read them.

A node is a thing that fails: a cut link, a kernel panic, a power loss take its relay and
its ranks in the same second. Named rank by rank, that incident reads as ranks that stopped
short of a collective (a code path only some ranks take); named as a node, it reads as what it
is. Which of the silent nodes is lost, and which only unwatched (its relay died, its ranks
train on), the rules judge (:mod:`distmon.monitor.rules.nodes`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from distmon import wire
from distmon.monitor.state.arrays import distinct
from distmon.monitor.state.columns import I8, Columns
from distmon.monitor.state.facts import flagged
from distmon.monitor.state.limits import Thresholds
from distmon.node.links import Link, LinkChange
from distmon.wire.link import Relay

TOGETHER = 0.5
"""Seconds beyond one report interval within which a host's ranks last heard fell silent
together: each reports at its own phase of the interval, so a node that went at once leaves
last reports up to an interval apart."""
MAX_SAID = 32
"""Link changes a node's record keeps, the latest last."""


@dataclass
class NodeLinks:
    """A node's network links as its relay last read them (at ``t``, on the relay's clock),
    and the changes it said between its readings (:func:`distmon.node.links.changes`), the
    latest last, at most :data:`MAX_SAID`: a link that went down while the node was cut off is
    told once it is heard again."""

    t: float
    links: tuple[Link, ...] = ()
    said: tuple[LinkChange, ...] = ()

    def then(self, t: float, links: Iterable[Link], said: Iterable[LinkChange]) -> NodeLinks:
        """This record after a new reading (``links``, at ``t``) and the changes said with it,
        the latest :data:`MAX_SAID` kept."""
        return NodeLinks(t, tuple(links), (*self.said, *said)[-MAX_SAID:])

    def downs(self, since: float) -> list[LinkChange]:
        """The changes said at or after ``since`` that went against the network (a link
        down, a carrier lost, a port's down counter moved)."""
        return [c for c in self.said if c.down and c.t >= since]

    def down(self) -> list[Link]:
        """The links down in the latest reading."""
        return [link for link in self.links if not link.up]


@dataclass(frozen=True)
class SilentNode:
    """A node heard from as a whole no more: its ``host``, its ``ranks`` (those not exited), when
    it was last heard (``since``, on the monitor's clock), and the relay it reported through
    (None: its ranks reported straight to the monitor)."""

    host: str
    ranks: I8
    since: float
    relay: Relay | None


class NodeFacts(Protocol):
    """What :func:`silent_nodes` reads of a job (:class:`~distmon.monitor.state.job.JobState`):
    the columns, the thresholds the monitor runs with, the relays and when each was heard, and
    the hosts' names."""

    @property
    def cols(self) -> Columns: ...
    @property
    def limits(self) -> Thresholds: ...
    @property
    def relays(self) -> list[Relay]: ...
    @property
    def relay_heard(self) -> list[float]: ...
    def host_name(self, host: int) -> str: ...


def silent_nodes(job: NodeFacts, now: float, overdue: bool = False) -> list[SilentNode]:
    """The nodes silent as a whole at ``now``: a relay not heard, not even its empty batch, with
    every rank last heard through it; or two or more ranks of one host, straight to the
    monitor, last heard within an interval of each other, and none of that host's since
    (``overdue``: such a host not heard for two of its intervals, the moment before silent;
    its ranks' last reports come up to an interval apart, while a relay's ranks come in its
    batches and fall silent with it)."""
    c, limits = job.cols, job.limits
    watched = c.present & ~flagged(c, wire.FLAG_EXITED)
    silent = watched & (now - c.received >= limits.silent_after(c.interval))
    nodes = []
    relayed = watched & (c.via >= 0)
    for i in distinct(c.via[relayed & silent]).tolist():
        ranks = np.flatnonzero(relayed & (c.via == i))
        if now - job.relay_heard[i] >= limits.silent_after(float(np.nanmax(c.interval[ranks]))) and silent[ranks].all():
            relay = job.relays[i]
            nodes.append(SilentNode(relay.host, ranks, job.relay_heard[i], relay))
    quiet = watched & (now - c.received >= limits.overdue_after(c.interval)) if overdue else silent
    direct = watched & (c.via < 0)
    for host in distinct(c.host[direct & quiet]).tolist():
        ranks = np.flatnonzero(direct & (c.host == host))
        heard = c.received[ranks]
        together = float(heard.max() - heard.min()) <= float(np.nanmax(c.interval[ranks])) + TOGETHER
        if len(ranks) > 1 and quiet[ranks].all() and together:
            nodes.append(SilentNode(job.host_name(host), ranks, float(heard.max()), None))
    return nodes
