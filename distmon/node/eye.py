"""The eye on one node: it looks at the processes the monitor asks about and takes the stacks
it wants, and hands over what it saw since it last said (:class:`~distmon.node.looks.Looks`).

A relay runs one for its node, the monitor one for its own host. Both only ask and take:
the looks are taken on the prober's thread, the stacks on py-spy's, so a relay never waits on
a process, and the stacks a node takes are capped (:data:`STACKS_PER_SECOND`). Told to find a
job's ranks (:class:`~distmon.node.found_ranks.FoundRanks`), it also writes their reports for them.
"""

from __future__ import annotations

import socket
import time

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.node.found_ranks import FoundRanks
from distmon.node.links import Link, read_links
from distmon.node.looks import Looks, Reaching, Taken, Wanted
from distmon.node.prober import Prober
from distmon.node.pyspy import OutsideStack, StackTaker

STACKS_PER_SECOND = 2.0
"""Stacks a node's eye starts taking a second at most, whatever it is asked: each pauses its
process for a moment."""
MAX_PENDING = 64
"""Stacks asked for and not yet handed over, at most."""
LINKS_EVERY = 0.5
"""Seconds between two readings of the node's network links (a few dozen sysfs files): how
closely a link that drops and comes back is timed."""


class NodeEye:
    def __init__(
        self, host: str | None = None, find: bool = False, pick: int | None = None, job: str | None = None
    ) -> None:
        self.host = host or socket.gethostname()
        self._host_hash = wire.name_hash(self.host)
        self.found = FoundRanks(self.host, pick, job=job) if find else None
        """The ranks found on this node, when told to find them (``pick``: a pid of the job,
        ``job``: its id; every job otherwise)."""
        self.prober = Prober()
        self._taker = StackTaker()
        self._pending: dict[tuple[int, float], Wanted] = {}
        """Stacks asked for, not yet handed over, by (pid, since)."""
        self._started: set[tuple[int, float]] = set()
        self._budget = 0.0
        self._refilled = time.monotonic()
        self.counts = {"looks": 0, "stacks": 0}
        self._links: list[Link] | None = None
        """The links as last handed over."""
        self._links_read = -LINKS_EVERY
        self.reaching: Reaching | None = None
        """The other nodes a command on this host reaches, where it does: how they fare goes
        with this eye's looks."""

    def want(self, wanted: list[Wanted]) -> None:
        """Look at the processes of this node that ``wanted`` names, and take the stacks asked
        for (those of other nodes are another eye's)."""
        mine = [w for w in wanted if w.host == self.host]
        self.prober.ask([(w.pid, w.tid, w.reporter) for w in mine])
        for w in mine:
            if w.since is not None and (w.pid, w.since) not in self._pending and len(self._pending) < MAX_PENDING:
                self._pending[(w.pid, w.since)] = w

    def reporting(self, headers: npt.NDArray[np.void]) -> None:
        """The ranks that report on this node, by their frames' headers (those of other nodes,
        passing through, are another eye's; those found from outside, this eye's own reports,
        tell their end themselves): each one's process is watched for its end until it says its
        last words, so that one that dies without a word (SIGKILL, the OOM killer) is told gone
        at once (:meth:`~distmon.node.prober.Prober.watch`)."""
        mine = headers[(headers["host"] == self._host_hash) & ~wire.found_in_flags(headers["flags"])]
        if not len(mine):
            return
        said = (mine["flags"] & wire.FLAG_EXITED) > 0
        self.prober.unwatch(mine["pid"][said].tolist())
        self.prober.watch(mine["pid"][~said].tolist())

    def take(self) -> Looks:
        """What this eye saw since the last call: the looks, and the stacks taken meanwhile
        (each handed over once)."""
        samples = self.prober.take()
        stacks = [Taken(pid, since, stack) for (pid, since), stack in self._stacks_done()]
        self.counts["looks"] += len(samples)
        self.counts["stacks"] += len(stacks)
        links = self._links_changed()
        reached = self.reaching.news() if self.reaching is not None else []
        return Looks(self.host, samples, stacks, links, self._links_read if links is not None else None, reached)

    def reports(self) -> list[bytes]:
        """The reports written for the ranks found since the last call, as frames; the ranks
        whose stacks stand still are looked at closely from now on."""
        if self.found is None:
            return []
        self.prober.ask([(pid, None, None) for pid in self.found.still()])
        return self.found.take()

    def close(self) -> None:
        if self.found is not None:
            self.found.close()

    def _links_changed(self) -> list[Link] | None:
        """The node's network links, read every :data:`LINKS_EVERY`, where they changed since
        last handed over (the first reading too); None otherwise."""
        now = time.monotonic()
        if now - self._links_read < LINKS_EVERY:
            return None
        self._links_read = now
        links = read_links()
        if links == self._links:
            return None
        self._links = links
        return links

    def _stacks_done(self) -> list[tuple[tuple[int, float], OutsideStack]]:
        now = time.monotonic()
        self._budget = min(STACKS_PER_SECOND, self._budget + (now - self._refilled) * STACKS_PER_SECOND)
        self._refilled = now
        done = []
        for key, w in list(self._pending.items()):
            if key not in self._started:
                if self._budget < 1.0:
                    continue
                self._budget -= 1.0
                self._started.add(key)
            result = self._taker.request(key[0], key[1], take=True, stopped=w.stopped, tid=w.tid, thread=w.thread)
            if result is not None:
                done.append((key, result))
                del self._pending[key]
                self._started.discard(key)
        return done
