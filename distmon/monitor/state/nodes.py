"""Nodes: a node falls silent as a whole (its relay and every rank behind it, or, without a
relay, every rank of one host together), and its network links as its relay read them.

A node is a thing that fails: a cut link, a kernel panic, a power loss take its relay and
its ranks in the same second. Named rank by rank, that incident reads as ranks that stopped
short of a collective (a code path only some ranks take); named as a node, it reads as what it
is. Which of the silent nodes is lost, and which only unwatched (its relay died, its ranks
train on), the rules judge (:mod:`distmon.monitor.rules.nodes`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

import numpy as np

from distmon import wire
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.columns import F8, I8, Columns
from distmon.monitor.state.facts import flagged
from distmon.monitor.state.limits import Thresholds
from distmon.node.links import Link, LinkChange, changes
from distmon.node.looks import MAX_REACHED, NO_PYSPY, SEEN, Reached
from distmon.wire.sockets import Relay

TOGETHER = 0.5
"""Seconds beyond one report interval within which a host's ranks last heard fell silent
together: each reports at its own phase of the interval, so a node that went at once leaves
last reports up to an interval apart."""
MAX_SAID = 32
"""Link changes a node's record keeps, the latest last."""
MAX_EYES = 1 << 17
"""Nodes known to have an eye, at most (a node per rank at the most ranks distmon admits)."""
MAX_GONE = 16384
"""Processes a job keeps as seen gone by the eyes (:attr:`~distmon.monitor.state.job.JobState.gone`), the latest."""
RELAY_INTERVAL = 1.0
"""A relay's batch interval (``distmon relay --interval``'s default): a relay is judged by its
ranks' report interval, and never by a shorter one than this."""


@dataclass
class NodeLinks:
    """A node's network links as its eye last read them (at ``t``, on the monitor's clock), and
    the changes between its readings (:func:`distmon.node.links.changes`, each at the later
    reading's time), the latest last, at most :data:`MAX_SAID`: a link that went down while the
    node was cut off is told once it is heard again, at the time it went."""

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


class EyesTold:
    """What the nodes' eyes told of the job's nodes, kept with the job
    (:attr:`~distmon.monitor.state.job.JobState.told`) and written only through what happened,
    as looks come (:class:`~distmon.monitor.outside.sight.Sight`, live or replayed; a recording
    read back): which nodes have an eye, each node's network links and the changes between its
    readings, the processes seen end."""

    def __init__(self) -> None:
        self._eyes: OrderedDict[str, None] = OrderedDict()
        self._links: dict[str, NodeLinks] = {}
        self._gone: OrderedDict[tuple[str, int], float] = OrderedDict()
        self._reached: dict[str, Reached] = {}
        self._reached_at: dict[str, float] = {}
        """When each node reached was last told of (the monitor's clock)."""

    @property
    def eyes(self) -> Mapping[str, None]:
        """The nodes whose eye has spoken (the monitor's own host, a relay's node), by host
        name, the most recent last: where a rank's process is seen from outside, not judged
        from its reports alone."""
        return MappingProxyType(self._eyes)

    @property
    def links(self) -> Mapping[str, NodeLinks]:
        """Per node, its network links as its eye last read them, and the changes said."""
        return MappingProxyType(self._links)

    @property
    def gone(self) -> Mapping[tuple[str, int], float]:
        """The processes (host, pid) the nodes' eyes saw end, with when they told it (the
        monitor's clock), in that order."""
        return MappingProxyType(self._gone)

    @property
    def reached(self) -> Mapping[str, Reached]:
        """The nodes a command reached for the job's ranks (``distmon look``, ``--find`` with
        ``--hosts`` or ``--slurm``) and how each fared, by host, as the command's host told."""
        return MappingProxyType(self._reached)

    def fared(self, reached: Iterable[Reached], t: float) -> None:
        """How nodes reached fared, as told at ``t`` (the latest telling of a node stands)."""
        for r in reached:
            if r.host in self._reached or len(self._reached) < MAX_REACHED:
                self._reached[r.host] = r
                self._reached_at[r.host] = t

    def found(self) -> dict[int, str]:
        """The job's ranks the eyes of nodes reached said they found, each with its node."""
        return {rank: host for host, r in self._reached.items() if r.state in (SEEN, NO_PYSPY) for rank in r.ranks}

    def found_since(self, t: float) -> set[int]:
        """The job's ranks the eyes of nodes reached said they found there, told at ``t`` or later:
        their reports are on their way (an eye writes a rank's first report once it has looked at it)."""
        return {rank for rank, host in self.found().items() if self._reached_at[host] >= t}

    def spoke(self, host: str) -> bool:
        """The eye on ``host`` spoke; whether it is its first word. At most :data:`MAX_EYES`
        nodes are kept, those heard most recently."""
        first = host not in self._eyes
        self._eyes[host] = None
        self._eyes.move_to_end(host)
        while len(self._eyes) > MAX_EYES:
            self._eyes.popitem(last=False)
        return first

    def read_links(self, host: str, links: list[Link], t: float) -> None:
        """A node's new reading of its links, read at ``t`` (the monitor's clock): the first
        sets what is usual there (a link always down says nothing), each later one says what
        changed since."""
        before = self._links.get(host)
        if before is None:
            if len(self._links) < MAX_EYES:
                self._links[host] = NodeLinks(t, tuple(links))
            return
        self._links[host] = before.then(t, links, changes(list(before.links), links, t))

    def ended_since(self, after: float) -> list[tuple[str, int, float]]:
        """The processes told gone at ``after`` or since: host, pid and when, the latest first."""
        found = []
        for (host, pid), t in reversed(self._gone.items()):
            if t < after:
                break
            found.append((host, pid, t))
        return found

    def saw_end(self, host: str, pid: int, t: float) -> None:
        """An eye told at ``t`` that process ``pid`` on ``host`` ended (the first telling
        stands), the latest :data:`MAX_GONE` kept."""
        if (host, pid) not in self._gone:
            self._gone[(host, pid)] = t
            while len(self._gone) > MAX_GONE:
                self._gone.popitem(last=False)


def silent_nodes(job: NodeFacts, now: float, overdue: bool = False) -> list[SilentNode]:
    """The nodes silent as a whole at ``now``: a relay not heard, not even its empty batch, with
    every rank last heard through it; or a relay overdue (not heard for two intervals:
    :func:`relay_interval`) with a rank behind it silent, whichever comes first: a rank whose
    last report came a batch before the others is silent a moment before its relay is, and its
    silence is the relay's; or two or more ranks of one host, straight to the monitor, last
    heard within an interval of each other, and none of that host's since. With ``overdue``,
    the moment before: a relay overdue, or such a host not heard for two of its intervals (its
    ranks' last reports come up to an interval apart, while a relay's ranks come in its batches
    and fall silent with it)."""
    c, limits = job.cols, job.limits
    watched = c.present & ~flagged(c, wire.FLAG_EXITED)
    silent = watched & (now - c.received >= limits.silent_after(c.interval))
    quiet = watched & (now - c.received >= limits.overdue_after(c.interval)) if overdue else silent
    nodes = []
    relayed = watched & (c.via >= 0)
    for i in distinct(c.via[relayed & quiet]).tolist():
        ranks = np.flatnonzero(relayed & (c.via == i))
        unheard = now - job.relay_heard[i]
        interval = relay_interval(c.interval[ranks])
        lost = unheard >= limits.silent_after(interval) and silent[ranks].all()
        if lost or (unheard >= limits.overdue_after(interval) and (overdue or silent[ranks].any())):
            relay = job.relays[i]
            nodes.append(SilentNode(relay.host, ranks, job.relay_heard[i], relay))
    direct = watched & (c.via < 0)
    for host in distinct(c.host[direct & quiet]).tolist():
        ranks = np.flatnonzero(direct & (c.host == host))
        heard = c.received[ranks]
        together = float(heard.max() - heard.min()) <= float(np.nanmax(c.interval[ranks])) + TOGETHER
        if len(ranks) > 1 and quiet[ranks].all() and together:
            nodes.append(SilentNode(job.host_name(host), ranks, float(heard.max()), None))
    return nodes


def relay_interval(intervals: F8) -> float:
    """The interval a relay whose ranks report at ``intervals`` is judged by: theirs, never
    less than :data:`RELAY_INTERVAL`."""
    known = intervals[~np.isnan(intervals)]
    return max(float(known.max()) if len(known) else RELAY_INTERVAL, RELAY_INTERVAL)


def blind_hosts(job: NodeFacts, now: float) -> set[str]:
    """The hosts whose eye is lost at ``now``: the relays there (a relay restarted is another)
    all overdue by the job's longest report interval. What that eye saw before is no evidence
    of what their processes do now. The monitor's own host has no relay: its eye is its own."""
    heard = np.asarray(job.relay_heard, dtype=np.float64)
    if not len(heard):
        return set()
    present = job.cols.present
    interval = relay_interval(job.cols.interval[present])
    quiet = now - heard >= job.limits.overdue_after(interval)
    if not quiet.any():
        return set()
    relays = job.relays
    return {relays[i].host for i in np.flatnonzero(quiet).tolist()} - {
        relays[i].host for i in np.flatnonzero(~quiet).tolist()
    }
